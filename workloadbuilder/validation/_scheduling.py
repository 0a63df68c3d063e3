"""Workload / PodGroup / CompositePodGroup validation, as kube-apiserver v1.37.2 does it.

Sources (kubernetes v1.37.2): ``pkg/apis/scheduling/validation/validation.go`` (hand-written),
``pkg/apis/scheduling/v1beta1|v1alpha3/zz_generated.validations.go`` (declarative, generated
from the ``+k8s:`` tags of ``k8s.io/api/scheduling``), ``pkg/registry/scheduling/*/strategy.go``
(field dropping for disabled gates) and ``apiserver/pkg/registry/rest`` (the order: hand-written
errors first, then the enforced declarative errors; alpha declarative rules are not enforced).
The v1beta1 and v1alpha3 rules for Workload and PodGroup are identical.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs

from workloadbuilder.api import (
    CodecError,
    CompositePodGroup,
    CompositePodGroupSchedulingPolicy,
    CompositePodGroupSpec,
    CompositePodGroupTemplate,
    DisruptionMode,
    PodGroup,
    PodGroupSchedulingPolicy,
    PodGroupSpec,
    PodGroupTemplate,
    SingleDisruptionMode,
    TypedLocalObjectReference,
    Workload,
    WorkloadReference,
    WorkloadSpec,
    from_dict,
    to_dict,
)
from workloadbuilder.errors import FieldError
from workloadbuilder.validation._blocks import (
    MAX_CLAIMS,
    disruption_mode,
    resource_claims,
    scheduling_constraints,
)
from workloadbuilder.validation._common import (
    Op,
    attr_name,
    attr_of,
    child,
    codec_error,
    duplicate,
    each_val,
    forbidden,
    immutable,
    index,
    invalid,
    long_name,
    max_items,
    maximum,
    member_union,
    minimum,
    name_key,
    not_supported,
    optional_immutable_struct,
    path_segment_name,
    required,
    required_string,
    short_name,
    unchanged,
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
MAX_TEMPLATE_DEPTH = 4
MAX_PRIORITY = 1_000_000_000
PREEMPTION_POLICIES = ("Never", "PreemptLowerPriority")

SchedulingObject = Workload | PodGroup | CompositePodGroup

_TAS = "TopologyAwareWorkloadScheduling"
_CPG = "CompositePodGroup"
_PGPP = "PodGroupPreemptionPolicy"


def _field(
    op: Op, path: str, new: Any, old: Any, json_name: str, check: Any, *args: Any, **kwargs: Any
) -> list[FieldError]:
    """``check(op, path.jsonName, new.json_name, old.json_name, correlated, *args)``: one field
    of ``new`` (correlated with the same field of ``old`` when there is one)."""
    name = attr_name(json_name)
    result: list[FieldError] = check(
        op,
        child(path, json_name),
        getattr(new, name),
        attr_of(old, name),
        old is not None,
        *args,
        **kwargs,
    )
    return result


# --- leaf value types ---------------------------------------------------------------------


def _workload_reference(op: Op, path: str, new: WorkloadReference, old: Any) -> list[FieldError]:
    errs = _field(op, path, new, old, "workloadName", required_string, long_name)
    errs += _field(op, path, new, old, "templateName", required_string, short_name)
    return errs


def _controller_ref(
    op: Op, path: str, new: TypedLocalObjectReference, old: Any
) -> list[FieldError]:
    errs: list[FieldError] = []
    group, prev_group = new.api_group or "", attr_of(old, "api_group") or ""
    if not unchanged(op, old is not None, group, prev_group) and group:
        errs += long_name(child(path, "apiGroup"), group)
    errs += _field(op, path, new, old, "kind", required_string, path_segment_name)
    errs += _field(op, path, new, old, "name", required_string, path_segment_name)
    return errs


# --- fields shared by templates and objects ------------------------------------------------


def _priority_class_name(
    op: Op, path: str, new: str | None, old: Any, correlated: bool
) -> list[FieldError]:
    value, prev = new or "", old or ""
    if unchanged(op, correlated, value, prev):
        return []
    if op.update:
        return immutable(op, path)
    return long_name(path, value) if value else []


def _priority(op: Op, path: str, new: int | None, old: Any, correlated: bool) -> list[FieldError]:
    if unchanged(op, correlated, new, old):
        return []
    if op.update:
        return immutable(op, path)
    return maximum(path, new, MAX_PRIORITY) if new is not None else []


def _preemption_policy(
    op: Op, path: str, new: str | None, old: Any, correlated: bool
) -> list[FieldError]:
    if unchanged(op, correlated, new, old):
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


def _priority_fields(op: Op, path: str, new: Any, old: Any) -> list[FieldError]:
    """``priorityClassName``, ``priority`` and ``preemptionPolicy`` (the last fields of every
    template and spec)."""
    errs = _field(op, path, new, old, "priorityClassName", _priority_class_name)
    errs += _field(op, path, new, old, "priority", _priority)
    errs += _field(op, path, new, old, "preemptionPolicy", _preemption_policy)
    return errs


def _policy(
    op: Op,
    path: str,
    new: PodGroupSchedulingPolicy | CompositePodGroupSchedulingPolicy,
    old: Any,
    *,
    count: str,
) -> list[FieldError]:
    """The ``basic`` / ``gang`` policy union; ``count`` is the JSON name of the gang's minimum
    (``minCount`` for PodGroups, ``minGroupCount`` for CompositePodGroups)."""
    errs = member_union(op, path, new, old, ("basic", "gang"))
    corr = old is not None
    prev_basic = attr_of(old, "basic")
    if not unchanged(op, corr, new.basic, prev_basic):
        errs += immutable(op, child(path, "basic"))
    prev_gang = attr_of(old, "gang")
    if not unchanged(op, corr, new.gang, prev_gang):
        gang_path = child(path, "gang")
        update_errs = update_pointer(op, gang_path, new.gang, prev_gang)
        errs += update_errs
        if new.gang is not None and not update_errs:
            count_path = child(gang_path, count)
            attr = attr_name(count)
            value, prev_count = getattr(new.gang, attr), attr_of(prev_gang, attr)
            if not unchanged(op, prev_gang is not None, value, prev_count):
                if value == 0:
                    errs.append(required(count_path))
                else:
                    errs += minimum(count_path, value, 1)
    return errs


def _pg_policy(op: Op, path: str, new: PodGroupSchedulingPolicy, old: Any) -> list[FieldError]:
    return _policy(op, path, new, old, count="minCount")


def _cpg_policy(
    op: Op, path: str, new: CompositePodGroupSchedulingPolicy, old: Any
) -> list[FieldError]:
    return _policy(op, path, new, old, count="minGroupCount")


def _struct(
    op: Op, path: str, new: Any, old: Any, correlated: bool, validator: Any
) -> list[FieldError]:
    """A required (non-pointer) struct field: ratchet, then the type's validation."""
    if unchanged(op, correlated, new, old):
        return []
    result: list[FieldError] = validator(op, path, new, old)
    return result


