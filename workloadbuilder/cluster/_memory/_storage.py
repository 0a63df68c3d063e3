"""Storage and watch fan-out: what etcd and the watch cache do for :class:`MemoryCluster`.

Every stored object is a private JSON dict that is never mutated after it is stored (a new
version is a new dict), so watch events and history share it safely. One resourceVersion
counter serves every kind; each kind keeps a bounded event history for watches to resume
from (older resourceVersions answer ``Gone``), indexes on the field paths in
:data:`INDEXED`, and the watchers its changes are routed to. Across kinds the storage indexes
objects by uid and by owner uid (what garbage collection walks).

Storage knows nothing of admission, finalizers or garbage collection: the verbs and the
lifecycle controllers decide what to store; :class:`Storage` stores it and tells watchers.
"""

from __future__ import annotations

import asyncio
import bisect
import heapq
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from workloadbuilder.cluster._memory._common import (
    Key,
    dig,
    field_str,
    not_found,
    owner_uids,
    split,
)
from workloadbuilder.cluster._patch import FieldPath
from workloadbuilder.cluster._protocol import ResourceInfo
from workloadbuilder.cluster._selectors import FieldRequirement, LabelRequirement, match_labels

__all__ = [
    "COMMON_FIELDS",
    "EXPIRING",
    "EXTRA_FIELDS",
    "INDEXED",
    "FieldReqs",
    "KindStore",
    "Record",
    "Storage",
    "Watcher",
    "route",
]

#: field selector paths every kind supports
COMMON_FIELDS = frozenset({"metadata.name", "metadata.namespace"})
#: (group, plural) -> extra field selector paths (as the real server's field label conversions)
EXTRA_FIELDS: dict[tuple[str, str], frozenset[str]] = {
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
#: (group, plural) of the kinds whose objects expire ``ttl`` seconds after their last write,
#: as kube-apiserver's ``--event-ttl`` expires Events (both API groups)
EXPIRING: frozenset[tuple[str, str]] = frozenset({("", "events"), ("events.k8s.io", "events")})
#: (group, plural) -> field paths kept in an index (value -> keys)
INDEXED: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "pods"): ("spec.nodeName", "spec.schedulingGroup.podGroupName"),
}

#: parsed field selector requirements with their split paths
FieldReqs = tuple[tuple[tuple[str, ...], FieldRequirement], ...]


class Record:
    """One stored version of an object (``doc`` is never mutated once stored); ``model`` is
    its typed model, decoded once on first read (typed kinds only)."""

    __slots__ = ("doc", "model", "rv")

    def __init__(self, doc: dict[str, Any], rv: int) -> None:
        self.doc = doc
        self.rv = rv
        self.model: Any = None


class Watcher:
    """One open watch: its filters and the queue of (event type, record) not yet delivered."""

    __slots__ = ("closed", "event", "field_reqs", "label_reqs", "namespace", "queue")

    def __init__(
        self,
        namespace: str | None,
        label_reqs: tuple[LabelRequirement, ...],
        field_reqs: FieldReqs,
    ) -> None:
        self.namespace = namespace
        self.label_reqs = label_reqs
        self.field_reqs = field_reqs
        self.queue: deque[tuple[str, Record]] = deque()
        self.event = asyncio.Event()
        self.closed = False

    def matches(self, doc: Mapping[str, Any]) -> bool:
        """Whether ``doc`` passes the watch's label and field selectors."""
        if self.label_reqs and not match_labels(
            self.label_reqs, (doc.get("metadata") or {}).get("labels")
        ):
            return False
        return all(req.matches(field_str(dig(doc, parts))) for parts, req in self.field_reqs)


def route(w: Watcher, etype: str, rec: Record, old: Record | None, ns: str) -> None:
    """Queue an event for ``w`` as the watch sees it: a change that moves an object into or
    out of a selector arrives as ADDED or DELETED."""
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


