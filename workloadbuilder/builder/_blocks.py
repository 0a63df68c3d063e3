"""Declarative validation of the v1alpha3 building blocks at the controller's field path.

A rendering of the generated ``Validate_WorkloadPodGroup*`` and
``Validate_WorkloadCompositePodGroup*`` functions of ``k8s.io/api/scheduling/v1alpha3``
(v0.37.2), including their update ratcheting: on update, data equal to the old value is not
re-validated, and a union whose membership did not change is not re-checked.
"""

from __future__ import annotations

from collections.abc import Sequence

from workloadbuilder.api import (
    TopologyConstraint,
    WorkloadCompositePodGroupDisruptionMode,
    WorkloadCompositePodGroupSchedulingConstraints,
    WorkloadCompositePodGroupSchedulingPolicy,
    WorkloadPodGroupDisruptionMode,
    WorkloadPodGroupResourceClaim,
    WorkloadPodGroupSchedulingConstraints,
    WorkloadPodGroupSchedulingPolicy,
)
from workloadbuilder.builder._formats import (
    dns1123_label_errors,
    dns1123_subdomain_errors,
    label_key_errors,
)
from workloadbuilder.errors import FieldError

__all__ = [
    "validate_composite_constraints",
    "validate_composite_policy",
    "validate_disruption_mode",
    "validate_policy",
    "validate_resource_claim",
    "validate_topology",
]


def _invalid(path: str, value: object, detail: str) -> FieldError:
    return FieldError(path=path, type="Invalid value", detail=detail, value=value, has_value=True)


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _union(
    path: str,
    members: Sequence[tuple[str, bool, bool]],
    *,
    update: bool,
    has_old: bool,
) -> list[FieldError]:
    """``validate.Union``: members are (json name, set now, set before)."""
    if update and has_old and all(new == old for _, new, old in members):
        return []
    names = [f"`{name}`" for name, _, _ in members]
    specified = [name for name, new, _ in members if new]
    if len(specified) > 1:
        return [
            _invalid(
                path,
                "{" + ", ".join(specified) + "}",
                f"must specify exactly one of: {', '.join(names)}",
            )
        ]
    if not specified:
        return [_invalid(path, "", f"must specify one of: {', '.join(names)}")]
    return []


def _minimum(
    path: str, value: int | None, old: int | None, *, update: bool, correlated: bool
) -> list[FieldError]:
    if value is None or (update and correlated and value == old):
        return []
    if value < 1:
        return [_invalid(path, value, "must be greater than or equal to 1")]
    return []


def validate_policy(
    path: str,
    new: WorkloadPodGroupSchedulingPolicy,
    old: WorkloadPodGroupSchedulingPolicy | None,
    *,
    update: bool,
) -> list[FieldError]:
    """``Validate_WorkloadPodGroupSchedulingPolicy``."""
    errs = _union(
        path,
        [
            ("basic", new.basic is not None, old is not None and old.basic is not None),
            ("gang", new.gang is not None, old is not None and old.gang is not None),
        ],
        update=update,
        has_old=old is not None,
    )
    if new.gang is not None:
        old_gang = old.gang if old is not None else None
        if not (update and old is not None and new.gang == old_gang):
            errs += _minimum(
                _child(_child(path, "gang"), "minCount"),
                new.gang.min_count,
                old_gang.min_count if old_gang is not None else None,
                update=update,
                correlated=old_gang is not None,
            )
    return errs


def validate_composite_policy(
    path: str,
    new: WorkloadCompositePodGroupSchedulingPolicy,
    old: WorkloadCompositePodGroupSchedulingPolicy | None,
    *,
    update: bool,
) -> list[FieldError]:
    """``Validate_WorkloadCompositePodGroupSchedulingPolicy``."""
    errs = _union(
        path,
        [
            ("basic", new.basic is not None, old is not None and old.basic is not None),
            ("gang", new.gang is not None, old is not None and old.gang is not None),
        ],
        update=update,
        has_old=old is not None,
    )
    if new.gang is not None:
        old_gang = old.gang if old is not None else None
        if not (update and old is not None and new.gang == old_gang):
            errs += _minimum(
                _child(_child(path, "gang"), "minGroupCount"),
                new.gang.min_group_count,
                old_gang.min_group_count if old_gang is not None else None,
                update=update,
                correlated=old_gang is not None,
            )
    return errs


