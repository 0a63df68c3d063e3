"""``KubeCluster``: the :class:`~workloadbuilder.cluster.Cluster` protocol on a real API server.

The parts (as :mod:`workloadbuilder.cluster._memory` is split):

* :mod:`._kubeconfig` and :mod:`._factories` -- the settings (:class:`ClientSettings`): a
  kubeconfig file read without kubernetes-asyncio (importing it costs about half a second of
  CPU); users with ``exec`` credential plugins or an ``auth-provider`` and the in-cluster
  service account through kubernetes-asyncio's loaders, imported only then; the
  environment's proxy, resolved once;
* :mod:`._http` -- the transport: unary requests and watches on the lean keep-alive
  HTTP/1.1 client of :mod:`workloadbuilder.cluster._transport`, proxies included (absolute
  form, or a ``CONNECT`` tunnel for ``https://``); aiohttp only with ``transport="aiohttp"``;
* :mod:`._streams` -- watch bodies split into lines under a silence bound, and decoded;
* :mod:`._codec` -- JSON, typed models <-> documents, paths and queries;
* :mod:`._errors` -- HTTP answers -> the typed :mod:`workloadbuilder.errors`.

Requests are plain REST calls on paths from :meth:`ResourceInfo.path`, with the settings'
token, proxy and TLS server name, so every kind works, including those the generated client
does not know (``scheduling.k8s.io/v1beta1`` and ``v1alpha3``, JobSet, LeaderWorkerSet,
custom resources). Retries: :func:`~workloadbuilder.cluster._retry.retry_call` (a first
plain attempt, tenacity for the retries).

Lifetime: the factories (:meth:`KubeCluster.from_kubeconfig`, :meth:`KubeCluster.in_cluster`)
are synchronous and cheap; they read and check the configuration but open nothing. The
HTTP session is created on first use (or by :meth:`KubeCluster.open` /
``async with``) inside the running event loop, and belongs to that loop. Call
:meth:`KubeCluster.close` (or use ``async with``) when done. ``await KubeCluster.connect(...)``
is the one-step "load + open".
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from workloadbuilder.cluster._kube._codec import (
    HOSTNAME,
    PATCH_CONTENT_TYPES,
    decode_object,
    dumps,
    encode_object,
    loads,
    metadata_of,
    plain,
    resource_path,
    timestamp,
    write_query,
)
from workloadbuilder.cluster._kube._errors import error_from_status, gave_up
from workloadbuilder.cluster._kube._factories import (
    USER_AGENT,
    ConfigSource,
    configuration_source,
    in_cluster_source,
    kubeconfig_source,
)
from workloadbuilder.cluster._kube._http import TRANSPORT_ENV, RequestPath, TransportChoice
from workloadbuilder.cluster._kube._kubeconfig import ClientSettings, KubeConfigError
from workloadbuilder.cluster._kube._streams import ReadChunk, WatchStalled, watch_event, watch_lines
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
from workloadbuilder.cluster._retry import (
    RetryableTransportError,
    RetryPolicy,
    is_retryable,
    retry_call,
)
from workloadbuilder.errors import ApiError

if TYPE_CHECKING:
    import aiohttp

    from workloadbuilder.cluster._transport import Stream

__all__ = [
    "TRANSPORT_ENV",
    "ClientSettings",
    "KubeCluster",
    "KubeConfigError",
    "TransportChoice",
    "error_from_status",
]

logger = logging.getLogger(__name__)

#: the default ``User-Agent`` (``workloadbuilder/<version> (<os>/<arch>) python/<version>``)
_USER_AGENT = USER_AGENT


class KubeCluster(RequestPath):
    """The :class:`~workloadbuilder.cluster.Cluster` protocol over HTTP to a real API server.

    Prefer the factories: ``KubeCluster.from_kubeconfig(path, context)``,
    ``KubeCluster.in_cluster()``, or ``await KubeCluster.connect(path, context)``. The
    constructor takes ready :class:`ClientSettings` (the server, TLS context, proxy and
    ``Authorization`` source; a kubernetes-asyncio ``Configuration`` is still accepted in
    their place and read when the cluster opens).

    Options: ``retry`` (a :class:`RetryPolicy`), ``request_timeout`` (seconds for a whole
    non-watch request), ``connect_timeout``, ``watch_idle_timeout`` (a watch that receives
    nothing for this long ends, like a dropped connection; the caller resumes from its last
    resourceVersion), ``max_connections`` (the unary requests' pool size; on the lean client
    each watch has a connection of its own outside it, on aiohttp watches count in it),
    ``transport``: ``"auto"`` (the default; also read from
    ``$WORKLOADBUILDER_KUBE_TRANSPORT``) sends unary requests (get, list, create, update,
    patch, delete, bind, evict, events) and watches on the lean keep-alive HTTP/1.1 client
    of ``_transport/``, a proxy included (a kubeconfig's ``proxy-url``, else the
    environment's ``HTTPS_PROXY``/``HTTP_PROXY`` unless ``NO_PROXY`` exempts the server);
    ``"lean"`` is the same; ``"aiohttp"`` sends everything through aiohttp, the only case
    aiohttp is imported. ``compression`` (default
    True, as client-go's default): ask for gzip-compressed responses (the API server
    compresses those over 128 KiB: large lists); False, or ``disable-compression: true`` in
    the kubeconfig's cluster, asks for them uncompressed (``Accept-Encoding: identity``), as
    kube-scheduler and kube-controller-manager always do.

    A watch that asked for bookmarks is *stalled* when no byte (event or bookmark) arrives
    for ``watch_stall_factor`` x ``watch_bookmark_interval`` seconds (one interval more
    before its first byte): kube-apiserver sends a bookmark about every
    ``watch_bookmark_interval`` (60 s; the first of a new watch after up to two intervals)
    even when nothing changes. A stalled watch is dropped and ends like a dropped
    connection; ``watch_stalls`` counts them per path. ``watch_idle_timeout`` bounds the
    silence of every watch.
    """

    def __init__(
        self,
        settings: ClientSettings | Any = None,
        *,
        retry: RetryPolicy | None = None,
        request_timeout: float = 30.0,
        connect_timeout: float = 10.0,
        watch_idle_timeout: float = 300.0,
        watch_bookmark_interval: float = 60.0,
        watch_stall_factor: float = 2.0,
        max_connections: int = 100,
        user_agent: str = _USER_AGENT,
        transport: TransportChoice | None = None,
        compression: bool = True,
        _source: ConfigSource | None = None,
        _description: str = "",
        _server: str | None = None,
    ) -> None:
        if settings is None and _source is None:
            raise TypeError("KubeCluster needs ClientSettings; see KubeCluster.from_kubeconfig")
        self._given: ClientSettings | None = None
        #: the server before the settings are loaded (a Configuration's, in-cluster's)
        self._server_hint = _server
        if isinstance(settings, ClientSettings):
            self._given = settings
        elif settings is not None:  # a kubernetes-asyncio Configuration: read on open
            _source = configuration_source(settings)
            self._server_hint = str(settings.host)
        self._source = _source
        self._description = _description
        self.retry = retry if retry is not None else RetryPolicy()
        self.request_timeout = request_timeout
        self.connect_timeout = connect_timeout
        self.watch_idle_timeout = watch_idle_timeout
        self.watch_bookmark_interval = watch_bookmark_interval
        self.watch_stall_factor = watch_stall_factor
        #: watches dropped because they stalled (nothing within the bound), by request path
        self.watch_stalls: dict[str, int] = {}
        self.max_connections = max_connections
        self.user_agent = user_agent
        self.compression = compression
        if transport is None:
            transport = os.environ.get(TRANSPORT_ENV) or "auto"  # type: ignore[assignment]
        if transport not in ("auto", "lean", "aiohttp"):
            raise ValueError(f"transport must be auto, lean or aiohttp, not {transport!r}")
        self.transport: TransportChoice = transport
        self._settings: ClientSettings | None = None
        self._proxy: str | None = None
        self._http = None
        self._session = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None
        self._closed = False
        self._streams: set[aiohttp.ClientResponse | Stream] = set()
        self._timeout: aiohttp.ClientTimeout | None = None  # made on the aiohttp path only
        self._timeout_for = (request_timeout, connect_timeout)
        #: the request headers that do not change, by content type, user agent, compression
        self._fixed_headers: dict[tuple[str, str, bool], tuple[tuple[str, str], ...]] = {}

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_kubeconfig(
        cls,
        path: str | os.PathLike[str] | None = None,
        context: str | None = None,
        **options: Any,
    ) -> KubeCluster:
        """A cluster from a kubeconfig file (``$KUBECONFIG`` or ``~/.kube/config`` when
        ``path`` is None; ``:``-separated lists merge) and a context (its current context when
        None). Synchronous: the file and context are checked now (``KubeConfigError``);
        credentials (e.g. exec plugins) are loaded and the session opened on first use.
        With ``path=None``, no kubeconfig file and ``KUBERNETES_SERVICE_HOST`` set, this is
        :meth:`in_cluster`."""
        found = kubeconfig_source(path, context)
        if found is None:
            return cls.in_cluster(**options)  # like client-go's default loading rules
        source, description = found
        return cls(_source=source, _description=description, **options)

    @classmethod
    def in_cluster(cls, **options: Any) -> KubeCluster:
        """A cluster from the pod's service account (``KUBERNETES_SERVICE_HOST``/``PORT``, the
        mounted token, refreshed as it rotates, and CA). Raises ``KubeConfigError`` outside
        a pod."""
        source, server = in_cluster_source()
        return cls(_source=source, _description="in-cluster", _server=server, **options)

    @classmethod
    async def connect(
        cls,
        path: str | os.PathLike[str] | None = None,
        context: str | None = None,
        *,
        in_cluster: bool = False,
        **options: Any,
    ) -> KubeCluster:
        """:meth:`from_kubeconfig` (or :meth:`in_cluster`) and :meth:`open` in one step."""
        if in_cluster:
            cluster = cls.in_cluster(**options)
        else:
            cluster = cls.from_kubeconfig(path, context, **options)
        await cluster.open()
        return cluster

    async def open(self) -> KubeCluster:
        """Load credentials and create the HTTP session now (otherwise done on first use)."""
        await self._client()
        return self

    async def __aenter__(self) -> KubeCluster:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close open watches and the HTTP session. Idempotent; the cluster is unusable after."""
        self._closed = True
        for resp in list(self._streams):
            resp.close()
        self._streams.clear()
        http, self._http = self._http, None
        if http is not None:
            await http.close()
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    @property
    def server(self) -> str | None:
        """The API server URL (known once the configuration is loaded)."""
        if self._settings is not None:
            return self._settings.host
        if self._given is not None:
            return self._given.host
        return self._server_hint

    def __repr__(self) -> str:
        return f"KubeCluster({self.server or self._description})"

    async def _call(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = "application/json",
        idempotent: bool,
        retried_not_found_ok: bool = False,
        decode: bool = True,
    ) -> dict[str, Any]:
        """Send a request with retries; return the decoded JSON body or raise ``ApiError``.

        ``retried_not_found_ok``: a 404 after an earlier attempt that may have run (a
        transport failure after sending, a 5xx) means that attempt did the work: ``{}``.
        ``decode=False``: a successful response's body is read but not decoded (``{}``)."""
        may_have_run = False
        payload = None if body is None else dumps(body)

        async def attempt() -> dict[str, Any]:
            nonlocal may_have_run
            try:
                status, headers, data = await self._exchange(
                    method, path, query, payload, content_type
                )
                if status >= 400:
                    if status == 404 and retried_not_found_ok and may_have_run:
                        return {}
                    raise error_from_status(status, data, headers, what=f"{method} {path}")
            except (ApiError, RetryableTransportError) as e:
                # what a non-idempotent request may retry surely did not run
                may_have_run = may_have_run or not is_retryable(e, idempotent=False)
                raise
            if not data or not decode:
                return {}
            try:
                decoded = loads(data)
            except ValueError as e:
                raise ApiError(f"{method} {path}: response is not JSON", status=status) from e
            return decoded if isinstance(decoded, dict) else {"items": decoded}

        try:
            return await retry_call(
                attempt, policy=self.retry, idempotent=idempotent, what=f"{method} {path}"
            )
        except RetryableTransportError as e:
            raise gave_up(f"{method} {path}", e) from e.cause

    # ------------------------------------------------------------------ reads

    async def get(
        self, kind: str | ResourceInfo, name: str, namespace: str | None = None
    ) -> KubeObject:
        """Read one object."""
        info = resource_info(kind)
        doc = await self._call("GET", resource_path(info, namespace, name), idempotent=True)
        return decode_object(doc, info)

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
        """List objects (all namespaces when ``namespace`` is None), one page at a time when
        ``limit`` is given."""
        info = resource_info(kind)
        query: list[tuple[str, str]] = []
        if label_selector:
            query.append(("labelSelector", label_selector))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        if limit is not None:
            query.append(("limit", str(limit)))
        if continue_token:
            query.append(("continue", continue_token))
        path = info.path(namespace) if info.namespaced and namespace else info.path()
        doc = await self._call("GET", path, query=query, idempotent=True)
        meta = doc.get("metadata") or {}
        items = tuple(decode_object(item, info) for item in doc.get("items") or ())
        return ObjectList(
            items=items,
            resource_version=str(meta.get("resourceVersion", "")),
            continue_token=meta.get("continue") or None,
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
        """Stream changes after ``resource_version``. Raises ``Gone`` when it is too old (a
        410 status or ERROR event); other ERROR events raise their ``ApiError``. Ends
        normally after ``timeout_seconds`` (server-side), when the connection drops, or
        when nothing arrives for the stall bound (with ``allow_bookmarks``, see the class)
        or ``watch_idle_timeout``: resume from the last resourceVersion seen. ``BOOKMARK``
        objects are dicts (only metadata.resourceVersion is meaningful)."""
        info = resource_info(kind)
        query: list[tuple[str, str]] = [("watch", "1")]
        if allow_bookmarks:
            query.append(("allowWatchBookmarks", "true"))
        if resource_version is not None:
            query.append(("resourceVersion", resource_version))
        if label_selector:
            query.append(("labelSelector", label_selector))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        if timeout_seconds is not None:
            query.append(("timeoutSeconds", str(max(1, int(timeout_seconds)))))
        path = info.path(namespace) if info.namespaced and namespace else info.path()
        silent = self.watch_idle_timeout
        first = silent
        if allow_bookmarks and self.watch_bookmark_interval > 0:
            silent = min(silent, self.watch_stall_factor * self.watch_bookmark_interval)
            first = min(self.watch_idle_timeout, silent + self.watch_bookmark_interval)
        what = f"WATCH {path}"

        async def open_stream() -> tuple[Stream | aiohttp.ClientResponse, ReadChunk]:
            return await self._open_stream(path, query, what)

        try:
            resp, read = await retry_call(
                open_stream, policy=self.retry, idempotent=True, what=what
            )
        except RetryableTransportError as e:
            raise gave_up(what, e) from e.cause
        self._streams.add(resp)
        try:
            async for line in watch_lines(read, first=first, silent=silent):
                event = watch_event(line, info, what)
                if event is not None:
                    yield event
        except WatchStalled as e:
            if not allow_bookmarks:  # silence is normal without bookmarks: end quietly
                logger.debug("%s: idle for %.0fs; ending the watch", what, e.seconds)
                return
            self.watch_stalls[path] = self.watch_stalls.get(path, 0) + 1
            logger.warning(
                "%s: nothing received for %.0fs (no event, no bookmark): the watch is stalled;"
                " dropping it (resumed from the last resourceVersion)",
                what,
                e.seconds,
            )
        finally:
            self._streams.discard(resp)
            resp.close()

    # ------------------------------------------------------------------ writes

    async def create(
        self,
        obj: KubeObject,
        namespace: str | None = None,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
    ) -> KubeObject:
        """Create an object; returns what the server stored (defaults applied)."""
        info = resource_of(obj)
        body = encode_object(obj)
        ns = namespace or metadata_of(body).get("namespace")
        doc = await self._call(
            "POST",
            resource_path(info, ns),
            query=write_query(dry_run, field_manager),
            body=body,
            idempotent=False,
        )
        return decode_object(doc, info)

    async def update(
        self, obj: KubeObject, *, dry_run: bool = False, field_manager: str | None = None
    ) -> KubeObject:
        """Replace an object (optimistic concurrency on ``metadata.resourceVersion``)."""
        return await self._put(obj, "", dry_run=dry_run, field_manager=field_manager)

    async def update_status(
        self, obj: KubeObject, *, field_manager: str | None = None
    ) -> KubeObject:
        """Replace the status subresource."""
        return await self._put(obj, "status", dry_run=False, field_manager=field_manager)

    async def _put(
        self, obj: KubeObject, subresource: str, *, dry_run: bool, field_manager: str | None
    ) -> KubeObject:
        info = resource_of(obj)
        body = encode_object(obj)
        meta = metadata_of(body)
        name = meta.get("name")
        if not name:
            raise ValueError("update needs metadata.name")
        path = resource_path(info, meta.get("namespace"), str(name))
        if subresource:
            path += "/" + subresource
        doc = await self._call(
            "PUT",
            path,
            query=write_query(dry_run, field_manager),
            body=body,
            idempotent=True,
        )
        return decode_object(doc, info)

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
        """Patch an object or a subresource: JSON merge, JSON patch, strategic merge, or
        server-side apply (``field_manager`` required, ``force`` takes over conflicts).
        JSON patches are not retried after the request may have reached the server."""
        info = resource_info(kind)
        try:
            content_type = PATCH_CONTENT_TYPES[patch_type]
        except KeyError:
            raise ValueError(f"unknown patch type {patch_type!r}") from None
        path = resource_path(info, namespace, name)
        if subresource:
            path += "/" + subresource
        query = write_query(dry_run, field_manager)
        if force and patch_type == "apply":
            query.append(("force", "true"))
        doc = await self._call(
            "PATCH",
            path,
            query=query,
            body=plain(patch),
            content_type=content_type,
            idempotent=patch_type != "json",
        )
        return decode_object(doc, info)

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
        """Delete an object (finalizers hold it with a ``deletionTimestamp``). When a retry
        of a delete finds the object gone, the earlier attempt deleted it: no error."""
        info = resource_info(kind)
        options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if propagation_policy is not None:
            options["propagationPolicy"] = propagation_policy
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if preconditions is not None:
            pre: dict[str, str] = {}
            if preconditions.uid is not None:
                pre["uid"] = preconditions.uid
            if preconditions.resource_version is not None:
                pre["resourceVersion"] = preconditions.resource_version
            options["preconditions"] = pre
        await self._call(
            "DELETE",
            resource_path(info, namespace, name),
            body=options,
            idempotent=True,
            retried_not_found_ok=True,
        )

    async def bind(
        self, namespace: str, pod_name: str, node_name: str, *, pod_uid: str | None = None
    ) -> None:
        """``pods/binding``: set ``spec.nodeName``. ``Conflict`` when already bound."""
        meta: dict[str, Any] = {"name": pod_name, "namespace": namespace}
        if pod_uid:
            meta["uid"] = pod_uid
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": meta,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
        }
        pods = resource_info("Pod", "v1")
        await self._call(
            "POST",
            resource_path(pods, namespace, pod_name) + "/binding",
            body=body,
            idempotent=False,
            decode=False,
        )

    async def evict(
        self, namespace: str, pod_name: str, *, grace_period_seconds: int | None = None
    ) -> None:
        """``policy/v1`` Eviction of a pod. A PodDisruptionBudget refusal is a
        ``TooManyRequests`` that is not retried."""
        body: dict[str, Any] = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": pod_name, "namespace": namespace},
        }
        if grace_period_seconds is not None:
            body["deleteOptions"] = {"gracePeriodSeconds": grace_period_seconds}
        pods = resource_info("Pod", "v1")
        await self._call(
            "POST",
            resource_path(pods, namespace, pod_name) + "/eviction",
            body=body,
            idempotent=False,
        )

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
        """Record a core/v1 Event about ``involved_object`` (apiVersion/kind/name/uid)."""
        now = timestamp()
        involved = {
            k: involved_object[k]
            for k in ("apiVersion", "kind", "name", "uid", "resourceVersion", "fieldPath")
            if involved_object.get(k)
        }
        involved["namespace"] = involved_object.get("namespace") or namespace
        name = str(involved_object.get("name") or "object")
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{name}.", "namespace": namespace},
            "involvedObject": involved,
            "reason": reason,
            "message": message,
            "type": type,
            "source": {"component": reporting_component},
            "reportingComponent": reporting_component,
            "reportingInstance": HOSTNAME,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        events = resource_info("Event", "v1")
        await self._call(
            "POST", resource_path(events, namespace), body=body, idempotent=False, decode=False
        )
