"""Topology lint: do a workload's topology constraints match the cluster's nodes?

:func:`lint_topology` takes manifests (``Workload``, ``PodGroup``, ``CompositePodGroup``,
``Pod`` and every kind of :func:`workloadbuilder.kinds.default_registry`: Job, JobSet,
LeaderWorkerSet, GenericWorkload, custom kinds) and Node manifests, and checks every level of
every template:

* ``missing-key``: no node carries the level's topology key: the group can never schedule;
* ``not-nested``: a domain of a child level lies in more than one domain of its parent's key
  (a rack that spans two blocks), reported with the nodes involved;
* ``not-coarser``: a parent level is not coarser than its child (same key, or the parent's
  domains lie inside the child's: the levels are swapped);
* ``never-fits``: the group's smallest schedulable set of pods (``minCount`` pods of a gang,
  one pod of a basic group, ``minGroupCount`` children of a composite gang) fits in no domain
  of its key even on an empty cluster, with the largest domain's capacity;
* ``missing-label``: the nodes that lack a label some constraint uses.

Requests are :func:`workloadbuilder.resources.pod_requests` of the pods the kind's controller
creates (the Job's, JobSet's and LeaderWorkerSet's pod templates; ``Pod`` documents of the same
input for hand-written PodGroups); where no pod template is known the capacity check is
skipped and a note says so. Capacity is the nodes' ``status.allocatable`` (``capacity`` when
absent), pods packed first-fit-decreasing onto the nodes of a domain; taints, affinity and
``unschedulable`` are not considered.

    result = lint_topology(manifests, nodes)
    for f in result.findings:
        print(f"{f.subject}: {f.path}: {f.message}")
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import attrs

from workloadbuilder.api import (
    CodecError,
    CompositePodGroup,
    CompositePodGroupTemplate,
    PodGroup,
    PodGroupTemplate,
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
    default_registry,
)
from workloadbuilder.resources import CPU, PODS, format_quantity, parse_quantity, pod_requests

__all__ = [
    "FINDING_TYPES",
    "Finding",
    "FindingType",
    "LintInputError",
    "TopologyLevel",
    "TopologyLintResult",
    "lint_topology",
]

FindingType = Literal["missing-key", "not-nested", "not-coarser", "never-fits", "missing-label"]
#: Every finding type, in the order they are reported.
FINDING_TYPES: tuple[FindingType, ...] = (
    "missing-key",
    "not-nested",
    "not-coarser",
    "never-fits",
    "missing-label",
)
_MAX_LISTED = 8


class LintInputError(WorkloadBuilderError):
    """An input document cannot be linted (unknown kind, invalid object); ``document`` is its
    1-based position among the documents given."""

    def __init__(self, message: str, *, document: int | None = None, subject: str = "") -> None:
        super().__init__(f"{subject}: {message}" if subject else message)
        self.document = document
        self.subject = subject
        self.detail = message


@attrs.frozen(kw_only=True)
class Finding:
    """One problem. ``subject`` is the input object (``Job default/train``); ``path`` the field
    path of the constraint (for kinds planned by an integration it is prefixed with the planned
    Workload: ``Workload train-1a2b: spec.podGroupTemplates[0]...``); ``key`` the topology key;
    ``nodes`` the nodes involved and ``domains`` the domains involved."""

    type: FindingType
    subject: str
    path: str
    key: str
    message: str
    nodes: tuple[str, ...] = ()
    domains: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The finding as a JSON object."""
        return {
            "type": self.type,
            "object": self.subject,
            "path": self.path,
            "key": self.key,
            "message": self.message,
            "nodes": list(self.nodes),
            "domains": list(self.domains),
        }


@attrs.frozen(kw_only=True)
class TopologyLevel:
    """One template level that was checked: its object, field path, template name, topology
    key (None: no constraint at this level), the nearest ancestor's key and how many domains
    its key has on the nodes."""

    subject: str
    path: str
    template: str
    key: str | None
    parent_key: str | None
    domains: int

    def to_json(self) -> dict[str, Any]:
        """The level as a JSON object."""
        return {
            "object": self.subject,
            "path": self.path,
            "template": self.template,
            "key": self.key,
            "parentKey": self.parent_key,
            "domains": self.domains,
        }