class KindStore:
    """All objects of one resource (all versions of it share one store), their indexes,
    event history, watchers and server-side-apply field ownership."""

    def __init__(self, info: ResourceInfo, history: int) -> None:
        self.info = info
        self.key = (info.group, info.plural)
        self.objects: dict[str, dict[str, Record]] = {}
        self.sorted_names: dict[str, list[str]] = {}
        self.history: deque[tuple[int, str, Record, Record | None]] = deque()
        self.history_limit = history
        self.floor = 0
        self.watchers: list[Watcher] = []
        self.fields = COMMON_FIELDS | EXTRA_FIELDS.get(self.key, frozenset())
        self.index_paths = tuple((p, split(p)) for p in INDEXED.get(self.key, ()))
        self.indexes: dict[str, dict[str, set[Key]]] = {p: {} for p, _ in self.index_paths}
        #: server-side apply: object key -> field path -> managers owning it
        self.managed: dict[Key, dict[FieldPath, set[str]]] = {}

    def get(self, ns: str, name: str) -> Record | None:
        """The current version of an object, or ``None``."""
        bucket = self.objects.get(ns)
        return bucket.get(name) if bucket is not None else None

    def count(self, namespace: str | None = None) -> int:
        """Number of objects (in one namespace, or all)."""
        if namespace is not None:
            return len(self.objects.get(namespace, ()))
        return sum(len(b) for b in self.objects.values())

    def iter_sorted(
        self, namespace: str | None, after: Key | None = None
    ) -> Iterator[tuple[Key, Record]]:
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
        """Add an object to the field indexes."""
        for path, parts in self.index_paths:
            value = dig(doc, parts)
            if value:
                self.indexes[path].setdefault(str(value), set()).add(key)

    def index_remove(self, key: Key, doc: Mapping[str, Any]) -> None:
        """Remove an object from the field indexes."""
        for path, parts in self.index_paths:
            value = dig(doc, parts)
            if value:
                bucket = self.indexes[path].get(str(value))
                if bucket is not None:
                    bucket.discard(key)
                    if not bucket:
                        del self.indexes[path][str(value)]

    def record(self, rv: int, etype: str, rec: Record, old: Record | None) -> None:
        """Append an event to the bounded history."""
        hist = self.history
        hist.append((rv, etype, rec, old))
        if len(hist) > self.history_limit:
            self.floor = hist.popleft()[0]


