"""``workloadbuilder lint topology --kubeconfig``: the nodes come from the real v1.37.2 API
server (Nodes created on the harness control plane, their status patched like a kubelet)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from workloadbuilder.cli import main
from workloadbuilder.testing import ControlPlane
from workloadbuilder.testing.builders import make_job

BLOCK = "lint-test.example.com/block"
RACK = "lint-test.example.com/rack"
NODES = {  # lint-0..3: racks r0, r1 in block b0; lint-4, lint-5 in block b1, but lint-4 says r1
    "lint-0": ("b0", "r0"),
    "lint-1": ("b0", "r0"),
    "lint-2": ("b0", "r1"),
    "lint-3": ("b0", "r1"),
    "lint-4": ("b1", "r1"),
    "lint-5": ("b1", "r2"),
}


@pytest.fixture
def lint_nodes(control_plane: ControlPlane) -> Iterator[list[str]]:
    with control_plane.client() as admin:
        for name, (block, rack) in NODES.items():
            node = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {BLOCK: block, RACK: rack}},
                # cordoned and tainted: other tests sharing this control plane never use them
                "spec": {
                    "unschedulable": True,
                    "taints": [{"key": "lint-test", "effect": "NoSchedule"}],
                },
            }
            assert admin.create("/api/v1/nodes", node).ok
            status = {
                "status": {
                    "capacity": {"cpu": "8", "pods": "110"},
                    "allocatable": {"cpu": "8", "pods": "110"},
                }
            }
            assert admin.patch(f"/api/v1/nodes/{name}/status", status).ok
        try:
            yield list(NODES)
        finally:
            for name in NODES:
                admin.delete(f"/api/v1/nodes/{name}")


def test_lint_topology_against_the_api_server(
    control_plane: ControlPlane,
    lint_nodes: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    job = (
        make_job("train")
        .parallelism(7)
        .container_name("c")
        .image("x")
        .request("cpu", "4")
        .gang()
        .topology(RACK)
        .obj()
    )
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    kubeconfig = str(control_plane.kubeconfig)
    code = main(["lint", "topology", "-f", str(path), "--kubeconfig", kubeconfig, "-o", "json"])
    assert code == 1
    data = json.loads(capsys.readouterr().out)
    assert data["nodes"] >= len(NODES)
    never = [f for f in data["findings"] if f["type"] == "never-fits"]
    # 7 pods x 4 CPU: the biggest rack, r1 (3 nodes x 8 CPU), holds 6 of them
    assert len(never) == 1 and never[0]["domains"] == ["r1"]
    assert never[0]["nodes"] == ["lint-2", "lint-3", "lint-4"]
    assert "holds 6 of them" in never[0]["message"]
    assert data["levels"][0]["key"] == RACK and data["levels"][0]["domains"] == 3

    # a composite: racks inside blocks; r1 spans both blocks
    wl = {
        "apiVersion": "scheduling.k8s.io/v1alpha3",
        "kind": "Workload",
        "metadata": {"name": "llm"},
        "spec": {
            "compositePodGroupTemplates": [
                {
                    "name": "slices",
                    "schedulingPolicy": {"gang": {"minGroupCount": 2}},
                    "schedulingConstraints": {"topology": [{"key": BLOCK}]},
                    "podGroupTemplates": [
                        {
                            "name": "slice",
                            "schedulingPolicy": {"gang": {"minCount": 2}},
                            "schedulingConstraints": {"topology": [{"key": RACK}]},
                        }
                    ],
                }
            ]
        },
    }
    path.write_text(yaml.safe_dump(wl))
    assert main(["lint", "topology", "-f", str(path), "--kubeconfig", kubeconfig]) == 1
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if "[not-nested]" in ln)
    assert line.startswith(
        "Workload default/llm: spec.compositePodGroupTemplates[0].podGroupTemplates[0]"
        ".schedulingConstraints.topology[0].key: [not-nested]"
    )
    assert f"{RACK}=r1 spans 2 domains of its parent level {BLOCK}" in line
    assert "b0: lint-2, lint-3" in line and "b1: lint-4" in line


def test_lint_topology_unreachable_kubeconfig_context(
    control_plane: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(make_job("j").gang().topology(RACK).obj()))
    code = main(
        [
            "lint",
            "topology",
            "-f",
            str(path),
            "--kubeconfig",
            str(control_plane.kubeconfig),
            "--context",
            "no-such-context",
        ]
    )
    assert code == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "no-such-context" in err and "Traceback" not in err