@attrs.frozen(kw_only=True)
class TopologyLintResult:
    """The findings, the levels checked, notes (what could not be checked) and the node
    count."""

    findings: tuple[Finding, ...]
    levels: tuple[TopologyLevel, ...]
    notes: tuple[str, ...]
    nodes: int

    @property
    def clean(self) -> bool:
        """No findings."""
        return not self.findings

    def to_json(self) -> dict[str, Any]:
        """``{"nodes", "levels", "findings", "notes"}``."""
        return {
            "nodes": self.nodes,
            "levels": [lv.to_json() for lv in self.levels],
            "findings": [f.to_json() for f in self.findings],
            "notes": list(self.notes),
        }


# -- nodes ------------------------------------------------------------------------------------


@attrs.frozen
class _Node:
    name: str
    labels: Mapping[str, str]
    allocatable: Mapping[str, int]


def _nodes(docs: Iterable[Mapping[str, Any]]) -> list[_Node]:
    out: list[_Node] = []
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
        out.append(_Node(name=name, labels=labels, allocatable=alloc))
    return out


# -- the group trees --------------------------------------------------------------------------


@attrs.define(kw_only=True)
class _Level:
    """A template (or a hand-written group object) with its place in the tree."""

    subject: str
    path: str  # of the template / object
    key_path: str  # of topology[0].key
    template: str
    key: str | None
    parent: _Level | None


@attrs.define(kw_only=True)
class _Instance:
    """A runtime group (PodGroup / CompositePodGroup) of one template, for the capacity check."""

    level: _Level
    name: str
    composite: bool
    gang_min: int | None  # minCount / minGroupCount; None for basic
    children: list[_Instance] = attrs.field(factory=list)
    pods: list[dict[str, int]] | None = None  # requests of each pod; None: unknown


def _topology_key(constraints: Any) -> str | None:
    if constraints is None or not constraints.topology:
        return None
    return str(constraints.topology[0].key)


