"""``workloadbuilder validate``: exit codes and output lines."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from workloadbuilder.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

VALID_WORKLOAD = {
    "apiVersion": "scheduling.k8s.io/v1beta1",
    "kind": "Workload",
    "metadata": {"name": "w", "namespace": "team"},
    "spec": {"podGroupTemplates": [{"name": "a", "schedulingPolicy": {"gang": {"minCount": 2}}}]},
}


def write(tmp_path: Path, *docs: Any, name: str = "m.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(list(docs)))
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["validate", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def reported(err: str) -> str:
    """The document errors on stderr without their ``error: FILE document N: `` prefix
    (issue 13: errors go to stderr, prefixed, like every command's)."""
    lines = [
        re.sub(r"^error: .*? document \d+: ", "", line)
        for line in err.splitlines()
        if line.startswith("error: ")
    ]
    return "".join(f"{line}\n" for line in lines)


def test_valid_manifest_exits_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "-f", write(tmp_path, VALID_WORKLOAD))
    assert code == 0
    assert out == "Workload team/w: valid\n"
    assert err == ""


def test_invalid_manifest_one_line_per_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = json.loads(json.dumps(VALID_WORKLOAD))
    bad["spec"]["podGroupTemplates"].append({"name": "Bad_Name", "schedulingPolicy": {}})
    pg = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pg"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 0}}},
    }
    code, _, err = run(capsys, "-f", write(tmp_path, bad, pg))
    out = reported(err)
    assert code == 1
    lines = out.splitlines()
    assert lines[0].startswith(
        'Workload team/w: spec.podGroupTemplates[1].name: Invalid value: "Bad_Name"'
    )
    assert lines[1] == (
        'Workload team/w: spec.podGroupTemplates[1].schedulingPolicy: Invalid value: "": must '
        "specify "
        "one of: `basic`, `gang`"
    )
    # no namespace in the document: validated in the -n namespace ("default"), like kubectl
    assert lines[2] == "PodGroup default/pg: spec.schedulingPolicy.gang.minCount: Required value"
    assert len(lines) == 3


def test_namespace_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = {**VALID_WORKLOAD, "metadata": {"name": "w"}}
    code, out, _ = run(capsys, "-n", "prod", "-f", write(tmp_path, doc))
    assert (code, out) == (0, "Workload prod/w: valid\n")


def test_codec_errors_are_field_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = json.loads(json.dumps(VALID_WORKLOAD))
    bad["spec"]["podGroupTemplates"][0]["schedulingPolicy"]["gang"]["minCount"] = "two"
    wrong_version = {
        **VALID_WORKLOAD,
        "apiVersion": "scheduling.k8s.io/v1",
        "metadata": {"name": "v"},
    }
    code, out, err = run(capsys, "-f", write(tmp_path, bad, wrong_version))
    assert code == 1
    assert "Traceback" not in out + err
    assert reported(err).splitlines() == [
        "Workload team/w: spec.podGroupTemplates[0].schedulingPolicy.gang.minCount: Invalid value: "
        "expected an integer, got 'two'",
        "Workload default/v: apiVersion: Invalid value: Workload is served as "
        "scheduling.k8s.io/v1beta1, scheduling.k8s.io/v1alpha3, not 'scheduling.k8s.io/v1'",
    ]


def test_job_scheduling_block(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns"},
        "spec": {
            "parallelism": 2,
            "scheduling": {"schedulingPolicy": {"gang": {"minCount": 3}}},
            "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}},
        },
    }
    code, _, err = run(capsys, "-q", "-f", write(tmp_path, job))
    assert code == 1
    assert reported(err) == (
        "Job ns/j: spec.scheduling.schedulingPolicy.gang.minCount: Invalid value: 3: must not be "
        "greater than parallelism (2)\n"
    )


def test_feature_gates_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = {
        **VALID_WORKLOAD,
        "spec": {
            "compositePodGroupTemplates": [
                {
                    "name": "c",
                    "schedulingPolicy": {"basic": {}},
                    "podGroupTemplates": [{"name": "a", "schedulingPolicy": {"basic": {}}}],
                }
            ]
        },
    }
    path = write(tmp_path, doc)
    assert run(capsys, "-f", path)[0] == 0
    code, _, err = run(capsys, "--feature-gates", "CompositePodGroup=false", "-f", path)
    assert code == 1
    assert "must specify one of: `podGroupTemplates`, `compositePodGroupTemplates`" in err
    code, _, err = run(capsys, "--feature-gates", "Nope=true", "-f", path)
    assert code == 2
    assert "invalid feature gate" in err


def test_stdin_and_list(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = {"apiVersion": "v1", "kind": "List", "items": [VALID_WORKLOAD, VALID_WORKLOAD]}
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(doc)))
    code, out, _ = run(capsys, "-f", "-")
    assert code == 0
    assert out.splitlines() == ["Workload team/w: valid", "Workload team/w: valid"]


def test_unknown_fields_warn_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(json.dumps(VALID_WORKLOAD))
    doc["spec"]["extra"] = 1
    code, _, err = run(capsys, "-f", write(tmp_path, doc))
    assert code == 0
    assert err == 'Warning: Workload team/w: unknown field "spec.extra"\n'


