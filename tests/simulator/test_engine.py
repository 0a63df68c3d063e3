"""Virtual-time behaviour of the simulator with the real Scheduler on a MemoryCluster, and the
gang invariant check (with a deliberately broken stand-in scheduler)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from sim_helpers import gang, job, nodes, scenario
from sim_toy import ToyScheduler

from workloadbuilder.simulator import (
    Simulation,
    SimulationResult,
    parse_scenario,
    render_table,
    write_report,
)


async def run(text: str, **kwargs: Any) -> SimulationResult:
    result = await Simulation(parse_scenario(text), **kwargs).run()
    return result


def group(result: SimulationResult, prefix: str) -> Any:
    found = [g for g in result.groups if g.name.startswith(prefix)]
    assert len(found) == 1, [g.name for g in result.groups]
    return found[0]


async def test_gang_waits_until_resources_free_up() -> None:
    # 2 nodes x 4 CPU; gang a (2 x 3 CPU, 60s) at 0s; gang b (2 x 3 CPU, 30s) at 10s.
    text = scenario(
        nodes(2, "4"),
        gang("a", 2, "3", duration="60s"),
        gang("b", 2, "3", arrival="10s", duration="30s"),
    )
    result = await run(text)
    a, b = group(result, "a"), group(result, "b")
    assert a.initially_scheduled and a.scheduled_at == 0.0 and a.reason == "Scheduled"
    assert b.initially_scheduled and b.arrival == 10.0
    assert b.scheduled_at == 60.0 and b.waited == 50.0
    assert b.wait_message  # the scheduler said why it waited
    pods = {p.name: p for p in result.pods}
    assert {pods["b-0"].bound, pods["b-1"].bound} == {60.0}
    assert {pods["b-0"].finished, pods["b-1"].finished} == {90.0}
    assert {pods["a-0"].finished, pods["a-1"].finished} == {60.0}
    assert result.makespan == 90.0 and result.complete
    assert result.violations == ()
    assert result.pod_counts() == {
        "total": 4,
        "bound": 4,
        "running": 0,
        "pending": 0,
        "succeeded": 4,
    }


async def test_gang_that_never_fits_stays_unbound_and_the_run_ends() -> None:
    text = scenario(nodes(2, "4"), gang("big", 3, "3", duration="1m"), gang("ok", 1, "1"))
    result = await run(text)
    big = group(result, "big")
    assert not big.initially_scheduled and big.bound_pods == 0 and big.scheduled_at is None
    assert big.reason == "Unschedulable" and big.message
    assert "3" in big.message  # names the minCount it could not reach
    ok = group(result, "ok")
    assert ok.initially_scheduled and ok.bound_pods == 1
    counts = result.pod_counts()
    assert counts["pending"] == 3 and counts["bound"] == 1 and not result.complete
    assert result.violations == ()


async def test_partial_fit_binds_nothing_until_all_fit() -> None:
    # 3 slots for a 4-pod gang while filler runs; after filler ends all 4 fit at once.
    text = scenario(
        nodes(4, "4"),
        gang("filler", 1, "4", duration="2m"),
        gang("g", 4, "3", arrival="5s", duration="1m"),
    )
    result = await run(text)
    g = group(result, "g")
    assert g.scheduled_at == 120.0
    assert {p.bound for p in result.pods if p.group == "g"} == {120.0}
    assert result.violations == ()


async def test_job_with_more_completions_than_parallelism() -> None:
    text = scenario(
        nodes(1, "4"), job("j", 2, "1", duration="10s", completions=5, gang_policy=False)
    )
    result = await run(text)
    pods = sorted(result.pods, key=lambda p: p.name)
    assert [p.name for p in pods] == ["j-0", "j-1", "j-2", "j-3", "j-4"]
    assert [p.bound for p in pods] == [0.0, 0.0, 10.0, 10.0, 20.0]
    assert result.makespan == 30.0
    assert all(p.group is not None and p.group == pods[0].group for p in pods)
    assert all(p.owner == "Job/j" for p in pods)


async def test_gang_job_replacements_form_a_new_gang() -> None:
    text = scenario(nodes(1, "4"), job("g", 2, "1", duration="10s", completions=4))
    result = await run(text)
    pods = sorted(result.pods, key=lambda p: p.name)
    assert [(p.name, p.bound, p.finished) for p in pods] == [
        ("g-0", 0.0, 10.0),
        ("g-1", 0.0, 10.0),
        ("g-2", 10.0, 20.0),
        ("g-3", 10.0, 20.0),
    ]
    assert result.violations == ()


async def test_job_adapter_objects_and_basic_job() -> None:
    text = scenario(
        nodes(2, "4"),
        job("train", 2, "3", duration="1m"),
        job("prep", 3, "1", gang_policy=False, duration="30s"),
    )
    result = await run(text)
    train = group(result, "train-")
    prep = group(result, "prep-")
    assert train.policy == "gang" and train.min_count == 2 and train.owner == "Job/train"
    assert prep.policy == "basic" and prep.min_count is None
    assert prep.initially_scheduled and prep.bound_pods == 3


async def test_horizon_stops_the_run() -> None:
    text = scenario(
        nodes(1, "4"),
        gang("a", 1, "2", duration="10m"),
        gang("b", 1, "4", arrival="1m", duration="1m"),
    )
    result = await run(text, until=300.0)
    assert result.end == 300.0 and result.until == 300.0
    a = next(p for p in result.pods if p.name == "a-0")
    assert a.bound == 0.0 and a.finished is None
    assert group(result, "b").scheduled_at is None


async def test_pods_run_to_the_end_without_duration() -> None:
    result = await run(scenario(nodes(1, "4"), gang("a", 2, "1")))
    assert all(p.bound == 0.0 and p.finished is None for p in result.pods)
    assert result.pod_counts()["running"] == 2 and result.makespan == 0.0


async def test_jobset_and_lws_pods_join_their_groups() -> None:
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js", "annotations": {"sim.workloadbuilder.io/duration": "1m"}},
        "spec": {
            "scheduling": {"schedulingPolicy": {"gang": {}}},
            "replicatedJobs": [
                {
                    "name": "w",
                    "replicas": 2,
                    "template": {
                        "spec": {
                            "parallelism": 2,
                            "template": {
                                "spec": {
                                    "containers": [
                                        {"name": "c", "resources": {"requests": {"cpu": "1"}}}
                                    ]
                                }
                            },
                        }
                    },
                },
            ],
        },
    }
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "inf"},
        "spec": {
            "replicas": 2,
            "scheduling": {"schedulingPolicy": {"gang": {}}},
            "leaderWorkerTemplate": {
                "size": 3,
                "workerTemplate": {
                    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
                },
            },
        },
    }
    result = await run(scenario(nodes(4, "4"), yaml.safe_dump(jobset), yaml.safe_dump(lws)))
    js_pods = [p for p in result.pods if p.owner == "JobSet/js"]
    assert sorted(p.name for p in js_pods) == ["js-w-0-0", "js-w-0-1", "js-w-1-0", "js-w-1-1"]
    assert len({p.group for p in js_pods}) == 1 and js_pods[0].group is not None
    js_group = group(result, js_pods[0].group or "")
    assert js_group.min_count == 4 and js_group.initially_scheduled
    lws_pods = [p for p in result.pods if p.owner == "LeaderWorkerSet/inf"]
    assert sorted(p.name for p in lws_pods) == [
        "inf-0",
        "inf-0-1",
        "inf-0-2",
        "inf-1",
        "inf-1-1",
        "inf-1-2",
    ]
    by_group: dict[str | None, set[str]] = {}
    for p in lws_pods:
        by_group.setdefault(p.group, set()).add(p.name)
    assert sorted(map(sorted, by_group.values())) == [
        ["inf-0", "inf-0-1", "inf-0-2"],
        ["inf-1", "inf-1-1", "inf-1-2"],
    ]
    assert all(g is not None for g in by_group)
    assert result.violations == ()


NO_PREEMPTION = (
    "apiVersion: sim.workloadbuilder.io/v1alpha1\nkind: Simulation\nmetadata: {name: options}\n"
    "spec: {preemption: false}\n"
)


def _priority_scenario(*extra: str) -> str:
    return scenario(
        *extra,
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: high}\n"
        "value: 1000\n",
        nodes(2, "4"),
        gang("fill", 2, "4", duration="1m"),
        gang("low", 2, "4", arrival="10s", duration="1m"),
        gang("high", 2, "4", arrival="20s", duration="1m")
        .replace("containers:", "priorityClassName: high\n  containers:")
        .replace("schedulingPolicy:", "priorityClassName: high\n  schedulingPolicy:"),
    )


async def test_priority_orders_waiting_gangs() -> None:
    # the queue order of waiting gangs: with preemption off (the scenario option), "high"
    # waits for "fill" like "low" does, and goes first
    result = await run(_priority_scenario(NO_PREEMPTION))
    assert group(result, "high").priority == 1000
    assert group(result, "high").scheduled_at == 60.0
    assert group(result, "low").scheduled_at == 120.0
    assert result.preemptions == ()


async def test_high_priority_gang_preempts_with_preemption_on() -> None:
    # the default (as `workloadbuilder scheduler` runs): "high" preempts the lower-priority
    # "fill" when it arrives and starts after its backoff; fill's pods are the scenario's
    # own (no controller), so they are gone; "low" starts when "high" is done
    result = await run(_priority_scenario())
    high, fill = group(result, "high"), group(result, "fill")
    assert high.scheduled_at == 21.0
    assert fill.preempted_at == (20.0,)
    assert group(result, "low").scheduled_at == 81.0
    (p,) = result.preemptions
    assert (p.at, p.preemptor.kind, p.preemptor.name, p.priority) == (
        20.0,
        "PodGroup",
        "high",
        1000,
    )
    assert sorted((v.kind, v.name, v.pods, v.priority) for v in p.victims) == [
        ("Pod", "fill-0", 1, 0),
        ("Pod", "fill-1", 1, 0),
    ]
    assert result.violations == ()
    js = result.to_json()
    assert js["preemptions"][0]["preemptor"] == {
        "kind": "PodGroup",
        "namespace": "default",
        "name": "high",
    }
    assert {g["name"]: g["preemptedAt"] for g in js["podGroups"]}["fill"] == [20.0]


async def test_invariant_violation_is_reported(tmp_path: Path) -> None:
    text = scenario(nodes(2, "4"), gang("g", 3, "1", duration="1m"))
    broken = await run(text, scheduler_factory=lambda c, clock: ToyScheduler(c, broken=True))
    assert len(broken.violations) >= 1
    assert "INVARIANT VIOLATED" in render_table(broken)
    assert all(p.exists() for p in write_report(broken, tmp_path))
    v = broken.violations[0]
    assert (v.namespace, v.name, v.min_count, v.bound, v.time) == ("default", "g", 3, 1, 0.0)
    assert broken.to_json()["invariantViolations"][0]["boundPods"] == 1
    fine = await run(text, scheduler_factory=lambda c, clock: ToyScheduler(c))
    assert fine.violations == ()
    assert group(fine, "g").scheduled_at == 0.0  # from the pods when no status is written


async def test_bad_reference_at_run_time_names_the_document() -> None:
    text = scenario(
        nodes(1),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
        "spec: {priorityClassName: nope, containers: [{name: c}]}\n",
    )
    from workloadbuilder.simulator import ScenarioError

    try:
        await run(text)
    except ScenarioError as e:
        assert e.document == 2 and "nope" in str(e)
    else:
        raise AssertionError("expected a ScenarioError")


async def test_nodes_arriving_later_unblock_a_waiting_gang() -> None:
    text = scenario(
        nodes(1, "4"),
        nodes(1, "4", name="extra").replace(
            "metadata:\n  name: extra",
            "metadata:\n  name: extra\n  annotations: {sim.workloadbuilder.io/arrival: 5m}",
        ),
        gang("g", 2, "3", duration="1m"),
    )
    result = await run(text)
    assert [(n.name, n.added) for n in result.nodes] == [("n-0", 0.0), ("extra-0", 300.0)]
    g = group(result, "g")
    assert g.scheduled_at == 300.0 and g.waited == 300.0
    assert sorted(g.nodes) == ["extra-0", "n-0"]
    assert result.makespan == 360.0


async def test_preassigned_and_foreign_pods() -> None:
    text = scenario(
        nodes(1, "4"),
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: pinned\n  annotations:\n"
        "    sim.workloadbuilder.io/duration: 30s\n"
        "spec: {nodeName: n-0, containers: [{name: c, resources: {requests: {cpu: '3'}}}]}\n",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: other}\n"
        "spec: {schedulerName: someone-else, containers: [{name: c}]}\n",
        gang("g", 1, "2", arrival="10s", duration="10s"),
    )
    seen: list[int] = []
    result = await run(text, progress=lambda info: seen.append(info.pods_bound))
    pods = {p.name: p for p in result.pods}
    assert (pods["pinned"].bound, pods["pinned"].finished, pods["pinned"].ours) == (
        0.0,
        30.0,
        False,
    )
    assert pods["other"].bound is None and not pods["other"].ours
    assert pods["g-0"].bound == 30.0  # waits for the pinned pod's CPUs
    assert result.pod_counts()["pending"] == 1  # the foreign pod; the run still ends
    assert seen and seen == sorted(seen) and seen[-1] == 2


async def test_pod_template_duration_overrides_the_job_duration() -> None:
    text = scenario(
        nodes(1, "4"),
        job("j", 1, "1", duration="1m").replace(
            "  template:\n",
            "  template:\n    metadata:\n      annotations: "
            "{sim.workloadbuilder.io/duration: 20s}\n",
            1,
        ),
    )
    result = await run(text)
    assert [(p.bound, p.finished) for p in result.pods] == [(0.0, 20.0)]


async def test_the_scheduler_name_is_the_scheduler_configs_or_the_schedulers_default() -> None:
    from workloadbuilder import simulator
    from workloadbuilder.scheduler import DEFAULT_SCHEDULER_NAME, SchedulerConfig

    text = scenario(nodes(1, "4"), gang("a", 2, "1", duration="10s"))
    assert Simulation(parse_scenario(text)).scheduler_name == DEFAULT_SCHEDULER_NAME
    assert simulator.DEFAULT_SCHEDULER_NAME is DEFAULT_SCHEDULER_NAME
    config = SchedulerConfig(scheduler_name="other-scheduler")
    result = await run(text, scheduler_config=config)
    assert result.scheduler_name == "other-scheduler"
    assert group(result, "a").scheduled_at == 0.0  # its pods name it, and it binds them


def test_the_simulator_loads_the_scheduler_only_when_a_simulation_is_made() -> None:
    from fresh import run_fresh

    got = run_fresh(
        """
        import json, sys
        import workloadbuilder.simulator as simulator
        before = ["workloadbuilder.scheduler" in sys.modules, "numpy" in sys.modules]
        simulator.Simulation(simulator.parse_scenario(""))
        print(json.dumps(before + ["workloadbuilder.scheduler" in sys.modules]))
        """
    )
    assert got == [False, False, True]
