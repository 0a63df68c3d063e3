"""Status and events: ``PodScheduled=False`` on pods, ``PodGroupInitiallyScheduled`` on
PodGroups, and ``Scheduled`` / ``FailedScheduling`` Events (kube-scheduler's status updates
and event recorder)."""

from __future__ import annotations

import asyncio
import heapq
import logging
import re
from collections import deque
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from workloadbuilder.api import CompositePodGroup, to_dict
from workloadbuilder.cluster import Cluster
from workloadbuilder.errors import ApiError, NotFound
from workloadbuilder.runtime import Clock
from workloadbuilder.scheduler._cache import GroupInfo, PodInfo
from workloadbuilder.scheduler._config import SchedulerConfig
from workloadbuilder.scheduler._metrics import EVENTS_DROPPED, EVENTS_WRITTEN
from workloadbuilder.scheduler._tasks import Tasks

__all__ = [
    "CONDITION_COMPOSITE_SCHEDULED",
    "CONDITION_INITIALLY_SCHEDULED",
    "REASON_INVALID",
    "REASON_SCHEDULED",
    "REASON_SCHEDULER_ERROR",
    "REASON_UNSCHEDULABLE",
    "StatusWriter",
]

_log = logging.getLogger(__name__)

CONDITION_INITIALLY_SCHEDULED = "PodGroupInitiallyScheduled"
CONDITION_COMPOSITE_SCHEDULED = "CompositePodGroupInitiallyScheduled"
REASON_SCHEDULED = "Scheduled"
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_SCHEDULER_ERROR = "SchedulerError"
REASON_INVALID = "Invalid"
_MAX_MESSAGE = 32768


def _rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_NUMBER = re.compile(r"\d+")
_PARTS = re.compile(r"[;,:] ")


def _wording(message: str) -> tuple[str, ...]:
    """``message`` with every number replaced, as the sorted set of its clauses: two
    explanations of equal wording differ only in counts (nodes available, pods that fit,
    node names' indexes) and in the order of their clauses (blockers are listed by count)."""
    return tuple(sorted(set(_PARTS.split(_NUMBER.sub("#", message)))))


#: a held-back explanation: ("Pod", PodInfo) or ("PodGroup", GroupInfo), reason, message
_Held = tuple[str, Any, str, str]
#: a queued event: namespace, pod name, pod uid, type, reason, node (Scheduled) or message,
#: and the reporting component
_QueuedEvent = tuple[str, str, str, str, str, str, str]


