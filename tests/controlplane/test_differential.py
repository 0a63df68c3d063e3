"""Differential validation: ``workloadbuilder.validation`` vs the real v1.37.2 API server.

Hypothesis generates valid and nearly-valid Workloads / PodGroups / CompositePodGroups
(``tests/strategies.py``) and updates of stored objects (``_updates.py``); every other
Workload/PodGroup create is sent as ``v1alpha3`` instead of ``v1beta1``. For every case our
verdict (accept/reject) must equal the server's (server-side dry run), and when both reject,
the set of field paths must be equal too. At least 2,000 cases per full run
(``WB_DIFFERENTIAL_SCALE`` scales the example counts); the count is printed at the end.

The server runs with the ``Priority`` admission plugin disabled: it resolves
``priorityClassName``/``priority`` *before* validation and would answer 403 for classes that
do not exist, hiding the validation verdict. Everything else is the stock v1.37.2 chain.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterator
from typing import Any

import attrs
import pytest
import strategies as S
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from controlplane._differential import SUMMARIES, Differ, Outcome
from controlplane._updates import updates
from workloadbuilder.api import (
    CompositeGangSchedulingPolicy,
    CompositePodGroupSchedulingPolicy,
    GangSchedulingPolicy,
    PodGroupSchedulingPolicy,
    object_from_dict,
    object_to_dict,
)
from workloadbuilder.builder import PodSet, simple_workload
from workloadbuilder.cli import build_objects, validate_document
from workloadbuilder.errors import ValidationError, WorkloadBuilderError
from workloadbuilder.testing import (
    DISABLED_ADMISSION_PLUGINS,
    ControlPlane,
    RestClient,
    collection_path,
)
from workloadbuilder.testing.builders import make_job, make_jobset, make_lws, make_replicated_job
from workloadbuilder.validation import validate_job_scheduling

pytestmark = pytest.mark.controlplane

_SCALE = float(os.environ.get("WB_DIFFERENTIAL_SCALE", "1"))
_MIN_CASES = 2000
_COUNTS = {"valid": 600, "nearly_valid": 1300, "updates": 450}


def _settings(name: str) -> settings:
    return settings(
        max_examples=max(1, int(_COUNTS[name] * _SCALE)),
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        print_blob=True,
    )


class _Run:
    def __init__(self, api: RestClient, create_ns: str, update_ns: str) -> None:
        self.create = Differ(api, create_ns)
        self.update = Differ(api, update_ns)
        self.tests_run: set[str] = set()

    @property
    def total(self) -> int:
        return self.create.counts["total"] + self.update.counts["total"]


@pytest.fixture(scope="module")
def diff_run(control_plane: ControlPlane) -> Iterator[_Run]:
    with (
        ControlPlane(
            bin_dir=control_plane.bin_dir,
            disable_admission_plugins=(*DISABLED_ADMISSION_PLUGINS, "Priority"),
        ) as plane,
        plane.client() as api,
    ):
        run = _Run(api, plane.create_namespace("diff-"), plane.create_namespace("upd-"))
        yield run
    counts = run.create.counts + run.update.counts
    summary = {
        "cases": run.total,
        "create": run.create.counts["total"],
        "update": run.update.counts["total"],
        "by_kind": {k: v for k, v in counts.items() if "/" in k},
        "server_accepts": counts["server-accepts"],
        "server_rejects": counts["server-rejects"],
        "disagreements": len(run.create.disagreements) + len(run.update.disagreements),
        "field_path_mismatches": len(run.create.field_mismatches)
        + len(run.update.field_mismatches),
    }
    line = f"differential validation vs kube-apiserver v1.37.2: {json.dumps(summary)}"
    SUMMARIES.append(line)
    out = os.environ.get("WB_DIFFERENTIAL_REPORT")
    if out:
        with open(out, "w") as fh:
            json.dump(summary, fh, indent=2)
    if _SCALE >= 1 and run.tests_run >= set(_COUNTS):
        assert run.total >= _MIN_CASES, line


def _check(outcome: Outcome) -> None:
    assert outcome.agree, "verdict differs: " + outcome.describe()
    if not outcome.server_valid:
        assert outcome.our_fields == outcome.server_fields, (
            f"field paths differ: ours {sorted(outcome.our_fields)} vs server "
            f"{sorted(outcome.server_fields)}: " + outcome.describe()
        )


def test_valid_objects(diff_run: _Run) -> None:
    ns = diff_run.create.namespace
    diff_run.tests_run.add("valid")

    @_settings("valid")
    @given(
        st.one_of(
            S.workloads(ns),
            S.pod_groups(ns, with_priority=True),
            S.composite_pod_groups(ns, with_priority=True),
        )
    )
    def run(obj: Any) -> None:
        _check(diff_run.create.create(obj, "valid"))

    run()


def test_nearly_valid_objects(diff_run: _Run) -> None:
    ns = diff_run.create.namespace
    diff_run.tests_run.add("nearly_valid")

    @_settings("nearly_valid")
    @given(S.nearly_valid_cases(ns))
    def run(case: tuple[str, Any]) -> None:
        _check(diff_run.create.create(case[1], case[0]))

    run()


def test_updates(diff_run: _Run) -> None:
    ns = diff_run.update.namespace
    diff_run.tests_run.add("updates")

    @_settings("updates")
    @given(
        st.one_of(
            S.workloads(ns),
            S.pod_groups(ns, with_priority=True),
            S.composite_pod_groups(ns, with_priority=True),
        ),
        st.data(),
    )
    def run(obj: Any, data: st.DataObject) -> None:
        stored = diff_run.update.persist(obj)
        label, new = data.draw(updates(stored), label="update")
        _check(diff_run.update.update(stored, new, label))

    run()


# --------------------------------------------------------------------------------------------
# Fixed regression cases: open questions about the upstream API and shapes worth pinning.
# Each is compared like a generated case; the server's verdict is also asserted because
# docs/controlplane.md records it.

_PGT = {"name": "a", "schedulingPolicy": {"gang": {"minCount": 2}}}


def _wl(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": "w"},
        "spec": spec,
    }


def _pg(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pg"},
        "spec": spec,
    }


def _cpg(spec: dict[str, Any]) -> dict[str, Any]:
    spec = {"workloadRef": {"workloadName": "w", "templateName": "t"}, **spec}
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha3",
        "kind": "CompositePodGroup",
        "metadata": {"name": "cpg"},
        "spec": spec,
    }


def _nest(depth: int) -> dict[str, Any]:
    """A chain of ``depth`` composite templates ending in one leaf PodGroupTemplate."""
    node: dict[str, Any] = {
        "name": f"c{depth}",
        "schedulingPolicy": {"basic": {}},
        "podGroupTemplates": [{"name": "leaf", "schedulingPolicy": {"basic": {}}}],
    }
    for level in range(depth - 1, 0, -1):
        node = {
            "name": f"c{level}",
            "schedulingPolicy": {"basic": {}},
            "compositePodGroupTemplates": [node],
        }
    return node


REGRESSION_CASES: list[tuple[str, dict[str, Any], bool]] = [
    # (id, object, server accepts?)
    (
        "pg-all-disruption-with-basic-policy",
        _pg({"schedulingPolicy": {"basic": {}}, "disruptionMode": {"all": {}}}),
        True,
    ),
    (
        "cpg-template-all-with-single-child",
        _wl(
            {
                "compositePodGroupTemplates": [
                    {
                        "name": "root",
                        "schedulingPolicy": {"gang": {"minGroupCount": 1}},
                        "disruptionMode": {"all": {}},
                        "podGroupTemplates": [dict(_PGT, disruptionMode={"single": {}})],
                    }
                ]
            }
        ),
        True,
    ),
    (
        "workload-both-template-lists",
        _wl(
            {
                "podGroupTemplates": [_PGT],
                "compositePodGroupTemplates": [
                    {
                        "name": "c",
                        "schedulingPolicy": {"basic": {}},
                        "podGroupTemplates": [dict(_PGT, name="b")],
                    }
                ],
            }
        ),
        False,
    ),
    ("workload-no-templates", _wl({}), False),
    (
        "workload-9-templates",
        _wl({"podGroupTemplates": [dict(_PGT, name=f"t{i}") for i in range(9)]}),
        False,
    ),
    (
        "workload-8-templates",
        _wl({"podGroupTemplates": [dict(_PGT, name=f"t{i}") for i in range(8)]}),
        True,
    ),
    ("workload-depth-3", _wl({"compositePodGroupTemplates": [_nest(3)]}), True),
    ("workload-depth-4", _wl({"compositePodGroupTemplates": [_nest(4)]}), False),
    (
        "workload-empty-composite-template",
        _wl({"compositePodGroupTemplates": [{"name": "c", "schedulingPolicy": {"basic": {}}}]}),
        False,
    ),
    (
        "workload-mixed-priorities",
        _wl({"podGroupTemplates": [dict(_PGT, priority=1), dict(_PGT, name="b", priority=2)]}),
        False,
    ),
    (
        "workload-duplicate-name-across-levels",
        _wl(
            {
                "compositePodGroupTemplates": [
                    {
                        "name": "x",
                        "schedulingPolicy": {"basic": {}},
                        "podGroupTemplates": [dict(_PGT, name="x")],
                    }
                ]
            }
        ),
        False,
    ),
    (
        "pg-parent-without-workload-ref",
        _pg({"schedulingPolicy": {"basic": {}}, "parentCompositePodGroupName": "p"}),
        False,
    ),
    ("pg-min-count-zero", _pg({"schedulingPolicy": {"gang": {"minCount": 0}}}), False),
    (
        "pg-two-topology-keys",
        _pg(
            {
                "schedulingPolicy": {"basic": {}},
                "schedulingConstraints": {"topology": [{"key": "a"}, {"key": "b"}]},
            }
        ),
        False,
    ),
    (
        "pg-5-claims",
        _pg(
            {
                "schedulingPolicy": {"basic": {}},
                "resourceClaims": [{"name": f"c{i}", "resourceClaimName": "x"} for i in range(5)],
            }
        ),
        False,
    ),
    (
        "pg-claim-both-sources",
        _pg(
            {
                "schedulingPolicy": {"basic": {}},
                "resourceClaims": [
                    {"name": "c", "resourceClaimName": "x", "resourceClaimTemplateName": "y"}
                ],
            }
        ),
        False,
    ),
    (
        "pg-priority-above-max",
        _pg({"schedulingPolicy": {"basic": {}}, "priority": 1_000_000_001}),
        False,
    ),
    (
        "pg-preemption-bogus",
        _pg({"schedulingPolicy": {"basic": {}}, "preemptionPolicy": "Sometimes"}),
        False,
    ),
    (
        "cpg-no-workload-ref",
        dict(_cpg({}), spec={"schedulingPolicy": {"basic": {}}}),
        False,
    ),
    ("cpg-min-group-count-zero", _cpg({"schedulingPolicy": {"gang": {"minGroupCount": 0}}}), False),
]


@pytest.mark.parametrize(
    ("doc", "server_accepts"),
    [pytest.param(doc, ok, id=name) for name, doc, ok in REGRESSION_CASES],
)
def test_regression_cases(diff_run: _Run, doc: dict[str, Any], server_accepts: bool) -> None:
    outcome = diff_run.create.create_document(doc, "regression")
    assert outcome.server_valid == server_accepts, outcome.describe()
    _check(outcome)


def _update_case(diff_run: _Run, doc: dict[str, Any], patch: Any) -> tuple[Outcome, Any]:
    stored = diff_run.update.persist(object_from_dict(doc))
    return diff_run.update.update(stored, patch(stored), "regression"), stored


def test_workload_gang_min_count_is_mutable(diff_run: _Run) -> None:
    def bump(w: Any) -> Any:
        t = w.spec.pod_group_templates[0]
        t = attrs.evolve(
            t, scheduling_policy=PodGroupSchedulingPolicy(gang=GangSchedulingPolicy(min_count=5))
        )
        return attrs.evolve(w, spec=attrs.evolve(w.spec, pod_group_templates=(t,)))

    outcome, _ = _update_case(diff_run, _wl({"podGroupTemplates": [_PGT]}), bump)
    assert outcome.server_valid
    _check(outcome)


def test_workload_composite_min_group_count_update(diff_run: _Run) -> None:
    """minGroupCount carries no immutability marker in a template (k8s.io/api v1.37.2)."""
    doc = _wl(
        {
            "compositePodGroupTemplates": [
                {
                    "name": "c",
                    "schedulingPolicy": {"gang": {"minGroupCount": 1}},
                    "podGroupTemplates": [_PGT],
                }
            ]
        }
    )

    def bump(w: Any) -> Any:
        c = w.spec.composite_pod_group_templates[0]
        c = attrs.evolve(
            c,
            scheduling_policy=CompositePodGroupSchedulingPolicy(
                gang=CompositeGangSchedulingPolicy(min_group_count=2)
            ),
        )
        return attrs.evolve(w, spec=attrs.evolve(w.spec, composite_pod_group_templates=(c,)))

    outcome, _ = _update_case(diff_run, doc, bump)
    _check(outcome)


def test_composite_pod_group_min_group_count_is_immutable(diff_run: _Run) -> None:
    def bump(c: Any) -> Any:
        policy = CompositePodGroupSchedulingPolicy(
            gang=CompositeGangSchedulingPolicy(min_group_count=3)
        )
        return attrs.evolve(c, spec=attrs.evolve(c.spec, scheduling_policy=policy))

    outcome, _ = _update_case(
        diff_run, _cpg({"schedulingPolicy": {"gang": {"minGroupCount": 2}}}), bump
    )
    assert not outcome.server_valid
    _check(outcome)


# --------------------------------------------------------------------------------------------
# Job.spec.scheduling (WorkloadWithJob): validate_job_scheduling vs the server's Job validation.

_COUNTS.update({"job_creates": 350, "job_updates": 150})
_TOPOLOGY_KEYS = ("topology.kubernetes.io/rack", "kubernetes.io/hostname", "bad key", "a/b/c")
_CLAIM_NAMES = ("gpu", "nic", "Bad_Name", "")


@st.composite
def _job_policies(draw: st.DrawFn) -> dict[str, Any] | None:
    choice = draw(st.sampled_from(("none", "empty", "basic", "gang", "gang-min", "both")))
    if choice == "none":
        return None
    if choice == "empty":
        return {}
    if choice == "basic":
        return {"basic": {}}
    if choice == "gang":
        return {"gang": {}}
    gang = {"minCount": draw(st.integers(-1, 8))}
    return {"gang": gang} if choice == "gang-min" else {"basic": {}, "gang": gang}


@st.composite
def _job_schedulings(draw: st.DrawFn) -> dict[str, Any] | None:
    if draw(st.integers(0, 9)) == 0:
        return None
    out: dict[str, Any] = {}
    policy = draw(_job_policies())
    if policy is not None:
        out["schedulingPolicy"] = policy
    if draw(st.booleans()):
        keys = draw(st.lists(st.sampled_from(_TOPOLOGY_KEYS), max_size=2))
        out["schedulingConstraints"] = {"topology": [{"key": k} for k in keys]}
    mode: dict[str, Any] | None = draw(
        st.sampled_from((None, {"single": {}}, {"all": {}}, {}, {"single": {}, "all": {}}))
    )
    if mode is not None:
        out["disruptionMode"] = mode
    if draw(st.booleans()):
        claims = []
        for _ in range(draw(st.integers(0, 5))):
            claim: dict[str, Any] = {"name": draw(st.sampled_from(_CLAIM_NAMES))}
            source = draw(st.sampled_from(("claim", "template", "both", "none")))
            if source in ("claim", "both"):
                claim["resourceClaimName"] = draw(st.sampled_from(("c1", "Bad_Claim")))
            if source in ("template", "both"):
                claim["resourceClaimTemplateName"] = "t1"
            claims.append(claim)
        out["resourceClaims"] = claims
    return out


@st.composite
def _valid_job_schedulings(draw: st.DrawFn, parallelism: int) -> dict[str, Any] | None:
    if draw(st.integers(0, 5)) == 0:
        return None
    policies: tuple[dict[str, Any], ...] = (
        {"basic": {}},
        {"gang": {}},
        {"gang": {"minCount": draw(st.integers(1, parallelism))}},
    )
    policy = draw(st.sampled_from(policies))
    out: dict[str, Any] = {"schedulingPolicy": policy}
    if draw(st.booleans()):
        out["schedulingConstraints"] = {
            "topology": [{"key": draw(st.sampled_from(_TOPOLOGY_KEYS[:2]))}]
        }
    if draw(st.booleans()):
        # `all` needs a gang policy (Job validation: not supported with basic)
        modes: tuple[dict[str, Any], ...] = (
            ({"single": {}}, {"all": {}}) if "gang" in policy else ({"single": {}},)
        )
        out["disruptionMode"] = draw(st.sampled_from(modes))
    if draw(st.booleans()):
        out["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "t1"}]
    return out


def _job_doc(ns: str, parallelism: int | None, scheduling: dict[str, Any] | None) -> dict[str, Any]:
    job = make_job("job", ns).container_name("c").field("spec.suspend", True)
    if parallelism is not None:
        job.parallelism(parallelism)
    if scheduling is not None:
        job.scheduling(scheduling)
    return job.obj()


def test_job_scheduling_creates(diff_run: _Run) -> None:
    ns = diff_run.create.namespace
    diff_run.tests_run.add("job_creates")

    @_settings("job_creates")
    @given(st.none() | st.integers(0, 6), _job_schedulings())
    def run(parallelism: int | None, scheduling: dict[str, Any] | None) -> None:
        doc = _job_doc(ns, parallelism, scheduling)
        ours = validate_job_scheduling(doc)
        _check(diff_run.create.raw(doc, ours, label="job"))

    run()


@st.composite
def _job_updates(draw: st.DrawFn, stored: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    new = copy.deepcopy(stored)
    spec = new["spec"]
    choice = draw(
        st.sampled_from(
            ("min-count", "parallelism", "policy", "remove", "add", "constraints", "mode")
        )
    )
    sched = spec.get("scheduling")
    if choice == "remove" or (sched is None and choice != "add" and choice != "parallelism"):
        if sched is None:
            spec["scheduling"] = {"schedulingPolicy": {"gang": {}}}
            return "add", new
        del spec["scheduling"]
        return "remove", new
    if choice == "add":
        spec["scheduling"] = draw(_job_schedulings()) or {"schedulingPolicy": {"basic": {}}}
    elif choice == "parallelism":
        spec["parallelism"] = draw(st.integers(0, 8))
    elif choice == "min-count":
        spec["scheduling"]["schedulingPolicy"] = {"gang": {"minCount": draw(st.integers(0, 8))}}
    elif choice == "policy":
        policy = spec["scheduling"].get("schedulingPolicy") or {}
        spec["scheduling"]["schedulingPolicy"] = (
            {"basic": {}} if "gang" in policy else {"gang": {"minCount": 1}}
        )
    elif choice == "constraints":
        spec["scheduling"]["schedulingConstraints"] = {
            "topology": [{"key": draw(st.sampled_from(_TOPOLOGY_KEYS[:2]))}]
        }
    else:
        current = spec["scheduling"].get("disruptionMode") or {}
        spec["scheduling"]["disruptionMode"] = {"single": {}} if "all" in current else {"all": {}}
    return choice, new


def test_job_scheduling_updates(diff_run: _Run) -> None:
    ns = diff_run.update.namespace
    diff_run.tests_run.add("job_updates")

    @_settings("job_updates")
    @given(st.integers(1, 6), st.data())
    def run(parallelism: int, data: st.DataObject) -> None:
        doc = _job_doc(ns, parallelism, data.draw(_valid_job_schedulings(parallelism)))
        assert not validate_job_scheduling(doc), doc
        stored = diff_run.update.persist_raw(doc)
        label, new = data.draw(_job_updates(stored), label="update")
        ours = validate_job_scheduling(new, stored)
        _check(diff_run.update.raw(new, ours, label=f"job-{label}", update=True))

    run()


@pytest.mark.parametrize(
    ("scheduling", "server_accepts"),
    [
        pytest.param(
            {"schedulingPolicy": {"basic": {}}, "disruptionMode": {"all": {}}},
            False,
            id="all-basic",
        ),
        pytest.param({"disruptionMode": {"all": {}}}, False, id="all-default-basic"),
        pytest.param(
            {"schedulingPolicy": {"gang": {"minCount": 3}}}, False, id="min-count-above-parallelism"
        ),
        pytest.param(
            {"schedulingPolicy": {"gang": {}}, "disruptionMode": {"all": {}}}, True, id="all-gang"
        ),
    ],
)
def test_job_regression_cases(
    diff_run: _Run, scheduling: dict[str, Any], server_accepts: bool
) -> None:
    doc = _job_doc(diff_run.create.namespace, 2, scheduling)
    outcome = diff_run.create.raw(doc, validate_job_scheduling(doc), label="job-regression")
    assert outcome.server_valid == server_accepts, outcome.describe()
    _check(outcome)


# --------------------------------------------------------------------------------------------
# Derived values (issue 13): what `validate` accepts in a source object (Job, JobSet, LWS,
# simple_workload's PodSets), `build` builds, and the real server accepts every object built
# from it -- minCount derived from parallelism / size / replicas included. What `validate`
# refuses in a Job, the server refuses in the Job too.

_COUNTS["derived"] = 120
#: counts around the edges the issue found (int32 overflow, negative, zero)
_EDGE_COUNTS = st.sampled_from([-3, -1, 0, 1, 2, 2**31 - 1, 2**31, 3_000_000_000]) | st.integers(
    -2, 9
)


@st.composite
def _derived_sources(draw: st.DrawFn, ns: str) -> dict[str, Any]:
    kind = draw(st.sampled_from(("Job", "JobSet", "LeaderWorkerSet")))
    gang = draw(st.sampled_from(({"gang": {}}, {"basic": {}}, None)))
    scheduling = {"schedulingPolicy": gang} if gang is not None else {}
    if kind == "Job":
        job = make_job("derived", ns).container_name("c").field("spec.suspend", True)
        job.field("spec.parallelism", draw(_EDGE_COUNTS))
        if gang is not None:
            job.scheduling(scheduling)
        return job.obj()
    if kind == "JobSet":
        rjob = make_replicated_job("w").replicas(draw(st.integers(-2, 3)))
        rjob.field("template.spec.parallelism", draw(_EDGE_COUNTS))
        return make_jobset("derived", ns).replicated_job(rjob).scheduling(scheduling).obj()
    lws = make_lws("derived", ns).replicas(draw(st.integers(-1, 3)))
    lws.field("spec.leaderWorkerTemplate.size", draw(_EDGE_COUNTS))
    return lws.scheduling(scheduling).obj()


def _built(doc: dict[str, Any]) -> list[dict[str, Any]] | str:
    try:
        return build_objects(doc)
    except WorkloadBuilderError as e:
        return str(e)


def test_derived_values_validate_build_and_the_server_agree(diff_run: _Run) -> None:
    ns = diff_run.create.namespace
    diff_run.tests_run.add("derived")
    api = diff_run.create.api

    @_settings("derived")
    @given(_derived_sources(ns))
    def run(doc: dict[str, Any]) -> None:
        errors, notes = validate_document(doc)
        built = _built(doc)
        if isinstance(built, str):
            # build refuses exactly what validate refuses (one reader), or a kind the
            # controller would not manage (a note in validate)
            assert errors or notes, f"build refused what validate accepts: {built}: {doc}"
            if doc["kind"] == "Job" and errors:
                resp = api.create(collection_path(doc), doc, dry_run=True)
                spec_error = any(e.path.startswith("spec.parallelism") for e in errors)
                if spec_error:
                    assert resp.status in (400, 422), (resp.status, resp.message, doc)
            return
        assert not errors, f"validate refused what build builds: {errors}: {doc}"
        if doc["kind"] == "Job":
            resp = api.create(collection_path(doc), doc, dry_run=True)
            assert resp.status == 201, (resp.status, resp.message, doc)
        for obj in built:
            resp = api.create(collection_path(obj), obj, dry_run=True)
            diff_run.create.counts["total"] += 1
            diff_run.create.counts[f"derived/{obj['kind']}"] += 1
            assert resp.status == 201, (resp.status, resp.message, obj, doc)

    run()


@pytest.mark.parametrize(
    "replicas", [1, 2, 2**31 - 1, 2**31, 3_000_000_000, -1, 0], ids=lambda r: f"replicas={r}"
)
def test_simple_workload_objects_are_accepted_or_refused_with_a_path(
    diff_run: _Run, replicas: int
) -> None:
    ns = diff_run.create.namespace
    owner = {"apiVersion": "example.com/v1", "kind": "Trainer", "metadata": {"name": "t"}}
    owner["metadata"]["uid"] = "9c2d8a43-5e1f-4a6b-8c7d-0e9f1a2b3c4d"
    try:
        plan = simple_workload(
            name="sw", namespace=ns, owner=owner, pod_sets=[PodSet(name="p", replicas=replicas)]
        )
    except ValidationError as e:
        assert replicas < 0 or replicas > 2**31 - 1, e
        assert e.errors[0].path == "podSets[0].replicas"
        return
    for obj in plan.objects():
        doc = object_to_dict(obj)
        doc["metadata"].pop("ownerReferences", None)  # the owner does not exist on the server
        resp = api_create(diff_run, doc)
        assert resp.status == 201, (resp.status, resp.message, doc)


def _server_fields_of(body: dict[str, Any]) -> set[str]:
    causes = (body.get("details") or {}).get("causes") or []
    return {str(c.get("field", "")) for c in causes if isinstance(c, dict)}


def api_create(diff_run: _Run, doc: dict[str, Any]) -> Any:
    return diff_run.create.api.create(collection_path(doc), doc, dry_run=True)


@pytest.mark.parametrize(
    ("parallelism", "server_status"),
    [(3_000_000_000, 400), (2**31, 400), (-3, 422), (2**31 - 1, 201), (0, 201)],
)
def test_job_parallelism_edges_like_the_server(
    diff_run: _Run, parallelism: int, server_status: int
) -> None:
    """The issue's examples: our verdict on the Job's own field equals the server's."""
    doc = _job_doc(diff_run.create.namespace, None, {"schedulingPolicy": {"gang": {}}})
    doc["spec"]["parallelism"] = parallelism
    resp = api_create(diff_run, doc)
    assert resp.status == server_status, resp.message
    errors, _ = validate_document(doc)
    if server_status == 201:
        assert not errors
        for obj in build_objects(doc):
            assert api_create(diff_run, obj).status == 201, obj
    else:
        assert [e.path for e in errors] == ["spec.parallelism"], errors
        if server_status == 400:
            assert "expected a 32-bit integer" in str(errors[0])
            assert "spec.parallelism of type int32" in resp.message, resp.message


