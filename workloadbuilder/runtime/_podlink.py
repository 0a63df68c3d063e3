"""Pod linking for operators that create pods themselves: stamp a pod (or a pod template)
with what the scheduler needs to treat it as a member of its PodGroup."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from workloadbuilder.builder import POD_SET_ANNOTATION, Plan

__all__ = ["link_pod", "link_pod_template"]


def _stamp(spec: dict[str, Any], plan: Plan, pod_set: str, scheduler_name: str | None) -> str:
    pg = plan.pod_group(pod_set)  # KeyError for an unknown pod set
    name = pg.metadata.name or ""
    spec["schedulingGroup"] = {"podGroupName": name}
    if scheduler_name is not None:
        spec["schedulerName"] = scheduler_name
    pcn = pg.spec.priority_class_name
    if pcn:
        spec["priorityClassName"] = pcn
        # the API server computes spec.priority from the class; a stale one is refused
        spec.pop("priority", None)
    return name


def link_pod_template(
    template: Mapping[str, Any],
    plan: Plan,
    pod_set: str,
    *,
    scheduler_name: str | None = None,
    annotate: bool = True,
) -> dict[str, Any]:
    """A copy of the pod template ``template`` (``{metadata, spec}``) whose pods join the
    PodGroup of ``pod_set`` (a key of ``plan.pod_group_names``):
    ``spec.schedulingGroup.podGroupName``, ``spec.schedulerName`` (when given: all pods of
    a hierarchy must use the same scheduler) and the group's ``priorityClassName`` (a pod's
    priority must equal its group's). With ``annotate`` the pod-set annotation
    (``workloadbuilder.io/pod-set``) is set too, so the pod webhook and
    ``plan.pod_group_for(pod)`` find the group from the pod alone. Raises ``KeyError`` for a
    pod set the plan does not have."""
    out = copy.deepcopy(dict(template))
    spec = dict(out.get("spec") or {})
    _stamp(spec, plan, pod_set, scheduler_name)
    out["spec"] = spec
    if annotate:
        meta = dict(out.get("metadata") or {})
        meta["annotations"] = {**dict(meta.get("annotations") or {}), POD_SET_ANNOTATION: pod_set}
        out["metadata"] = meta
    return out


def link_pod(
    pod: Mapping[str, Any],
    plan: Plan,
    pod_set: str,
    *,
    scheduler_name: str | None = None,
    annotate: bool = True,
) -> dict[str, Any]:
    """:func:`link_pod_template` for a whole Pod (``apiVersion``/``kind`` kept); also sets
    the namespace to the plan's when the pod has none."""
    out = link_pod_template(pod, plan, pod_set, scheduler_name=scheduler_name, annotate=annotate)
    meta = dict(out.get("metadata") or {})
    if not meta.get("namespace") and plan.namespace:
        meta["namespace"] = plan.namespace
    out["metadata"] = meta
    return out
