"""The topology and composite examples in examples/simulations/.

``TOPOLOGY_PLACEMENT`` says whether the reference scheduler places topology-constrained groups
and CompositePodGroup trees. Today it refuses them (``SchedulerError``, nothing bound): the
tests assert that refusal. When topology placement and the composite search are merged, flip
it to True: the same tests then assert the placements the examples describe."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from workloadbuilder.cli import main

#: Flip to True when the scheduler places topology constraints and composite trees.
TOPOLOGY_PLACEMENT = False

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "simulations"
RACK = "example.com/rack"
BLOCK = "example.com/block"


def simulate(name: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["simulate", str(EXAMPLES / f"{name}.yaml"), "-o", "json"]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert data["invariantViolations"] == []
    return data


def refused(group: dict[str, Any]) -> None:
    assert group["reason"] == "SchedulerError" and group["boundPods"] == 0
    assert "does not support yet" in group["message"]
    assert group["domains"] == {}


def test_rack_gangs_pick_the_one_free_rack(capsys: pytest.CaptureFixture[str]) -> None:
    data = simulate("rack-gangs", capsys)
    groups = {g["owner"]: g for g in data["podGroups"]}
    for r in range(3):  # the fillers (no topology constraint) run in their racks
        assert groups[f"Job/fill-{r}"]["domains"][RACK] == f"gpu-rack-{r}"
    if not TOPOLOGY_PLACEMENT:
        refused(groups["Job/train"])
        refused(groups["Job/tune"])
        return
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
    if not TOPOLOGY_PLACEMENT:
        for g in children.values():
            refused(g)
        assert tree["scheduledAt"] is None and tree["domains"] == {}
        return
    assert tree["scheduledAt"] == 30.0 and tree["domains"][BLOCK] == "gpu-block-1"
    racks = {g["domains"][RACK] for g in children.values()}
    assert racks == {"gpu-rack-2", "gpu-rack-3"}
    assert all(g["scheduledAt"] == 30.0 and g["boundPods"] == 4 for g in children.values())


def test_search_places_the_tree_greedy_rejects(capsys: pytest.CaptureFixture[str]) -> None:
    data = simulate("search-vs-greedy", capsys)
    [tree] = data["compositePodGroups"]
    groups = {g["name"]: g for g in data["podGroups"]}
    assert data["pods"]["bound"] >= 18  # the pods the scenario bound itself
    if not TOPOLOGY_PLACEMENT:
        refused(groups["tree-a-small"])
        refused(groups["tree-b-big"])
        assert tree["scheduledAt"] is None
        return
    # the bounded search (the default profile) finds the placement greedy misses
    assert tree["scheduledAt"] == 10.0 and tree["domains"][BLOCK] == "block-0"
    assert groups["tree-a-small"]["domains"][RACK] == "b-rack-0"
    assert groups["tree-b-big"]["domains"][RACK] == "a-rack-0"