def _immutable_struct(
    op: Op, path: str, new: Any, old: Any, correlated: bool, validator: Any
) -> list[FieldError]:
    """A required (non-pointer) ``+k8s:immutable`` struct field."""
    if unchanged(op, correlated, new, old):
        return []
    if op.update:
        return immutable(op, path)
    result: list[FieldError] = validator(op, path, new, old)
    return result


def _required_immutable_struct(
    op: Op, path: str, new: Any, old: Any, correlated: bool, validator: Any
) -> list[FieldError]:
    """``+k8s:immutable +k8s:required`` on a struct pointer, then the type's validation."""
    if unchanged(op, correlated, new, old):
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


def _gated_constraints(
    op: Op, path: str, new: Any, old: Any, correlated: bool, *, immutable_only_when_on: bool
) -> list[FieldError]:
    if unchanged(op, correlated, new, old):
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
    return errs + scheduling_constraints(op, path, new, old)


def _pod_group_fields(
    op: Op, path: str, new: PodGroupTemplate | PodGroupSpec, old: Any, *, template: bool
) -> list[FieldError]:
    """The scheduling fields PodGroupTemplate and PodGroupSpec share. They differ in two tags:
    a template's ``disruptionMode`` is optional (the object's is defaulted, so required), and
    the template's ``schedulingConstraints`` is immutable even with the gate off."""
    errs = _field(op, path, new, old, "schedulingPolicy", _struct, _pg_policy)
    errs += _field(
        op,
        path,
        new,
        old,
        "schedulingConstraints",
        _gated_constraints,
        immutable_only_when_on=not template,
    )
    errs += _field(op, path, new, old, "resourceClaims", resource_claims)
    disruption = optional_immutable_struct if template else _required_immutable_struct
    errs += _field(op, path, new, old, "disruptionMode", disruption, disruption_mode)
    return errs + _priority_fields(op, path, new, old)


