"""``migrate()``: classify the input, find the old group links, build the v1.37 objects."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from workloadbuilder.migrate import _coscheduling, _kueue, _v1alpha2, _volcano, _yunikorn
from workloadbuilder.migrate._emit import JobMode, emit_gang
from workloadbuilder.migrate._model import (
    Doc,
    Gang,
    Link,
    Slot,
    path_text,
    pod_templates,
    template_at,
)
from workloadbuilder.migrate._report import FieldReport, MigrationError, MigrationResult

__all__ = ["SOURCES", "Source", "migrate"]

Source = Literal["auto", "v1alpha2", "volcano", "coscheduling", "yunikorn", "kueue"]
#: the sources ``migrate`` reads (``--from``)
SOURCES: tuple[str, ...] = ("v1alpha2", "volcano", "coscheduling", "yunikorn", "kueue")

_LinkFn = Callable[[Mapping[str, Any], str, str], Link | None]
_GangFn = Callable[[list[Doc], list[Slot], Mapping[str, str]], list[Gang]]
_LINKS: dict[str, _LinkFn] = {
    "volcano": _volcano.link,
    "coscheduling": _coscheduling.link,
    "yunikorn": _yunikorn.link,
    "kueue": _kueue.link,
}
_GANGS: dict[str, _GangFn] = {
    "volcano": _volcano.gangs,
    "coscheduling": _coscheduling.gangs,
    "yunikorn": _yunikorn.gangs,
    "kueue": _kueue.gangs,
}
_CURRENT = ("scheduling.k8s.io/v1beta1", "scheduling.k8s.io/v1alpha3")


def _group_source(doc: Doc) -> str | None:
    """The source whose group object ``doc`` is (None: not a group object). Raises for an
    apiVersion of a known group that this migration does not read."""
    api_version = doc.obj.get("apiVersion")
    if not isinstance(api_version, str) or "/" not in api_version:
        return None
    group, _, version = api_version.partition("/")
    if group == _volcano.API_GROUP:
        if doc.kind == "Queue":
            return "volcano-queue"
        if doc.kind == "PodGroup" and version in _volcano.VERSIONS:
            return "volcano"
        raise MigrationError(
            doc.origin,
            "apiVersion",
            f"unknown apiVersion {api_version!r} for kind {doc.kind!r}: this migration reads "
            f"Volcano PodGroups as {', '.join(f'{group}/{v}' for v in _volcano.VERSIONS)}",
        )
    if group == _coscheduling.API_GROUP:
        if doc.kind == "ElasticQuota":
            return "elastic-quota"
        if doc.kind == "PodGroup" and version in _coscheduling.VERSIONS:
            return "coscheduling"
        raise MigrationError(
            doc.origin,
            "apiVersion",
            f"unknown apiVersion {api_version!r} for kind {doc.kind!r}: this migration reads "
            f"coscheduling PodGroups as {group}/v1alpha1",
        )
    if group == "scheduling.k8s.io" and doc.kind in ("Workload", "PodGroup", "CompositePodGroup"):
        if api_version == _v1alpha2.VERSION:
            return "v1alpha2"
        if api_version in _CURRENT:
            return None  # already a v1.37 object
        raise MigrationError(
            doc.origin,
            "apiVersion",
            f"unknown apiVersion {api_version!r} for kind {doc.kind!r}: this migration reads "
            f"{_v1alpha2.VERSION} (Kubernetes 1.36); v1.37 serves {' and '.join(_CURRENT)}",
        )
    return None


def _links(doc: Doc, wanted: str) -> list[Slot]:
    """The slots of ``doc``: its pod templates that carry an old group link."""
    slots: list[Slot] = []
    for path, pods in pod_templates(doc.obj):
        try:
            tmpl = template_at(doc.obj, path)
        except KeyError:
            continue
        where = f"{path_text(path)}." if path else ""
        found = [
            (name, link)
            for name, fn in _LINKS.items()
            if (link := fn(tmpl, doc.origin, where)) is not None
        ]
        if len(found) > 1:
            desc = ", ".join(f"{n} group {link.group!r} ({where}{link.path})" for n, link in found)
            raise MigrationError(
                doc.origin, path_text(path) or "metadata", f"a pod in two groups: {desc}"
            )
        if not found:
            continue
        name, link = found[0]
        if wanted not in ("auto", name):
            raise MigrationError(
                doc.origin,
                f"{where}{link.path}",
                f"a {name} group link, but --from {wanted}",
            )
        slots.append(Slot(doc=doc, path=path, pods=pods, link=link))
    return slots


def migrate(
    objects: Sequence[Mapping[str, Any]],
    *,
    source: Source = "auto",
    origins: Sequence[str] | None = None,
    job_mode: JobMode = "native",
    scheduler_name: str | None = None,
    tier_labels: Mapping[str, str] | None = None,
) -> MigrationResult:
    """Migrate ``objects`` (Kubernetes objects as dicts) to the v1.37 scheduling API.

    ``source`` is one of :data:`SOURCES` or ``auto`` (each object says what it is).
    ``origins`` names each object for messages (default ``object N``). A gang whose only
    member is one Job becomes that Job's ``spec.scheduling`` with ``job_mode="native"``,
    explicit Workload + PodGroup objects with ``"podgroup"``. ``scheduler_name`` replaces the
    pods' ``schedulerName`` (default: an old gang scheduler's name is removed).
    ``tier_labels`` maps a Volcano HyperNode tier (number or name) to a node label key.

    Returns the objects in creation order: the input objects that make no pods
    (PriorityClasses, ...), the Workloads, CompositePodGroups and PodGroups, then the
    objects that make pods, rewritten where they joined an old group; and a report per
    source field. Raises :class:`MigrationError` (file, document, field path)
    for input that cannot be migrated.
    """
    if source != "auto" and source not in SOURCES:
        raise MigrationError("", "source", f"unknown source {source!r}: one of {SOURCES}")
    if origins is not None and len(origins) != len(objects):
        raise ValueError(f"{len(origins)} origins for {len(objects)} objects")
    docs: list[Doc] = []
    for i, obj in enumerate(objects):
        origin = origins[i] if origins is not None else f"object {i + 1}"
        if not isinstance(obj, Mapping):
            raise MigrationError(origin, "", "expected a Kubernetes object (a mapping)")
        docs.append(Doc(index=i, origin=origin, obj=copy.deepcopy(dict(obj))))
    report: list[FieldReport] = []
    groups: dict[str, list[Doc]] = {name: [] for name in _GANGS}
    converted: list[dict[str, Any]] = []
    for doc in docs:
        kind = _group_source(doc)
        if kind is None:
            continue
        family = {"volcano-queue": "volcano", "elastic-quota": "coscheduling"}.get(kind, kind)
        if source not in ("auto", family):
            raise MigrationError(
                doc.origin, "apiVersion", f"a {family} object, but --from {source}"
            )
        if kind == "volcano-queue":
            doc.consumed = True
            report.append(
                FieldReport(
                    origin=doc.origin,
                    path="spec",
                    outcome="not-expressible",
                    detail="a Volcano Queue (quota, weight, reclaim) has no v1.37 counterpart: "
                    "use a Kueue ClusterQueue and LocalQueue",
                )
            )
        elif kind == "elastic-quota":
            doc.consumed = True
            report.append(
                FieldReport(
                    origin=doc.origin,
                    path="spec",
                    outcome="not-expressible",
                    detail="an ElasticQuota has no v1.37 counterpart: use Kueue for quotas",
                )
            )
        elif kind == "v1alpha2":
            obj, notes = _v1alpha2.convert(doc)
            converted.append(obj)
            report += notes
        else:
            groups[kind].append(doc)
    slots: dict[str, list[Slot]] = {name: [] for name in _GANGS}
    for doc in docs:
        if not doc.consumed:
            for slot in _links(doc, source):
                slots[slot.link.source].append(slot)
    created: list[dict[str, Any]] = []
    workloads: list[dict[str, Any]] = []
    for name, build in _GANGS.items():
        for gang in build(groups[name], slots[name], dict(tier_labels or {})):
            objs = emit_gang(gang, job_mode=job_mode, scheduler_name=scheduler_name)
            workloads += [o for o in objs if o["kind"] == "Workload"]
            created += [o for o in objs if o["kind"] != "Workload"]
            report += gang.report
    # creation order: Workloads, CompositePodGroups (roots before children), PodGroups
    order = {"CompositePodGroup": 0, "PodGroup": 1}
    converted.sort(key=lambda o: 0 if o["kind"] == "Workload" else 1)
    created.sort(key=lambda o: order[o["kind"]])
    kept = [d for d in docs if not d.consumed]
    # what the new objects may need first (PriorityClasses, Namespaces, ...): the objects
    # without pods; then the scheduling objects; then everything that makes pods
    first = [d.obj for d in kept if not d.rewritten and not pod_templates(d.obj)]
    out = [*first, *converted[: sum(o["kind"] == "Workload" for o in converted)], *workloads]
    out += [o for o in converted if o["kind"] != "Workload"] + created
    out += [d.obj for d in kept if d.rewritten or pod_templates(d.obj)]
    return MigrationResult(objects=tuple(out), report=tuple(report))
