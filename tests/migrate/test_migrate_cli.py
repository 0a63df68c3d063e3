"""``workloadbuilder migrate``: exit codes, -o yaml|json, stdin, directories, messages."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
import yaml

from workloadbuilder import cli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "migrate"

COSCHED = """\
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {name: g, namespace: ns}
spec: {minMember: 2}
---
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ns, labels: {scheduling.x-k8s.io/pod-group: g}}
spec: {containers: [{name: c, image: pause}]}
"""


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(["migrate", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_yaml_to_stdout_report_to_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "in.yaml"
    src.write_text(COSCHED)
    code, out, err = _run(["-f", str(src)], capsys)
    assert code == 0
    assert [o["kind"] for o in yaml.safe_load_all(out)] == ["Workload", "PodGroup", "Pod"]
    assert f"mapped: {src} document 1: PodGroup ns/g: spec.minMember:" in err


def test_json_output_is_one_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "in.yaml"
    src.write_text(COSCHED)
    code, out, _ = _run(["-f", str(src), "-o", "json"], capsys)
    assert code == 0
    body = json.loads(out)
    assert body["kind"] == "List" and [o["kind"] for o in body["items"]] == [
        "Workload",
        "PodGroup",
        "Pod",
    ]


def test_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(COSCHED.encode())))
    code, out, err = _run(["-f", "-"], capsys)
    assert code == 0 and "kind: PodGroup" in out
    assert "<stdin> document 1: PodGroup ns/g" in err


def test_lossy_input_exits_1_with_nothing_on_stdout_unless_allowed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = str(EXAMPLES / "coscheduling.yaml")
    code, out, err = _run(["-f", path], capsys)
    assert code == 1 and out == ""
    assert "not-expressible:" in err and "pass --allow-lossy" in err
    code, out, _ = _run(["-f", path, "--allow-lossy"], capsys)
    assert code == 0 and "kind: PodGroup" in out


def test_a_directory_reads_every_manifest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a.yaml").write_text(COSCHED)
    (tmp_path / "notes.txt").write_text("not a manifest")
    code, out, _ = _run(["-f", str(tmp_path)], capsys)
    assert code == 0 and len(list(yaml.safe_load_all(out))) == 3


def test_bad_input_is_one_line_with_file_document_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "bad.yaml"
    src.write_text(COSCHED.replace("{minMember: 2}", "{minMember: two}"))
    code, out, err = _run(["-f", str(src)], capsys)
    assert code == 1 and out == ""
    assert (
        err == f"error: {src} document 1: PodGroup ns/g: spec.minMember: "
        "expected an integer, got 'two'\n"
    )
    assert "Traceback" not in err


def test_half_linked_pods_name_their_document(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "half.yaml"
    src.write_text(COSCHED.split("---\n")[1])
    code, _, err = _run(["-f", str(src)], capsys)
    assert code == 1
    assert err.startswith(
        f"error: {src} document 1: Pod ns/p: "
        "metadata.labels[scheduling.x-k8s.io/pod-group]: half-linked"
    )


def test_unreadable_input_and_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(["-f", str(tmp_path / "missing.yaml")], capsys)
    assert code == 1 and "no such file" in err
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    code, _, err = _run(["-f", str(tmp_path / "list.yaml")], capsys)
    assert code == 1 and "expected a Kubernetes object" in err
    code, _, err = _run(["-f", str(tmp_path / "list.yaml"), "--tier-label", "rack"], capsys)
    assert code == 1 and "TIER=NODE_LABEL_KEY" in err
    with pytest.raises(SystemExit) as e:
        cli.main(["migrate", "-f", "x", "--from", "slurm"])
    assert e.value.code == 2


def test_every_example_migrates(capsys: pytest.CaptureFixture[str]) -> None:
    for example in sorted(EXAMPLES.glob("*.yaml")):
        code, out, err = _run(
            ["-f", str(example), "--allow-lossy", "--tier-label", "1=topology.kubernetes.io/rack"],
            capsys,
        )
        assert code == 0, err
        kinds = {o["kind"] for o in yaml.safe_load_all(out)}
        assert {"Workload", "PodGroup"} <= kinds or "Job" in kinds, example
