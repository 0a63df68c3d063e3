"""A minimal reflector: list, then watch from the list's resourceVersion; relist on ``Gone``;
resume after the watch ends. Every event is handed synchronously to one handler, so the
scheduler's cache is only ever changed between cycles."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from workloadbuilder.cluster import Cluster, KubeObject, ResourceInfo, resource_info
from workloadbuilder.errors import ApiError, Forbidden, Gone, NotFound

__all__ = ["Reflector"]

_log = logging.getLogger(__name__)

#: handler(event_type, object); event_type is ADDED/MODIFIED/DELETED, or SYNC with the full
#: list of objects (a relist: the handler drops what is no longer there)
Handler = Callable[[str, Any], None]


def _rv(obj: KubeObject) -> str | None:
    if isinstance(obj, dict):
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        return str(rv) if rv else None
    return obj.metadata.resource_version


class Reflector:
    """Keeps one kind flowing into a handler."""

    def __init__(
        self,
        cluster: Cluster,
        kind: str | ResourceInfo,
        handler: Handler,
        *,
        optional: bool = False,
        page_size: int = 500,
        watch_timeout: float = 300.0,
    ) -> None:
        self.cluster = cluster
        self.info = resource_info(kind)
        self.handler = handler
        self.optional = optional
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.resource_version: str | None = None
        self.available = True
        #: incremented for every event handled (lets ``Scheduler.sync`` see quiescence)
        self.events = 0

    async def list(self) -> None:
        """List everything (paged) and hand it over as one SYNC."""
        items: list[KubeObject] = []
        token: str | None = None
        while True:
            try:
                page = await self.cluster.list(
                    self.info, limit=self.page_size, continue_token=token
                )
            except (NotFound, Forbidden) as e:
                if self.optional:
                    _log.info("%s not served (%s); not watching it", self.info.kind, e)
                    self.available = False
                    return
                raise
            items.extend(page.items)
            token = page.continue_token
            if not token:
                self.resource_version = page.resource_version
                break
        self.events += 1
        self.handler("SYNC", items)

    async def run(self) -> None:
        """Watch forever (cancel to stop)."""
        if not self.available:
            return
        failures = 0
        while True:
            try:
                if self.resource_version is None:
                    await self.list()
                stream = self.cluster.watch(
                    self.info,
                    resource_version=self.resource_version,
                    allow_bookmarks=True,
                    timeout_seconds=self.watch_timeout,
                )
                async for ev in stream:
                    failures = 0
                    if ev.type == "BOOKMARK":
                        self.resource_version = _rv(ev.object) or self.resource_version
                        continue
                    if ev.type == "ERROR":
                        self.resource_version = None
                        break
                    self.resource_version = _rv(ev.object) or self.resource_version
                    self.events += 1
                    try:
                        self.handler(ev.type, ev.object)
                    except Exception:  # a bad object must not stop the scheduler
                        _log.exception("handling %s %s failed", ev.type, self.info.kind)
            except asyncio.CancelledError:
                raise
            except Gone:
                self.resource_version = None
            except (TimeoutError, ApiError, OSError) as e:
                failures += 1
                delay = min(30.0, 0.5 * 2 ** min(failures, 6))
                _log.warning("watch %s failed (%s); retrying in %.1fs", self.info.kind, e, delay)
                await asyncio.sleep(delay)
