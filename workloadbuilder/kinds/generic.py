"""Generic adapter for custom operators: named pod sets and groups -> Workload, PodGroups and
CompositePodGroups.

The input is a small, YAML-friendly spec that embeds the KEP-6089 building blocks the way a
custom resource would (``kind: GenericWorkload``, ``apiVersion: workloadbuilder.io/v1alpha1``)::

    apiVersion: workloadbuilder.io/v1alpha1
    kind: GenericWorkload
    metadata: {name: llm, namespace: default}
    spec:
      owner: {apiVersion: example.com/v1, kind: Trainer, name: llm, uid: "..."}  # optional
      priorityClassName: high             # optional; copied to every template
      groups:                             # exactly one of podSets / groups at the top
        - name: slices                    # a CompositePodGroupTemplate
          scheduling:                     # WorkloadCompositePodGroup* blocks
            schedulingPolicy: {gang: {}}  # minGroupCount defaults to the child group count
            schedulingConstraints: {topology: [{key: topology.kubernetes.io/zone}]}
          podSets:
            - name: slice                 # a PodGroupTemplate
              replicas: 2                 # PodGroups per parent instance (default 1)
              count: 4                    # pods per PodGroup (the default gang minCount)
              scheduling:                 # WorkloadPodGroup* blocks (like Job spec.scheduling)
                schedulingPolicy: {gang: {}}
                schedulingConstraints: {topology: [{key: topology.kubernetes.io/rack}]}
                disruptionMode: {all: {}}

Policies default to gang (``minCount = count``; ``minGroupCount`` = number of child group
instances). Runtime names: the Workload is ``spec.workloadName`` or ``metadata.name``; the
``i``-th instance of a top-level template ``T`` is ``<workload>-<T>-<i>``, and the ``j``-th
instance of a child template ``C`` of instance ``P`` is ``<P>-<C>-<j>``. Pod-set keys (the keys
of :attr:`Plan.pod_group_names`) are the instance path, e.g. ``slices-0/slice-1``; a pod names
its key in the annotation ``workloadbuilder.io/pod-set`` (and may name the Workload in
``workloadbuilder.io/workload``, which then must match).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

import attrs

from workloadbuilder.api import (
    CompositePodGroup,
    OwnerReference,
    PodGroup,
    WorkloadCompositePodGroupDisruptionMode,
    WorkloadCompositePodGroupSchedulingConstraints,
    WorkloadCompositePodGroupSchedulingPolicy,
    WorkloadPodGroupDisruptionMode,
    WorkloadPodGroupResourceClaim,
    WorkloadPodGroupSchedulingConstraints,
    WorkloadPodGroupSchedulingPolicy,
)
from workloadbuilder.builder import (
    POD_SET_ANNOTATION,
    WORKLOAD_ANNOTATION,
    Plan,
    SchedulingConfig,
    WorkloadInput,
    WorkloadItem,
    annotated_pod_set_key,
)
from workloadbuilder.errors import BuildError, FieldError, ValidationError
from workloadbuilder.kinds._common import (
    INT32_MAX,
    INT32_MIN,
    MAX_PLANNED_OBJECTS,
    LeafSpec,
    Owner,
    as_map,
    build_workload,
    leaf_item,
    make_plan,
    min_count_default,
    namespace_of,
    parse_block,
    strip_owner,
)
from workloadbuilder.validation import is_dns1123_label

__all__ = [
    "GENERIC_API_VERSION",
    "GENERIC_KIND",
    "POD_SET_ANNOTATION",
    "WORKLOAD_ANNOTATION",
    "GenericGroup",
    "GenericGroupScheduling",
    "GenericPodSet",
    "GenericPodSetScheduling",
    "GenericSpec",
    "plan_generic",
    "plan_generic_dict",
]

GENERIC_API_VERSION = "workloadbuilder.io/v1alpha1"
GENERIC_KIND = "GenericWorkload"

_MAX_NAME = 253
_Instance = TypeVar("_Instance", PodGroup, CompositePodGroup)


# ---------------------------------------------------------------------------------------------
# The GenericWorkload spec


@attrs.frozen(kw_only=True)
class GenericPodSetScheduling:
    """The leaf building blocks of a pod set (same shape as Job ``spec.scheduling``)."""

    scheduling_policy: WorkloadPodGroupSchedulingPolicy | None = None
    scheduling_constraints: WorkloadPodGroupSchedulingConstraints | None = None
    disruption_mode: WorkloadPodGroupDisruptionMode | None = None
    resource_claims: tuple[WorkloadPodGroupResourceClaim, ...] = ()
    unknown_fields: dict[str, Any] = attrs.field(factory=dict, repr=False)


@attrs.frozen(kw_only=True)
class GenericGroupScheduling:
    """The composite building blocks of a group."""

    scheduling_policy: WorkloadCompositePodGroupSchedulingPolicy | None = None
    scheduling_constraints: WorkloadCompositePodGroupSchedulingConstraints | None = None
    disruption_mode: WorkloadCompositePodGroupDisruptionMode | None = None
    unknown_fields: dict[str, Any] = attrs.field(factory=dict, repr=False)


@attrs.frozen(kw_only=True)
class GenericPodSet:
    """Pods scheduled as one PodGroup per instance (a PodGroupTemplate).

    ``count``: pods in one PodGroup (the default gang ``minCount``); ``replicas``: PodGroups
    created from the template (per parent instance).
    """

    name: str
    count: int = 1
    replicas: int = 1
    scheduling: GenericPodSetScheduling | None = None
    unknown_fields: dict[str, Any] = attrs.field(factory=dict, repr=False)


@attrs.frozen(kw_only=True)
class GenericGroup:
    """A group of groups (a CompositePodGroupTemplate); ``replicas`` CompositePodGroups."""

    name: str
    replicas: int = 1
    scheduling: GenericGroupScheduling | None = None
    pod_sets: tuple[GenericPodSet, ...] = ()
    groups: tuple[GenericGroup, ...] = ()
    unknown_fields: dict[str, Any] = attrs.field(factory=dict, repr=False)


@attrs.frozen(kw_only=True)
class GenericSpec:
    """A custom workload: exactly one of ``pod_sets`` / ``groups`` at the top level.

    ``owner`` (optional) becomes the controller ownerReference of every object and the
    Workload's ``spec.controllerRef``; without it the objects are unowned.
    """

    name: str
    namespace: str = "default"
    workload_name: str | None = None
    owner: OwnerReference | None = None
    priority_class_name: str | None = None
    pod_sets: tuple[GenericPodSet, ...] = ()
    groups: tuple[GenericGroup, ...] = ()

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> GenericSpec:
        """Parse a ``GenericWorkload`` document. Raises ValidationError (field paths)."""
        if not isinstance(doc, Mapping):
            raise ValidationError(
                [FieldError(path="", type="Invalid value", detail="not an object")]
            )
        meta = as_map(doc.get("metadata"), "metadata")
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise ValidationError([FieldError(path="metadata.name", type="Required value")])
        namespace = namespace_of(meta)
        spec = as_map(doc.get("spec"), "spec")
        body = parse_block(spec, "spec", _SpecBody)
        assert body is not None
        _reject_unknown(body, "spec")
        return cls(
            name=name,
            namespace=str(namespace),
            workload_name=body.workload_name,
            owner=body.owner,
            priority_class_name=body.priority_class_name,
            pod_sets=body.pod_sets,
            groups=body.groups,
        )


@attrs.frozen(kw_only=True)
class _SpecBody:
    workload_name: str | None = None
    owner: OwnerReference | None = None
    priority_class_name: str | None = None
    pod_sets: tuple[GenericPodSet, ...] = ()
    groups: tuple[GenericGroup, ...] = ()
    unknown_fields: dict[str, Any] = attrs.field(factory=dict, repr=False)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _reject_unknown(obj: Any, path: str) -> None:
    """GenericWorkload is our own format, so unknown fields are errors (not silently dropped)."""
    errors: list[FieldError] = []

    def walk(o: Any, p: str) -> None:
        for key in getattr(o, "unknown_fields", None) or ():
            errors.append(
                FieldError(path=f"{p}.{key}", type="Invalid value", detail="unknown field")
            )
        for field in attrs.fields(type(o)):
            value = getattr(o, field.name)
            child = f"{p}.{_camel(field.name)}"
            if attrs.has(type(value)):
                walk(value, child)
            elif isinstance(value, tuple):
                for i, item in enumerate(value):
                    if attrs.has(type(item)):
                        walk(item, f"{child}[{i}]")

    walk(obj, path)
    if errors:
        raise ValidationError(errors)


# ---------------------------------------------------------------------------------------------
# GenericWorkload


def _pod_set_item(ps: GenericPodSet, path: str, pcn: str | None) -> WorkloadItem:
    sched = ps.scheduling or GenericPodSetScheduling()
    return leaf_item(
        LeafSpec(
            name=ps.name,
            path=f"{path}.scheduling",
            policy=sched.scheduling_policy,
            constraints=sched.scheduling_constraints,
            disruption=sched.disruption_mode,
            claims=sched.resource_claims,
            priority_class_name=pcn,
            default_min_count=ps.count,
        )
    )


def _group_item(g: GenericGroup, path: str, pcn: str | None) -> WorkloadItem:
    sched = g.scheduling or GenericGroupScheduling()
    children = [
        _pod_set_item(ps, f"{path}.podSets[{i}]", pcn) for i, ps in enumerate(g.pod_sets)
    ] + [_group_item(c, f"{path}.groups[{i}]", pcn) for i, c in enumerate(g.groups)]
    child_instances = sum(ps.replicas for ps in g.pod_sets) + sum(c.replicas for c in g.groups)
    return WorkloadItem(
        name=g.name,
        path=f"{path}.scheduling",
        default_config=SchedulingConfig(policy="gang", priority_class_name=pcn),
        input=WorkloadInput.at_standard_paths(
            composite_policy=sched.scheduling_policy,
            composite_constraints=sched.scheduling_constraints,
            composite_disruption_mode=sched.disruption_mode,
        ),
        callbacks=[min_count_default(child_instances)],
        children=children,
    )


def _check_spec(spec: GenericSpec) -> list[FieldError]:
    errors: list[FieldError] = []
    if bool(spec.pod_sets) == bool(spec.groups):
        errors.append(
            FieldError(
                path="spec",
                type="Invalid value",
                detail="exactly one of podSets or groups must be set at the top level "
                "(put pod sets and groups side by side inside a group)",
            )
        )

    seen: dict[str, str] = {}

    def check_name(name: str, path: str) -> None:
        for msg in is_dns1123_label(name):
            errors.append(_bad(f"{path}.name", name, msg))
        if name in seen:
            errors.append(
                FieldError(
                    path=f"{path}.name",
                    type="Duplicate value",
                    detail=f"template names must be unique across the workload ({seen[name]})",
                    value=name,
                    has_value=True,
                )
            )
        seen.setdefault(name, f"{path}.name")

    total = [0]  # objects the plan would make (PodGroups and CompositePodGroups)

    def in_range(value: int, path: str) -> bool:
        if INT32_MIN <= value <= INT32_MAX:
            return True
        errors.append(_bad(path, value, "expected a 32-bit integer"))
        return False

    def walk(
        sets: Iterable[GenericPodSet], groups: Iterable[GenericGroup], path: str, mult: int = 1
    ) -> None:
        for i, ps in enumerate(sets):
            p = f"{path}.podSets[{i}]"
            check_name(ps.name, p)
            if not (in_range(ps.count, f"{p}.count") and in_range(ps.replicas, f"{p}.replicas")):
                continue
            total[0] += mult * max(0, ps.replicas)
            if ps.count < 1:
                errors.append(_bad(f"{p}.count", ps.count, "must be greater than or equal to 1"))
            if ps.replicas < 0:
                errors.append(
                    _bad(f"{p}.replicas", ps.replicas, "must be greater than or equal to 0")
                )
            policy = ps.scheduling.scheduling_policy if ps.scheduling else None
            mc = policy.gang.min_count if policy is not None and policy.gang is not None else None
            if mc is not None and mc > ps.count:
                errors.append(
                    _bad(
                        f"{p}.scheduling.schedulingPolicy.gang.minCount",
                        mc,
                        f"must be less than or equal to count ({ps.count})",
                    )
                )
        for i, g in enumerate(groups):
            p = f"{path}.groups[{i}]"
            check_name(g.name, p)
            if not in_range(g.replicas, f"{p}.replicas"):
                continue
            total[0] += mult * max(0, g.replicas)
            if g.replicas < 0:
                errors.append(
                    _bad(f"{p}.replicas", g.replicas, "must be greater than or equal to 0")
                )
            if not g.pod_sets and not g.groups:
                errors.append(
                    FieldError(
                        path=p, type="Required value", detail="a group needs podSets or groups"
                    )
                )
            if total[0] <= MAX_PLANNED_OBJECTS:  # deeper levels multiply: stop early
                walk(g.pod_sets, g.groups, p, mult * max(0, g.replicas))

    walk(spec.pod_sets, spec.groups, "spec")
    if total[0] > MAX_PLANNED_OBJECTS:
        errors.append(
            _bad(
                "spec",
                total[0],
                f"would create at least {total[0]} PodGroups and CompositePodGroups; at most "
                f"{MAX_PLANNED_OBJECTS} are planned by workloadbuilder",
            )
        )
    return errors


def _bad(path: str, value: Any, detail: str) -> FieldError:
    return FieldError(path=path, type="Invalid value", detail=detail, value=value, has_value=True)


def plan_generic(spec: GenericSpec) -> Plan:
    """Compile a :class:`GenericSpec` into the Workload, CompositePodGroups and PodGroups.

    Raises :class:`~workloadbuilder.errors.ValidationError` with paths into the spec.
    """
    errors = _check_spec(spec)
    if errors:
        raise ValidationError(errors)
    pcn = spec.priority_class_name or None
    roots = [_pod_set_item(ps, f"spec.podSets[{i}]", pcn) for i, ps in enumerate(spec.pod_sets)]
    roots += [_group_item(g, f"spec.groups[{i}]", pcn) for i, g in enumerate(spec.groups)]
    wl_name = spec.workload_name or spec.name
    owner = (
        None
        if spec.owner is None
        else Owner(
            api_version=spec.owner.api_version,
            kind=spec.owner.kind,
            name=spec.owner.name,
            uid=spec.owner.uid or None,
        )
    )
    workload, materializer = build_workload(
        roots, name=wl_name, namespace=spec.namespace, owner=owner
    )
    pod_groups: list[PodGroup] = []
    cpgs: list[CompositePodGroup] = []
    names: dict[str, str] = {}
    name_errors: list[FieldError] = []

    def instances(
        sets: Sequence[GenericPodSet],
        groups: Sequence[GenericGroup],
        prefix: str,
        key_prefix: str,
        parent: str | None,
    ) -> None:
        for g in groups:
            for i in range(g.replicas):
                name, key = f"{prefix}-{g.name}-{i}", f"{key_prefix}{g.name}-{i}"
                _check_len(name, key, name_errors)
                cpg = materializer.new_composite_pod_group(name, g.name)
                cpgs.append(_under(cpg, owner, parent))
                instances(g.pod_sets, g.groups, name, f"{key}/", name)
        for ps in sets:
            for i in range(ps.replicas):
                name, key = f"{prefix}-{ps.name}-{i}", f"{key_prefix}{ps.name}-{i}"
                _check_len(name, key, name_errors)
                pg = materializer.new_pod_group(name, ps.name)
                pod_groups.append(_under(pg, owner, parent))
                names[key] = name

    instances(spec.pod_sets, spec.groups, wl_name, "", None)
    if name_errors:
        raise ValidationError(name_errors)
    return make_plan(workload, pod_groups, cpgs, names, annotated_pod_set_key(wl_name))


def _under(obj: _Instance, owner: Owner | None, parent: str | None) -> _Instance:
    """A materialised instance without unsendable ownerReferences, under ``parent``."""
    obj = strip_owner(obj, owner, keep_controller_ref=False)
    if parent is None:
        return obj
    return attrs.evolve(obj, spec=attrs.evolve(obj.spec, parent_composite_pod_group_name=parent))


def _check_len(name: str, key: str, errors: list[FieldError]) -> None:
    if len(name) > _MAX_NAME:
        errors.append(
            _bad(
                "spec",
                key,
                f"the object name for {key!r} would be {len(name)} characters; at most "
                f"{_MAX_NAME} are allowed (use shorter names)",
            )
        )


def plan_generic_dict(doc: Mapping[str, Any]) -> Plan:
    """Parse a ``GenericWorkload`` document and compile it (see :func:`plan_generic`)."""
    if doc.get("apiVersion") not in (None, GENERIC_API_VERSION) or doc.get("kind") not in (
        None,
        GENERIC_KIND,
    ):
        raise BuildError(f"expected apiVersion {GENERIC_API_VERSION}, kind {GENERIC_KIND}")
    return plan_generic(GenericSpec.from_dict(doc))
