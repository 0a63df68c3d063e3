"""examples/simulations/volumes.yaml: the volume plugins in the simulator, with MemoryCluster's
PV controller binding and provisioning the claims (WaitForFirstConsumer with local volumes for
a gang, dynamic provisioning restricted by allowedTopologies, an Immediate claim bound to a
pre-existing volume, a gang with no volume left)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workloadbuilder.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples/simulations/volumes.yaml"


def test_claims_place_the_pods_and_a_gang_without_volumes_waits(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["simulate", str(EXAMPLE), "-o", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["invariantViolations"] == []
    groups = {g["name"]: g for g in data["podGroups"]}
    # each worker on the node of its local volume, the two on distinct nodes
    train = groups["train"]["placements"]
    assert sorted(train) == ["train-0", "train-1"]
    assert sorted(train.values()) == ["disk-0", "disk-1"]
    assert groups["scratch"]["placements"] == {"scratch": "disk-2"}  # allowedTopologies
    late = groups["late"]
    assert late["boundPods"] == 0 and late["reason"] == "Unschedulable"
    assert 'no available PersistentVolume for claim "late-' in late["message"]
    assert data["pods"]["bound"] == 4  # train x2, scratch, reader (not the late gang)
    assert [p["name"] for p in data["pendingPods"]] == ["late-0", "late-1"]