def _composite_fields(
    op: Op,
    path: str,
    new: CompositePodGroupTemplate | CompositePodGroupSpec,
    old: Any,
    *,
    template: bool,
) -> list[FieldError]:
    """The scheduling fields CompositePodGroupTemplate and CompositePodGroupSpec share (the
    spec's ``schedulingPolicy`` is immutable and its ``disruptionMode`` required)."""
    policy = _struct if template else _immutable_struct
    errs = _field(op, path, new, old, "schedulingPolicy", policy, _cpg_policy)
    errs += _field(
        op,
        path,
        new,
        old,
        "schedulingConstraints",
        optional_immutable_struct,
        scheduling_constraints,
    )
    disruption = optional_immutable_struct if template else _required_immutable_struct
    errs += _field(op, path, new, old, "disruptionMode", disruption, disruption_mode)
    return errs + _priority_fields(op, path, new, old)


# --- templates ------------------------------------------------------------------------------


def _pod_group_template(op: Op, path: str, new: PodGroupTemplate, old: Any) -> list[FieldError]:
    errs = _field(op, path, new, old, "name", required_string, short_name)
    return errs + _pod_group_fields(op, path, new, old, template=True)


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
    if unchanged(op, correlated, tuple(new), tuple(old_list)):
        return []
    errs: list[FieldError] = []
    early = not new
    if gated and not op.enabled(_CPG) and new:
        errs.append(forbidden(path))
        early = True
    too_many = max_items(path, new, MAX_TEMPLATES)
    errs += too_many
    update_errs = val_slice_update_no_add_remove(op, path, new, old_list, name_key)
    errs += update_errs
    if early or too_many or update_errs:
        return errs
    errs += val_slice_unique(path, new, name_key)
    errs += each_val(op, path, new, old_list, name_key, validator)
    return errs


def _cpg_template(op: Op, path: str, new: CompositePodGroupTemplate, old: Any) -> list[FieldError]:
    errs = _field(op, path, new, old, "name", required_string, short_name)
    errs += _composite_fields(op, path, new, old, template=True)
    errs += _field(op, path, new, old, "podGroupTemplates", _template_list, _pod_group_template)
    errs += _field(op, path, new, old, "compositePodGroupTemplates", _template_list, _cpg_template)
    return errs


