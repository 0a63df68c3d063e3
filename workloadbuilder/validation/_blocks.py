"""Validators of the types that the scheduling objects and ``Job.spec.scheduling`` share.

``PodGroupSchedulingConstraints`` / ``WorkloadPodGroupSchedulingConstraints``,
``DisruptionMode`` / ``WorkloadPodGroupDisruptionMode`` and ``PodGroupResourceClaim`` /
``WorkloadPodGroupResourceClaim`` carry the same ``+k8s:`` tags in v1.37.2, so the generated
validation (and the errors) of each pair is the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from workloadbuilder.errors import FieldError
from workloadbuilder.validation._common import (
    Op,
    attr_name,
    attr_of,
    child,
    each_val,
    immutable,
    label_key,
    long_name,
    max_items,
    member_union,
    minimum,
    name_key,
    required_string,
    short_name,
    unchanged,
    val_slice_unique,
)

__all__ = [
    "MAX_CLAIMS",
    "MAX_TOPOLOGY",
    "disruption_mode",
    "resource_claim",
    "resource_claims",
    "scheduling_constraints",
    "workload_policy",
]

MAX_CLAIMS = 4
MAX_TOPOLOGY = 1


def _topology_constraint(op: Op, path: str, new: Any, old: Any) -> list[FieldError]:
    return required_string(
        op, child(path, "key"), new.key, attr_of(old, "key"), old is not None, label_key
    )


def scheduling_constraints(op: Op, path: str, new: Any, old: Any) -> list[FieldError]:
    """``schedulingConstraints``: ``topology`` (maxItems 1, each with a required label key)."""
    topology_path = child(path, "topology")
    prev = attr_of(old, "topology")
    if unchanged(op, old is not None, tuple(new.topology), tuple(prev or ())):
        return []
    errs = max_items(topology_path, new.topology, MAX_TOPOLOGY)
    if errs or not new.topology:
        return errs
    return each_val(op, topology_path, new.topology, None, None, _topology_constraint)


def workload_policy(
    op: Op, path: str, new: Any, old: Any, *, count: str = "minCount"
) -> list[FieldError]:
    """A ``WorkloadPodGroupSchedulingPolicy`` (``count="minCount"``) or
    ``WorkloadCompositePodGroupSchedulingPolicy`` (``count="minGroupCount"``): the ``basic`` /
    ``gang`` union; the gang's count is optional (unset: the controller's default), else >= 1."""
    errs = member_union(op, path, new, old, ("basic", "gang"))
    prev_gang = attr_of(old, "gang")
    if new.gang is not None and not unchanged(op, old is not None, new.gang, prev_gang):
        attr = attr_name(count)
        value, prev_value = getattr(new.gang, attr), attr_of(prev_gang, attr)
        if value is not None and not unchanged(op, prev_gang is not None, value, prev_value):
            errs += minimum(child(child(path, "gang"), count), value, 1)
    return errs


def disruption_mode(op: Op, path: str, new: Any, old: Any) -> list[FieldError]:
    """``disruptionMode``: the ``single`` / ``all`` union."""
    return member_union(op, path, new, old, ("single", "all"))


def resource_claim(op: Op, path: str, new: Any, old: Any) -> list[FieldError]:
    """One ``resourceClaims`` item: the claim / template union, then the names' formats."""
    errs = member_union(op, path, new, old, ("resourceClaimName", "resourceClaimTemplateName"))
    corr = old is not None
    errs += required_string(
        op, child(path, "name"), new.name, attr_of(old, "name"), corr, short_name
    )
    for attr, json_name in (
        ("resource_claim_name", "resourceClaimName"),
        ("resource_claim_template_name", "resourceClaimTemplateName"),
    ):
        value, prev = getattr(new, attr), attr_of(old, attr)
        if value is None or unchanged(op, corr, value, prev):
            continue
        errs += long_name(child(path, json_name), value)
    return errs


def resource_claims(
    op: Op, path: str, new: Sequence[Any], old: Any, correlated: bool
) -> list[FieldError]:
    """``resourceClaims``: immutable, maxItems 4, ``listType=map`` keyed by ``name``."""
    old_list: Sequence[Any] = old or ()
    if unchanged(op, correlated, tuple(new), tuple(old_list)):
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
    errs += val_slice_unique(path, new, name_key)
    errs += each_val(op, path, new, old_list, name_key, resource_claim)
    return errs
