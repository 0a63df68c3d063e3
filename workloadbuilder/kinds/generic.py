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

The module also holds the small input helpers shared by the JobSet and LWS adapters.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import attrs

from workloadbuilder.api import (
    CodecError,
    CompositePodGroup,
    OwnerReference,
    PodGroup,
    Workload,
    WorkloadCompositePodGroupDisruptionMode,
    WorkloadCompositePodGroupSchedulingConstraints,
    WorkloadCompositePodGroupSchedulingPolicy,
    WorkloadPodGroupDisruptionMode,
    WorkloadPodGroupResourceClaim,
    WorkloadPodGroupSchedulingConstraints,
    WorkloadPodGroupSchedulingPolicy,
    from_dict,
)
from workloadbuilder.builder import (
    Builder,
    BuildOptions,
    SchedulingConfig,
    WorkloadInput,
    WorkloadItem,
)
from workloadbuilder.errors import BuildError, FieldError, ValidationError
from workloadbuilder.kinds._plan import (
    Plan,
    PodSetKeyFunc,
    pod_group_min_count_patch,
    workload_min_count_patch,
)
from workloadbuilder.validation import is_dns1123_label, validate_object

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
#: Pod annotation naming the pod-set key (``slices-0/slice-1``) of the pod's PodGroup.
POD_SET_ANNOTATION = "workloadbuilder.io/pod-set"
#: Optional pod annotation naming the Workload; when present it must match.
WORKLOAD_ANNOTATION = "workloadbuilder.io/workload"

_MAX_NAME = 253
T = TypeVar("T")
_Obj = TypeVar("_Obj", Workload, PodGroup, CompositePodGroup)


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
        meta = _as_map(doc.get("metadata"), "metadata")
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise ValidationError([FieldError(path="metadata.name", type="Required value")])
        namespace = meta.get("namespace") or "default"
        spec = _as_map(doc.get("spec"), "spec")
        body = _parse_block(spec, "spec", _SpecBody)
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
# Shared input helpers (also used by the JobSet and LWS adapters)


