"""Informers: list+watch caches over any :class:`Cluster`, with handlers and indexers.

An :class:`Informer` lists a kind, then watches from the list's resourceVersion; it keeps a
cache keyed by ``namespace/name``, calls add/update/delete handlers in order (one task per
informer; sync or async handlers), maintains indexes, resumes a watch that ended from the
last resourceVersion it saw (events or bookmarks), and relists when the watch answers
``Gone``: the relist is diffed against the cache so that handlers see exactly the changes
they missed (synthetic adds, updates and deletes), never an event twice.

Cached objects are shared with handlers and callers: treat them as read-only.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs

from workloadbuilder.cluster._backoff import Backoff
from workloadbuilder.cluster._protocol import Cluster, KubeObject, ResourceInfo, resource_info
from workloadbuilder.errors import Gone

__all__ = [
    "EventHandler",
    "IndexFunc",
    "Informer",
    "groups_by_workload",
    "namespaced_key",
    "object_key",
    "pods_by_node",
    "pods_by_pod_group",
]

log = logging.getLogger(__name__)
_List = list

#: An index function: the index values of an object (an object may have several or none).
IndexFunc = Callable[[KubeObject], list[str]]
#: A handler: a plain function or a coroutine function.
EventHandler = Callable[..., Awaitable[None] | None]


def _meta_field(obj: KubeObject, name: str) -> Any:
    if isinstance(obj, dict):
        return (obj.get("metadata") or {}).get(name)
    return getattr(obj.metadata, _SNAKE.get(name, name))


_SNAKE = {"resourceVersion": "resource_version", "deletionTimestamp": "deletion_timestamp"}


def namespaced_key(namespace: str | None, name: str) -> str:
    """``namespace/name`` (just ``name`` for cluster-scoped objects), the cache and index key."""
    return f"{namespace}/{name}" if namespace else name


def object_key(obj: KubeObject) -> str:
    """The cache key of an object (``namespace/name``)."""
    return namespaced_key(_meta_field(obj, "namespace"), str(_meta_field(obj, "name")))


def pods_by_node(obj: KubeObject) -> list[str]:
    """Index function: a pod's ``spec.nodeName`` (unbound pods are not indexed)."""
    if not isinstance(obj, dict):
        return []
    node = (obj.get("spec") or {}).get("nodeName")
    return [str(node)] if node else []


