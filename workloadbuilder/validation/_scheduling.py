"""Workload / PodGroup / CompositePodGroup validation, as kube-apiserver v1.37.2 does it.

Sources (kubernetes v1.37.2): ``pkg/apis/scheduling/validation/validation.go`` (hand-written),
``pkg/apis/scheduling/v1beta1|v1alpha3/zz_generated.validations.go`` (declarative, generated
from the ``+k8s:`` tags of ``k8s.io/api/scheduling``), ``pkg/registry/scheduling/*/strategy.go``
(field dropping for disabled gates) and ``apiserver/pkg/registry/rest`` (the order: hand-written
errors first, then the enforced declarative errors; alpha declarative rules are not enforced).
The v1beta1 and v1alpha3 rules for Workload and PodGroup are identical.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from workloadbuilder.api import (
    CompositePodGroup,
    CompositePodGroupSchedulingConstraints,
    CompositePodGroupSchedulingPolicy,
    CompositePodGroupSpec,
    CompositePodGroupTemplate,
    DisruptionMode,
    PodGroup,
    PodGroupResourceClaim,
    PodGroupSchedulingConstraints,
    PodGroupSchedulingPolicy,
    PodGroupSpec,
    PodGroupTemplate,
    SingleDisruptionMode,
    TopologyConstraint,
    TypedLocalObjectReference,
    Workload,
    WorkloadReference,
    WorkloadSpec,
)
from workloadbuilder.errors import FieldError
from workloadbuilder.validation._common import (
    Op,
    child,
    duplicate,
    each_val,
    eq,
    forbidden,
    immutable,
    index,
    invalid,
    label_key,
    long_name,
    max_items,
    maximum,
    minimum,
    not_supported,
    path_segment_name,
    required,
    short_name,
    union,
    update_pointer,
    val_slice_unique,
    val_slice_update_no_add_remove,
)
from workloadbuilder.validation._gates import FeatureGates
from workloadbuilder.validation._meta import validate_object_meta, validate_object_meta_update
from workloadbuilder.validation._names import name_is_dns_subdomain

__all__ = [
    "MAX_CLAIMS",
    "MAX_PRIORITY",
    "MAX_TEMPLATES",
    "MAX_TEMPLATE_DEPTH",
    "PREEMPTION_POLICIES",
    "apply_defaults",
    "drop_disabled_fields",
    "validate_composite_pod_group",
    "validate_object",
    "validate_pod_group",
    "validate_workload",
]

MAX_TEMPLATES = 8
MAX_CLAIMS = 4
MAX_TOPOLOGY = 1
MAX_TEMPLATE_DEPTH = 4
MAX_PRIORITY = 1_000_000_000
PREEMPTION_POLICIES = ("Never", "PreemptLowerPriority")

SchedulingObject = Workload | PodGroup | CompositePodGroup

_TAS = "TopologyAwareWorkloadScheduling"
_CPG = "CompositePodGroup"
_PGPP = "PodGroupPreemptionPolicy"


def _unchanged(op: Op, correlated: bool, new: Any, old: Any) -> bool:
    """The generated "don't revalidate unchanged data" guard."""
    return op.update and correlated and eq(new, old)


def _attr(obj: Any, name: str) -> Any:
    return None if obj is None else getattr(obj, name)


def _name_key(item: Any) -> Any:
    return item.name


# --- leaf value types ---------------------------------------------------------------------


def _required_string(
    op: Op, path: str, new: str, old: Any, correlated: bool, fmt: Any
) -> list[FieldError]:
    if _unchanged(op, correlated, new, old):
        return []
    if not new:
        return [required(path)]
    result: list[FieldError] = fmt(path, new)
    return result


def _topology_constraint(op: Op, path: str, new: TopologyConstraint, old: Any) -> list[FieldError]:
    return _required_string(
        op, child(path, "key"), new.key, _attr(old, "key"), old is not None, label_key
    )


def _topology_list(
    op: Op, path: str, new: Sequence[TopologyConstraint], old: Any, correlated: bool
) -> list[FieldError]:
    if _unchanged(op, correlated, tuple(new), tuple(old or ())):
        return []
    errs = max_items(path, new, MAX_TOPOLOGY)
    if errs or not new:
        return errs
    return each_val(op, path, new, None, None, _topology_constraint)


def _constraints(
    op: Op,
    path: str,
    new: PodGroupSchedulingConstraints | CompositePodGroupSchedulingConstraints,
    old: Any,
) -> list[FieldError]:
    return _topology_list(
        op, child(path, "topology"), new.topology, _attr(old, "topology"), old is not None
    )


def _claim(op: Op, path: str, new: PodGroupResourceClaim, old: Any) -> list[FieldError]:
    errs = union(
        op,
        path,
        ("resourceClaimName", "resourceClaimTemplateName"),
        (new.resource_claim_name is not None, new.resource_claim_template_name is not None),
        None
        if old is None
        else (old.resource_claim_name is not None, old.resource_claim_template_name is not None),
    )
    corr = old is not None
    errs += _required_string(
        op, child(path, "name"), new.name, _attr(old, "name"), corr, short_name
    )
    for attr, json_name in (
        ("resource_claim_name", "resourceClaimName"),
        ("resource_claim_template_name", "resourceClaimTemplateName"),
    ):
        value, prev = getattr(new, attr), _attr(old, attr)
        if _unchanged(op, corr, value, prev) or value is None:
            continue
        errs += long_name(child(path, json_name), value)
    return errs


def _claims(
    op: Op, path: str, new: Sequence[PodGroupResourceClaim], old: Any, correlated: bool
) -> list[FieldError]:
    old_list: Sequence[PodGroupResourceClaim] = old or ()
    if _unchanged(op, correlated, tuple(new), tuple(old_list)):
        return []
    errs: list[FieldError] = []
    early = False
    if op.update:
        errs += immutable(op, path)
        early = True
    too_many = max_items(path, new, MAX_CLAIMS)
    errs += too_many
    if too_many or not new or early:
        return errs
    errs += val_slice_unique(path, new, _name_key)
    errs += each_val(op, path, new, old_list, _name_key, _claim)
    return errs


def _disruption_mode(op: Op, path: str, new: DisruptionMode, old: Any) -> list[FieldError]:
    return union(
        op,
        path,
        ("single", "all"),
        (new.single is not None, new.all is not None),
        None if old is None else (old.single is not None, old.all is not None),
    )


def _workload_reference(op: Op, path: str, new: WorkloadReference, old: Any) -> list[FieldError]:
    corr = old is not None
    errs = _required_string(
        op,
        child(path, "workloadName"),
        new.workload_name,
        _attr(old, "workload_name"),
        corr,
        long_name,
    )
    errs += _required_string(
        op,
        child(path, "templateName"),
        new.template_name,
        _attr(old, "template_name"),
        corr,
        short_name,
    )
    return errs


def _controller_ref(
    op: Op, path: str, new: TypedLocalObjectReference, old: Any
) -> list[FieldError]:
    corr = old is not None
    errs: list[FieldError] = []
    group, prev_group = new.api_group or "", _attr(old, "api_group") or ""
    if not _unchanged(op, corr, group, prev_group) and group:
        errs += long_name(child(path, "apiGroup"), group)
    errs += _required_string(
        op, child(path, "kind"), new.kind, _attr(old, "kind"), corr, path_segment_name
    )
    errs += _required_string(
        op, child(path, "name"), new.name, _attr(old, "name"), corr, path_segment_name
    )
    return errs


# --- fields shared by templates and objects ------------------------------------------------


def _priority_class_name(
    op: Op, path: str, new: str | None, old: Any, correlated: bool
) -> list[FieldError]:
    value, prev = new or "", old or ""
    if _unchanged(op, correlated, value, prev):
        return []
    if op.update:
        return immutable(op, path)
    return long_name(path, value) if value else []


def _priority(op: Op, path: str, new: int | None, old: Any, correlated: bool) -> list[FieldError]:
    if _unchanged(op, correlated, new, old):
        return []
    if op.update:
        return immutable(op, path)
    return maximum(path, new, MAX_PRIORITY) if new is not None else []


def _preemption_policy(
    op: Op, path: str, new: str | None, old: Any, correlated: bool
) -> list[FieldError]:
    if _unchanged(op, correlated, new, old):
        return []
    errs: list[FieldError] = []
    early = new is None
    if not op.enabled(_PGPP) and new is not None:
        errs.append(forbidden(path))
        early = True
    if op.update:
        errs += immutable(op, path)
        early = True
    if early or new is None:
        return errs
    if new not in PREEMPTION_POLICIES:
        errs.append(not_supported(path, new, PREEMPTION_POLICIES))
    return errs


def _optional_immutable_struct(
    op: Op, path: str, new: Any, old: Any, correlated: bool, validator: Any
) -> list[FieldError]:
    """``+k8s:immutable +k8s:optional`` on a struct pointer, then the type's validation."""
    if _unchanged(op, correlated, new, old):
        return []
    if op.update:
        return immutable(op, path)
    if new is None:
        return []
    result: list[FieldError] = validator(op, path, new, old)
    return result


