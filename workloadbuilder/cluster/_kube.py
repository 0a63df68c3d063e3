"""``KubeCluster``: the :class:`~workloadbuilder.cluster.Cluster` protocol on a real API server.

Configuration: kubeconfig files are read by ``_kubeconfig.py`` (no kubernetes-asyncio
import: it costs about half a second of CPU); users with ``exec`` credential plugins or an
``auth-provider``, the in-cluster service account and a ``Configuration`` handed to the
constructor go through kubernetes-asyncio, imported only then. Requests are plain REST calls
on paths from :meth:`ResourceInfo.path` -- unary ones and watches on the lean transport of
``_transport.py``, through a proxy too (absolute-form requests, or a ``CONNECT`` tunnel for
``https://``); on one pooled aiohttp session only with ``transport="aiohttp"``, aiohttp
imported only then -- with the configuration's token, proxy and TLS server name,
so every kind works, including those the generated client does not know
(``scheduling.k8s.io/v1beta1`` and ``v1alpha3``, JobSet, LeaderWorkerSet, custom resources).

Lifetime: the factories (:meth:`KubeCluster.from_kubeconfig`, :meth:`KubeCluster.in_cluster`)
are synchronous and cheap; they read and check the configuration but open nothing. The
HTTP session is created on first use (or by :meth:`KubeCluster.open` /
``async with``) inside the running event loop, and belongs to that loop. Call
:meth:`KubeCluster.close` (or use ``async with``) when done. ``await KubeCluster.connect(...)``
is the one-step "load + open".
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import json
import logging
import os
import re
import socket
import time
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote

try:  # optional: faster JSON for request bodies and responses (``_loads`` leaves text with 19
    # or more digits in a row to json: orjson reads integers beyond 64 bits as floats)
    import orjson as _orjson
except ImportError:  # pragma: no cover - depends on the installation
    _orjson = None  # type: ignore[assignment]
from workloadbuilder.api import KINDS, object_from_dict, object_to_dict
from workloadbuilder.cluster._kubeconfig import (
    ClientSettings,
    KubeConfigError,
    read_kubeconfig,
    settings_from_configuration,
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
from workloadbuilder.cluster._retry import (
    RetryableTransportError,
    RetryPolicy,
    classify_transport_error,
    is_retryable,
    retry_call,
)
from workloadbuilder.cluster._transport import Disconnected, HttpTransport, TransportError
from workloadbuilder.errors import (
    AlreadyExists,
    ApiError,
    BadRequest,
    Conflict,
    FieldError,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    TooManyRequests,
    Unauthorized,
)

if TYPE_CHECKING:
    import aiohttp
    from kubernetes_asyncio.client import Configuration

    from workloadbuilder.cluster._transport import Stream

__all__ = ["KubeCluster", "KubeConfigError", "error_from_status"]

logger = logging.getLogger(__name__)

_PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "apply": "application/apply-patch+yaml",
}

#: upstream metav1.CauseType -> field.ErrorType string (as rendered in messages)
_CAUSE_TYPES: dict[str, str] = {
    "FieldValueNotFound": "Not found",
    "FieldValueRequired": "Required value",
    "FieldValueDuplicate": "Duplicate value",
    "FieldValueInvalid": "Invalid value",
    "FieldValueNotSupported": "Unsupported value",
    "FieldValueForbidden": "Forbidden",
    "FieldValueTooLong": "Too long",
    "FieldValueTooMany": "Too many",
    "InternalError": "Internal error",
    "FieldValueTypeInvalid": "Invalid value",
}

_USER_AGENT = "workloadbuilder/0.1 (kubernetes-asyncio)"

#: loads the settings on first use (an exec plugin may run then)
ConfigSource = Callable[[], Awaitable[ClientSettings]]

#: which HTTP client carries the unary requests (see ``KubeCluster``'s ``transport``)
TransportChoice = Literal["auto", "lean", "aiohttp"]

#: the environment variable that sets the default ``transport``
TRANSPORT_ENV = "WORKLOADBUILDER_KUBE_TRANSPORT"


class KubeCluster:
    """The :class:`~workloadbuilder.cluster.Cluster` protocol over HTTP to a real API server.

    Prefer the factories: ``KubeCluster.from_kubeconfig(path, context)``,
    ``KubeCluster.in_cluster()``, or ``await KubeCluster.connect(path, context)``. The
    constructor takes a ready kubernetes-asyncio ``Configuration``.

    Options: ``retry`` (a :class:`RetryPolicy`), ``request_timeout`` (seconds for a whole
    non-watch request), ``connect_timeout``, ``watch_idle_timeout`` (a watch that receives
    nothing for this long ends, like a dropped connection; the caller resumes from its last
    resourceVersion), ``max_connections`` (the unary requests' pool size; on the lean client
    each watch has a connection of its own outside it, on aiohttp watches count in it),
    ``transport``: ``"auto"`` (the default; also read from
    ``$WORKLOADBUILDER_KUBE_TRANSPORT``) sends unary requests (get, list, create, update,
    patch, delete, bind, evict, events) and watches on the lean keep-alive HTTP/1.1 client
    of ``_transport.py``, a proxy included (a kubeconfig's ``proxy-url``, else the
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
        configuration: Configuration | None = None,
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
    ) -> None:
        if configuration is None and _source is None:
            raise TypeError("KubeCluster needs a Configuration; see KubeCluster.from_kubeconfig")
        self._configuration = configuration
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
        self._http: HttpTransport | None = None
        self._session: aiohttp.ClientSession | None = None
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
        if path is None:
            paths = os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
        else:
            paths = os.fspath(path)
        existing = [p for p in paths.split(os.pathsep) if p and Path(p).expanduser().exists()]
        if not existing:
            if path is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
                return cls.in_cluster(**options)  # like client-go's default loading rules
            raise KubeConfigError(f"kubeconfig not found: {paths}")
        kubeconfig = read_kubeconfig(existing, context)
        if kubeconfig.needs_plugin:
            loaded = _plugin_source(existing, kubeconfig.context)
            disable_compression = kubeconfig.cluster.get("disable-compression") is True

            async def source() -> ClientSettings:  # the cluster's fields are ours to read
                settings = await loaded()
                return dataclasses.replace(settings, disable_compression=disable_compression)

        else:

            async def source() -> ClientSettings:
                return kubeconfig.settings()

        return cls(
            _source=source,
            _description=f"kubeconfig {paths} context {kubeconfig.context}",
            **options,
        )

    @classmethod
    def in_cluster(cls, **options: Any) -> KubeCluster:
        """A cluster from the pod's service account (``KUBERNETES_SERVICE_HOST``/``PORT``, the
        mounted token, refreshed as it rotates, and CA). Raises ``KubeConfigError`` outside
        a pod."""
        from kubernetes_asyncio.client import Configuration
        from kubernetes_asyncio.config import ConfigException
        from kubernetes_asyncio.config.incluster_config import load_incluster_config

        cfg = type.__call__(Configuration)
        try:
            load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        except ConfigException as e:
            raise KubeConfigError(f"not running in a cluster: {e}") from e
        return cls(cfg, _description="in-cluster", **options)

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
        cfg = self._configuration
        return str(cfg.host) if cfg is not None else None

    def __repr__(self) -> str:
        return f"KubeCluster({self.server or self._description})"

    async def _client(self) -> ClientSettings:
        """The settings, with the session (and lean transport) open in the running loop."""
        if self._closed:
            raise RuntimeError("KubeCluster is closed")
        loop = asyncio.get_running_loop()
        if self._loop is not None:
            if self._loop is not loop:
                raise RuntimeError(
                    "KubeCluster is bound to the event loop it was opened in; "
                    "create one KubeCluster per event loop"
                )
            assert self._settings is not None
            return self._settings
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._loop is None:
                settings = self._settings
                if settings is None:
                    if self._configuration is not None:
                        settings = settings_from_configuration(self._configuration)
                    else:
                        assert self._source is not None
                        settings = await self._source()
                # no per-request environment lookups (aiohttp's trust_env reads .netrc and
                # the proxy variables on every request, two thread-pool round trips): a
                # kubeconfig's proxy-url, else the environment's proxy for the server,
                # resolved once, here, as client-go's ProxyFromEnvironment does (proxy
                # credentials go in the proxy URL)
                proxy = settings.proxy or _environment_proxy(settings.host)
                http = self._lean_transport(settings, proxy)
                session = self._aiohttp_session(settings) if http is None else None
                if self._closed:  # closed while we were loading
                    if session is not None:
                        await session.close()
                    if http is not None:
                        await http.close()
                    raise RuntimeError("KubeCluster is closed")
                self._settings = settings
                self._proxy = proxy
                self._http = http
                self._session = session
                self._loop = loop
                logger.debug(
                    "%r: connected (%s; requests and watches on %s)",
                    self,
                    self._description or "a Configuration",
                    "the lean transport" if http is not None else "aiohttp",
                )
        assert self._settings is not None
        return self._settings

    def _aiohttp_session(self, settings: ClientSettings) -> aiohttp.ClientSession:
        """The aiohttp session of a proxy or ``transport="aiohttp"`` (aiohttp imported now)."""
        import aiohttp

        return aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(
                limit=self.max_connections,
                ssl=settings.ssl_context if settings.ssl_context is not None else True,
            ),
            trust_env=False,
            read_bufsize=_READ_BUFSIZE,
        )

    def _lean_transport(self, settings: ClientSettings, proxy: str | None) -> HttpTransport | None:
        """The lean client for requests and watches (through ``proxy`` when one is set), or
        None (``transport="aiohttp"``)."""
        if self.transport == "aiohttp":
            return None
        try:
            return HttpTransport(
                settings.host,
                ssl_context=settings.ssl_context,
                server_hostname=settings.server_hostname,
                max_connections=self.max_connections,
                proxy=proxy,
                proxy_headers=settings.proxy_headers,
            )
        except (OSError, ValueError) as e:  # ssl.SSLError is an OSError
            raise KubeConfigError(f"cannot set up the connection to {settings.host}: {e}") from e

    # ------------------------------------------------------------------ transport

    async def _headers(
        self, settings: ClientSettings, content_type: str
    ) -> tuple[tuple[str, str], ...]:
        """The request headers: ``Accept``, ``Content-Type``, ``User-Agent`` and the
        credentials, read through the settings every time (exec plugins, token files and
        rotated service-account tokens refresh them)."""
        compressed = self.compression and not settings.disable_compression
        key = (content_type, self.user_agent, compressed)
        fixed = self._fixed_headers.get(key)
        if fixed is None:
            fields = [
                ("Accept", "application/json"),
                ("Content-Type", content_type),
                ("User-Agent", self.user_agent),
            ]
            if not compressed:
                fields.append(("Accept-Encoding", "identity"))
            fixed = self._fixed_headers[key] = tuple(fields)
        if settings.authorization is not None:
            token = await settings.authorization()
            if token:
                return (*fixed, ("authorization", token))
        return fixed

    async def _exchange(
        self,
        method: str,
        path: str,
        query: Sequence[tuple[str, str]],
        data: bytes | None,
        content_type: str,
    ) -> tuple[int, Mapping[str, str], bytes]:
        """One attempt of a unary request: (status, headers, body). Transport failures
        become ``RetryableTransportError`` (or a final ``ApiError``), as on aiohttp."""
        settings = self._settings
        if settings is None or self._closed or self._loop is not asyncio.get_running_loop():
            settings = await self._client()  # connects, or says why it cannot
        http = self._http
        if http is None:
            import aiohttp

            resp = await self._send(method, path, query=query, body=data, content_type=content_type)
            try:
                body = await resp.read()
            except (aiohttp.ClientError, TimeoutError) as e:
                resp.close()
                marker = classify_transport_error(e)
                if marker is not None:
                    raise marker from e
                raise ApiError(f"{method} {path}: {e}", status=0, reason="ClientError") from e
            finally:
                resp.release()
            return resp.status, resp.headers, body
        headers = await self._headers(settings, content_type)
        target = path
        if query:
            target += "?" + urllib.parse.urlencode(list(query))
        try:
            r = await http.request(
                method,
                target,
                headers,
                data,
                timeout=self.request_timeout,
                connect_timeout=self.connect_timeout,
            )
        except (TransportError, TimeoutError) as e:
            marker = classify_transport_error(e)
            if marker is not None:
                raise marker from e
            raise ApiError(f"{method} {path}: {e}", status=0, reason="ClientError") from e
        return r.status, r.headers, r.body

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = "application/json",
        timeout: aiohttp.ClientTimeout | None = None,
    ) -> aiohttp.ClientResponse:
        """One attempt: send the request, return the (unread) response. Transport failures
        become ``RetryableTransportError`` (or a final ``ApiError``). The aiohttp path only."""
        import aiohttp

        settings = await self._client()
        if timeout is None:
            if self._timeout is None or self._timeout_for != (
                self.request_timeout,
                self.connect_timeout,
            ):
                self._timeout_for = (self.request_timeout, self.connect_timeout)
                self._timeout = aiohttp.ClientTimeout(
                    total=self.request_timeout, sock_connect=self.connect_timeout
                )
            timeout = self._timeout
        headers = dict(await self._headers(settings, content_type))
        url = f"{settings.host}{path}"
        if query:
            url += "?" + urllib.parse.urlencode(list(query))
        options: dict[str, Any] = {}
        if self._proxy:
            options["proxy"] = self._proxy
        if settings.proxy_headers:
            options["proxy_headers"] = dict(settings.proxy_headers)
        if settings.server_hostname:
            options["server_hostname"] = settings.server_hostname
        data = body if body is None or isinstance(body, bytes) else _dumps(body)
        session = self._session
        assert session is not None
        try:
            resp: aiohttp.ClientResponse = await session.request(
                method, url, headers=headers, data=data, timeout=timeout, **options
            )
        except (aiohttp.ClientError, TimeoutError) as e:
            marker = classify_transport_error(e)
            if marker is not None:
                raise marker from e
            raise ApiError(f"{method} {path}: {e}", status=0, reason="ClientError") from e
        return resp

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
        payload = None if body is None else _dumps(body)

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
                decoded = _loads(data)
            except ValueError as e:
                raise ApiError(f"{method} {path}: response is not JSON", status=status) from e
            return decoded if isinstance(decoded, dict) else {"items": decoded}

        try:
            return await retry_call(
                attempt, policy=self.retry, idempotent=idempotent, what=f"{method} {path}"
            )
        except RetryableTransportError as e:
            raise _gave_up(f"{method} {path}", e) from e.cause

    # ------------------------------------------------------------------ reads

    async def get(
        self, kind: str | ResourceInfo, name: str, namespace: str | None = None
    ) -> KubeObject:
        """Read one object."""
        info = resource_info(kind)
        doc = await self._call("GET", _path(info, namespace, name), idempotent=True)
        return _decode(doc, info)

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
        items = tuple(_decode(item, info) for item in doc.get("items") or ())
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

        async def open_stream() -> tuple[Stream | aiohttp.ClientResponse, _Read]:
            settings = await self._client()
            http = self._http
            if http is None:
                return await self._aiohttp_stream(path, query, what)
            headers = await self._headers(settings, "application/json")
            target = f"{path}?{urllib.parse.urlencode(query)}"
            try:
                # no read deadline: _lines bounds the silence (a longer one before the first byte)
                stream = await http.stream(target, headers, connect_timeout=self.connect_timeout)
            except (TransportError, TimeoutError) as e:
                marker = classify_transport_error(e)
                if marker is not None:
                    raise marker from e
                raise ApiError(f"GET {path}: {e}", status=0, reason="ClientError") from e
            if stream.status >= 400:
                try:
                    async with asyncio.timeout(self.request_timeout):
                        data = await stream.read_all()
                except (TransportError, TimeoutError):
                    data = b""
                finally:
                    stream.close()
                raise error_from_status(stream.status, data, stream.headers, what=what)
            return stream, stream.read

        try:
            resp, read = await retry_call(
                open_stream, policy=self.retry, idempotent=True, what=what
            )
        except RetryableTransportError as e:
            raise _gave_up(what, e) from e.cause
        self._streams.add(resp)
        try:
            async for line in _lines(read, first=first, silent=silent):
                event = _watch_event(line, info, what)
                if event is not None:
                    yield event
        except _WatchStalled as e:
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

    async def _aiohttp_stream(
        self, path: str, query: Sequence[tuple[str, str]], what: str
    ) -> tuple[aiohttp.ClientResponse, _Read]:
        """A watch on the aiohttp session (a proxy, ``transport="aiohttp"``): the response and
        its reader (a broken stream raises :class:`Disconnected`, as on the lean client)."""
        import aiohttp

        # no sock_read: _lines bounds the silence (a longer one before the first byte)
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.connect_timeout)
        resp = await self._send("GET", path, query=query, timeout=timeout)
        if resp.status >= 400:
            try:
                data = await resp.read()
            except (aiohttp.ClientError, TimeoutError):
                data = b""
            finally:
                resp.release()
            raise error_from_status(resp.status, data, resp.headers, what=what)

        async def read() -> bytes:
            try:
                return await resp.content.readany()
            except aiohttp.ClientError as e:
                raise Disconnected(f"watch stream ended: {e}") from e

        return resp, read

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
        body = _encode(obj)
        ns = namespace or _meta(body).get("namespace")
        doc = await self._call(
            "POST",
            _path(info, ns),
            query=_write_query(dry_run, field_manager),
            body=body,
            idempotent=False,
        )
        return _decode(doc, info)

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
        body = _encode(obj)
        meta = _meta(body)
        name = meta.get("name")
        if not name:
            raise ValueError("update needs metadata.name")
        path = _path(info, meta.get("namespace"), str(name))
        if subresource:
            path += "/" + subresource
        doc = await self._call(
            "PUT",
            path,
            query=_write_query(dry_run, field_manager),
            body=body,
            idempotent=True,
        )
        return _decode(doc, info)

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
            content_type = _PATCH_CONTENT_TYPES[patch_type]
        except KeyError:
            raise ValueError(f"unknown patch type {patch_type!r}") from None
        path = _path(info, namespace, name)
        if subresource:
            path += "/" + subresource
        query = _write_query(dry_run, field_manager)
        if force and patch_type == "apply":
            query.append(("force", "true"))
        doc = await self._call(
            "PATCH",
            path,
            query=query,
            body=_plain(patch),
            content_type=content_type,
            idempotent=patch_type != "json",
        )
        return _decode(doc, info)

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
            _path(info, namespace, name),
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
            _path(pods, namespace, pod_name) + "/binding",
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
            "POST", _path(pods, namespace, pod_name) + "/eviction", body=body, idempotent=False
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
        now = _timestamp()
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
            "reportingInstance": _HOSTNAME,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        events = resource_info("Event", "v1")
        await self._call(
            "POST", _path(events, namespace), body=body, idempotent=False, decode=False
        )