def test_null_in_a_list_of_structs_is_rejected_by_both(diff_run: _Run) -> None:
    """Found by the bad-input property test (issue 13): ``podGroupTemplates: [null]`` crashed
    ``validate``; the server decodes null as the zero struct and rejects it."""
    doc = _wl({"podGroupTemplates": [None]})
    doc["metadata"]["namespace"] = diff_run.create.namespace
    resp = api_create(diff_run, doc)
    assert resp.status == 422, resp.message
    errors, _ = validate_document(doc)
    assert {e.path for e in errors} <= _server_fields_of(resp.body) and errors


_COUNTS["bad_field"] = 200


def test_what_validate_accepts_the_server_accepts(diff_run: _Run) -> None:
    """Issue 13: a valid manifest of each source kind with one field replaced by an
    out-of-range or wrongly typed value. Whenever ``validate`` accepts it, the server accepts
    every object ``build`` makes from it (and a Workload / PodGroup document itself);
    whenever ``validate`` refuses a Workload / PodGroup document, the server refuses it."""
    ns = diff_run.create.namespace
    diff_run.tests_run.add("bad_field")

    @_settings("bad_field")
    @given(S.one_bad_field(ns))
    def run(doc: dict[str, Any]) -> None:
        errors, notes = validate_document(doc, namespace=ns)
        meta = doc.get("metadata")
        if isinstance(meta, dict) and isinstance(meta.get("namespace"), str) and not errors:
            # another (valid) namespace name: the server answers whether it exists (404)
            assume(meta["namespace"] == ns)
        if doc["kind"] in ("Workload", "PodGroup"):
            send = copy.deepcopy(doc)
            meta = send.get("metadata")
            if not isinstance(meta, dict) or not isinstance(meta.get("namespace") or "", str):
                assert errors  # no object path to send it to
                return
            if not meta.get("namespace"):
                meta["namespace"] = ns  # validated in the -n namespace, like kubectl
            resp = api_create(diff_run, send)
            diff_run.create.counts["total"] += 1
            diff_run.create.counts[f"bad-field/{doc['kind']}"] += 1
            assert (resp.status == 201) == (not errors), (resp.status, resp.message, errors, doc)
            return
        if errors or notes:
            return
        for obj in build_objects(doc):
            resp = api_create(diff_run, obj)
            diff_run.create.counts["total"] += 1
            diff_run.create.counts[f"bad-field/{obj['kind']}"] += 1
            assert resp.status == 201, (resp.status, resp.message, obj, doc)

    run()
