"""``MemoryCluster``: the facade that wires the in-process API server together."""

from __future__ import annotations

import random
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Literal

from workloadbuilder.cluster._memory import _admission as adm
from workloadbuilder.cluster._memory._common import info_of, timestamp_clock
from workloadbuilder.cluster._memory._lifecycle import Lifecycle
from workloadbuilder.cluster._memory._reads import Reads
from workloadbuilder.cluster._memory._storage import Storage
from workloadbuilder.cluster._memory._strategy import Strategy
from workloadbuilder.cluster._memory._subresources import EventRecorder, PodBinding, PodEviction
from workloadbuilder.cluster._memory._writes import Writes, ingest
from workloadbuilder.cluster._protocol import (
    KubeObject,
    ObjectList,
    PatchType,
    Preconditions,
    PropagationPolicy,
    ResourceInfo,
    WatchEvent,
    resource_info,
)
from workloadbuilder.validation import FeatureGates

__all__ = ["MemoryCluster"]


class MemoryCluster:
    """An in-process API server: the embedded default :class:`Cluster` and the simulator's
    substrate.

    ``clock`` gives timestamps (seconds since the epoch; the simulator passes a virtual
    clock). ``admission`` enables defaulting, Priority admission, PodGroup protection and the
    SDK's validation of our kinds (``gates`` are the validation feature gates).
    ``history`` is the number of events kept per kind for watches to resume from.
    ``bookmark_interval`` is the idle time (event-loop seconds) after which a watch sends a
    BOOKMARK. ``seed`` makes generated names and uids reproducible (``None``: random).
    ``share_objects=True`` returns the stored dicts themselves from reads and watches instead
    of copies (faster fan-out; callers must then treat every returned dict as read-only).
    ``claim_controller`` runs kube-controller-manager's ResourceClaim controller (claims from
    templates for pods and PodGroups, released when their consumers are done);
    ``pv_controller`` its PersistentVolume controller, with an instant stand-in for the
    external provisioners (see ``_memory/_volumes.py``).
    ``event_ttl`` is how long an Event (core/v1 or events.k8s.io/v1) is kept after its last
    write, in seconds of ``clock``, as kube-apiserver's ``--event-ttl`` (default 1 h);
    expired Events are deleted (watchers see ``DELETED``) at the next call of any verb.
    ``None`` keeps them forever.
    """

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.time,
        admission: bool = True,
        gates: FeatureGates | None = None,
        history: int = 10000,
        bookmark_interval: float = 60.0,
        seed: int | None = 0,
        share_objects: bool = False,
        claim_controller: bool = True,
        pv_controller: bool = True,
        event_ttl: float | None = 3600.0,
    ) -> None:
        now = timestamp_clock(clock)
        gates = gates if gates is not None else FeatureGates()
        self._storage = storage = Storage(history, ttl=event_ttl, clock=clock)
        self._expire = storage.expire
        lifecycle = Lifecycle(
            storage,
            now,
            pod_group_protection=admission,
            claim_controller=claim_controller,
            pv_controller=pv_controller,
        )
        strategy = Strategy(storage, admission=admission, gates=gates)
        self._reads = Reads(
            storage, share_objects=share_objects, bookmark_interval=bookmark_interval
        )
        self._writes = writes = Writes(
            storage, strategy, lifecycle, now=now, rng=random.Random(seed)
        )
        lifecycle.claims.create = writes.create
        lifecycle.volumes.create = writes.create
        self._binding = PodBinding(storage, lifecycle, now)
        self._eviction = PodEviction(storage, lifecycle)
        self._events = EventRecorder(writes, now)
        self._out = self._reads.out
        self._bootstrap()

    def _bootstrap(self) -> None:
        create = self._writes.create
        for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
            create(
                resource_info("Namespace"),
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                None,
            )
        for name, value in adm.SYSTEM_PRIORITY_CLASSES.items():
            create(
                resource_info("PriorityClass"),
                {
                    "apiVersion": "scheduling.k8s.io/v1",
                    "kind": "PriorityClass",
                    "metadata": {"name": name},
                    "value": value,
                    "preemptionPolicy": "PreemptLowerPriority",
                    "description": "Used for system critical pods that must run in the cluster.",
                },
                None,
            )

    @property
    def resource_version(self) -> str:
        """The newest resourceVersion (the counter shared by every kind)."""
        return str(self._storage.rv)

    # ------------------------------------------------------------------ reads

    async def get(
        self, kind: str | ResourceInfo, name: str, namespace: str | None = None
    ) -> KubeObject:
        """Read one object."""
        self._expire()
        return self._reads.get(info_of(kind), name, namespace)

    async def list(
        self,
        kind: str | ResourceInfo,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> ObjectList:
        """List objects (sorted by namespace/name), one page at a time when ``limit`` is given.

        Continue tokens carry the last key; later pages read the current state (not a
        snapshot at the first page's resourceVersion as etcd does)."""
        self._expire()
        return self._reads.list(
            info_of(kind),
            namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            limit=limit,
            continue_token=continue_token,
        )

    def watch(
        self,
        kind: str | ResourceInfo,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        allow_bookmarks: bool = True,
        timeout_seconds: float | None = None,
    ) -> AsyncIterator[WatchEvent]:
        """Stream changes after ``resource_version`` (``None``/``"0"``: synthetic ADDED events
        for the current state first). Raises ``Gone`` when the version is older than the
        retained history."""
        self._expire()
        return self._reads.watch(
            kind,
            namespace,
            resource_version=resource_version,
            label_selector=label_selector,
            field_selector=field_selector,
            allow_bookmarks=allow_bookmarks,
            timeout_seconds=timeout_seconds,
        )

    # ------------------------------------------------------------------ writes

    async def create(
        self,
        obj: KubeObject,
        namespace: str | None = None,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
    ) -> KubeObject:
        """Create an object; returns what was stored (defaults and server fields applied)."""
        self._expire()
        info, doc = ingest(obj)
        return self._out(self._writes.create(info, doc, namespace, dry_run=dry_run), info)

    async def update(
        self, obj: KubeObject, *, dry_run: bool = False, field_manager: str | None = None
    ) -> KubeObject:
        """Replace an object; a stale ``metadata.resourceVersion`` raises ``Conflict``.
        The status of kinds with a status subresource is kept."""
        self._expire()
        info, doc = ingest(obj)
        rec = self._writes.update(
            info, doc, status_only=False, dry_run=dry_run, manager=field_manager
        )
        return self._out(rec, info)

    async def update_status(
        self, obj: KubeObject, *, field_manager: str | None = None
    ) -> KubeObject:
        """Replace the status subresource (everything else is kept)."""
        self._expire()
        info, doc = ingest(obj)
        rec = self._writes.update(info, doc, status_only=True, dry_run=False, manager=field_manager)
        return self._out(rec, info)

    async def patch(
        self,
        kind: str | ResourceInfo,
        name: str,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        namespace: str | None = None,
        *,
        patch_type: PatchType = "merge",
        subresource: str | None = None,
        field_manager: str | None = None,
        force: bool = False,
        dry_run: bool = False,
    ) -> KubeObject:
        """Patch an object or its ``status``: JSON merge (RFC 7386), JSON patch (RFC 6902),
        strategic merge (simplified) or server-side apply (simplified field ownership)."""
        self._expire()
        info = info_of(kind)
        rec = self._writes.patch(
            info,
            name,
            patch,
            namespace,
            patch_type=patch_type,
            subresource=subresource,
            field_manager=field_manager,
            force=force,
            dry_run=dry_run,
        )
        return self._out(rec, info)

    async def delete(
        self,
        kind: str | ResourceInfo,
        name: str,
        namespace: str | None = None,
        *,
        propagation_policy: PropagationPolicy | None = None,
        preconditions: Preconditions | None = None,
        grace_period_seconds: int | None = None,
    ) -> None:
        """Delete an object; finalizers keep it (with a ``deletionTimestamp``) until removed.
        Dependents are garbage-collected at once (Background), before the owner goes away
        (Foreground) or orphaned (Orphan; the default for ``batch/v1`` Jobs)."""
        self._expire()
        self._writes.delete(
            info_of(kind),
            name,
            namespace,
            propagation_policy=propagation_policy,
            preconditions=preconditions,
        )

    # ------------------------------------------------------------------ subresources

    async def bind(
        self, namespace: str, pod_name: str, node_name: str, *, pod_uid: str | None = None
    ) -> None:
        """``pods/binding``: set ``spec.nodeName`` and ``PodScheduled=True``; ``Conflict`` when
        the pod is already bound, is being deleted, or ``pod_uid`` does not match."""
        self._expire()
        self._binding.bind(namespace, pod_name, node_name, pod_uid)

    async def evict(
        self, namespace: str, pod_name: str, *, grace_period_seconds: int | None = None
    ) -> None:
        """``policy/v1`` Eviction: pending and terminal pods are deleted at once; otherwise a
        matching PodDisruptionBudget must allow a disruption (``TooManyRequests`` if not); the
        budget is computed from the pods now and the PDB's status is not updated."""
        self._expire()
        self._eviction.evict(namespace, pod_name)

    async def create_event(
        self,
        *,
        namespace: str,
        involved_object: Mapping[str, Any],
        reason: str,
        message: str,
        type: Literal["Normal", "Warning"] = "Normal",
        reporting_component: str = "workloadbuilder",
    ) -> None:
        """Record a core/v1 Event about ``involved_object``."""
        self._expire()
        self._events.record(namespace, involved_object, reason, message, type, reporting_component)

    # ------------------------------------------------------------------ close, conveniences

    async def close(self) -> None:
        """End every open watch (their iterators finish)."""
        self._storage.close()

    async def __aenter__(self) -> MemoryCluster:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def count(self, kind: str | ResourceInfo, namespace: str | None = None) -> int:
        """Number of stored objects of a kind (in one namespace, or all)."""
        self._expire()
        return self._storage.kind(info_of(kind)).count(namespace)