def _walk_templates(
    subject: str,
    prefix: str,
    templates: Sequence[PodGroupTemplate | CompositePodGroupTemplate],
    field: str,
    parent: _Level | None,
    out: dict[str, _Level],
) -> None:
    for i, t in enumerate(templates):
        path = f"{field}[{i}]"
        level = _Level(
            subject=subject,
            path=prefix + path,
            key_path=prefix + path + ".schedulingConstraints.topology[0].key",
            template=t.name,
            key=_topology_key(t.scheduling_constraints),
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


def _workload_levels(subject: str, prefix: str, wl: Workload) -> dict[str, _Level]:
    out: dict[str, _Level] = {}
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


def _instances(
    groups: Sequence[PodGroup | CompositePodGroup],
    level_of: Mapping[str, _Level],
    pods: Mapping[str, list[dict[str, int]]] | None,
) -> list[_Instance]:
    """The runtime tree of ``groups`` (roots returned); ``level_of`` maps a group name to its
    level; ``pods`` maps PodGroup names to pod requests (None: pods unknown)."""
    by_name: dict[str, _Instance] = {}
    for g in groups:
        name = g.metadata.name or ""
        level = level_of.get(name)
        if level is None:
            continue
        inst = _Instance(
            level=level,
            name=name,
            composite=isinstance(g, CompositePodGroup),
            gang_min=_policy_min(g),
        )
        if isinstance(g, PodGroup) and pods is not None:
            inst.pods = list(pods.get(name, []))
        by_name[name] = inst
    roots: list[_Instance] = []
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


# -- collecting the input -----------------------------------------------------------------


@attrs.define
class _Input:
    levels: list[_Level] = attrs.field(factory=list)
    roots: list[_Instance] = attrs.field(factory=list)
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


def _collect(docs: Sequence[Any], registry: IntegrationRegistry) -> _Input:
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
        by_template = _workload_levels(subject, "", wl)
        result.levels.extend(by_template.values())
        mine = [
            (n, g)
            for n, g in groups
            if g.spec.workload_ref is not None
            and g.spec.workload_ref.workload_name == wl.metadata.name
            and g.metadata.namespace == wl.metadata.namespace
        ]
        claimed.update(n for n, _ in mine)
        level_of: dict[str, _Level] = {
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
        result.roots.extend(_instances([g for _, g in mine], level_of, pods))
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
    level_of: dict[str, _Level] = {}
    by_key = {(g.metadata.namespace, g.metadata.name): g for _, g in alone}
    for _, g in alone:
        subject = _subject(g.kind, {"namespace": g.metadata.namespace, "name": g.metadata.name})
        level_of[g.metadata.name or ""] = _Level(
            subject=subject,
            path="spec",
            key_path="spec.schedulingConstraints.topology[0].key",
            template=g.metadata.name or "",
            key=_topology_key(g.spec.scheduling_constraints),
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
        result.roots.extend(_instances([g for _, g in alone], level_of, pods))


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
        by_template = _workload_levels(subject, prefix, wl)
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
        result.roots.extend(_instances(all_groups, level_of, planned_pods))


# -- the checks ---------------------------------------------------------------------------


def _listed(names: Sequence[str]) -> str:
    names = sorted(names)
    if len(names) <= _MAX_LISTED:
        return ", ".join(names)
    return ", ".join(names[:_MAX_LISTED]) + f" and {len(names) - _MAX_LISTED} more"


def _nearest_key(level: _Level | None) -> tuple[_Level | None, str | None]:
    while level is not None:
        if level.key is not None:
            return level, level.key
        level = level.parent
    return None, None


def _domains(nodes: Sequence[_Node], key: str) -> dict[str, list[_Node]]:
    out: dict[str, list[_Node]] = {}
    for n in nodes:
        value = n.labels.get(key)
        if value is not None:
            out.setdefault(value, []).append(n)
    return out


def _check_levels(
    levels: Sequence[_Level], nodes: Sequence[_Node]
) -> tuple[list[Finding], list[TopologyLevel]]:
    findings: list[Finding] = []
    checked: list[TopologyLevel] = []
    seen_pairs: set[tuple[str, str, str]] = set()
    for lv in levels:
        _, parent_key = _nearest_key(lv.parent)
        domains = _domains(nodes, lv.key) if lv.key is not None else {}
        checked.append(
            TopologyLevel(
                subject=lv.subject,
                path=lv.path,
                template=lv.template,
                key=lv.key,
                parent_key=parent_key,
                domains=len(domains),
            )
        )
        if lv.key is None:
            continue
        if not domains:
            findings.append(
                Finding(
                    type="missing-key",
                    subject=lv.subject,
                    path=lv.key_path,
                    key=lv.key,
                    message=(
                        f"{lv.key}: no node has this label ({len(nodes)} nodes checked); "
                        f"template {lv.template!r} can never schedule"
                    ),
                )
            )
            continue
        if parent_key is None:
            continue
        pair = (lv.subject, lv.key_path, parent_key)
        if pair in seen_pairs:
            continue
        seen_pairs.add(pair)
        findings.extend(_nesting(lv, parent_key, domains, nodes))
    return findings, checked


def _nesting(
    lv: _Level, parent_key: str, domains: Mapping[str, list[_Node]], nodes: Sequence[_Node]
) -> list[Finding]:
    assert lv.key is not None
    out: list[Finding] = []
    if parent_key == lv.key:
        out.append(
            Finding(
                type="not-coarser",
                subject=lv.subject,
                path=lv.key_path,
                key=lv.key,
                message=(
                    f"{lv.key}: the same key as its parent level: the parent is not coarser "
                    "than its child (the child constraint adds nothing)"
                ),
            )
        )
        return out
    parents = _domains(nodes, parent_key)
    for value, members in sorted(domains.items()):
        spread: dict[str, list[str]] = {}
        for n in members:
            spread.setdefault(n.labels.get(parent_key, f"(no {parent_key})"), []).append(n.name)
        if len(spread) > 1:
            parts = "; ".join(f"{p}: {_listed(ns)}" for p, ns in sorted(spread.items()))
            out.append(
                Finding(
                    type="not-nested",
                    subject=lv.subject,
                    path=lv.key_path,
                    key=lv.key,
                    message=(
                        f"{lv.key}={value} spans {len(spread)} domains of its parent level "
                        f"{parent_key} ({parts})"
                    ),
                    nodes=tuple(sorted(n.name for n in members)),
                    domains=tuple(sorted(spread)),
                )
            )
    # coarser: the parent's domains (among nodes with the child key) must be fewer than the
    # child's, and must not lie inside the child's (swapped levels)
    inside = all(
        len({n.labels.get(lv.key) for n in members if lv.key in n.labels}) <= 1
        for members in parents.values()
    )
    parent_count = len(
        {n.labels[parent_key] for ns in domains.values() for n in ns if parent_key in n.labels}
    )
    if parent_count >= len(domains) and inside and parent_count > 0:
        out.append(
            Finding(
                type="not-coarser",
                subject=lv.subject,
                path=lv.key_path,
                key=lv.key,
                message=(
                    f"{lv.key}: its parent level {parent_key} is not coarser: {parent_count} "
                    f"{parent_key} domains each lie inside one of the {len(domains)} {lv.key} "
                    "domains (are the levels swapped?)"
                ),
                domains=tuple(sorted(domains)),
            )
        )
    return out


def _demand(inst: _Instance) -> list[dict[str, int]] | None:
    """The smallest set of pods whose placement schedules ``inst`` (None: unknown)."""
    if inst.composite:
        needs = [_demand(c) for c in inst.children]
        if not needs or any(d is None for d in needs):
            return None
        known = sorted((d for d in needs if d is not None), key=_size)
        k = 1 if inst.gang_min is None else inst.gang_min
        if k > len(known):
            return None
        return [p for d in known[:k] for p in d]
    if inst.pods is None or not inst.pods:
        return None
    k = 1 if inst.gang_min is None else inst.gang_min
    if k > len(inst.pods):
        return None
    return sorted(inst.pods, key=lambda p: _size([p]))[:k]


def _size(pods: Sequence[Mapping[str, int]]) -> tuple[int, ...]:
    total: dict[str, int] = {}
    for p in pods:
        for r, q in p.items():
            total[r] = total.get(r, 0) + q
    return (sum(1 for _ in pods), *sorted(total.values(), reverse=True))


def _packable(pods: Sequence[Mapping[str, int]], nodes: Sequence[_Node]) -> int:
    """How many of ``pods`` first-fit-decreasing places on empty ``nodes``."""
    free = [dict(n.allocatable) for n in nodes]
    most: dict[str, int] = {}
    for f in free:
        for r, q in f.items():
            most[r] = max(most.get(r, 0), q)

    def share(p: Mapping[str, int]) -> float:
        return max([0.0, *(q / max(1, most.get(r, 0)) for r, q in p.items())])

    placed = 0
    for p in sorted(pods, key=share, reverse=True):
        need = {**p, PODS: p.get(PODS, 0) + 1}
        for f in free:
            if all(f.get(r, 0) >= q for r, q in need.items()):
                for r, q in need.items():
                    f[r] = f.get(r, 0) - q
                placed += 1
                break
    return placed


def _capacity(nodes: Sequence[_Node], resources: Iterable[str]) -> str:
    parts = []
    for r in sorted(resources):
        total = sum(n.allocatable.get(r, 0) for n in nodes)
        parts.append(f"{r} {format_quantity(total, r)}")
    return ", ".join(parts)


def _requests_text(pods: Sequence[Mapping[str, int]]) -> str:
    kinds: dict[tuple[tuple[str, int], ...], int] = {}
    for p in pods:
        key = tuple(sorted(p.items()))
        kinds[key] = kinds.get(key, 0) + 1
    parts = []
    for key, n in kinds.items():
        req = ", ".join(f"{r} {format_quantity(q, r)}" for r, q in key) or "no requests"
        parts.append(f"{n} x {{{req}}}")
    return " + ".join(parts)


def _check_capacity(roots: Sequence[_Instance], nodes: Sequence[_Node]) -> list[Finding]:
    findings: list[Finding] = []
    reported: set[tuple[str, str]] = set()

    def visit(inst: _Instance) -> None:
        lv = inst.level
        own_key = lv.key
        _, inherited = _nearest_key(lv.parent)
        key = own_key or inherited
        for child in inst.children:
            visit(child)
        if (lv.subject, lv.path) in reported:
            return
        demand = _demand(inst)
        if demand is None or not nodes:
            return
        if key is None:
            domains = {"(whole cluster)": list(nodes)}
        else:
            domains = _domains(nodes, key)
            if not domains:
                return  # missing-key already says it
        n = len(demand)
        best_name, best_nodes, best_fit = "", list[_Node](), -1
        for name, members in sorted(domains.items()):
            fit = _packable(demand, members)
            if fit >= n:
                return
            if fit > best_fit:
                best_name, best_nodes, best_fit = name, members, fit
        reported.add((lv.subject, lv.path))
        resources = {r for p in demand for r in p} | {CPU}
        where = f"no {key} domain" if key is not None else "the whole cluster"
        what = (
            f"{inst.gang_min} of its child groups"
            if inst.composite and inst.gang_min is not None
            else ("one child group" if inst.composite else f"{n} pod{'s' if n != 1 else ''}")
        )
        largest = (
            f"the largest, {key}={best_name} ({len(best_nodes)} node"
            f"{'s' if len(best_nodes) != 1 else ''}), has {_capacity(best_nodes, resources)} "
            f"and holds {best_fit} of them"
            if key is not None
            else f"it has {_capacity(best_nodes, resources)} and holds {best_fit} of them"
        )
        findings.append(
            Finding(
                type="never-fits",
                subject=lv.subject,
                path=lv.key_path if lv.key is not None else lv.path,
                key=key or "",
                message=(
                    f"template {lv.template!r} can never schedule: it needs {what} "
                    f"({_requests_text(demand)}) in one domain, and {where} fits them on an "
                    f"empty cluster; {largest}"
                ),
                nodes=tuple(sorted(nd.name for nd in best_nodes)),
                domains=(best_name,),
            )
        )

    for root in roots:
        visit(root)
    return findings


def _missing_labels(levels: Sequence[_Level], nodes: Sequence[_Node]) -> list[Finding]:
    first_use: dict[str, _Level] = {}
    for lv in levels:
        if lv.key is not None and lv.key not in first_use:
            first_use[lv.key] = lv
    out: list[Finding] = []
    for key, lv in first_use.items():
        lacking = [n.name for n in nodes if key not in n.labels]
        if not lacking or len(lacking) == len(nodes):
            continue  # none lack it, or missing-key says it
        out.append(
            Finding(
                type="missing-label",
                subject=lv.subject,
                path=lv.key_path,
                key=key,
                message=(
                    f"{len(lacking)} of {len(nodes)} nodes lack the label {key}, so no group "
                    f"constrained by it can use them: {_listed(lacking)}"
                ),
                nodes=tuple(sorted(lacking)),
            )
        )
    return out


def lint_topology(
    objects: Iterable[Any],
    nodes: Iterable[Mapping[str, Any]],
    *,
    registry: IntegrationRegistry | None = None,
) -> TopologyLintResult:
    """Check the topology constraints of ``objects`` (manifests, see the module docs) against
    ``nodes`` (Node manifests). Raises :class:`LintInputError` for an object it cannot read
    (an unknown kind, an invalid Workload, an adapter's validation error)."""
    registry = registry if registry is not None else default_registry()
    node_list = _nodes(nodes)
    collected = _collect(list(objects), registry)
    findings, checked = _check_levels(collected.levels, node_list)
    findings += _check_capacity(collected.roots, node_list)
    findings += _missing_labels(collected.levels, node_list)
    order = {t: i for i, t in enumerate(FINDING_TYPES)}
    findings.sort(key=lambda f: order[f.type])
    notes = list(collected.notes)
    if not any(lv.key for lv in collected.levels):
        notes.append("no topology constraints in the input")
    return TopologyLintResult(
        findings=tuple(findings), levels=tuple(checked), notes=tuple(notes), nodes=len(node_list)
    )