def _as_map(value: Any, path: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError(
            [
                FieldError(
                    path=path,
                    type="Invalid value",
                    detail=f"expected an object, got {_jtype(value)}",
                )
            ]
        )
    return value


def _as_list(value: Any, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValidationError(
            [
                FieldError(
                    path=path, type="Invalid value", detail=f"expected a list, got {_jtype(value)}"
                )
            ]
        )
    return value


def _as_int(value: Any, path: str, *, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(
            [
                FieldError(
                    path=path,
                    type="Invalid value",
                    detail="expected an integer",
                    value=value,
                    has_value=True,
                )
            ]
        )
    return value


def _jtype(value: Any) -> str:
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


def _parse_block(value: Any, path: str, cls: type[T]) -> T | None:
    """Parse a JSON block into ``cls``; errors become a ValidationError at ``path``."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ValidationError(
            [
                FieldError(
                    path=path,
                    type="Invalid value",
                    detail=f"expected an object, got {_jtype(value)}",
                )
            ]
        )
    try:
        return from_dict(value, cls)
    except CodecError as e:
        full = f"{path}.{e.path}" if e.path and not e.path.startswith("[") else f"{path}{e.path}"
        kind = "Required value" if e.detail == "Required value" else "Invalid value"
        detail = "" if kind == "Required value" else e.detail
        raise ValidationError([FieldError(path=full, type=kind, detail=detail)]) from None


def _parse_claims(value: Any, path: str) -> tuple[WorkloadPodGroupResourceClaim, ...]:
    out = []
    for i, raw in enumerate(_as_list(value, path)):
        claim = _parse_block(raw, f"{path}[{i}]", WorkloadPodGroupResourceClaim)
        if claim is not None:
            out.append(claim)
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# Compiling flat leaves (JobSet, LWS) into one Workload


@attrs.frozen(kw_only=True)
class _LeafSpec:
    """One PodGroupTemplate to compile: the user's blocks plus the controller defaults."""

    name: str
    path: str
    policy: WorkloadPodGroupSchedulingPolicy | None = None
    constraints: WorkloadPodGroupSchedulingConstraints | None = None
    disruption: WorkloadPodGroupDisruptionMode | None = None
    claims: tuple[WorkloadPodGroupResourceClaim, ...] = ()
    priority_class_name: str | None = None
    default_min_count: int = 1
    default_gang: bool = True


@attrs.frozen(kw_only=True)
class _Owner:
    api_version: str
    kind: str
    name: str
    uid: str | None

    def reference(self) -> OwnerReference:
        return OwnerReference(
            api_version=self.api_version,
            kind=self.kind,
            name=self.name,
            uid=self.uid or "",
            controller=True,
            block_owner_deletion=True,
        )


_ALL_POLICIES = frozenset({"basic", "gang"})
_ALL_MODES = frozenset({"single", "all"})


def _min_count_default(default: int) -> Callable[[SchedulingConfig], SchedulingConfig]:
    def callback(cfg: SchedulingConfig) -> SchedulingConfig:
        if cfg.policy == "gang" and cfg.min_count is None:
            return attrs.evolve(cfg, min_count=default)
        return cfg

    return callback


def _leaf_item(leaf: _LeafSpec) -> WorkloadItem:
    return WorkloadItem(
        name=leaf.name,
        path=leaf.path,
        default_config=SchedulingConfig(
            policy="gang" if leaf.default_gang else "basic",
            priority_class_name=leaf.priority_class_name,
        ),
        input=WorkloadInput.at_standard_paths(
            policy=leaf.policy,
            constraints=leaf.constraints,
            disruption_mode=leaf.disruption,
            resource_claims=leaf.claims,
        ),
        callbacks=[_min_count_default(leaf.default_min_count)],
    )


def _options(name: str, namespace: str, owner: _Owner | None) -> BuildOptions:
    return BuildOptions(
        name=name,
        namespace=namespace,
        owner=owner.reference() if owner is not None else None,
        allowed_policies=_ALL_POLICIES,
        allowed_disruption_modes=_ALL_MODES,
    )


def _build_merged(
    roots: Sequence[WorkloadItem], opts: BuildOptions
) -> tuple[Workload, list[FieldError]]:
    """Validate and build one Workload per root item and merge their templates (the upstream
    builder compiles single-root trees; JobSet merges its per-item Workloads the same way)."""
    errors: list[FieldError] = []
    built: list[Workload] = []
    for root in roots:
        builder = Builder(root, opts)
        errs = builder.validate()
        if errs:
            errors.extend(errs)
            continue
        built.append(builder.build_workload())
    if errors:
        return Workload(), errors
    base = built[0]
    spec = attrs.evolve(
        base.spec,
        pod_group_templates=tuple(t for w in built for t in w.spec.pod_group_templates),
        composite_pod_group_templates=tuple(
            t for w in built for t in w.spec.composite_pod_group_templates
        ),
    )
    return attrs.evolve(base, spec=spec), []


def _strip_owner(obj: _Obj, owner: _Owner | None, *, keep_controller_ref: bool) -> _Obj:
    """Drop ownerReferences that cannot be sent (no owner, or an owner without a UID); without
    an owner at all the Workload's ``controllerRef`` goes too."""
    if owner is not None and owner.uid:
        return obj
    obj = attrs.evolve(obj, metadata=attrs.evolve(obj.metadata, owner_references=()))
    if isinstance(obj, Workload) and not keep_controller_ref:
        return attrs.evolve(obj, spec=attrs.evolve(obj.spec, controller_ref=None))
    return obj


def _compile_leaves(
    *,
    workload_name: str,
    namespace: str,
    owner: _Owner | None,
    leaves: Sequence[_LeafSpec],
    pod_groups: Sequence[tuple[str, str]],
    pod_group_names: Mapping[str, str],
    pod_key: PodSetKeyFunc,
    labels: Callable[[str], Mapping[str, str]] | None = None,
) -> Plan:
    """Build a flat Workload from ``leaves`` and materialise ``pod_groups`` ((name, template))."""
    build_owner = owner or _Owner(api_version="v1", kind="None", name=workload_name, uid=None)
    opts = _options(workload_name, namespace, build_owner)
    workload, errors = _build_merged([_leaf_item(leaf) for leaf in leaves], opts)
    if errors:
        raise ValidationError(errors)
    workload = _strip_owner(workload, owner, keep_controller_ref=owner is not None)
    materializer = Builder.from_existing_workload(workload, opts)
    groups: list[PodGroup] = []
    for pg_name, template in pod_groups:
        pg = materializer.new_pod_group(pg_name, template)
        pg = _strip_owner(pg, owner, keep_controller_ref=False)
        if labels is not None:
            extra = dict(labels(pg_name))
            if extra:
                pg = attrs.evolve(
                    pg, metadata=attrs.evolve(pg.metadata, labels={**pg.metadata.labels, **extra})
                )
        groups.append(pg)
    return _make_plan(workload, groups, [], dict(pod_group_names), pod_key)


def _make_plan(
    workload: Workload,
    pod_groups: Sequence[PodGroup],
    composite_pod_groups: Sequence[CompositePodGroup],
    pod_group_names: dict[str, str],
    pod_key: PodSetKeyFunc,
) -> Plan:
    _check_object(workload)
    for cpg in composite_pod_groups:
        _check_object(cpg)
    for pg in pod_groups:
        _check_object(pg)
    patches: dict[str, dict[str, Any]] = {}
    for pg in pod_groups:
        body = pod_group_min_count_patch(pg)
        if body is not None and pg.metadata.name:
            patches[pg.metadata.name] = body
    return Plan(
        workload=workload,
        pod_groups=tuple(pod_groups),
        composite_pod_groups=tuple(composite_pod_groups),
        pod_group_names=pod_group_names,
        min_count_patch=workload_min_count_patch(workload),
        pod_group_patches=patches,
        pod_set_key=pod_key,
    )


def _check_object(obj: Workload | PodGroup | CompositePodGroup) -> None:
    """Safety net: the planned object must pass the API server's validation (all gates on).

    The adapters check their own input with paths into it; this catches what only shows on
    the compiled object (e.g. a hierarchy deeper than the Workload allows)."""
    errors = validate_object(obj)
    if errors:
        short = [attrs.evolve(e, value=None, has_value=False) for e in errors]
        raise ValidationError(short, subject=f"the planned {obj.kind} {obj.metadata.name}")


# ---------------------------------------------------------------------------------------------
# GenericWorkload


def _pod_set_item(ps: GenericPodSet, path: str, pcn: str | None) -> WorkloadItem:
    sched = ps.scheduling or GenericPodSetScheduling()
    return WorkloadItem(
        name=ps.name,
        path=f"{path}.scheduling",
        default_config=SchedulingConfig(policy="gang", priority_class_name=pcn),
        input=WorkloadInput.at_standard_paths(
            policy=sched.scheduling_policy,
            constraints=sched.scheduling_constraints,
            disruption_mode=sched.disruption_mode,
            resource_claims=sched.resource_claims,
        ),
        callbacks=[_min_count_default(ps.count)],
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
        callbacks=[_min_count_default(child_instances)],
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

    def walk(sets: Iterable[GenericPodSet], groups: Iterable[GenericGroup], path: str) -> None:
        for i, ps in enumerate(sets):
            p = f"{path}.podSets[{i}]"
            check_name(ps.name, p)
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
            walk(g.pod_sets, g.groups, p)

    walk(spec.pod_sets, spec.groups, "spec")
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
        else _Owner(
            api_version=spec.owner.api_version,
            kind=spec.owner.kind,
            name=spec.owner.name,
            uid=spec.owner.uid or None,
        )
    )
    build_owner = owner or _Owner(api_version="v1", kind="None", name=wl_name, uid=None)
    opts = _options(wl_name, spec.namespace, build_owner)
    workload, errors = _build_merged(roots, opts)
    if errors:
        raise ValidationError(errors)
    workload = _strip_owner(workload, owner, keep_controller_ref=owner is not None)
    materializer = Builder.from_existing_workload(workload, opts)
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
                name = f"{prefix}-{g.name}-{i}"
                key = f"{key_prefix}{g.name}-{i}"
                _check_len(name, key, name_errors)
                cpg = materializer.new_composite_pod_group(name, g.name)
                cpg = _strip_owner(cpg, owner, keep_controller_ref=False)
                if parent is not None:
                    cpg = attrs.evolve(
                        cpg, spec=attrs.evolve(cpg.spec, parent_composite_pod_group_name=parent)
                    )
                cpgs.append(cpg)
                instances(g.pod_sets, g.groups, name, f"{key}/", name)
        for ps in sets:
            for i in range(ps.replicas):
                name = f"{prefix}-{ps.name}-{i}"
                key = f"{key_prefix}{ps.name}-{i}"
                _check_len(name, key, name_errors)
                pg = materializer.new_pod_group(name, ps.name)
                pg = _strip_owner(pg, owner, keep_controller_ref=False)
                if parent is not None:
                    pg = attrs.evolve(
                        pg, spec=attrs.evolve(pg.spec, parent_composite_pod_group_name=parent)
                    )
                pod_groups.append(pg)
                names[key] = name

    instances(spec.pod_sets, spec.groups, wl_name, "", None)
    if name_errors:
        raise ValidationError(name_errors)
    return _make_plan(workload, pod_groups, cpgs, names, _generic_pod_key(wl_name))


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


def _generic_pod_key(workload: str) -> PodSetKeyFunc:
    def key(pod: Mapping[str, Any]) -> str | None:
        meta = pod.get("metadata")
        ann = meta.get("annotations") if isinstance(meta, Mapping) else None
        if not isinstance(ann, Mapping):
            return None
        owner = ann.get(WORKLOAD_ANNOTATION)
        if owner is not None and owner != workload:
            return None
        value = ann.get(POD_SET_ANNOTATION)
        return value if isinstance(value, str) else None

    return key


def plan_generic_dict(doc: Mapping[str, Any]) -> Plan:
    """Parse a ``GenericWorkload`` document and compile it (see :func:`plan_generic`)."""
    if doc.get("apiVersion") not in (None, GENERIC_API_VERSION) or doc.get("kind") not in (
        None,
        GENERIC_KIND,
    ):
        raise BuildError(f"expected apiVersion {GENERIC_API_VERSION}, kind {GENERIC_KIND}")
    return plan_generic(GenericSpec.from_dict(doc))