def validate_topology(
    path: str,
    new: Sequence[TopologyConstraint],
    old: Sequence[TopologyConstraint] | None,
    *,
    update: bool,
) -> list[FieldError]:
    """The ``topology`` list of a constraints block (maxItems 1, each key a label key)."""
    if update and old is not None and tuple(new) == tuple(old):
        return []
    if len(new) > 1:
        return [
            FieldError(
                path=path,
                type="Too many",
                detail="must have at most 1 item",
                value=len(new),
                has_value=True,
            )
        ]
    errs: list[FieldError] = []
    for i, constraint in enumerate(new):
        key_path = f"{path}[{i}].key"
        if not constraint.key:
            errs.append(FieldError(path=key_path, type="Required value"))
            continue
        errs += [_invalid(key_path, constraint.key, m) for m in label_key_errors(constraint.key)]
    return errs


def validate_constraints(
    path: str,
    new: WorkloadPodGroupSchedulingConstraints,
    old: WorkloadPodGroupSchedulingConstraints | None,
    *,
    update: bool,
) -> list[FieldError]:
    """``Validate_WorkloadPodGroupSchedulingConstraints``."""
    return validate_topology(
        _child(path, "topology"), new.topology, old.topology if old else None, update=update
    )


def validate_composite_constraints(
    path: str,
    new: WorkloadCompositePodGroupSchedulingConstraints,
    old: WorkloadCompositePodGroupSchedulingConstraints | None,
    *,
    update: bool,
) -> list[FieldError]:
    """``Validate_WorkloadCompositePodGroupSchedulingConstraints``."""
    return validate_topology(
        _child(path, "topology"), new.topology, old.topology if old else None, update=update
    )


def validate_disruption_mode(
    path: str,
    new: WorkloadPodGroupDisruptionMode | WorkloadCompositePodGroupDisruptionMode,
    old: WorkloadPodGroupDisruptionMode | WorkloadCompositePodGroupDisruptionMode | None,
    *,
    update: bool,
) -> list[FieldError]:
    """``Validate_WorkloadPodGroupDisruptionMode`` (the composite block has the same rules)."""
    return _union(
        path,
        [
            ("single", new.single is not None, old is not None and old.single is not None),
            ("all", new.all is not None, old is not None and old.all is not None),
        ],
        update=update,
        has_old=old is not None,
    )


def validate_resource_claim(
    path: str,
    new: WorkloadPodGroupResourceClaim,
    old: WorkloadPodGroupResourceClaim | None,
    *,
    update: bool,
) -> list[FieldError]:
    """``Validate_WorkloadPodGroupResourceClaim`` (``old`` correlated by claim name)."""
    has_old = old is not None
    errs = _union(
        path,
        [
            (
                "resourceClaimName",
                new.resource_claim_name is not None,
                old is not None and old.resource_claim_name is not None,
            ),
            (
                "resourceClaimTemplateName",
                new.resource_claim_template_name is not None,
                old is not None and old.resource_claim_template_name is not None,
            ),
        ],
        update=update,
        has_old=has_old,
    )
    if not (update and old is not None and new.name == old.name):
        name_path = _child(path, "name")
        if not new.name:
            errs.append(FieldError(path=name_path, type="Required value"))
        else:
            errs += [_invalid(name_path, new.name, m) for m in dns1123_label_errors(new.name)]
    for json_name, value, old_value in (
        (
            "resourceClaimName",
            new.resource_claim_name,
            old.resource_claim_name if old else None,
        ),
        (
            "resourceClaimTemplateName",
            new.resource_claim_template_name,
            old.resource_claim_template_name if old else None,
        ),
    ):
        if value is None or (update and has_old and value == old_value):
            continue
        field_path = _child(path, json_name)
        errs += [_invalid(field_path, value, m) for m in dns1123_subdomain_errors(value)]
    return errs
