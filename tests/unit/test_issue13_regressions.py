"""Every example reproduced in issue 13, as a regression test (SDK and CLI; the scheduler's
parts are in ``tests/scheduler/test_scheduler_issue13.py``)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
import yaml

from workloadbuilder.builder import PodSet, simple_workload
from workloadbuilder.cli import Document, main, read_manifests, validate_document
from workloadbuilder.cli import InputError as CliInputError
from workloadbuilder.errors import ValidationError
from workloadbuilder.kinds import plan_for
from workloadbuilder.testing.builders import make_job, make_jobset, make_lws, make_replicated_job

OWNER = {"apiVersion": "example.com/v1", "kind": "Trainer", "metadata": {"name": "t", "uid": "u"}}


def _job(parallelism: Any, name: str = "x") -> dict[str, Any]:
    job = make_job(name, "default").gang().obj()
    job["spec"]["parallelism"] = parallelism
    return job


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _write(tmp_path: Path, doc: Any, name: str = "m.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    return str(path)


# ---- the SDK's last safety net --------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "path", "detail"),
    [
        (_job(3_000_000_000), "spec.parallelism", "expected a 32-bit integer"),
        (_job(1e29), "spec.parallelism", "expected an integer"),
        (_job("1e29"), "spec.parallelism", "expected an integer"),
        (_job(-3), "spec.parallelism", "must be greater than or equal to 0"),
        (_job("four"), "spec.parallelism", "expected an integer"),
        (
            make_lws("l", "default").size(3_000_000_000).scheduling({}).obj(),
            "spec.leaderWorkerTemplate.size",
            "expected a 32-bit integer",
        ),
        (
            make_lws("l", "default").replicas(-1).scheduling({}).obj(),
            "spec.replicas",
            "must be greater than or equal to 0",
        ),
        (
            make_jobset("js", "default")
            .replicated_job(make_replicated_job("w").replicas(-2))
            .scheduling({})
            .obj(),
            "spec.replicatedJobs[0].replicas",
            "must be greater than or equal to 0",
        ),
    ],
    ids=[
        "job-3e9",
        "job-1e29-float",
        "job-1e29-yaml",
        "job-negative",
        "job-four",
        "lws-size-3e9",
        "lws-replicas-negative",
        "jobset-replicas-negative",
    ],
)
def test_source_counts_are_refused_at_the_source_field_by_build_and_validate(
    source: dict[str, Any], path: str, detail: str
) -> None:
    with pytest.raises(ValidationError) as e:
        plan_for(source)
    assert [err.path for err in e.value.errors] == [path]
    assert detail in str(e.value)
    errors, _ = validate_document(source)  # validate reads the source as build does
    assert [err.path for err in errors] == [path]
    assert detail in str(errors[0])


def test_a_derived_min_count_beyond_int32_is_refused_by_the_safety_net() -> None:
    """Each count is an int32, their product (the JobSet-wide minCount) is not."""
    rjob = make_replicated_job("w").replicas(2).field("template.spec.parallelism", 2**31 - 1)
    js = make_jobset("js", "default").replicated_job(rjob).scheduling({}).obj()
    with pytest.raises(ValidationError) as e:
        plan_for(js)
    assert "minCount" in e.value.errors[0].path
    assert "expected a 32-bit integer" in str(e.value)
    assert validate_document(js)[0]


def test_pod_set_replicas_beyond_int32_and_wrongly_typed() -> None:
    for replicas, detail in ((3_000_000_000, "expected a 32-bit integer"), ("4", "integer")):
        with pytest.raises(ValidationError) as e:
            simple_workload(
                name="w",
                namespace="ns",
                owner=OWNER,
                pod_sets=[PodSet(name="p", replicas=replicas)],
            )
        assert e.value.errors[0].path == "podSets[0].replicas"
        assert detail in str(e.value)


def test_simple_workload_owner_without_uid() -> None:
    owner = {"apiVersion": "example.com/v1", "kind": "Trainer", "metadata": {"name": "t"}}
    with pytest.raises(ValidationError) as e:
        simple_workload(
            name="w", namespace="ns", owner=owner, pod_sets=[PodSet(name="p", replicas=2)]
        )
    assert e.value.errors[0].path == "owner.metadata.uid"


def test_a_long_job_name_names_the_jobs_field() -> None:
    job = make_job("a" * 58, "default").obj()
    with pytest.raises(ValidationError) as e:
        plan_for(job)
    assert [c.path for c in e.value.causes] == ["metadata.name"]
    assert "at most 57 characters" in str(e.value)
    errors, _ = validate_document(job)
    assert errors[0].path == "metadata.name"


# ---- one CLI voice --------------------------------------------------------------------------


def _bad_inputs(tmp_path: Path) -> dict[str, tuple[str, str]]:
    """name -> (path, the error line both commands print)."""
    (tmp_path / "empty.yaml").write_text("---\n")
    (tmp_path / "junk.bin").write_bytes(b"\x00\x01\x02\xff\xfe")
    (tmp_path / "latin1.yaml").write_bytes("kind: Caf\xe9\n".encode("latin-1"))
    (tmp_path / "bad.yaml").write_text("kind: Job\nspec: [\n")
    (tmp_path / "scalar.yaml").write_text("hello\n")
    (tmp_path / "list.yaml").write_text("[1, 2]\n")
    t = str(tmp_path)
    return {
        "missing": (f"{t}/nope.yaml", f"error: cannot read {t}/nope.yaml: no such file"),
        "directory": (t, f"error: cannot read {t}: is a directory"),
        "empty": (f"{t}/empty.yaml", "error: no objects passed to {command}"),
        "junk": (f"{t}/junk.bin", f"error: cannot read {t}/junk.bin: not UTF-8 text"),
        "latin1": (f"{t}/latin1.yaml", f"error: cannot read {t}/latin1.yaml: not UTF-8 text"),
        "yaml": (
            f"{t}/bad.yaml",
            f"error: {t}/bad.yaml: not valid YAML or JSON: line 3, column 1: ",
        ),
        "scalar": (
            f"{t}/scalar.yaml",
            f"error: {t}/scalar.yaml document 1: expected a Kubernetes object (a mapping), "
            "got a string",
        ),
        "list": (
            f"{t}/list.yaml",
            f"error: {t}/list.yaml document 1: expected a Kubernetes object (a mapping), "
            "got a list",
        ),
    }


@pytest.mark.parametrize(
    "case", ["missing", "directory", "empty", "junk", "latin1", "yaml", "scalar", "list"]
)
@pytest.mark.parametrize("command", ["build", "validate"])
def test_every_command_reads_input_with_one_voice(
    case: str, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, expected = _bad_inputs(tmp_path)[case]
    code, out, err = _run(capsys, command, "-f", path)
    assert (code, out) == (1, "")
    assert err.startswith(expected.format(command=command)), err
    assert err.count("\n") == 1 and "Traceback" not in err and "internal error" not in err


def test_mixed_documents_are_numbered_from_one_with_kind_and_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "mixed.yaml"
    path.write_text(yaml.safe_dump_all([make_job("ok", "default").obj(), _job(-3), "hello"]))
    for command in ("build", "validate"):
        code, _, err = _run(capsys, command, "-f", str(path))
        lines = err.splitlines()
        assert code == 1
        assert lines == [
            f"error: {path} document 2: Job default/x: spec.parallelism: Invalid value: -3: "
            "must be greater than or equal to 0",
            f"error: {path} document 3: expected a Kubernetes object (a mapping), got a string",
        ]


def test_no_duplicated_prefix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "build", "-f", _write(tmp_path, _job(-3)))
    assert code == 1
    assert err.count("Job default/x") == 1, err


def test_invalid_utf8_on_stdin(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for command in ("build", "validate"):
        monkeypatch.setattr(
            "sys.stdin", io.TextIOWrapper(io.BytesIO(b"kind: \xff\n"), encoding="utf-8")
        )
        code, _, err = _run(capsys, command, "-f", "-")
        assert (code, err) == (1, "error: cannot read <stdin>: not UTF-8 text\n")


def test_feature_gate_errors_list_the_known_gates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(
        capsys, "validate", "--feature-gates", "Nope=true", "-f", _write(tmp_path, _job(1))
    )
    assert code == 2
    assert "known gates: CompositePodGroup, DRAWorkloadResourceClaims" in err


def test_read_manifests_is_the_public_reader(tmp_path: Path) -> None:
    path = tmp_path / "two.yaml"
    path.write_text("kind: List\nitems: [{kind: A, metadata: {name: a}}, {kind: B}]\n---\nx\n")
    docs = read_manifests([str(path)], command="simulate")
    assert [(d.number, d.identity()) for d in docs] == [(1, "A default/a"), (2, None), (3, None)]
    assert docs[0].where() == f"{path} document 1: A default/a"
    assert isinstance(docs[2], Document)
    with pytest.raises(CliInputError, match="no objects passed to simulate"):
        read_manifests(
            [str(tmp_path / "e.yaml")] if (tmp_path / "e.yaml").write_text("") == 0 else [],
            command="simulate",
        )


def test_sdk_md_linking_pods_sample() -> None:
    """docs/sdk.md §6: both ways of naming a pod's PodGroup give the planned PodGroup."""
    plan = simple_workload(
        name="t", namespace="ml", owner=OWNER, pod_sets=[PodSet(name="workers", replicas=8)]
    )
    pod: dict[str, Any] = {"metadata": {}, "spec": {}}
    assert plan.pod_group_for(pod) is None  # a pod that names no pod set is not ours
    pod["metadata"].setdefault("annotations", {})["workloadbuilder.io/pod-set"] = "workers"
    assert plan.pod_group_for(pod) == plan.pod_group_names["workers"]
    assert plan.pod_group("workers").metadata.name == plan.pod_group_names["workers"]


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ({"podSets": [{"name": "a", "replicas": 3_000_000_000}]}, "spec.podSets[0].replicas"),
        ({"podSets": [{"name": "a", "count": 3_000_000_000}]}, "spec.podSets[0].count"),
        ({"podSets": [{"name": "a", "replicas": 20_000}]}, "spec"),
    ],
    ids=["replicas-3e9", "count-3e9", "too-many-groups"],
)
def test_generic_workload_counts_are_bounded(spec: dict[str, Any], path: str) -> None:
    doc = {
        "apiVersion": "workloadbuilder.io/v1alpha1",
        "kind": "GenericWorkload",
        "metadata": {"name": "g"},
        "spec": spec,
    }
    with pytest.raises(ValidationError) as e:
        plan_for(doc)
    assert [err.path for err in e.value.errors] == [path]


