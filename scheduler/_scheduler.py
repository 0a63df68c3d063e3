"""The scheduler: informers -> cache -> queue -> pod-group cycle -> bind + status."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from scheduler._cache import Cache, GroupInfo, PodInfo
from scheduler._clock import Clock, WallClock
from scheduler._config import SchedulerConfig
from scheduler._cycle import CycleResult, run_pod_group_cycle
from scheduler._framework import Framework, Placement
from scheduler._metrics import (
    ATTEMPT_DURATION,
    BIND_RESULTS,
    PENDING,
    POD_ATTEMPTS,
    PODGROUP_ATTEMPT_DURATION,
    PODGROUP_ATTEMPTS,
    SCHEDULED_PODS,
)
from scheduler._plugins import default_framework
from scheduler._queue import EntityKey, QueuedEntity, SchedulingQueue
from scheduler._snapshot import Snapshot, StaticFilterCache
from scheduler._watch import Feed
from workloadbuilder.api import CompositePodGroup, PodGroup, to_dict
from workloadbuilder.cluster import Cluster
from workloadbuilder.errors import ApiError, NotFound

__all__ = [
    "CONDITION_INITIALLY_SCHEDULED",
    "REASON_SCHEDULED",
    "REASON_SCHEDULER_ERROR",
    "REASON_UNSCHEDULABLE",
    "Scheduler",
]

_log = logging.getLogger(__name__)

CONDITION_INITIALLY_SCHEDULED = "PodGroupInitiallyScheduled"
REASON_SCHEDULED = "Scheduled"
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_SCHEDULER_ERROR = "SchedulerError"
_MAX_MESSAGE = 32768


def _creation_order(obj: Any) -> tuple[str, int, str]:
    """Sort key approximating creation order for an initial list (first-seen order)."""
    if isinstance(obj, dict):
        meta = obj.get("metadata") or {}
        ts, rv, name = meta.get("creationTimestamp"), meta.get("resourceVersion"), meta.get("name")
    else:
        m = obj.metadata
        ts, rv, name = m.creation_timestamp, m.resource_version, m.name
    rv_num = int(rv) if isinstance(rv, str) and rv.isdigit() else 0
    return (str(ts or ""), rv_num, str(name or ""))


def _rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Scheduler:
    """A workload-aware gang scheduler that talks to a cluster only through
    :class:`~workloadbuilder.cluster.Cluster`.

    Use :meth:`run` against a real cluster. The simulator (and tests) drive it step by step:
    :meth:`sync` folds every change seen so far into the cache and queue,
    :meth:`schedule_until_idle` runs cycles until nothing can be scheduled now (and waits for
    the bindings), :meth:`next_wakeup` says when a backoff or the periodic flush is due.
    """

    def __init__(
        self,
        cluster: Cluster,
        config: SchedulerConfig | None = None,
        *,
        clock: Clock | None = None,
        framework: Framework | None = None,
    ) -> None:
        self.cluster = cluster
        self.config = config or SchedulerConfig()
        self.clock: Clock = clock or WallClock()
        self.framework = framework or default_framework(
            gang_strategy=self.config.gang_scoring,
            single_strategy=self.config.single_scoring,
            score_resources=self.config.score_resources,
        )
        self.cache = Cache(self.config.scheduler_name)
        self.queue = SchedulingQueue(
            self.clock.now,
            initial_backoff=self.config.initial_backoff,
            max_backoff=self.config.max_backoff,
            max_in_unschedulable=self.config.max_in_unschedulable,
        )
        #: ``(namespace, podgroup)`` -> the last Unschedulable / SchedulerError message
        self.explanations: dict[tuple[str, str], str] = {}
        #: pods bound by this scheduler so far
        self.bound_total = 0
        self._static = StaticFilterCache()
        self._feeds: list[Feed] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._bind_sem: asyncio.Semaphore | None = None
        self._wake: asyncio.Event | None = None
        self._started = False
        self._stopping = False
        self._sent_group: dict[tuple[str, str], tuple[str, str, str]] = {}
        self.queue.on_active = self._poke

    # ---- lifecycle -------------------------------------------------------------------

    @property
    def started(self) -> bool:
        """Whether :meth:`start` completed."""
        return self._started

    async def start(self) -> None:
        """List every watched kind into the cache, then keep watching in the background."""
        if self._started:
            return
        self._bind_sem = asyncio.Semaphore(self.config.bind_concurrency)
        self._wake = asyncio.Event()
        c = self.cluster
        order = _creation_order
        self._feeds = [
            Feed(c, "PriorityClass", self._on_priority_class, optional=True),
            Feed(c, "Node", self._on_node, order=order),
            Feed(c, "PodGroup", self._on_pod_group, optional=True, order=order),
            Feed(c, "CompositePodGroup", self._on_composite_pod_group, optional=True),
            Feed(c, "Pod", self._on_pod, order=order),
        ]
        for f in self._feeds:
            await f.start()
        self._started = True
        self._stopping = False

    async def stop(self) -> None:
        """Stop watching and wait for bindings and status writes in flight."""
        self._stopping = True
        self._poke()
        for f in self._feeds:
            await f.stop()
        await self._drain()
        self._started = False

    async def run(self) -> None:
        """Schedule until :meth:`stop` is called (real clusters)."""
        await self.start()
        assert self._wake is not None
        while not self._stopping:
            await self._round(wait=False)
            if self._stopping:
                break
            self._wake.clear()
            if self.queue.has_active():
                continue
            wake = self.next_wakeup()
            timeout = None if wake is None else max(0.0, wake - self.clock.now())
            waiter = asyncio.create_task(self._wake.wait())
            sleeper = (
                asyncio.create_task(self.clock.sleep(timeout)) if timeout is not None else None
            )
            pending = {waiter} | ({sleeper} if sleeper else set())
            _, rest = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for t in rest:
                t.cancel()

    async def sync(self) -> None:
        """Process every cluster change delivered so far into the cache and the queue."""
        if not self._started:
            await self.start()
        last, stable, rounds = -1, 0, 0
        while stable < 5 and rounds < 1000:  # bounded: a busy cluster never goes quiet
            rounds += 1
            total = sum(f.events for f in self._feeds)
            if total == last:
                stable += 1
            else:
                last, stable = total, 0
            await asyncio.sleep(0)

    async def schedule_until_idle(self) -> int:
        """Run cycles until nothing is schedulable now; waits for the bindings and status
        writes. Returns the number of pods bound."""
        before = self.bound_total
        while await self._round(wait=True):
            pass
        return self.bound_total - before

    def next_wakeup(self) -> float | None:
        """Clock time at which a backoff expires or the unschedulable flush is due (None if
        nothing is waiting; the current time if something is ready now)."""
        if self.queue.has_active():
            return self.clock.now()
        return self.queue.next_wakeup()

    # ---- internals: driving ----------------------------------------------------------

    def _poke(self) -> None:
        if self._wake is not None:
            self._wake.set()

    async def _round(self, *, wait: bool) -> bool:
        await self.sync()
        progressed = False
        n = 0
        while (e := self.queue.pop()) is not None:
            self._schedule_one(e)
            progressed = True
            n += 1
            if not wait and n % 32 == 0:
                await asyncio.sleep(0)
        self._update_pending_metric()
        if wait and self._tasks:
            await self._drain()
            progressed = True
        return progressed

    async def _drain(self) -> None:
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            _log.error("background task failed", exc_info=task.exception())

    def _update_pending_metric(self) -> None:
        for kind, states in self.queue.counts().items():
            t = "pod" if kind == "Pod" else "podgroup"
            for state in ("gated", "active", "backoff", "unschedulable"):
                PENDING.labels(type=t, queue=state).set(states.get(state, 0))

    # ---- informer handlers -----------------------------------------------------------

    def _on_priority_class(self, kind: str, obj: Any) -> None:
        if kind == "SYNC":
            self.cache.priority_classes = {
                str(o["metadata"]["name"]): o for o in obj if isinstance(o, dict)
            }
            return
        name = str(obj["metadata"]["name"])
        if kind == "DELETED":
            self.cache.priority_classes.pop(name, None)
        else:
            self.cache.priority_classes[name] = obj

    def _on_node(self, kind: str, obj: Any) -> None:
        if kind == "SYNC":
            names = {str(o["metadata"]["name"]) for o in obj}
            for name in list(self.cache.node_objects):
                if name not in names:
                    self.cache.remove_node(name)
            changed = False
            for o in obj:
                changed |= self.cache.upsert_node(o)
            if changed:
                self.queue.move_all()
            return
        name = str(obj["metadata"]["name"])
        if kind == "DELETED":
            self.cache.remove_node(name)
        elif self.cache.upsert_node(obj):
            self.queue.move_all()  # NodeAdd / NodeUpdate (allocatable, labels, taints, spec)

    def _on_composite_pod_group(self, kind: str, obj: Any) -> None:
        if kind == "SYNC":
            self.cache.composite_groups = {
                (o.metadata.namespace or "default", o.metadata.name or ""): o
                for o in obj
                if isinstance(o, CompositePodGroup)
            }
            return
        if not isinstance(obj, CompositePodGroup):
            return
        key = (obj.metadata.namespace or "default", obj.metadata.name or "")
        if kind == "DELETED":
            self.cache.composite_groups.pop(key, None)
        else:
            self.cache.composite_groups[key] = obj

    def _on_pod_group(self, kind: str, obj: Any) -> None:
        if kind == "SYNC":
            seen = set()
            for o in obj:
                if isinstance(o, PodGroup):
                    seen.add((o.metadata.namespace or "default", o.metadata.name or ""))
                    self._on_pod_group("ADDED", o)
            for key, g in list(self.cache.groups.items()):
                if g.pod_group is not None and key not in seen:
                    self.cache.remove_pod_group(key)
                    self._refresh_group(key)
            return
        if not isinstance(obj, PodGroup):
            return
        key = (obj.metadata.namespace or "default", obj.metadata.name or "")
        if kind == "DELETED":
            self.cache.remove_pod_group(key)
            self._sent_group.pop(key, None)
            self._refresh_group(key)
            return
        old, g = self.cache.upsert_pod_group(obj, self.clock.now())
        self._refresh_group(key)
        ekey: EntityKey = ("PodGroup", key[0], key[1])
        if old is None:
            self.queue.move(ekey)  # PodGroup Add
        else:
            old_min = (
                old.spec.scheduling_policy.gang.min_count if old.spec.scheduling_policy.gang else 1
            )
            if g.min_count < old_min:
                self.queue.move(ekey)  # PodGroup Update: minCount lowered

    def _on_pod(self, kind: str, obj: Any) -> None:
        now = self.clock.now()
        if kind == "SYNC":
            seen = set()
            for o in obj:
                meta = o.get("metadata") or {}
                seen.add((str(meta.get("namespace") or "default"), str(meta.get("name"))))
                self._on_pod("ADDED", o)
            for key in [k for k in self.cache.pods if k not in seen]:
                self._pod_gone(key)
            return
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace") or "default"), str(meta.get("name")))
        if kind == "DELETED":
            self._pod_gone(key)
            return
        old, new = self.cache.upsert_pod(obj, now)
        if new is None:  # finished: its resources are free
            if old is not None:
                if old.counted_node is not None or old.node_name is not None:
                    self.queue.move_all()
                self._refresh_for(old)
            return
        if old is None:
            self._refresh_for(new)
            gk = new.group_key
            if gk is not None:  # unscheduled / assigned Pod Add in the same group
                self.queue.move(("PodGroup", gk[0], gk[1]))
            return
        if old.node_name is None and new.node_name is not None and old.assumed_node is None:
            gk = new.group_key  # bound by someone else
            if gk is not None:
                self.queue.move(("PodGroup", gk[0], gk[1]))
        if (
            old.deleting != new.deleting
            or old.gated != new.gated
            or (old.node_name is None and old.assumed_node is None and new.node_name is not None)
        ):
            self._refresh_for(new)
            if old.gated and not new.gated:  # scheduling gates removed
                gk = new.group_key
                self.queue.move(
                    ("PodGroup", gk[0], gk[1]) if gk else ("Pod", new.namespace, new.name)
                )
        elif new.node_name is None and new.group is None and old.req != new.req:
            self.queue.move(("Pod", new.namespace, new.name))

    def _pod_gone(self, key: tuple[str, str]) -> None:
        info = self.cache.pods.get(key)
        if info is None:
            return
        counted = info.counted_node is not None
        self.cache.remove_pod(key)
        if counted:
            self.queue.move_all()  # AssignedPod Delete: resources freed
        self._refresh_for(info)

    # ---- entities --------------------------------------------------------------------

    def _is_pending(self, p: PodInfo) -> bool:
        return (
            p.node_name is None
            and p.assumed_node is None
            and not p.deleting
            and not p.gated
            and p.scheduler_name == self.config.scheduler_name
        )

    def _refresh_for(self, p: PodInfo) -> None:
        gk = p.group_key
        if gk is not None:
            self._refresh_group(gk)
        else:
            self._refresh_pod(p.key)

    def _refresh_pod(self, key: tuple[str, str]) -> None:
        ekey: EntityKey = ("Pod", key[0], key[1])
        p = self.cache.pods.get(key)
        if p is None or p.group is not None or not self._is_pending(p):
            self.queue.remove(ekey)
            return
        self.queue.upsert(
            ekey,
            priority=self.cache.pod_priority(p),
            first_seen=p.first_seen,
            seq=p.seq,
            gate=None,
        )

    def _refresh_group(self, gk: tuple[str, str]) -> None:
        ekey: EntityKey = ("PodGroup", gk[0], gk[1])
        g = self.cache.groups.get(gk)
        if g is None or not any(self._is_pending(p) for p in self.cache.members(g)):
            self.queue.remove(ekey)
            return
        st = self.framework.run_pre_enqueue(g, self.cache)
        self.queue.upsert(
            ekey,
            priority=self.cache.group_priority(g),
            first_seen=g.first_seen,
            seq=g.seq,
            gate=None if st.ok else st.message,
        )

    # ---- the scheduling cycle --------------------------------------------------------

    def _schedule_one(self, e: QueuedEntity) -> None:
        if e.kind == "Pod":
            self._schedule_pod(e)
        else:
            self._schedule_group(e)

    def _placements(self, g: GroupInfo, snap: Snapshot) -> list[Placement]:
        out: list[Placement] = []
        for p in self.framework.placement_generate:
            out.extend(p.generate(g, snap))
        return out or [Placement()]

    def _schedule_pod(self, e: QueuedEntity) -> None:
        key = (e.key[1], e.key[2])
        p = self.cache.pods.get(key)
        if p is None or p.group is not None or not self._is_pending(p):
            self.queue.remove(e.key)
            self.queue.done(e, "success")
            return
        t0 = time.perf_counter()
        snap = Snapshot(self.cache, self._static)
        res = run_pod_group_cycle(self.framework, snap, [p], min_count=1, scheduled=0, gang=False)
        result = "scheduled" if res.status.ok else "unschedulable"
        ATTEMPT_DURATION.labels(result=result, profile=self.config.scheduler_name).observe(
            time.perf_counter() - t0
        )
        POD_ATTEMPTS.labels(result=result, profile=self.config.scheduler_name).inc()
        if res.status.ok:
            self._assume_and_bind(e.key, res.assignments)
            self.queue.remove(e.key)
            self.queue.done(e, "success")
            return
        diag = res.diagnoses.get(p.req)
        message = diag.pod_message() if diag else res.explanation or res.status.message
        self._pod_failed(p, REASON_UNSCHEDULABLE, message)
        self.queue.done(e, "unschedulable")

    def _validate_group(self, g: GroupInfo, members: Sequence[PodInfo]) -> str | None:
        names = sorted({p.scheduler_name for p in members})
        if len(names) > 1:
            return (
                f"pods of pod group {g.name!r} have different scheduler names: {', '.join(names)}"
            )
        prio = self.cache.group_priority(g)
        for p in sorted(members, key=lambda m: m.name):
            pp = self.cache.pod_priority(p)
            if pp != prio:
                return (
                    f"pod {p.name!r} has priority {pp} but pod group {g.name!r} has priority {prio}"
                )
        return None

    def _schedule_group(self, e: QueuedEntity) -> None:
        gk = (e.key[1], e.key[2])
        g = self.cache.groups.get(gk)
        members = [p for p in self.cache.members(g)] if g is not None else []
        pending = [p for p in members if self._is_pending(p)]
        if g is None or not pending:
            self.queue.remove(e.key)
            self.queue.done(e, "success")
            return
        st = self.framework.run_pre_enqueue(g, self.cache)
        if not st.ok:
            self.queue.done(e, "unschedulable")
            self._refresh_group(gk)
            return
        live = [p for p in members if not p.deleting and self.cache.visible(p)]
        error = self._validate_group(g, live)
        if error is not None:
            PODGROUP_ATTEMPTS.labels(result="error").inc()
            self.explanations[gk] = error
            self._group_condition(g, "False", REASON_SCHEDULER_ERROR, error)
            for p in pending:
                self._pod_failed(p, REASON_SCHEDULER_ERROR, error)
            self.queue.done(e, "error")
            return
        prio = {p.key: self.cache.pod_priority(p) for p in pending}
        pending.sort(key=lambda p: (-prio[p.key], p.first_seen, p.seq, p.name))
        scheduled = sum(1 for p in live if p.scheduled)
        if scheduled + len(pending) < g.min_count:  # quorum impossible before any placement
            gated = sum(1 for p in live if p.gated and not p.scheduled)
            message = (
                f"minCount {g.min_count}: only {scheduled + len(pending)} pods can be scheduled "
                f"({scheduled} scheduled, {len(pending)} pending, {gated} with scheduling gates)"
            )
            PODGROUP_ATTEMPTS.labels(result="unschedulable").inc()
            self.explanations[gk] = message
            self._group_condition(g, "False", REASON_UNSCHEDULABLE, message)
            self.queue.done(e, "unschedulable")
            return
        t0 = time.perf_counter()
        snap = Snapshot(self.cache, self._static)
        res: CycleResult = run_pod_group_cycle(
            self.framework,
            snap,
            pending,
            min_count=g.min_count,
            scheduled=scheduled,
            gang=g.is_gang,
            placements=self._placements(g, snap),
        )
        if not res.status.ok:
            for pf in self.framework.pod_group_post_filter:
                pf.post_filter(g, snap, res.explanation)
        result = "scheduled" if res.status.ok else "unschedulable"
        PODGROUP_ATTEMPT_DURATION.labels(result=result).observe(time.perf_counter() - t0)
        PODGROUP_ATTEMPTS.labels(result=result).inc()
        if res.status.ok:
            # a gang whose quorum depends on this batch binds one pod first (see _bind_all)
            self._assume_and_bind(
                e.key, res.assignments, group=g, canary=g.is_gang and scheduled < g.min_count
            )
            for p in res.unplaced:
                diag = res.diagnoses.get(p.req)
                if diag is not None:
                    self._pod_failed(p, REASON_UNSCHEDULABLE, diag.pod_message())
            self.queue.done(e, "success")
            self._refresh_group(gk)
            return
        message = res.explanation or res.status.message
        self.explanations[gk] = message
        if scheduled < g.min_count:
            # A group whose quorum is already bound or assumed (its bindings in flight, the
            # True condition not yet written) was initially scheduled: leftover pods that do
            # not fit must not flip it to False (upstream writes True in the cycle itself).
            self._group_condition(g, "False", REASON_UNSCHEDULABLE, message)
        pod_message = f'pod group "{g.name}" is unschedulable: {message}'
        for p in pending:
            self._pod_failed(p, REASON_UNSCHEDULABLE, pod_message)
        self.queue.done(e, "unschedulable")

    # ---- binding ---------------------------------------------------------------------

    def _assume_and_bind(
        self,
        ekey: EntityKey,
        assignments: Iterable[tuple[PodInfo, str]],
        *,
        group: GroupInfo | None = None,
        canary: bool = False,
    ) -> None:
        pairs = list(assignments)
        for p, node in pairs:  # the whole group is assumed before any bind is sent
            self.cache.assume(p, node)
        self._spawn(self._bind_all(ekey, pairs, group, canary))

    async def _bind_all(
        self,
        ekey: EntityKey,
        pairs: list[tuple[PodInfo, str]],
        group: GroupInfo | None,
        canary: bool,
    ) -> None:
        """Bind a placed batch. For a gang whose quorum depends on the batch, one pod is bound
        first: if that fails (node gone, pod deleted, no permission...) nothing of the gang is
        bound and the whole batch is forgotten and retried, so a systematic failure never
        leaves a gang partially bound. The rest are then bound concurrently; a later failure
        forgets that pod and requeues the group with its remaining need."""
        results: list[bool] = []
        if canary and len(pairs) > 1:
            first = await self._bind_one(*pairs[0])
            if not first:
                for p, _ in pairs[1:]:
                    if self.cache.pods.get(p.key) is p:
                        self.cache.forget(p)
                for p, _ in pairs:
                    self._refresh_for(p)
                self.queue.requeue_after_failure(ekey)
                return
            results.append(first)
            pairs_left = pairs[1:]
        else:
            pairs_left = pairs
        if group is not None and results:
            self._group_condition(group, "True", REASON_SCHEDULED, "")
        results.extend(await asyncio.gather(*(self._bind_one(p, n) for p, n in pairs_left)))
        if group is not None and any(results):
            self._group_condition(group, "True", REASON_SCHEDULED, "")
        if not all(results):
            for p, _ in pairs:
                self._refresh_for(p)
            self.queue.requeue_after_failure(ekey)

    async def _bind_one(self, p: PodInfo, node: str) -> bool:
        assert self._bind_sem is not None
        async with self._bind_sem:
            st = None
            for b in self.framework.bind:
                st = await b.bind(self.cluster, p, node)
                if st.ok:
                    break
        if st is not None and st.ok:
            BIND_RESULTS.labels(result="ok").inc()
            SCHEDULED_PODS.inc()
            self.bound_total += 1
            if self.config.record_events:
                text = f"Successfully assigned {p.namespace}/{p.name} to {node}"
                self._spawn(self._event(p, "Normal", "Scheduled", text))
            return True
        BIND_RESULTS.labels(result="error").inc()
        if self.cache.pods.get(p.key) is p:
            self.cache.forget(p)
        message = st.message if st is not None else "no bind plugin"
        _log.info("binding %s/%s to %s failed: %s", p.namespace, p.name, node, message)
        if self.cache.pods.get(p.key) is p:
            self._pod_failed(p, REASON_SCHEDULER_ERROR, message)
        return False

    # ---- status and events -----------------------------------------------------------

    async def _event(self, p: PodInfo, type_: str, reason: str, message: str) -> None:
        try:
            await self.cluster.create_event(
                namespace=p.namespace,
                involved_object=p.ref(),
                reason=reason,
                message=message[:1024],
                type="Warning" if type_ == "Warning" else "Normal",
                reporting_component=self.config.component,
            )
        except (ApiError, OSError) as e:
            _log.debug("event for %s/%s not recorded: %s", p.namespace, p.name, e)

    def _pod_failed(self, p: PodInfo, reason: str, message: str) -> None:
        """PodScheduled=False and a FailedScheduling event, once per distinct message."""
        message = message[:_MAX_MESSAGE]
        if p.last_failure == message:
            return
        p.last_failure = message
        if self.config.update_status:
            self._spawn(self._patch_pod_condition(p, reason, message))
        if self.config.record_events:
            self._spawn(self._event(p, "Warning", "FailedScheduling", message))

    async def _patch_pod_condition(self, p: PodInfo, reason: str, message: str) -> None:
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
        except NotFound:
            pass
        except (ApiError, OSError) as e:
            _log.info("pod %s/%s condition not written: %s", p.namespace, p.name, e)

    def _group_condition(self, g: GroupInfo, status: str, reason: str, message: str) -> None:
        pg = g.pod_group
        if pg is None or not self.config.update_status:
            return
        message = message[:_MAX_MESSAGE]
        conds = pg.status.conditions if pg.status is not None else ()
        existing = next((c for c in conds if c.type == CONDITION_INITIALLY_SCHEDULED), None)
        if existing is not None and existing.status == "True":
            return  # terminal once True: never regress
        sent = self._sent_group.get(g.key)
        if sent is not None and sent[0] == "True":
            return  # True is on its way (the watch has not shown it yet)
        want = (status, reason, message)
        if (
            existing is not None
            and (existing.status, existing.reason or "", existing.message or "") == want
        ):
            return
        if self._sent_group.get(g.key) == want:
            return
        self._sent_group[g.key] = want
        ltt = (
            existing.last_transition_time
            if existing is not None and existing.status == status
            else None
        ) or _rfc3339(self.clock.now())
        cond: dict[str, Any] = {
            "type": CONDITION_INITIALLY_SCHEDULED,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": ltt,
        }
        if pg.metadata.generation is not None:
            cond["observedGeneration"] = pg.metadata.generation
        others = [to_dict(c) for c in conds if c.type != CONDITION_INITIALLY_SCHEDULED]
        self._spawn(self._patch_group(g.namespace, g.name, [*others, cond]))

    async def _patch_group(self, namespace: str, name: str, conds: list[dict[str, Any]]) -> None:
        try:
            await self.cluster.patch(
                "PodGroup",
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
            _log.info("PodGroup %s/%s status not written: %s", namespace, name, e)
            self._sent_group.pop((namespace, name), None)
