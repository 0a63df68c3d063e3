"""The topology and composite examples in examples/simulations/: the reference scheduler
places them as each example describes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from workloadbuilder.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "simulations"
RACK = "example.com/rack"
BLOCK = "example.com/block"


def simulate(name: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["simulate", str(EXAMPLES / f"{name}.yaml"), "-o", "json"]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert data["invariantViolations"] == []
    return data


def test_rack_gangs_pick_the_one_free_rack(capsys: pytest.CaptureFixture[str]) -> None:
    data = simulate("rack-gangs", capsys)
    groups = {g["owner"]: g for g in data["podGroups"]}
    for r in range(3):  # the fillers (no topology constraint) run in their racks
        assert groups[f"Job/fill-{r}"]["domains"][RACK] == f"gpu-rack-{r}"
    train, tune = groups["Job/train"], groups["Job/tune"]
    assert train["scheduledAt"] == 60.0 and train["domains"][RACK] == "gpu-rack-3"
    assert tune["scheduledAt"] == 1800.0  # when the fillers end
    assert tune["domains"][RACK] in ("gpu-rack-0", "gpu-rack-1", "gpu-rack-2")


def test_jobset_composite_lands_in_one_block(capsys: pytest.CaptureFixture[str]) -> None:
    data = simulate("jobset-composite", capsys)
    [tree] = data["compositePodGroups"]
    assert tree["name"] == "trainer" and tree["minGroupCount"] == 2
    assert tree["children"] == ["trainer-rack-a", "trainer-rack-b"]
    children = {g["name"]: g for g in data["podGroups"] if g["parent"] == "trainer"}
    assert sorted(children) == ["trainer-rack-a", "trainer-rack-b"]
    assert tree["scheduledAt"] == 30.0 and tree["domains"][BLOCK] == "gpu-block-1"
    racks = {g["domains"][RACK] for g in children.values()}
    assert racks == {"gpu-rack-2", "gpu-rack-3"}
    assert all(g["scheduledAt"] == 30.0 and g["boundPods"] == 4 for g in children.values())


def test_search_places_the_tree_greedy_rejects(capsys: pytest.CaptureFixture[str]) -> None:
    data = simulate("search-vs-greedy", capsys)
    [tree] = data["compositePodGroups"]
    groups = {g["name"]: g for g in data["podGroups"]}
    assert data["pods"]["bound"] >= 18  # the pods the scenario bound itself
    # the bounded search (the default profile) finds the placement greedy misses
    assert tree["scheduledAt"] == 10.0 and tree["domains"][BLOCK] == "block-0"
    assert groups["tree-a-small"]["domains"][RACK] == "b-rack-0"
    assert groups["tree-b-big"]["domains"][RACK] == "a-rack-0"


# ---- the examples' intended placements, with a stand-in that honours topology -------------


async def _with_toy(name: str) -> dict[str, Any]:
    from sim_topo_toy import TopoToyScheduler

    from workloadbuilder.simulator import Simulation, load_scenario

    result = await Simulation(
        load_scenario(str(EXAMPLES / f"{name}.yaml")),
        scheduler_factory=lambda cluster, clock: TopoToyScheduler(cluster),
    ).run()
    data: dict[str, Any] = json.loads(json.dumps(result.to_json()))
    assert data["invariantViolations"] == []
    return data


async def test_rack_gangs_as_designed() -> None:
    data = await _with_toy("rack-gangs")
    groups = {g["owner"]: g for g in data["podGroups"]}
    assert groups["Job/train"]["domains"][RACK] == "gpu-rack-3"
    assert groups["Job/train"]["scheduledAt"] == 60.0
    assert groups["Job/tune"]["scheduledAt"] == 1800.0


async def test_jobset_composite_as_designed() -> None:
    data = await _with_toy("jobset-composite")
    [tree] = data["compositePodGroups"]
    assert tree["domains"][BLOCK] == "gpu-block-1" and tree["scheduledAt"] == 30.0
    assert tree["domains"][RACK] == ["gpu-rack-2", "gpu-rack-3"]


async def test_search_vs_greedy_defeats_a_greedy_placer() -> None:
    # the stand-in places children greedily in order, first domain that fits: like upstream,
    # it puts the small child into a-rack-0 and then has no rack for the big one
    data = await _with_toy("search-vs-greedy")
    [tree] = data["compositePodGroups"]
    assert tree["scheduledAt"] is None
    assert all(g["boundPods"] == 0 for g in data["podGroups"] if g["parent"] == "tree")
