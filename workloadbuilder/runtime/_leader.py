"""Lease-based leader election (``coordination.k8s.io/v1`` Lease) through the Cluster
protocol, with client-go's semantics: a lease is free when its holder has not renewed it
within ``leaseDurationSeconds``; the leader renews every ``retry_period`` and gives up when it
could not renew for ``renew_deadline``."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any

from workloadbuilder.cluster import Cluster
from workloadbuilder.errors import AlreadyExists, ApiError, Conflict, NotFound
from workloadbuilder.runtime._clock import Clock, WallClock

__all__ = ["LeaderElector"]

_log = logging.getLogger(__name__)


def _micro(t: float) -> str:
    return datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(value: Any) -> float | None:
    if not value:
        return None
    text = str(value).replace("Z", "+00:00")
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


class LeaderElector:
    """Acquire and keep one Lease (``name`` in ``namespace``) as ``identity``.

    :meth:`acquire` blocks until we lead, :meth:`keep` renews until the lease is lost,
    :meth:`release` hands it over on a graceful stop; :attr:`leading` says where we are."""

    def __init__(
        self,
        cluster: Cluster,
        *,
        identity: str,
        name: str = "workloadbuilder-scheduler",
        namespace: str = "kube-system",
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Clock | None = None,
    ) -> None:
        self.cluster = cluster
        self.identity = identity
        self.name = name
        self.namespace = namespace
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.clock: Clock = clock or WallClock()
        self.leading = False

    async def try_acquire_or_renew(self) -> bool:
        """One attempt; True when we hold the lease afterwards."""
        now = self.clock.now()
        try:
            lease = await self.cluster.get("Lease", self.name, self.namespace)
        except NotFound:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {
                    "holderIdentity": self.identity,
                    "leaseDurationSeconds": int(self.lease_duration),
                    "acquireTime": _micro(now),
                    "renewTime": _micro(now),
                    "leaseTransitions": 0,
                },
            }
            try:
                await self.cluster.create(body, self.namespace)
            except (AlreadyExists, Conflict):
                return False
            return True
        assert isinstance(lease, dict)
        spec = dict(lease.get("spec") or {})
        holder = spec.get("holderIdentity") or ""
        renewed = _parse(spec.get("renewTime")) or 0.0
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        if holder and holder != self.identity and renewed + duration > now:
            return False
        if holder != self.identity:
            spec["acquireTime"] = _micro(now)
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (1 if holder else 0)
        spec["holderIdentity"] = self.identity
        spec["leaseDurationSeconds"] = int(self.lease_duration)
        spec["renewTime"] = _micro(now)
        try:
            await self.cluster.update({**lease, "spec": spec})
        except (Conflict, NotFound):
            return False
        return True

    async def acquire(self) -> None:
        """Block until we are the leader."""
        while True:
            try:
                if await self.try_acquire_or_renew():
                    self.leading = True
                    _log.info("became leader (%s)", self.identity)
                    return
            except (ApiError, OSError) as e:
                _log.warning("leader election: %s", e)
            await self.clock.sleep(self.retry_period)

    async def keep(self) -> None:
        """Renew until renewal fails for ``renew_deadline``; then return (leadership lost)."""
        last_ok = self.clock.now()
        while True:
            await self.clock.sleep(self.retry_period)
            try:
                ok = await self.try_acquire_or_renew()
            except (ApiError, OSError) as e:
                _log.warning("lease renewal failed: %s", e)
                ok = False
            if ok:
                last_ok = self.clock.now()
            elif self.clock.now() - last_ok >= self.renew_deadline:
                self.leading = False
                _log.error("lost the lease %s/%s", self.namespace, self.name)
                return

    async def release(self) -> None:
        """Give the lease up (clear the holder) so a successor need not wait."""
        if not self.leading:
            return
        self.leading = False
        try:
            lease = await self.cluster.get("Lease", self.name, self.namespace)
            assert isinstance(lease, dict)
            spec = dict(lease.get("spec") or {})
            if spec.get("holderIdentity") != self.identity:
                return
            spec["holderIdentity"] = ""
            spec["leaseDurationSeconds"] = 1
            await self.cluster.update({**lease, "spec": spec})
        except (ApiError, OSError) as e:
            _log.info("releasing the lease failed: %s", e)
        await asyncio.sleep(0)
