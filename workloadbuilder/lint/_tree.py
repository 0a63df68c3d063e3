"""The nodes and the group trees the checks walk: a template level (a Workload's
PodGroupTemplate or CompositePodGroupTemplate, or a hand-written group) with its topology key
and parent, and the runtime groups of each level for the capacity check."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from workloadbuilder.api import (
    CompositePodGroup,
    CompositePodGroupTemplate,
    PodGroup,
    PodGroupTemplate,
    Workload,
)
from workloadbuilder.lint._model import LintInputError
from workloadbuilder.resources import PODS, parse_quantity

__all__ = [
    "Instance",
    "Level",
    "Node",
    "build_instances",
    "read_nodes",
    "topology_key",
    "workload_levels",
]


# -- nodes ------------------------------------------------------------------------------------


@attrs.frozen
class Node:
    """A node: its name, labels and allocatable resources (``parse_quantity`` units)."""

    name: str
    labels: Mapping[str, str]
    allocatable: Mapping[str, int]


def read_nodes(docs: Iterable[Mapping[str, Any]]) -> list[Node]:
    """The nodes of Node manifests; :class:`LintInputError` for a document that is not one."""
    out: list[Node] = []
    for i, doc in enumerate(docs, start=1):
        if not isinstance(doc, Mapping) or doc.get("kind") != "Node":
            kind = doc.get("kind") if isinstance(doc, Mapping) else type(doc).__name__
            raise LintInputError(f"node document {i}: kind: expected Node, got {kind!r}")
        meta = doc.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        name = str(meta.get("name") or f"<node {i}>")
        labels = meta.get("labels")
        labels = {str(k): str(v) for k, v in labels.items()} if isinstance(labels, Mapping) else {}
        status = doc.get("status")
        status = status if isinstance(status, Mapping) else {}
        raw = status.get("allocatable") or status.get("capacity") or {}
        alloc: dict[str, int] = {}
        if isinstance(raw, Mapping):
            for res, q in raw.items():
                try:
                    alloc[str(res)] = parse_quantity(q, str(res))
                except ValueError:
                    raise LintInputError(
                        f"Node {name}: status.allocatable[{res}]: Invalid value: {q!r}: "
                        "not a quantity"
                    ) from None
        alloc.setdefault(PODS, 110)
        out.append(Node(name=name, labels=labels, allocatable=alloc))
    return out


# -- the group trees --------------------------------------------------------------------------


@attrs.define(kw_only=True)
class Level:
    """A template (or a hand-written group object) with its place in the tree."""

    subject: str
    path: str  # of the template / object
    key_path: str  # of topology[0].key
    template: str
    key: str | None
    parent: Level | None


@attrs.define(kw_only=True)
class Instance:
    """A runtime group (PodGroup / CompositePodGroup) of one template, for the capacity check."""

    level: Level
    name: str
    composite: bool
    gang_min: int | None  # minCount / minGroupCount; None for basic
    children: list[Instance] = attrs.field(factory=list)
    pods: list[dict[str, int]] | None = None  # requests of each pod; None: unknown


def topology_key(constraints: Any) -> str | None:
    """The topology key of a group's scheduling constraints (None: no topology)."""
    if constraints is None or not constraints.topology:
        return None
    return str(constraints.topology[0].key)


def _walk_templates(
    subject: str,
    prefix: str,
    templates: Sequence[PodGroupTemplate | CompositePodGroupTemplate],
    field: str,
    parent: Level | None,
    out: dict[str, Level],
) -> None:
    for i, t in enumerate(templates):
        path = f"{field}[{i}]"
        level = Level(
            subject=subject,
            path=prefix + path,
            key_path=prefix + path + ".schedulingConstraints.topology[0].key",
            template=t.name,
            key=topology_key(t.scheduling_constraints),
            parent=parent,
        )
        out[t.name] = level
        if isinstance(t, CompositePodGroupTemplate):
            _walk_templates(
                subject, prefix, t.pod_group_templates, f"{path}.podGroupTemplates", level, out
            )
            _walk_templates(
                subject,
                prefix,
                t.composite_pod_group_templates,
                f"{path}.compositePodGroupTemplates",
                level,
                out,
            )


def workload_levels(subject: str, prefix: str, wl: Workload) -> dict[str, Level]:
    """The template levels of a Workload, by template name."""
    out: dict[str, Level] = {}
    _walk_templates(
        subject,
        prefix,
        wl.spec.composite_pod_group_templates,
        "spec.compositePodGroupTemplates",
        None,
        out,
    )
    _walk_templates(
        subject, prefix, wl.spec.pod_group_templates, "spec.podGroupTemplates", None, out
    )
    return out


def _policy_min(obj: PodGroup | CompositePodGroup) -> int | None:
    if isinstance(obj, PodGroup):
        gang = obj.spec.scheduling_policy.gang
        return None if gang is None else int(gang.min_count)
    cgang = obj.spec.scheduling_policy.gang
    return None if cgang is None else int(cgang.min_group_count)


def build_instances(
    groups: Sequence[PodGroup | CompositePodGroup],
    level_of: Mapping[str, Level],
    pods: Mapping[str, list[dict[str, int]]] | None,
) -> list[Instance]:
    """The runtime tree of ``groups`` (roots returned); ``level_of`` maps a group name to its
    level; ``pods`` maps PodGroup names to pod requests (None: pods unknown)."""
    by_name: dict[str, Instance] = {}
    for g in groups:
        name = g.metadata.name or ""
        level = level_of.get(name)
        if level is None:
            continue
        inst = Instance(
            level=level,
            name=name,
            composite=isinstance(g, CompositePodGroup),
            gang_min=_policy_min(g),
        )
        if isinstance(g, PodGroup) and pods is not None:
            inst.pods = list(pods.get(name, []))
        by_name[name] = inst
    roots: list[Instance] = []
    for g in groups:
        child = by_name.get(g.metadata.name or "")
        if child is None:
            continue
        parent = by_name.get(g.spec.parent_composite_pod_group_name or "")
        if parent is not None:
            parent.children.append(child)
        else:
            roots.append(child)
    return roots