def _pg_policy(op: Op, path: str, new: PodGroupSchedulingPolicy, old: Any) -> list[FieldError]:
    errs = union(
        op,
        path,
        ("basic", "gang"),
        (new.basic is not None, new.gang is not None),
        None if old is None else (old.basic is not None, old.gang is not None),
    )
    corr = old is not None
    prev_basic = _attr(old, "basic")
    if not _unchanged(op, corr, new.basic, prev_basic):
        errs += immutable(op, child(path, "basic"))
    prev_gang = _attr(old, "gang")
    if not _unchanged(op, corr, new.gang, prev_gang):
        gang_path = child(path, "gang")
        update_errs = update_pointer(op, gang_path, new.gang, prev_gang)
        errs += update_errs
        if new.gang is not None and not update_errs:
            count_path = child(gang_path, "minCount")
            prev_count = _attr(prev_gang, "min_count")
            if not _unchanged(op, prev_gang is not None, new.gang.min_count, prev_count):
                if new.gang.min_count == 0:
                    errs.append(required(count_path))
                else:
                    errs += minimum(count_path, new.gang.min_count, 1)
    return errs


def _cpg_policy(
    op: Op, path: str, new: CompositePodGroupSchedulingPolicy, old: Any
) -> list[FieldError]:
    errs = union(
        op,
        path,
        ("basic", "gang"),
        (new.basic is not None, new.gang is not None),
        None if old is None else (old.basic is not None, old.gang is not None),
    )
    corr = old is not None
    prev_basic = _attr(old, "basic")
    if not _unchanged(op, corr, new.basic, prev_basic):
        errs += immutable(op, child(path, "basic"))
    prev_gang = _attr(old, "gang")
    if not _unchanged(op, corr, new.gang, prev_gang):
        gang_path = child(path, "gang")
        update_errs = update_pointer(op, gang_path, new.gang, prev_gang)
        errs += update_errs
        if new.gang is not None and not update_errs:
            count_path = child(gang_path, "minGroupCount")
            prev_count = _attr(prev_gang, "min_group_count")
            if not _unchanged(op, prev_gang is not None, new.gang.min_group_count, prev_count):
                if new.gang.min_group_count == 0:
                    errs.append(required(count_path))
                else:
                    errs += minimum(count_path, new.gang.min_group_count, 1)
    return errs


