"""Scenario files: multi-document YAML of ordinary manifests plus simulation annotations
and the ``NodePool`` shorthand (``sim.workloadbuilder.io/v1alpha1``)."""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from workloadbuilder.api import (
    RESOURCE_KINDS,
    CodecError,
    object_from_dict,
    resource_object_from_dict,
)
from workloadbuilder.cli import InputError, parse_manifests, read_manifests
from workloadbuilder.cluster import resource_info
from workloadbuilder.errors import WorkloadBuilderError
from workloadbuilder.simulator._controllers import LWS_RESTART_POLICIES, controls
from workloadbuilder.simulator._dra import DeviceShorthandError, node_slices, parse_devices
from workloadbuilder.simulator._units import parse_duration, parse_quantity

__all__ = [
    "ARRIVAL_ANNOTATION",
    "AT_ANNOTATION",
    "DELETE_AT_ANNOTATION",
    "DURATION_ANNOTATION",
    "ELASTIC_FIELDS",
    "MAX_NODES",
    "MAX_PODS_PER_OBJECT",
    "NODE_POOL_API_VERSION",
    "POOL_LABEL",
    "Scenario",
    "ScenarioError",
    "ScenarioObject",
    "elastic_update",
    "expand_node_pool",
    "load_scenario",
    "parse_scenario",
    "scenario_from_documents",
]

_SIM_PREFIX = "sim.workloadbuilder.io/"
ARRIVAL_ANNOTATION = "sim.workloadbuilder.io/arrival"
DURATION_ANNOTATION = "sim.workloadbuilder.io/duration"
#: On a later document for an object defined earlier: apply it as an update at this time.
AT_ANNOTATION = "sim.workloadbuilder.io/at"
#: Delete the object at this time.
DELETE_AT_ANNOTATION = "sim.workloadbuilder.io/delete-at"
#: The most nodes a scenario may have (all NodePools and Nodes together).
MAX_NODES = 20_000
#: The most pods one Job, JobSet or LeaderWorkerSet may ask for at once.
MAX_PODS_PER_OBJECT = 100_000
NODE_POOL_API_VERSION = "sim.workloadbuilder.io/v1alpha1"
POOL_LABEL = "sim.workloadbuilder.io/pool"

_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


class ScenarioError(WorkloadBuilderError):
    """The scenario is not valid. ``document`` is 1-based; ``path`` is a JSON field path inside
    that document."""

    def __init__(
        self,
        message: str,
        *,
        source: str = "",
        document: int | None = None,
        what: str = "",
        path: str = "",
    ) -> None:
        self.source = source
        self.document = document
        self.what = what
        self.path = path
        self.detail = message
        # the CLI's one message shape: ``FILE document N: Kind ns/name: path: message``
        where = source
        if document is not None:
            where += f"{' ' if where else ''}document {document}"
            if what:
                where += f": {what}"
        text = f"{path}: {message}" if path else message
        super().__init__(f"{where}: {text}" if where else text)


@attrs.frozen(kw_only=True)
class ScenarioObject:
    """One object to create during the simulation.

    ``manifest`` is the document as the API would receive it (a NodePool is expanded into
    Nodes that share its document number). ``arrival`` is seconds from the start (for an
    update or a deletion: when it happens); ``duration`` how long each of its pods runs once
    bound (None: until the end). ``action`` is ``create``, ``update`` (a later document with
    ``sim.workloadbuilder.io/at``; ``previous`` is the manifest it replaces) or ``delete``
    (``sim.workloadbuilder.io/delete-at``).
    """

    document: int
    api_version: str
    kind: str
    name: str
    namespace: str | None
    arrival: float
    duration: float | None
    manifest: dict[str, Any]
    pool: str | None = None
    action: str = "create"
    previous: dict[str, Any] | None = None

    @property
    def key(self) -> str:
        """``Kind namespace/name`` (``Kind name`` for cluster-scoped objects)."""
        ns = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {ns}{self.name}"

    @property
    def controlled(self) -> bool:
        """True for Job, JobSet and LeaderWorkerSet, whose pods the simulator creates."""
        return controls(self.api_version, self.kind)


