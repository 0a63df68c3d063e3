"""The simulator's scheduling objects come from the integrations' Reconcilers: created,
resized (elastic) and deleted by the same code that runs in a cluster, with its field
manager; the simulator only plays the pods."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import yaml
from sim_helpers import gang, job, nodes, scenario

from workloadbuilder.cluster import Cluster, ClusterProxy, KubeObject, MemoryCluster, ResourceInfo
from workloadbuilder.simulator import ScenarioError, Simulation, SimulationResult, parse_scenario

_SCHEDULING = ("Workload", "PodGroup", "CompositePodGroup")
AT = "sim.workloadbuilder.io/at"
#: the field manager of every write of a Reconciler (its ``component``)
RECONCILER = "workloadbuilder-integrations"


class _Writes(ClusterProxy):
    """Records (time, verb, kind, name, field manager) of every write of a scheduling
    object."""

    def __init__(self, inner: Cluster, clock: Callable[[], float]) -> None:
        super().__init__(inner)
        self.clock = clock
        self.log: list[tuple[float, str, str, str, str | None]] = []

    def _kind(self, kind: str | ResourceInfo) -> str:
        return kind if isinstance(kind, str) else kind.kind

    async def create(self, obj: KubeObject, namespace: str | None = None, **kw: Any) -> KubeObject:
        out = await super().create(obj, namespace, **kw)
        kind = out.get("kind") if isinstance(out, dict) else out.kind
        if kind in _SCHEDULING:
            name = out["metadata"]["name"] if isinstance(out, dict) else out.metadata.name
            self.log.append((self.clock(), "create", str(kind), str(name), kw.get("field_manager")))
        return out

    async def patch(self, kind: str | ResourceInfo, name: str, *args: Any, **kw: Any) -> KubeObject:
        out = await super().patch(kind, name, *args, **kw)
        if self._kind(kind) in _SCHEDULING and kw.get("subresource") is None:
            self.log.append(
                (self.clock(), "patch", self._kind(kind), name, kw.get("field_manager"))
            )
        return out

    async def delete(self, kind: Any, name: str, namespace: str | None = None, **kw: Any) -> None:
        await super().delete(kind, name, namespace, **kw)
        if self._kind(kind) in _SCHEDULING:
            self.log.append((self.clock(), "delete", self._kind(kind), name, None))


async def _run(text: str) -> tuple[SimulationResult, _Writes]:
    box: list[_Writes] = []

    def factory(clock: Callable[[], float]) -> Cluster:
        writes = _Writes(MemoryCluster(clock=clock), lambda: clock() - start)
        box.append(writes)
        return writes

    sim = Simulation(parse_scenario(text), cluster_factory=factory)
    start = sim.clock.now()
    result = await sim.run()
    return result, box[0]


def _later(doc: str, at: str, **spec: Any) -> str:
    obj = yaml.safe_load(doc)
    obj["metadata"]["annotations"] = {AT: at}
    obj["spec"].update(spec)
    return yaml.safe_dump(obj)


def _lws(name: str, replicas: int, size: int, cpu: str) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "metadata": {"name": name},
            "spec": {
                "replicas": replicas,
                "scheduling": {"schedulingPolicy": {"gang": {}}},
                "leaderWorkerTemplate": {
                    "size": size,
                    "workerTemplate": {
                        "spec": {
                            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]
                        }
                    },
                },
            },
        }
    )


async def test_job_objects_come_from_the_reconciler() -> None:
    result, writes = await _run(scenario(nodes(2, "4"), job("j", 2, "4", duration="1m")))
    created = [(verb, kind) for _, verb, kind, _, _ in writes.log]
    assert created == [("create", "Workload"), ("create", "PodGroup")]
    # written by the Reconciler (its field manager), not by the simulator
    assert {manager for *_, manager in writes.log} == {RECONCILER}
    [g] = result.groups
    assert g.owner == "Job/j" and g.min_count == 2 and g.scheduled_at == 0.0


async def test_elastic_job_resize_patches_min_count_through_the_integration() -> None:
    # 4 pods of 4 cpu on two 4-cpu nodes: the gang of 4 waits; at 30s parallelism 2
    first = job("j", 4, "4", duration="1m")
    text = scenario(nodes(2, "4"), first, _later(first, "30s", parallelism=2))
    result, writes = await _run(text)
    [g] = result.groups
    assert g.min_count == 2 and g.scheduled_at == 30.0 and g.bound_pods == 2
    patches = [(t, kind, m) for t, verb, kind, _, m in writes.log if verb == "patch"]
    # the Workload's template and the PodGroup follow parallelism (the native controller's)
    assert patches == [(30.0, "Workload", RECONCILER), (30.0, "PodGroup", RECONCILER)]
    pods = {p.name: p for p in result.pods}
    # kube-controller-manager's choice: the excess pods (all unscheduled) newest first
    assert pods["j-2"].deleted == 30.0 and pods["j-3"].deleted == 30.0
    assert pods["j-0"].bound == 30.0 and pods["j-1"].bound == 30.0
    assert result.violations == ()


async def test_elastic_job_scale_up_adds_pods_and_raises_min_count() -> None:
    first = job("j", 1, "4", duration="2m")
    text = scenario(nodes(2, "4"), first, _later(first, "30s", parallelism=2))
    result, _ = await _run(text)
    [g] = result.groups
    assert g.min_count == 2 and g.bound_pods == 2
    pods = {p.name: p for p in result.pods}
    assert pods["j-0"].bound == 0.0 and pods["j-1"].created == 30.0
    assert pods["j-1"].bound == 30.0 and pods["j-1"].group == g.name


async def test_lws_scale_down_deletes_the_replica_group_and_its_pods() -> None:
    first = _lws("inf", 2, 2, "1")
    text = scenario(nodes(2, "4"), first, _later(first, "30s", replicas=1))
    result, writes = await _run(text)
    deleted = [(t, kind, name) for t, verb, kind, name, _ in writes.log if verb == "delete"]
    assert [(t, kind) for t, kind, _ in deleted] == [(30.0, "PodGroup")]
    gone = deleted[0][2]
    pods = {p.name: p for p in result.pods}
    assert {n for n, p in pods.items() if p.deleted is not None} == {"inf-1", "inf-1-1"}
    assert all(p.group == gone for n, p in pods.items() if n.startswith("inf-1"))
    assert pods["inf-0"].deleted is None and pods["inf-0"].bound == 0.0


async def test_lws_scale_up_creates_a_group_the_scheduler_places() -> None:
    first = _lws("inf", 1, 2, "2")
    text = scenario(nodes(2, "4"), first, _later(first, "1m", replicas=2))
    result, writes = await _run(text)
    creates = [(t, kind) for t, verb, kind, _, _ in writes.log if verb == "create"]
    assert creates == [(0.0, "Workload"), (0.0, "PodGroup"), (60.0, "PodGroup")]
    late = [g for g in result.groups if g.arrival == 60.0]
    assert len(late) == 1 and late[0].owner == "LeaderWorkerSet/inf"
    assert late[0].min_count == 2 and late[0].scheduled_at == 60.0 and late[0].bound_pods == 2
    assert result.violations == ()


@pytest.mark.parametrize(
    ("doc", "change", "words"),
    [
        (job("j", 2, "1"), {"completions": 4}, "except a change of spec.parallelism"),
        (_lws("inf", 1, 2, "1"), {"startupPolicy": "LeaderReady"}, "spec.replicas"),
    ],
)
def test_other_updates_of_played_kinds_are_refused(
    doc: str, change: dict[str, Any], words: str
) -> None:
    with pytest.raises(ScenarioError) as e:
        parse_scenario(scenario(nodes(1), doc, _later(doc, "1m", **change)))
    assert "are not simulated" in str(e.value) and words in str(e.value)


async def test_events_expire_on_the_simulated_clock() -> None:
    """MemoryCluster expires Events an hour after their last write (kube-apiserver's
    ``--event-ttl``) on the simulator's virtual clock: at the end of a run that lasts three
    hours, the Events of the first gang are gone and those of the last one are still there."""
    box: list[MemoryCluster] = []

    def factory(clock: Callable[[], float]) -> Cluster:
        box.append(MemoryCluster(clock=clock))
        return box[0]

    text = scenario(
        nodes(2, "8"),
        gang("early", 2, "1", arrival="0s", duration="5m"),
        gang("late", 2, "1", arrival="3h", duration="5m"),
    )
    result = await Simulation(parse_scenario(text), cluster_factory=factory).run()
    assert not result.violations
    about = {
        str(e["involvedObject"]["name"])
        for e in (await box[0].list("Event")).items
        if isinstance(e, dict)
    }
    assert about, "the late gang's Events are younger than an hour"
    assert all(name.startswith("late") for name in about), about
