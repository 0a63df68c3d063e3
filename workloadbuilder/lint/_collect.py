"""Collecting the input: hand-written Workloads and groups, and every kind an integration
plans (its Workload, groups and the pods its controller creates), into levels, runtime groups
and notes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from workloadbuilder.api import (
    CodecError,
    CompositePodGroup,
    PodGroup,
    Workload,
    object_from_dict,
)
from workloadbuilder.errors import WorkloadBuilderError
from workloadbuilder.kinds import (
    JOB_GVK,
    LWS_GVK,
    ChildWorkloads,
    IntegrationRegistry,
    NotManagedError,
    Plan,
    UnknownKindError,
)
from workloadbuilder.lint._model import LintInputError
from workloadbuilder.lint._tree import (
    Instance,
    Level,
    build_instances,
    topology_key,
    workload_levels,
)
from workloadbuilder.resources import pod_requests

__all__ = ["collect_input"]


# -- collecting the input -----------------------------------------------------------------


@attrs.define
class _Input:
    levels: list[Level] = attrs.field(factory=list)
    roots: list[Instance] = attrs.field(factory=list)
    notes: list[str] = attrs.field(factory=list)


def _subject(kind: str, meta: Mapping[str, Any]) -> str:
    ns = meta.get("namespace") or "default"
    return f"{kind} {ns}/{meta.get('name')}"


def _meta(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = doc.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _copies(spec: Mapping[str, Any], n: int) -> list[dict[str, int]]:
    req = dict(pod_requests(spec, strict=False))
    return [req for _ in range(max(0, n))]


def _job_pod_count(spec: Mapping[str, Any]) -> int:
    parallelism = spec.get("parallelism")
    completions = spec.get("completions")
    n = 1 if not isinstance(parallelism, int) else parallelism
    if isinstance(completions, int):
        n = min(n, completions)
    return n


def _planned_pods(
    registry: IntegrationRegistry, doc: Mapping[str, Any], plan: Plan
) -> dict[str, list[dict[str, int]]] | None:
    """PodGroup name -> requests of the pods the kind's controller creates (None: unknown)."""
    integration = registry.for_object(doc)
    out: dict[str, list[dict[str, int]]] = {}
    if isinstance(integration, ChildWorkloads):
        for child in integration.child_workloads(doc):
            spec = child.get("spec") or {}
            tmpl = spec.get("template") or {}
            group = ((tmpl.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
            if isinstance(group, str) and group:
                out.setdefault(group, []).extend(
                    _copies(tmpl.get("spec") or {}, _job_pod_count(spec))
                )
        return out
    if integration.gvk == JOB_GVK:
        spec = doc.get("spec") or {}
        if len(plan.pod_groups) == 1:
            name = plan.pod_groups[0].metadata.name or ""
            out[name] = _copies(
                (spec.get("template") or {}).get("spec") or {}, _job_pod_count(spec)
            )
        return out
    if integration.gvk == LWS_GVK:
        from workloadbuilder.kinds.lws import lws_pods

        for pod in lws_pods(doc):
            group = plan.pod_group_for(pod)
            if group:
                out.setdefault(group, []).append(dict(pod_requests(pod, strict=False)))
        return out
    return None


def collect_input(docs: Sequence[Any], registry: IntegrationRegistry) -> _Input:
    """The levels, runtime groups and notes of the input documents."""
    result = _Input()
    workloads: list[tuple[int, Workload]] = []
    groups: list[tuple[int, PodGroup | CompositePodGroup]] = []
    pods_of: dict[tuple[str, str], list[dict[str, int]]] = {}
    planned: list[tuple[int, Mapping[str, Any]]] = []
    for number, doc in enumerate(docs, start=1):
        if not isinstance(doc, Mapping):
            raise LintInputError(
                f"expected a manifest (a mapping), got {type(doc).__name__}", document=number
            )
        kind = doc.get("kind")
        if not isinstance(kind, str) or not kind:
            raise LintInputError("kind: Required value", document=number)
        if kind in ("Workload", "PodGroup", "CompositePodGroup"):
            data = dict(doc)
            data["metadata"] = {**_meta(doc), "namespace": _meta(doc).get("namespace") or "default"}
            try:
                obj = object_from_dict(data)
            except CodecError as e:
                raise LintInputError(
                    f"{e.path}: {e.detail}", document=number, subject=_subject(kind, _meta(doc))
                ) from None
            if isinstance(obj, Workload):
                workloads.append((number, obj))
            elif isinstance(obj, (PodGroup, CompositePodGroup)):
                groups.append((number, obj))
        elif kind == "Pod":
            meta, spec = _meta(doc), doc.get("spec") or {}
            subject = _subject(kind, meta)
            if not isinstance(spec, Mapping):
                raise LintInputError(
                    "spec: Invalid value: expected an object", document=number, subject=subject
                )
            link = spec.get("schedulingGroup") or {}
            if not isinstance(link, Mapping):
                raise LintInputError(
                    "spec.schedulingGroup: Invalid value: expected an object",
                    document=number,
                    subject=subject,
                )
            group = link.get("podGroupName")
            if isinstance(group, str) and group:
                ns = str(meta.get("namespace") or "default")
                try:
                    requests = dict(pod_requests(spec, strict=False))
                except (AttributeError, TypeError) as e:
                    raise LintInputError(
                        f"spec: Invalid value: {e}", document=number, subject=subject
                    ) from None
                pods_of.setdefault((ns, group), []).append(requests)
        elif kind in ("Node", "Namespace", "PriorityClass"):
            continue
        else:
            try:
                registry.for_object(doc)
            except UnknownKindError as e:
                raise LintInputError(f"kind: {e}", document=number) from None
            planned.append((number, doc))

    claimed = _collect_workloads(result, workloads, groups, pods_of)
    _collect_standalone(result, [(n, g) for n, g in groups if n not in claimed], pods_of)
    _collect_planned(result, planned, registry)
    return result


def _collect_workloads(
    result: _Input,
    workloads: Sequence[tuple[int, Workload]],
    groups: Sequence[tuple[int, PodGroup | CompositePodGroup]],
    pods_of: Mapping[tuple[str, str], list[dict[str, int]]],
) -> set[int]:
    """Hand-written Workloads, their templates and the groups of them in the input; returns
    the document numbers of those groups."""
    claimed: set[int] = set()
    for _, wl in workloads:
        subject = f"Workload {wl.metadata.namespace}/{wl.metadata.name}"
        by_template = workload_levels(subject, "", wl)
        result.levels.extend(by_template.values())
        mine = [
            (n, g)
            for n, g in groups
            if g.spec.workload_ref is not None
            and g.spec.workload_ref.workload_name == wl.metadata.name
            and g.metadata.namespace == wl.metadata.namespace
        ]
        claimed.update(n for n, _ in mine)
        level_of: dict[str, Level] = {
            g.metadata.name or "": by_template[g.spec.workload_ref.template_name]
            for _, g in mine
            if g.spec.workload_ref is not None and g.spec.workload_ref.template_name in by_template
        }
        pods = {
            g.metadata.name or "": pods_of.get(
                (wl.metadata.namespace or "default", g.metadata.name or ""), []
            )
            for _, g in mine
            if isinstance(g, PodGroup)
        }
        result.roots.extend(build_instances([g for _, g in mine], level_of, pods))
        if not mine:
            result.notes.append(
                f"{subject}: no PodGroups or pods of it in the input: its capacity is not checked"
            )
    return claimed


def _collect_standalone(
    result: _Input,
    alone: Sequence[tuple[int, PodGroup | CompositePodGroup]],
    pods_of: Mapping[tuple[str, str], list[dict[str, int]]],
) -> None:
    """Groups without their Workload in the input: one level each, linked to their parents."""
    level_of: dict[str, Level] = {}
    by_key = {(g.metadata.namespace, g.metadata.name): g for _, g in alone}
    for _, g in alone:
        subject = _subject(g.kind, {"namespace": g.metadata.namespace, "name": g.metadata.name})
        level_of[g.metadata.name or ""] = Level(
            subject=subject,
            path="spec",
            key_path="spec.schedulingConstraints.topology[0].key",
            template=g.metadata.name or "",
            key=topology_key(g.spec.scheduling_constraints),
            parent=None,
        )
    for _, g in alone:  # link parents among the hand-written groups
        parent = by_key.get((g.metadata.namespace, g.spec.parent_composite_pod_group_name))
        if parent is not None:
            level_of[g.metadata.name or ""].parent = level_of[parent.metadata.name or ""]
    result.levels.extend(level_of.values())
    if alone:
        pods = {
            g.metadata.name or "": pods_of.get(
                (g.metadata.namespace or "default", g.metadata.name or ""), []
            )
            for _, g in alone
            if isinstance(g, PodGroup)
        }
        for _, g in alone:
            if isinstance(g, PodGroup) and not pods[g.metadata.name or ""]:
                result.notes.append(
                    f"{level_of[g.metadata.name or ''].subject}: no pods of it in the input: "
                    "its capacity is not checked"
                )
        result.roots.extend(build_instances([g for _, g in alone], level_of, pods))


def _collect_planned(
    result: _Input,
    planned: Sequence[tuple[int, Mapping[str, Any]]],
    registry: IntegrationRegistry,
) -> None:
    """Kinds planned by an integration: the Workload, groups and pods their controller makes."""
    for number, doc in planned:
        subject = _subject(str(doc.get("kind")), _meta(doc))
        try:
            plan = registry.plan(doc)
        except NotManagedError as e:
            result.notes.append(f"{subject}: not checked: {e}")
            continue
        except (
            WorkloadBuilderError,
            CodecError,
            AttributeError,
            TypeError,
            KeyError,
            ValueError,
        ) as e:
            raise LintInputError(str(e), document=number, subject=subject) from None
        wl = plan.workload
        prefix = f"Workload {wl.metadata.name}: "
        by_template = workload_levels(subject, prefix, wl)
        if doc.get("kind") == "Job" and len(by_template) == 1:
            # a Job's one template comes from its spec.scheduling: name the Job's own field
            for lv in by_template.values():
                lv.path = "spec.scheduling"
                lv.key_path = "spec.scheduling.schedulingConstraints.topology[0].key"
        result.levels.extend(by_template.values())
        try:
            planned_pods = _planned_pods(registry, doc, plan)
        except (WorkloadBuilderError, AttributeError, TypeError, KeyError, ValueError) as e:
            raise LintInputError(str(e), document=number, subject=subject) from None
        if planned_pods is None:
            result.notes.append(
                f"{subject}: its pod templates are not known (the {doc.get('kind')} has none): "
                "its capacity is not checked"
            )
        all_groups: list[PodGroup | CompositePodGroup] = [
            *plan.composite_pod_groups,
            *plan.pod_groups,
        ]
        level_of = {
            g.metadata.name or "": by_template[g.spec.workload_ref.template_name]
            for g in all_groups
            if g.spec.workload_ref is not None and g.spec.workload_ref.template_name in by_template
        }
        result.roots.extend(build_instances(all_groups, level_of, planned_pods))
