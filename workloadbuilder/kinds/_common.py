"""Input helpers and the Workload compilation shared by the generic, JobSet and LWS adapters."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import attrs

from workloadbuilder.api import (
    CodecError,
    CompositePodGroup,
    OwnerReference,
    PodGroup,
    Workload,
    WorkloadPodGroupDisruptionMode,
    WorkloadPodGroupResourceClaim,
    WorkloadPodGroupSchedulingConstraints,
    WorkloadPodGroupSchedulingPolicy,
    from_dict,
)
from workloadbuilder.builder import (
    ALL_DISRUPTION_MODES,
    ALL_POLICIES,
    Builder,
    BuildOptions,
    Plan,
    PodSetKeyFunc,
    SchedulingConfig,
    WorkloadInput,
    WorkloadItem,
    check_planned,
    pod_group_min_count_patch,
    workload_min_count_patch,
)
from workloadbuilder.errors import FieldError, ValidationError

__all__ = [
    "INT32_MAX",
    "INT32_MIN",
    "MAX_PLANNED_OBJECTS",
    "LeafSpec",
    "Owner",
    "as_int",
    "as_list",
    "as_map",
    "build_workload",
    "check_object_count",
    "compile_leaves",
    "leaf_item",
    "make_plan",
    "min_count_default",
    "namespace_of",
    "parse_block",
    "parse_claims",
    "parse_pod_group_blocks",
    "strip_owner",
]

T = TypeVar("T")
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
_Obj = TypeVar("_Obj", Workload, PodGroup, CompositePodGroup)


def _not_a(path: str, expected: str, value: Any) -> ValidationError:
    return ValidationError(
        [
            FieldError(
                path=path, type="Invalid value", detail=f"expected {expected}, got {_jtype(value)}"
            )
        ]
    )


def as_map(value: Any, path: str) -> Mapping[str, Any]:
    """``value`` as an object (``None`` -> ``{}``); raises ValidationError at ``path``."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _not_a(path, "an object", value)
    return value


def as_list(value: Any, path: str) -> list[Any]:
    """``value`` as a list (``None`` -> ``[]``); raises ValidationError at ``path``."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise _not_a(path, "a list", value)
    return value


def namespace_of(meta: Mapping[str, Any]) -> str:
    """``metadata.namespace`` of a source object (missing or empty: ``default``); anything
    but a string raises ValidationError at ``metadata.namespace``."""
    namespace = meta.get("namespace")
    if namespace is None or namespace == "":
        return "default"
    if not isinstance(namespace, str):
        raise _not_a("metadata.namespace", "a string", namespace)
    return namespace


def as_int(value: Any, path: str, *, default: int, minimum: int | None = None) -> int:
    """``value`` as an ``int32`` (``None`` -> ``default``), as the API server decodes a count
    of the source object: not an integer, outside the 32-bit range (``expected a 32-bit
    integer``) or below ``minimum`` raises ValidationError at ``path``."""
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
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValidationError(
            [
                FieldError(
                    path=path,
                    type="Invalid value",
                    detail="expected a 32-bit integer",
                    value=value,
                    has_value=True,
                )
            ]
        )
    if minimum is not None and value < minimum:
        raise ValidationError(
            [
                FieldError(
                    path=path,
                    type="Invalid value",
                    detail=f"must be greater than or equal to {minimum}",
                    value=value,
                    has_value=True,
                )
            ]
        )
    return value


#: The most runtime groups (PodGroups or child Jobs) one plan materialises; a source object
#: asking for more is refused instead of exhausting memory and time.
MAX_PLANNED_OBJECTS = 10_000


def check_object_count(count: int, path: str, what: str = "PodGroups") -> None:
    """Refuse (ValidationError at ``path``) a source object that would make more than
    :data:`MAX_PLANNED_OBJECTS` objects."""
    if count > MAX_PLANNED_OBJECTS:
        raise ValidationError(
            [
                FieldError(
                    path=path,
                    type="Invalid value",
                    value=count,
                    has_value=True,
                    detail=f"would create {count} {what}; at most {MAX_PLANNED_OBJECTS} "
                    "are planned by workloadbuilder",
                )
            ]
        )


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


def parse_block(value: Any, path: str, cls: type[T]) -> T | None:
    """Parse a JSON block into ``cls``; errors become a ValidationError at ``path``."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise _not_a(path, "an object", value)
    try:
        return from_dict(value, cls)
    except CodecError as e:
        full = f"{path}.{e.path}" if e.path and not e.path.startswith("[") else f"{path}{e.path}"
        kind = "Required value" if e.detail == "Required value" else "Invalid value"
        detail = "" if kind == "Required value" else e.detail
        raise ValidationError([FieldError(path=full, type=kind, detail=detail)]) from None


def parse_claims(value: Any, path: str) -> tuple[WorkloadPodGroupResourceClaim, ...]:
    """A ``resourceClaims`` list of ``WorkloadPodGroupResourceClaim`` blocks."""
    out = []
    for i, raw in enumerate(as_list(value, path)):
        claim = parse_block(raw, f"{path}[{i}]", WorkloadPodGroupResourceClaim)
        if claim is not None:
            out.append(claim)
    return tuple(out)


