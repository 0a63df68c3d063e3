"""Feeds: the SDK's :class:`~workloadbuilder.cluster.Informer` (list, then watch from the
list's resourceVersion; relist diffed on ``Gone``) turned into one synchronous handler per
kind, so a component's state (the scheduler's cache) is only ever changed when it yields.

The initial list is handed over as one ``SYNC`` (in creation order, which becomes first-seen
order); afterwards every add/update/delete arrives as ``ADDED``/``MODIFIED``/``DELETED``.
``events`` counts what was handled, which lets a component's ``sync()`` detect quiescence
(see :func:`settle`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

from workloadbuilder.cluster import Cluster, Informer, KubeObject, ResourceInfo, resource_info
from workloadbuilder.errors import Forbidden, NotFound

__all__ = ["Feed", "Handler", "probe_feeds", "settle"]

_log = logging.getLogger(__name__)

#: handler(event_type, object); event_type is ADDED/MODIFIED/DELETED, or SYNC with the full
#: initial list
Handler = Callable[[str, Any], None]


class Feed:
    """One kind, from an informer into a handler."""

    def __init__(
        self,
        cluster: Cluster,
        kind: str | ResourceInfo,
        handler: Handler,
        *,
        optional: bool = False,
        order: Callable[[KubeObject], Any] | None = None,
    ) -> None:
        self.cluster = cluster
        self.info = resource_info(kind)
        self.handler = handler
        self.optional = optional
        self.order = order
        self.available = True
        #: incremented for every event handled
        self.events = 0
        self.informer: Informer | None = None
        #: an optional kind was probed (:meth:`probe`), and what its probe raised
        self._probed = False
        self._probe_error: Exception | None = None

    async def probe(self) -> None:
        """For an optional kind: list one object to learn whether it is served and allowed
        (``available``). :meth:`start` probes by itself unless this ran before; an error
        other than not served / forbidden is kept and raised by :meth:`start`, so probing
        feeds together (:func:`probe_feeds`) fails where starting them one by one would."""
        if not self.optional or self._probed:
            return
        self._probed = True
        try:
            await self.cluster.list(self.info, limit=1)
        except NotFound as e:
            _log.info("%s not served (%s); not watching it", self.info.kind, e)
            self.available = False
        except Forbidden as e:
            # served but not allowed: a missing RBAC rule, not a cluster without the API.
            # Say so loudly: without this kind, grouped pods would wait forever.
            _log.warning(
                "not allowed to list %s (%s); not watching it: grant list and watch on %s "
                "to the scheduler's identity (see examples/deploy/scheduler/clusterrole.yaml)",
                self.info.kind,
                e,
                self.info.plural,
            )
            self.available = False
        except Exception as e:
            self._probe_error = e

    async def start(self) -> None:
        """Start the informer, wait for its first list, hand it over as one SYNC."""
        await self.probe()
        if self._probe_error is not None:
            error, self._probe_error, self._probed = self._probe_error, None, False
            raise error
        if not self.available:
            return
        inf = Informer(self.cluster, self.info)
        self.informer = inf
        await inf.start()
        await inf.wait_synced()
        # no await between reading the cache and registering the handlers: nothing is missed
        items = inf.list()
        if self.order is not None:
            items.sort(key=self.order)
        self.events += 1
        self.handler("SYNC", items)
        inf.add_handler(on_add=self._add, on_update=self._update, on_delete=self._delete)

    def _call(self, kind: str, obj: KubeObject) -> None:
        self.events += 1
        try:
            self.handler(kind, obj)
        except Exception:  # a bad object must not stop the component
            _log.exception("handling %s %s failed", kind, self.info.kind)

    def _add(self, obj: KubeObject) -> None:
        self._call("ADDED", obj)

    def _update(self, old: KubeObject, new: KubeObject) -> None:
        self._call("MODIFIED", new)

    def _delete(self, obj: KubeObject) -> None:
        self._call("DELETED", obj)

    async def stop(self) -> None:
        """Stop the informer."""
        if self.informer is not None:
            await self.informer.stop()
            self.informer = None


async def probe_feeds(feeds: Sequence[Feed]) -> None:
    """Probe the optional feeds' kinds together (one round trip instead of one per kind,
    before they are started one by one): see :meth:`Feed.probe`."""
    await asyncio.gather(*(f.probe() for f in feeds if f.optional))


async def settle(feeds: Sequence[Feed], *, quiet_rounds: int = 5, max_rounds: int = 1000) -> None:
    """Yield to the event loop until no feed handled anything for ``quiet_rounds`` rounds
    in a row (bounded by ``max_rounds``: a busy cluster never goes quiet)."""
    last, stable, rounds = -1, 0, 0
    while stable < quiet_rounds and rounds < max_rounds:
        rounds += 1
        total = sum(f.events for f in feeds)
        if total == last:
            stable += 1
        else:
            last, stable = total, 0
        await asyncio.sleep(0)
