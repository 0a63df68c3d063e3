"""``MemoryCluster``: the embedded, in-process implementation of the :class:`Cluster` protocol.

It is the default cluster of the SDK and the substrate of the simulator, so the hot paths
(create, update, patch, bind, indexed list, watch fan-out) avoid needless work:

* every stored object is a private JSON dict that is never mutated after it is stored (a new
  version is a new dict), so watch events and history share it safely and callers get a copy
  made only when they read it; typed models (Workload, PodGroup, CompositePodGroup) are decoded
  once per stored version and shared (they are frozen);
* one resourceVersion counter for everything; a bounded per-kind event history for watches
  (older resourceVersions answer ``Gone``);
* per-kind indexes on ``spec.nodeName`` and ``spec.schedulingGroup.podGroupName`` (pods),
  ownerReference uid (garbage collection) and uid.

See docs/cluster.md for the model and the documented differences from a real API server.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import random
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any, Literal

import attrs

from workloadbuilder.api import CompositePodGroup, PodGroup, Workload, from_dict, to_dict
from workloadbuilder.cluster import _admission as adm
from workloadbuilder.cluster._patch import (
    FieldPath,
    PatchError,
    field_paths,
    get_path,
    json_copy,
    json_merge_patch,
    json_patch,
    remove_path,
    strategic_merge_patch,
)
from workloadbuilder.cluster._protocol import (
    KubeObject,
    ObjectList,
    PatchType,
    Preconditions,
    PropagationPolicy,
    ResourceInfo,
    WatchEvent,
    resource_info,
    resource_of,
)
from workloadbuilder.cluster._selectors import (
    FieldRequirement,
    LabelRequirement,
    bad_request,
    label_selector_from_dict,
    match_labels,
    parse_field_selector,
    parse_label_selector,
)
from workloadbuilder.errors import (
    AlreadyExists,
    ApiError,
    Conflict,
    FieldError,
    Gone,
    NotFound,
    TooManyRequests,
)
from workloadbuilder.validation import FeatureGates

__all__ = ["MemoryCluster"]

_FOREGROUND = "foregroundDeletion"
_ORPHAN = "orphan"
_GEN_CHARS = "bcdfghjklmnpqrstvwxz2456789"
_TERMINAL = ("Succeeded", "Failed")

#: field selector paths every kind supports
_COMMON_FIELDS = frozenset({"metadata.name", "metadata.namespace"})
#: (group, plural) -> extra field selector paths (as the real server's field label conversions)
_EXTRA_FIELDS: dict[tuple[str, str], frozenset[str]] = {
    ("", "pods"): frozenset(
        {
            "spec.nodeName",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.restartPolicy",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
            "spec.schedulingGroup.podGroupName",
        }
    ),
    ("", "nodes"): frozenset({"spec.unschedulable"}),
    ("", "namespaces"): frozenset({"status.phase"}),
    ("", "events"): frozenset(
        {
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        }
    ),
}
#: (group, plural) -> field paths kept in an index (value -> keys)
_INDEXED: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "pods"): ("spec.nodeName", "spec.schedulingGroup.podGroupName"),
}

Key = tuple[str, str]  # (namespace or "", name)
#: kinds whose registry strategy does not maintain metadata.generation (checked on v1.37.2)
_NO_GENERATION = frozenset(
    {
        ("", "configmaps"),
        ("", "namespaces"),
        ("", "nodes"),
        ("", "events"),
        ("", "secrets"),
        ("", "services"),
        ("", "endpoints"),
        ("coordination.k8s.io", "leases"),
        ("scheduling.k8s.io", "workloads"),
        ("scheduling.k8s.io", "podgroups"),
        ("scheduling.k8s.io", "compositepodgroups"),
    }
)
#: kinds that refuse an update without metadata.resourceVersion (no unconditional update)
_NEEDS_RV_ON_UPDATE_GROUPS = ("scheduling.k8s.io", "jobset.x-k8s.io", "leaderworkerset.x-k8s.io")
_List = list
#: the resource named in binding conflicts ("Operation cannot be fulfilled on pods/binding ...")
_BINDING = ResourceInfo(group="", version="v1", kind="Binding", plural="pods/binding")
_APPLY_META = ("labels", "annotations", "finalizers", "ownerReferences")


def _split(path: str) -> tuple[str, ...]:
    return tuple(path.split("."))


def _dig(doc: Mapping[str, Any], parts: tuple[str, ...]) -> Any:
    node: Any = doc
    for p in parts:
        if not isinstance(node, dict):
            return None
        node = node.get(p)
        if node is None:
            return None
    return node


def _field_str(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class _Rec:
    """One stored version of an object (``doc`` is never mutated once stored)."""

    __slots__ = ("doc", "model", "rv")

    def __init__(self, doc: dict[str, Any], rv: int) -> None:
        self.doc = doc
        self.rv = rv
        self.model: Any = None


class _Watcher:
    __slots__ = ("closed", "event", "field_reqs", "label_reqs", "namespace", "queue")

    def __init__(
        self,
        namespace: str | None,
        label_reqs: tuple[LabelRequirement, ...],
        field_reqs: tuple[tuple[tuple[str, ...], FieldRequirement], ...],
    ) -> None:
        self.namespace = namespace
        self.label_reqs = label_reqs
        self.field_reqs = field_reqs
        self.queue: deque[tuple[str, _Rec]] = deque()
        self.event = asyncio.Event()
        self.closed = False

    def matches(self, doc: Mapping[str, Any]) -> bool:
        if self.label_reqs and not match_labels(
            self.label_reqs, (doc.get("metadata") or {}).get("labels")
        ):
            return False
        return all(req.matches(_field_str(_dig(doc, parts))) for parts, req in self.field_reqs)


class _Store:
    """All objects of one resource (all versions of it share one store)."""

    def __init__(self, info: ResourceInfo, history: int) -> None:
        self.info = info
        self.key = (info.group, info.plural)
        self.objects: dict[str, dict[str, _Rec]] = {}
        self.sorted_names: dict[str, list[str]] = {}
        self.history: deque[tuple[int, str, _Rec, _Rec | None]] = deque()
        self.history_limit = history
        self.floor = 0
        self.watchers: list[_Watcher] = []
        self.fields = _COMMON_FIELDS | _EXTRA_FIELDS.get(self.key, frozenset())
        self.index_paths = tuple((p, _split(p)) for p in _INDEXED.get(self.key, ()))
        self.indexes: dict[str, dict[str, set[Key]]] = {p: {} for p, _ in self.index_paths}

    def get(self, ns: str, name: str) -> _Rec | None:
        bucket = self.objects.get(ns)
        return bucket.get(name) if bucket is not None else None

    def iter_sorted(
        self, namespace: str | None, after: Key | None = None
    ) -> Iterator[tuple[Key, _Rec]]:
        """Objects in (namespace, name) order, optionally only those after ``after``."""
        namespaces = [namespace] if namespace is not None else sorted(self.objects)
        for ns in namespaces:
            if after is not None and ns < after[0]:
                continue
            bucket = self.objects.get(ns)
            if not bucket:
                continue
            names = self.sorted_names.get(ns)
            if names is None:
                names = sorted(bucket)
                self.sorted_names[ns] = names
            start = bisect.bisect_right(names, after[1]) if after and ns == after[0] else 0
            for i in range(start, len(names)):
                n = names[i]
                yield (ns, n), bucket[n]

    def index_add(self, key: Key, doc: Mapping[str, Any]) -> None:
        for path, parts in self.index_paths:
            value = _dig(doc, parts)
            if value:
                self.indexes[path].setdefault(str(value), set()).add(key)

    def index_remove(self, key: Key, doc: Mapping[str, Any]) -> None:
        for path, parts in self.index_paths:
            value = _dig(doc, parts)
            if value:
                bucket = self.indexes[path].get(str(value))
                if bucket is not None:
                    bucket.discard(key)
                    if not bucket:
                        del self.indexes[path][str(value)]

    def record(self, rv: int, etype: str, rec: _Rec, old: _Rec | None) -> None:
        hist = self.history
        hist.append((rv, etype, rec, old))
        if len(hist) > self.history_limit:
            self.floor = hist.popleft()[0]


def _meta(doc: dict[str, Any]) -> dict[str, Any]:
    meta = doc.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
        doc["metadata"] = meta
    return meta


def _spec_part(doc: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def _owner_uids(doc: Mapping[str, Any]) -> list[str]:
    refs = (doc.get("metadata") or {}).get("ownerReferences") or ()
    return [str(r.get("uid")) for r in refs if isinstance(r, dict) and r.get("uid")]


class MemoryCluster:
    """An in-process API server: the embedded default :class:`Cluster` and the simulator's
    substrate.

    ``clock`` gives timestamps (seconds since the epoch; the simulator passes a virtual
    clock). ``admission`` enables defaulting, Priority admission, PodGroup protection and the
    SDK's validation of our kinds (``gates`` are the validation feature gates).
    ``history`` is the number of events kept per kind for watches to resume from.
    ``bookmark_interval`` is the idle time (event-loop seconds) after which a watch sends a
    BOOKMARK. ``seed`` makes generated names and uids reproducible (``None``: random).
    ``share_objects=True`` returns the stored dicts themselves from reads and watches instead
    of copies (faster fan-out; callers must then treat every returned dict as read-only).
    """

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.time,
        admission: bool = True,
        gates: FeatureGates | None = None,
        history: int = 10000,
        bookmark_interval: float = 60.0,
        seed: int | None = 0,
        share_objects: bool = False,
    ) -> None:
        self._clock = clock
        self._share = share_objects
        self._admission = admission
        self._gates = gates if gates is not None else FeatureGates()
        self._history = max(1, history)
        self._bookmark_interval = bookmark_interval
        self._rng = random.Random(seed)
        self._rv = 0
        self._stores: dict[tuple[str, str], _Store] = {}
        self._by_uid: dict[str, tuple[_Store, Key]] = {}
        self._dependents: dict[str, set[tuple[_Store, Key]]] = {}
        self._managed: dict[tuple[tuple[str, str], Key], dict[FieldPath, set[str]]] = {}
        self._closed = False
        self._preempt_gate = self._gates.pod_group_preemption_policy
        self._bootstrap()

    # ------------------------------------------------------------------ infrastructure

    def _bootstrap(self) -> None:
        for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
            self._create_doc(
                resource_info("Namespace"),
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                None,
            )
        for name, value in adm.SYSTEM_PRIORITY_CLASSES.items():
            self._create_doc(
                resource_info("PriorityClass"),
                {
                    "apiVersion": "scheduling.k8s.io/v1",
                    "kind": "PriorityClass",
                    "metadata": {"name": name},
                    "value": value,
                    "preemptionPolicy": "PreemptLowerPriority",
                    "description": "Used for system critical pods that must run in the cluster.",
                },
                None,
            )

    @property
    def resource_version(self) -> str:
        """The newest resourceVersion (the counter shared by every kind)."""
        return str(self._rv)

    def _store(self, info: ResourceInfo) -> _Store:
        key = (info.group, info.plural)
        store = self._stores.get(key)
        if store is None:
            store = _Store(info, self._history)
            self._stores[key] = store
        return store

    def _info(self, kind: str | ResourceInfo) -> ResourceInfo:
        try:
            return resource_info(kind)
        except KeyError as e:
            raise NotFound(str(e.args[0]) if e.args else "unknown kind") from None

    def _now(self) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self._clock()))

    def _next_rv(self) -> int:
        self._rv += 1
        return self._rv

    def _new_uid(self) -> str:
        return str(uuid.UUID(int=self._rng.getrandbits(128), version=4))

    def _ns_of(self, info: ResourceInfo, namespace: str | None) -> str:
        if not info.namespaced:
            return ""
        return namespace or "default"

    def _not_found(self, info: ResourceInfo, name: str) -> NotFound:
        message = f'{adm.resource_name(info)} "{name}" not found'
        return NotFound(
            message,
            body={
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "message": message,
                "reason": "NotFound",
                "details": {"name": name, "group": info.group, "kind": info.plural},
                "code": 404,
            },
        )

    def _conflict(self, info: ResourceInfo, name: str, detail: str) -> Conflict:
        return Conflict(
            f'Operation cannot be fulfilled on {adm.resource_name(info)} "{name}": {detail}'
        )

    def _uid_conflict(self, info: ResourceInfo, name: str, given: str, actual: Any) -> Conflict:
        return self._conflict(
            info,
            name,
            f"Precondition failed: UID in precondition: {given}, UID in object meta: {actual}",
        )

    def _get_rec(self, info: ResourceInfo, ns: str, name: str) -> tuple[_Store, _Rec]:
        store = self._store(info)
        rec = store.get(ns, name)
        if rec is None:
            raise self._not_found(info, name)
        return store, rec

    def _out(self, rec: _Rec, info: ResourceInfo) -> KubeObject:
        model_cls = adm.TYPED_KINDS.get((info.group, info.plural))
        if model_cls is not None:
            model: Workload | PodGroup | CompositePodGroup | None = rec.model
            if model is None:
                model = from_dict(json_copy(rec.doc), model_cls)
                rec.model = model
            if model.api_version != info.api_version:
                return attrs.evolve(model, api_version=info.api_version)
            return model
        if self._share and rec.doc.get("apiVersion") == info.api_version:
            return rec.doc
        out: dict[str, Any] = json_copy(rec.doc)
        if out.get("apiVersion") != info.api_version:
            out["apiVersion"] = info.api_version
        return out

    def _ingest(self, obj: KubeObject) -> tuple[ResourceInfo, dict[str, Any]]:
        try:
            info = resource_of(obj)
        except KeyError as e:
            raise NotFound(str(e.args[0]) if e.args else "unknown kind") from None
        doc = json_copy(obj) if isinstance(obj, dict) else json_copy(to_dict(obj))
        if not isinstance(doc, dict):
            raise bad_request("an object must be a JSON object")
        return info, doc

    # ------------------------------------------------------------------ storage primitives

    def _emit(self, store: _Store, etype: str, rec: _Rec, old: _Rec | None) -> None:
        store.record(rec.rv, etype, rec, old)
        if store.watchers:
            ns = (rec.doc.get("metadata") or {}).get("namespace", "")
            for w in store.watchers:
                self._route(w, etype, rec, old, ns)

    @staticmethod
    def _route(w: _Watcher, etype: str, rec: _Rec, old: _Rec | None, ns: str) -> None:
        if w.namespace is not None and w.namespace != ns:
            return
        if not w.label_reqs and not w.field_reqs:
            w.queue.append((etype, rec))
        elif etype == "MODIFIED":
            new_ok = w.matches(rec.doc)
            old_ok = old is not None and w.matches(old.doc)
            if new_ok:
                w.queue.append(("MODIFIED" if old_ok else "ADDED", rec))
            elif old_ok:
                w.queue.append(("DELETED", rec))
            else:
                return
        elif w.matches(rec.doc):
            w.queue.append((etype, rec))
        else:
            return
        w.event.set()

    def _insert(self, store: _Store, key: Key, doc: dict[str, Any]) -> _Rec:
        rv = self._next_rv()
        doc["metadata"]["resourceVersion"] = str(rv)
        rec = _Rec(doc, rv)
        bucket = store.objects.get(key[0])
        if bucket is None:
            bucket = store.objects[key[0]] = {}
        bucket[key[1]] = rec
        store.sorted_names.pop(key[0], None)
        store.index_add(key, doc)
        meta = doc["metadata"]
        uid = meta.get("uid")
        if uid:
            self._by_uid[uid] = (store, key)
        for owner in _owner_uids(doc):
            self._dependents.setdefault(owner, set()).add((store, key))
        self._emit(store, "ADDED", rec, None)
        return rec

    def _replace(self, store: _Store, key: Key, old: _Rec, doc: dict[str, Any]) -> _Rec:
        rv = self._next_rv()
        doc["metadata"]["resourceVersion"] = str(rv)
        rec = _Rec(doc, rv)
        store.objects[key[0]][key[1]] = rec
        if store.index_paths:
            store.index_remove(key, old.doc)
            store.index_add(key, doc)
        old_owners = _owner_uids(old.doc)
        new_owners = _owner_uids(doc)
        if old_owners != new_owners:
            for o in old_owners:
                deps = self._dependents.get(o)
                if deps is not None:
                    deps.discard((store, key))
                    if not deps:
                        del self._dependents[o]
            for o in new_owners:
                self._dependents.setdefault(o, set()).add((store, key))
        self._emit(store, "MODIFIED", rec, old)
        return rec

    def _drop(self, store: _Store, key: Key, old: _Rec) -> _Rec:
        rv = self._next_rv()
        doc = dict(old.doc)
        doc["metadata"] = dict(doc["metadata"])
        doc["metadata"]["resourceVersion"] = str(rv)
        rec = _Rec(doc, rv)
        bucket = store.objects[key[0]]
        del bucket[key[1]]
        if not bucket:
            del store.objects[key[0]]
        store.sorted_names.pop(key[0], None)
        store.index_remove(key, old.doc)
        uid = doc["metadata"].get("uid")
        if uid:
            self._by_uid.pop(uid, None)
        for o in _owner_uids(doc):
            deps = self._dependents.get(o)
            if deps is not None:
                deps.discard((store, key))
                if not deps:
                    del self._dependents[o]
        self._managed.pop((store.key, key), None)
        self._emit(store, "DELETED", rec, old)
        return rec

    # ------------------------------------------------------------------ reads

    async def get(
        self, kind: str | ResourceInfo, name: str, namespace: str | None = None
    ) -> KubeObject:
        """Read one object."""
        info = self._info(kind)
        _, rec = self._get_rec(info, self._ns_of(info, namespace), name)
        return self._out(rec, info)

    def _field_reqs(
        self, store: _Store, field_selector: str | None
    ) -> tuple[tuple[tuple[str, ...], FieldRequirement], ...]:
        reqs = parse_field_selector(field_selector)
        out = []
        for r in reqs:
            if r.path not in store.fields:
                raise bad_request(f"field label not supported: {r.path}")
            out.append((_split(r.path), r))
        return tuple(out)

    def _select(
        self,
        store: _Store,
        namespace: str | None,
        lreqs: tuple[LabelRequirement, ...],
        freqs: tuple[tuple[tuple[str, ...], FieldRequirement], ...],
        after: Key | None = None,
    ) -> Iterator[tuple[Key, _Rec]]:
        ns_filter = namespace if store.info.namespaced else None
        for parts, req in freqs:
            path = ".".join(parts)
            if req.op == "=" and path in store.indexes and req.value:
                keys = sorted(store.indexes[path].get(req.value, ()))
                candidates: Iterator[tuple[Key, _Rec]] = (
                    (k, r)
                    for k in keys
                    if (ns_filter is None or k[0] == ns_filter) and (r := store.get(*k)) is not None
                )
                break
            if req.op == "=" and path == "metadata.name":
                name = req.value
                candidates = (
                    ((ns, name), b[name])
                    for ns, b in sorted(store.objects.items())
                    if (ns_filter is None or ns == ns_filter) and name in b
                )
                break
        else:
            candidates = store.iter_sorted(ns_filter, after)
        if not lreqs and not freqs:
            yield from candidates
            return
        for key, rec in candidates:
            doc = rec.doc
            if lreqs and not match_labels(lreqs, (doc.get("metadata") or {}).get("labels")):
                continue
            if freqs and not all(req.matches(_field_str(_dig(doc, parts))) for parts, req in freqs):
                continue
            yield key, rec

    async def list(
        self,
        kind: str | ResourceInfo,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> ObjectList:
        """List objects (sorted by namespace/name), one page at a time when ``limit`` is given.

        Continue tokens carry the last key; later pages read the current state (not a
        snapshot at the first page's resourceVersion as etcd does)."""
        info = self._info(kind)
        store = self._store(info)
        lreqs = parse_label_selector(label_selector)
        freqs = self._field_reqs(store, field_selector)
        after: Key | None = None
        list_rv = self._rv
        if continue_token:
            try:
                rv_s, after_ns, after_name = continue_token.split("/", 2)
                list_rv = int(rv_s)
            except ValueError:
                raise bad_request(f"invalid continue token {continue_token!r}") from None
            after = (after_ns, after_name)
        items: list[KubeObject] = []
        next_token: str | None = None
        last: Key | None = None
        for key, rec in self._select(store, namespace or None, lreqs, freqs, after):
            if after is not None and key <= after:
                continue
            if limit is not None and limit > 0 and len(items) >= limit:
                assert last is not None
                next_token = f"{list_rv}/{last[0]}/{last[1]}"
                break
            items.append(self._out(rec, info))
            last = key
        return ObjectList(
            items=tuple(items), resource_version=str(list_rv), continue_token=next_token
        )

    async def watch(
        self,
        kind: str | ResourceInfo,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        allow_bookmarks: bool = True,
        timeout_seconds: float | None = None,
    ) -> AsyncIterator[WatchEvent]:
        """Stream changes after ``resource_version`` (``None``/``"0"``: synthetic ADDED events
        for the current state first). Raises ``Gone`` when the version is older than the
        retained history."""
        info = self._info(kind)
        store = self._store(info)
        lreqs = parse_label_selector(label_selector)
        freqs = self._field_reqs(store, field_selector)
        ns = namespace if info.namespaced and namespace else None  # "": all, as on a server
        w = _Watcher(ns, lreqs, freqs)
        if resource_version in (None, "", "0"):
            for _, rec in self._select(store, ns, lreqs, freqs):
                w.queue.append(("ADDED", rec))
        else:
            try:
                since = int(str(resource_version))
            except ValueError:
                raise bad_request(f"invalid resource version {resource_version!r}") from None
            if since < store.floor:
                raise Gone(f"too old resource version: {since} ({store.floor + 1})")
            for rv, etype, rec, old in store.history:
                if rv > since:
                    self._route(
                        w, etype, rec, old, (rec.doc.get("metadata") or {}).get("namespace", "")
                    )
        store.watchers.append(w)
        loop = asyncio.get_running_loop()
        deadline = None if timeout_seconds is None else loop.time() + timeout_seconds
        try:
            while True:
                while w.queue:
                    etype, rec = w.queue.popleft()
                    yield WatchEvent(type=etype, object=self._out(rec, info))  # type: ignore[arg-type]
                if w.closed or self._closed:
                    return
                w.event.clear()
                wait = self._bookmark_interval
                if deadline is not None:
                    wait = min(wait, deadline - loop.time())
                if wait > 0:
                    timer = loop.call_later(wait, w.event.set)
                    try:
                        await w.event.wait()
                    finally:
                        timer.cancel()
                if w.queue or w.closed or self._closed:
                    continue
                if allow_bookmarks:
                    yield WatchEvent(type="BOOKMARK", object=self._bookmark(info))
                if deadline is not None and loop.time() >= deadline:
                    return
        finally:
            w.closed = True
            with contextlib.suppress(ValueError):
                store.watchers.remove(w)

    def _bookmark(self, info: ResourceInfo) -> dict[str, Any]:
        return {
            "apiVersion": info.api_version,
            "kind": info.kind,
            "metadata": {"resourceVersion": str(self._rv)},
        }

    # ------------------------------------------------------------------ create

    async def create(
        self,
        obj: KubeObject,
        namespace: str | None = None,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
    ) -> KubeObject:
        """Create an object; returns what was stored (defaults and server fields applied)."""
        info, doc = self._ingest(obj)
        rec = self._create_doc(info, doc, namespace, dry_run=dry_run, field_manager=field_manager)
        return self._out(rec, info)

    def _create_doc(
        self,
        info: ResourceInfo,
        doc: dict[str, Any],
        namespace: str | None,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
    ) -> _Rec:
        store = self._store(info)
        meta = _meta(doc)
        doc["apiVersion"] = doc.get("apiVersion") or info.api_version
        doc["kind"] = info.kind
        if info.namespaced:
            given = meta.get("namespace")
            if namespace and given and given != namespace:
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request"
                )
            ns = namespace or given or "default"
            meta["namespace"] = ns
        else:
            ns = ""
            meta.pop("namespace", None)
        if not meta.get("name") and meta.get("generateName"):
            for _ in range(8):
                candidate = meta["generateName"] + "".join(
                    self._rng.choice(_GEN_CHARS) for _ in range(5)
                )
                if store.get(ns, candidate) is None:
                    break
            meta["name"] = candidate
        name = str(meta.get("name") or "")
        if not name:
            raise adm.invalid(
                info,
                "",
                [
                    FieldError(
                        path="metadata.name",
                        type="Required value",
                        detail="name or generateName is required",
                    )
                ],
            )
        if info.namespaced:
            ns_rec = self._store(resource_info("Namespace")).get("", ns)
            if ns_rec is None:
                raise self._not_found(resource_info("Namespace"), ns)
            if ns_rec.doc["metadata"].get("deletionTimestamp"):
                raise adm.forbidden(
                    info,
                    name,
                    f"unable to create new content in namespace {ns} because it is being "
                    "terminated",
                )
        if store.get(ns, name) is not None:
            raise AlreadyExists(f'{adm.resource_name(info)} "{name}" already exists')
        for server_field in (
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "managedFields",
            "selfLink",
        ):
            meta.pop(server_field, None)
        meta["uid"] = self._new_uid()
        meta["creationTimestamp"] = self._now()
        if store.key not in _NO_GENERATION:
            meta["generation"] = 1
        self._prepare_create_status(info, doc)
        if self._admission:
            self._admit_create(info, ns, name, doc)
        elif (info.group, info.plural) in adm.TYPED_KINDS:
            adm.validate_typed(info, doc, None, None, run_validation=False)
        meta = doc["metadata"]
        if dry_run:
            meta.pop("resourceVersion", None)
            return _Rec(doc, 0)
        return self._insert(store, (ns, name), doc)

    def _prepare_create_status(self, info: ResourceInfo, doc: dict[str, Any]) -> None:
        if info.group:
            if info.has_status:
                doc.pop("status", None)
            if (info.group, info.plural) == ("policy", "poddisruptionbudgets"):
                doc["status"] = {
                    "disruptionsAllowed": 0,
                    "currentHealthy": 0,
                    "desiredHealthy": 0,
                    "expectedPods": 0,
                }
            return
        if info.kind == "Pod":
            spec = doc.get("spec")
            if not isinstance(spec, dict):
                spec = doc["spec"] = {}
            adm.default_pod(spec)
            doc["status"] = {"phase": "Pending", "qosClass": adm.pod_qos_class(spec)}
        elif info.kind == "Namespace":
            spec = doc.setdefault("spec", {})
            spec.setdefault("finalizers", ["kubernetes"])
            doc["status"] = {"phase": "Active"}
            labels = doc["metadata"].setdefault("labels", {})
            labels["kubernetes.io/metadata.name"] = doc["metadata"]["name"]
        elif info.kind == "Node":
            pass  # kubelets register nodes with their status
        elif info.has_status:
            doc.pop("status", None)

    def _classes(self) -> _List[Mapping[str, Any]]:
        store = self._store(resource_info("PriorityClass"))
        return [rec.doc for _, rec in store.iter_sorted("")]

    def _admit_create(self, info: ResourceInfo, ns: str, name: str, doc: dict[str, Any]) -> None:
        typed = (info.group, info.plural) in adm.TYPED_KINDS
        if typed:
            spec = doc.get("spec")
            if info.plural in ("podgroups", "compositepodgroups") and isinstance(spec, dict):
                spec.setdefault("disruptionMode", {"single": {}})
                if info.plural == "podgroups":
                    fins = doc["metadata"].setdefault("finalizers", [])
                    if adm.PODGROUP_PROTECTION_FINALIZER not in fins:
                        fins.append(adm.PODGROUP_PROTECTION_FINALIZER)
                if self._preempt_gate:
                    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
                adm.admit_priority(
                    info, name, spec, self._classes, set_preemption_policy=self._preempt_gate
                )
            stored = adm.validate_typed(info, doc, None, self._gates)
            doc.clear()
            doc.update(stored)
            return
        if info.kind == "Pod" and not info.group:
            spec = doc["spec"]
            adm.admit_priority(info, name, spec, self._classes, set_preemption_policy=True)
        if info.kind == "PriorityClass" and doc.get("globalDefault"):
            for other in self._classes():
                if other.get("globalDefault"):
                    other_name = other["metadata"]["name"]
                    raise adm.forbidden(
                        info,
                        name,
                        f"PriorityClass {other_name} is already marked as default. Only one "
                        "default can exist",
                    )
        errors = adm.validate_metadata(info, doc["metadata"])
        if errors:
            raise adm.invalid(info, name, errors)

    # ------------------------------------------------------------------ update

    async def update(
        self, obj: KubeObject, *, dry_run: bool = False, field_manager: str | None = None
    ) -> KubeObject:
        """Replace an object; a stale ``metadata.resourceVersion`` raises ``Conflict``.
        The status of kinds with a status subresource is kept."""
        info, doc = self._ingest(obj)
        rec = self._write(info, doc, status_only=False, dry_run=dry_run, manager=field_manager)
        return self._out(rec, info)

    async def update_status(
        self, obj: KubeObject, *, field_manager: str | None = None
    ) -> KubeObject:
        """Replace the status subresource (everything else is kept)."""
        info, doc = self._ingest(obj)
        rec = self._write(info, doc, status_only=True, dry_run=False, manager=field_manager)
        return self._out(rec, info)

    def _write(
        self,
        info: ResourceInfo,
        doc: dict[str, Any],
        *,
        status_only: bool,
        dry_run: bool,
        manager: str | None,
        track: bool = True,
    ) -> _Rec:
        store = self._store(info)
        meta = _meta(doc)
        ns = self._ns_of(info, meta.get("namespace"))
        name = str(meta.get("name") or "")
        old = store.get(ns, name)
        if old is None:
            raise self._not_found(info, name)
        old_meta = old.doc["metadata"]
        given_rv = meta.get("resourceVersion")
        if (
            not given_rv
            and not status_only
            and info.group in _NEEDS_RV_ON_UPDATE_GROUPS
            and info.plural != "priorityclasses"
        ):
            raise adm.invalid(
                info,
                name,
                [
                    FieldError(
                        path="metadata.resourceVersion",
                        type="Invalid value",
                        detail="must be specified for an update",
                        value=0,
                        has_value=True,
                    )
                ],
            )
        if given_rv and given_rv != old_meta.get("resourceVersion"):
            raise self._conflict(
                info,
                name,
                "the object has been modified; please apply your changes to the latest version "
                "and try again",
            )
        given_uid = meta.get("uid")
        if given_uid and given_uid != old_meta.get("uid"):
            raise self._uid_conflict(info, name, given_uid, old_meta.get("uid"))
        if status_only:
            if not info.has_status:
                raise self._not_found(info, name)
            new = dict(old.doc)
            new["metadata"] = dict(old_meta)
            if "status" in doc:
                new["status"] = doc["status"]
            else:
                new.pop("status", None)
        else:
            new = doc
            new["apiVersion"] = old.doc.get("apiVersion", info.api_version)
            new["kind"] = info.kind
            for f in (
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "namespace",
                "generation",
            ):
                if f in old_meta:
                    meta[f] = old_meta[f]
                else:
                    meta.pop(f, None)
            meta.pop("managedFields", None)
            if info.has_status:
                if "status" in old.doc:
                    new["status"] = old.doc["status"]
                else:
                    new.pop("status", None)
            if old_meta.get("deletionTimestamp"):
                added = set(meta.get("finalizers") or ()) - set(old_meta.get("finalizers") or ())
                if added:
                    raise adm.invalid(
                        info,
                        name,
                        [
                            FieldError(
                                path="metadata.finalizers",
                                type="Forbidden",
                                detail="no new finalizers can be added if the object is being "
                                f"deleted, found new finalizers {sorted(added)}",
                            )
                        ],
                    )
            if store.key not in _NO_GENERATION and _spec_part(new) != _spec_part(old.doc):
                meta["generation"] = int(old_meta.get("generation") or 0) + 1
            if self._admission:
                self._admit_update(info, name, new, old.doc)
            elif (info.group, info.plural) in adm.TYPED_KINDS:
                adm.validate_typed(info, new, None, None, run_validation=False)
        if status_only and (info.group, info.plural) in adm.TYPED_KINDS:
            if self._admission:
                errors = adm.validate_conditions(
                    (new.get("status") or {}).get("conditions"), "status.conditions"
                )
                if errors:
                    raise adm.invalid(info, name, errors)
            adm.validate_typed(info, new, None, None, run_validation=False)
        meta = new["metadata"]
        meta["resourceVersion"] = old_meta.get("resourceVersion")
        if new == old.doc:
            return old
        if dry_run:
            return _Rec(new, old.rv)
        key = (ns, name)
        if track and (store.key, key) in self._managed:
            self._own(store, key, old.doc, new, manager or "unknown")
        return self._commit(store, key, old, new)

    def _admit_update(
        self, info: ResourceInfo, name: str, new: dict[str, Any], old: dict[str, Any]
    ) -> None:
        if (info.group, info.plural) in adm.TYPED_KINDS:
            spec = new.get("spec")
            if info.plural != "workloads" and isinstance(spec, dict):
                spec.setdefault("disruptionMode", {"single": {}})
            stored = adm.validate_typed(info, new, old, self._gates)
            new.clear()
            new.update(stored)
        elif info.kind == "Pod" and not info.group:
            spec = new.get("spec")
            old_spec = old.get("spec") or {}
            if isinstance(spec, dict) and spec.get("priority") is None and "priority" in old_spec:
                spec["priority"] = old_spec["priority"]

    def _commit(self, store: _Store, key: Key, old: _Rec, new: dict[str, Any]) -> _Rec:
        """Store a new version; finish deletion when the last finalizer went away."""
        meta = new["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            rec = self._replace(store, key, old, new)
            return self._finalize(store, key, rec)
        rec = self._replace(store, key, old, new)
        self._after_change(store, key, old.doc, new)
        return rec

    def _after_change(
        self, store: _Store, key: Key, old: Mapping[str, Any], new: Mapping[str, Any]
    ) -> None:
        if store.key == ("", "pods"):
            old_phase = (old.get("status") or {}).get("phase")
            new_phase = (new.get("status") or {}).get("phase")
            if new_phase != old_phase and new_phase in _TERMINAL:
                group = ((new.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
                if group:
                    self._check_pod_group_protection(key[0], group)

    # ------------------------------------------------------------------ patch

    async def patch(
        self,
        kind: str | ResourceInfo,
        name: str,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        namespace: str | None = None,
        *,
        patch_type: PatchType = "merge",
        subresource: str | None = None,
        field_manager: str | None = None,
        force: bool = False,
        dry_run: bool = False,
    ) -> KubeObject:
        """Patch an object or its ``status``: JSON merge (RFC 7386), JSON patch (RFC 6902),
        strategic merge (simplified) or server-side apply (simplified field ownership)."""
        info = self._info(kind)
        ns = self._ns_of(info, namespace)
        if subresource not in (None, "status"):
            raise self._not_found(info, name)
        if patch_type == "apply":
            rec = self._apply(
                info, ns, name, patch, subresource, field_manager, force=force, dry_run=dry_run
            )
            return self._out(rec, info)
        _, old = self._get_rec(info, ns, name)
        if subresource == "status" and patch_type != "json" and isinstance(patch, Mapping):
            # Merge and strategic patches change only the top-level fields they name, and a
            # status write keeps everything but status: copy just what the patch touches.
            doc = {k: json_copy(v) if k in patch else v for k, v in old.doc.items()}
        else:
            doc = json_copy(old.doc)
        try:
            if patch_type == "merge":
                if not isinstance(patch, Mapping):
                    raise PatchError("a merge patch must be a JSON object")
                doc = json_merge_patch(doc, patch)
            elif patch_type == "json":
                if isinstance(patch, Mapping):
                    raise PatchError("a JSON patch must be a list of operations")
                doc = json_patch(doc, patch)
            elif patch_type == "strategic":
                doc = strategic_merge_patch(doc, patch)
            else:
                raise bad_request(f"unsupported patch type {patch_type!r}")
        except PatchError as e:
            raise adm.invalid(
                info, name, [FieldError(path="", type="Invalid value", detail=str(e))]
            ) from None
        if not isinstance(doc, dict):
            raise bad_request("the patched object is not a JSON object")
        meta = _meta(doc)
        if meta.get("name") != name or (info.namespaced and meta.get("namespace") != ns):
            raise bad_request("the name or namespace of an object cannot be changed by a patch")
        rec = self._write(
            info,
            doc,
            status_only=subresource == "status",
            dry_run=dry_run,
            manager=field_manager,
        )
        return self._out(rec, info)

    def _apply(
        self,
        info: ResourceInfo,
        ns: str,
        name: str,
        patch: Any,
        subresource: str | None,
        manager: str | None,
        *,
        force: bool,
        dry_run: bool,
    ) -> _Rec:
        if not manager:
            raise bad_request("PATCH requests with apply content type require a field manager")
        if not isinstance(patch, Mapping):
            raise bad_request("an apply configuration must be a JSON object")
        applied = json_copy(patch)
        ameta = _meta(applied)
        if ameta.get("name") not in (None, name):
            raise bad_request("the name of the object does not match the name on the URL")
        ameta["name"] = name
        if info.namespaced:
            ameta["namespace"] = ns
        store = self._store(info)
        key = (ns, name)
        old = store.get(ns, name)
        if old is None:
            if subresource == "status":
                raise self._not_found(info, name)
            applied.setdefault("apiVersion", info.api_version)
            applied.setdefault("kind", info.kind)
            rec = self._create_doc(info, json_copy(applied), ns, dry_run=dry_run)
            if not dry_run:
                self._managed[(store.key, key)] = {
                    p: {manager} for p in self._apply_paths(applied, subresource)
                }
            return rec
        # work on a copy: a dry run, a conflict or a rejected write must not change ownership
        owned = {p: set(o) for p, o in self._managed.get((store.key, key), {}).items()}
        new_paths = set(self._apply_paths(applied, subresource))
        conflicts: list[tuple[str, FieldPath]] = []
        for p in sorted(new_paths, key=repr):
            others = owned.get(p, set()) - {manager}
            if others and get_path(old.doc, p) != get_path(applied, p):
                conflicts.extend((o, p) for o in sorted(others))
        if conflicts and not force:
            listed = "\n".join(
                f'- conflict with "{o}": .{".".join(_render_elem(e) for e in p)}'
                for o, p in conflicts
            )
            raise Conflict(
                f"Apply failed with {len(conflicts)} conflict"
                f"{'s' if len(conflicts) != 1 else ''}: {listed}"
            )
        merged = strategic_merge_patch(json_copy(old.doc), applied)
        previously = {p for p, owners in owned.items() if manager in owners}
        for p in previously - new_paths:
            owners = owned.get(p, set())
            owners.discard(manager)
            if not owners:
                owned.pop(p, None)
                remove_path(merged, p)
        conflicted = {p for _, p in conflicts}
        for p in new_paths:
            if p in conflicted:
                owned[p] = {manager}
            else:
                owned.setdefault(p, set()).add(manager)
        rec = self._write(
            info,
            merged,
            status_only=subresource == "status",
            dry_run=dry_run,
            manager=None,
            track=False,
        )
        if not dry_run and store.get(ns, name) is not None:  # not finalized by this write
            self._managed[(store.key, key)] = owned
        return rec

    @staticmethod
    def _apply_paths(applied: Mapping[str, Any], subresource: str | None) -> Iterator[FieldPath]:
        for p in field_paths(applied):
            if not p or p[0] in ("apiVersion", "kind"):
                continue
            if p[0] == "metadata" and (len(p) < 2 or p[1] not in _APPLY_META):
                continue
            if (p[0] == "status") != (subresource == "status"):
                continue
            yield p

    def _own(
        self,
        store: _Store,
        key: Key,
        old: Mapping[str, Any] | None,
        new: Mapping[str, Any],
        manager: str,
    ) -> None:
        owned = self._managed.setdefault((store.key, key), {})
        new_paths = set(self._apply_paths(new, None)) | set(self._apply_paths(new, "status"))
        for p in new_paths:
            if old is None or get_path(old, p) != get_path(new, p):
                owned[p] = {manager}
        for p in list(owned):
            if p not in new_paths:
                del owned[p]

    # ------------------------------------------------------------------ delete + GC

    async def delete(
        self,
        kind: str | ResourceInfo,
        name: str,
        namespace: str | None = None,
        *,
        propagation_policy: PropagationPolicy | None = None,
        preconditions: Preconditions | None = None,
        grace_period_seconds: int | None = None,
    ) -> None:
        """Delete an object; finalizers keep it (with a ``deletionTimestamp``) until removed.
        Dependents are garbage-collected at once (Background), before the owner goes away
        (Foreground) or orphaned (Orphan; the default for ``batch/v1`` Jobs)."""
        info = self._info(kind)
        ns = self._ns_of(info, namespace)
        store, rec = self._get_rec(info, ns, name)
        if preconditions is not None:
            meta = rec.doc["metadata"]
            if preconditions.uid is not None and preconditions.uid != meta.get("uid"):
                raise self._uid_conflict(info, name, preconditions.uid, meta.get("uid"))
            if (
                preconditions.resource_version is not None
                and preconditions.resource_version != meta.get("resourceVersion")
            ):
                raise self._conflict(
                    info,
                    name,
                    "Precondition failed: ResourceVersion in precondition: "
                    f"{preconditions.resource_version}, ResourceVersion in object meta: "
                    f"{meta.get('resourceVersion')}",
                )
        policy = propagation_policy
        if policy is None:
            policy = "Orphan" if (info.group, info.plural) == ("batch", "jobs") else "Background"
        self._delete_rec(store, (ns, name), rec, policy)

    def _delete_rec(self, store: _Store, key: Key, rec: _Rec, policy: str) -> None:
        uid = rec.doc["metadata"].get("uid")
        if policy == "Orphan" and uid:
            self._orphan_dependents(uid)
            rec = store.get(*key) or rec
        meta = rec.doc["metadata"]
        finalizers = list(meta.get("finalizers") or ())
        is_namespace = store.key == ("", "namespaces")
        if policy == "Foreground" and uid and _FOREGROUND not in finalizers:
            finalizers.append(_FOREGROUND)
        if not finalizers and not is_namespace:
            if store.key == ("", "pods") and not meta.get("deletionTimestamp"):
                # the API server marks a pod (grace period 0) before removing it
                marked = dict(rec.doc)
                marked["metadata"] = {
                    **meta,
                    "deletionTimestamp": self._now(),
                    "deletionGracePeriodSeconds": 0,
                }
                rec = self._replace(store, key, rec, marked)
            self._finalize(store, key, rec)
            return
        if not meta.get("deletionTimestamp") or finalizers != list(meta.get("finalizers") or ()):
            new = dict(rec.doc)
            new_meta = dict(meta)
            new_meta.setdefault("deletionTimestamp", self._now())
            new_meta.setdefault("deletionGracePeriodSeconds", 0)
            if finalizers:
                new_meta["finalizers"] = finalizers
            new["metadata"] = new_meta
            if is_namespace:
                new["status"] = {**(rec.doc.get("status") or {}), "phase": "Terminating"}
            rec = self._replace(store, key, rec, new)
        if is_namespace:
            self._purge_namespace(key[1])
            return
        if policy == "Foreground" and uid:
            for dstore, dkey in sorted(self._dependents.get(uid, ()), key=_dep_sort):
                drec = dstore.get(*dkey)
                if drec is not None and not drec.doc["metadata"].get("deletionTimestamp"):
                    self._delete_rec(dstore, dkey, drec, "Foreground")
            self._check_foreground(uid)
        if store.key == ("scheduling.k8s.io", "podgroups"):
            self._check_pod_group_protection(key[0], key[1])

    def _finalize(self, store: _Store, key: Key, rec: _Rec) -> _Rec:
        """Remove an object for good, then collect its dependents and notify its owners."""
        gone = self._drop(store, key, rec)
        doc = gone.doc
        uid = doc["metadata"].get("uid")
        if uid:
            for dstore, dkey in sorted(self._dependents.get(uid, ()), key=_dep_sort):
                drec = dstore.get(*dkey)
                if drec is None:
                    continue
                live_owners = [o for o in _owner_uids(drec.doc) if o != uid and o in self._by_uid]
                if live_owners:
                    self._remove_owner_ref(dstore, dkey, drec, {uid})
                elif not drec.doc["metadata"].get("deletionTimestamp"):
                    self._delete_rec(dstore, dkey, drec, "Background")
        for owner in _owner_uids(doc):
            self._check_foreground(owner)
        if store.key == ("", "pods"):
            group = ((doc.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
            if group:
                self._check_pod_group_protection(key[0], group)
        if key[0]:
            self._check_namespace_done(key[0])
        return gone

    def _remove_owner_ref(self, store: _Store, key: Key, rec: _Rec, uids: set[str]) -> None:
        new = dict(rec.doc)
        meta = dict(rec.doc["metadata"])
        refs = [r for r in meta.get("ownerReferences") or () if r.get("uid") not in uids]
        if refs:
            meta["ownerReferences"] = refs
        else:
            meta.pop("ownerReferences", None)
        new["metadata"] = meta
        self._replace(store, key, rec, new)

    def _orphan_dependents(self, uid: str) -> None:
        for dstore, dkey in sorted(self._dependents.get(uid, ()), key=_dep_sort):
            drec = dstore.get(*dkey)
            if drec is not None:
                self._remove_owner_ref(dstore, dkey, drec, {uid})

    def _remove_finalizer(self, store: _Store, key: Key, finalizer: str) -> None:
        rec = store.get(*key)
        if rec is None:
            return
        fins = list(rec.doc["metadata"].get("finalizers") or ())
        if finalizer not in fins:
            return
        fins.remove(finalizer)
        new = dict(rec.doc)
        meta = dict(rec.doc["metadata"])
        if fins:
            meta["finalizers"] = fins
        else:
            meta.pop("finalizers", None)
        new["metadata"] = meta
        self._commit(store, key, rec, new)

    def _check_foreground(self, owner_uid: str) -> None:
        where = self._by_uid.get(owner_uid)
        if where is None:
            return
        store, key = where
        rec = store.get(*key)
        if rec is None:
            return
        meta = rec.doc["metadata"]
        if not meta.get("deletionTimestamp") or _FOREGROUND not in (meta.get("finalizers") or ()):
            return
        for dstore, dkey in self._dependents.get(owner_uid, ()):
            drec = dstore.get(*dkey)
            if drec is None:
                continue
            for ref in drec.doc["metadata"].get("ownerReferences") or ():
                if ref.get("uid") == owner_uid and ref.get("blockOwnerDeletion"):
                    return
        self._remove_finalizer(store, key, _FOREGROUND)

    def _check_pod_group_protection(self, ns: str, group: str) -> None:
        if not self._admission:
            return
        store = self._stores.get(("scheduling.k8s.io", "podgroups"))
        if store is None:
            return
        rec = store.get(ns, group)
        if rec is None:
            return
        meta = rec.doc["metadata"]
        if not meta.get("deletionTimestamp") or adm.PODGROUP_PROTECTION_FINALIZER not in (
            meta.get("finalizers") or ()
        ):
            return
        pods = self._stores.get(("", "pods"))
        if pods is not None:
            for pkey in pods.indexes["spec.schedulingGroup.podGroupName"].get(group, ()):
                if pkey[0] != ns:
                    continue
                prec = pods.get(*pkey)
                if (
                    prec is not None
                    and (prec.doc.get("status") or {}).get("phase") not in _TERMINAL
                ):
                    return
        self._remove_finalizer(store, (ns, group), adm.PODGROUP_PROTECTION_FINALIZER)

    def _purge_namespace(self, ns: str) -> None:
        for store in list(self._stores.values()):
            if not store.info.namespaced:
                continue
            bucket = store.objects.get(ns)
            if not bucket:
                continue
            for name in sorted(bucket):
                rec = store.get(ns, name)
                if rec is not None and not rec.doc["metadata"].get("deletionTimestamp"):
                    self._delete_rec(store, (ns, name), rec, "Background")
        self._check_namespace_done(ns)

    def _check_namespace_done(self, ns: str) -> None:
        nstore = self._stores.get(("", "namespaces"))
        if nstore is None:
            return
        rec = nstore.get("", ns)
        if rec is None or not rec.doc["metadata"].get("deletionTimestamp"):
            return
        for store in self._stores.values():
            if store.info.namespaced and store.objects.get(ns):
                return
        if not rec.doc["metadata"].get("finalizers"):
            self._finalize(nstore, ("", ns), rec)

    # ------------------------------------------------------------------ pods/binding, eviction

    async def bind(
        self, namespace: str, pod_name: str, node_name: str, *, pod_uid: str | None = None
    ) -> None:
        """``pods/binding``: set ``spec.nodeName`` and ``PodScheduled=True``; ``Conflict`` when
        the pod is already bound, is being deleted, or ``pod_uid`` does not match."""
        info = resource_info("Pod")
        store, rec = self._get_rec(info, namespace, pod_name)
        meta = rec.doc["metadata"]
        if pod_uid is not None and pod_uid != meta.get("uid"):
            raise self._uid_conflict(_BINDING, pod_name, pod_uid, meta.get("uid"))
        if meta.get("deletionTimestamp"):
            raise self._conflict(
                _BINDING,
                pod_name,
                f"pod {pod_name} is being deleted, cannot be assigned to a host",
            )
        spec = rec.doc.get("spec") or {}
        if spec.get("nodeName"):
            raise self._conflict(
                _BINDING,
                pod_name,
                f'pod {pod_name} is already assigned to node "{spec["nodeName"]}"',
            )
        if spec.get("schedulingGates"):
            raise self._conflict(
                _BINDING, pod_name, f"pod {pod_name} has non-empty .spec.schedulingGates"
            )
        new = dict(rec.doc)
        new["spec"] = {**spec, "nodeName": node_name}
        status = dict(rec.doc.get("status") or {})
        conditions = [c for c in status.get("conditions") or () if c.get("type") != "PodScheduled"]
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": self._now(),
            }
        )
        status["conditions"] = conditions
        new["status"] = status
        new["metadata"] = dict(meta)
        self._commit(store, (namespace, pod_name), rec, new)

    async def evict(
        self, namespace: str, pod_name: str, *, grace_period_seconds: int | None = None
    ) -> None:
        """``policy/v1`` Eviction: pending and terminal pods are deleted at once; otherwise a
        matching PodDisruptionBudget must allow a disruption (``TooManyRequests`` if not); the
        budget is computed from the pods now and the PDB's status is not updated."""
        info = resource_info("Pod")
        store, rec = self._get_rec(info, namespace, pod_name)
        phase = (rec.doc.get("status") or {}).get("phase")
        if phase not in ("Pending", *_TERMINAL):
            labels = rec.doc["metadata"].get("labels") or {}
            pdb_info = resource_info("PodDisruptionBudget")
            pdbs = self._store(pdb_info)
            matching = [
                (k, r)
                for k, r in pdbs.iter_sorted(namespace)
                if label_selector_from_dict((r.doc.get("spec") or {}).get("selector"))(labels)
            ]
            if len(matching) > 1:
                raise ApiError(
                    "This pod has more than one PodDisruptionBudget, which the eviction "
                    "subresource does not support.",
                    status=500,
                    reason="InternalError",
                )
            if matching:
                pkey, prec = matching[0]
                allowed, desired, healthy = self._pdb_budget(prec.doc, namespace)
                if allowed <= 0:
                    raise TooManyRequests(
                        "Cannot evict pod as it would violate the pod's disruption budget.",
                        body={
                            "details": {
                                "causes": [
                                    {
                                        "reason": "DisruptionBudget",
                                        "message": f"The disruption budget {pkey[1]} needs "
                                        f"{desired} healthy pods and has {healthy} currently",
                                    }
                                ]
                            }
                        },
                    )
        rec = store.get(namespace, pod_name) or rec
        self._delete_rec(store, (namespace, pod_name), rec, "Background")

    def _pdb_budget(self, pdb: Mapping[str, Any], namespace: str) -> tuple[int, int, int]:
        """(disruptionsAllowed, desiredHealthy, currentHealthy) of a PodDisruptionBudget,
        computed now from the pods it selects (MemoryCluster has no disruption controller)."""
        spec = pdb.get("spec") or {}
        selects = label_selector_from_dict(spec.get("selector"))
        expected = 0
        healthy = 0
        for _, rec in self._store(resource_info("Pod")).iter_sorted(namespace):
            doc = rec.doc
            m = doc["metadata"]
            status = doc.get("status") or {}
            if m.get("deletionTimestamp") or status.get("phase") in _TERMINAL:
                continue
            if not selects(m.get("labels") or {}):
                continue
            expected += 1
            ready = next(
                (c for c in status.get("conditions") or () if c.get("type") == "Ready"), None
            )
            if status.get("phase") == "Running" and (
                ready is None or ready.get("status") == "True"
            ):
                healthy += 1

        def amount(value: Any) -> int:
            if isinstance(value, str) and value.endswith("%"):
                return -(-int(value[:-1]) * expected // 100)
            return int(value)

        if spec.get("minAvailable") is not None:
            desired = amount(spec["minAvailable"])
        elif spec.get("maxUnavailable") is not None:
            desired = max(0, expected - amount(spec["maxUnavailable"]))
        else:
            desired = 0
        return max(0, healthy - desired), desired, healthy

    # ------------------------------------------------------------------ events, close

    async def create_event(
        self,
        *,
        namespace: str,
        involved_object: Mapping[str, Any],
        reason: str,
        message: str,
        type: Literal["Normal", "Warning"] = "Normal",
        reporting_component: str = "workloadbuilder",
    ) -> None:
        """Record a core/v1 Event about ``involved_object``."""
        now = self._now()
        involved = {
            k: involved_object[k]
            for k in (
                "apiVersion",
                "kind",
                "name",
                "namespace",
                "uid",
                "resourceVersion",
                "fieldPath",
            )
            if involved_object.get(k)
        }
        involved.setdefault("namespace", namespace)
        doc: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "generateName": f"{involved_object.get('name', 'event')}.",
                "namespace": namespace,
            },
            "involvedObject": involved,
            "reason": reason,
            "message": message,
            "type": type,
            "source": {"component": reporting_component},
            "reportingComponent": reporting_component,
            "reportingInstance": reporting_component,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        self._create_doc(resource_info("Event"), doc, namespace)

    async def close(self) -> None:
        """End every open watch (their iterators finish)."""
        self._closed = True
        for store in self._stores.values():
            for w in store.watchers:
                w.closed = True
                w.event.set()

    async def __aenter__(self) -> MemoryCluster:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ conveniences

    def count(self, kind: str | ResourceInfo, namespace: str | None = None) -> int:
        """Number of stored objects of a kind (in one namespace, or all)."""
        store = self._store(self._info(kind))
        if namespace is not None:
            return len(store.objects.get(namespace, ()))
        return sum(len(b) for b in store.objects.values())


def _dep_sort(item: tuple[_Store, Key]) -> tuple[tuple[str, str], Key]:
    return item[0].key, item[1]


def _render_elem(elem: Any) -> str:
    if isinstance(elem, tuple):
        key, ident = elem
        return f"[{key}={ident}]" if key != "=" else f"[{ident}]"
    return str(elem)
