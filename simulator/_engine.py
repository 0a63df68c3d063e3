"""The discrete-event loop: arrivals, pod completions and scheduler wake-ups on virtual time."""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

import attrs

from simulator._clock import VirtualClock
from simulator._controllers import JobRun, plan_object
from simulator._recording import RecordingCluster
from simulator._result import (
    GroupRecord,
    NodeRecord,
    PodRecord,
    SimulationResult,
    Violation,
)
from simulator._scenario import (
    DURATION_ANNOTATION,
    Scenario,
    ScenarioError,
    ScenarioObject,
)
from simulator._units import parse_duration, parse_quantity
from workloadbuilder.api import CompositePodGroup, PodGroup, Workload, object_from_dict
from workloadbuilder.cluster import Cluster, KubeObject, MemoryCluster
from workloadbuilder.errors import (
    AlreadyExists,
    ApiError,
    Invalid,
    NotFound,
    WorkloadBuilderError,
)
from workloadbuilder.resources import CPU
from workloadbuilder.resources import pod_requests as sdk_pod_requests
from workloadbuilder.runtime import Component

__all__ = [
    "DEFAULT_SCHEDULER_NAME",
    "ProgressInfo",
    "SchedulerLike",
    "Simulation",
    "simulate",
]

_log = logging.getLogger(__name__)

DEFAULT_SCHEDULER_NAME = "workloadbuilder-scheduler"
_CONDITION = "PodGroupInitiallyScheduled"


class SchedulerLike(Component, Protocol):
    """What the simulator needs from a scheduler: a :class:`workloadbuilder.runtime.Component`
    that also explains why groups wait (``scheduler.Scheduler`` fits)."""

    @property
    def explanations(self) -> Mapping[tuple[str, str], str]:
        """(namespace, PodGroup) -> the latest Unschedulable explanation."""
        ...


ClusterFactory = Callable[[Callable[[], float]], Cluster]
SchedulerFactory = Callable[[Cluster, VirtualClock], SchedulerLike]


@attrs.frozen(kw_only=True)
class ProgressInfo:
    """Passed to the progress callback after every round."""

    time: float
    rounds: int
    pods_total: int
    pods_bound: int
    groups_waiting: int


@attrs.define(kw_only=True)
class _PodState:
    namespace: str
    name: str
    group: str | None
    owner: str
    created: float
    duration: float | None
    ours: bool
    requests: dict[str, float]
    run: JobRun | None = None
    origin: ScenarioObject | None = None
    node: str | None = None
    bound: float | None = None
    finished: float | None = None
    deleted: float | None = None
    preassigned: bool = False


@attrs.define(kw_only=True)
class _GroupState:
    namespace: str
    name: str
    owner: str
    arrival: float
    policy: str = "basic"
    min_count: int | None = None
    priority: int | None = None
    scheduled_at: float | None = None
    initially_scheduled: bool = False
    reason: str | None = None
    message: str | None = None
    wait_message: str | None = None
    duration: float | None = None
    quorum_at: float | None = None


def _default_cluster(clock: Callable[[], float]) -> Cluster:
    return MemoryCluster(clock=clock)


def _scheduler_factory(config: Any) -> SchedulerFactory:
    def make(cluster: Cluster, clock: VirtualClock) -> SchedulerLike:
        from scheduler import Scheduler, SchedulerConfig

        sched: SchedulerLike = Scheduler(
            cluster, config if config is not None else SchedulerConfig(), clock=clock
        )
        return sched

    return make


def _scheduler_name(config: Any) -> str:
    if config is None:
        try:
            from scheduler import SchedulerConfig

            config = SchedulerConfig()
        except ImportError:
            return DEFAULT_SCHEDULER_NAME
    return str(getattr(config, "scheduler_name", DEFAULT_SCHEDULER_NAME))


def pod_requests(spec: Mapping[str, Any]) -> dict[str, float]:
    """Effective resource requests of a pod spec, computed by the SDK as kube-scheduler does
    (:func:`workloadbuilder.resources.pod_requests`: containers, init and sidecar containers,
    pod-level resources, overhead), in the simulator's units: cores for ``cpu``, plain
    numbers otherwise. Malformed quantities are skipped (admission reports them)."""
    return {
        name: amount / 1000 if name == CPU else float(amount)
        for name, amount in sdk_pod_requests(spec, strict=False).items()
    }


