"""The Builder: compile, materialise, validate (semantics of upstream workloadbuilder v0.37.2)."""

from __future__ import annotations

import importlib
from collections.abc import Sequence

import attrs
import pytest

from workloadbuilder.api import (
    OwnerReference,
    PodGroupResourceClaim,
    TopologyConstraint,
    Workload,
    WorkloadCompositePodGroupGangSchedulingPolicy,
    WorkloadCompositePodGroupSchedulingConstraints,
    WorkloadCompositePodGroupSchedulingPolicy,
    WorkloadPodGroupAllDisruptionMode,
    WorkloadPodGroupBasicSchedulingPolicy,
    WorkloadPodGroupDisruptionMode,
    WorkloadPodGroupGangSchedulingPolicy,
    WorkloadPodGroupResourceClaim,
    WorkloadPodGroupSchedulingConstraints,
    WorkloadPodGroupSchedulingPolicy,
    WorkloadPodGroupSingleDisruptionMode,
    to_dict,
)
from workloadbuilder.builder import (
    ALL_DISRUPTION_MODES,
    ALL_POLICIES,
    Builder,
    BuildOptions,
    SchedulingConfig,
    WorkloadInput,
    WorkloadItem,
    build_flat_workload,
    resolve_config,
)
from workloadbuilder.errors import BuildError

OWNER = OwnerReference(
    api_version="batch/v1",
    kind="Job",
    name="trainer",
    uid="uid-1",
    controller=True,
    block_owner_deletion=True,
)
ALLOW_ALL = BuildOptions(
    name="wl",
    namespace="ns",
    owner=OWNER,
    allowed_policies=ALL_POLICIES,
    allowed_disruption_modes=ALL_DISRUPTION_MODES,
)


def gang(min_count: int | None = None) -> WorkloadPodGroupSchedulingPolicy:
    return WorkloadPodGroupSchedulingPolicy(
        gang=WorkloadPodGroupGangSchedulingPolicy(min_count=min_count)
    )


BASIC = WorkloadPodGroupSchedulingPolicy(basic=WorkloadPodGroupBasicSchedulingPolicy())
ALL = WorkloadPodGroupDisruptionMode(all=WorkloadPodGroupAllDisruptionMode())
SINGLE = WorkloadPodGroupDisruptionMode(single=WorkloadPodGroupSingleDisruptionMode())


def leaf(name: str = "pgt", path: str = "spec.scheduling", **blocks: object) -> WorkloadItem:
    return WorkloadItem(
        name=name,
        path=path,
        input=WorkloadInput.at_standard_paths(**blocks),  # type: ignore[arg-type]
    )


def rendered(errors: Sequence[object]) -> list[str]:
    return [str(e) for e in errors]


# ------------------------------------------------------------------------------- compile


def test_leaf_without_input_compiles_to_basic_with_owner_and_controller_ref() -> None:
    wl = Builder(WorkloadItem(name="pgt"), ALLOW_ALL).build_workload()
    assert to_dict(wl) == {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {
            "name": "wl",
            "namespace": "ns",
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": "trainer",
                    "uid": "uid-1",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "controllerRef": {"apiGroup": "batch", "kind": "Job", "name": "trainer"},
            "podGroupTemplates": [{"name": "pgt", "schedulingPolicy": {"basic": {}}}],
        },
    }


def test_core_group_owner_has_no_api_group() -> None:
    owner = attrs.evolve(OWNER, api_version="v1", kind="ConfigMap")
    wl = Builder(WorkloadItem(name="a"), attrs.evolve(ALLOW_ALL, owner=owner)).build_workload()
    assert wl.spec.controller_ref is not None
    assert wl.spec.controller_ref.api_group is None
    assert wl.spec.controller_ref.kind == "ConfigMap"


def test_build_requires_owner() -> None:
    with pytest.raises(BuildError, match="must be owned by its controller"):
        Builder(WorkloadItem(name="a"), BuildOptions(name="wl")).build_workload()


def test_build_is_cached() -> None:
    b = Builder(WorkloadItem(name="a"), ALLOW_ALL)
    assert b.build_workload() is b.build_workload()


def test_gang_without_min_count_is_a_build_error() -> None:
    with pytest.raises(BuildError, match="gang scheduling requires minCount"):
        Builder(leaf(policy=gang()), ALLOW_ALL).build_workload()