class Storage:
    """Every kind's :class:`KindStore`, the resourceVersion counter, the uid and owner
    indexes, and the three writes (insert, replace, drop) that emit watch events.

    Objects of the :data:`EXPIRING` kinds are dropped (DELETED) ``ttl`` seconds of ``clock``
    after their last write, at the next :meth:`expire` (``ttl=None``: never)."""

    def __init__(
        self,
        history: int,
        *,
        ttl: float | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.rv = 0
        self.closed = False
        self.ttl = ttl if ttl is not None and ttl > 0 else None
        self.clock = clock
        #: (expiry time, resourceVersion of the write, store, key), earliest first
        self._expiry: list[tuple[float, int, KindStore, Key]] = []
        self._history = max(1, history)
        self._kinds: dict[tuple[str, str], KindStore] = {}
        #: uid -> where the object is stored
        self.by_uid: dict[str, tuple[KindStore, Key]] = {}
        #: owner uid -> the objects whose ownerReferences name it
        self.dependents: dict[str, set[tuple[KindStore, Key]]] = {}

    def kind(self, info: ResourceInfo) -> KindStore:
        """The store of a resource (created empty on first use)."""
        key = (info.group, info.plural)
        store = self._kinds.get(key)
        if store is None:
            store = KindStore(info, self._history)
            self._kinds[key] = store
        return store

    def existing(self, key: tuple[str, str]) -> KindStore | None:
        """The store of ``(group, plural)`` if anything ever used it."""
        return self._kinds.get(key)

    def kinds(self) -> list[KindStore]:
        """Every store in use (a snapshot: callers may write while iterating)."""
        return list(self._kinds.values())

    def require(self, info: ResourceInfo, ns: str, name: str) -> tuple[KindStore, Record]:
        """The store and current record of an object; ``NotFound`` when it does not exist."""
        store = self.kind(info)
        rec = store.get(ns, name)
        if rec is None:
            raise not_found(info, name)
        return store, rec

    def close(self) -> None:
        """End every open watch (their iterators finish)."""
        self.closed = True
        for store in self._kinds.values():
            for w in store.watchers:
                w.closed = True
                w.event.set()

    # ------------------------------------------------------------------ writes

    def _next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def _emit(self, store: KindStore, etype: str, rec: Record, old: Record | None) -> None:
        store.record(rec.rv, etype, rec, old)
        if store.watchers:
            ns = (rec.doc.get("metadata") or {}).get("namespace", "")
            for w in store.watchers:
                route(w, etype, rec, old, ns)

    def insert(self, store: KindStore, key: Key, doc: dict[str, Any]) -> Record:
        """Store a new object (ADDED)."""
        rv = self._next_rv()
        doc["metadata"]["resourceVersion"] = str(rv)
        rec = Record(doc, rv)
        bucket = store.objects.get(key[0])
        if bucket is None:
            bucket = store.objects[key[0]] = {}
        bucket[key[1]] = rec
        store.sorted_names.pop(key[0], None)
        store.index_add(key, doc)
        meta = doc["metadata"]
        uid = meta.get("uid")
        if uid:
            self.by_uid[uid] = (store, key)
        for owner in owner_uids(doc):
            self.dependents.setdefault(owner, set()).add((store, key))
        self._expire_later(store, key, rv)
        self._emit(store, "ADDED", rec, None)
        return rec

    def replace(self, store: KindStore, key: Key, old: Record, doc: dict[str, Any]) -> Record:
        """Store a new version of an object (MODIFIED)."""
        rv = self._next_rv()
        doc["metadata"]["resourceVersion"] = str(rv)
        rec = Record(doc, rv)
        store.objects[key[0]][key[1]] = rec
        if store.index_paths:
            store.index_remove(key, old.doc)
            store.index_add(key, doc)
        old_owners = owner_uids(old.doc)
        new_owners = owner_uids(doc)
        if old_owners != new_owners:
            for o in old_owners:
                deps = self.dependents.get(o)
                if deps is not None:
                    deps.discard((store, key))
                    if not deps:
                        del self.dependents[o]
            for o in new_owners:
                self.dependents.setdefault(o, set()).add((store, key))
        self._expire_later(store, key, rv)
        self._emit(store, "MODIFIED", rec, old)
        return rec

    def _expire_later(self, store: KindStore, key: Key, rv: int) -> None:
        if self.ttl is not None and store.key in EXPIRING:
            heapq.heappush(self._expiry, (self.clock() + self.ttl, rv, store, key))

    def expire(self) -> int:
        """Drop the objects whose time to live has passed since their last write (each a
        DELETED event, as etcd's lease expiry gives); returns how many."""
        heap = self._expiry
        if not heap or heap[0][0] > self.clock():
            return 0
        now = self.clock()
        n = 0
        while heap and heap[0][0] <= now:
            _, rv, store, key = heapq.heappop(heap)
            rec = store.get(*key)
            if rec is not None and rec.rv == rv:  # not written again since
                self.drop(store, key, rec)
                n += 1
        return n

    def drop(self, store: KindStore, key: Key, old: Record) -> Record:
        """Remove an object for good (DELETED); returns its final version."""
        rv = self._next_rv()
        doc = dict(old.doc)
        doc["metadata"] = dict(doc["metadata"])
        doc["metadata"]["resourceVersion"] = str(rv)
        rec = Record(doc, rv)
        bucket = store.objects[key[0]]
        del bucket[key[1]]
        if not bucket:
            del store.objects[key[0]]
        store.sorted_names.pop(key[0], None)
        store.index_remove(key, old.doc)
        uid = doc["metadata"].get("uid")
        if uid:
            self.by_uid.pop(uid, None)
        for o in owner_uids(doc):
            deps = self.dependents.get(o)
            if deps is not None:
                deps.discard((store, key))
                if not deps:
                    del self.dependents[o]
        store.managed.pop(key, None)
        self._emit(store, "DELETED", rec, old)
        return rec