class StatusWriter:
    """Writes conditions and events in the background, once per distinct message."""

    def __init__(
        self, cluster: Cluster, config: SchedulerConfig, clock: Clock, tasks: Tasks
    ) -> None:
        self.cluster = cluster
        self.config = config
        self.clock = clock
        self.tasks = tasks
        #: PodGroup condition last sent per group (the watch may not show it yet)
        self.sent_group: dict[tuple[str, str], tuple[str, str, str]] = {}
        #: CompositePodGroup condition last sent per composite
        self.sent_composite: dict[tuple[str, str], tuple[str, str, str]] = {}
        #: events waiting for a writer: (namespace, name, uid, type, reason, text) -- the
        #: pod's own strings, never its PodInfo (a deleted pod's info must not live on in a
        #: backlog); ``text`` is the node of a ``Scheduled`` event, else the message
        self._event_queue: deque[_QueuedEvent] = deque()
        self._event_writers = 0
        #: bindings waiting for room in the event queue (see :meth:`scheduled`)
        self._room: deque[asyncio.Future[None]] = deque()
        #: bindings in flight (the scheduler sets this): while there are, the event writers
        #: follow the backlog instead of taking every slot (:meth:`event_writers_limit`)
        self.binds_in_flight: Callable[[], int] = lambda: 0
        #: whether placed pods wait for a bind slot (the scheduler sets this): then the
        #: events wait too, until the queue is half full (:meth:`event_writers_limit`)
        self.binds_waiting: Callable[[], bool] = lambda: False
        #: when the condition in ``sent_group`` was sent (clock time)
        self._group_sent_at: dict[tuple[str, str], float] = {}
        #: explanations held back by ``status_refresh_interval``: key -> (due, what);
        #: the heap orders the keys by due time (stale entries are skipped)
        self._held: dict[tuple[str, str, str], tuple[float, _Held]] = {}
        self._held_heap: list[tuple[float, int, tuple[str, str, str]]] = []
        self._held_seq = 0
        #: whether a held pod / group is still the cache's and still waiting (the
        #: scheduler sets these; a held explanation of a pod bound meanwhile is dropped)
        self.pod_current: Callable[[PodInfo], bool] = lambda p: not p.scheduled
        self.group_current: Callable[[GroupInfo], bool] = lambda g: True
        #: pod and PodGroup condition writes waiting for a writer (``status_concurrency``):
        #: PodGroups going True first, then the others in order
        self._status_first: deque[Callable[[], Awaitable[None]]] = deque()
        self._status_rest: deque[Callable[[], Awaitable[None]]] = deque()
        self._status_writers = 0
        #: events dropped because ``SchedulerConfig.max_queued_events`` were already queued
        self.events_dropped = 0
        #: the profiles' schedulerNames when the scheduler serves several (it sets this):
        #: then each profile reports its own events and preemptions under its name, as
        #: kube-scheduler's per-profile recorders do; else ``SchedulerConfig.component``
        self.profiles: frozenset[str] = frozenset()

    def reporter(self, scheduler_name: str | None) -> str:
        """Who reports an event about a pod of ``scheduler_name`` (or its preemption)."""
        if scheduler_name is not None and scheduler_name in self.profiles:
            return scheduler_name
        return self.config.component

    def reset(self) -> None:
        """Forget queued events of a previous start (maybe on another event loop)."""
        self._event_queue.clear()
        self._event_writers = 0
        for fut in self._room:
            fut.cancel()
        self._room.clear()
        self._status_first.clear()
        self._status_rest.clear()
        self._status_writers = 0

    # ---- bounded condition writes ----------------------------------------------------

    def _queue_status(self, send: Callable[[], Awaitable[None]], *, first: bool = False) -> None:
        """Queue a condition write. At most ``SchedulerConfig.status_concurrency`` are in
        flight, so that a burst of explanations (a backlog re-attempted after a node event)
        does not crowd out the bindings at the API server; each write checks when it is
        sent that it is still the latest for its object (a stale one is dropped)."""
        (self._status_first if first else self._status_rest).append(send)
        self._pump_status()

    @property
    def status_pending(self) -> int:
        """Condition writes queued or in flight."""
        return len(self._status_first) + len(self._status_rest) + self._status_writers

    def _pump_status(self) -> None:
        while self._status_writers < self.config.status_concurrency:
            if self._status_first:
                send = self._status_first.popleft()
            elif self._status_rest:
                send = self._status_rest.popleft()
            else:
                return
            self._status_writers += 1
            self.tasks.spawn(self._write_status(send))

    async def _write_status(self, send: Callable[[], Awaitable[None]]) -> None:
        try:
            await send()
        finally:
            self._status_writers -= 1
        self._pump_status()

    def forget_group(self, key: tuple[str, str]) -> None:
        """The PodGroup is gone."""
        self.sent_group.pop(key, None)
        self._group_sent_at.pop(key, None)
        self._held.pop(("PodGroup", *key), None)

    # ---- bounded refresh of explanations ---------------------------------------------

    def _hold(self, key: tuple[str, str, str], similar: bool, sent_at: float, what: _Held) -> bool:
        """Hold ``what`` back when it differs from what was sent at ``sent_at`` only in its
        numbers (``similar``) and that was less than ``status_refresh_interval`` ago: it is
        written when the interval has passed (:meth:`refresh_due`), the latest one held
        then. False (and nothing held for ``key`` any more): write it now."""
        interval = self.config.status_refresh_interval
        due = sent_at + interval
        if interval <= 0 or not similar or self.clock.now() >= due:
            self._held.pop(key, None)
            return False
        held = self._held.get(key)
        if held is None or held[0] != due:
            self._held_seq += 1
            heapq.heappush(self._held_heap, (due, self._held_seq, key))
        self._held[key] = (due, what)
        return True

    def next_refresh(self) -> float | None:
        """When the next held-back explanation is due (None: nothing held)."""
        heap = self._held_heap
        while heap:
            due, _, key = heap[0]
            held = self._held.get(key)
            if held is not None and held[0] == due:
                return due
            heapq.heappop(heap)
        return None

    def refresh_due(self) -> int:
        """Write the held-back explanations that are due, for pods and groups that still
        wait (see ``SchedulerConfig.status_refresh_interval``). Returns how many."""
        now = self.clock.now()
        heap = self._held_heap
        n = 0
        while heap and heap[0][0] <= now:
            due, _, key = heapq.heappop(heap)
            held = self._held.get(key)
            if held is None or held[0] != due:
                continue
            del self._held[key]
            kind, obj, reason, message = held[1]
            if kind == "Pod" and self.pod_current(obj):
                self._pod_failed_now(obj, reason, message)
                n += 1
            elif kind == "PodGroup" and self.group_current(obj):
                self._group_condition_now(obj, "False", reason, message)
                n += 1
        return n

    @property
    def held(self) -> int:
        """Explanations held back now."""
        return len(self._held)

    def forget_composite(self, key: tuple[str, str]) -> None:
        """The CompositePodGroup is gone."""
        self.sent_composite.pop(key, None)

    def composite_condition(
        self, cpg: CompositePodGroup, status: str, reason: str, message: str
    ) -> None:
        """Set ``CompositePodGroupInitiallyScheduled`` (terminal once True; never regresses)
        when ``SchedulerConfig.composite_status`` is on."""
        if not self.config.update_status or not self.config.composite_status:
            return
        key = (cpg.metadata.namespace or "default", cpg.metadata.name or "")
        message = message[:_MAX_MESSAGE]
        conds = cpg.status.conditions if cpg.status is not None else ()
        existing = next((c for c in conds if c.type == CONDITION_COMPOSITE_SCHEDULED), None)
        if existing is not None and existing.status == "True":
            return
        sent = self.sent_composite.get(key)
        if sent is not None and sent[0] == "True":
            return
        want = (status, reason, message)
        if (
            existing is not None
            and (
                existing.status,
                existing.reason or "",
                existing.message or "",
            )
            == want
        ):
            return
        if sent == want:
            return
        self.sent_composite[key] = want
        cond = self._condition(
            CONDITION_COMPOSITE_SCHEDULED, existing, status, reason, message, cpg.metadata
        )
        others = [to_dict(c) for c in conds if c.type != CONDITION_COMPOSITE_SCHEDULED]
        self.tasks.spawn(self._patch_status("CompositePodGroup", key[0], key[1], [*others, cond]))

    # ---- events ----------------------------------------------------------------------

    async def scheduled(self, p: PodInfo, node: str) -> None:
        """Queue the ``Scheduled`` event of a bound pod. Never dropped: when
        ``SchedulerConfig.max_queued_events`` already wait, this waits (the binding slot
        that calls it stays taken) until a writer has taken one, so bindings cannot run
        ahead of their events by more than the queue holds and the backlog stays bounded."""
        if not self.config.record_events:
            return
        while len(self._event_queue) >= self.config.max_queued_events:
            fut = asyncio.get_running_loop().create_future()
            self._room.append(fut)
            self._pump_events()
            await fut
        self._event_queue.append(
            (
                p.namespace,
                p.name,
                p.uid,
                "Normal",
                REASON_SCHEDULED,
                node,
                self.reporter(p.scheduler_name),
            )
        )
        self._pump_events()

    def _record(self, p: PodInfo, type_: str, reason: str, message: str) -> None:
        """Queue an explanation's event (``FailedScheduling``). Events are written in
        order by at most :meth:`event_writers_limit` writers; when
        ``SchedulerConfig.max_queued_events`` already wait (the API server takes events
        more slowly than the scheduler explains), this one is dropped and counted
        (``events_dropped``, ``scheduler_events_dropped_total``): a scheduling cycle does
        not wait for the API server, and the backlog cannot grow without bound."""
        if len(self._event_queue) >= self.config.max_queued_events:
            self.events_dropped += 1
            EVENTS_DROPPED.labels(reason=reason).inc()
            if self.events_dropped % 1000 == 1:
                _log.warning(
                    "%d events queued: event %s for %s/%s dropped (%d dropped so far)",
                    len(self._event_queue),
                    reason,
                    p.namespace,
                    p.name,
                    self.events_dropped,
                )
            return
        self._event_queue.append(
            (
                p.namespace,
                p.name,
                p.uid,
                type_,
                reason,
                message[:1024],
                self.reporter(p.scheduler_name),
            )
        )
        self._pump_events()

    @property
    def events_pending(self) -> int:
        """Events queued or being written."""
        return len(self._event_queue) + self._event_writers

    def event_writers_limit(self) -> int:
        """How many event writes may be in flight now. With no binding in flight and more
        events queued than bindings may be in flight, as many as bindings may be
        (``max(event_concurrency, bind_concurrency)``: a burst's backlog drains at the
        bindings' pace; a few events keep ``event_concurrency``). While bindings are in
        flight, until half of ``max_queued_events`` wait: none while placed pods wait for a
        bind slot (a burst is bound first, then its events follow: each write taken from
        the bindings costs the API server what a binding costs), ``event_concurrency``
        otherwise; beyond half, more, from ``event_concurrency`` up to that maximum when
        the queue is full, so a sustained stream's events keep pace with its bindings
        (which wait for room when the queue is full)."""
        cfg = self.config
        low = cfg.event_concurrency
        high = max(low, cfg.bind_concurrency)
        if not self.binds_in_flight():
            return high if len(self._event_queue) > high else low
        half = cfg.max_queued_events // 2
        over = len(self._event_queue) - half
        if over <= 0:
            return 0 if self.binds_waiting() else low
        return low + (high - low) * over // max(1, cfg.max_queued_events - half)

    def bindings_done(self) -> None:
        """No binding is in flight any more: start the event writes held back for them."""
        self._pump_events()

    def _pump_events(self) -> None:
        limit = self.event_writers_limit()
        queue = self._event_queue
        while self._event_writers < limit and queue:
            self._event_writers += 1
            self.tasks.spawn(self._write_queued(*queue.popleft()))
        room = self.config.max_queued_events - len(queue)
        while self._room and room > 0:
            fut = self._room.popleft()
            if not fut.done():
                fut.set_result(None)
                room -= 1

    async def _write_queued(
        self,
        namespace: str,
        name: str,
        uid: str,
        type_: str,
        reason: str,
        text: str,
        component: str | None = None,
    ) -> None:
        ref = {"apiVersion": "v1", "kind": "Pod", "name": name, "namespace": namespace, "uid": uid}
        if reason == REASON_SCHEDULED:
            text = f"Successfully assigned {namespace}/{name} to {text}"
        try:
            await self._event(namespace, ref, type_, reason, text, component)
        finally:
            self._event_writers -= 1
            self._pump_events()

    async def _event(
        self,
        namespace: str,
        ref: dict[str, Any],
        type_: str,
        reason: str,
        message: str,
        component: str | None = None,
    ) -> None:
        try:
            await self.cluster.create_event(
                namespace=namespace,
                involved_object=ref,
                reason=reason,
                message=message[:1024],
                type="Warning" if type_ == "Warning" else "Normal",
                reporting_component=component or self.config.component,
            )
            EVENTS_WRITTEN.labels(result="ok").inc()
        except (ApiError, OSError) as e:
            EVENTS_WRITTEN.labels(result="error").inc()
            _log.debug("event for %s/%s not recorded: %s", namespace, ref.get("name"), e)

    # ---- pods ------------------------------------------------------------------------

    def pod_failed(self, p: PodInfo, reason: str, message: str) -> None:
        """PodScheduled=False and a FailedScheduling event, once per distinct message; a
        message that differs from the one written shortly before only in its numbers is
        held back (``SchedulerConfig.status_refresh_interval``)."""
        message = message[:_MAX_MESSAGE]
        key = ("Pod", p.namespace, p.name)
        if p.last_failure == message:
            self._held.pop(key, None)
            return
        similar = (
            p.last_failure is not None
            and p.last_failure_reason == reason
            and _wording(p.last_failure) == _wording(message)
        )
        if self._hold(key, similar, p.last_failure_at, ("Pod", p, reason, message)):
            return
        self._pod_failed_now(p, reason, message)

    def _pod_failed_now(self, p: PodInfo, reason: str, message: str) -> None:
        p.last_failure = message
        p.last_failure_reason = reason
        p.last_failure_at = self.clock.now()
        if self.config.update_status:
            self._queue_status(lambda: self._patch_pod_condition(p, reason, message))
        if self.config.record_events:
            self._record(p, "Warning", "FailedScheduling", message)

    async def _patch_pod_condition(self, p: PodInfo, reason: str, message: str) -> None:
        if p.last_failure != message or not self.pod_current(p):
            return  # superseded while queued (a newer message, or scheduled meanwhile)
        now = _rfc3339(self.clock.now())
        conds = [dict(c) for c in p.conditions if c.get("type") != "PodScheduled"]
        old = next((c for c in p.conditions if c.get("type") == "PodScheduled"), None)
        ltt = old.get("lastTransitionTime") if old and old.get("status") == "False" else None
        conds.append(
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": reason,
                "message": message,
                "lastProbeTime": None,
                "lastTransitionTime": ltt or now,
            }
        )
        await self._patch_pod_status(p, {"conditions": conds}, "condition")

    # ---- preemption ------------------------------------------------------------------

    def preempt(
        self,
        victim: PodInfo,
        preemptor: str,
        on_failure: Callable[[], None] | None = None,
        *,
        profile: str | None = None,
    ) -> None:
        """Preempt a running pod: ``DisruptionTarget`` (``PreemptionByScheduler``), a
        ``Preempted`` event, then delete it (in the background). ``on_failure`` runs when
        the API refuses (e.g. no ``delete`` permission). ``profile``: the preemptor's
        schedulerName (with several profiles, the condition and event name it)."""
        self.tasks.spawn(self._preempt(victim, preemptor, on_failure, self.reporter(profile)))

    async def _preempt(
        self,
        p: PodInfo,
        preemptor: str,
        on_failure: Callable[[], None] | None,
        reporter: str | None = None,
    ) -> None:
        reporter = reporter or self.config.component
        node = p.node_name or p.assumed_node or ""
        conds = [dict(c) for c in p.conditions if c.get("type") != "DisruptionTarget"]
        conds.append(
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "PreemptionByScheduler",
                "message": f"{reporter}: preempting to accommodate {preemptor}",
                "lastTransitionTime": _rfc3339(self.clock.now()),
            }
        )
        try:
            await self.cluster.patch(
                "Pod",
                p.name,
                {"status": {"conditions": conds}},
                p.namespace,
                patch_type="merge",
                subresource="status",
                field_manager=self.config.component,
            )
            if self.config.record_events:
                text = f"Preempted by {preemptor} on node {node}"
                await self._event(p.namespace, p.ref(), "Normal", "Preempted", text, reporter)
            await self.cluster.delete("Pod", p.name, p.namespace)
        except NotFound:
            pass
        except (ApiError, OSError) as e:
            _log.warning("preemption of pod %s/%s failed: %s", p.namespace, p.name, e)
            if on_failure is not None:
                on_failure()

    def nominate(self, p: PodInfo, node: str) -> None:
        """``status.nominatedNodeName`` of a preemptor's pod (in the background)."""
        if self.config.update_status:
            self.tasks.spawn(self._nominate(p, node))

    async def _nominate(self, p: PodInfo, node: str) -> None:
        await self._patch_pod_status(p, {"nominatedNodeName": node}, "nominatedNodeName")

    async def _patch_pod_status(self, p: PodInfo, status: dict[str, Any], what: str) -> None:
        """Merge-patch a pod's status; a pod that is gone is fine, other failures are logged."""
        try:
            await self.cluster.patch(
                "Pod",
                p.name,
                {"status": status},
                p.namespace,
                patch_type="merge",
                subresource="status",
                field_manager=self.config.component,
            )
        except NotFound:
            pass
        except (ApiError, OSError) as e:
            _log.info("pod %s/%s %s not written: %s", p.namespace, p.name, what, e)

    # ---- pod groups ------------------------------------------------------------------

    def group_condition(self, g: GroupInfo, status: str, reason: str, message: str) -> None:
        """Set ``PodGroupInitiallyScheduled`` (terminal once True; never regresses). A False
        whose message differs from the one sent shortly before only in its numbers is held
        back (``SchedulerConfig.status_refresh_interval``)."""
        self._group_condition(g, status, reason, message, hold=True)

    def _group_condition_now(self, g: GroupInfo, status: str, reason: str, message: str) -> None:
        self._group_condition(g, status, reason, message, hold=False)

    def _group_condition(
        self, g: GroupInfo, status: str, reason: str, message: str, *, hold: bool
    ) -> None:
        pg = g.pod_group
        if pg is None or not self.config.update_status:
            return
        hkey = ("PodGroup", g.namespace, g.name)
        message = message[:_MAX_MESSAGE]
        conds = pg.status.conditions if pg.status is not None else ()
        existing = next((c for c in conds if c.type == CONDITION_INITIALLY_SCHEDULED), None)
        if existing is not None and existing.status == "True":
            self._held.pop(hkey, None)
            return  # terminal once True: never regress
        sent = self.sent_group.get(g.key)
        if sent is not None and sent[0] == "True":
            self._held.pop(hkey, None)
            return  # True is on its way (the watch has not shown it yet)
        want = (status, reason, message)
        if (
            existing is not None
            and (existing.status, existing.reason or "", existing.message or "") == want
        ) or sent == want:
            self._held.pop(hkey, None)
            return
        if hold and status == "False" and sent is not None:
            similar = sent[:2] == want[:2] and _wording(sent[2]) == _wording(message)
            at = self._group_sent_at.get(g.key, float("-inf"))
            if self._hold(hkey, similar, at, ("PodGroup", g, reason, message)):
                return
        self._held.pop(hkey, None)
        self.sent_group[g.key] = want
        self._group_sent_at[g.key] = self.clock.now()
        cond = self._condition(
            CONDITION_INITIALLY_SCHEDULED, existing, status, reason, message, pg.metadata
        )
        others = [to_dict(c) for c in conds if c.type != CONDITION_INITIALLY_SCHEDULED]
        conditions = [*others, cond]

        async def send() -> None:
            if self.sent_group.get(g.key) != want:
                return  # superseded while queued (a newer condition is on its way)
            await self._patch_status("PodGroup", g.namespace, g.name, conditions)

        self._queue_status(send, first=status == "True")

    def _condition(
        self,
        ctype: str,
        existing: Any,
        status: str,
        reason: str,
        message: str,
        meta: Any,
    ) -> dict[str, Any]:
        """A condition to send: ``lastTransitionTime`` kept while the status stays the same,
        ``observedGeneration`` when the object has a generation."""
        ltt = (
            existing.last_transition_time
            if existing is not None and existing.status == status
            else None
        ) or _rfc3339(self.clock.now())
        cond: dict[str, Any] = {
            "type": ctype,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": ltt,
        }
        if meta.generation is not None:
            cond["observedGeneration"] = meta.generation
        return cond

    async def _patch_status(
        self, kind: str, namespace: str, name: str, conds: list[dict[str, Any]]
    ) -> None:
        try:
            await self.cluster.patch(
                kind,
                name,
                {"status": {"conditions": conds}},
                namespace,
                patch_type="merge",
                subresource="status",
                field_manager=self.config.component,
            )
        except NotFound:
            pass
        except (ApiError, OSError) as e:
            _log.info("%s %s/%s status not written: %s", kind, namespace, name, e)
            sent = self.sent_group if kind == "PodGroup" else self.sent_composite
            sent.pop((namespace, name), None)