def pods_by_pod_group(obj: KubeObject) -> list[str]:
    """Index function: ``namespace/podGroupName`` of a pod's ``spec.schedulingGroup``."""
    if not isinstance(obj, dict):
        return []
    group = ((obj.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
    if not group:
        return []
    return [namespaced_key((obj.get("metadata") or {}).get("namespace"), str(group))]


def groups_by_workload(obj: KubeObject) -> list[str]:
    """Index function: ``namespace/workloadName`` of a PodGroup's or CompositePodGroup's
    ``spec.workloadRef`` (works on models and dicts)."""
    if isinstance(obj, dict):
        ref = (obj.get("spec") or {}).get("workloadRef") or {}
        name = ref.get("workloadName")
        ns = (obj.get("metadata") or {}).get("namespace")
    else:
        spec_ref = getattr(getattr(obj, "spec", None), "workload_ref", None)
        name = getattr(spec_ref, "workload_name", None)
        ns = obj.metadata.namespace
    return [namespaced_key(ns, str(name))] if name else []


def _rv_older(rv: Any, cached_rv: Any) -> bool:
    """Whether resourceVersion ``rv`` is older than ``cached_rv`` (False when either is
    missing or not a number)."""
    try:
        return int(rv) < int(cached_rv)
    except (TypeError, ValueError):
        return False


def _key_and_rv(obj: KubeObject) -> tuple[str, Any]:
    """:func:`object_key` and the resourceVersion, reading a dict's metadata once."""
    if type(obj) is dict:
        meta = obj.get("metadata") or {}
        ns, name = meta.get("namespace"), meta.get("name")
        return (f"{ns}/{name}" if ns else str(name)), meta.get("resourceVersion")
    return object_key(obj), _meta_field(obj, "resourceVersion")


@attrs.define
class _Handler:
    on_add: EventHandler | None
    on_update: EventHandler | None
    on_delete: EventHandler | None


class Informer:
    """A list+watch cache of one kind (optionally one namespace / label / field selector).

    ``indexers`` maps index names to :data:`IndexFunc` s (for example
    ``{"node": pods_by_node}``); query them with :meth:`by_index`. Handlers receive
    ``on_add(obj)``, ``on_update(old, new)``, ``on_delete(obj)``; exceptions in handlers are
    logged and do not stop the informer.

    Each watch asks the server to end it after a random time in ``[watch_timeout,
    2 * watch_timeout)`` seconds (client-go's reflector: 5 to 10 minutes), with bookmarks,
    and is resumed from the last resourceVersion seen. ``relist_backoff`` is the pause before
    listing or watching again after a failure (an error, or a watch that ends at once with
    nothing): by default a :class:`Backoff` with client-go's schedule (0.8 s doubling to a
    30 s cap, jitter, reset after 2 healthy minutes); a number is a fixed pause. ``sleep``
    is the coroutine that waits (tests pass a manual clock's ``sleep``).
    """

    def __init__(
        self,
        cluster: Cluster,
        kind: str | ResourceInfo,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        indexers: Mapping[str, IndexFunc] | None = None,
        page_size: int | None = 500,
        watch_timeout: float | None = 300.0,
        relist_backoff: float | Backoff | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.cluster = cluster
        self.info = resource_info(kind)
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self._indexers: dict[str, IndexFunc] = dict(indexers or {})
        self._indexes: dict[str, dict[str, dict[str, KubeObject]]] = {n: {} for n in self._indexers}
        self._cache: dict[str, KubeObject] = {}
        self._handlers: list[_Handler] = []
        self._page_size = page_size
        self._watch_timeout = watch_timeout
        if relist_backoff is None:
            relist_backoff = Backoff()
        elif not isinstance(relist_backoff, Backoff):
            relist_backoff = Backoff.constant(float(relist_backoff))
        #: the pause schedule after failures (see the class docstring)
        self.backoff: Backoff = relist_backoff
        self._sleep = sleep
        self._synced = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._last_rv: str | None = None
        self._stopping = False
        #: number of times the informer listed (1 + relists); useful in tests and metrics
        self.list_count = 0
        #: number of failed lists/watches (each followed by a backoff pause)
        self.failures = 0

    # ------------------------------------------------------------------ public API

    def add_handler(
        self,
        on_add: EventHandler | None = None,
        on_update: EventHandler | None = None,
        on_delete: EventHandler | None = None,
    ) -> None:
        """Register handlers (sync functions or coroutine functions). Handlers added after the
        informer synced do not get the objects already cached."""
        self._handlers.append(_Handler(on_add, on_update, on_delete))

    def add_indexer(self, name: str, func: IndexFunc) -> None:
        """Add an index (also indexes the objects already cached)."""
        self._indexers[name] = func
        index: dict[str, dict[str, KubeObject]] = {}
        self._indexes[name] = index
        for key, obj in self._cache.items():
            for value in func(obj):
                index.setdefault(value, {})[key] = obj

    async def start(self) -> None:
        """Start listing and watching in a background task (returns at once)."""
        if self._task is not None:
            return
        self._stopping = False
        self._task = asyncio.create_task(self._run(), name=f"informer-{self.info.plural}")

    async def wait_synced(self, timeout: float | None = None) -> None:
        """Wait until the first list has been cached and its add handlers have run."""
        if timeout is None:
            await self._synced.wait()
        else:
            await asyncio.wait_for(self._synced.wait(), timeout)

    @property
    def synced(self) -> bool:
        """True once the first list has been cached and handled."""
        return self._synced.is_set()

    @property
    def resource_version(self) -> str | None:
        """The last resourceVersion the informer has seen (list, event or bookmark)."""
        return self._last_rv

    async def stop(self) -> None:
        """Stop the background task (idempotent)."""
        self._stopping = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def __aenter__(self) -> Informer:
        await self.start()
        await self.wait_synced()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def get(self, name: str, namespace: str | None = None) -> KubeObject | None:
        """The cached object, or ``None``."""
        return self._cache.get(namespaced_key(namespace if self.info.namespaced else None, name))

    def list(self) -> _List[KubeObject]:
        """Every cached object."""
        return list(self._cache.values())

    def keys(self) -> _List[str]:
        """Every cache key (``namespace/name``)."""
        return list(self._cache)

    def by_index(self, index_name: str, value: str) -> _List[KubeObject]:
        """The cached objects whose index function returned ``value``."""
        return list(self._indexes[index_name].get(value, {}).values())

    def index_values(self, index_name: str) -> _List[str]:
        """Every value currently present in an index."""
        return list(self._indexes[index_name])

    # ------------------------------------------------------------------ machinery

    async def _run(self) -> None:
        need_list = True
        gone_in_a_row = 0
        while not self._stopping:
            try:
                if need_list:
                    await self._relist()
                    need_list = False
                loop = asyncio.get_running_loop()
                started = loop.time()
                events = await self._watch()
                gone_in_a_row = 0
                if events == 0 and loop.time() - started < 1.0:
                    # a watch that ends at once with nothing (e.g. a closed cluster): back off
                    self.failures += 1
                    await self._sleep(self.backoff.next())
                else:
                    await asyncio.sleep(0)
            except asyncio.CancelledError:
                raise
            except Gone:
                log.debug("informer %s: watch expired, relisting", self.info.plural)
                need_list = True
                gone_in_a_row += 1
                if gone_in_a_row > 1:  # a fresh list's version expired at once: back off
                    self.failures += 1
                    await self._sleep(self.backoff.next())
            except Exception as e:
                # one line per failure; the traceback only at debug level (a server that
                # answers 401 for minutes must not fill the log with stack traces)
                self.failures += 1
                pause = self.backoff.next()
                log.warning(
                    "informer %s: list/watch failed (%s); retrying in %.1fs",
                    self.info.plural,
                    e,
                    pause,
                )
                log.debug("informer %s: list/watch failure", self.info.plural, exc_info=True)
                await self._sleep(pause)
                need_list = need_list or self._last_rv is None

    async def _relist(self) -> None:
        items: dict[str, KubeObject] = {}
        token: str | None = None
        rv = ""
        while True:
            page = await self.cluster.list(
                self.info,
                self.namespace,
                label_selector=self.label_selector,
                field_selector=self.field_selector,
                limit=self._page_size,
                continue_token=token,
            )
            for obj in page.items:
                items[object_key(obj)] = obj
            if not rv:
                rv = page.resource_version
            token = page.continue_token
            if not token:
                break
        self.list_count += 1
        for key in [k for k in self._cache if k not in items]:
            gone = self._cache[key]
            self._remove(key, gone)
            await self._dispatch("delete", gone, None)
        for key, obj in items.items():
            old = self._cache.get(key)
            if old is None:
                self._store(key, obj, None)
                await self._dispatch("add", obj, None)
            elif _meta_field(old, "resourceVersion") != _meta_field(obj, "resourceVersion"):
                self._store(key, obj, old)
                await self._dispatch("update", old, obj)
        self._last_rv = rv
        self._synced.set()

    async def _watch(self) -> int:
        stream = self.cluster.watch(
            self.info,
            self.namespace,
            resource_version=self._last_rv,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            allow_bookmarks=True,
            timeout_seconds=(
                None
                if self._watch_timeout is None
                else self._watch_timeout * (1.0 + random.random())
            ),
        )
        count = 0
        try:
            async for event in stream:
                count += 1
                obj = event.object
                if event.type == "BOOKMARK":
                    rv = _meta_field(obj, "resourceVersion")
                    if rv:
                        self._last_rv = str(rv)
                    continue
                if event.type == "ERROR":
                    raise Gone("watch returned an ERROR event")
                key, rv = _key_and_rv(obj)
                old = self._cache.get(key)
                # A paged list can run ahead of its version (MemoryCluster): skip events the
                # cache already reflects, including the deletion of an earlier incarnation
                # of an object the list already returned re-created.
                if old is not None:
                    old_rv = _meta_field(old, "resourceVersion")
                    if (
                        _rv_older(rv, old_rv)
                        if event.type == "DELETED"
                        else (rv == old_rv or _rv_older(rv, old_rv))
                    ):
                        continue
                if event.type == "DELETED":
                    if old is not None:
                        self._remove(key, old)
                        await self._dispatch("delete", obj, None)
                elif old is None:
                    self._store(key, obj, None)
                    await self._dispatch("add", obj, None)
                else:
                    self._store(key, obj, old)
                    await self._dispatch("update", old, obj)
                if rv:
                    self._last_rv = str(rv)
            return count
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()

    def _store(self, key: str, obj: KubeObject, old: KubeObject | None) -> None:
        if old is not None:
            self._unindex(key, old)
        self._cache[key] = obj
        for name, func in self._indexers.items():
            index = self._indexes[name]
            for value in func(obj):
                index.setdefault(value, {})[key] = obj

    def _remove(self, key: str, old: KubeObject) -> None:
        self._unindex(key, old)
        del self._cache[key]

    def _unindex(self, key: str, old: KubeObject) -> None:
        for name, func in self._indexers.items():
            index = self._indexes[name]
            for value in func(old):
                bucket = index.get(value)
                if bucket is not None:
                    bucket.pop(key, None)
                    if not bucket:
                        del index[value]

    async def _dispatch(self, what: str, a: KubeObject, b: KubeObject | None) -> None:
        for h in self._handlers:
            args: tuple[Any, ...]
            if what == "add":
                fn, args = h.on_add, (a,)
            elif what == "update":
                fn, args = h.on_update, (a, b)
            else:
                fn, args = h.on_delete, (a,)
            if fn is None:
                continue
            try:
                result = fn(*args)
                if result is not None and inspect.isawaitable(result):
                    await result
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("informer %s: %s handler failed", self.info.plural, what)