# ---------------------------------------------------------------------- helpers

#: the ``reportingInstance`` of our events (client-go's recorder also reads it once)
_HOSTNAME = socket.gethostname()

#: the second :func:`_timestamp` last formatted, and its text
_stamp: tuple[int, str] = (-1, "")


def _timestamp() -> str:
    """The time now, UTC, to the second, as an Event's timestamps give it (formatted once
    per second)."""
    global _stamp
    second = int(time.time())
    if second != _stamp[0]:
        text = datetime.datetime.fromtimestamp(second, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        _stamp = (second, text)
    return _stamp[1]


#: kubernetes-asyncio's read buffer (watch events of large objects exceed aiohttp's default)
_READ_BUFSIZE = 2**21

#: reads the next piece of a watch's body (``b""`` at its end)
_Read = Callable[[], Awaitable[bytes]]


def _environment_proxy(server: str) -> str | None:
    """The proxy the environment names for ``server`` (``HTTPS_PROXY``/``HTTP_PROXY`` by the
    URL's scheme, unless ``NO_PROXY`` exempts its host), or None."""
    parts = urllib.parse.urlsplit(server)
    if parts.hostname and urllib.request.proxy_bypass(parts.hostname):
        return None
    return urllib.request.getproxies().get(parts.scheme) or None


def _dumps(body: Any) -> bytes:
    """A request body as JSON (dates as ISO 8601): orjson when installed, else ``json``."""
    if _orjson is not None:
        try:
            return _orjson.dumps(
                body,
                default=_json_default,
                option=_orjson.OPT_PASSTHROUGH_DATETIME | _orjson.OPT_NON_STR_KEYS,
            )
        except TypeError:
            pass  # what orjson refuses (e.g. integers beyond 64 bits), json may take
    return json.dumps(body, default=_json_default).encode()


#: digits -> "0", every other byte -> "x": ``_loads`` looks for 19 digits in a row
_DIGITS = bytes(48 if 48 <= i <= 57 else 120 for i in range(256))


def _loads(data: bytes) -> Any:
    """A JSON response body or watch line: orjson (2-3x faster than ``json`` on API objects)
    unless the text has 19 or more digits in a row -- an integer orjson might read as a float
    (it keeps integers exactly only up to 64 bits) -- or orjson refuses it; ``json`` then."""
    if _orjson is not None and data.translate(_DIGITS).find(b"0000000000000000000") < 0:
        try:
            return _orjson.loads(data)
        except ValueError:
            pass  # what orjson refuses (e.g. a lone surrogate), json may take
    return json.loads(data)


def _json_default(value: Any) -> Any:
    """Dates in request bodies as ISO 8601 (as kubernetes-asyncio's serialiser does)."""
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _gave_up(what: str, e: RetryableTransportError) -> ApiError:
    """The final error of a request whose transport failures outlasted the retries."""
    reason = "Timeout" if isinstance(e.cause, TimeoutError) else "ConnectionError"
    return ApiError(f"{what}: {reason}: {e}", status=0, reason=reason)


def _plugin_source(paths: Sequence[str], context: str) -> ConfigSource:
    """Credentials from an ``exec`` plugin or an ``auth-provider``: kubernetes-asyncio's
    loader (imported now, only for such a kubeconfig) on the same files and context, the
    plugin re-run when the token it gave has expired."""
    where = os.pathsep.join(paths)

    async def source() -> ClientSettings:
        from kubernetes_asyncio.client import Configuration
        from kubernetes_asyncio.config import ConfigException
        from kubernetes_asyncio.config.kube_config import KubeConfigLoader, KubeConfigMerger

        try:
            merger = KubeConfigMerger(where)
            loader = KubeConfigLoader(
                config_dict=merger.config, config_base_path=None, active_context=context
            )
            cfg = type.__call__(Configuration)
            await loader.load_and_set(cfg)
        except (ConfigException, KeyError, TypeError, ValueError, AssertionError, OSError) as e:
            raise KubeConfigError(f"cannot load credentials from {where}: {e}") from e
        if getattr(loader, "exec_plugin_expiry", None) is not None:

            async def refresh(config: Configuration) -> None:
                await loader.load_from_exec_plugin()  # a no-op until the token expires
                token = getattr(loader, "token", None)
                if token:
                    config.api_key["BearerToken"] = token

            cfg.refresh_api_key_hook = refresh
        return settings_from_configuration(cfg)

    return source


#: what ``quote(..., safe="")`` leaves as it is (every DNS name and label qualifies)
_UNRESERVED = re.compile(r"[A-Za-z0-9_.~-]*")


def _segment(text: str) -> str:
    """``text`` quoted for one path segment."""
    return text if _UNRESERVED.fullmatch(text) else quote(text, safe="")


def _path(info: ResourceInfo, namespace: str | None, name: str | None = None) -> str:
    ns = (namespace or "default") if info.namespaced else None
    return info.path(_segment(ns) if ns else None, _segment(name) if name is not None else None)


def _write_query(dry_run: bool, field_manager: str | None) -> list[tuple[str, str]]:
    query: list[tuple[str, str]] = []
    if dry_run:
        query.append(("dryRun", "All"))
    if field_manager:
        query.append(("fieldManager", field_manager))
    return query


def _meta(body: Mapping[str, Any]) -> dict[str, Any]:
    meta = body.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _encode(obj: KubeObject) -> dict[str, Any]:
    if isinstance(obj, dict):
        return _plain(obj)  # type: ignore[no-any-return]
    return object_to_dict(obj)


def _plain(value: Any) -> Any:
    """A JSON-ready deep copy (plain dicts and lists) of a Mapping/Sequence document."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _decode(doc: dict[str, Any], info: ResourceInfo | None) -> KubeObject:
    """Typed model for our kinds, the dict otherwise (list items get apiVersion/kind)."""
    if info is not None:
        doc.setdefault("apiVersion", info.api_version)
        doc.setdefault("kind", info.kind)
    kind = doc.get("kind")
    if isinstance(kind, str) and kind in KINDS and doc.get("apiVersion") in KINDS[kind][1]:
        return object_from_dict(doc)
    return doc


class _WatchStalled(Exception):
    """Nothing arrived on a watch within its bound."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"nothing received for {seconds:.0f}s")
        self.seconds = seconds


async def _lines(
    read: _Read, *, first: float | None = None, silent: float | None = None
) -> AsyncIterator[bytes]:
    """The body that ``read`` returns piece by piece, split at newlines (no bound on a line's
    length). A dropped connection ends the stream (the caller resumes from its last
    resourceVersion); no byte for ``first`` seconds at the start or ``silent`` seconds later
    raises :class:`_WatchStalled`.

    The bound counts while a read waits (from its start), not while the consumer handles a
    line. One timer per stream, re-armed lazily (it was an ``asyncio.timeout`` per read, a
    timer handle made and cancelled for every event: a fifth of a watch event's CPU)."""
    loop = asyncio.get_running_loop()
    pending: list[bytes] = []  # the start of a line whose newline has not arrived yet
    bound = first
    timer: asyncio.TimerHandle | None = None
    waiting: asyncio.Task[Any] | None = None  # the task waiting in read(), while it waits
    since = 0.0  # when that read started
    expired = False
    received = False

    def check() -> None:
        nonlocal timer, expired
        timer = None
        if bound is None:
            return
        task = waiting
        if task is None:  # between reads: the next read starts the bound again
            timer = loop.call_at(loop.time() + bound, check)
            return
        due = since + bound
        if loop.time() >= due - 0.001:  # (a loop's timers may run up to its resolution early)
            expired = True
            task.cancel()
        else:
            timer = loop.call_at(due, check)

    try:
        while True:
            since = loop.time()
            if timer is None and bound is not None:
                timer = loop.call_at(since + bound, check)
            task = waiting = asyncio.current_task()
            assert task is not None
            cancelling = task.cancelling()
            try:
                chunk = await read()
            except asyncio.CancelledError:
                if expired:
                    expired = False
                    if task.uncancel() <= cancelling:
                        raise _WatchStalled(bound or 0.0) from None
                raise
            finally:
                waiting = None
            if not chunk:
                break
            if not received:  # the first byte: from now on the bound is ``silent``
                received = True
                bound = silent
                if timer is not None:
                    timer.cancel()
                    timer = None
            if b"\n" not in chunk:
                pending.append(chunk)
                continue
            if pending:
                pending.append(chunk)
                chunk = b"".join(pending)
                pending.clear()
            lines = chunk.split(b"\n")
            tail = lines.pop()
            if tail:
                pending.append(tail)
            for line in lines:
                if line.strip():
                    yield line
    except (TransportError, TimeoutError, ConnectionError) as e:
        logger.debug("watch stream ended: %s", e)
        return
    finally:
        if timer is not None:
            timer.cancel()
    rest = b"".join(pending)
    if rest.strip():
        yield rest


def _watch_event(line: bytes, info: ResourceInfo, what: str) -> WatchEvent | None:
    try:
        raw = _loads(line)
    except ValueError:
        # A line cut short by a dropped connection: the stream is over.
        logger.debug("%s: undecodable watch line dropped", what)
        return None
    if not isinstance(raw, dict):
        return None
    etype = raw.get("type")
    obj = raw.get("object")
    if not isinstance(obj, dict):
        obj = {}
    if etype == "ERROR":
        code = obj.get("code")
        status = code if isinstance(code, int) else 500
        raise error_from_status(status, obj, {}, what=what)
    if etype == "BOOKMARK":
        return WatchEvent(type="BOOKMARK", object=obj)
    if etype not in ("ADDED", "MODIFIED", "DELETED"):
        logger.debug("%s: unknown watch event type %r", what, etype)
        return None
    return WatchEvent(type=etype, object=_decode(obj, info))


def _retry_after(headers: Mapping[str, str], details: Mapping[str, Any]) -> float | None:
    value = headers.get("Retry-After")
    if value:
        try:
            return max(0.0, float(value))
        except ValueError:
            pass
    seconds = details.get("retryAfterSeconds")
    return float(seconds) if isinstance(seconds, (int, float)) and seconds > 0 else None


def _field_error(cause: Mapping[str, Any]) -> FieldError:
    """A server StatusCause -> FieldError; the message is ``<type>[: <value>][: <detail>]``."""
    path = str(cause.get("field") or "")
    reason = str(cause.get("reason") or "")
    message = str(cause.get("message") or "")
    etype = _CAUSE_TYPES.get(reason)
    if etype is None:
        return FieldError(path=path, type=reason or "Invalid value", detail=message)
    rest = message
    if rest.startswith(etype):
        rest = rest[len(etype) :]
        rest = rest[2:] if rest.startswith(": ") else rest.lstrip(":").lstrip()
    else:
        return FieldError(path=path, type=etype, detail=message)
    if etype in ("Invalid value", "Unsupported value", "Duplicate value", "Too many") and rest:
        try:
            value, end = json.JSONDecoder().raw_decode(rest)
        except ValueError:
            return FieldError(path=path, type=etype, detail=rest)
        tail = rest[end:]
        if not tail or tail.startswith(": "):
            return FieldError(path=path, type=etype, detail=tail[2:], value=value, has_value=True)
        return FieldError(path=path, type=etype, detail=rest)
    return FieldError(path=path, type=etype, detail=rest)


def error_from_status(
    status: int,
    body: bytes | Mapping[str, Any],
    headers: Mapping[str, str],
    *,
    what: str = "",
) -> ApiError:
    """Turn an HTTP error (status code, body - ideally a ``metav1.Status`` - and headers)
    into the matching typed :class:`~workloadbuilder.errors.ApiError`."""
    doc: Any
    if isinstance(body, Mapping):
        doc = dict(body)
    else:
        try:
            doc = json.loads(body) if body else {}
        except ValueError:
            doc = {}
        if not isinstance(doc, dict):
            doc = {}
    if doc.get("kind") != "Status":
        text = body.decode("utf-8", "replace").strip() if isinstance(body, bytes) else ""
        doc = {"message": text[:500]} if text else {}
    code = doc.get("code")
    if isinstance(code, int) and code >= 400:
        status = code
    reason = str(doc.get("reason") or "")
    message = str(doc.get("message") or "") or f"HTTP {status}"
    if what:
        message = f"{message} ({what})" if status >= 500 or status == 0 else message
    details = doc.get("details") if isinstance(doc.get("details"), dict) else {}
    assert isinstance(details, dict)
    kwargs: dict[str, Any] = {
        "status": status,
        "reason": reason or None,
        "retry_after": _retry_after(headers, details),
        "body": doc,
    }
    if status == 400:
        return BadRequest(message, **kwargs)
    if status == 404:
        return NotFound(message, **kwargs)
    if status == 409:
        if reason == "AlreadyExists":
            return AlreadyExists(message, **kwargs)
        return Conflict(message, **kwargs)
    if status == 410:
        return Gone(message, **kwargs)
    if status == 422:
        causes = [
            _field_error(c)
            for c in details.get("causes") or ()
            if isinstance(c, dict) and (c.get("field") or c.get("reason") in _CAUSE_TYPES)
        ]
        return Invalid(message, causes=causes, **kwargs)
    if status == 403:
        return Forbidden(message, **kwargs)
    if status == 401:
        return Unauthorized(message, **kwargs)
    if status == 429:
        return TooManyRequests(message, **kwargs)
    return ApiError(message, **kwargs)
