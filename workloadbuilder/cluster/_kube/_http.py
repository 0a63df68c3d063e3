"""KubeCluster's side of the HTTP transport: the connection set-up (settings loaded once,
the proxy resolved once, the lean client of :mod:`workloadbuilder.cluster._transport` -- or
aiohttp's session with ``transport="aiohttp"``), the request headers, one attempt of a unary
request, and the opening of a watch stream. Retries and status handling are the caller's
(:class:`~workloadbuilder.cluster.KubeCluster`); failures come out as
``RetryableTransportError`` or a final ``ApiError``."""

from __future__ import annotations

import asyncio
import logging
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from workloadbuilder.cluster._kube._codec import dumps
from workloadbuilder.cluster._kube._errors import error_from_status
from workloadbuilder.cluster._kube._factories import ConfigSource, environment_proxy
from workloadbuilder.cluster._kube._kubeconfig import ClientSettings, KubeConfigError
from workloadbuilder.cluster._kube._streams import ReadChunk
from workloadbuilder.cluster._retry import classify_transport_error
from workloadbuilder.cluster._transport import Disconnected, HttpTransport, TransportError
from workloadbuilder.errors import ApiError

if TYPE_CHECKING:
    import aiohttp

    from workloadbuilder.cluster._transport import Stream

__all__ = ["TRANSPORT_ENV", "RequestPath", "TransportChoice"]

logger = logging.getLogger("workloadbuilder.cluster._kube")

#: which HTTP client carries the requests and watches (see ``KubeCluster``'s ``transport``)
TransportChoice = Literal["auto", "lean", "aiohttp"]

#: the environment variable that sets the default ``transport``
TRANSPORT_ENV = "WORKLOADBUILDER_KUBE_TRANSPORT"

#: kubernetes-asyncio's read buffer (watch events of large objects exceed aiohttp's default)
_READ_BUFSIZE = 2**21


class RequestPath:
    """The transport half of :class:`~workloadbuilder.cluster.KubeCluster` (a base class:
    the options it reads are the cluster's public attributes, changeable at any time)."""

    transport: TransportChoice
    request_timeout: float
    connect_timeout: float
    max_connections: int
    user_agent: str
    compression: bool
    _given: ClientSettings | None
    _source: ConfigSource | None
    _description: str
    _settings: ClientSettings | None
    _proxy: str | None
    _http: HttpTransport | None
    _session: aiohttp.ClientSession | None
    _loop: asyncio.AbstractEventLoop | None
    _lock: asyncio.Lock | None
    _closed: bool
    _streams: set[aiohttp.ClientResponse | Stream]
    _timeout: aiohttp.ClientTimeout | None
    _timeout_for: tuple[float, float]
    _fixed_headers: dict[tuple[str, str, bool], tuple[tuple[str, str], ...]]

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
                    if self._given is not None:
                        settings = self._given
                    else:
                        assert self._source is not None
                        settings = await self._source()
                # no per-request environment lookups (aiohttp's trust_env reads .netrc and
                # the proxy variables on every request, two thread-pool round trips): a
                # kubeconfig's proxy-url, else the environment's proxy for the server,
                # resolved once, here, as client-go's ProxyFromEnvironment does (proxy
                # credentials go in the proxy URL)
                proxy = settings.proxy or environment_proxy(settings.host)
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
                    self._description or "the settings handed in",
                    "the lean transport" if http is not None else "aiohttp",
                )
        assert self._settings is not None
        return self._settings

    def _aiohttp_session(self, settings: ClientSettings) -> aiohttp.ClientSession:
        """The aiohttp session of ``transport="aiohttp"`` (aiohttp imported now)."""
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
        data = body if body is None or isinstance(body, bytes) else dumps(body)
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

    async def _open_stream(
        self, path: str, query: Sequence[tuple[str, str]], what: str
    ) -> tuple[Stream | aiohttp.ClientResponse, ReadChunk]:
        """One attempt to open a watch: the stream and its reader (a broken stream raises
        :class:`Disconnected`). An error status is read and raised as its ``ApiError``."""
        settings = await self._client()
        http = self._http
        if http is None:
            return await self._aiohttp_stream(path, query, what)
        headers = await self._headers(settings, "application/json")
        target = f"{path}?{urllib.parse.urlencode(query)}"
        try:
            # no read deadline: watch_lines bounds the silence (a longer one before the first byte)
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

    async def _aiohttp_stream(
        self, path: str, query: Sequence[tuple[str, str]], what: str
    ) -> tuple[aiohttp.ClientResponse, ReadChunk]:
        """A watch on the aiohttp session (``transport="aiohttp"``): the response and
        its reader (a broken stream raises :class:`Disconnected`, as on the lean client)."""
        import aiohttp

        # no sock_read: watch_lines bounds the silence (a longer one before the first byte)
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
