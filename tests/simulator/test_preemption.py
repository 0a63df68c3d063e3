"""Workload-aware preemption in simulations: the example scenario, the JSON ``preemptions``
list, controllers that recreate preempted pods, the scenario option, and the preemption
invariants (checked with a deliberately wrong stand-in scheduler)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sim_helpers import gang, nodes, scenario

from workloadbuilder.cli import main
from workloadbuilder.cluster import Cluster, ClusterProxy, KubeObject, MemoryCluster
from workloadbuilder.simulator import (
    ScenarioError,
    Simulation,
    SimulationResult,
    parse_scenario,
    render_table,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "simulations"
RACK = "example.com/rack"


def test_preemption_racks_example(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(EXAMPLES / "preemption-racks.yaml"), "-o", "json"]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert data["invariantViolations"] == []
    groups = {g["owner"]: g for g in data["podGroups"]}
    (p,) = data["preemptions"]
    assert p["at"] == 60.0
    assert p["preemptor"]["name"] == groups["Job/urgent"]["name"]
    assert p["preemptor"]["kind"] == "PodGroup"
    assert p["victims"] == [
        {
            "kind": "PodGroup",
            "namespace": "default",
            "name": groups["Job/batch-a"]["name"],
            "pods": 4,
            "priority": 100,
        }
    ]
    assert p["domain"] == "node-rack-1"
    # one low gang in one rack; the rest untouched
    assert groups["Job/batch-a"]["preemptedAt"] == [60.0]
    assert groups["Job/batch-b"]["preemptedAt"] == []
    assert groups["Job/steady"]["preemptedAt"] == []
    assert groups["Job/urgent"]["domains"][RACK] == "node-rack-1"
    # the Job controller recreated batch-a's 4 pods; they ran again, whole, in rack 1
    assert groups["Job/batch-a"]["boundPods"] == 4
    assert groups["Job/batch-a"]["domains"][RACK] == "node-rack-1"
    assert data["pods"] == {"total": 16, "bound": 16, "running": 0, "pending": 0, "succeeded": 16}
    assert data["makespan"] > 6 * 60 + 30 * 60  # batch-a restarted after urgent's 5m


async def test_the_table_lists_preemptions() -> None:
    from workloadbuilder.simulator import load_scenario

    result = await Simulation(load_scenario(str(EXAMPLES / "preemption-racks.yaml"))).run()
    table = render_table(result)
    assert "preemptions: 1" in table
    assert "Job/urgent urgent-pgt-0 preempted Job/batch-a batch-a-pgt-0 (4 pods)" in table


def _job(name: str, size: int, cpu: str, cls: str, **extra: str) -> str:
    annotations = "".join(f"    sim.workloadbuilder.io/{k}: {v}\n" for k, v in extra.items())
    return (
        f"apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {name}\n  annotations:\n"
        f"{annotations}spec:\n  parallelism: {size}\n  completions: {size}\n"
        "  completionMode: Indexed\n  scheduling:\n    schedulingPolicy: {gang: {}}\n"
        f"  template:\n    spec:\n      priorityClassName: {cls}\n      restartPolicy: Never\n"
        f"      containers: [{{name: w, image: x, resources: {{requests: {{cpu: '{cpu}'}}}}}}]\n"
    )


CLASSES = (
    "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: high}\nvalue: 1000\n",
    "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: low}\nvalue: 10\n",
)


async def test_a_preempted_job_gets_its_pods_back_with_their_indexes() -> None:
    text = scenario(
        *CLASSES,
        nodes(2, "4"),
        _job("low", 2, "4", "low", duration="10m"),
        _job("high", 2, "4", "high", arrival="1m", duration="1m"),
    )
    result = await Simulation(parse_scenario(text)).run()
    assert result.violations == ()
    pods = {p.name: p for p in result.pods}
    assert {n for n, p in pods.items() if n.startswith("low-") and p.deleted is None} == {
        "low-2",
        "low-3",
    }  # the replacements (the originals low-0, low-1 were preempted)
    low = next(g for g in result.groups if g.owner == "Job/low")
    assert low.preempted_at == (60.0,)
    assert low.bound_pods == 2  # bound again once high finished
    assert min(pods[n].bound or 0 for n in ("low-2", "low-3")) >= 121.0


async def test_the_preemption_option() -> None:
    off = (
        "apiVersion: sim.workloadbuilder.io/v1alpha1\nkind: Simulation\nmetadata: {name: o}\n"
        "spec: {preemption: false}\n"
    )
    text = scenario(
        off,
        *CLASSES,
        nodes(2, "4"),
        _job("low", 2, "4", "low", duration="10m"),
        _job("high", 2, "4", "high", arrival="1m", duration="1m"),
    )
    scen = parse_scenario(text)
    assert scen.preemption is False
    result = await Simulation(scen).run()
    assert result.preemptions == ()
    assert parse_scenario(scenario(nodes(1))).preemption is True
    with pytest.raises(ScenarioError, match=r"spec\.preemption"):
        parse_scenario(text.replace("preemption: false", "preemption: maybe"))
    with pytest.raises(ScenarioError, match=r"spec\.other"):
        parse_scenario(text.replace("preemption: false", "other: 1"))
    with pytest.raises(ScenarioError, match="Duplicate value"):
        parse_scenario(off + "---\n" + text)


class _WrongPreemptor:
    """Preempts a pod of an ``all`` group only in part, and names a preemptor of lower
    priority than the victim: both invariants must fire."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.explanations: dict[tuple[str, str], str] = {}
        self.done = False

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def sync(self) -> None:
        return None

    def next_wakeup(self) -> float | None:
        return None

    async def until_idle(self) -> int:
        pods = [p for p in (await self.cluster.list("Pod")).items if isinstance(p, dict)]
        nodes_ = [n for n in (await self.cluster.list("Node")).items if isinstance(n, dict)]
        bound = 0
        for i, p in enumerate(sorted(pods, key=lambda p: p["metadata"]["name"])):
            if not p["spec"].get("nodeName"):
                node = nodes_[i % len(nodes_)]["metadata"]["name"]
                await self.cluster.bind("default", p["metadata"]["name"], node)
                bound += 1
        if not self.done and pods:  # in the same round as the bindings
            self.done = True
            victim = sorted(p["metadata"]["name"] for p in pods)[0]
            cond = {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "PreemptionByScheduler",
                "message": "x: preempting to accommodate pod group default/cheap",
            }
            await self.cluster.patch(
                "Pod", victim, {"status": {"conditions": [cond]}}, "default", subresource="status"
            )
            await self.cluster.delete("Pod", victim, "default")
        return bound


