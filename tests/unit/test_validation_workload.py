"""Workload create validation: every rule with a passing and a failing case.

Expected strings are what kube-apiserver v1.37.2 prints (``field.Error.Error()``).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from workloadbuilder.api import Workload, from_dict
from workloadbuilder.validation import validate_workload

LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def pgt(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "schedulingPolicy": {"gang": {"minCount": 2}}, **extra}


def cpgt(
    name: str, pgts: list[Any] | None = None, cpgts: list[Any] | None = None, **extra: Any
) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "schedulingPolicy": {"basic": {}}, **extra}
    if pgts:
        out["podGroupTemplates"] = pgts
    if cpgts:
        out["compositePodGroupTemplates"] = cpgts
    return out


def workload(spec: dict[str, Any] | None = None, **meta: Any) -> Workload:
    metadata = {"name": "w", "namespace": "default", **meta}
    doc = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {k: v for k, v in metadata.items() if v is not None},
        "spec": spec if spec is not None else {"podGroupTemplates": [pgt("a")]},
    }
    return from_dict(doc, Workload)


def errors(w: Workload) -> list[str]:
    return [str(e) for e in validate_workload(w)]


def test_minimal_workload_is_valid() -> None:
    assert errors(workload()) == []


# --- metadata ---------------------------------------------------------------------------------


def test_metadata_name_required_unless_generate_name() -> None:
    assert errors(workload(name=None)) == [
        "metadata.name: Required value: name or generateName is required"
    ]
    assert errors(workload(name=None, generateName="w-")) == []


def test_metadata_name_is_dns_subdomain() -> None:
    assert errors(workload(name="a.b-c")) == []
    assert errors(workload(name="Bad_Name")) == [
        f'metadata.name: Invalid value: "Bad_Name": {SUBDOMAIN_MSG}'
    ]


def test_metadata_generate_name_is_validated_as_prefix() -> None:
    # a trailing '-' is allowed in a prefix; an invalid prefix is reported for both fields
    assert errors(workload(name=None, generateName="abc-")) == []
    assert [e.split(":")[0] for e in errors(workload(name=None, generateName="Bad-"))] == [
        "metadata.generateName",
        "metadata.name",
    ]


def test_metadata_namespace_required_and_dns_label() -> None:
    assert errors(workload(namespace=None)) == ["metadata.namespace: Required value"]
    assert errors(workload(namespace="a.b")) == [
        'metadata.namespace: Invalid value: "a.b": must not contain dots'
    ]


def test_metadata_labels_annotations_finalizers_owner_references() -> None:
    assert (
        errors(workload(labels={"ok": "v"}, annotations={"a/b": "x"}, finalizers=["x.io/f"])) == []
    )
    bad = errors(workload(labels={"bad key": "v"}))
    assert bad and bad[0].startswith('metadata.labels: Invalid value: "bad key": name part must')
    assert errors(workload(annotations={"Example.com/Key": "v"})) == []  # keys lower-cased first
    both = validate_workload(workload(finalizers=["orphan", "foregroundDeletion"]))
    assert [(e.path, e.type, e.detail, e.value) for e in both] == [
        (
            "metadata.finalizers",
            "Invalid value",
            "finalizer orphan and foregroundDeletion cannot be both set",
            ["orphan", "foregroundDeletion"],
        )
    ]
    ref = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": True}
    assert errors(workload(ownerReferences=[ref])) == []
    two = errors(workload(ownerReferences=[ref, {**ref, "name": "k"}]))
    assert len(two) == 1 and two[0].endswith(
        'Only one reference can have Controller set to true. Found "true" in references for Job/j '
        "and Job/k"
    )
    missing = errors(
        workload(ownerReferences=[{"apiVersion": "", "kind": "", "name": "", "uid": ""}])
    )
    assert missing == [
        "metadata.ownerReferences[0].apiVersion: Required value: must not be empty",
        "metadata.ownerReferences[0].kind: Required value: must not be empty",
        "metadata.ownerReferences[0].name: Required value: must not be empty",
        "metadata.ownerReferences[0].uid: Required value: must not be empty",
    ]


# --- spec union and lists ------------------------------------------------------------------


def test_exactly_one_template_list() -> None:
    assert errors(workload({"compositePodGroupTemplates": [cpgt("c", [pgt("a")])]})) == []
    assert errors(workload({})) == [
        'spec: Invalid value: "": must specify one of: `podGroupTemplates`, '
        "`compositePodGroupTemplates`"
    ]
    both = {"podGroupTemplates": [pgt("a")], "compositePodGroupTemplates": [cpgt("c", [pgt("b")])]}
    assert errors(workload(both)) == [
        'spec: Invalid value: "{podGroupTemplates, compositePodGroupTemplates}": must specify '
        "exactly "
        "one of: `podGroupTemplates`, `compositePodGroupTemplates`"
    ]


def test_at_most_eight_templates_per_list() -> None:
    assert errors(workload({"podGroupTemplates": [pgt(f"t{i}") for i in range(8)]})) == []
    # a list over the limit short-circuits: its items are not validated
    nine = [pgt(f"T{i}") for i in range(9)]
    assert errors(workload({"podGroupTemplates": nine})) == [
        "spec.podGroupTemplates: Too many: 9: must have at most 8 items"
    ]
    nested = workload({"compositePodGroupTemplates": [cpgt("c", [pgt(f"t{i}") for i in range(9)])]})
    assert errors(nested) == [
        "spec.compositePodGroupTemplates[0].podGroupTemplates: Too many: 9: must have at most 8 "
        "items"
    ]
    top = workload(
        {"compositePodGroupTemplates": [cpgt(f"c{i}", [pgt(f"t{i}")]) for i in range(9)]}
    )
    assert errors(top) == [
        "spec.compositePodGroupTemplates: Too many: 9: must have at most 8 items"
    ]


def test_template_name_is_dns_label() -> None:
    assert errors(workload({"podGroupTemplates": [pgt("Bad_Name")]})) == [
        f'spec.podGroupTemplates[0].name: Invalid value: "Bad_Name": {LABEL_MSG}'
    ]
    assert errors(workload({"podGroupTemplates": [pgt("")]})) == [
        "spec.podGroupTemplates[0].name: Required value"
    ]
    assert errors(workload({"compositePodGroupTemplates": [cpgt("c.d", [pgt("a")])]})) == [
        'spec.compositePodGroupTemplates[0].name: Invalid value: "c.d": must not contain dots'
    ]


def test_template_names_unique_within_a_list() -> None:
    errs = validate_workload(workload({"podGroupTemplates": [pgt("a"), pgt("b"), pgt("a")]}))
    assert [(e.path, e.type) for e in errs] == [("spec.podGroupTemplates[2]", "Duplicate value")]


def test_template_names_unique_across_the_tree() -> None:
    ok = {"compositePodGroupTemplates": [cpgt("c1", [pgt("a")]), cpgt("c2", [pgt("b")])]}
    assert errors(workload(ok)) == []
    dup = {"compositePodGroupTemplates": [cpgt("c1", [pgt("a")]), cpgt("c2", [pgt("a")])]}
    assert errors(workload(dup)) == [
        'spec.compositePodGroupTemplates[1].podGroupTemplates[0].name: Duplicate value: "a"'
    ]
    parent_child = {"compositePodGroupTemplates": [cpgt("c1", [pgt("c1")])]}
    assert errors(workload(parent_child)) == [
        'spec.compositePodGroupTemplates[0].podGroupTemplates[0].name: Duplicate value: "c1"'
    ]


def test_depth_at_most_four_levels() -> None:
    three = cpgt("l1", cpgts=[cpgt("l2", cpgts=[cpgt("l3", [pgt("leaf")])])])
    assert errors(workload({"compositePodGroupTemplates": [three]})) == []
    four = cpgt("l1", cpgts=[cpgt("l2", cpgts=[cpgt("l3", cpgts=[cpgt("l4", [pgt("leaf")])])])])
    errs = validate_workload(workload({"compositePodGroupTemplates": [four]}))
    assert [(e.path, e.type, e.detail) for e in errs] == [
        (
            "spec.compositePodGroupTemplates[0]",
            "Invalid value",
            "maximum template hierarchy depth is 4",
        )
    ]


def test_priorities_identical_across_templates() -> None:
    same = [
        pgt("a", priority=5, priorityClassName="high"),
        pgt("b", priority=5, priorityClassName="high"),
    ]
    assert errors(workload({"podGroupTemplates": same})) == []
    assert errors(workload({"podGroupTemplates": [pgt("a", priority=5), pgt("b")]})) == [
        "spec: Invalid value: null: detected multiple priority configurations"
    ]
    assert errors(workload({"podGroupTemplates": [pgt("a", priorityClassName="x"), pgt("b")]})) == [
        "spec: Invalid value: null: detected multiple priority configurations"
    ]
    tree = {"compositePodGroupTemplates": [cpgt("c", [pgt("a")], priority=1)]}
    assert errors(workload(tree)) == [
        "spec: Invalid value: null: all priority and priorityClassName values must be identical, "
        "detected multiple values"
    ]
    tree_ok = {"compositePodGroupTemplates": [cpgt("c", [pgt("a", priority=1)], priority=1)]}
    assert errors(workload(tree_ok)) == []


def test_composite_template_needs_a_child() -> None:
    errs = errors(workload({"compositePodGroupTemplates": [cpgt("c")]}))
    assert errs == [
        'spec.compositePodGroupTemplates[0]: Invalid value: "c": must have at least one child '
        "PodGroupTemplate or CompositePodGroupTemplate"
    ]
    nested = errors(workload({"compositePodGroupTemplates": [cpgt("c", cpgts=[cpgt("d")])]}))
    assert nested == [
        'spec.compositePodGroupTemplates[0].compositePodGroupTemplates[0]: Invalid value: "d": '
        "must "
        "have at least one child PodGroupTemplate or CompositePodGroupTemplate"
    ]


# --- template fields --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ({"basic": {}}, []),
        ({"gang": {"minCount": 1}}, []),
        (
            {},
            [
                'spec.podGroupTemplates[0].schedulingPolicy: Invalid value: "": must specify one '
                "of: `basic`, `gang`"
            ],
        ),
        (
            {"basic": {}, "gang": {"minCount": 1}},
            [
                'spec.podGroupTemplates[0].schedulingPolicy: Invalid value: "{basic, gang}": must '
                "specify exactly one of: `basic`, `gang`"
            ],
        ),
        (
            {"gang": {"minCount": 0}},
            ["spec.podGroupTemplates[0].schedulingPolicy.gang.minCount: Required value"],
        ),
        (
            {"gang": {"minCount": -2}},
            [
                "spec.podGroupTemplates[0].schedulingPolicy.gang.minCount: Invalid value: -2: "
                "must be "
                "greater than or equal to 1"
            ],
        ),
    ],
)
def test_scheduling_policy(policy: dict[str, Any], expected: list[str]) -> None:
    assert (
        errors(workload({"podGroupTemplates": [{"name": "a", "schedulingPolicy": policy}]}))
        == expected
    )


def test_composite_scheduling_policy() -> None:
    ok = cpgt("c", [pgt("a")], schedulingPolicy={"gang": {"minGroupCount": 1}})
    assert errors(workload({"compositePodGroupTemplates": [ok]})) == []
    zero = cpgt("c", [pgt("a")], schedulingPolicy={"gang": {"minGroupCount": 0}})
    assert errors(workload({"compositePodGroupTemplates": [zero]})) == [
        "spec.compositePodGroupTemplates[0].schedulingPolicy.gang.minGroupCount: Required value"
    ]
    empty = cpgt("c", [pgt("a")], schedulingPolicy={})
    assert errors(workload({"compositePodGroupTemplates": [empty]})) == [
        'spec.compositePodGroupTemplates[0].schedulingPolicy: Invalid value: "": must specify one '
        "of: "
        "`basic`, `gang`"
    ]


def test_disruption_mode_union() -> None:
    modes: list[dict[str, Any]] = [{"single": {}}, {"all": {}}]
    for mode in modes:
        assert errors(workload({"podGroupTemplates": [pgt("a", disruptionMode=mode)]})) == []
    assert errors(workload({"podGroupTemplates": [pgt("a", disruptionMode={})]})) == [
        'spec.podGroupTemplates[0].disruptionMode: Invalid value: "": must specify one of: '
        "`single`, `all`"
    ]
    both = pgt("a", disruptionMode={"single": {}, "all": {}})
    assert errors(workload({"podGroupTemplates": [both]})) == [
        'spec.podGroupTemplates[0].disruptionMode: Invalid value: "{single, all}": must specify '
        "exactly "
        "one of: `single`, `all`"
    ]


def test_topology_constraints() -> None:
    one = pgt("a", schedulingConstraints={"topology": [{"key": "topology.kubernetes.io/rack"}]})
    assert errors(workload({"podGroupTemplates": [one]})) == []
    two = pgt("a", schedulingConstraints={"topology": [{"key": "a"}, {"key": "b"}]})
    assert errors(workload({"podGroupTemplates": [two]})) == [
        "spec.podGroupTemplates[0].schedulingConstraints.topology: Too many: 2: must have at most "
        "1 item"
    ]
    bad = pgt("a", schedulingConstraints={"topology": [{"key": "/x"}]})
    assert errors(workload({"podGroupTemplates": [bad]})) == [
        'spec.podGroupTemplates[0].schedulingConstraints.topology[0].key: Invalid value: "/x": '
        "prefix "
        "part must be non-empty"
    ]
    empty = pgt("a", schedulingConstraints={"topology": [{"key": ""}]})
    assert errors(workload({"podGroupTemplates": [empty]})) == [
        "spec.podGroupTemplates[0].schedulingConstraints.topology[0].key: Required value"
    ]
    cpg = cpgt("c", [pgt("a")], schedulingConstraints={"topology": [{"key": "a"}, {"key": "b"}]})
    assert errors(workload({"compositePodGroupTemplates": [cpg]})) == [
        "spec.compositePodGroupTemplates[0].schedulingConstraints.topology: Too many: 2: must "
        "have at "
        "most 1 item"
    ]


def test_resource_claims() -> None:
    claims = [{"name": f"c{i}", "resourceClaimName": f"rc{i}"} for i in range(4)]
    assert errors(workload({"podGroupTemplates": [pgt("a", resourceClaims=claims)]})) == []
    five = [*claims, {"name": "c4", "resourceClaimTemplateName": "t"}]
    assert errors(workload({"podGroupTemplates": [pgt("a", resourceClaims=five)]})) == [
        "spec.podGroupTemplates[0].resourceClaims: Too many: 5: must have at most 4 items"
    ]
    neither = [{"name": "c"}]
    assert errors(workload({"podGroupTemplates": [pgt("a", resourceClaims=neither)]})) == [
        'spec.podGroupTemplates[0].resourceClaims[0]: Invalid value: "": must specify one of: '
        "`resourceClaimName`, `resourceClaimTemplateName`"
    ]
    both = [{"name": "c", "resourceClaimName": "x", "resourceClaimTemplateName": "y"}]
    assert errors(workload({"podGroupTemplates": [pgt("a", resourceClaims=both)]})) == [
        'spec.podGroupTemplates[0].resourceClaims[0]: Invalid value: "{resourceClaimName, '
        'resourceClaimTemplateName}": must specify exactly one of: `resourceClaimName`, '
        "`resourceClaimTemplateName`"
    ]
    bad_names = [{"name": "C", "resourceClaimName": "Bad_Claim"}]
    assert errors(workload({"podGroupTemplates": [pgt("a", resourceClaims=bad_names)]})) == [
        f'spec.podGroupTemplates[0].resourceClaims[0].name: Invalid value: "C": {LABEL_MSG}',
        f"spec.podGroupTemplates[0].resourceClaims[0].resourceClaimName: Invalid value: "
        f'"Bad_Claim": '
        f"{SUBDOMAIN_MSG}",
    ]
    dup = [{"name": "c", "resourceClaimName": "x"}, {"name": "c", "resourceClaimName": "y"}]
    errs = validate_workload(workload({"podGroupTemplates": [pgt("a", resourceClaims=dup)]}))
    assert [(e.path, e.type) for e in errs] == [
        ("spec.podGroupTemplates[0].resourceClaims[1]", "Duplicate value")
    ]


def test_priority_class_name_priority_and_preemption_policy() -> None:
    ok = pgt(
        "a", priorityClassName="high.example", priority=1_000_000_000, preemptionPolicy="Never"
    )
    assert errors(workload({"podGroupTemplates": [ok]})) == []
    assert errors(workload({"podGroupTemplates": [pgt("a", priorityClassName="Bad")]})) == [
        f'spec.podGroupTemplates[0].priorityClassName: Invalid value: "Bad": {SUBDOMAIN_MSG}'
    ]
    assert errors(workload({"podGroupTemplates": [pgt("a", priority=1_000_000_001)]})) == [
        "spec.podGroupTemplates[0].priority: Invalid value: 1000000001: must be less than or "
        "equal to "
        "1000000000"
    ]
    assert errors(workload({"podGroupTemplates": [pgt("a", preemptionPolicy="Always")]})) == [
        'spec.podGroupTemplates[0].preemptionPolicy: Unsupported value: "Always": supported '
        "values: "
        '"Never", "PreemptLowerPriority"'
    ]


def test_controller_ref() -> None:
    ok = {
        "podGroupTemplates": [pgt("a")],
        "controllerRef": {"apiGroup": "batch", "kind": "Job", "name": "j"},
    }
    assert errors(workload(ok)) == []
    bad = copy.deepcopy(ok)
    bad["controllerRef"] = {"apiGroup": "Bad_Group", "kind": "a/b", "name": ".."}
    assert errors(workload(bad)) == [
        f'spec.controllerRef.apiGroup: Invalid value: "Bad_Group": {SUBDOMAIN_MSG}',
        "spec.controllerRef.kind: Invalid value: \"a/b\": may not contain '/'",
        "spec.controllerRef.name: Invalid value: \"..\": may not be '..'",
    ]
    bad["controllerRef"] = {"kind": "", "name": ""}
    assert errors(workload(bad)) == [
        "spec.controllerRef.kind: Required value",
        "spec.controllerRef.name: Required value",
    ]


def test_error_order_handwritten_before_declarative() -> None:
    w = workload(
        {"podGroupTemplates": [pgt("Bad_Name", priority=1), pgt("ok")]},
        name="Bad_W",
    )
    paths = [e.path for e in validate_workload(w)]
    assert paths == ["metadata.name", "spec", "spec.podGroupTemplates[0].name"]