def _workload_spec_dv(op: Op, path: str, new: WorkloadSpec, old: Any) -> list[FieldError]:
    errs = member_union(
        op, path, new, old, ("podGroupTemplates", "compositePodGroupTemplates"), is_set=bool
    )
    errs += _field(op, path, new, old, "controllerRef", optional_immutable_struct, _controller_ref)
    errs += _field(op, path, new, old, "podGroupTemplates", _template_list, _pod_group_template)
    errs += _field(
        op,
        path,
        new,
        old,
        "compositePodGroupTemplates",
        _template_list,
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


def _parent_name(op: Op, path: str, new: Any, old: Any, *, gated: bool) -> list[FieldError]:
    """``parentCompositePodGroupName``: optional, immutable, a DNS subdomain; on a PodGroup it
    is forbidden while the CompositePodGroup gate is off."""
    parent_path = child(path, "parentCompositePodGroupName")
    parent = new.parent_composite_pod_group_name
    if unchanged(op, old is not None, parent, attr_of(old, "parent_composite_pod_group_name")):
        return []
    errs: list[FieldError] = []
    early = parent is None
    if gated and not op.enabled(_CPG) and parent is not None:
        errs.append(forbidden(parent_path))
        early = True
    if op.update:
        errs += immutable(op, parent_path)
        early = True
    if not early and parent is not None:
        errs += long_name(parent_path, parent)
    return errs


def _pod_group_spec_dv(op: Op, path: str, new: PodGroupSpec, old: Any) -> list[FieldError]:
    # (the +k8s:dependentRequired rule is alpha: not enforced; the hand-written check covers it)
    errs = _parent_name(op, path, new, old, gated=True)
    errs += _field(
        op, path, new, old, "workloadRef", optional_immutable_struct, _workload_reference
    )
    return errs + _pod_group_fields(op, path, new, old, template=False)


def _cpg_spec_dv(op: Op, path: str, new: CompositePodGroupSpec, old: Any) -> list[FieldError]:
    errs = _parent_name(op, path, new, old, gated=False)
    errs += _field(
        op, path, new, old, "workloadRef", _required_immutable_struct, _workload_reference
    )
    return errs + _composite_fields(op, path, new, old, template=False)


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


def _dropped_preemption(prev: Any, gates: FeatureGates) -> dict[str, Any]:
    """``preemptionPolicy`` is dropped while its gate is off, unless ``prev`` already uses it."""
    if not gates.pod_group_preemption_policy and (prev is None or prev.preemption_policy is None):
        return {"preemption_policy": None}
    return {}


def _dropped_pod_group_fields(prev: Any, gates: FeatureGates) -> dict[str, Any]:
    """The gated fields of a PodGroupTemplate / PodGroupSpec to drop (``prev``: the old one)."""
    changes: dict[str, Any] = {}
    if not gates.topology_aware_workload_scheduling and (
        prev is None or prev.scheduling_constraints is None
    ):
        changes["scheduling_constraints"] = None
    if not gates.dra_workload_resource_claims and (prev is None or not prev.resource_claims):
        changes["resource_claims"] = ()
    changes.update(_dropped_preemption(prev, gates))
    return changes


def _drop_pgts(
    templates: Sequence[PodGroupTemplate], old: Sequence[PodGroupTemplate], gates: FeatureGates
) -> tuple[PodGroupTemplate, ...]:
    out = []
    for i, t in enumerate(templates):
        prev = old[i] if i < len(old) else None  # upstream correlates these by index
        changes = _dropped_pod_group_fields(prev, gates)
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
        changes = _dropped_preemption(prev, gates)
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
        pg_changes = _dropped_pod_group_fields(prev, gates)
        if not gates.composite_pod_group and (
            prev is None or prev.parent_composite_pod_group_name is None
        ):
            pg_changes["parent_composite_pod_group_name"] = None
        return attrs.evolve(obj, spec=attrs.evolve(obj.spec, **pg_changes))
    prev_cpg = old.spec if isinstance(old, CompositePodGroup) else None
    cpg_changes = _dropped_preemption(prev_cpg, gates)
    if cpg_changes:
        return attrs.evolve(obj, spec=attrs.evolve(obj.spec, **cpg_changes))
    return obj


def _prepare(obj: Any, old: Any, gates: FeatureGates) -> tuple[Any, Any]:
    if old is not None:
        old = apply_defaults(old, gates=gates)
    obj = drop_disabled_fields(apply_defaults(obj, gates=gates), old, gates=gates)
    return obj, old


def wire_errors(obj: Any) -> list[FieldError]:
    """What the API server's decoder refuses before any validation runs (400 BadRequest):
    an ``int32`` field outside the 32-bit range (``expected a 32-bit integer``), or a field
    of the wrong JSON type. Objects parsed from JSON cannot have these; objects built in
    Python (derived counts, ``PodSet(replicas=3_000_000_000)``) can, so they are re-read
    through the codec the way the server would read the JSON body."""
    try:
        from_dict(to_dict(obj), type(obj))
    except CodecError as e:
        return [codec_error(e)]
    except (TypeError, ValueError) as e:
        return [FieldError(path="", type="Invalid value", detail=str(e))]
    return []


# --- public entry points --------------------------------------------------------------------


def _validate(
    obj: Any,
    old: Any,
    gates: FeatureGates | None,
    handwritten: Callable[[Any, Any], list[FieldError]],
    spec_dv: Callable[[Op, str, Any, Any], list[FieldError]],
) -> list[FieldError]:
    """Defaults and gate dropping, then metadata, the kind's hand-written spec rules and the
    declarative rules of ``spec``, in the server's order."""
    gates = gates or FeatureGates()
    wire = wire_errors(obj)
    if wire:
        return wire  # the server cannot even decode the body (400 BadRequest)
    obj, old = _prepare(obj, old, gates)
    op = Op(update=old is not None, options=gates.options())
    if old is None:
        errs = validate_object_meta(obj.metadata, name_is_dns_subdomain)
    else:
        errs = validate_object_meta_update(obj.metadata, old.metadata)
    errs += handwritten(obj, old)
    errs += _struct(op, "spec", obj.spec, attr_of(old, "spec"), old is not None, spec_dv)
    return errs


def _workload_handwritten(w: Workload, old: Workload | None) -> list[FieldError]:
    return _workload_spec_handwritten(w.spec, "spec")


def _pod_group_handwritten(pg: PodGroup, old: PodGroup | None) -> list[FieldError]:
    parent, ref = pg.spec.parent_composite_pod_group_name, pg.spec.workload_ref
    if old is None and parent is not None and ref is None:
        return [required("spec.workloadRef", "must be set when parentCompositePodGroupName is set")]
    return []


def _no_handwritten(obj: Any, old: Any) -> list[FieldError]:
    return []


def validate_workload(
    w: Workload, old: Workload | None = None, *, gates: FeatureGates | None = None
) -> list[FieldError]:
    """Every error kube-apiserver v1.37 reports for creating ``w`` (``old=None``) or updating
    ``old`` to ``w``, in the server's order: hand-written rules (metadata, unique template
    names, depth, identical priorities, composite templates with children), then the
    declarative rules (unions, formats, limits, immutability). Gate-disabled fields are
    dropped first, as the server does."""
    return _validate(w, old, gates, _workload_handwritten, _workload_spec_dv)


def validate_pod_group(
    pg: PodGroup, old: PodGroup | None = None, *, gates: FeatureGates | None = None
) -> list[FieldError]:
    """Create / update validation of a PodGroup (status is ignored: the server clears it on
    create and keeps the stored one on spec updates)."""
    return _validate(pg, old, gates, _pod_group_handwritten, _pod_group_spec_dv)


def validate_composite_pod_group(
    cpg: CompositePodGroup,
    old: CompositePodGroup | None = None,
    *,
    gates: FeatureGates | None = None,
) -> list[FieldError]:
    """Create / update validation of a CompositePodGroup (v1alpha3)."""
    return _validate(cpg, old, gates, _no_handwritten, _cpg_spec_dv)


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
