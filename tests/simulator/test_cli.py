"""``workloadbuilder simulate``: exit codes, output formats, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sim_helpers import gang, nodes, scenario

from workloadbuilder.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "simulations"


def _write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "scenario.yaml"
    path.write_text(text)
    return str(path)


def test_table_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, scenario(nodes(2), gang("g", 2, "1", duration="1m")))
    assert main(["simulate", path]) == 0
    out = capsys.readouterr().out
    assert "default/g" in out and "Scheduled" in out and "makespan: 1m" in out


def test_json_output_and_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, scenario(nodes(2), gang("g", 2, "1", duration="1m")))
    report = tmp_path / "report"
    assert main(["simulate", path, "-o", "json", "--report", str(report)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["podGroups"][0]["name"] == "g" and data["podGroups"][0]["boundPods"] == 2
    assert data["pods"]["succeeded"] == 2 and data["makespan"] == 60.0
    assert {p.name for p in report.iterdir()} == {"summary.json", "timeline.png", "utilization.png"}


def test_until(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, scenario(nodes(1), gang("g", 1, "1", duration="1h")))
    assert main(["simulate", path, "-o", "json", "--until", "10m"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["end"] == 600.0 and data["pods"]["running"] == 1


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  annotations:\n"
            "    sim.workloadbuilder.io/arrival: soon\nspec: {containers: [{name: c}]}\n",
            "document 2: Pod default/p: metadata.annotations[sim.workloadbuilder.io/arrival]",
        ),
        ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n", "document 2"),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
            "spec: {priorityClassName: missing, containers: [{name: c}]}\n",
            "document 2: Pod default/p",
        ),
        ("key: [unclosed\n", "not valid YAML"),
    ],
)
def test_bad_input_exits_1_without_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, words: str
) -> None:
    path = _write(tmp_path, scenario(nodes(1), text))
    assert main(["simulate", path]) == 1
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err
    assert err.startswith("error: ")


def test_missing_file_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(tmp_path / "nope.yaml")]) == 1
    assert "cannot read" in capsys.readouterr().err


def test_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, scenario(nodes(1)))
    with pytest.raises(SystemExit) as e:
        main(["simulate", path, "--until", "soon"])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        main(["simulate", path, "-o", "yaml"])
    assert e.value.code == 2
    assert main(["simulate"]) == 2  # no scenario
    assert main(["simulate", path, "-f", path]) == 2  # two scenarios
    assert "give the scenario once" in capsys.readouterr().err


def test_scenario_with_dash_f_like_kubectl(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, scenario(nodes(2), gang("g", 2, "1", duration="1m")))
    assert main(["simulate", "-f", path, "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["podGroups"][0]["boundPods"] == 2


@pytest.mark.parametrize("name", ["gang-demo", "gpu-training-racks", "priority-mix"])
def test_examples_run_and_keep_the_invariant(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(EXAMPLES / f"{name}.yaml"), "-o", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["invariantViolations"] == []
    groups = data["podGroups"]
    assert groups and any(g["waited"] for g in groups)  # every example shows a gang waiting
    if name == "gpu-training-racks":
        never = [g for g in groups if not g["initiallyScheduled"]]
        assert len(never) == 1 and never[0]["minCount"] == 40
    if name == "priority-mix":
        by_owner = {g["owner"]: g for g in groups}
        assert by_owner["Job/high-gang"]["scheduledAt"] < by_owner["Job/low-gang"]["scheduledAt"]
        assert by_owner["Job/high-gang"]["arrival"] > by_owner["Job/low-gang"]["arrival"]


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"", "no objects passed to simulate"),
        (b"---\n---\n", "no objects passed to simulate"),
        (b"\xff\xfe\x00junk", "not UTF-8 text"),
        (b"kind: [unclosed\n", "not valid YAML or JSON: line 2, column 1"),
    ],
)
def test_simulate_reads_input_like_every_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, words: str
) -> None:
    path = tmp_path / "scenario.yaml"
    path.write_bytes(content)
    assert main(["simulate", "-f", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and words in err and "Traceback" not in err
    # the same input gives the same message from build
    assert main(["build", "-f", str(path)]) == 1
    assert words.replace("simulate", "build") in capsys.readouterr().err


def test_simulate_missing_file_and_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", "-f", str(tmp_path / "nope.yaml")]) == 1
    assert "error: " in capsys.readouterr().err
    assert main(["simulate", "-f", str(tmp_path)]) == 1
    assert "is a directory" in capsys.readouterr().err