def test_merge_defaults_then_input_then_callbacks() -> None:
    seen: list[SchedulingConfig] = []

    def default_min(cfg: SchedulingConfig) -> SchedulingConfig:
        seen.append(cfg)
        if cfg.policy == "gang" and cfg.min_count is None:
            return attrs.evolve(cfg, min_count=4)
        return cfg

    item = WorkloadItem(
        name="pgt",
        default_config=SchedulingConfig(
            policy="gang",
            min_count=9,
            priority_class_name="high",
            topology=(TopologyConstraint(key="zone"),),
        ),
        # the user's gang block (without minCount) replaces the default policy entirely
        input=WorkloadInput.at_standard_paths(policy=gang(), disruption_mode=ALL),
        callbacks=[default_min],
    )
    cfg = resolve_config(item)
    assert seen[0].min_count is None  # the default's 9 did not survive the user's policy
    assert cfg == SchedulingConfig(
        policy="gang",
        min_count=4,
        topology=(TopologyConstraint(key="zone"),),
        disruption_mode="all",
        priority_class_name="high",
    )
    tmpl = Builder(item, ALLOW_ALL).build_workload().spec.pod_group_templates[0]
    assert to_dict(tmpl) == {
        "name": "pgt",
        "schedulingPolicy": {"gang": {"minCount": 4}},
        "schedulingConstraints": {"topology": [{"key": "zone"}]},
        "disruptionMode": {"all": {}},
        "priorityClassName": "high",
    }


def test_empty_topology_input_keeps_the_default() -> None:
    item = WorkloadItem(
        name="pgt",
        default_config=SchedulingConfig(topology=(TopologyConstraint(key="rack"),)),
        input=WorkloadInput(constraints=WorkloadPodGroupSchedulingConstraints()),
    )
    assert resolve_config(item).topology == (TopologyConstraint(key="rack"),)


def test_callback_must_return_a_config() -> None:
    item = WorkloadItem(name="pgt", callbacks=[lambda cfg: None])  # type: ignore[list-item,return-value]
    with pytest.raises(TypeError, match="not a SchedulingConfig"):
        resolve_config(item)


def _tree() -> WorkloadItem:
    return WorkloadItem(
        name="root",
        path="spec",
        input=WorkloadInput(
            composite_policy=WorkloadCompositePodGroupSchedulingPolicy(
                gang=WorkloadCompositePodGroupGangSchedulingPolicy(min_group_count=2)
            ),
            composite_constraints=WorkloadCompositePodGroupSchedulingConstraints(
                topology=(TopologyConstraint(key="zone"),)
            ),
        ),
        default_config=SchedulingConfig(priority_class_name="high"),
        children=[
            WorkloadItem(
                name="leaders",
                default_config=SchedulingConfig(priority_class_name="high"),
            ),
            WorkloadItem(
                name="racks",
                default_config=SchedulingConfig(priority_class_name="high"),
                children=[
                    WorkloadItem(
                        name="workers",
                        input=WorkloadInput(policy=gang(4)),
                        default_config=SchedulingConfig(priority_class_name="high"),
                    )
                ],
            ),
        ],
    )


def test_composite_tree_compiles_recursively() -> None:
    wl = Builder(_tree(), ALLOW_ALL).build_workload()
    assert wl.spec.pod_group_templates == ()
    assert to_dict(wl.spec)["compositePodGroupTemplates"] == [
        {
            "name": "root",
            "schedulingPolicy": {"gang": {"minGroupCount": 2}},
            "schedulingConstraints": {"topology": [{"key": "zone"}]},
            "priorityClassName": "high",
            "podGroupTemplates": [
                {"name": "leaders", "schedulingPolicy": {"basic": {}}, "priorityClassName": "high"}
            ],
            "compositePodGroupTemplates": [
                {
                    "name": "racks",
                    "schedulingPolicy": {"basic": {}},
                    "priorityClassName": "high",
                    "podGroupTemplates": [
                        {
                            "name": "workers",
                            "schedulingPolicy": {"gang": {"minCount": 4}},
                            "priorityClassName": "high",
                        }
                    ],
                }
            ],
        }
    ]


def test_composite_gang_without_min_group_count_is_a_build_error() -> None:
    item = WorkloadItem(
        name="root",
        input=WorkloadInput(
            composite_policy=WorkloadCompositePodGroupSchedulingPolicy(
                gang=WorkloadCompositePodGroupGangSchedulingPolicy()
            )
        ),
        children=[WorkloadItem(name="a")],
    )
    with pytest.raises(BuildError, match="minGroupCount"):
        Builder(item, ALLOW_ALL).build_workload()


