"""CompositePodGroups and topology in the simulator: per-group domains, the composite
records and trees, and the composite and topology invariants (with a stand-in scheduler that
honours them, and broken ones), plus what today's reference scheduler answers."""

from __future__ import annotations

import json
from typing import Any

import yaml
from sim_helpers import scenario
from sim_topo_toy import TopoToyScheduler
from sim_trees import BLOCK, RACK, rack_gang, racks, tree

from workloadbuilder.simulator import Simulation, SimulationResult, parse_scenario, render_table


async def run(text: str, **kwargs: Any) -> SimulationResult:
    return await Simulation(parse_scenario(text, source="t.yaml"), **kwargs).run()


def toy(**kwargs: Any) -> Any:
    return lambda cluster, clock: TopoToyScheduler(cluster, **kwargs)


def by_name(result: SimulationResult) -> dict[str, Any]:
    return {g["name"]: g for g in json.loads(json.dumps(result.to_json()))["podGroups"]}


async def test_domains_of_rack_constrained_gangs_pick_the_free_rack() -> None:
    # racks 0-2 are taken by fillers; the gang needs a whole rack: only rack 3 is free
    text = scenario(
        racks(),
        *(rack_gang(f"fill-{r}", 2, "4", key=None) for r in range(3)),
        rack_gang("g", 2, "4"),
    )
    # fillers without a key land first-fit on n-0..n-5; g must take rack 3 (n-6, n-7)
    result = await run(text, scheduler_factory=toy())
    groups = by_name(result)
    assert groups["g"]["domains"] == {BLOCK: "n-block-1", RACK: "n-rack-3"}
    assert groups["g"]["topologyKey"] == RACK and groups["g"]["nodes"] == ["n-6", "n-7"]
    assert groups["fill-0"]["domains"] == {BLOCK: "n-block-0", RACK: "n-rack-0"}
    assert result.violations == ()
    table = render_table(result)
    assert "DOMAIN" in table and "n-rack-3" in table
    assert "topology invariant: held (no constrained group ever had pods in two domains)" in table


async def test_a_gang_spread_over_two_racks_violates_the_invariant() -> None:
    text = scenario(racks(), rack_gang("g", 3, "4"))
    result = await run(text, scheduler_factory=toy(spread=True))
    assert [v.type for v in result.violations] == ["topology"]
    v = result.violations[0]
    assert v.name == "g" and "2 domains of example.com/rack" in v.text
    assert "n-rack-0: 2, n-rack-1: 1" in v.text
    data = result.to_json()
    assert data["invariantViolations"][0]["type"] == "topology"
    assert by_name(result)["g"]["domains"][RACK] == ["n-rack-0", "n-rack-1"]
    assert "INVARIANT VIOLATED 1 time:" in render_table(result)
    fine = await run(text, scheduler_factory=toy())  # no rack holds 3 x 4 CPU: it waits
    assert fine.violations == () and by_name(fine)["g"]["boundPods"] == 0


async def test_composite_tree_records_and_table() -> None:
    text = scenario(racks(), tree("t", 2, [("t-a", 2, "4"), ("t-b", 2, "4")]))
    result = await run(text, scheduler_factory=toy())
    assert result.violations == ()
    data = result.to_json()
    [cpg] = data["compositePodGroups"]
    assert cpg["name"] == "t" and cpg["minGroupCount"] == 2 and cpg["children"] == ["t-a", "t-b"]
    assert cpg["scheduledAt"] == 0.0 and cpg["initiallyScheduled"] is False  # no status written
    assert cpg["domains"] == {BLOCK: "n-block-0", RACK: ["n-rack-0", "n-rack-1"]}
    assert set(cpg) >= {
        "namespace",
        "name",
        "minGroupCount",
        "children",
        "initiallyScheduled",
        "scheduledAt",
        "reason",
        "message",
    }
    groups = by_name(result)
    assert groups["t-a"]["parent"] == "t" and groups["t-a"]["domains"][RACK] == "n-rack-0"
    assert groups["t-b"]["domains"] == {BLOCK: "n-block-0", RACK: "n-rack-1"}
    table = render_table(result)
    assert "1 composite pod group" in table
    assert (
        "CompositePodGroup default/t (gang 2, 2 of 2 children scheduled; "
        "example.com/block=n-block-0)" in table
    )
    assert "├─ PodGroup default/t-a (gang 2, 2/2 bound; example.com/rack=n-rack-0)" in table
    assert "└─ PodGroup default/t-b" in table


async def test_a_tree_with_one_of_two_children_bound_violates_the_invariant() -> None:
    text = scenario(racks(), tree("t", 2, [("t-a", 2, "4"), ("t-b", 2, "4")]))
    result = await run(text, scheduler_factory=toy(one_child=True))
    assert [v.type for v in result.violations] == ["composite"]
    v = result.violations[0]
    assert (v.name, v.min_count, v.bound) == ("t", 2, 1)
    assert "had 1 of minGroupCount 2 children with pods bound (t-a)" in v.text


async def test_rack_gang_is_placed_in_one_rack_and_an_incomplete_tree_waits() -> None:
    """The reference scheduler places the rack-constrained gang inside one rack; a tree that
    needs 2 children but has 1 stays gated (nothing bound, no partial tree)."""
    text = scenario(racks(), rack_gang("g", 2, "4"), tree("t", 2, [("t-a", 2, "4")]))
    result = await run(text)
    groups = {g.name: g for g in result.groups}
    assert result.violations == ()
    g = groups["g"]
    assert g.initially_scheduled and g.bound_pods == 2 and isinstance(g.domains[RACK], str)
    child = groups["t-a"]
    assert not child.initially_scheduled and child.bound_pods == 0 and child.reason is None


async def test_jobset_and_lws_topology_constraints_reach_their_groups() -> None:
    from workloadbuilder.testing.builders import (
        make_jobset,
        make_lws,
        make_pod_template,
        make_replicated_job,
        make_scheduling,
    )

    js = (
        make_jobset("rl")
        .replicated_job(
            make_replicated_job("learner").parallelism(2).container_name("c").request("cpu", "4")
        )
        .scheduling(make_scheduling().gang().topology(RACK))
        .obj()
    )
    lws = (
        make_lws("serve")
        .replicas(1)
        .size(2)
        .worker_template(make_pod_template().container_name("c").request("cpu", "4"))
        .scheduling(make_scheduling().gang().topology(RACK))
        .obj()
    )
    text = scenario(racks(), yaml.safe_dump(js), yaml.safe_dump(lws))
    result = await run(text, scheduler_factory=toy())
    data = result.to_json()
    keys = {g["owner"]: (g["topologyKey"], g["domains"].get(RACK)) for g in data["podGroups"]}
    assert keys == {
        "JobSet/rl": (RACK, "n-rack-0"),
        "LeaderWorkerSet/serve": (RACK, "n-rack-1"),
    }
    assert result.violations == ()
