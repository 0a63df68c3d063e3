"""Scenario updates (``sim.workloadbuilder.io/at``) and deletions (``delete-at``), the gang
invariant counting only what the scheduler did, gated groups, and the limits."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from sim_helpers import gang, job, nodes, scenario

from workloadbuilder.cli import main
from workloadbuilder.simulator import (
    ScenarioError,
    Simulation,
    SimulationResult,
    parse_scenario,
    render_table,
)
from workloadbuilder.testing.builders import make_pod, make_pod_group

AT = "sim.workloadbuilder.io/at"
DELETE_AT = "sim.workloadbuilder.io/delete-at"


async def run(text: str, **kwargs: Any) -> SimulationResult:
    return await Simulation(parse_scenario(text, source="t.yaml"), **kwargs).run()


def group(result: SimulationResult, name: str) -> Any:
    [g] = [g for g in result.groups if g.name == name]
    return g


def annotate(doc: str, annotations: dict[str, str]) -> str:
    data = yaml.safe_load(doc)
    data["metadata"].setdefault("annotations", {}).update(annotations)
    return yaml.safe_dump(data)


def pod(name: str, group_name: str | None, cpu: str, **meta: Any) -> dict[str, Any]:
    b = make_pod(name).container_name("c").image("x").request("cpu", cpu)
    if group_name:
        b.pod_group(group_name)
    out = b.obj()
    out["metadata"].update(meta)
    return out


# ---- the invariant counts what the scheduler did ---------------------------------------------


async def test_a_member_pre_bound_by_node_name_is_not_a_violation() -> None:
    pinned = pod("g-0", "g", "1")
    pinned["spec"]["nodeName"] = "n-0"
    text = scenario(
        nodes(2, "4"),
        yaml.safe_dump(make_pod_group("g").gang(2).obj()),
        yaml.safe_dump(pinned),
        yaml.safe_dump(pod("g-1", "g", "1")),
    )
    result = await run(text)
    assert result.violations == ()
    g = group(result, "g")
    assert g.bound_pods == 2 and g.initially_scheduled
    assert "gang invariant: held" in render_table(result)


# ---- updates ---------------------------------------------------------------------------


async def test_min_count_lowered_by_a_later_document() -> None:
    pg = make_pod_group("g").gang(3).obj()
    lowered = make_pod_group("g").gang(2).annotations({AT: "30s"}).obj()
    text = scenario(
        nodes(2, "4"),
        yaml.safe_dump(pg),
        *(yaml.safe_dump(pod(f"g-{i}", "g", "4")) for i in range(3)),
        yaml.safe_dump(lowered),
    )
    result = await run(text)
    g = group(result, "g")
    assert g.min_count == 2 and g.scheduled_at == 30.0 and g.bound_pods == 2
    assert result.violations == ()


async def test_a_scheduling_gate_removed_later() -> None:
    gated = pod("p", None, "1")
    gated["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
    released = pod("p", None, "1")
    released["metadata"]["annotations"] = {AT: "20s"}
    text = scenario(nodes(1, "4"), yaml.safe_dump(gated), yaml.safe_dump(released))
    result = await run(text)
    [p] = result.pods
    assert p.bound == 20.0


async def test_node_label_update_is_seen() -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "x", "labels": {"zone": "a"}},
        "status": {"allocatable": {"cpu": "4", "memory": "4Gi", "pods": "110"}},
    }
    later = json.loads(json.dumps(node))
    later["metadata"]["labels"] = {"zone": "b"}
    later["metadata"]["annotations"] = {AT: "10s"}
    result = await run(scenario(yaml.safe_dump(node), yaml.safe_dump(later)))
    assert result.nodes[0].labels == {"zone": "b"}


# ---- deletions -------------------------------------------------------------------------


async def test_deleting_a_job_frees_its_nodes_for_a_waiting_gang() -> None:
    blocker = annotate(job("blocker", 2, "4"), {DELETE_AT: "2m"})
    text = scenario(nodes(2, "4"), blocker, job("next", 2, "4", arrival="10s", duration="1m"))
    result = await run(text)
    pods = {p.name: p for p in result.pods}
    assert pods["blocker-0"].deleted == 120.0 and pods["blocker-1"].deleted == 120.0
    nxt = next(g for g in result.groups if g.owner == "Job/next")
    assert nxt.scheduled_at == 120.0 and nxt.finished_at == 180.0
    assert result.violations == ()


async def test_deleting_a_node_takes_its_pods() -> None:
    node_pool = annotate(nodes(1, "4"), {DELETE_AT: "30s"})
    text = scenario(node_pool, nodes(1, "4", name="m"), gang("g", 1, "3"))
    result = await run(text)
    [p] = result.pods
    assert p.node == "n-0" and p.deleted == 30.0


# ---- gated groups say why they wait ----------------------------------------------------------


async def test_gated_gang_says_how_many_pods_exist() -> None:
    text = scenario(
        nodes(2, "4"),
        yaml.safe_dump(make_pod_group("g").gang(3).obj()),
        *(yaml.safe_dump(pod(f"g-{i}", "g", "1")) for i in range(2)),
        yaml.safe_dump(pod("lost-0", "missing", "1")),
    )
    result = await run(text)
    g = group(result, "g")
    assert g.reason == "Waiting" and g.message == "waiting: 2 of 3 pods exist"
    m = group(result, "missing")
    assert m.message == "waiting: PodGroup default/missing does not exist (1 pod names it)"
    table = render_table(result)
    assert "Waiting: 2 of 3 pods exist" in table


# ---- scenario errors -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("docs", "document", "path", "words"),
    [
        (
            [make_pod_group("g").gang(1).annotations({AT: "10s"}).obj()],
            2,
            f"metadata.annotations[{AT}]",
            "is new here",
        ),
        (
            [
                make_pod_group("g").gang(1).obj(),
                make_pod_group("g").gang(1).annotations({AT: "1m", DELETE_AT: "10s"}).obj(),
            ],
            3,
            f"metadata.annotations[{DELETE_AT}]",
            "before the object exists",
        ),
        (
            [
                make_pod_group("g").gang(1).annotations({DELETE_AT: "10s"}).obj(),
                make_pod_group("g").gang(1).annotations({AT: "1m"}).obj(),
            ],
            3,
            f"metadata.annotations[{AT}]",
            "deleted at 10s",
        ),
        (
            [
                make_pod_group("g").gang(1).obj(),
                make_pod_group("g")
                .gang(1)
                .annotations({AT: "1m", "sim.workloadbuilder.io/arrival": "5s"})
                .obj(),
            ],
            3,
            "metadata.annotations[sim.workloadbuilder.io/arrival]",
            "Forbidden",
        ),
    ],
)
def test_bad_updates_and_deletions(
    docs: list[dict[str, Any]], document: int, path: str, words: str
) -> None:
    text = scenario(nodes(1), *(yaml.safe_dump(d) for d in docs))
    with pytest.raises(ScenarioError) as e:
        parse_scenario(text)
    assert e.value.document == document and e.value.path == path and words in str(e.value)


def test_updates_of_jobs_are_refused() -> None:
    later = yaml.safe_load(job("j", 1, "1"))
    later["metadata"]["annotations"] = {AT: "1m"}
    later = yaml.safe_dump(later)
    with pytest.raises(ScenarioError) as e:
        parse_scenario(scenario(nodes(1), job("j", 1, "1"), later))
    assert "updates of a Job are not simulated" in str(e.value)


def test_too_large_node_pools_and_jobs_are_refused_fast() -> None:
    start = time.monotonic()
    with pytest.raises(ScenarioError) as e:
        parse_scenario(nodes(10**9))
    assert "at most 20000 nodes" in str(e.value) and e.value.path == "spec.count"
    with pytest.raises(ScenarioError) as e:
        parse_scenario(scenario(nodes(15_000), nodes(15_000, name="m")))
    assert "at most 20000 nodes" in str(e.value) and e.value.document == 2
    with pytest.raises(ScenarioError) as e:
        parse_scenario(scenario(nodes(1), job("j", 3_000_000, "1")))
    assert e.value.path == "spec.parallelism" and "at most 100000 pods" in str(e.value)
    assert time.monotonic() - start < 30


# ---- the command -----------------------------------------------------------------------


def _write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return str(path)


def test_report_directory_is_checked_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, scenario(nodes(1), gang("g", 1, "1")))
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["simulate", path, "--report", str(blocker)]) == 1
    out, err = capsys.readouterr()
    assert out == ""  # nothing simulated
    assert err.startswith("error: cannot write the report to") and "not a directory" in err
    assert main(["simulate", path, "--report", str(blocker / "sub")]) == 1
    assert "is not a directory" in capsys.readouterr().err


def test_grammar_and_short_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, scenario(nodes(1, "4"), job("train", 1, "1", duration="1m")))
    assert main(["simulate", path]) == 0
    out = capsys.readouterr().out
    assert ": 1 node, 1 pod group, 1 pod;" in out
    assert "Job/train train-pgt-0" in out and "default/train-" not in out
    assert main(["simulate", path, "-o", "wide"]) == 0
    wide = capsys.readouterr().out
    assert "default/train-" in wide and "OWNER" in wide
    assert main(["simulate", path, "-o", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["podGroups"][0]["finishedAt"] == 60.0
    assert data["podGroups"][0]["template"] == "train-pgt-0"


def test_the_example_table_fits_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    example = Path(__file__).resolve().parents[2] / "examples/simulations/gpu-training-racks.yaml"
    result = main(["simulate", str(example)])
    assert result == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 130
    assert any("LeaderWorkerSet/serve" in line and "#1" in line for line in lines)


def test_explanations_are_numbered_notes_below_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, scenario(nodes(2, "4"), gang("big", 3, "3"), gang("ok", 1, "1")))
    assert main(["simulate", path]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("default/big"))
    assert row.endswith("Unschedulable [1]")
    assert "\n[1] default/big: minCount 3" in out
    assert main(["simulate", path, "-o", "wide"]) == 0
    wide = capsys.readouterr().out
    row = next(line for line in wide.splitlines() if line.startswith("default/big"))
    assert "Unschedulable: minCount 3" in row and "[1]" not in wide


def test_parsed_updates_and_deletions() -> None:
    pool = annotate(nodes(2, "4"), {DELETE_AT: "1m"})
    first = make_pod_group("g").gang(3).obj()
    later = make_pod_group("g").gang(2).annotations({AT: "30s"}).obj()
    sc = parse_scenario(scenario(pool, yaml.safe_dump(first), yaml.safe_dump(later)))
    actions = [(o.kind, o.name, o.action, o.arrival) for o in sc.objects]
    assert actions == [
        ("Node", "n-0", "create", 0.0),
        ("Node", "n-0", "delete", 60.0),
        ("Node", "n-1", "create", 0.0),
        ("Node", "n-1", "delete", 60.0),
        ("PodGroup", "g", "create", 0.0),
        ("PodGroup", "g", "update", 30.0),
    ]
    update = sc.objects[-1]
    assert update.previous is not None
    assert update.previous["spec"]["schedulingPolicy"] == {"gang": {"minCount": 3}}
    assert [n.name for n in sc.nodes] == ["n-0", "n-1"]
