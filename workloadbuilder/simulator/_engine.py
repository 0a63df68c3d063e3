"""The discrete-event loop: arrivals, pod completions and scheduler wake-ups on virtual time.

What the simulation recorded is kept in a :class:`._world.World`; the pods' side (creation,
running, completion, deletion, replacement) is :class:`._lifecycle.PodLifecycle`; the
invariants checked after every round are :mod:`._invariants`; the result is assembled by
:mod:`._assembly`.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from workloadbuilder.api import (
    CompositePodGroup,
    PodGroup,
    Workload,
    object_from_dict,
    object_to_dict,
)
from workloadbuilder.cluster import Cluster, KubeObject, MemoryCluster
from workloadbuilder.errors import AlreadyExists, ApiError, NotFound, WorkloadBuilderError
from workloadbuilder.kinds import Integration, NotManagedError
from workloadbuilder.runtime import Component, Reconciler
from workloadbuilder.simulator._assembly import assemble_result
from workloadbuilder.simulator._clock import VirtualClock
from workloadbuilder.simulator._controllers import JobRun, played_integrations, pod_controller
from workloadbuilder.simulator._dra import ClaimLedger
from workloadbuilder.simulator._invariants import ViolationLog, check_round, preemption_order
from workloadbuilder.simulator._lifecycle import PodLifecycle, api_message
from workloadbuilder.simulator._preemption import (
    PreemptionRecord,
    Preemptor,
    UnitResolver,
    VictimPod,
    record_preemption,
)
from workloadbuilder.simulator._recording import ControllerWrites, RecordingCluster
from workloadbuilder.simulator._result import NodeRecord, SimulationResult
from workloadbuilder.simulator._scenario import Scenario, ScenarioObject
from workloadbuilder.simulator._units import parse_quantity
from workloadbuilder.simulator._world import Key, PodState, World, update_composite, update_group

if TYPE_CHECKING:
    from workloadbuilder.scheduler import SchedulerConfig

__all__ = [
    "ProgressInfo",
    "SchedulerLike",
    "Simulation",
    "simulate",
]

_log = logging.getLogger(__name__)


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


def _default_cluster(clock: Callable[[], float]) -> Cluster:
    return MemoryCluster(clock=clock)


def _scheduler_factory(
    config: SchedulerConfig | None, preemption: bool = False
) -> SchedulerFactory:
    def make(cluster: Cluster, clock: VirtualClock) -> SchedulerLike:
        from workloadbuilder.scheduler import Scheduler, SchedulerConfig

        sched: SchedulerLike = Scheduler(
            cluster,
            config if config is not None else SchedulerConfig(preemption=preemption),
            clock=clock,
        )
        return sched

    return make


def _scheduler_name(config: SchedulerConfig | None) -> str:
    """The pods' ``schedulerName``: the config's, else the scheduler's default."""
    if config is not None:
        return config.scheduler_name
    # imported here: the scheduler (numpy) is loaded when a simulation is made, not with
    # the simulate command
    from workloadbuilder.scheduler import DEFAULT_SCHEDULER_NAME

    return DEFAULT_SCHEDULER_NAME


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
        scheduler_config: SchedulerConfig | None = None,
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
        self._world = World()
        self._violations = ViolationLog()
        self._rounds = 0
        self._cluster: Cluster | None = None
        self._lifecycle: PodLifecycle | None = None
        #: what the scheduler did since the last round (reported by the RecordingCluster)
        self._binds: list[tuple[str, str, str]] = []
        self._deletes: list[tuple[str, str]] = []
        #: pods the scheduler marked DisruptionTarget -> who preempts them
        self._marked: dict[Key, Preemptor] = {}
        self._preemptions: list[PreemptionRecord] = []
        #: the played kinds' integrations and their Reconcilers (kind -> ...)
        self._integrations: dict[str, Integration] = played_integrations()
        self._reconcilers: dict[str, Reconciler] = {}
        #: what the Reconcilers wrote and deleted since they were last stepped
        self._written: list[KubeObject] = []
        self._removed: list[tuple[str, str, str]] = []
        #: (namespace, name) of a played Job -> the run that makes its pods
        self._job_runs: dict[Key, JobRun] = {}
        self._claims: ClaimLedger | None = None

    # -- public ---------------------------------------------------------------------------

    async def run(self) -> SimulationResult:
        """Run the scenario to the end (or the horizon) and return the result."""
        cluster = self._cluster_factory(self.clock.now)
        self._cluster = cluster
        self._lifecycle = PodLifecycle(
            self._world,
            self.clock,
            cluster,
            scheduler_name=self.scheduler_name,
            source=self.scenario.source,
        )
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
                for gkey, state in list(self._world.groups.items()):
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
        return assemble_result(
            self._world,
            self.scenario,
            scheduler_name=self.scheduler_name,
            end=end,
            rounds=self._rounds,
            until=self.until,
            violations=self._violations.violations,
            preemptions=self._preemptions,
            resource_claims=self._claims.records() if self._claims is not None else (),
        )

    @property
    def cluster(self) -> Cluster:
        """The cluster of the running simulation."""
        if self._cluster is None:
            raise RuntimeError("the simulation is not running")
        return self._cluster

    @property
    def _life(self) -> PodLifecycle:
        if self._lifecycle is None:
            raise RuntimeError("the simulation is not running")
        return self._lifecycle

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
            if await self._life.complete_due(t):
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
            completion = self._life.next_completion()
            if completion is not None:
                external.append(completion)
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
                if not self._world.anything_pending():
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

    def _progress_info(self, t: float) -> ProgressInfo:
        world = self._world
        live = len(world.pods) - world.deleted
        return ProgressInfo(
            time=t,
            rounds=self._rounds,
            pods_total=live,
            pods_bound=live - len(world.unbound),
            groups_waiting=sum(1 for g in world.groups.values() if not g.initially_scheduled),
        )

    # -- arrivals ---------------------------------------------------------------------------

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
            stored = await self._life.create(obj, manifest)
            await self._ensure_node_status(obj, manifest, stored)
            alloc = (manifest.get("status") or {}).get("allocatable") or {}
            self._world.nodes[obj.name] = NodeRecord(
                name=obj.name,
                allocatable={str(k): parse_quantity(v) for k, v in alloc.items()},
                labels=dict((manifest.get("metadata") or {}).get("labels") or {}),
                added=t,
            )
        elif kind in ("Workload", "PodGroup", "CompositePodGroup"):
            model = object_from_dict(manifest)
            await self._create_scheduling_object(obj, model, t, owner="")
        elif kind == "Pod":
            await self._life.create_pod(obj, manifest, t, owner="", run=None)
        elif obj.controlled:
            stored = await self._life.create(obj, manifest)
            if not isinstance(stored, dict):
                raise self._life.error(obj, "the cluster returned an unexpected object")
            integration = self._integrations[kind]
            try:
                # what the integration's Reconciler will refuse (it records an event), said
                # here as a scenario error; the objects come from the Reconciler
                integration.plan(stored)
            except NotManagedError:
                pass
            except WorkloadBuilderError as e:
                raise self._life.error(obj, f"the {kind} adapter refused it: {e}") from None
            await self._step_controllers(t)
            meta = stored.get("metadata") or {}
            plan = self._reconcilers[kind].plans.get(f"{meta.get('namespace')}/{meta.get('name')}")
            try:
                planned = pod_controller(
                    stored, integration, plan.pod_group_for if plan is not None else None
                )
            except WorkloadBuilderError as e:
                raise self._life.error(obj, f"the {kind} adapter refused it: {e}") from None
            owner = f"{kind}/{obj.name}"
            if kind == "Job" and planned.runs:
                self._job_runs[(obj.namespace or "default", obj.name)] = planned.runs[0]
            for run in planned.runs:
                for pod in run.initial_pods():
                    await self._life.create_pod(obj, pod, t, owner=owner, run=run)
            for pod in planned.pods:
                await self._life.create_pod(obj, pod, t, owner=owner, run=None)
        else:
            await self._life.create(obj, manifest)

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
            raise self._life.error(obj, f"setting the node status: {api_message(e)}") from None

    async def _create_scheduling_object(
        self,
        obj: ScenarioObject,
        model: Workload | PodGroup | CompositePodGroup,
        t: float,
        *,
        owner: str,
    ) -> Workload | PodGroup | CompositePodGroup:
        stored = await self._life.create(obj, model)
        if not isinstance(stored, (Workload, PodGroup, CompositePodGroup)):
            raise self._life.error(
                obj, f"the cluster returned an unexpected {type(stored).__name__}"
            )
        self._world.register(stored, t, owner=owner, namespace=obj.namespace or "default")
        return stored

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
        written, self._written = self._written, []
        removed, self._removed = self._removed, []
        self._world.absorb(written, removed, t, self._owner_of)

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
            raise self._life.error(
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
                raise self._life.error(obj, str(e)) from None
        try:
            stored = await self.cluster.update(item)
        except ApiError as e:
            raise self._life.error(obj, api_message(e)) from None
        if obj.kind == "Node":
            if status and status != (obj.previous or {}).get("status"):
                try:
                    await self.cluster.patch(
                        "Node", obj.name, {"status": status}, subresource="status"
                    )
                except ApiError as e:
                    raise self._life.error(obj, f"updating the status: {api_message(e)}") from None
            labels = dict((merged.get("metadata") or {}).get("labels") or {})
            old = self._world.nodes.get(obj.name)
            alloc = (status or {}).get("allocatable")
            if old is not None:
                self._world.nodes[obj.name] = attrs.evolve(
                    old,
                    labels=labels,
                    allocatable={str(k): parse_quantity(v) for k, v in alloc.items()}
                    if alloc
                    else old.allocatable,
                )
        elif obj.kind == "Pod" and isinstance(stored, dict):
            st = self._world.pods.get((ns or "default", obj.name))
            node = (stored.get("spec") or {}).get("nodeName")
            if st is not None and node and st.node is None:  # the scenario bound it itself
                self._world.prebind(st, str(node), t)
                await self._life.start_running(st, t)
        elif obj.controlled and isinstance(stored, dict):
            await self._resize(obj, stored, t)
        elif isinstance(stored, PodGroup):
            state = self._world.groups.get((ns or "default", obj.name))
            if state is not None:
                update_group(state, stored, t)
        elif isinstance(stored, CompositePodGroup):
            cstate = self._world.composites.get((ns or "default", obj.name))
            if cstate is not None:
                update_composite(cstate, stored, t)

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
            for st in self._world.pods.values()
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
                    await self._life.create_pod(obj, run.next_pod(), t, owner=owner, run=run)
            else:
                # kube-controller-manager deletes the excess active pods: unscheduled before
                # scheduled, newer before older (ties: the last created first)
                doomed = sorted(reversed(active), key=lambda st: (st.node is not None, -st.created))
                await self._life.delete_pods(doomed[: len(active) - want], t)
            return
        meta = stored.get("metadata") or {}
        plan = self._reconcilers[obj.kind].plans.get(f"{ns}/{meta.get('name')}")
        planned = pod_controller(
            stored,
            self._integrations[obj.kind],
            plan.pod_group_for if plan is not None else None,
        )
        wanted = {str(p["metadata"]["name"]) for p in planned.pods}
        known = {
            st.name for st in self._world.pods.values() if st.owner == owner and st.namespace == ns
        }
        await self._life.delete_pods([st for st in active if st.name not in wanted], t)
        for pod in planned.pods:
            if str(pod["metadata"]["name"]) not in known:
                await self._life.create_pod(obj, pod, t, owner=owner, run=None)

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
            raise self._life.error(obj, api_message(e)) from None
        if obj.kind == "Node":
            for st in list(self._world.pods.values()):
                if st.node == obj.name and st.deleted is None:
                    with contextlib.suppress(NotFound):
                        await self.cluster.delete("Pod", st.name, st.namespace)
        key = (obj.namespace or "default", obj.name)
        self._world.deleted_object(obj.kind, key, t)
        await self._step_controllers(t)
        await self._life.sweep(t)

    # -- observation ------------------------------------------------------------------------

    def _on_bind(self, namespace: str, name: str, node: str) -> None:
        self._binds.append((namespace, name, node))

    def _on_delete(self, namespace: str, name: str) -> None:
        self._deletes.append((namespace, name))

    def _on_disruption(self, namespace: str, name: str, preemptor: Preemptor) -> None:
        self._marked[(namespace, name)] = preemptor

    async def _preempted(self, victims: dict[Preemptor, list[PodState]], t: float) -> None:
        """Record the preemptions at ``t``, check their invariants, and let the pods'
        controllers replace them (:meth:`PodLifecycle.replace_preempted`)."""
        resolver = UnitResolver(self.cluster)
        labels = {n: r.labels for n, r in self._world.nodes.items()}
        for preemptor, states in victims.items():
            own = self._world.pods.get((preemptor.namespace, preemptor.name))
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
            self._world.mark_preempted(states, t)
            self._violations.add(preemption_order(self._world, rec, t))
        await self._life.replace_preempted(victims, t)

    async def _observe(self, sched: SchedulerLike, t: float) -> bool:
        """Record the bindings and deletions the scheduler made at time ``t`` (reported by
        the :class:`RecordingCluster` it talks to), refresh the status of the groups that
        changed, and check the invariant. Returns True when a pod was bound or deleted."""
        world = self._world
        changed = False
        touched: set[Key] = set()
        binds, self._binds = self._binds, []
        for ns, name, node in binds:
            st = world.pods.get((ns, name))
            if st is None or st.node is not None:
                continue
            gkey = world.bind(st, node, t)
            if gkey is not None:
                touched.add(gkey)
            changed = True
            await self._life.start_running(st, t)
        deletes, self._deletes = self._deletes, []
        victims: dict[Preemptor, list[PodState]] = {}
        for ns, name in deletes:
            st = world.pods.get((ns, name))
            preemptor = self._marked.pop((ns, name), None)
            if st is not None and st.deleted is None:
                if preemptor is not None and st.node is not None:
                    st.preempted = t
                    victims.setdefault(preemptor, []).append(st)
                world.vanished(st, t)
                if st.group:
                    touched.add((ns, st.group))
                changed = True
        if victims:
            await self._preempted(victims, t)
        for gkey in sorted(touched):
            await self._refresh_group(gkey, t)
        if touched and world.composites:
            await self._refresh_composites(t)
        for gkey, state in world.groups.items():
            if state.initially_scheduled:
                continue
            explanation = sched.explanations.get(gkey)
            if explanation:
                state.message = explanation
                state.wait_message = explanation
        world.note_quorums(t)
        check_round(world, self._violations, t)
        return changed

    async def _refresh_group(self, gkey: Key, t: float) -> None:
        state = self._world.groups.get(gkey)
        if state is None:
            return
        try:
            pg = await self.cluster.get("PodGroup", state.name, state.namespace)
        except NotFound:
            return
        if isinstance(pg, PodGroup):
            update_group(state, pg, t)

    async def _refresh_composites(self, t: float) -> None:
        for state in self._world.composites.values():
            if state.initially_scheduled or state.deleted is not None:
                continue
            try:
                cpg = await self.cluster.get("CompositePodGroup", state.name, state.namespace)
            except NotFound:
                continue
            if isinstance(cpg, CompositePodGroup):
                update_composite(state, cpg, t)


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


async def simulate(scenario: Scenario, **kwargs: Any) -> SimulationResult:
    """Run ``scenario`` (see :class:`Simulation` for the keyword arguments)."""
    return await Simulation(scenario, **kwargs).run()