def test_usage_errors_exit_two(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["validate"])
    assert exc.value.code == 2
    code, _, err = run(capsys, "-f", str(tmp_path / "missing.yaml"))
    assert code == 1  # issue 13: a missing file is invalid input (exit 1), as in `build`
    assert "missing.yaml" in err


def test_unparseable_yaml_exits_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("a: [unclosed\n")
    code, _, err = run(capsys, "-f", str(path))
    assert code == 1
    assert err.startswith("error:")
    assert "Traceback" not in err


def test_non_object_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("just a string\n")
    code, _, err = run(capsys, "-f", str(path))
    assert code == 1
    # issue 13: documents are numbered from 1, the message is build's
    assert err.endswith("document 1: expected a Kubernetes object (a mapping), got a string\n")


@pytest.mark.parametrize("name", ["job-gang.yaml", "job-basic.yaml", "jobset.yaml", "lws.yaml"])
def test_examples_are_valid(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = EXAMPLES / name
    code, out, _ = run(capsys, "-f", str(path))
    assert code == 0, out


def test_lws_gang_with_leader_ready_is_invalid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = EXAMPLES / "lws.yaml"
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    lws = next(d for d in docs if d.get("kind") == "LeaderWorkerSet")
    lws["spec"]["startupPolicy"] = "LeaderReady"
    lws["spec"].setdefault("scheduling", {})["schedulingPolicy"] = {"gang": {}}
    code, _, err = run(capsys, "-f", write(tmp_path, lws))
    assert code == 1
    assert "LeaderReady" in err


def test_missing_scheduling_policy_reports_the_union_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = json.loads(json.dumps(VALID_WORKLOAD))
    del doc["spec"]["podGroupTemplates"][0]["schedulingPolicy"]
    pg = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": "p"}}
    code, _, err = run(capsys, "-f", write(tmp_path, doc, pg))
    assert code == 1
    assert reported(err).splitlines() == [
        'Workload team/w: spec.podGroupTemplates[0].schedulingPolicy: Invalid value: "": must '
        "specify one of: `basic`, `gang`",
        'PodGroup default/p: spec.schedulingPolicy: Invalid value: "": must specify one of: '
        "`basic`, `gang`",
    ]


def test_bad_input_is_one_line_and_never_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    binary = tmp_path / "b.yaml"
    binary.write_bytes(b"\xff\xfe\x00kind")
    code, out, err = run(capsys, "-f", str(binary))
    assert (code, out) == (1, "")
    assert err == f"error: cannot read {binary}: not UTF-8 text\n"

    unclosed = tmp_path / "u.yaml"
    unclosed.write_text('{"kind": "Job", "spec": \n')
    code, _, err = run(capsys, "-f", str(unclosed))
    assert code == 1
    assert err.startswith(f"error: {unclosed}: not valid YAML or JSON: ")
    assert err.count("\n") == 1

    code, _, err = run(capsys, "-f", write(tmp_path, {"kind": ["Workload"]}))
    assert (code, reported(err)) == (
        1,
        "<unknown kind> default/<unnamed>: kind: Invalid value: expected a string\n",
    )
    code, _, err = run(capsys, "-f", write(tmp_path, {"metadata": {"name": "x"}}))
    assert (code, reported(err)) == (1, "<unknown kind> default/x: kind: Required value\n")

    code, out, err = run(capsys, "-f", str(tmp_path))
    # issue 13: a directory is invalid input (exit 1) with build's message
    assert (code, out, err) == (1, "", f"error: cannot read {tmp_path}: is a directory\n")


def test_no_documents_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert run(capsys, "-f", "-") == (1, "", "error: no objects passed to validate\n")
    empty = tmp_path / "e.yaml"
    empty.write_text("---\n# nothing\n")
    assert run(capsys, "-f", str(empty)) == (1, "", "error: no objects passed to validate\n")


def test_job_spec_that_is_not_an_object_is_invalid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": [1]}
    code, _, err = run(capsys, "-f", write(tmp_path, job))
    assert (code, reported(err)) == (1, "Job default/j: spec: Invalid value: expected an object\n")


def test_generic_workload_is_checked_like_build_checks_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    generic = {
        "apiVersion": "workloadbuilder.io/v1alpha1",
        "kind": "GenericWorkload",
        "metadata": {"name": "g"},
        "spec": [1],
    }
    code, _, err = run(capsys, "-f", write(tmp_path, generic))
    assert (code, reported(err)) == (
        1,
        "GenericWorkload default/g: spec: Invalid value: expected an object, got a list\n",
    )
    example = str(EXAMPLES / "custom-operator.yaml")
    assert run(capsys, "-f", example)[:2] == (0, "GenericWorkload default/llm-pretrain: valid\n")
    # Other gates than the defaults the adapter validated with: the planned objects are
    # validated again (the example's hierarchy needs CompositePodGroup).
    code, _, err = run(capsys, "-f", example, "--feature-gates", "CompositePodGroup=false")
    assert code == 1
    assert reported(err).startswith(
        "GenericWorkload default/llm-pretrain: Workload default/llm-pretrain: "
    )


def test_an_unexpected_exception_is_one_line_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr("workloadbuilder.cli._validate.validate_document", broken)
    code, out, err = run(capsys, "-f", write(tmp_path, VALID_WORKLOAD))
    assert (code, out) == (1, "")
    assert err == "error: internal error: RuntimeError: boom second line\n"