def parse_pod_group_blocks(
    data: Mapping[str, Any], path: str
) -> tuple[
    WorkloadPodGroupSchedulingPolicy | None,
    WorkloadPodGroupSchedulingConstraints | None,
    WorkloadPodGroupDisruptionMode | None,
    tuple[WorkloadPodGroupResourceClaim, ...],
]:
    """The four ``WorkloadPodGroup*`` blocks of a ``scheduling`` object at ``path``:
    ``schedulingPolicy``, ``schedulingConstraints``, ``disruptionMode``, ``resourceClaims``."""
    return (
        parse_block(
            data.get("schedulingPolicy"),
            f"{path}.schedulingPolicy",
            WorkloadPodGroupSchedulingPolicy,
        ),
        parse_block(
            data.get("schedulingConstraints"),
            f"{path}.schedulingConstraints",
            WorkloadPodGroupSchedulingConstraints,
        ),
        parse_block(
            data.get("disruptionMode"), f"{path}.disruptionMode", WorkloadPodGroupDisruptionMode
        ),
        parse_claims(data.get("resourceClaims"), f"{path}.resourceClaims"),
    )


# ---------------------------------------------------------------------------------------------
# Compiling flat leaves (JobSet, LWS) into one Workload


@attrs.frozen(kw_only=True)
class LeafSpec:
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
class Owner:
    """The source object that owns the planned objects (``uid`` is None before it exists)."""

    api_version: str
    kind: str
    name: str
    uid: str | None

    def reference(self) -> OwnerReference:
        """The controller ownerReference to this owner (empty UID when unknown)."""
        return OwnerReference(
            api_version=self.api_version,
            kind=self.kind,
            name=self.name,
            uid=self.uid or "",
            controller=True,
            block_owner_deletion=True,
        )


def min_count_default(default: int) -> Callable[[SchedulingConfig], SchedulingConfig]:
    """A builder callback that gives a gang without ``minCount`` the minCount ``default``."""

    def callback(cfg: SchedulingConfig) -> SchedulingConfig:
        if cfg.policy == "gang" and cfg.min_count is None:
            return attrs.evolve(cfg, min_count=default)
        return cfg

    return callback


def leaf_item(leaf: LeafSpec) -> WorkloadItem:
    """The builder item of one leaf: its blocks at the standard paths, the controller defaults."""
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
        callbacks=[min_count_default(leaf.default_min_count)],
    )


def _options(name: str, namespace: str, owner: Owner | None) -> BuildOptions:
    return BuildOptions(
        name=name,
        namespace=namespace,
        owner=owner.reference() if owner is not None else None,
        allowed_policies=ALL_POLICIES,
        allowed_disruption_modes=ALL_DISRUPTION_MODES,
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


def strip_owner(obj: _Obj, owner: Owner | None, *, keep_controller_ref: bool) -> _Obj:
    """Drop ownerReferences that cannot be sent (no owner, or an owner without a UID); without
    an owner at all the Workload's ``controllerRef`` goes too."""
    if owner is not None and owner.uid:
        return obj
    obj = attrs.evolve(obj, metadata=attrs.evolve(obj.metadata, owner_references=()))
    if isinstance(obj, Workload) and not keep_controller_ref:
        return attrs.evolve(obj, spec=attrs.evolve(obj.spec, controller_ref=None))
    return obj


def build_workload(
    roots: Sequence[WorkloadItem], *, name: str, namespace: str, owner: Owner | None
) -> tuple[Workload, Builder]:
    """Validate and build the Workload ``name`` from ``roots`` (raises ValidationError), and a
    Builder over it that materialises its PodGroups and CompositePodGroups. Without an
    ``owner`` the objects are unowned (and the Workload has no ``controllerRef``)."""
    build_owner = owner or Owner(api_version="v1", kind="None", name=name, uid=None)
    opts = _options(name, namespace, build_owner)
    workload, errors = _build_merged(roots, opts)
    if errors:
        raise ValidationError(errors)
    workload = strip_owner(workload, owner, keep_controller_ref=owner is not None)
    return workload, Builder.from_existing_workload(workload, opts)


def compile_leaves(
    *,
    workload_name: str,
    namespace: str,
    owner: Owner | None,
    leaves: Sequence[LeafSpec],
    pod_groups: Sequence[tuple[str, str]],
    pod_group_names: Mapping[str, str],
    pod_key: PodSetKeyFunc,
    labels: Callable[[str], Mapping[str, str]] | None = None,
) -> Plan:
    """Build a flat Workload from ``leaves`` and materialise ``pod_groups`` ((name, template))."""
    workload, materializer = build_workload(
        [leaf_item(leaf) for leaf in leaves], name=workload_name, namespace=namespace, owner=owner
    )
    groups: list[PodGroup] = []
    for pg_name, template in pod_groups:
        pg = materializer.new_pod_group(pg_name, template)
        pg = strip_owner(pg, owner, keep_controller_ref=False)
        if labels is not None:
            extra = dict(labels(pg_name))
            if extra:
                pg = attrs.evolve(
                    pg, metadata=attrs.evolve(pg.metadata, labels={**pg.metadata.labels, **extra})
                )
        groups.append(pg)
    return make_plan(workload, groups, [], dict(pod_group_names), pod_key)


def make_plan(
    workload: Workload,
    pod_groups: Sequence[PodGroup],
    composite_pod_groups: Sequence[CompositePodGroup],
    pod_group_names: dict[str, str],
    pod_key: PodSetKeyFunc,
) -> Plan:
    """A :class:`Plan` of the given objects, with their minCount patches, after checking that
    each passes API validation (raises ValidationError)."""
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
    check_planned(obj)