async def test_preemption_invariants_are_checked() -> None:
    text = scenario(
        *CLASSES,
        nodes(2, "4"),
        gang("all", 2, "1").replace(
            "schedulingPolicy:",
            "priorityClassName: high\n  disruptionMode: {all: {}}\n  schedulingPolicy:",
        ),
        gang("cheap", 1, "1").replace(
            "schedulingPolicy:", "priorityClassName: low\n  schedulingPolicy:"
        ),
    )
    result = await Simulation(
        parse_scenario(text), scheduler_factory=lambda c, clock: _WrongPreemptor(c)
    ).run()
    kinds = sorted(v.type for v in result.violations)
    assert kinds == ["preemption", "preemption"], [v.text for v in result.violations]
    texts = " | ".join(v.text for v in result.violations)
    assert "of priority 1000" in texts and "only in part" in texts


async def test_preempted_lws_and_jobset_pods_come_back() -> None:
    """A LeaderWorkerSet's pods are recreated with their names (as its StatefulSet does), a
    JobSet's child Job makes new pods (as the Job controller does); both run again once the
    high-priority Job is done."""
    import yaml

    from workloadbuilder.testing.builders import (
        make_jobset,
        make_lws,
        make_pod_template,
        make_replicated_job,
        make_scheduling,
    )

    lws = (
        make_lws("serve")
        .replicas(1)
        .size(2)
        .worker_template(
            make_pod_template().container_name("c").request("cpu", "4").priority_class("low")
        )
        .scheduling(make_scheduling().gang())
        .obj()
    )
    js = (
        make_jobset("rl")
        .replicated_job(
            make_replicated_job("learner")
            .parallelism(2)
            .container_name("c")
            .request("cpu", "4")
            .priority_class("low")
        )
        .scheduling(make_scheduling().gang())
        .obj()
    )
    for obj in (lws, js):
        obj["metadata"]["annotations"] = {"sim.workloadbuilder.io/duration": "10m"}
    text = scenario(
        *CLASSES,
        nodes(4, "4"),
        yaml.safe_dump(lws),
        yaml.safe_dump(js),
        _job("high", 4, "4", "high", arrival="1m", duration="1m"),
    )
    result = await Simulation(parse_scenario(text)).run()
    assert result.violations == (), [v.text for v in result.violations]
    (p,) = result.preemptions
    assert sorted((v.kind, v.name, v.priority) for v in p.victims) == [
        ("Pod", "rl-learner-0-0", 10),
        ("Pod", "rl-learner-0-1", 10),
        ("Pod", "serve-0", 10),
        ("Pod", "serve-0-1", 10),
    ]
    assert {g.owner: g.preempted_at for g in result.groups if g.preempted_at} == {
        "LeaderWorkerSet/serve": (60.0,),
        "JobSet/rl": (60.0,),
    }
    live = {x.name: x for x in result.pods if x.deleted is None}
    assert {"serve-0", "serve-0-1"} <= set(live)  # same names again
    assert all((live[n].bound or 0) >= 121.0 for n in ("serve-0", "serve-0-1"))
    learners = {n: x.bound for n, x in live.items() if n.startswith("rl-learner")}
    assert learners == {"rl-learner-0-2": 121.0, "rl-learner-0-3": 121.0}  # new pods


