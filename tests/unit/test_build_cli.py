"""``workloadbuilder build``: input forms, output formats, API versions, errors and exit codes."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures.manifests import EXAMPLES_DIR, example_manifests

from workloadbuilder.cli import main

JOB_GANG = str(EXAMPLES_DIR / "job-gang.yaml")
JOBSET = str(EXAMPLES_DIR / "jobset.yaml")
GENERIC = str(EXAMPLES_DIR / "custom-operator.yaml")


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["build", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def kinds(objects: list[dict[str, Any]]) -> list[str]:
    return [o["kind"] for o in objects]


def test_gang_job_example_prints_a_workload_and_a_gang_pod_group(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(["-f", JOB_GANG], capsys)
    assert (code, err) == (0, "")
    docs = list(yaml.safe_load_all(out))
    assert kinds(docs) == ["Workload", "PodGroup"]
    workload, pod_group = docs
    assert workload["apiVersion"] == "scheduling.k8s.io/v1beta1"
    (template,) = workload["spec"]["podGroupTemplates"]
    assert template["name"] == "trainer-pgt-0"
    assert template["schedulingPolicy"] == {"gang": {"minCount": 4}}
    assert pod_group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 4}}
    assert pod_group["spec"]["workloadRef"] == {
        "workloadName": workload["metadata"]["name"],
        "templateName": "trainer-pgt-0",
    }
    # no metadata.uid in the example: nothing that the API server would reject
    assert "ownerReferences" not in workload["metadata"]
    assert "ownerReferences" not in pod_group["metadata"]


def test_json_output_is_one_list(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["-f", JOBSET, "-o", "json"], capsys)
    assert code == 0
    body = json.loads(out)
    assert body["apiVersion"] == "v1" and body["kind"] == "List"
    assert kinds(body["items"]) == ["Workload", "PodGroup", "PodGroup"]


def test_several_files_keep_their_order(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["-f", JOB_GANG, "-f", JOBSET], capsys)
    assert code == 0
    assert kinds(list(yaml.safe_load_all(out))) == ["Workload", "PodGroup"] * 1 + [
        "Workload",
        "PodGroup",
        "PodGroup",
    ]


@pytest.mark.parametrize("version", ["v1beta1", "v1alpha3"])
def test_api_version_relabels_workload_and_pod_group_only(
    version: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(["-f", GENERIC, "--api-version", version], capsys)
    assert code == 0
    for obj in yaml.safe_load_all(out):
        expected = "v1alpha3" if obj["kind"] == "CompositePodGroup" else version
        assert obj["apiVersion"] == f"scheduling.k8s.io/{expected}"


def test_creation_order_is_workload_then_roots_then_children(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(["-f", GENERIC], capsys)
    assert code == 0
    docs = list(yaml.safe_load_all(out))
    assert docs[0]["kind"] == "Workload"
    created: set[str] = set()
    for d in docs[1:]:
        parent = d["spec"].get("parentCompositePodGroupName")
        assert parent is None or parent in created, f"{d['metadata']['name']} before its parent"
        created.add(d["metadata"]["name"])
    assert kinds(docs).index("PodGroup") > max(
        i for i, k in enumerate(kinds(docs)) if k == "CompositePodGroup"
    )


def test_stdin_json_and_kind_list(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    items = [doc for _, doc in example_manifests()]
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps({"kind": "List", "items": items})))
    code, out, err = run(["-f", "-", "-o", "json"], capsys)
    assert (code, err) == (0, "")
    workloads = [o for o in json.loads(out)["items"] if o["kind"] == "Workload"]
    assert len(workloads) == len(items)


def test_multi_document_yaml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "all.yaml"
    path.write_text(
        "---\n".join(Path(p).read_text() for p in (JOB_GANG, JOBSET)) + "\n---\n# empty\n"
    )
    code, out, _ = run(["-f", str(path)], capsys)
    assert code == 0
    assert kinds(list(yaml.safe_load_all(out))).count("Workload") == 2


def test_uid_gives_owner_references(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (doc,) = yaml.safe_load_all(Path(JOBSET).read_text())
    doc["metadata"]["uid"] = "1b2c3d4e-0000-4000-8000-000000000001"
    path = tmp_path / "js.yaml"
    path.write_text(yaml.safe_dump(doc))
    code, out, _ = run(["-f", str(path)], capsys)
    assert code == 0
    for obj in yaml.safe_load_all(out):
        (ref,) = obj["metadata"]["ownerReferences"]
        assert ref["uid"] == doc["metadata"]["uid"] and ref["controller"] is True


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("apiVersion: v1\nkind: Service\nmetadata: {name: s}\n", "unsupported kind v1/Service"),
        ("- just\n- a list\n", "expected a Kubernetes object"),
        ("metadata: {name: x}\n", "has no kind"),
        ("kind: JobSet\napiVersion: apps/v1\nmetadata: {name: x}\n", "apiVersion"),
        ("a: [unclosed\n", "not valid YAML or JSON"),
        (
            "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: {name: x}\n"
            "spec:\n  scheduling: {schedulingPolicy: {gang: {minCount: 5}}}\n"
            "  replicatedJobs: [{name: a, template: {spec: {}}}]\n",
            "spec.scheduling.schedulingPolicy.gang.minCount",
        ),
        (
            "apiVersion: leaderworkerset.x-k8s.io/v1\nkind: LeaderWorkerSet\n"
            "metadata: {name: l}\nspec: {startupPolicy: LeaderReady, scheduling: {}}\n",
            "LeaderReady",
        ),
        (
            "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: {name: x}\n"
            "spec: {replicatedJobs: [{name: a}]}\n",
            "no spec.scheduling",
        ),
    ],
)
def test_invalid_input_is_one_error_line_and_exit_1(
    content: str, needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    code, out, err = run(["-f", str(path)], capsys)
    assert code == 1
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ") and needle in lines[0], lines[0]
    assert "Traceback" not in err


def test_one_bad_document_fails_the_whole_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "mixed.yaml"
    path.write_text(Path(JOB_GANG).read_text() + "\n---\nkind: Nope\napiVersion: v1\n")
    code, out, err = run(["-f", str(path)], capsys)
    assert (code, out) == (1, "")
    assert f"{path} document 2" in err  # issue 13: documents are numbered from 1


def test_missing_file_and_empty_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["-f", str(tmp_path / "nope.yaml")], capsys)
    assert code == 1 and err.startswith("error: cannot read")
    empty = tmp_path / "empty.yaml"
    empty.write_text("---\n")
    code, _, err = run(["-f", str(empty)], capsys)
    assert code == 1 and "no objects" in err


@pytest.mark.parametrize(
    "argv",
    [[], ["-f", JOB_GANG, "-o", "wide"], ["-f", JOB_GANG, "--api-version", "v1"], ["--bogus"]],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["build", *argv])
    assert exc.value.code == 2
    assert "Traceback" not in capsys.readouterr().err


def test_console_script_end_to_end() -> None:
    exe = Path(sys.executable).with_name("workloadbuilder")
    proc = subprocess.run(
        [str(exe), "build", "-f", JOB_GANG], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert kinds(list(yaml.safe_load_all(proc.stdout))) == ["Workload", "PodGroup"]
    bad = subprocess.run(
        [str(exe), "build", "-f", "-"],
        input="kind: Nope\napiVersion: v1\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 1 and "Traceback" not in bad.stderr


def test_undecodable_file_is_one_error_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    binary = tmp_path / "b.yaml"
    binary.write_bytes(b"\xff\xfe\x00kind")
    assert run(["-f", str(binary)], capsys) == (
        1,
        "",
        f"error: cannot read {binary}: not UTF-8 text\n",
    )
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    assert run(["-f", "-"], capsys) == (1, "", "error: no objects passed to build\n")