def test_duplicate_names_are_a_build_error() -> None:
    item = WorkloadItem(name="a", children=[WorkloadItem(name="b"), WorkloadItem(name="a")])
    with pytest.raises(BuildError, match='duplicate workload item name "a"'):
        Builder(item, ALLOW_ALL).build_workload()


# ---------------------------------------------------------------------------- materialise


def test_new_pod_group_copies_the_template() -> None:
    claim = WorkloadPodGroupResourceClaim(name="gpus", resource_claim_template_name="gpu-tpl")
    item = WorkloadItem(
        name="pgt",
        default_config=SchedulingConfig(priority_class_name="high"),
        input=WorkloadInput.at_standard_paths(
            policy=gang(3),
            constraints=WorkloadPodGroupSchedulingConstraints(
                topology=(TopologyConstraint(key="rack"),)
            ),
            disruption_mode=SINGLE,
            resource_claims=(claim,),
        ),
    )
    b = Builder(item, ALLOW_ALL)
    b.build_workload()
    pg = b.new_pod_group("pg-0", "pgt")
    assert to_dict(pg) == {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pg-0", "namespace": "ns", "ownerReferences": [to_dict(OWNER)]},
        "spec": {
            "schedulingPolicy": {"gang": {"minCount": 3}},
            "workloadRef": {"workloadName": "wl", "templateName": "pgt"},
            "schedulingConstraints": {"topology": [{"key": "rack"}]},
            "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "gpu-tpl"}],
            "disruptionMode": {"single": {}},
            "priorityClassName": "high",
        },
    }
    assert pg.spec.resource_claims == (
        PodGroupResourceClaim(name="gpus", resource_claim_template_name="gpu-tpl"),
    )


def test_new_pod_group_before_build_and_unknown_template() -> None:
    b = Builder(WorkloadItem(name="pgt"), ALLOW_ALL)
    with pytest.raises(BuildError, match="no Workload available"):
        b.new_pod_group("x", "pgt")
    b.build_workload()
    with pytest.raises(BuildError, match=r'podGroupTemplate "nope" not found .*\(have \[pgt\]\)'):
        b.new_pod_group("x", "nope")


def test_hierarchy_materialisation() -> None:
    b = Builder(_tree(), ALLOW_ALL)
    b.build_workload()
    root = b.new_composite_pod_group("root-0", "root")
    assert root.api_version == "scheduling.k8s.io/v1alpha3"
    assert to_dict(root.spec) == {
        "workloadRef": {"workloadName": "wl", "templateName": "root"},
        "schedulingPolicy": {"gang": {"minGroupCount": 2}},
        "schedulingConstraints": {"topology": [{"key": "zone"}]},
        "priorityClassName": "high",
    }
    racks = b.new_composite_pod_group("racks-0", "racks")
    assert racks.spec.parent_composite_pod_group_name is None  # left to the caller
    # Leaves nested inside composite templates are found too.
    workers = b.new_pod_group("workers-0", "workers")
    assert workers.spec.scheduling_policy.gang is not None
    assert workers.spec.scheduling_policy.gang.min_count == 4
    with pytest.raises(BuildError, match="compositePodGroupTemplate"):
        b.new_composite_pod_group("x", "workers")


def test_existing_workload_builder() -> None:
    parent = Builder(WorkloadItem(name="pgt"), ALLOW_ALL).build_workload()
    child_owner = attrs.evolve(OWNER, name="child", uid="uid-2")
    b = Builder.from_existing_workload(parent, BuildOptions(owner=child_owner))
    with pytest.raises(BuildError, match="existing Workload"):
        b.build_workload()
    errs = b.validate()
    assert [e.type for e in errs] == ["Internal error"]
    pg = b.new_pod_group("pg", "pgt")
    assert pg.metadata.owner_references == (child_owner,)
    assert pg.metadata.namespace == "ns"
    no_owner = Builder.from_existing_workload(parent, BuildOptions()).new_pod_group("pg", "pgt")
    assert no_owner.metadata.owner_references == ()