def test_lws_replicas_that_would_make_millions_of_pod_groups_are_refused() -> None:
    lws = make_lws("l", "default").replicas(2**31 - 1).scheduling({}).obj()
    with pytest.raises(ValidationError) as e:
        plan_for(lws)
    assert e.value.errors[0].path == "spec.replicas"
    assert "at most 10000" in str(e.value)


def test_never_internal_error_unicode_decode_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A command that reads a file of its own and meets bad bytes still says so plainly."""

    def boom(args: Any) -> int:
        raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")

    monkeypatch.setattr("workloadbuilder.cli._build._run", boom)
    code, _, err = _run(capsys, "build", "-f", "x.yaml")
    assert code == 1
    assert err.startswith("error: input is not UTF-8 text: ") and "internal error" not in err


@pytest.mark.parametrize("kind", ["Job", "LeaderWorkerSet", "JobSet"])
def test_a_namespace_that_is_not_a_string_is_refused(kind: str) -> None:
    """Found by the differential bad-field test: ``namespace: 2147483648`` was str()-ed."""
    doc = {
        "Job": make_job("j").obj(),
        "LeaderWorkerSet": make_lws("l").scheduling({}).obj(),
        "JobSet": make_jobset("js").replicated_job(make_replicated_job("w")).scheduling({}).obj(),
    }[kind]
    doc["metadata"]["namespace"] = 2**31
    with pytest.raises(ValidationError) as e:
        plan_for(doc)
    assert e.value.errors[0].path == "metadata.namespace"