class _Uids(ClusterProxy):
    """Records the uid of every pod created, by name (a name created twice has two)."""

    def __init__(self, inner: Cluster) -> None:
        super().__init__(inner)
        self.uids: dict[str, list[str]] = {}

    async def create(self, obj: KubeObject, namespace: str | None = None, **kw: Any) -> KubeObject:
        out = await super().create(obj, namespace, **kw)
        if isinstance(out, dict) and out.get("kind") == "Pod":
            meta = out["metadata"]
            self.uids.setdefault(str(meta["name"]), []).append(str(meta["uid"]))
        return out


async def _lws_loses_a_pod(
    restart_policy: str | None,
) -> tuple[SimulationResult, dict[str, list[str]], str]:
    """Four 4-cpu nodes run a low LeaderWorkerSet of 2 replicas of 2 pods (a gang each); at
    1m a high Job of one 4-cpu pod preempts one LWS pod. Returns the result, the uids of
    each pod name and the replica index that lost the pod."""
    import yaml

    from workloadbuilder.testing.builders import make_lws, make_pod_template, make_scheduling

    b = make_lws("serve").replicas(2).size(2).scheduling(make_scheduling().gang())
    b.worker_template(
        make_pod_template().container_name("c").request("cpu", "4").priority_class("low")
    )
    lws = b.obj()
    if restart_policy is not None:
        lws["spec"]["leaderWorkerTemplate"]["restartPolicy"] = restart_policy
    lws["metadata"]["annotations"] = {"sim.workloadbuilder.io/duration": "10m"}
    text = scenario(
        *CLASSES,
        nodes(4, "4"),
        yaml.safe_dump(lws),
        _job("high", 1, "4", "high", arrival="1m", duration="1m"),
    )
    box: list[_Uids] = []

    def factory(clock: Any) -> Cluster:
        box.append(_Uids(MemoryCluster(clock=clock)))
        return box[0]

    result = await Simulation(parse_scenario(text), cluster_factory=factory).run()
    assert result.violations == (), [v.text for v in result.violations]
    (p,) = result.preemptions
    (victim,) = p.victims
    assert victim.kind == "Pod" and victim.name.startswith("serve-")
    return result, box[0].uids, victim.name.split("-")[1]


@pytest.mark.parametrize("policy", [None, "RecreateGroupOnPodRestart", "RecreateGroupAfterStart"])
async def test_an_lws_group_is_recreated_whole_when_one_pod_is_preempted(
    policy: str | None,
) -> None:
    """``RecreateGroupOnPodRestart`` (the LWS default; ``RecreateGroupAfterStart`` too once
    every pod of the group started): the preempted pod's whole replica group (leader and
    worker) is deleted and recreated, every pod with a new uid, and the group is placed
    again as a gang once the high Job is done; the other replica is left alone."""
    result, uids, g = await _lws_loses_a_pod(policy)
    group = {f"serve-{g}", f"serve-{g}-1"}
    other = {"serve-0", "serve-0-1", "serve-1", "serve-1-1"} - group
    assert all(len(uids[n]) == 2 and len(set(uids[n])) == 2 for n in group), uids
    assert all(len(uids[n]) == 1 for n in other), uids
    live = {x.name: x for x in result.pods if x.deleted is None and x.name.startswith("serve-")}
    assert set(live) == group | other
    rebound = {live[n].bound for n in group}
    assert len(rebound) == 1 and (rebound.pop() or 0) >= 120.0  # together, as a gang
    assert all(live[n].bound == 0.0 for n in other)
    assert result.pods and all(x.node is not None for x in live.values())


async def test_an_lws_with_restart_policy_none_recreates_the_pod_alone() -> None:
    """``restartPolicy: None``: only the preempted pod is recreated (its StatefulSet's
    behaviour); its group-mate keeps running with its uid."""
    result, uids, g = await _lws_loses_a_pod("None")
    lost = {n for n, u in uids.items() if len(u) > 1}
    assert len(lost) == 1 and lost <= {f"serve-{g}", f"serve-{g}-1"}, uids
    live = {x.name: x for x in result.pods if x.deleted is None and x.name.startswith("serve-")}
    (mate,) = {f"serve-{g}", f"serve-{g}-1"} - lost
    assert live[mate].bound == 0.0
    assert (live[lost.pop()].bound or 0) >= 120.0


def test_an_unknown_lws_restart_policy_is_refused() -> None:
    import yaml

    from workloadbuilder.testing.builders import make_lws, make_pod_template

    lws = make_lws("serve").worker_template(make_pod_template().container_name("c")).obj()
    lws["spec"]["leaderWorkerTemplate"]["restartPolicy"] = "Sometimes"
    text = scenario(yaml.safe_dump(lws))
    with pytest.raises(ScenarioError, match=r"spec\.leaderWorkerTemplate\.restartPolicy"):
        parse_scenario(text)