def test_build_flat_workload_merges_leaves() -> None:
    wl = build_flat_workload(
        [leaf("driver", policy=BASIC), leaf("workers", policy=gang(8))], ALLOW_ALL
    )
    assert [t.name for t in wl.spec.pod_group_templates] == ["driver", "workers"]
    assert wl.metadata.owner_references == (OWNER,)
    with pytest.raises(BuildError, match="duplicate"):
        build_flat_workload([leaf("a"), leaf("a")], ALLOW_ALL)
    with pytest.raises(BuildError, match="composite"):
        build_flat_workload([_tree()], ALLOW_ALL)


# ------------------------------------------------------------------------------- validate


def test_allow_lists_deny_by_default() -> None:
    item = leaf(policy=gang(2), disruption_mode=ALL)
    assert rendered(Builder(item, BuildOptions()).validate()) == [
        "spec.scheduling.schedulingPolicy: Forbidden: gang scheduling policy is not supported "
        "by this controller",
        "spec.scheduling.disruptionMode: Forbidden: the disruptionMode `all` is not supported "
        "by this controller",
    ]
    assert Builder(item, ALLOW_ALL).validate() == []


def test_default_policy_is_checked_against_the_allow_list() -> None:
    item = WorkloadItem(
        name="pgt", path="spec.scheduling", default_config=SchedulingConfig(policy="basic")
    )
    opts = BuildOptions(allowed_policies={"gang"})
    assert rendered(Builder(item, opts).validate()) == [
        "spec.scheduling: Forbidden: basic scheduling policy is not supported by this controller"
    ]
    # no policy anywhere: nothing to check (it compiles to basic)
    assert Builder(WorkloadItem(name="pgt"), opts).validate() == []


def test_all_disruption_with_basic_policy_is_invalid() -> None:
    errs = Builder(leaf(policy=BASIC, disruption_mode=ALL), ALLOW_ALL).validate()
    assert rendered(errs) == [
        'spec.scheduling.disruptionMode: Invalid value: "": the disruptionMode `all` is not '
        "supported with the Basic scheduling policy"
    ]


def test_declarative_union_and_minimum() -> None:
    both = WorkloadPodGroupSchedulingPolicy(
        basic=WorkloadPodGroupBasicSchedulingPolicy(),
        gang=WorkloadPodGroupGangSchedulingPolicy(min_count=0),
    )
    errs = Builder(leaf(policy=both), ALLOW_ALL).validate()
    assert rendered(errs) == [
        'spec.scheduling.schedulingPolicy: Invalid value: "{basic, gang}": must specify exactly '
        "one of: `basic`, `gang`",
        "spec.scheduling.schedulingPolicy.gang.minCount: Invalid value: 0: must be greater than "
        "or equal to 1",
    ]
    empty = Builder(leaf(policy=WorkloadPodGroupSchedulingPolicy()), ALLOW_ALL).validate()
    assert rendered(empty) == [
        'spec.scheduling.schedulingPolicy: Invalid value: "": must specify one of: `basic`, `gang`'
    ]
    mode = Builder(leaf(disruption_mode=WorkloadPodGroupDisruptionMode()), ALLOW_ALL).validate()
    assert rendered(mode) == [
        'spec.scheduling.disruptionMode: Invalid value: "": must specify one of: `single`, `all`'
    ]


def test_declarative_topology_and_claims() -> None:
    constraints = WorkloadPodGroupSchedulingConstraints(
        topology=(TopologyConstraint(key="a"), TopologyConstraint(key="b"))
    )
    errs = Builder(leaf(constraints=constraints), ALLOW_ALL).validate()
    assert rendered(errs) == [
        "spec.scheduling.schedulingConstraints.topology: Too many: 2: must have at most 1 item"
    ]
    bad_key = WorkloadPodGroupSchedulingConstraints(topology=(TopologyConstraint(key="-x"),))
    (err,) = Builder(leaf(constraints=bad_key), ALLOW_ALL).validate()
    assert err.path == "spec.scheduling.schedulingConstraints.topology[0].key"
    assert err.detail.startswith("name part must consist of alphanumeric characters")
    claims = (
        WorkloadPodGroupResourceClaim(name="ok", resource_claim_name="c"),
        WorkloadPodGroupResourceClaim(name="Bad_Name"),
    )
    errs = Builder(leaf(resource_claims=claims), ALLOW_ALL).validate()
    assert [(e.path, e.type) for e in errs] == [
        ("spec.scheduling.resourceClaims[1]", "Invalid value"),
        ("spec.scheduling.resourceClaims[1].name", "Invalid value"),
    ]
    assert "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`" in errs[0].detail


