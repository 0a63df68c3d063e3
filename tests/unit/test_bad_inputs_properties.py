"""Generated bad input for every command and SDK entry point (issue 13).

Random bytes, random YAML and valid Job / JobSet / LeaderWorkerSet / Workload / PodGroup
manifests with one field replaced by an out-of-range or wrongly typed value go to
``workloadbuilder build``, ``validate`` and ``explain`` (argument parsing, no cluster) and to
``plan_for``, ``validate_document``, ``validate_object``, ``simple_workload``: never a
traceback or an "internal error", the exit code is 1 (or 2 for usage), and when the input
was an object every error line names a field path. ``build`` and ``validate`` give the same
verdict (one reader). That what ``validate`` accepts the real API server accepts is
checked in ``tests/controlplane/test_differential.py``.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pytest
import strategies as S
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workloadbuilder.builder import PodSet, simple_workload
from workloadbuilder.cli import main, validate_document
from workloadbuilder.errors import ValidationError, WorkloadBuilderError
from workloadbuilder.kinds import plan_for

_SETTINGS = settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)


def _run(argv: list[str], stdin: bytes, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Run the CLI in-process with ``stdin`` as the ``-f -`` input; (exit code, stderr)."""
    old = __import__("sys").stdin
    __import__("sys").stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    try:
        try:
            code = main(argv)
        except SystemExit as e:  # argparse usage errors
            code = int(e.code or 0)
    finally:
        __import__("sys").stdin = old
    _, err = capsys.readouterr()
    return code, err


def _assert_clean(code: int, err: str, *, allow_ok: bool = False) -> None:
    assert "Traceback" not in err, err
    assert "internal error" not in err, err
    assert code in ((0, 1, 2) if allow_ok else (1, 2)), (code, err)
    if code:
        assert any(line.startswith("error: ") for line in err.splitlines()), err


# ---- random bytes and random YAML ---------------------------------------------------------

_json_leaves = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
_json = st.recursive(
    _json_leaves,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)


@_SETTINGS
@given(data=st.binary(max_size=200), command=st.sampled_from(("build", "validate")))
def test_random_bytes(data: bytes, command: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run([command, "-f", "-"], data, capsys)
    _assert_clean(code, err)


@_SETTINGS
@given(
    doc=_json,
    kind=st.sampled_from((None, "Job", "JobSet", "LeaderWorkerSet", "Workload", "PodGroup")),
    command=st.sampled_from(("build", "validate")),
)
def test_random_yaml(
    doc: Any, kind: str | None, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    if kind is not None and isinstance(doc, dict):
        doc = {**doc, "kind": kind}
    text = yaml.safe_dump(doc).encode()
    code, err = _run([command, "-f", "-"], text, capsys)
    _assert_clean(code, err, allow_ok=command == "validate")


# ---- valid manifests with one bad field ---------------------------------------------------

_sources = S.source_manifests
_mutated = S.one_bad_field


_FIELD_LINE = re.compile(r"document \d+: (?:\S+ \S+: )?.*(spec|metadata|kind|apiVersion)\b")


@_SETTINGS
@given(doc=_mutated())
def test_one_bad_field(doc: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    text = yaml.safe_dump(doc).encode()
    codes = {}
    for command in ("build", "validate"):
        code, err = _run(
            [command, "-q", "-f", "-"] if command == "validate" else [command, "-f", "-"],
            text,
            capsys,
        )
        _assert_clean(code, err, allow_ok=True)
        codes[command] = code
        for line in err.splitlines():
            if line.startswith("error: ") and "not managed" not in line:
                assert _FIELD_LINE.search(line), line
    kind = doc["kind"]
    if kind in ("Job", "JobSet", "LeaderWorkerSet", "GenericWorkload"):
        errors, notes = validate_document(doc)
        if not notes:  # a kind the controller manages: build and validate agree
            assert (codes["build"] == 0) == (not errors), (codes, errors, doc)
    # the SDK entry points raise only the SDK's errors
    try:
        plan_for(doc)
    except WorkloadBuilderError:
        pass
    except Exception as e:  # pragma: no cover - a failure
        if kind in ("Job", "JobSet", "LeaderWorkerSet", "GenericWorkload"):
            raise AssertionError(f"plan_for raised {type(e).__name__}: {e}") from e


# ---- simple_workload -----------------------------------------------------------------------

_OWNER = {"apiVersion": "example.com/v1", "kind": "T", "metadata": {"name": "t", "uid": "u-1"}}


@_SETTINGS
@given(
    replicas=S.BAD_VALUES | st.integers(),
    min_count=st.none() | S.BAD_VALUES | st.integers(),
    name=st.sampled_from(["p", "", "Bad_Name", 3, "x" * 70]),
)
def test_simple_workload_bad_pod_sets(replicas: Any, min_count: Any, name: Any) -> None:
    try:
        simple_workload(
            name="w",
            namespace="ns",
            owner=_OWNER,
            pod_sets=[PodSet(name=name, replicas=replicas, min_count=min_count)],
        )
    except ValidationError as e:
        assert e.errors and all(
            err.path.startswith("podSets[0]")
            or err.path.startswith("spec")
            or err.path.startswith("metadata")
            for err in e.errors
        ), e


@pytest.mark.parametrize(
    "argv",
    [
        ["explain"],
        ["explain", "nope"],
        ["explain", "podgroup"],
        ["explain", "podgroup", "x", "-o", "wide"],
    ],
)
def test_explain_usage_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run(argv, b"", capsys)
    assert code == 2, err
    assert "Traceback" not in err and "error: " in err


def test_property_inputs_cover_every_source_kind(tmp_path: Path) -> None:
    assert {d["kind"] for d in _sources()} == {
        "Job",
        "JobSet",
        "LeaderWorkerSet",
        "Workload",
        "PodGroup",
        "GenericWorkload",
    }
