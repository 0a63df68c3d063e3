"""The JSON summary, the table and the pictures."""

from __future__ import annotations

import json
from pathlib import Path

from sim_helpers import gang, nodes, scenario

from workloadbuilder.simulator import (
    Simulation,
    SimulationResult,
    parse_scenario,
    render_table,
    utilization_series,
    write_report,
)
from workloadbuilder.simulator._result import compress_names

PNG = b"\x89PNG\r\n\x1a\n"


async def _result() -> SimulationResult:
    text = scenario(
        nodes(2, "4", topology=[{"key": "rack", "size": 1}]),
        gang("a", 2, "2", duration="60s"),
        gang("b", 2, "4", arrival="10s", duration="30s"),
        gang("never", 3, "4", arrival="20s"),
    )
    return await Simulation(parse_scenario(text, source="t.yaml")).run()


async def test_json_shape() -> None:
    result = await _result()
    data = json.loads(json.dumps(result.to_json()))
    assert {"podGroups", "pods", "makespan", "invariantViolations", "utilization"} <= set(data)
    assert set(data["pods"]) >= {"total", "bound", "pending", "succeeded"}
    assert data["pods"] == {"total": 7, "bound": 4, "running": 0, "pending": 3, "succeeded": 4}
    assert data["makespan"] == 90.0
    required = {
        "namespace",
        "name",
        "minCount",
        "boundPods",
        "initiallyScheduled",
        "nodes",
        "scheduledAt",
        "reason",
    }
    by_name = {g["name"]: g for g in data["podGroups"]}
    for g in data["podGroups"]:
        assert required <= set(g)
    assert set(by_name["a"]["nodes"]) <= {"n-0", "n-1"} and by_name["a"]["nodes"]
    assert by_name["a"]["scheduledAt"] == 0.0 and by_name["a"]["boundPods"] == 2
    assert by_name["b"]["nodes"] == ["n-0", "n-1"]  # 4 CPUs each: one per node
    assert by_name["b"]["scheduledAt"] == 60.0 and by_name["b"]["waited"] == 50.0
    assert by_name["never"]["initiallyScheduled"] is False
    assert by_name["never"]["reason"] == "Unschedulable" and by_name["never"]["boundPods"] == 0
    assert {p["name"] for p in data["pendingPods"]} == {"never-0", "never-1", "never-2"}
    assert data["invariantViolations"] == []
    assert 0 < data["utilization"]["cpu"]["mean"] <= data["utilization"]["cpu"]["peak"] <= 1


async def test_utilization_series_follows_binds_and_completions() -> None:
    result = await _result()
    cpu = utilization_series(result)["cpu"]
    # (time, used, allocatable): a uses 4 of 8 CPUs from 0s to 60s, b all 8 until 90s
    assert cpu == [(0.0, 4.0, 8.0), (60.0, 8.0, 8.0), (90.0, 0.0, 8.0)]


async def test_table_mentions_every_group_and_the_invariant() -> None:
    text = render_table(await _result())
    for name in (
        "default/a",
        "default/b",
        "default/never",
        "Unschedulable",
        "makespan: 1m30s",
        "gang invariant: held",
    ):
        assert name in text


async def test_report_writes_summary_and_pictures(tmp_path: Path) -> None:
    result = await _result()
    paths = write_report(result, tmp_path / "out")
    assert sorted(p.name for p in paths) == ["summary.json", "timeline.png", "utilization.png"]
    assert json.loads((tmp_path / "out" / "summary.json").read_text()) == json.loads(
        json.dumps(result.to_json())
    )
    for name in ("timeline.png", "utilization.png"):
        data = (tmp_path / "out" / name).read_bytes()
        assert data.startswith(PNG) and len(data) > 10_000


def test_compress_names() -> None:
    assert compress_names(["gpu-00", "gpu-01", "gpu-02", "gpu-05", "cpu"]) == (
        "cpu, gpu-[00-02], gpu-05"
    )
    assert compress_names([f"n-{i}" for i in (0, 2, 4, 6, 8)], limit=2) == "n-0, n-2 +3 more"
    assert compress_names([]) == ""


async def test_empty_scenario_reports(tmp_path: Path) -> None:
    result = await Simulation(parse_scenario("")).run()
    assert result.to_json()["pods"]["total"] == 0 and result.makespan is None
    assert "(no pod groups)" in render_table(result)
    paths = write_report(result, tmp_path)
    assert all(p.exists() for p in paths)