def _struct(
    op: Op, path: str, new: Any, old: Any, correlated: bool, validator: Any
) -> list[FieldError]:
    """A required (non-pointer) struct field: ratchet, then the type's validation."""
    if _unchanged(op, correlated, new, old):
        return []
    result: list[FieldError] = validator(op, path, new, old)
    return result


def _gated_constraints(
    op: Op, path: str, new: Any, old: Any, correlated: bool, *, immutable_only_when_on: bool
) -> list[FieldError]:
    if _unchanged(op, correlated, new, old):
        return []
    errs: list[FieldError] = []
    gate = op.enabled(_TAS)
    early = new is None
    if not gate and new is not None:
        errs.append(forbidden(path))
        early = True
    if op.update and (gate or not immutable_only_when_on):
        errs += immutable(op, path)
        early = True
    if early:
        return errs
    return errs + _constraints(op, path, new, old)


# --- templates ------------------------------------------------------------------------------


def _pod_group_template(op: Op, path: str, new: PodGroupTemplate, old: Any) -> list[FieldError]:
    corr = old is not None
    errs = _required_string(op, child(path, "name"), new.name, _attr(old, "name"), corr, short_name)
    errs += _struct(
        op,
        child(path, "schedulingPolicy"),
        new.scheduling_policy,
        _attr(old, "scheduling_policy"),
        corr,
        _pg_policy,
    )
    errs += _gated_constraints(
        op,
        child(path, "schedulingConstraints"),
        new.scheduling_constraints,
        _attr(old, "scheduling_constraints"),
        corr,
        immutable_only_when_on=False,
    )
    errs += _claims(
        op, child(path, "resourceClaims"), new.resource_claims, _attr(old, "resource_claims"), corr
    )
    errs += _optional_immutable_struct(
        op,
        child(path, "disruptionMode"),
        new.disruption_mode,
        _attr(old, "disruption_mode"),
        corr,
        _disruption_mode,
    )
    errs += _priority_class_name(
        op,
        child(path, "priorityClassName"),
        new.priority_class_name,
        _attr(old, "priority_class_name"),
        corr,
    )
    errs += _priority(op, child(path, "priority"), new.priority, _attr(old, "priority"), corr)
    errs += _preemption_policy(
        op,
        child(path, "preemptionPolicy"),
        new.preemption_policy,
        _attr(old, "preemption_policy"),
        corr,
    )
    return errs


