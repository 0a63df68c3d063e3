"""The discrete-event loop: arrivals, pod completions and scheduler wake-ups on virtual time."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import heapq
import itertools
import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

import attrs

from workloadbuilder.api import (
    CompositePodGroup,
    PodGroup,
    Workload,
    object_from_dict,
    object_to_dict,
)
from workloadbuilder.cluster import Cluster, KubeObject, MemoryCluster
from workloadbuilder.errors import (
    AlreadyExists,
    ApiError,
    Invalid,
    NotFound,
    WorkloadBuilderError,
)
from workloadbuilder.kinds import Integration, NotManagedError
from workloadbuilder.resources import CPU
from workloadbuilder.resources import pod_requests as sdk_pod_requests
from workloadbuilder.runtime import Component, Reconciler
from workloadbuilder.simulator._clock import VirtualClock
from workloadbuilder.simulator._controllers import (
    JobRun,
    lws_restart,
    played_integrations,
    pod_controller,
)
from workloadbuilder.simulator._dra import ClaimLedger
from workloadbuilder.simulator._preemption import (
    PreemptionRecord,
    Preemptor,
    UnitResolver,
    VictimPod,
    record_preemption,
)
from workloadbuilder.simulator._recording import ControllerWrites, RecordingCluster
from workloadbuilder.simulator._result import (
    CompositeRecord,
    GroupRecord,
    NodeRecord,
    PodRecord,
    SimulationResult,
    Violation,
)
from workloadbuilder.simulator._scenario import (
    DURATION_ANNOTATION,
    Scenario,
    ScenarioError,
    ScenarioObject,
)
from workloadbuilder.simulator._units import parse_duration, parse_quantity

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
_COMPOSITE_CONDITION = "CompositePodGroupInitiallyScheduled"


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
    #: the manifest it was created from (a controller recreates a preempted pod from it)
    doc: dict[str, Any] | None = None
    priority: int | None = None
    preempted: float | None = None


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
    template: str | None = None
    parent: str | None = None
    key: str | None = None
    deleted: float | None = None
    preempted_at: list[float] = attrs.field(factory=list)


@attrs.define(kw_only=True)
class _CompositeState:
    namespace: str
    name: str
    owner: str
    arrival: float
    policy: str = "basic"
    min_group_count: int | None = None
    template: str | None = None
    parent: str | None = None
    key: str | None = None
    initially_scheduled: bool = False
    scheduled_at: float | None = None
    reason: str | None = None
    message: str | None = None
    deleted: float | None = None


def _topology_key(constraints: Any) -> str | None:
    if constraints is None or not constraints.topology:
        return None
    return str(constraints.topology[0].key)


def _default_cluster(clock: Callable[[], float]) -> Cluster:
    return MemoryCluster(clock=clock)


def _scheduler_factory(config: Any, preemption: bool = False) -> SchedulerFactory:
    def make(cluster: Cluster, clock: VirtualClock) -> SchedulerLike:
        from workloadbuilder.scheduler import Scheduler, SchedulerConfig

        sched: SchedulerLike = Scheduler(
            cluster,
            config if config is not None else SchedulerConfig(preemption=preemption),
            clock=clock,
        )
        return sched

    return make


def _scheduler_name(config: Any) -> str:
    if config is None:
        try:
            from workloadbuilder.scheduler import SchedulerConfig

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

    The Workloads, CompositePodGroups and PodGroups of Jobs, JobSets and LeaderWorkerSets are
    made by one :class:`workloadbuilder.runtime.Reconciler` per played kind (the integrations
    of :func:`._controllers.played_integrations`), stepped like the scheduler; the
    simulator only plays what their workload controllers do with pods.

    The loop, at each event time ``t``: create the objects that arrive at ``t`` (stepping the
    Reconcilers, then creating the pods), mark the pods whose duration ends at ``t`` as
    Succeeded, step the Reconcilers, ``await scheduler.sync()``,
    ``await scheduler.until_idle()``, step the Reconcilers again, record
    the pods bound at ``t`` (they then run for their duration), check the gang invariant, and
    advance to the next arrival, completion, scheduler or Reconciler wake-up
    (``next_wakeup()``) or clock
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
        self._scheduler_factory = scheduler_factory or _scheduler_factory(
            scheduler_config, scenario.preemption
        )
        self.scheduler_name = scheduler_name or _scheduler_name(scheduler_config)
        self._progress = progress
        self._max_rounds = max_rounds
        self._pods: dict[tuple[str, str], _PodState] = {}
        self._groups: dict[tuple[str, str], _GroupState] = {}
        self._composites: dict[tuple[str, str], _CompositeState] = {}
        self._prebound: dict[tuple[str, str], int] = {}
        self._members: dict[tuple[str, str], list[_PodState]] = {}
        self._reported: set[tuple[str, str, str]] = set()
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
        #: the played kinds' integrations and their Reconcilers (kind -> ...)
        self._integrations: dict[str, Integration] = played_integrations()
        self._reconcilers: dict[str, Reconciler] = {}
        self._written: list[KubeObject] = []
        #: (namespace, name) of a played Job -> the run that makes its pods
        self._job_runs: dict[tuple[str, str], JobRun] = {}
        self._removed: list[tuple[str, str, str]] = []
        #: pods the scheduler marked DisruptionTarget -> who preempts them
        self._marked: dict[tuple[str, str], Preemptor] = {}
        self._preemptions: list[PreemptionRecord] = []
        #: gangs that lost pods to preemption since their last binding (the gang invariant
        #: applies again when the scheduler binds their pods)
        self._shrunk: set[tuple[str, str]] = set()
        self._claims: ClaimLedger | None = None

    # -- public ---------------------------------------------------------------------------

    async def run(self) -> SimulationResult:
        """Run the scenario to the end (or the horizon) and return the result."""
        cluster = self._cluster_factory(self.clock.now)
        self._cluster = cluster
        end = 0.0
        try:
            await self._create_namespaces()
            recording = RecordingCluster(
                cluster,
                on_bind=self._on_bind,
                on_delete=self._on_delete,
                on_disruption=self._on_disruption,
            )
            ledger = self._claims = ClaimLedger(recording)  # DRA: the claims' allocations
            sched = self._scheduler_factory(ledger, self.clock)
            await self._start_controllers(cluster)
            await sched.start()
            try:
                end = await self._loop(sched)
                for gkey, state in list(self._groups.items()):
                    if not state.initially_scheduled:
                        await self._refresh_group(gkey, end)
                await self._refresh_composites(end)
                await ledger.collect(cluster)
            finally:
                await sched.stop()
                for reconciler in self._reconcilers.values():
                    await reconciler.stop()
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
            await self._step_controllers(t)
            await sched.sync()
            await sched.until_idle()
            await self._step_controllers(t)  # status mirroring of what the scheduler wrote
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
            for wake in (
                sched.next_wakeup(),
                *(r.next_wakeup() for r in self._reconcilers.values()),
            ):
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
        if obj.action == "update":
            await self._update(obj, t)
            return
        if obj.action == "delete":
            await self._delete(obj, t)
            return
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
            integration = self._integrations[kind]
            try:
                # what the integration's Reconciler will refuse (it records an event), said
                # here as a scenario error; the objects come from the Reconciler
                integration.plan(stored)
            except NotManagedError:
                pass
            except WorkloadBuilderError as e:
                raise self._error(obj, f"the {kind} adapter refused it: {e}") from None
            await self._step_controllers(t)
            meta = stored.get("metadata") or {}
            plan = self._reconcilers[kind].plans.get(f"{meta.get('namespace')}/{meta.get('name')}")
            try:
                planned = pod_controller(
                    stored, integration, plan.pod_group_for if plan is not None else None
                )
            except WorkloadBuilderError as e:
                raise self._error(obj, f"the {kind} adapter refused it: {e}") from None
            owner = f"{kind}/{obj.name}"
            if kind == "Job" and planned.runs:
                self._job_runs[(obj.namespace or "default", obj.name)] = planned.runs[0]
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
        self._register(stored, t, owner=owner, namespace=obj.namespace or "default")
        return stored

    def _register(
        self,
        stored: Workload | PodGroup | CompositePodGroup,
        t: float,
        *,
        owner: str,
        namespace: str,
    ) -> None:
        """Start recording a new PodGroup or CompositePodGroup."""
        if isinstance(stored, PodGroup):
            ns = stored.metadata.namespace or namespace
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
        elif isinstance(stored, CompositePodGroup):
            ns = stored.metadata.namespace or namespace
            name = stored.metadata.name or ""
            cstate = _CompositeState(namespace=ns, name=name, owner=owner, arrival=t)
            self._update_composite(cstate, stored, t)
            self._composites[(ns, name)] = cstate

    # -- the integrations ---------------------------------------------------------------------

    async def _start_controllers(self, cluster: Cluster) -> None:
        """One Reconciler per played kind the scenario has, on the cluster (through
        :class:`ControllerWrites`, which tells us what they write)."""
        kinds = {o.kind for o in self.scenario.objects if o.controlled}
        writes = ControllerWrites(
            cluster, on_write=self._on_controller_write, on_delete=self._on_controller_delete
        )
        for kind, integration in self._integrations.items():
            if kind not in kinds:
                continue
            reconciler = Reconciler(writes, integration, clock=self.clock)
            await reconciler.start()
            self._reconcilers[kind] = reconciler

    def _on_controller_write(self, stored: KubeObject) -> None:
        self._written.append(stored)

    def _on_controller_delete(self, kind: str, namespace: str, name: str) -> None:
        self._removed.append((kind, namespace, name))

    async def _step_controllers(self, t: float) -> None:
        """Step the Reconcilers as the scheduler is stepped (``sync``, ``until_idle``) until
        none has work left now, then record what they created, resized or deleted."""
        for _ in range(8):
            done = 0
            for reconciler in self._reconcilers.values():
                done += await reconciler.until_idle()
            if not done:
                break
        self._absorb(t)

    def _absorb(self, t: float) -> None:
        written, self._written = self._written, []
        for item in written:
            if not isinstance(item, (PodGroup, CompositePodGroup)):
                continue
            key = (item.metadata.namespace or "default", item.metadata.name or "")
            if isinstance(item, PodGroup):
                state = self._groups.get(key)
                if state is not None:
                    self._update_group(state, item, t)
                    continue
            else:
                cstate = self._composites.get(key)
                if cstate is not None:
                    self._update_composite(cstate, item, t)
                    continue
            self._register(item, t, owner=self._owner_of(item), namespace=key[0])
        removed, self._removed = self._removed, []
        for kind, ns, name in removed:
            if kind == "PodGroup" and (ns, name) in self._groups:
                self._groups[(ns, name)].deleted = t
            elif kind == "CompositePodGroup" and (ns, name) in self._composites:
                self._composites[(ns, name)].deleted = t

    def _owner_of(self, item: PodGroup | CompositePodGroup) -> str:
        """``Kind/name`` of the played object whose Reconciler controls ``item``."""
        for kind, reconciler in self._reconcilers.items():
            key = reconciler.owner_key_of(item)
            if key is not None:
                return f"{kind}/{key.partition('/')[2]}"
        return ""

    # -- updates and deletions --------------------------------------------------------------

    async def _update(self, obj: ScenarioObject, t: float) -> None:
        """Apply a later document as an update: the fields it sets replace the live object's,
        the fields the previous document set and this one drops are removed (like
        ``kubectl apply``); lists are replaced whole."""
        ns = obj.namespace
        try:
            current = await self.cluster.get(obj.kind, obj.name, ns)
        except NotFound:
            raise self._error(
                obj, f"NotFound: {obj.key} does not exist (any more) at this time"
            ) from None
        live = object_to_dict(current) if not isinstance(current, dict) else copy.deepcopy(current)
        merged = _apply(live, obj.previous or {}, obj.manifest)
        status = obj.manifest.get("status")
        merged.pop("status", None)
        item: KubeObject = merged
        if obj.kind in ("Workload", "PodGroup", "CompositePodGroup"):
            try:
                item = object_from_dict(merged)
            except Exception as e:  # CodecError: the scenario parser checked the document
                raise self._error(obj, str(e)) from None
        try:
            stored = await self.cluster.update(item)
        except ApiError as e:
            raise self._error(obj, _api_message(e)) from None
        if obj.kind == "Node":
            if status and status != (obj.previous or {}).get("status"):
                try:
                    await self.cluster.patch(
                        "Node", obj.name, {"status": status}, subresource="status"
                    )
                except ApiError as e:
                    raise self._error(obj, f"updating the status: {_api_message(e)}") from None
            labels = dict((merged.get("metadata") or {}).get("labels") or {})
            old = self._nodes.get(obj.name)
            alloc = (status or {}).get("allocatable")
            if old is not None:
                self._nodes[obj.name] = attrs.evolve(
                    old,
                    labels=labels,
                    allocatable={str(k): parse_quantity(v) for k, v in alloc.items()}
                    if alloc
                    else old.allocatable,
                )
        elif obj.kind == "Pod" and isinstance(stored, dict):
            st = self._pods.get((ns or "default", obj.name))
            node = (stored.get("spec") or {}).get("nodeName")
            if st is not None and node and st.node is None:  # the scenario bound it itself
                st.node, st.bound, st.preassigned, st.ours = str(node), t, True, False
                self._unbound.discard((st.namespace, st.name))
                if st.group:
                    gkey = (st.namespace, st.group)
                    self._prebound[gkey] = self._prebound.get(gkey, 0) + 1
                await self._start_running(st, t)
        elif obj.controlled and isinstance(stored, dict):
            await self._resize(obj, stored, t)
        elif isinstance(stored, PodGroup):
            state = self._groups.get((ns or "default", obj.name))
            if state is not None:
                self._update_group(state, stored, t)
        elif isinstance(stored, CompositePodGroup):
            cstate = self._composites.get((ns or "default", obj.name))
            if cstate is not None:
                self._update_composite(cstate, stored, t)

    async def _resize(self, obj: ScenarioObject, stored: dict[str, Any], t: float) -> None:
        """An elastic resize of a played object (``spec.parallelism`` of a Job,
        ``spec.replicas`` of a LeaderWorkerSet; the scenario parser refuses other updates):
        its Reconciler re-plans (patches ``minCount``, creates and deletes PodGroups), then the
        pods are added or removed as the workload controller would."""
        await self._step_controllers(t)
        ns = obj.namespace or "default"
        owner = f"{obj.kind}/{obj.name}"
        live = [
            st
            for st in self._pods.values()
            if st.owner == owner and st.namespace == ns and st.deleted is None
        ]
        active = [st for st in live if st.finished is None]
        if obj.kind == "Job":
            run = self._job_runs.get((ns, obj.name))
            if run is None:
                return
            run.parallelism = int((stored.get("spec") or {}).get("parallelism") or 0)
            want = run.parallelism
            if run.completions is not None:
                want = max(0, min(want, run.completions - run.created + len(active)))
            if want > len(active):
                for _ in range(want - len(active)):
                    await self._create_pod(obj, run.next_pod(), t, owner=owner, run=run)
            else:
                # kube-controller-manager deletes the excess active pods: unscheduled before
                # scheduled, newer before older (ties: the last created first)
                doomed = sorted(reversed(active), key=lambda st: (st.node is not None, -st.created))
                await self._delete_pods(doomed[: len(active) - want], t)
            return
        meta = stored.get("metadata") or {}
        plan = self._reconcilers[obj.kind].plans.get(f"{ns}/{meta.get('name')}")
        planned = pod_controller(
            stored,
            self._integrations[obj.kind],
            plan.pod_group_for if plan is not None else None,
        )
        wanted = {str(p["metadata"]["name"]) for p in planned.pods}
        known = {st.name for st in self._pods.values() if st.owner == owner and st.namespace == ns}
        await self._delete_pods([st for st in active if st.name not in wanted], t)
        for pod in planned.pods:
            if str(pod["metadata"]["name"]) not in known:
                await self._create_pod(obj, pod, t, owner=owner, run=None)

    async def _delete_pods(self, pods: list[_PodState], t: float) -> None:
        for st in pods:
            with contextlib.suppress(NotFound):
                await self.cluster.delete("Pod", st.name, st.namespace)
            self._vanished(st, t)

    async def _delete(self, obj: ScenarioObject, t: float) -> None:
        """Delete the object (its dependents go with it through garbage collection); a
        deleted Node takes its pods with it, as the pod garbage collector would."""
        try:
            # like kubectl delete: dependents are garbage-collected in the background
            await self.cluster.delete(
                obj.kind, obj.name, obj.namespace, propagation_policy="Background"
            )
        except NotFound:
            pass  # already gone (garbage-collected with its owner)
        except ApiError as e:
            raise self._error(obj, _api_message(e)) from None
        if obj.kind == "Node":
            for st in list(self._pods.values()):
                if st.node == obj.name and st.deleted is None:
                    with contextlib.suppress(NotFound):
                        await self.cluster.delete("Pod", st.name, st.namespace)
        key = (obj.namespace or "default", obj.name)
        if obj.kind == "PodGroup" and key in self._groups:
            self._groups[key].deleted = t
        if obj.kind == "CompositePodGroup" and key in self._composites:
            self._composites[key].deleted = t
        await self._step_controllers(t)
        await self._sweep(t)

    async def _sweep(self, t: float) -> None:
        """Mark the pods that are gone from the cluster (garbage collection) as deleted."""
        for _ in range(3):  # let the garbage collector run
            await asyncio.sleep(0)
        live = {_key_of(p) for p in (await self.cluster.list("Pod")).items if isinstance(p, dict)}
        for key, st in self._pods.items():
            if st.deleted is None and key not in live:
                self._vanished(st, t)

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
            doc=pod,
            priority=sspec.get("priority"),
        )
        if group:
            self._members.setdefault((ns, group), []).append(self._pods[(ns, name)])
        if node:
            st = self._pods[(ns, name)]
            st.node, st.bound = str(node), t
            if group:
                self._prebound[(ns, group)] = self._prebound.get((ns, group), 0) + 1
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

    def _on_disruption(self, namespace: str, name: str, preemptor: Preemptor) -> None:
        self._marked[(namespace, name)] = preemptor

    async def _preempted(self, victims: dict[Preemptor, list[_PodState]], t: float) -> None:
        """Record the preemptions at ``t``, check their invariants, and let the pods'
        controllers replace them (a Job makes a new pod with the same completion index; a
        LeaderWorkerSet recreates the victim's whole replica group with
        ``RecreateGroupOnPodRestart``, the default, or the same pod alone with ``None``; a
        scenario's own pods are not replaced)."""
        resolver = UnitResolver(self.cluster)
        labels = {n: r.labels for n, r in self._nodes.items()}
        for preemptor, states in victims.items():
            own = self._pods.get((preemptor.namespace, preemptor.name))
            rec = await record_preemption(
                resolver,
                t,
                preemptor,
                [
                    VictimPod(
                        namespace=st.namespace,
                        name=st.name,
                        group=st.group,
                        node=st.node,
                        priority=st.priority,
                    )
                    for st in states
                ],
                labels,
                preemptor_priority=own.priority if preemptor.kind == "Pod" and own else None,
            )
            self._preemptions.append(rec)
            for st in states:
                if st.group and (st.namespace, st.group) in self._groups:
                    g = self._groups[(st.namespace, st.group)]
                    if not g.preempted_at or g.preempted_at[-1] != t:
                        g.preempted_at.append(t)
            self._check_preemption(rec, t)
        restarted: set[tuple[str, str, str]] = set()
        for states in victims.values():
            for st in states:
                if st.doc is None or st.origin is None or not st.origin.controlled:
                    continue
                if st.origin.kind == "LeaderWorkerSet" and await self._restart_lws_group(
                    st, t, restarted
                ):
                    continue
                run = st.run
                pod = run.pod_deleted(st.doc) if run is not None else copy.deepcopy(st.doc)
                await self._create_pod(st.origin, pod, t, owner=st.owner, run=run)

    async def _restart_lws_group(
        self, st: _PodState, t: float, restarted: set[tuple[str, str, str]]
    ) -> bool:
        """The LeaderWorkerSet's group restart for its preempted pod ``st``: every other pod
        of the replica group is deleted and the whole group (leader first) created again,
        each pod with a new uid, so that the scheduler places it again as a gang. False when
        the policy recreates the pod alone (``None``, ``Default``; ``RecreateGroupAfterStart``
        while a pod of the group is still pending)."""
        assert st.origin is not None and st.doc is not None
        got = lws_restart(st.origin.manifest, st.doc)
        if got is None:
            return False
        policy, index = got
        key = (st.namespace, st.owner, index)
        if key in restarted:
            return True  # the group is already being recreated
        group = [
            m
            for m in self._pods.values()
            if m.owner == st.owner
            and m.namespace == st.namespace
            and m.doc is not None
            and lws_restart(st.origin.manifest, m.doc) == got
            and (m.deleted is None or m.preempted == t)
        ]
        pending = any(m.node is None and m.deleted is None for m in group)
        if policy == "RecreateGroupAfterStart" and pending:
            return False
        restarted.add(key)
        await self._delete_pods([m for m in group if m.deleted is None], t)
        for m in sorted(group, key=lambda m: m.created):
            assert m.origin is not None and m.doc is not None
            await self._create_pod(m.origin, copy.deepcopy(m.doc), t, owner=m.owner, run=None)
        return True

    def _check_preemption(self, rec: PreemptionRecord, t: float) -> None:
        """No victim of priority >= its preemptor's; no ``disruptionMode: all`` unit left
        partly running."""
        who = f"{rec.preemptor.kind} {rec.preemptor.namespace}/{rec.preemptor.name}"
        for v in rec.victims:
            if rec.priority is not None and v.priority is not None and v.priority >= rec.priority:
                self._violate(
                    t,
                    "preemption",
                    (v.namespace, v.name),
                    f"{who} (priority {rec.priority}) preempted {v.kind} {v.namespace}/{v.name} "
                    f"of priority {v.priority}",
                )
            if v.kind == "Pod":
                continue
            if v.kind == "PodGroup":
                groups = [(v.namespace, v.name)]
            else:
                groups = self._subtree_groups((v.namespace, v.name), self._children())
            left = [
                st.name
                for g in groups
                for st in self._members.get(g, ())
                if st.node is not None
                and st.deleted is None
                and st.finished is None
                and st.preempted is None
            ]
            if left:
                self._violate(
                    t,
                    "preemption",
                    (v.namespace, v.name),
                    f"{who} preempted {v.kind} {v.namespace}/{v.name} (disruptionMode all) only "
                    f"in part: {', '.join(sorted(left))} still running",
                    tag="-partial",
                )

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
                self._shrunk.discard(gkey)
                if st.ours:
                    self._bound_count[gkey] = self._bound_count.get(gkey, 0) + 1
            changed = True
            await self._start_running(st, t)
        deletes, self._deletes = self._deletes, []
        victims: dict[Preemptor, list[_PodState]] = {}
        for ns, name in deletes:
            st = self._pods.get((ns, name))
            preemptor = self._marked.pop((ns, name), None)
            if st is not None and st.deleted is None:
                if preemptor is not None and st.node is not None:
                    st.preempted = t
                    victims.setdefault(preemptor, []).append(st)
                self._vanished(st, t)
                if st.group:
                    touched.add((ns, st.group))
                changed = True
        if victims:
            await self._preempted(victims, t)
        for gkey in sorted(touched):
            await self._refresh_group(gkey, t)
        if touched and self._composites:
            await self._refresh_composites(t)
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
            if st.preempted is not None:
                self._shrunk.add(gkey)
        elif st.node is not None and st.preassigned and st.group:
            gkey = (st.namespace, st.group)
            self._prebound[gkey] = self._prebound.get(gkey, 1) - 1

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

    def _update_composite(self, state: _CompositeState, cpg: CompositePodGroup, t: float) -> None:
        policy = cpg.spec.scheduling_policy
        state.policy = "gang" if policy.gang is not None else "basic"
        state.min_group_count = policy.gang.min_group_count if policy.gang is not None else None
        state.template = cpg.spec.workload_ref.template_name
        state.parent = cpg.spec.parent_composite_pod_group_name
        state.key = _topology_key(cpg.spec.scheduling_constraints)
        for c in cpg.status.conditions if cpg.status is not None else ():
            if c.type != _COMPOSITE_CONDITION:
                continue
            state.reason = c.reason
            state.message = c.message or state.message
            if c.status == "True" and not state.initially_scheduled:
                state.initially_scheduled = True
                state.scheduled_at = t

    async def _refresh_composites(self, t: float) -> None:
        for state in self._composites.values():
            if state.initially_scheduled or state.deleted is not None:
                continue
            try:
                cpg = await self.cluster.get("CompositePodGroup", state.name, state.namespace)
            except NotFound:
                continue
            if isinstance(cpg, CompositePodGroup):
                self._update_composite(state, cpg, t)

    def _update_group(self, state: _GroupState, pg: PodGroup, t: float) -> None:
        state.template = pg.spec.workload_ref.template_name if pg.spec.workload_ref else None
        state.parent = pg.spec.parent_composite_pod_group_name
        state.key = _topology_key(pg.spec.scheduling_constraints)
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
        """The gang invariant, counting what the scheduler did: a gang of which the scheduler
        bound a pod has at least ``minCount`` bound pods (pods the scenario bound itself with
        ``nodeName`` count towards it); no CompositePodGroup gang has between 1 and
        ``minGroupCount - 1`` children with pods the scheduler bound; no group (or composite
        tree) with a topology constraint has pods the scheduler bound outside the one domain
        of its key."""
        for gkey, n in self._bound_count.items():
            g = self._groups.get(gkey)
            if g is None or n <= 0 or gkey in self._shrunk:
                continue
            total = n + max(0, self._prebound.get(gkey, 0))
            if g.quorum_at is None and total >= (g.min_count or 1):
                g.quorum_at = t
            if g.policy == "gang" and g.min_count is not None and total < g.min_count:
                self._violations.append(
                    Violation(
                        time=t, namespace=gkey[0], name=gkey[1], min_count=g.min_count, bound=total
                    )
                )
        if self._composites:
            self._check_composites(t)
        self._check_topology(t)

    def _children(self) -> dict[tuple[str, str], list[tuple[str, tuple[str, str]]]]:
        """CompositePodGroup -> its children (``("group" | "composite", key)``)."""
        out: dict[tuple[str, str], list[tuple[str, tuple[str, str]]]] = {}
        for gkey, g in self._groups.items():
            if g.parent:
                out.setdefault((gkey[0], g.parent), []).append(("group", gkey))
        for ckey, c in self._composites.items():
            if c.parent:
                out.setdefault((ckey[0], c.parent), []).append(("composite", ckey))
        return out

    def _subtree_groups(
        self,
        ckey: tuple[str, str],
        children: Mapping[tuple[str, str], list[tuple[str, tuple[str, str]]]],
        depth: int = 0,
    ) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        if depth > 8:  # a cycle: the scheduler marks such trees Invalid
            return out
        for what, key in children.get(ckey, ()):
            if what == "group":
                out.append(key)
            else:
                out.extend(self._subtree_groups(key, children, depth + 1))
        return out

    def _check_composites(self, t: float) -> None:
        children = self._children()
        for ckey, c in self._composites.items():
            if c.policy != "gang" or c.min_group_count is None:
                continue
            started = []
            if any(g in self._shrunk for g in self._subtree_groups(ckey, children)):
                continue  # lost pods to preemption: checked again when they are rebound
            for what, key in children.get(ckey, ()):
                groups = [key] if what == "group" else self._subtree_groups(key, children)
                if any(self._bound_count.get(g, 0) > 0 for g in groups):
                    started.append(key[1])
            if 0 < len(started) < c.min_group_count:
                self._violate(
                    t,
                    "composite",
                    ckey,
                    f"CompositePodGroup {ckey[0]}/{ckey[1]} had {len(started)} of minGroupCount "
                    f"{c.min_group_count} children with pods bound ({', '.join(sorted(started))})",
                    min_count=c.min_group_count,
                    bound=len(started),
                )

    def _domains_of(
        self, groups: list[tuple[str, str]], key: str
    ) -> tuple[dict[str | None, int], dict[str | None, int]]:
        """Per domain of ``key``, the live bound pods of ``groups``: (bound by the scheduler,
        bound by the scenario)."""
        ours: dict[str | None, int] = {}
        pre: dict[str | None, int] = {}
        for st in (p for g in groups for p in self._members.get(g, ())):
            if st.node is None or st.deleted is not None:
                continue
            node = self._nodes.get(st.node)
            value = node.labels.get(key) if node is not None else None
            into = ours if st.ours else pre
            into[value] = into.get(value, 0) + 1
        return ours, pre

    def _check_topology(self, t: float) -> None:
        checks: list[tuple[str, tuple[str, str], list[tuple[str, str]], str]] = [
            ("PodGroup", gkey, [gkey], g.key) for gkey, g in self._groups.items() if g.key
        ]
        if any(c.key for c in self._composites.values()):
            children = self._children()
            checks += [
                ("CompositePodGroup", ckey, self._subtree_groups(ckey, children), c.key)
                for ckey, c in self._composites.items()
                if c.key
            ]
        for kind, key, groups, tkey in checks:
            if ("topology", *key) in self._reported:
                continue
            if not any(self._bound_count.get(g, 0) > 0 for g in groups):
                continue
            ours, pre = self._domains_of(groups, tkey)
            both = set(ours) | set(pre)
            if None not in ours and len(both) <= max(1, len(pre)):
                continue
            parts = ", ".join(
                f"{v if v is not None else '(no label)'}: {ours.get(v, 0) + pre.get(v, 0)}"
                for v in sorted(both, key=lambda v: (v is None, v or ""))
            )
            self._violate(
                t,
                "topology",
                key,
                f"{kind} {key[0]}/{key[1]} has pods in {len(both)} domains of {tkey} ({parts})",
            )

    def _violate(
        self,
        t: float,
        kind: str,
        key: tuple[str, str],
        message: str,
        *,
        min_count: int = 0,
        bound: int = 0,
        tag: str = "",
    ) -> None:
        """Record a composite, topology or preemption violation once per object (and
        ``tag``)."""
        if (kind + tag, *key) in self._reported:
            return
        self._reported.add((kind + tag, *key))
        self._violations.append(
            Violation(
                time=t,
                namespace=key[0],
                name=key[1],
                min_count=min_count,
                bound=bound,
                type=kind,
                message=message,
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
                preempted=p.preempted,
            )
            for p in self._pods.values()
        )
        groups: list[GroupRecord] = []
        by_group: dict[tuple[str, str], list[PodRecord]] = {}
        for p in pods:
            if p.group is not None and p.deleted is None:
                by_group.setdefault((p.namespace, p.group), []).append(p)
        ancestors = self._ancestor_keys()
        for gkey, g in self._groups.items():
            live = by_group.get(gkey, [])
            keys = [*self.scenario.topology_keys, *ancestors(g.parent, gkey[0]), g.key]
            scheduled_at = g.scheduled_at if g.scheduled_at is not None else g.quorum_at
            reason, message = g.reason, g.message
            need = g.min_count or 1
            if scheduled_at is None and not g.initially_scheduled and len(live) < need:
                # gated (fewer pods than minCount): the scheduler writes no status for it
                reason = "Waiting"
                message = f"waiting: {len(live)} of {need} pod{'s' if need != 1 else ''} exist"
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
                    scheduled_at=scheduled_at,
                    nodes=tuple(sorted({p.node for p in live if p.node is not None})),
                    priority=g.priority,
                    reason=reason,
                    message=message,
                    wait_message=g.wait_message
                    if (g.scheduled_at or g.quorum_at) != g.arrival
                    else None,
                    template=g.template,
                    parent=g.parent,
                    key=g.key,
                    domains=self._domain_values(live, keys),
                    finished_at=_finished(live),
                    preempted_at=tuple(g.preempted_at),
                )
            )
        for gkey, live in by_group.items():  # pods naming a PodGroup that does not exist
            if gkey in self._groups or all(p.bound is not None for p in live):
                continue
            n = len(live)
            groups.append(
                GroupRecord(
                    namespace=gkey[0],
                    name=gkey[1],
                    policy="unknown",
                    min_count=None,
                    owner=live[0].owner,
                    arrival=min(p.created for p in live),
                    total_pods=n,
                    bound_pods=sum(1 for p in live if p.node is not None),
                    initially_scheduled=False,
                    scheduled_at=None,
                    nodes=(),
                    reason="Waiting",
                    message=f"waiting: PodGroup {gkey[0]}/{gkey[1]} does not exist "
                    f"({n} pod{' names' if n == 1 else 's name'} it)",
                )
            )
        composites = self._composite_records(groups, by_group)
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
            composites=composites,
            preemptions=tuple(self._preemptions),
            resource_claims=self._claims.records() if self._claims is not None else (),
        )

    def _ancestor_keys(self) -> Callable[[str | None, str], list[str | None]]:
        def keys(parent: str | None, ns: str) -> list[str | None]:
            out: list[str | None] = []
            seen: set[str] = set()
            while parent and parent not in seen:
                seen.add(parent)
                c = self._composites.get((ns, parent))
                if c is None:
                    break
                out.insert(0, c.key)
                parent = c.parent
            return out

        return keys

    def _domain_values(
        self, pods: list[PodRecord], keys: list[str | None]
    ) -> dict[str, str | list[str]]:
        out: dict[str, str | list[str]] = {}
        for key in dict.fromkeys(k for k in keys if k):
            values = sorted(
                {
                    v
                    for p in pods
                    if p.node is not None
                    and (
                        v := (
                            self._nodes[p.node].labels.get(key) if p.node in self._nodes else None
                        )
                    )
                    is not None
                }
            )
            if len(values) == 1:
                out[key] = values[0]
            elif values:
                out[key] = values
        return out

    def _composite_records(
        self,
        groups: list[GroupRecord],
        by_group: Mapping[tuple[str, str], list[PodRecord]],
    ) -> tuple[CompositeRecord, ...]:
        if not self._composites:
            return ()
        children = self._children()
        ancestors = self._ancestor_keys()
        by_key = {(g.namespace, g.name): g for g in groups}
        done: dict[tuple[str, str], float | None] = {}

        def scheduled(ckey: tuple[str, str], depth: int = 0) -> float | None:
            if ckey in done or depth > 8:
                return done.get(ckey)
            c = self._composites[ckey]
            times: list[float] = []
            for what, key in children.get(ckey, ()):
                if what == "group":
                    g = by_key.get(key)
                    at = g.scheduled_at if g is not None else None
                else:
                    at = scheduled(key, depth + 1)
                if at is not None:
                    times.append(at)
            need = c.min_group_count if c.policy == "gang" and c.min_group_count else 1
            times.sort()
            at = (
                c.scheduled_at
                if c.scheduled_at is not None
                else (times[need - 1] if len(times) >= need else None)
            )
            done[ckey] = at
            return at

        out: list[CompositeRecord] = []
        for ckey, c in self._composites.items():
            live = [p for g in self._subtree_groups(ckey, children) for p in by_group.get(g, ())]
            keys = [*self.scenario.topology_keys, *ancestors(c.parent, ckey[0]), c.key]
            out.append(
                CompositeRecord(
                    namespace=ckey[0],
                    name=ckey[1],
                    owner=c.owner,
                    arrival=c.arrival,
                    policy=c.policy,
                    min_group_count=c.min_group_count,
                    children=tuple(key[1] for _, key in children.get(ckey, ())),
                    initially_scheduled=c.initially_scheduled,
                    scheduled_at=scheduled(ckey),
                    reason=c.reason,
                    message=c.message,
                    template=c.template,
                    parent=c.parent,
                    key=c.key,
                    domains=self._domain_values(live, keys),
                )
            )
        return tuple(out)


def _apply(live: Any, previous: Any, new: Any, *, top: bool = True) -> Any:
    """``live`` with what ``new`` sets, minus what ``previous`` set and ``new`` drops (maps
    merge key by key, everything else is replaced; ``status`` is left alone)."""
    if not isinstance(new, dict) or not isinstance(live, dict):
        return copy.deepcopy(new)
    prev = previous if isinstance(previous, dict) else {}
    out = dict(live)
    for key in set(prev) | set(new):
        if top and key == "status":
            continue
        if key in new:
            out[key] = _apply(out.get(key), prev.get(key), new[key], top=False)
        else:
            out.pop(key, None)
    return out


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


def _finished(pods: list[PodRecord]) -> float | None:
    """When the last pod of a group finished; None while one is pending or running."""
    if not pods or any(p.finished is None for p in pods):
        return None
    return max(p.finished for p in pods if p.finished is not None)


async def simulate(scenario: Scenario, **kwargs: Any) -> SimulationResult:
    """Run ``scenario`` (see :class:`Simulation` for the keyword arguments)."""
    return await Simulation(scenario, **kwargs).run()