def _iso(epoch_seconds: float) -> str:
    return datetime.fromtimestamp(epoch_seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _api_message(e: ApiError) -> str:
    if isinstance(e, Invalid) and e.causes:
        return "; ".join(str(c) for c in e.causes)
    return e.message


class Simulation:
    """Runs a :class:`Scenario` against the scheduler on an in-memory cluster and virtual time.

    The loop, at each event time ``t``: create the objects that arrive at ``t`` (playing the
    Job/JobSet/LeaderWorkerSet controllers), mark the pods whose duration ends at ``t`` as
    Succeeded, ``await scheduler.sync()``, ``await scheduler.until_idle()``, record
    the pods bound at ``t`` (they then run for their duration), check the gang invariant, and
    advance to the next arrival, completion, scheduler wake-up (``next_wakeup()``) or clock
    sleeper. It stops when nothing more can happen: no arrivals or completions are left and
    either no pod is pending or the scheduler's own wake-ups brought no change for ``settle``
    seconds; or at the ``until`` horizon.

    ``cluster_factory`` and ``scheduler_factory`` replace the MemoryCluster and the Scheduler
    (tests use them to check the invariant detection with a deliberately broken scheduler).
    """

    def __init__(
        self,
        scenario: Scenario,
        *,
        until: float | None = None,
        settle: float = 600.0,
        scheduler_config: Any = None,
        cluster_factory: ClusterFactory | None = None,
        scheduler_factory: SchedulerFactory | None = None,
        scheduler_name: str | None = None,
        progress: Callable[[ProgressInfo], None] | None = None,
        max_rounds: int = 1_000_000,
    ) -> None:
        self.scenario = scenario
        self.until = until
        self.settle = settle
        self.clock = VirtualClock()
        self._cluster_factory = cluster_factory or _default_cluster
        self._scheduler_factory = scheduler_factory or _scheduler_factory(scheduler_config)
        self.scheduler_name = scheduler_name or _scheduler_name(scheduler_config)
        self._progress = progress
        self._max_rounds = max_rounds
        self._pods: dict[tuple[str, str], _PodState] = {}
        self._groups: dict[tuple[str, str], _GroupState] = {}
        self._nodes: dict[str, NodeRecord] = {}
        self._violations: list[Violation] = []
        self._completions: list[tuple[float, int, tuple[str, str]]] = []
        self._seq = itertools.count()
        self._rounds = 0
        self._cluster: Cluster | None = None
        self._unbound: set[tuple[str, str]] = set()
        self._running: set[tuple[str, str]] = set()
        self._bound_count: dict[tuple[str, str], int] = {}
        self._binds: list[tuple[str, str, str]] = []
        self._deletes: list[tuple[str, str]] = []
        self._deleted = 0

    # -- public ---------------------------------------------------------------------------

    async def run(self) -> SimulationResult:
        """Run the scenario to the end (or the horizon) and return the result."""
        cluster = self._cluster_factory(self.clock.now)
        self._cluster = cluster
        end = 0.0
        try:
            await self._create_namespaces()
            recording = RecordingCluster(cluster, on_bind=self._on_bind, on_delete=self._on_delete)
            sched = self._scheduler_factory(recording, self.clock)
            await sched.start()
            try:
                end = await self._loop(sched)
                for gkey, state in list(self._groups.items()):
                    if not state.initially_scheduled:
                        await self._refresh_group(gkey, end)
            finally:
                await sched.stop()
        finally:
            await cluster.close()
        return self._result(end)

    # -- the loop -------------------------------------------------------------------------

    async def _loop(self, sched: SchedulerLike) -> float:
        arrivals = sorted(self.scenario.objects, key=lambda o: o.arrival)  # stable: doc order
        ai = 0
        t = 0.0
        last_change = 0.0
        same_time_rounds = 0
        while True:
            self.clock.advance_to(t)
            changed = False
            while ai < len(arrivals) and arrivals[ai].arrival <= t:
                await self._arrive(arrivals[ai], t)
                ai += 1
                changed = True
            while self._completions and self._completions[0][0] <= t:
                _, _, key = heapq.heappop(self._completions)
                await self._complete(key, t)
                changed = True
            for _ in range(3):  # let woken sleepers and watch deliveries run
                await asyncio.sleep(0)
            await sched.sync()
            await sched.until_idle()
            if await self._observe(sched, t):
                changed = True
            if changed:
                last_change = t
            self._rounds += 1
            if self._progress is not None:
                self._progress(self._progress_info(t))
            if self._rounds >= self._max_rounds:
                _log.warning("stopping after %d rounds", self._rounds)
                return t

            external = [arrivals[ai].arrival] if ai < len(arrivals) else []
            if self._completions:
                external.append(self._completions[0][0])
            internal: list[float] = []
            wake = sched.next_wakeup()
            if wake is not None:
                internal.append(self.clock.to_elapsed(wake))
            sleeper = self.clock.next_deadline()
            if sleeper is not None:
                internal.append(sleeper)
            if not external:
                if not self._anything_pending():
                    return t
                internal = [x for x in internal if x <= last_change + self.settle]
                if not internal:
                    return t
            nxt = min(external + internal)
            if nxt <= t:
                same_time_rounds += 1
                if same_time_rounds >= 3:  # a wake-up that is always due: step forward
                    nxt = min([t + 1.0, *[x for x in external if x > t]])
                else:
                    nxt = t
            else:
                same_time_rounds = 0
            if self.until is not None and nxt > self.until:
                self.clock.advance_to(max(t, self.until))
                return max(t, self.until)
            t = nxt

    def _anything_pending(self) -> bool:
        return any(p.ours and p.bound is None and p.deleted is None for p in self._pods.values())

    def _progress_info(self, t: float) -> ProgressInfo:
        live = len(self._pods) - self._deleted
        return ProgressInfo(
            time=t,
            rounds=self._rounds,
            pods_total=live,
            pods_bound=live - len(self._unbound),
            groups_waiting=sum(1 for g in self._groups.values() if not g.initially_scheduled),
        )

    # -- arrivals ---------------------------------------------------------------------------

    @property
    def cluster(self) -> Cluster:
        """The cluster of the running simulation."""
        if self._cluster is None:
            raise RuntimeError("the simulation is not running")
        return self._cluster

    async def _create_namespaces(self) -> None:
        declared = {o.name for o in self.scenario.objects if o.kind == "Namespace"}
        needed = sorted({o.namespace for o in self.scenario.objects if o.namespace} | {"default"})
        for ns in needed:
            if ns in declared:
                continue
            with contextlib.suppress(AlreadyExists):
                await self.cluster.create(
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
                )

    def _error(self, obj: ScenarioObject, message: str, path: str = "") -> ScenarioError:
        return ScenarioError(
            message, source=self.scenario.source, document=obj.document, what=obj.key, path=path
        )

    async def _create(self, obj: ScenarioObject, item: KubeObject) -> KubeObject:
        try:
            return await self.cluster.create(item)
        except AlreadyExists as e:
            if isinstance(item, dict) and item.get("kind") == "Namespace":
                return item
            raise self._error(obj, _api_message(e)) from None
        except ApiError as e:
            name = _name_of(item)
            prefix = "" if name == obj.key else f"creating {name}: "
            raise self._error(obj, prefix + _api_message(e)) from None

    async def _arrive(self, obj: ScenarioObject, t: float) -> None:
        manifest = obj.manifest
        kind = obj.kind
        if kind == "Node":
            stored = await self._create(obj, manifest)
            await self._ensure_node_status(obj, manifest, stored)
            alloc = (manifest.get("status") or {}).get("allocatable") or {}
            self._nodes[obj.name] = NodeRecord(
                name=obj.name,
                allocatable={str(k): parse_quantity(v) for k, v in alloc.items()},
                labels=dict((manifest.get("metadata") or {}).get("labels") or {}),
                added=t,
            )
        elif kind in ("Workload", "PodGroup", "CompositePodGroup"):
            model = object_from_dict(manifest)
            await self._create_scheduling_object(obj, model, t, owner="")
        elif kind == "Pod":
            await self._create_pod(obj, manifest, t, owner="", run=None)
        elif obj.controlled:
            stored = await self._create(obj, manifest)
            if not isinstance(stored, dict):
                raise self._error(obj, "the cluster returned an unexpected object")
            try:
                planned = plan_object(stored)
            except WorkloadBuilderError as e:
                raise self._error(obj, f"the {kind} adapter refused it: {e}") from None
            owner = f"{kind}/{obj.name}"
            uids: dict[tuple[str, str], str] = {}
            for item in planned.objects:
                item = _fill_owner_uids(item, uids)
                stored_item = await self._create_scheduling_object(obj, item, t, owner=owner)
                if stored_item.metadata.uid:
                    uids[(stored_item.kind, stored_item.metadata.name or "")] = (
                        stored_item.metadata.uid
                    )
            for run in planned.runs:
                for pod in run.initial_pods():
                    await self._create_pod(obj, pod, t, owner=owner, run=run)
            for pod in planned.pods:
                await self._create_pod(obj, pod, t, owner=owner, run=None)
        else:
            await self._create(obj, manifest)

    async def _ensure_node_status(
        self, obj: ScenarioObject, manifest: Mapping[str, Any], stored: KubeObject
    ) -> None:
        """Nodes keep their status on create in a real API server; make sure ours did."""
        want = manifest.get("status")
        if not want or not isinstance(stored, dict):
            return
        if (stored.get("status") or {}).get("allocatable") == want.get("allocatable"):
            return
        try:
            await self.cluster.patch("Node", obj.name, {"status": want}, subresource="status")
        except ApiError as e:
            raise self._error(obj, f"setting the node status: {_api_message(e)}") from None

    async def _create_scheduling_object(
        self,
        obj: ScenarioObject,
        model: Workload | PodGroup | CompositePodGroup,
        t: float,
        *,
        owner: str,
    ) -> Workload | PodGroup | CompositePodGroup:
        stored = await self._create(obj, model)
        if not isinstance(stored, (Workload, PodGroup, CompositePodGroup)):
            raise self._error(obj, f"the cluster returned an unexpected {type(stored).__name__}")
        if isinstance(stored, PodGroup):
            ns = stored.metadata.namespace or obj.namespace or "default"
            name = stored.metadata.name or ""
            duration = None
            if stored.metadata.annotations.get(DURATION_ANNOTATION):
                try:
                    duration = parse_duration(stored.metadata.annotations[DURATION_ANNOTATION])
                except ValueError:
                    duration = None
            state = _GroupState(
                namespace=ns,
                name=name,
                owner=owner,
                arrival=t,
                priority=stored.spec.priority,
                duration=duration,
            )
            self._update_group(state, stored, t)
            self._groups[(ns, name)] = state
        return stored

    async def _create_pod(
        self,
        obj: ScenarioObject,
        pod: dict[str, Any],
        t: float,
        *,
        owner: str,
        run: JobRun | None,
    ) -> None:
        pod = dict(pod)
        meta = dict(pod.get("metadata") or {})
        spec = dict(pod.get("spec") or {})
        pod["metadata"], pod["spec"] = meta, spec
        meta.setdefault("namespace", obj.namespace or "default")
        spec.setdefault("schedulerName", self.scheduler_name)
        stored = await self._create(obj, pod)
        smeta = stored.get("metadata", {}) if isinstance(stored, dict) else {}
        sspec = stored.get("spec", {}) if isinstance(stored, dict) else spec
        ns = str(smeta.get("namespace") or meta["namespace"])
        name = str(smeta.get("name") or meta.get("name"))
        group = (sspec.get("schedulingGroup") or {}).get("podGroupName")
        annotations = meta.get("annotations") or {}
        duration: float | None = obj.duration
        if DURATION_ANNOTATION in annotations:
            try:
                duration = parse_duration(annotations[DURATION_ANNOTATION])
            except ValueError as e:
                raise self._error(
                    obj, f"Invalid value: {e}", f"metadata.annotations[{DURATION_ANNOTATION}]"
                ) from None
        elif duration is None and group and (ns, group) in self._groups:
            duration = self._groups[(ns, group)].duration
        node = sspec.get("nodeName")
        self._pods[(ns, name)] = _PodState(
            namespace=ns,
            name=name,
            group=group,
            owner=owner,
            created=t,
            duration=duration,
            ours=sspec.get("schedulerName") == self.scheduler_name and not node,
            requests=pod_requests(sspec),
            run=run,
            origin=obj,
            preassigned=bool(node),
        )
        if node:
            st = self._pods[(ns, name)]
            st.node, st.bound = str(node), t
            await self._start_running(st, t)
        else:
            self._unbound.add((ns, name))

    # -- completions ------------------------------------------------------------------------

    async def _complete(self, key: tuple[str, str], t: float) -> None:
        st = self._pods.get(key)
        if st is None or st.deleted is not None or st.finished is not None:
            return
        try:
            await self.cluster.patch(
                "Pod",
                st.name,
                {"status": {"phase": "Succeeded"}},
                st.namespace,
                subresource="status",
            )
        except ApiError as e:
            _log.debug("pod %s/%s vanished before it finished: %s", *key, e)
            self._vanished(st, t)
            return
        st.finished = t
        self._running.discard(key)
        if st.run is not None and st.origin is not None:
            for pod in st.run.pod_succeeded():
                await self._create_pod(st.origin, pod, t, owner=st.owner, run=st.run)

    # -- observation ------------------------------------------------------------------------

    def _on_bind(self, namespace: str, name: str, node: str) -> None:
        self._binds.append((namespace, name, node))

    def _on_delete(self, namespace: str, name: str) -> None:
        self._deletes.append((namespace, name))

    async def _observe(self, sched: SchedulerLike, t: float) -> bool:
        """Record the bindings and deletions the scheduler made at time ``t`` (reported by
        the :class:`RecordingCluster` it talks to), refresh the status of the groups that
        changed, and check the invariant. Returns True when a pod was bound or deleted."""
        changed = False
        touched: set[tuple[str, str]] = set()
        binds, self._binds = self._binds, []
        for ns, name, node in binds:
            st = self._pods.get((ns, name))
            if st is None or st.node is not None:
                continue
            self._unbound.discard((ns, name))
            st.node = node
            st.bound = t
            if st.group:
                gkey = (ns, st.group)
                touched.add(gkey)
                if st.ours:
                    self._bound_count[gkey] = self._bound_count.get(gkey, 0) + 1
            changed = True
            await self._start_running(st, t)
        deletes, self._deletes = self._deletes, []
        for ns, name in deletes:
            st = self._pods.get((ns, name))
            if st is not None and st.deleted is None:
                self._vanished(st, t)
                if st.group:
                    touched.add((ns, st.group))
                changed = True
        for gkey in sorted(touched):
            await self._refresh_group(gkey, t)
        for gkey, state in self._groups.items():
            if state.initially_scheduled:
                continue
            explanation = sched.explanations.get(gkey)
            if explanation:
                state.message = explanation
                state.wait_message = explanation
        self._check_invariant(t)
        return changed

    async def _refresh_group(self, gkey: tuple[str, str], t: float) -> None:
        state = self._groups.get(gkey)
        if state is None:
            return
        try:
            pg = await self.cluster.get("PodGroup", state.name, state.namespace)
        except NotFound:
            return
        if isinstance(pg, PodGroup):
            self._update_group(state, pg, t)

    def _vanished(self, st: _PodState, t: float) -> None:
        key = (st.namespace, st.name)
        st.deleted = t
        self._deleted += 1
        self._unbound.discard(key)
        self._running.discard(key)
        if st.node is not None and st.ours and st.group:
            gkey = (st.namespace, st.group)
            self._bound_count[gkey] = self._bound_count.get(gkey, 1) - 1

    async def _start_running(self, st: _PodState, t: float) -> None:
        try:
            await self.cluster.patch(
                "Pod",
                st.name,
                {"status": {"phase": "Running", "startTime": _iso(self.clock.now())}},
                st.namespace,
                subresource="status",
            )
        except ApiError as e:
            _log.debug("could not mark %s/%s Running: %s", st.namespace, st.name, e)
        else:
            self._running.add((st.namespace, st.name))
        if st.duration is not None:
            heapq.heappush(
                self._completions, (t + st.duration, next(self._seq), (st.namespace, st.name))
            )

    def _update_group(self, state: _GroupState, pg: PodGroup, t: float) -> None:
        policy = pg.spec.scheduling_policy
        if policy.gang is not None:
            state.policy = "gang"
            state.min_count = policy.gang.min_count
        else:
            state.policy = "basic"
            state.min_count = None
        if pg.spec.priority is not None:
            state.priority = pg.spec.priority
        conditions = pg.status.conditions if pg.status is not None else ()
        for c in conditions:
            if c.type != _CONDITION:
                continue
            state.reason = c.reason
            if c.status == "True":
                if not state.initially_scheduled:
                    state.initially_scheduled = True
                    state.scheduled_at = t
                state.message = c.message or None
            else:
                state.message = c.message or state.message
                if c.message:
                    state.wait_message = c.message

    def _check_invariant(self, t: float) -> None:
        for gkey, n in self._bound_count.items():
            g = self._groups.get(gkey)
            if g is None or n <= 0:
                continue
            if g.quorum_at is None and n >= (g.min_count or 1):
                g.quorum_at = t
            if g.policy == "gang" and g.min_count is not None and n < g.min_count:
                self._violations.append(
                    Violation(
                        time=t, namespace=gkey[0], name=gkey[1], min_count=g.min_count, bound=n
                    )
                )

    # -- result -------------------------------------------------------------------------------

    def _result(self, end: float) -> SimulationResult:
        pods = tuple(
            PodRecord(
                namespace=p.namespace,
                name=p.name,
                group=p.group,
                owner=p.owner,
                created=p.created,
                node=p.node,
                bound=p.bound,
                finished=p.finished,
                deleted=p.deleted,
                ours=p.ours,
                requests=p.requests,
            )
            for p in self._pods.values()
        )
        groups: list[GroupRecord] = []
        by_group: dict[tuple[str, str], list[PodRecord]] = {}
        for p in pods:
            if p.group is not None and p.deleted is None:
                by_group.setdefault((p.namespace, p.group), []).append(p)
        for gkey, g in self._groups.items():
            live = by_group.get(gkey, [])
            groups.append(
                GroupRecord(
                    namespace=gkey[0],
                    name=gkey[1],
                    policy=g.policy,
                    min_count=g.min_count,
                    owner=g.owner,
                    arrival=g.arrival,
                    total_pods=len(live),
                    bound_pods=sum(1 for p in live if p.node is not None),
                    initially_scheduled=g.initially_scheduled,
                    scheduled_at=g.scheduled_at if g.scheduled_at is not None else g.quorum_at,
                    nodes=tuple(sorted({p.node for p in live if p.node is not None})),
                    priority=g.priority,
                    reason=g.reason,
                    message=g.message,
                    wait_message=g.wait_message
                    if (g.scheduled_at or g.quorum_at) != g.arrival
                    else None,
                )
            )
        return SimulationResult(
            source=self.scenario.source,
            scheduler_name=self.scheduler_name,
            end=end,
            rounds=self._rounds,
            pods=pods,
            groups=tuple(groups),
            nodes=tuple(self._nodes.values()),
            violations=tuple(self._violations),
            until=self.until,
            last_arrival=max((o.arrival for o in self.scenario.objects), default=0.0),
            topology_keys=self.scenario.topology_keys,
        )


def _fill_owner_uids(
    item: Workload | PodGroup | CompositePodGroup, uids: Mapping[tuple[str, str], str]
) -> Workload | PodGroup | CompositePodGroup:
    """Adapters cannot know the uids of objects created just before (the Workload, parent
    CompositePodGroups); fill them into the ownerReferences, as a controller does."""
    refs = item.metadata.owner_references
    if not any(not r.uid for r in refs):
        return item
    fixed = tuple(
        attrs.evolve(r, uid=uids.get((r.kind, r.name), r.uid)) if not r.uid else r for r in refs
    )
    return attrs.evolve(item, metadata=attrs.evolve(item.metadata, owner_references=fixed))


def _key_of(item: KubeObject) -> tuple[str, str]:
    meta = (item.get("metadata") or {}) if isinstance(item, dict) else {}
    return (str(meta.get("namespace")), str(meta.get("name")))


def _name_of(item: KubeObject) -> str:
    if isinstance(item, dict):
        meta = item.get("metadata") or {}
        ns = f"{meta['namespace']}/" if meta.get("namespace") else ""
        return f"{item.get('kind')} {ns}{meta.get('name')}"
    ns = f"{item.metadata.namespace}/" if item.metadata.namespace else ""
    return f"{item.kind} {ns}{item.metadata.name}"


async def simulate(scenario: Scenario, **kwargs: Any) -> SimulationResult:
    """Run ``scenario`` (see :class:`Simulation` for the keyword arguments)."""
    return await Simulation(scenario, **kwargs).run()
