"""What the simulator does to the cluster in place of the workload controllers and the kubelet:
create the scenario's objects (their API errors said as scenario errors), create pods, mark
them Running and Succeeded when their duration ends, delete them, and replace preempted ones
as their controllers would. Each change is recorded in the :class:`._world.World`."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import heapq
import itertools
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from workloadbuilder.cluster import Cluster, KubeObject
from workloadbuilder.errors import AlreadyExists, ApiError, Invalid, NotFound
from workloadbuilder.resources import CPU
from workloadbuilder.resources import pod_requests as sdk_pod_requests
from workloadbuilder.simulator._clock import VirtualClock
from workloadbuilder.simulator._controllers import JobRun, lws_restart
from workloadbuilder.simulator._preemption import Preemptor
from workloadbuilder.simulator._scenario import DURATION_ANNOTATION, ScenarioError, ScenarioObject
from workloadbuilder.simulator._units import parse_duration
from workloadbuilder.simulator._world import Key, PodState, World

__all__ = ["PodLifecycle", "api_message", "pod_requests"]

_log = logging.getLogger(__name__)


def pod_requests(spec: Mapping[str, Any]) -> dict[str, float]:
    """Effective resource requests of a pod spec, computed by the SDK as kube-scheduler does
    (:func:`workloadbuilder.resources.pod_requests`: containers, init and sidecar containers,
    pod-level resources, overhead), in the simulator's units: cores for ``cpu``, plain
    numbers otherwise. Malformed quantities are skipped (admission reports them)."""
    return {
        name: amount / 1000 if name == CPU else float(amount)
        for name, amount in sdk_pod_requests(spec, strict=False).items()
    }


def api_message(e: ApiError) -> str:
    """The API error in words (an Invalid's causes, else its message)."""
    if isinstance(e, Invalid) and e.causes:
        return "; ".join(str(c) for c in e.causes)
    return e.message


def _iso(epoch_seconds: float) -> str:
    return datetime.fromtimestamp(epoch_seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _key_of(item: KubeObject) -> Key:
    meta = (item.get("metadata") or {}) if isinstance(item, dict) else {}
    return (str(meta.get("namespace")), str(meta.get("name")))


def _name_of(item: KubeObject) -> str:
    if isinstance(item, dict):
        meta = item.get("metadata") or {}
        ns = f"{meta['namespace']}/" if meta.get("namespace") else ""
        return f"{item.get('kind')} {ns}{meta.get('name')}"
    ns = f"{item.metadata.namespace}/" if item.metadata.namespace else ""
    return f"{item.kind} {ns}{item.metadata.name}"


class PodLifecycle:
    """The pods' side of the simulation on ``cluster`` (see the module docstring); pods of
    ``scheduler_name`` without a node are the scheduler's to bind. ``source`` names the
    scenario in errors."""

    def __init__(
        self,
        world: World,
        clock: VirtualClock,
        cluster: Cluster,
        *,
        scheduler_name: str,
        source: str,
    ) -> None:
        self.world = world
        self.clock = clock
        self.cluster = cluster
        self.scheduler_name = scheduler_name
        self.source = source
        #: (time, sequence, pod) of the running pods that finish
        self._completions: list[tuple[float, int, Key]] = []
        self._seq = itertools.count()

    # -- objects ------------------------------------------------------------------------------

    def error(self, obj: ScenarioObject, message: str, path: str = "") -> ScenarioError:
        """A scenario error about ``obj``'s document."""
        return ScenarioError(
            message, source=self.source, document=obj.document, what=obj.key, path=path
        )

    async def create(self, obj: ScenarioObject, item: KubeObject) -> KubeObject:
        """Create ``item`` for ``obj`` (an existing Namespace is fine); API errors become
        scenario errors."""
        try:
            return await self.cluster.create(item)
        except AlreadyExists as e:
            if isinstance(item, dict) and item.get("kind") == "Namespace":
                return item
            raise self.error(obj, api_message(e)) from None
        except ApiError as e:
            name = _name_of(item)
            prefix = "" if name == obj.key else f"creating {name}: "
            raise self.error(obj, prefix + api_message(e)) from None

    # -- pods ---------------------------------------------------------------------------------

    async def create_pod(
        self,
        obj: ScenarioObject,
        pod: dict[str, Any],
        t: float,
        *,
        owner: str,
        run: JobRun | None,
    ) -> None:
        """Create ``pod`` for ``obj`` at ``t`` (``run``: the Job run that made it) and record
        it; a pod with ``spec.nodeName`` starts running at once."""
        pod = dict(pod)
        meta = dict(pod.get("metadata") or {})
        spec = dict(pod.get("spec") or {})
        pod["metadata"], pod["spec"] = meta, spec
        meta.setdefault("namespace", obj.namespace or "default")
        spec.setdefault("schedulerName", self.scheduler_name)
        stored = await self.create(obj, pod)
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
                raise self.error(
                    obj, f"Invalid value: {e}", f"metadata.annotations[{DURATION_ANNOTATION}]"
                ) from None
        elif duration is None and group and (ns, group) in self.world.groups:
            duration = self.world.groups[(ns, group)].duration
        node = sspec.get("nodeName")
        st = PodState(
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
        self.world.add_pod(st, node, t)
        if node:
            await self.start_running(st, t)

    async def start_running(self, st: PodState, t: float) -> None:
        """Mark the bound pod ``st`` Running at ``t``; it finishes after its duration."""
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
            self.world.running.add((st.namespace, st.name))
        if st.duration is not None:
            heapq.heappush(
                self._completions, (t + st.duration, next(self._seq), (st.namespace, st.name))
            )

    def next_completion(self) -> float | None:
        """When the next running pod finishes."""
        return self._completions[0][0] if self._completions else None

    async def complete_due(self, t: float) -> bool:
        """Let the pods whose duration ends by ``t`` succeed; False when none did."""
        changed = False
        while self._completions and self._completions[0][0] <= t:
            _, _, key = heapq.heappop(self._completions)
            await self._complete(key, t)
            changed = True
        return changed

    async def _complete(self, key: Key, t: float) -> None:
        st = self.world.pods.get(key)
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
            self.world.vanished(st, t)
            return
        self.world.finish(st, t)
        if st.run is not None and st.origin is not None:
            for pod in st.run.pod_succeeded():
                await self.create_pod(st.origin, pod, t, owner=st.owner, run=st.run)

    async def delete_pods(self, pods: list[PodState], t: float) -> None:
        """Delete ``pods`` (as their controller would) at ``t``."""
        for st in pods:
            with contextlib.suppress(NotFound):
                await self.cluster.delete("Pod", st.name, st.namespace)
            self.world.vanished(st, t)

    async def sweep(self, t: float) -> None:
        """Mark the pods that are gone from the cluster (garbage collection) as deleted."""
        for _ in range(3):  # let the garbage collector run
            await asyncio.sleep(0)
        live = {_key_of(p) for p in (await self.cluster.list("Pod")).items if isinstance(p, dict)}
        for key, st in self.world.pods.items():
            if st.deleted is None and key not in live:
                self.world.vanished(st, t)

    # -- preempted pods -----------------------------------------------------------------------

    async def replace_preempted(
        self, victims: Mapping[Preemptor, list[PodState]], t: float
    ) -> None:
        """Let the preempted pods' controllers replace them (a Job makes a new pod with the
        same completion index; a LeaderWorkerSet recreates the victim's whole replica group
        with ``RecreateGroupOnPodRestart``, the default, or the same pod alone with ``None``;
        a scenario's own pods are not replaced)."""
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
                await self.create_pod(st.origin, pod, t, owner=st.owner, run=run)

    async def _restart_lws_group(
        self, st: PodState, t: float, restarted: set[tuple[str, str, str]]
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
            for m in self.world.pods.values()
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
        await self.delete_pods([m for m in group if m.deleted is None], t)
        for m in sorted(group, key=lambda m: m.created):
            assert m.origin is not None and m.doc is not None
            await self.create_pod(m.origin, copy.deepcopy(m.doc), t, owner=m.owner, run=None)
        return True