def test_disable_declarative_validation_keeps_policy_checks() -> None:
    opts = attrs.evolve(ALLOW_ALL, disable_declarative_validation=True)
    bad = leaf(policy=gang(0), disruption_mode=ALL)
    assert Builder(bad, opts).validate() == []
    assert len(Builder(leaf(policy=BASIC, disruption_mode=ALL), opts).validate()) == 1


def test_update_ratcheting() -> None:
    old = leaf(policy=gang(0))
    # unchanged invalid data is not re-validated on update
    assert Builder(leaf(policy=gang(0)), ALLOW_ALL).validate(old_root=old) == []
    # a changed value is
    errs = Builder(leaf(policy=gang(-1)), ALLOW_ALL).validate(old_root=old)
    assert [e.path for e in errs] == ["spec.scheduling.schedulingPolicy.gang.minCount"]
    # as on create
    assert len(Builder(leaf(policy=gang(0)), ALLOW_ALL).validate()) == 1


def test_update_correlates_children_by_name() -> None:
    def tree(min_count: int) -> WorkloadItem:
        return WorkloadItem(
            name="root",
            children=[WorkloadItem(name="w", input=WorkloadInput(policy=gang(min_count)))],
        )

    assert Builder(tree(0), ALLOW_ALL).validate(old_root=tree(0)) == []
    renamed_old = WorkloadItem(
        name="root", children=[WorkloadItem(name="other", input=WorkloadInput(policy=gang(0)))]
    )
    assert len(Builder(tree(0), ALLOW_ALL).validate(old_root=renamed_old)) == 1


def test_structural_problems_are_internal_errors() -> None:
    mixed = WorkloadItem(
        name="root",
        path="spec",
        input=WorkloadInput(policy=gang(1)),
        children=[WorkloadItem(name="a")],
    )
    assert rendered(Builder(mixed, ALLOW_ALL).validate()) == [
        'spec: Internal error: composite workload item "root" sets leaf building block: policy'
    ]
    leaf_with_composite = WorkloadItem(
        name="a",
        input=WorkloadInput(
            composite_policy=WorkloadCompositePodGroupSchedulingPolicy(
                gang=WorkloadCompositePodGroupGangSchedulingPolicy(min_group_count=1)
            )
        ),
    )
    (err,) = Builder(leaf_with_composite, ALLOW_ALL).validate()
    assert err.detail == 'leaf workload item "a" sets composite building block: policy'
    dup = WorkloadItem(name="a", children=[WorkloadItem(name="a")])
    assert "template names must be unique" in Builder(dup, ALLOW_ALL).validate()[0].detail
    (err,) = Builder(WorkloadItem(name="a"), ALLOW_ALL).validate(old_root=WorkloadItem(name="b"))
    assert err.type == "Internal error"
    assert err.detail == 'old root name "b" does not match new root name "a"'


def test_composite_blocks_are_validated_at_their_paths() -> None:
    item = WorkloadItem(
        name="root",
        path="spec.scheduling",
        input=WorkloadInput.at_standard_paths(
            composite_policy=WorkloadCompositePodGroupSchedulingPolicy(
                gang=WorkloadCompositePodGroupGangSchedulingPolicy(min_group_count=0)
            )
        ),
        children=[WorkloadItem(name="a")],
    )
    assert rendered(Builder(item, ALLOW_ALL).validate()) == [
        "spec.scheduling.schedulingPolicy.gang.minGroupCount: Invalid value: 0: must be greater "
        "than or equal to 1"
    ]


def test_build_options_reject_unknown_names() -> None:
    with pytest.raises(ValueError, match="unknown scheduling policies"):
        BuildOptions(allowed_policies={"fifo"})
    with pytest.raises(ValueError, match="unknown disruption modes"):
        BuildOptions(allowed_disruption_modes={"some"})


def test_built_objects_match_the_v137_schema() -> None:
    kv = importlib.import_module("kubernetes_validate")
    from workloadbuilder.api import object_to_dict

    b = Builder(_tree(), ALLOW_ALL)
    wl: Workload = b.build_workload()
    docs = [
        object_to_dict(wl),
        object_to_dict(b.new_pod_group("w-0", "workers")),
        object_to_dict(b.new_composite_pod_group("r-0", "root")),
    ]
    for doc in docs:
        kv.validate(doc, "1.37.0", strict=True)