def _template_list(
    op: Op,
    path: str,
    new: Sequence[Any],
    old: Any,
    correlated: bool,
    validator: Any,
    *,
    gated: bool = False,
) -> list[FieldError]:
    """A ``listType=map`` template list: maxItems 8, no add/remove on update, unique names."""
    old_list: Sequence[Any] = old or ()
    if _unchanged(op, correlated, tuple(new), tuple(old_list)):
        return []
    errs: list[FieldError] = []
    early = not new
    if gated and not op.enabled(_CPG) and new:
        errs.append(forbidden(path))
        early = True
    too_many = max_items(path, new, MAX_TEMPLATES)
    errs += too_many
    update_errs = val_slice_update_no_add_remove(op, path, new, old_list, _name_key)
    errs += update_errs
    if early or too_many or update_errs:
        return errs
    errs += val_slice_unique(path, new, _name_key)
    errs += each_val(op, path, new, old_list, _name_key, validator)
    return errs


def _cpg_template(op: Op, path: str, new: CompositePodGroupTemplate, old: Any) -> list[FieldError]:
    corr = old is not None
    errs = _required_string(op, child(path, "name"), new.name, _attr(old, "name"), corr, short_name)
    errs += _struct(
        op,
        child(path, "schedulingPolicy"),
        new.scheduling_policy,
        _attr(old, "scheduling_policy"),
        corr,
        _cpg_policy,
    )
    errs += _optional_immutable_struct(
        op,
        child(path, "schedulingConstraints"),
        new.scheduling_constraints,
        _attr(old, "scheduling_constraints"),
        corr,
        _constraints,
    )
    errs += _optional_immutable_struct(
        op,
        child(path, "disruptionMode"),
        new.disruption_mode,
        _attr(old, "disruption_mode"),
        corr,
        _disruption_mode,
    )
    errs += _priority_class_name(
        op,
        child(path, "priorityClassName"),
        new.priority_class_name,
        _attr(old, "priority_class_name"),
        corr,
    )
    errs += _priority(op, child(path, "priority"), new.priority, _attr(old, "priority"), corr)
    errs += _preemption_policy(
        op,
        child(path, "preemptionPolicy"),
        new.preemption_policy,
        _attr(old, "preemption_policy"),
        corr,
    )
    errs += _template_list(
        op,
        child(path, "podGroupTemplates"),
        new.pod_group_templates,
        _attr(old, "pod_group_templates"),
        corr,
        _pod_group_template,
    )
    errs += _template_list(
        op,
        child(path, "compositePodGroupTemplates"),
        new.composite_pod_group_templates,
        _attr(old, "composite_pod_group_templates"),
        corr,
        _cpg_template,
    )
    return errs


def _workload_spec_dv(op: Op, path: str, new: WorkloadSpec, old: Any) -> list[FieldError]:
    errs = union(
        op,
        path,
        ("podGroupTemplates", "compositePodGroupTemplates"),
        (bool(new.pod_group_templates), bool(new.composite_pod_group_templates)),
        None
        if old is None
        else (bool(old.pod_group_templates), bool(old.composite_pod_group_templates)),
    )
    corr = old is not None
    errs += _optional_immutable_struct(
        op,
        child(path, "controllerRef"),
        new.controller_ref,
        _attr(old, "controller_ref"),
        corr,
        _controller_ref,
    )
    errs += _template_list(
        op,
        child(path, "podGroupTemplates"),
        new.pod_group_templates,
        _attr(old, "pod_group_templates"),
        corr,
        _pod_group_template,
    )
    errs += _template_list(
        op,
        child(path, "compositePodGroupTemplates"),
        new.composite_pod_group_templates,
        _attr(old, "composite_pod_group_templates"),
        corr,
        _cpg_template,
        gated=True,
    )
    return errs


# --- hand-written Workload rules (validation.go ValidateWorkloadSpec) ----------------------