@attrs.frozen(kw_only=True)
class Scenario:
    """A parsed scenario: objects in document order, plus the topology keys of its NodePools
    (outermost first) for pictures."""

    source: str
    objects: tuple[ScenarioObject, ...]
    topology_keys: tuple[str, ...] = ()
    #: workload-aware preemption on (``kind: Simulation``, ``spec.preemption``; default on,
    #: as ``workloadbuilder scheduler`` runs it)
    preemption: bool = True

    @property
    def nodes(self) -> tuple[ScenarioObject, ...]:
        """The Node objects (pools expanded) that are created."""
        return tuple(o for o in self.objects if o.kind == "Node" and o.action == "create")


def load_scenario(path: str) -> Scenario:
    """Read and parse a scenario file (``-`` reads stdin) with the CLI's one manifest reader:
    a missing file, a directory, bytes that are not UTF-8, malformed YAML and empty input are
    :class:`ScenarioError`\\ s with the same messages as in every other command."""
    try:
        docs = read_manifests([path], command="simulate")
    except InputError as e:
        raise ScenarioError(str(e)) from None
    return scenario_from_documents([d.obj for d in docs], source=docs[0].source)


def parse_scenario(text: str, *, source: str = "<scenario>") -> Scenario:
    """Parse scenario YAML. Raises :class:`ScenarioError` naming the document (1-based) and
    the field path of the first problem."""
    try:
        docs = parse_manifests(text.encode("utf-8"), source)
    except InputError as e:
        raise ScenarioError(str(e)) from None
    return scenario_from_documents([d.obj for d in docs], source=source)


#: the one spec field an update of a played kind may change: the workload controller's
#: elastic resize (the integration re-plans; the simulator adds or removes the pods)
ELASTIC_FIELDS = {"Job": "parallelism", "LeaderWorkerSet": "replicas"}


