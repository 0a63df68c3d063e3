"""The migration's intermediate form: input documents, the pod templates that carried an
old group link, and the gangs (one per source group) they join."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from workloadbuilder.migrate._report import FieldReport, MigrationError

__all__ = [
    "CONTROLLER_KINDS",
    "Doc",
    "Gang",
    "Link",
    "Slot",
    "namespace_of",
    "path_text",
    "pod_templates",
    "template_at",
]

#: kinds whose pod templates may carry an old group link, and that own their pods
CONTROLLER_KINDS = frozenset(
    {"Job", "JobSet", "LeaderWorkerSet", "Deployment", "StatefulSet", "ReplicaSet"}
)

PathT = tuple[str | int, ...]


@attrs.define(kw_only=True, eq=False)
class Doc:
    """One input object; ``obj`` is the caller's object deep-copied (rewritten in place)."""

    index: int
    origin: str
    obj: dict[str, Any]
    #: True when the object is replaced by the migration's output (an old group object)
    consumed: bool = False
    #: True when a pod template of it was rewritten
    rewritten: bool = False

    @property
    def kind(self) -> str:
        kind = self.obj.get("kind")
        return kind if isinstance(kind, str) else ""

    @property
    def name(self) -> str:
        meta = self.obj.get("metadata")
        name = meta.get("name") if isinstance(meta, Mapping) else None
        return name if isinstance(name, str) else ""

    @property
    def namespace(self) -> str:
        return namespace_of(self.obj)


def namespace_of(obj: Mapping[str, Any]) -> str:
    """``metadata.namespace`` or ``default``."""
    meta = obj.get("metadata")
    ns = meta.get("namespace") if isinstance(meta, Mapping) else None
    return ns if isinstance(ns, str) and ns else "default"


def path_text(path: PathT, *tail: str) -> str:
    """``("spec", "replicatedJobs", 0, "template")`` -> ``spec.replicatedJobs[0].template``."""
    out = ""
    for part in (*path, *tail):
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.startswith("["):
            out += part
        else:
            out += f".{part}" if out else part
    return out


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _get(obj: Any, key: str | int) -> Any:
    if isinstance(key, int):
        return obj[key] if isinstance(obj, list) and key < len(obj) else None
    return obj.get(key) if isinstance(obj, Mapping) else None


def template_at(obj: dict[str, Any], path: PathT) -> dict[str, Any]:
    """The pod template (``{metadata, spec}``) at ``path`` of ``obj`` (``()``: a Pod)."""
    cur: Any = obj
    for key in path:
        cur = _get(cur, key)
    if not isinstance(cur, dict):
        raise KeyError(path_text(path))
    return cur


def pod_templates(obj: Mapping[str, Any]) -> list[tuple[PathT, int | None]]:
    """Where the pods of ``obj`` are described, and how many pods each place makes (None
    when unknown): a Pod itself, a Job's / Deployment's / StatefulSet's / ReplicaSet's
    ``spec.template``, each JobSet ``replicatedJobs[i]`` Job template, an LWS's leader and
    worker templates. Other kinds have none."""
    kind = obj.get("kind")
    spec = obj.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    if kind == "Pod":
        return [((), 1)]
    if kind == "Job":
        return [(("spec", "template"), _int(spec.get("parallelism"), 1))]
    if kind in ("Deployment", "StatefulSet", "ReplicaSet"):
        return [(("spec", "template"), _int(spec.get("replicas"), 1))]
    if kind == "JobSet":
        out: list[tuple[PathT, int | None]] = []
        jobs = spec.get("replicatedJobs")
        for i, rj in enumerate(jobs if isinstance(jobs, list) else []):
            job_spec = _get(_get(rj, "template"), "spec")
            count = _int(_get(rj, "replicas"), 1) * _int(_get(job_spec, "parallelism"), 1)
            out.append((("spec", "replicatedJobs", i, "template", "spec", "template"), count))
        return out
    if kind == "LeaderWorkerSet":
        lwt = spec.get("leaderWorkerTemplate")
        lwt = lwt if isinstance(lwt, Mapping) else {}
        replicas = _int(spec.get("replicas"), 1)
        size = _int(lwt.get("size"), 1)
        base: PathT = ("spec", "leaderWorkerTemplate")
        if isinstance(lwt.get("leaderTemplate"), Mapping):
            return [
                ((*base, "leaderTemplate"), replicas),
                ((*base, "workerTemplate"), replicas * max(size - 1, 0)),
            ]
        return [((*base, "workerTemplate"), replicas * size)]
    return []


@attrs.frozen(kw_only=True)
class Link:
    """An old group link found on one pod template: which group (and task) it names, the
    field that said so, and the labels / annotations that go away with it."""

    source: str
    group: str
    path: str
    task: str | None = None
    task_path: str = ""
    drop_labels: tuple[str, ...] = ()
    drop_annotations: tuple[str, ...] = ()
    #: source-specific values (Kueue's total count, YuniKorn's task groups, ...)
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.define(kw_only=True, eq=False)
class Slot:
    """One pod template of an input document (``path`` ``()``: a bare Pod) with its link."""

    doc: Doc
    path: PathT
    pods: int | None
    link: Link

    @property
    def where(self) -> str:
        """The template's JSON path (``spec.template``; ``""`` for a Pod)."""
        return path_text(self.path)

    def field(self, rel: str) -> str:
        """A field of the template, as a path of the document."""
        return f"{self.where}.{rel}" if self.where else rel

    def template(self) -> dict[str, Any]:
        """The template object (rewritten in place)."""
        return template_at(self.doc.obj, self.path)


@attrs.define(kw_only=True, eq=False)
class Gang:
    """One source group, in source-neutral terms.

    ``min_count`` ``None`` means pod-by-pod (basic). ``tasks`` (ordered) are named sub-groups
    with their own minimum (0: no minimum); a gang with tasks becomes a CompositePodGroup
    over one PodGroup per task. ``report`` already holds the source fields' outcomes.
    """

    source: str
    name: str
    namespace: str
    origin: str
    min_count: int | None
    min_count_path: str = ""
    tasks: dict[str, int] = attrs.field(factory=dict)
    tasks_path: str = ""
    priority_class_name: str | None = None
    priority_path: str = ""
    topology_key: str | None = None
    owner_ref: Mapping[str, Any] | None = None
    slots: list[Slot] = attrs.field(factory=list)
    report: list[FieldReport] = attrs.field(factory=list)

    def note(self, path: str, outcome: Any, detail: str, origin: str | None = None) -> None:
        """Add a report line (about the group's own document unless ``origin`` is given)."""
        self.report.append(
            FieldReport(origin=origin or self.origin, path=path, outcome=outcome, detail=detail)
        )

    def fail(self, path: str, message: str, origin: str | None = None) -> MigrationError:
        """A MigrationError about the group's document (or ``origin``)."""
        return MigrationError(origin or self.origin, path, message)