def _workload_spec_handwritten(spec: WorkloadSpec, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    # 1. template names unique across the whole tree (within-list duplicates are left to DV).
    names = {pg.name for pg in spec.pod_group_templates}
    errs += _cpg_list_names(path, spec.composite_pod_group_templates, names)
    # 2. depth
    cpg_path = child(path, "compositePodGroupTemplates")
    for i, cpg in enumerate(spec.composite_pod_group_templates):
        if not _depth_ok(cpg, 1):
            errs.append(
                invalid(
                    index(cpg_path, i),
                    list(cpg.composite_pod_group_templates),
                    f"maximum template hierarchy depth is {MAX_TEMPLATE_DEPTH}",
                )
            )
    # 3. identical priority settings
    errs += _priority_consistency(spec, path)
    # 4. every composite template has a child
    for i, cpg in enumerate(spec.composite_pod_group_templates):
        errs += _has_child(cpg, index(cpg_path, i))
    return errs


def _cpg_names(cpg: CompositePodGroupTemplate, path: str, names: set[str]) -> list[FieldError]:
    errs: list[FieldError] = []
    list_names: set[str] = set()
    for i, pg in enumerate(cpg.pod_group_templates):
        if pg.name in names:
            errs.append(
                duplicate(child(index(child(path, "podGroupTemplates"), i), "name"), pg.name)
            )
        list_names.add(pg.name)
    names |= list_names
    errs += _cpg_list_names(path, cpg.composite_pod_group_templates, names)
    return errs


def _cpg_list_names(
    path: str, templates: Sequence[CompositePodGroupTemplate], names: set[str]
) -> list[FieldError]:
    errs: list[FieldError] = []
    list_names: set[str] = set()
    list_path = child(path, "compositePodGroupTemplates")
    for i, cpg in enumerate(templates):
        if cpg.name in names:
            errs.append(duplicate(child(index(list_path, i), "name"), cpg.name))
        list_names.add(cpg.name)
    names |= list_names
    for i, cpg in enumerate(templates):
        errs += _cpg_names(cpg, index(list_path, i), names)
    return errs


def _depth_ok(cpg: CompositePodGroupTemplate, depth: int) -> bool:
    if depth == MAX_TEMPLATE_DEPTH:
        return False
    return all(_depth_ok(c, depth + 1) for c in cpg.composite_pod_group_templates)


def _priority_consistency(spec: WorkloadSpec, path: str) -> list[FieldError]:
    first: list[tuple[str, int | None]] = []

    def same(class_name: str | None, priority: int | None) -> bool:
        current = (class_name or "", priority)
        if not first:
            first.append(current)
            return True
        return first[0] == current

    for pg in spec.pod_group_templates:
        if not same(pg.priority_class_name, pg.priority):
            return [invalid(path, None, "detected multiple priority configurations")]

    def check(cpg: CompositePodGroupTemplate) -> bool:
        if not same(cpg.priority_class_name, cpg.priority):
            return False
        if not all(check(c) for c in cpg.composite_pod_group_templates):
            return False
        return all(same(pg.priority_class_name, pg.priority) for pg in cpg.pod_group_templates)

    for cpg in spec.composite_pod_group_templates:
        if not check(cpg):
            return [
                invalid(
                    path,
                    None,
                    "all priority and priorityClassName values must be identical, "
                    "detected multiple values",
                )
            ]
    return []


def _has_child(cpg: CompositePodGroupTemplate, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    if not cpg.pod_group_templates and not cpg.composite_pod_group_templates:
        errs.append(
            invalid(
                path,
                cpg.name,
                "must have at least one child PodGroupTemplate or CompositePodGroupTemplate",
            )
        )
    nested = child(path, "compositePodGroupTemplates")
    for i, c in enumerate(cpg.composite_pod_group_templates):
        errs += _has_child(c, index(nested, i))
    return errs


# --- PodGroup / CompositePodGroup specs -----------------------------------------------------


def _pod_group_spec_dv(op: Op, path: str, new: PodGroupSpec, old: Any) -> list[FieldError]:
    corr = old is not None
    errs: list[FieldError] = []
    # (the +k8s:dependentRequired rule is alpha: not enforced; the hand-written check covers it)
    parent_path = child(path, "parentCompositePodGroupName")
    parent, prev_parent = (
        new.parent_composite_pod_group_name,
        _attr(old, "parent_composite_pod_group_name"),
    )
    if not _unchanged(op, corr, parent, prev_parent):
        early = parent is None
        if not op.enabled(_CPG) and parent is not None:
            errs.append(forbidden(parent_path))
            early = True
        if op.update:
            errs += immutable(op, parent_path)
            early = True
        if not early and parent is not None:
            errs += long_name(parent_path, parent)
    errs += _optional_immutable_struct(
        op,
        child(path, "workloadRef"),
        new.workload_ref,
        _attr(old, "workload_ref"),
        corr,
        _workload_reference,
    )
    errs += _struct(
        op,
        child(path, "schedulingPolicy"),
        new.scheduling_policy,
        _attr(old, "scheduling_policy"),
        corr,
        _pg_policy,
    )
    errs += _gated_constraints(
        op,
        child(path, "schedulingConstraints"),
        new.scheduling_constraints,
        _attr(old, "scheduling_constraints"),
        corr,
        immutable_only_when_on=True,
    )
    errs += _claims(
        op, child(path, "resourceClaims"), new.resource_claims, _attr(old, "resource_claims"), corr
    )
    errs += _required_immutable_struct(
        op,
        child(path, "disruptionMode"),
        new.disruption_mode,
        _attr(old, "disruption_mode"),
        corr,
        _disruption_mode,
    )
    errs += _priority_class_name(
        op,
        child(path, "priorityClassName"),
        new.priority_class_name,
        _attr(old, "priority_class_name"),
        corr,
    )
    errs += _priority(op, child(path, "priority"), new.priority, _attr(old, "priority"), corr)
    errs += _preemption_policy(
        op,
        child(path, "preemptionPolicy"),
        new.preemption_policy,
        _attr(old, "preemption_policy"),
        corr,
    )
    return errs


def _required_immutable_struct(
    op: Op, path: str, new: Any, old: Any, correlated: bool, validator: Any
) -> list[FieldError]:
    if _unchanged(op, correlated, new, old):
        return []
    errs: list[FieldError] = []
    early = False
    if op.update:
        errs += immutable(op, path)
        early = True
    if new is None:
        errs.append(required(path))
        early = True
    if early:
        return errs
    result: list[FieldError] = validator(op, path, new, old)
    return result


def _cpg_spec_dv(op: Op, path: str, new: CompositePodGroupSpec, old: Any) -> list[FieldError]:
    corr = old is not None
    errs: list[FieldError] = []
    parent_path = child(path, "parentCompositePodGroupName")
    parent, prev_parent = (
        new.parent_composite_pod_group_name,
        _attr(old, "parent_composite_pod_group_name"),
    )
    if not _unchanged(op, corr, parent, prev_parent):
        if op.update:
            errs += immutable(op, parent_path)
        elif parent is not None:
            errs += long_name(parent_path, parent)
    errs += _required_immutable_struct(
        op,
        child(path, "workloadRef"),
        new.workload_ref,
        _attr(old, "workload_ref"),
        corr,
        _workload_reference,
    )
    policy_path = child(path, "schedulingPolicy")
    prev_policy = _attr(old, "scheduling_policy")
    if not _unchanged(op, corr, new.scheduling_policy, prev_policy):
        if op.update:
            errs += immutable(op, policy_path)
        else:
            errs += _cpg_policy(op, policy_path, new.scheduling_policy, prev_policy)
    errs += _optional_immutable_struct(
        op,
        child(path, "schedulingConstraints"),
        new.scheduling_constraints,
        _attr(old, "scheduling_constraints"),
        corr,
        _constraints,
    )
    errs += _required_immutable_struct(
        op,
        child(path, "disruptionMode"),
        new.disruption_mode,
        _attr(old, "disruption_mode"),
        corr,
        _disruption_mode,
    )
    errs += _priority_class_name(
        op,
        child(path, "priorityClassName"),
        new.priority_class_name,
        _attr(old, "priority_class_name"),
        corr,
    )
    errs += _priority(op, child(path, "priority"), new.priority, _attr(old, "priority"), corr)
    errs += _preemption_policy(
        op,
        child(path, "preemptionPolicy"),
        new.preemption_policy,
        _attr(old, "preemption_policy"),
        corr,
    )
    return errs


# --- defaulting and gate dropping (decode + registry strategy PrepareForCreate/Update) -------


def apply_defaults(obj: SchedulingObject, *, gates: FeatureGates | None = None) -> SchedulingObject:
    """Server-side defaults of v1.37: PodGroup / CompositePodGroup ``disruptionMode`` becomes
    ``{single: {}}``; with ``PodGroupPreemptionPolicy`` on, their ``preemptionPolicy`` becomes
    ``PreemptLowerPriority``. Workloads have no defaults (templates are not defaulted)."""
    gates = gates or FeatureGates()
    if isinstance(obj, (PodGroup, CompositePodGroup)):
        spec: Any = obj.spec
        if spec.disruption_mode is None:
            spec = attrs.evolve(spec, disruption_mode=DisruptionMode(single=SingleDisruptionMode()))
        if gates.pod_group_preemption_policy and spec.preemption_policy is None:
            spec = attrs.evolve(spec, preemption_policy="PreemptLowerPriority")
        return attrs.evolve(obj, spec=spec)
    return obj


def _drop_pgts(
    templates: Sequence[PodGroupTemplate], old: Sequence[PodGroupTemplate], gates: FeatureGates
) -> tuple[PodGroupTemplate, ...]:
    out = []
    for i, t in enumerate(templates):
        prev = old[i] if i < len(old) else None  # upstream correlates these by index
        changes: dict[str, Any] = {}
        if not gates.topology_aware_workload_scheduling and (
            prev is None or prev.scheduling_constraints is None
        ):
            changes["scheduling_constraints"] = None
        if not gates.dra_workload_resource_claims and (prev is None or not prev.resource_claims):
            changes["resource_claims"] = ()
        if not gates.pod_group_preemption_policy and (
            prev is None or prev.preemption_policy is None
        ):
            changes["preemption_policy"] = None
        out.append(attrs.evolve(t, **changes) if changes else t)
    return tuple(out)


def _drop_cpgts(
    templates: Sequence[CompositePodGroupTemplate],
    old: Sequence[CompositePodGroupTemplate],
    gates: FeatureGates,
) -> tuple[CompositePodGroupTemplate, ...]:
    by_name = {t.name: t for t in old}
    out = []
    for t in templates:
        prev = by_name.get(t.name)  # upstream correlates these by name
        changes: dict[str, Any] = {}
        if not gates.pod_group_preemption_policy and (
            prev is None or prev.preemption_policy is None
        ):
            changes["preemption_policy"] = None
        if not gates.composite_pod_group and (
            prev is None or not prev.composite_pod_group_templates
        ):
            changes["composite_pod_group_templates"] = ()
        else:
            changes["composite_pod_group_templates"] = _drop_cpgts(
                t.composite_pod_group_templates,
                prev.composite_pod_group_templates if prev else (),
                gates,
            )
        changes["pod_group_templates"] = _drop_pgts(
            t.pod_group_templates, prev.pod_group_templates if prev else (), gates
        )
        out.append(attrs.evolve(t, **changes))
    return tuple(out)


def drop_disabled_fields(
    obj: SchedulingObject, old: SchedulingObject | None = None, *, gates: FeatureGates | None = None
) -> SchedulingObject:
    """What the registry strategy does before validating a create (``old=None``) or update:
    fields of disabled gates are removed unless ``old`` already uses them (see
    :class:`FeatureGates`). Returns the object the server would store."""
    gates = gates or FeatureGates()
    if isinstance(obj, Workload):
        old_spec = old.spec if isinstance(old, Workload) else None
        spec = obj.spec
        pgts = _drop_pgts(
            spec.pod_group_templates, old_spec.pod_group_templates if old_spec else (), gates
        )
        if not gates.composite_pod_group and (
            old_spec is None or not old_spec.composite_pod_group_templates
        ):
            cpgts: tuple[CompositePodGroupTemplate, ...] = ()
        else:
            cpgts = _drop_cpgts(
                spec.composite_pod_group_templates,
                old_spec.composite_pod_group_templates if old_spec else (),
                gates,
            )
        return attrs.evolve(
            obj,
            spec=attrs.evolve(spec, pod_group_templates=pgts, composite_pod_group_templates=cpgts),
        )
    if isinstance(obj, PodGroup):
        prev = old.spec if isinstance(old, PodGroup) else None
        pg_changes: dict[str, Any] = {}
        if not gates.topology_aware_workload_scheduling and (
            prev is None or prev.scheduling_constraints is None
        ):
            pg_changes["scheduling_constraints"] = None
        if not gates.dra_workload_resource_claims and (prev is None or not prev.resource_claims):
            pg_changes["resource_claims"] = ()
        if not gates.pod_group_preemption_policy and (
            prev is None or prev.preemption_policy is None
        ):
            pg_changes["preemption_policy"] = None
        if not gates.composite_pod_group and (
            prev is None or prev.parent_composite_pod_group_name is None
        ):
            pg_changes["parent_composite_pod_group_name"] = None
        return attrs.evolve(obj, spec=attrs.evolve(obj.spec, **pg_changes))
    prev_cpg = old.spec if isinstance(old, CompositePodGroup) else None
    if not gates.pod_group_preemption_policy and (
        prev_cpg is None or prev_cpg.preemption_policy is None
    ):
        return attrs.evolve(obj, spec=attrs.evolve(obj.spec, preemption_policy=None))
    return obj


def _prepare(obj: Any, old: Any, gates: FeatureGates) -> tuple[Any, Any]:
    if old is not None:
        old = apply_defaults(old, gates=gates)
    obj = drop_disabled_fields(apply_defaults(obj, gates=gates), old, gates=gates)
    return obj, old


# --- public entry points --------------------------------------------------------------------


def validate_workload(
    w: Workload, old: Workload | None = None, *, gates: FeatureGates | None = None
) -> list[FieldError]:
    """Every error kube-apiserver v1.37 reports for creating ``w`` (``old=None``) or updating
    ``old`` to ``w``, in the server's order: hand-written rules (metadata, unique template
    names, depth, identical priorities, composite templates with children), then the
    declarative rules (unions, formats, limits, immutability). Gate-disabled fields are
    dropped first, as the server does."""
    gates = gates or FeatureGates()
    w, old = _prepare(w, old, gates)
    op = Op(update=old is not None, options=gates.options())
    if old is None:
        errs = validate_object_meta(w.metadata, name_is_dns_subdomain)
    else:
        errs = validate_object_meta_update(w.metadata, old.metadata)
    errs += _workload_spec_handwritten(w.spec, "spec")
    errs += _struct(op, "spec", w.spec, _attr(old, "spec"), old is not None, _workload_spec_dv)
    return errs


def validate_pod_group(
    pg: PodGroup, old: PodGroup | None = None, *, gates: FeatureGates | None = None
) -> list[FieldError]:
    """Create / update validation of a PodGroup (status is ignored: the server clears it on
    create and keeps the stored one on spec updates)."""
    gates = gates or FeatureGates()
    pg, old = _prepare(pg, old, gates)
    op = Op(update=old is not None, options=gates.options())
    if old is None:
        errs = validate_object_meta(pg.metadata, name_is_dns_subdomain)
        if pg.spec.parent_composite_pod_group_name is not None and pg.spec.workload_ref is None:
            errs.append(
                required("spec.workloadRef", "must be set when parentCompositePodGroupName is set")
            )
    else:
        errs = validate_object_meta_update(pg.metadata, old.metadata)
    errs += _struct(op, "spec", pg.spec, _attr(old, "spec"), old is not None, _pod_group_spec_dv)
    return errs


def validate_composite_pod_group(
    cpg: CompositePodGroup,
    old: CompositePodGroup | None = None,
    *,
    gates: FeatureGates | None = None,
) -> list[FieldError]:
    """Create / update validation of a CompositePodGroup (v1alpha3)."""
    gates = gates or FeatureGates()
    cpg, old = _prepare(cpg, old, gates)
    op = Op(update=old is not None, options=gates.options())
    if old is None:
        errs = validate_object_meta(cpg.metadata, name_is_dns_subdomain)
    else:
        errs = validate_object_meta_update(cpg.metadata, old.metadata)
    errs += _struct(op, "spec", cpg.spec, _attr(old, "spec"), old is not None, _cpg_spec_dv)
    return errs


def validate_object(
    obj: SchedulingObject, old: SchedulingObject | None = None, *, gates: FeatureGates | None = None
) -> list[FieldError]:
    """Dispatch to :func:`validate_workload`, :func:`validate_pod_group` or
    :func:`validate_composite_pod_group`; ``old`` must be of the same kind."""
    if old is not None and type(old) is not type(obj):
        raise TypeError(
            f"cannot validate a {type(obj).__name__} update against a {type(old).__name__}"
        )
    if isinstance(obj, Workload):
        return validate_workload(obj, old if isinstance(old, Workload) else None, gates=gates)
    if isinstance(obj, PodGroup):
        return validate_pod_group(obj, old if isinstance(old, PodGroup) else None, gates=gates)
    if isinstance(obj, CompositePodGroup):
        return validate_composite_pod_group(
            obj, old if isinstance(old, CompositePodGroup) else None, gates=gates
        )
    raise TypeError(f"not a scheduling object: {type(obj).__name__}")
