"""The read verbs of :class:`MemoryCluster`: get, list (selectors, indexes, pages) and watch
(resume from history, selector transitions, bookmarks), and the conversion of a stored
record into what a client receives."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import attrs

from workloadbuilder.api import CompositePodGroup, PodGroup, Workload, from_dict
from workloadbuilder.cluster._memory import _admission as adm
from workloadbuilder.cluster._memory._common import Key, dig, field_str, info_of, split
from workloadbuilder.cluster._memory._storage import (
    FieldReqs,
    KindStore,
    Record,
    Storage,
    Watcher,
    route,
)
from workloadbuilder.cluster._patch import json_copy
from workloadbuilder.cluster._protocol import KubeObject, ObjectList, ResourceInfo, WatchEvent
from workloadbuilder.cluster._selectors import (
    LabelRequirement,
    bad_request,
    match_labels,
    parse_field_selector,
    parse_label_selector,
)
from workloadbuilder.errors import Gone

__all__ = ["Reads"]


class Reads:
    """get / list / watch on ``storage``.

    ``share_objects`` returns the stored dicts themselves instead of copies;
    ``bookmark_interval`` is the idle time (event-loop seconds) before a watch BOOKMARK."""

    def __init__(self, storage: Storage, *, share_objects: bool, bookmark_interval: float) -> None:
        self._storage = storage
        self._share = share_objects
        self._bookmark_interval = bookmark_interval

    def out(self, rec: Record, info: ResourceInfo) -> KubeObject:
        """What a client receives for ``rec`` read as ``info``: the typed model (decoded once
        per version) for our kinds, else a JSON dict (a copy unless objects are shared)."""
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

    def get(self, info: ResourceInfo, name: str, namespace: str | None) -> KubeObject:
        """Read one object."""
        ns = (namespace or "default") if info.namespaced else ""
        _, rec = self._storage.require(info, ns, name)
        return self.out(rec, info)

    @staticmethod
    def _field_reqs(store: KindStore, field_selector: str | None) -> FieldReqs:
        reqs = parse_field_selector(field_selector)
        out = []
        for r in reqs:
            if r.path not in store.fields:
                raise bad_request(f"field label not supported: {r.path}")
            out.append((split(r.path), r))
        return tuple(out)

    @staticmethod
    def _select(
        store: KindStore,
        namespace: str | None,
        lreqs: tuple[LabelRequirement, ...],
        freqs: FieldReqs,
        after: Key | None = None,
    ) -> Iterator[tuple[Key, Record]]:
        ns_filter = namespace if store.info.namespaced else None
        for parts, req in freqs:
            path = ".".join(parts)
            if req.op == "=" and path in store.indexes and req.value:
                keys = sorted(store.indexes[path].get(req.value, ()))
                candidates: Iterator[tuple[Key, Record]] = (
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
            if freqs and not all(req.matches(field_str(dig(doc, parts))) for parts, req in freqs):
                continue
            yield key, rec

    def list(
        self,
        info: ResourceInfo,
        namespace: str | None,
        *,
        label_selector: str | None,
        field_selector: str | None,
        limit: int | None,
        continue_token: str | None,
    ) -> ObjectList:
        """List objects (sorted by namespace/name), one page at a time when ``limit`` is given."""
        store = self._storage.kind(info)
        lreqs = parse_label_selector(label_selector)
        freqs = self._field_reqs(store, field_selector)
        after: Key | None = None
        list_rv = self._storage.rv
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
        out = self.out
        for key, rec in self._select(store, namespace or None, lreqs, freqs, after):
            if after is not None and key <= after:
                continue
            if limit is not None and limit > 0 and len(items) >= limit:
                assert last is not None
                next_token = f"{list_rv}/{last[0]}/{last[1]}"
                break
            items.append(out(rec, info))
            last = key
        return ObjectList(
            items=tuple(items), resource_version=str(list_rv), continue_token=next_token
        )

    async def watch(
        self,
        kind: str | ResourceInfo,
        namespace: str | None,
        *,
        resource_version: str | None,
        label_selector: str | None,
        field_selector: str | None,
        allow_bookmarks: bool,
        timeout_seconds: float | None,
    ) -> AsyncIterator[WatchEvent]:
        """Stream changes after ``resource_version`` (``None``/``"0"``: synthetic ADDED events
        for the current state first); ``Gone`` when it is older than the history. Like every
        error of a watch, an unknown kind is raised on the first iteration."""
        info = info_of(kind)
        storage = self._storage
        store = storage.kind(info)
        lreqs = parse_label_selector(label_selector)
        freqs = self._field_reqs(store, field_selector)
        ns = namespace if info.namespaced and namespace else None  # "": all, as on a server
        w = Watcher(ns, lreqs, freqs)
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
                    route(w, etype, rec, old, (rec.doc.get("metadata") or {}).get("namespace", ""))
        store.watchers.append(w)
        loop = asyncio.get_running_loop()
        deadline = None if timeout_seconds is None else loop.time() + timeout_seconds
        out = self.out
        try:
            while True:
                while w.queue:
                    etype, rec = w.queue.popleft()
                    yield WatchEvent(type=etype, object=out(rec, info))  # type: ignore[arg-type]
                if w.closed or storage.closed:
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
                if w.queue or w.closed or storage.closed:
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
            "metadata": {"resourceVersion": str(self._storage.rv)},
        }
