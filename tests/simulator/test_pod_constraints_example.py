"""examples/simulations/one-worker-per-node.yaml: pods' own constraints in the simulator (a
gang's one-worker-per-node anti-affinity and zone spread), and ``placements`` in -o json."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from workloadbuilder.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples/simulations/one-worker-per-node.yaml"


def test_one_worker_per_node_and_zone_spread(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(EXAMPLE), "-o", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["invariantViolations"] == []
    groups = {g["owner"]: g for g in data["podGroups"]}
    ring, big = groups["Job/ring"], groups["Job/big"]
    placed = ring["placements"]
    assert sorted(placed) == [f"ring-{i}" for i in range(4)]
    assert len(set(placed.values())) == 4  # one worker per node
    zones = Counter("a" if int(n.rsplit("-", 1)[1]) < 3 else "b" for n in placed.values())
    assert zones == {"a": 2, "b": 2}  # zone-0..2 and zone-3..5
    assert big["boundPods"] == 0 and big["placements"] == {}
    assert "anti-affinity app=big on kubernetes.io/hostname: 6 nodes for 8 pods" in big["message"]