def elastic_update(kind: str, previous: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """True when ``new`` differs from ``previous`` (a Job or LeaderWorkerSet document) only in
    its :data:`ELASTIC_FIELDS` field (and the simulation annotations)."""
    field = ELASTIC_FIELDS.get(kind)
    if field is None:
        return False

    def rest(doc: Mapping[str, Any]) -> tuple[dict[str, Any], Any]:
        out = copy.deepcopy(dict(doc))
        meta = dict(out.get("metadata") or {})
        annotations = {
            k: v
            for k, v in (meta.get("annotations") or {}).items()
            if not str(k).startswith(_SIM_PREFIX)
        }
        meta.pop("annotations", None)
        if annotations:
            meta["annotations"] = annotations
        out["metadata"] = meta
        spec = dict(out.get("spec") or {})
        value = spec.pop(field, None)
        out["spec"] = spec
        return out, value

    (before, old), (after, value) = rest(previous), rest(new)
    return before == after and old != value and isinstance(value, int) and value >= 0


def scenario_from_documents(raw: Sequence[Any], *, source: str = "<scenario>") -> Scenario:
    """Build a scenario from its documents (1-based numbering, in order)."""
    objects: list[ScenarioObject] = []
    topology_keys: list[str] = []
    seen: dict[tuple[str, str | None, str], tuple[int, ScenarioObject]] = {}
    deletes: dict[tuple[str, str | None, str], float] = {}
    nodes = 0
    number = 0
    options: dict[str, Any] = {}
    options_doc = 0
    for doc in raw:
        if doc is None:
            continue
        number += 1
        if _is_options(doc):
            if options_doc:
                raise ScenarioError(
                    f"Duplicate value: document {options_doc} is also a Simulation",
                    source=source,
                    document=number,
                    what="Simulation",
                    path="kind",
                )
            options_doc = number
            options = _simulation_options(doc, number, source)
            continue
        parsed = _parse_document(doc, number, source)
        at, delete_at = _lifecycle_annotations(doc, number, source, parsed)
        for obj in parsed:
            ident = (obj.kind, obj.namespace, obj.name)
            what = f"NodePool {obj.pool}" if obj.pool is not None else obj.key
            err = functools.partial(ScenarioError, source=source, document=number, what=what)
            if ident in seen:
                first, prev = seen[ident]
                if at is None:
                    raise err(
                        f"Duplicate value: {obj.key} is also defined by document {first} (to "
                        f"update it at a later time, annotate this document with {AT_ANNOTATION})",
                        path="metadata.name",
                    )
                if obj.pool is not None or (
                    obj.controlled and not elastic_update(obj.kind, prev.manifest, obj.manifest)
                ):
                    field = ELASTIC_FIELDS.get(obj.kind)
                    but = f", except a change of spec.{field} (elastic)" if field else ""
                    raise err(
                        f"Forbidden: updates of a {'NodePool' if obj.pool else obj.kind} are not "
                        f"simulated{but} (update its PodGroups, pods or nodes instead)",
                        path=f"metadata.annotations[{AT_ANNOTATION}]",
                    )
                if ident in deletes and at >= deletes[ident]:
                    raise err(
                        f"Invalid value: {at:g}s: the object is deleted at {deletes[ident]:g}s",
                        path=f"metadata.annotations[{AT_ANNOTATION}]",
                    )
                if at < prev.arrival:
                    raise err(
                        f"Invalid value: {at:g}s: before the object's arrival or last update "
                        f"({prev.arrival:g}s, document {prev.document})",
                        path=f"metadata.annotations[{AT_ANNOTATION}]",
                    )
                obj = attrs.evolve(
                    obj,
                    arrival=at,
                    action="update",
                    previous=prev.manifest,
                    duration=obj.duration if obj.duration is not None else prev.duration,
                )
            elif at is not None:
                raise err(
                    f"Invalid value: {AT_ANNOTATION} updates an object an earlier document "
                    f"defines; {obj.key} is new here (use {ARRIVAL_ANNOTATION})",
                    path=f"metadata.annotations[{AT_ANNOTATION}]",
                )
            seen[ident] = (seen[ident][0] if ident in seen else number, obj)
            objects.append(obj)
            if obj.kind == "Node" and obj.action == "create":
                nodes += 1
                if nodes > MAX_NODES:
                    raise err(
                        f"Too many: {nodes}: a scenario can simulate at most {MAX_NODES} nodes",
                        path="spec.count" if obj.pool else "",
                    )
            if delete_at is not None:
                if delete_at < obj.arrival:
                    raise err(
                        f"Invalid value: {delete_at:g}s: before the object exists "
                        f"({obj.arrival:g}s)",
                        path=f"metadata.annotations[{DELETE_AT_ANNOTATION}]",
                    )
                deletes[ident] = delete_at
                objects.append(attrs.evolve(obj, arrival=delete_at, action="delete"))
        if doc.get("kind") == "NodePool":
            for entry in doc["spec"].get("topology") or ():
                if entry["key"] not in topology_keys:
                    topology_keys.append(entry["key"])
    return Scenario(
        source=source, objects=tuple(objects), topology_keys=tuple(topology_keys), **options
    )


def _is_options(doc: Any) -> bool:
    return (
        isinstance(doc, dict)
        and doc.get("apiVersion") == NODE_POOL_API_VERSION
        and doc.get("kind") == "Simulation"
    )


def _simulation_options(doc: Mapping[str, Any], number: int, source: str) -> dict[str, Any]:
    """The options of a ``kind: Simulation`` document: ``spec.preemption`` (bool)."""

    def err(path: str, message: str) -> ScenarioError:
        return ScenarioError(message, source=source, document=number, what="Simulation", path=path)

    spec = doc.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise err("spec", "Invalid value: must be a mapping")
    for key in spec:
        if key != "preemption":
            raise err(f"spec.{key}", 'Unsupported value: the known field is "preemption"')
    out: dict[str, Any] = {}
    if "preemption" in spec:
        if not isinstance(spec["preemption"], bool):
            raise err("spec.preemption", "Invalid value: must be true or false")
        out["preemption"] = spec["preemption"]
    return out


class _DocError(Exception):
    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


def _parse_document(doc: Any, number: int, source: str) -> list[ScenarioObject]:
    what = ""
    try:
        if not isinstance(doc, dict):
            raise _DocError("", f"expected a manifest (a mapping), got {type(doc).__name__}")
        api_version = doc.get("apiVersion")
        kind = doc.get("kind")
        if not isinstance(api_version, str) or not api_version:
            raise _DocError("apiVersion", "Required value")
        if not isinstance(kind, str) or not kind:
            raise _DocError("kind", "Required value")
        meta = doc.get("metadata")
        if not isinstance(meta, dict):
            raise _DocError("metadata", "Required value")
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise _DocError("metadata.name", "Required value")
        what = f"{kind} {name}"
        is_pool = api_version == NODE_POOL_API_VERSION and kind == "NodePool"
        info = None
        if not is_pool and not api_version.startswith("sim.workloadbuilder.io/"):
            try:
                info = resource_info(kind, api_version)
            except KeyError:
                raise _DocError(
                    "kind",
                    f'Unsupported value: "{api_version}, Kind={kind}": not a kind the '
                    "simulator knows",
                ) from None
        namespace: str | None = None
        if info is not None and info.namespaced:
            ns = meta.get("namespace", "default")
            if not isinstance(ns, str) or not ns:
                raise _DocError("metadata.namespace", "Invalid value: must be a non-empty string")
            namespace = ns
            what = f"{kind} {ns}/{name}"
        arrival, duration = _sim_annotations(meta)
        if is_pool:
            return _node_pool_objects(doc, number, arrival, duration)
        if info is None:
            raise _DocError(
                "kind",
                f'Unsupported value: "{kind}": {api_version} has only kinds NodePool and '
                "Simulation",
            )
        manifest = copy.deepcopy(doc)
        if namespace is not None:
            manifest["metadata"]["namespace"] = namespace
        _check_kind(manifest)
        return [
            ScenarioObject(
                document=number,
                api_version=api_version,
                kind=kind,
                name=name,
                namespace=namespace,
                arrival=arrival,
                duration=duration,
                manifest=manifest,
            )
        ]
    except _DocError as e:
        raise ScenarioError(
            e.message, source=source, document=number, what=what, path=e.path
        ) from None


def _lifecycle_annotations(
    doc: Mapping[str, Any], number: int, source: str, parsed: list[ScenarioObject]
) -> tuple[float | None, float | None]:
    """``sim.workloadbuilder.io/at`` and ``delete-at`` of a (valid) document."""
    annotations = (doc.get("metadata") or {}).get("annotations") or {}
    what = parsed[0].key if len(parsed) == 1 else f"{doc.get('kind')} {doc['metadata']['name']}"
    out: list[float | None] = []
    for name in (AT_ANNOTATION, DELETE_AT_ANNOTATION):
        if name not in annotations:
            out.append(None)
            continue
        try:
            out.append(_duration_at(f"metadata.annotations[{name}]", annotations[name]))
        except _DocError as e:
            raise ScenarioError(
                e.message, source=source, document=number, what=what, path=e.path
            ) from None
    if out[0] is not None and ARRIVAL_ANNOTATION in annotations:
        raise ScenarioError(
            f"Forbidden: an update happens at {AT_ANNOTATION}; it has no {ARRIVAL_ANNOTATION}",
            source=source,
            document=number,
            what=what,
            path=f"metadata.annotations[{ARRIVAL_ANNOTATION}]",
        )
    return out[0], out[1]


def _sim_annotations(meta: Mapping[str, Any]) -> tuple[float, float | None]:
    annotations = meta.get("annotations") or {}
    if not isinstance(annotations, dict):
        raise _DocError("metadata.annotations", "Invalid value: must be a map of strings")
    for key, value in annotations.items():
        if not isinstance(value, str):
            raise _DocError(
                f"metadata.annotations[{key}]",
                f"Invalid value: {value!r}: annotation values are strings (quote it)",
            )
    arrival = 0.0
    duration: float | None = None
    if ARRIVAL_ANNOTATION in annotations:
        arrival = _duration_at(
            f"metadata.annotations[{ARRIVAL_ANNOTATION}]", annotations[ARRIVAL_ANNOTATION]
        )
    if DURATION_ANNOTATION in annotations:
        duration = _duration_at(
            f"metadata.annotations[{DURATION_ANNOTATION}]", annotations[DURATION_ANNOTATION]
        )
    return arrival, duration


def _duration_at(path: str, value: Any) -> float:
    try:
        return parse_duration(value)
    except ValueError as e:
        raise _DocError(path, f'Invalid value: "{value}": {e}') from None


def _mapping(doc: Mapping[str, Any], path: str, *, required: bool = False) -> dict[str, Any]:
    cur: Any = doc
    for part in path.split("."):
        if not isinstance(cur, Mapping):
            raise _DocError(path, "Invalid value: expected an object")
        cur = cur.get(part)
        if cur is None:
            if required:
                raise _DocError(path, "Required value")
            return {}
    if not isinstance(cur, dict):
        raise _DocError(path, f"Invalid value: expected an object, got {type(cur).__name__}")
    return cur


def _int_field(
    obj: Mapping[str, Any], key: str, path: str, *, default: int | None, minimum: int
) -> int | None:
    value = obj.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise _DocError(path, f"Invalid value: {value!r}: must be an integer")
    if value < minimum:
        raise _DocError(path, f"Invalid value: {value}: must be greater than or equal to {minimum}")
    return value


def _check_pod_spec(spec: Any, path: str) -> None:
    if not isinstance(spec, dict):
        raise _DocError(path, "Required value")
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        raise _DocError(f"{path}.containers", "Required value")
    for i, c in enumerate(containers):
        if not isinstance(c, dict):
            raise _DocError(f"{path}.containers[{i}]", "Invalid value: expected an object")
        resources = c.get("resources") or {}
        if not isinstance(resources, dict):
            raise _DocError(
                f"{path}.containers[{i}].resources", "Invalid value: expected an object"
            )
        for part in ("requests", "limits"):
            values = resources.get(part) or {}
            if not isinstance(values, dict):
                raise _DocError(
                    f"{path}.containers[{i}].resources.{part}", "Invalid value: expected an object"
                )
            for res, q in values.items():
                _quantity_at(f"{path}.containers[{i}].resources.{part}[{res}]", q)


def _quantity_at(path: str, value: Any) -> float:
    try:
        q = parse_quantity(value)
    except ValueError as e:
        raise _DocError(path, f'Invalid value: "{value}": {e}') from None
    if q < 0:
        raise _DocError(path, f'Invalid value: "{value}": must not be negative')
    return q


def _check_kind(doc: dict[str, Any]) -> None:
    kind = doc["kind"]
    if kind in ("Workload", "PodGroup", "CompositePodGroup"):
        try:
            object_from_dict(doc)
        except CodecError as e:
            raise _DocError(e.path, e.detail) from None
    elif kind in RESOURCE_KINDS:  # DeviceClass, ResourceSlice, ResourceClaim(Template)
        try:
            resource_object_from_dict(doc)
        except CodecError as e:
            raise _DocError(e.path, e.detail) from None
    elif kind == "Pod":
        _check_pod_spec(doc.get("spec"), "spec")
    elif kind == "Node":
        alloc = _mapping(doc, "status.allocatable")
        for res, q in alloc.items():
            _quantity_at(f"status.allocatable[{res}]", q)
    elif kind == "PriorityClass":
        value = doc.get("value")
        if isinstance(value, bool) or not isinstance(value, int):
            raise _DocError("value", "Required value: an integer priority")
    elif kind == "Job":
        _check_job_spec(_mapping(doc, "spec", required=True), "spec")
    elif kind == "JobSet":
        spec = _mapping(doc, "spec", required=True)
        rjobs = spec.get("replicatedJobs")
        if not isinstance(rjobs, list) or not rjobs:
            raise _DocError("spec.replicatedJobs", "Required value")
        for i, rj in enumerate(rjobs):
            path = f"spec.replicatedJobs[{i}]"
            if not isinstance(rj, dict):
                raise _DocError(path, "Invalid value: expected an object")
            if not isinstance(rj.get("name"), str) or not rj["name"]:
                raise _DocError(f"{path}.name", "Required value")
            replicas = _int_field(rj, "replicas", f"{path}.replicas", default=1, minimum=0)
            _at_most(replicas, f"{path}.replicas")
            _check_job_spec(
                _mapping(rj, "template.spec", required=True), f"{path}.template.spec", replicas or 0
            )
    elif kind == "LeaderWorkerSet":
        spec = _mapping(doc, "spec", required=True)
        replicas = _int_field(spec, "replicas", "spec.replicas", default=1, minimum=0)
        lwt = _mapping(spec, "leaderWorkerTemplate", required=True)
        size = _int_field(lwt, "size", "spec.leaderWorkerTemplate.size", default=1, minimum=1)
        policy = lwt.get("restartPolicy")
        if policy is not None and policy not in LWS_RESTART_POLICIES:
            supported = ", ".join(f'"{v}"' for v in LWS_RESTART_POLICIES)
            raise _DocError(
                "spec.leaderWorkerTemplate.restartPolicy",
                f'Unsupported value: "{policy}": supported values: {supported}',
            )
        _at_most(replicas, "spec.replicas")
        _at_most(size, "spec.leaderWorkerTemplate.size")
        _at_most((replicas or 0) * (size or 1), "spec.replicas")
        for part in ("workerTemplate", "leaderTemplate"):
            _check_template_annotations(lwt.get(part), f"spec.leaderWorkerTemplate.{part}")
        _check_pod_spec(
            _mapping(lwt, "workerTemplate.spec", required=True),
            "spec.leaderWorkerTemplate.workerTemplate.spec",
        )
        if lwt.get("leaderTemplate") is not None:
            _check_pod_spec(
                _mapping(lwt, "leaderTemplate.spec", required=True),
                "spec.leaderWorkerTemplate.leaderTemplate.spec",
            )


def _at_most(value: int | None, path: str, limit: int = MAX_PODS_PER_OBJECT) -> None:
    if value is not None and value > limit:
        raise _DocError(
            path, f"Too many: {value}: the simulator creates at most {limit} pods per object"
        )


def _check_job_spec(spec: dict[str, Any], path: str, replicas: int = 1) -> None:
    parallelism = _int_field(spec, "parallelism", f"{path}.parallelism", default=1, minimum=0)
    completions = _int_field(spec, "completions", f"{path}.completions", default=None, minimum=0)
    _at_most((parallelism or 0) * replicas, f"{path}.parallelism")
    _at_most(completions, f"{path}.completions")
    _check_template_annotations(spec.get("template"), f"{path}.template")
    _check_pod_spec(_mapping(spec, "template.spec", required=True), f"{path}.template.spec")


def _check_template_annotations(template: Any, path: str) -> None:
    """A pod template may carry its own ``sim.workloadbuilder.io/duration``."""
    meta = template.get("metadata") if isinstance(template, dict) else None
    if not isinstance(meta, dict):
        return
    try:
        _sim_annotations(meta)
    except _DocError as e:
        raise _DocError(f"{path}.{e.path}", e.message) from None


def expand_node_pool(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The Node manifests of a ``NodePool`` document.

    Node ``i`` is named ``<namePrefix><i>`` (zero-padded to the width of ``count - 1``); it gets
    the pool's labels, ``kubernetes.io/hostname``, ``sim.workloadbuilder.io/pool`` and, for each
    ``topology`` entry ``{key, size}``, label ``key`` = ``<pool>-<leaf>-<i // size>`` where
    ``leaf`` is the last segment of ``key`` (``example.com/rack`` -> ``rack``). ``allocatable``
    becomes both capacity and allocatable. Raises ``ValueError`` via :func:`parse_scenario`
    for bad input; call that for error messages with document numbers.
    """
    try:
        return _expand(doc)
    except _DocError as e:
        raise ScenarioError(e.message, path=e.path) from None


def _expand(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    meta = doc.get("metadata") or {}
    pool = str(meta.get("name"))
    spec = _mapping(doc, "spec", required=True)
    known = {
        "count",
        "namePrefix",
        "labels",
        "taints",
        "allocatable",
        "topology",
        "unschedulable",
        "devices",
    }
    for key in spec:
        if key not in known:
            raise _DocError(
                f"spec.{key}", f'Unsupported value: "{key}": known fields: {sorted(known)}'
            )
    count = _int_field(spec, "count", "spec.count", default=None, minimum=0)
    if count is None:
        raise _DocError("spec.count", "Required value")
    if count > MAX_NODES:
        raise _DocError(
            "spec.count", f"Too many: {count}: a scenario can simulate at most {MAX_NODES} nodes"
        )
    prefix = spec.get("namePrefix", f"{pool}-")
    if not isinstance(prefix, str) or not prefix:
        raise _DocError("spec.namePrefix", "Invalid value: must be a non-empty string")
    labels = spec.get("labels") or {}
    if not isinstance(labels, dict):
        raise _DocError("spec.labels", "Invalid value: must be a map of strings")
    for k, v in labels.items():
        if not isinstance(v, str):
            raise _DocError(f"spec.labels[{k}]", f"Invalid value: {v!r}: label values are strings")
    taints = spec.get("taints") or []
    if not isinstance(taints, list):
        raise _DocError("spec.taints", "Invalid value: must be a list")
    for i, t in enumerate(taints):
        if not isinstance(t, dict) or not isinstance(t.get("key"), str) or not t["key"]:
            raise _DocError(f"spec.taints[{i}].key", "Required value")
        if t.get("effect") not in _TAINT_EFFECTS:
            raise _DocError(
                f"spec.taints[{i}].effect",
                f'Unsupported value: "{t.get("effect")}": supported values: '
                + ", ".join(f'"{e}"' for e in _TAINT_EFFECTS),
            )
    alloc = spec.get("allocatable")
    if not isinstance(alloc, dict) or not alloc:
        raise _DocError("spec.allocatable", "Required value")
    for res, q in alloc.items():
        _quantity_at(f"spec.allocatable[{res}]", q)
    alloc = {str(k): str(v) for k, v in alloc.items()}
    alloc.setdefault("pods", "110")
    topology = spec.get("topology") or []
    if not isinstance(topology, list):
        raise _DocError("spec.topology", "Invalid value: must be a list of {key, size}")
    levels: list[tuple[str, int, str]] = []
    for i, entry in enumerate(topology):
        path = f"spec.topology[{i}]"
        if not isinstance(entry, dict):
            raise _DocError(path, "Invalid value: expected {key, size}")
        tkey = entry.get("key")
        if not isinstance(tkey, str) or not tkey:
            raise _DocError(f"{path}.key", "Required value")
        size = _int_field(entry, "size", f"{path}.size", default=None, minimum=1)
        if size is None:
            raise _DocError(f"{path}.size", "Required value")
        leaf = tkey.rsplit("/", 1)[-1]
        levels.append((tkey, size, leaf))
    width = len(str(max(count - 1, 0)))
    nodes: list[dict[str, Any]] = []
    for i in range(count):
        name = f"{prefix}{i:0{width}d}"
        node_labels = dict(labels)
        node_labels["kubernetes.io/hostname"] = name
        node_labels[POOL_LABEL] = pool
        for key, size, leaf in levels:
            value = f"{pool}-{leaf}-{i // size}"
            if len(value) > 63 or not _LABEL_VALUE.match(value):
                raise _DocError("metadata.name", f"Invalid value: {value!r} is not a label value")
            node_labels[key] = value
        node: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": node_labels},
            "spec": {},
            "status": {
                "capacity": dict(alloc),
                "allocatable": dict(alloc),
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            },
        }
        if taints:
            node["spec"]["taints"] = copy.deepcopy(taints)
        if spec.get("unschedulable"):
            node["spec"]["unschedulable"] = True
        nodes.append(node)
    return nodes


def _node_pool_objects(
    doc: Mapping[str, Any], number: int, arrival: float, duration: float | None
) -> list[ScenarioObject]:
    pool = str(doc["metadata"]["name"])
    nodes = _expand(doc)
    try:  # the DRA shorthand: one ResourceSlice per node and driver
        devices = parse_devices((doc.get("spec") or {}).get("devices"))
    except DeviceShorthandError as e:
        raise _DocError(e.path, e.message) from None
    slices = [
        ScenarioObject(
            document=number,
            api_version="resource.k8s.io/v1",
            kind="ResourceSlice",
            name=sl["metadata"]["name"],
            namespace=None,
            arrival=arrival,
            duration=None,
            manifest=sl,
            pool=pool,
        )
        for node in nodes
        for sl in node_slices(node["metadata"]["name"], devices)
    ]
    return [
        ScenarioObject(
            document=number,
            api_version="v1",
            kind="Node",
            name=node["metadata"]["name"],
            namespace=None,
            arrival=arrival,
            duration=duration,
            manifest=node,
            pool=pool,
        )
        for node in nodes
    ] + slices
