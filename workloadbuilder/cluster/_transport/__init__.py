"""A lean HTTP/1.1 keep-alive client for :class:`~workloadbuilder.cluster.KubeCluster`'s
unary requests (get, list, create, update, patch, delete, bind, events) and its watches.

Why: on the real-plane benchmark most of the scheduler's CPU went to aiohttp's request and
response machinery (per request: URL objects, header multidicts, a payload object, stream
readers, timer contexts). This client does only what an API server request needs, on an
asyncio :class:`~asyncio.Protocol` (plain TCP or ``ssl``):

* a small pool of keep-alive connections per server (at most ``max_connections`` requests in
  flight, one per connection; an idle connection is reused most-recently-used first and
  dropped when the server closed it or it has been idle for ``idle_timeout`` seconds);
* the request line, ``Host``, the caller's headers, ``Content-Length`` and
  ``Accept-Encoding: gzip`` written in one write; the response parsed in ``data_received``
  (``Content-Length``, ``chunked``, or read-to-close bodies; ``1xx`` skipped; ``gzip``
  decoded);
* a whole-request deadline (one timer per request) and a connect deadline.

It knows nothing of Kubernetes: authentication (client certificates in the ``ssl`` context,
the bearer token in the headers), retries and status handling are the caller's. Failures are
typed so the caller can tell whether the request may have reached the server:

* :class:`ConnectError` -- no connection could be made (nothing was sent);
* :class:`TLSError` -- the TLS handshake failed (certificate verification and the like);
* :class:`Disconnected` -- the connection closed or broke after the request may have been
  sent (an idempotent request -- GET, HEAD, OPTIONS, TRACE, PUT, DELETE -- whose
  connection breaks before the response head arrives is first sent once more, at once, on
  another connection, as aiohttp does);
* :class:`ProtocolError` -- the server's response is not valid HTTP/1.1;
* the builtin ``TimeoutError`` -- the connect or whole-request deadline passed.

Streams (:meth:`HttpTransport.stream`, what a watch is): a GET whose body is read piece by
piece as it arrives (chunked, ``Content-Length`` or read-to-close; gzip decoded). Each stream
has a connection of its own, outside the pool and its ``max_connections`` bound, and closed
when the stream ends: a connection that carried a stream is never reused. The connect
deadline applies; once the head is in, nothing bounds the wait for the next byte (the caller
bounds the silence it tolerates). A connection that breaks before the body is complete is
:class:`Disconnected` on the next read.

Proxies (``proxy=``, an ``http://`` proxy URL, credentials in it sent as
``Proxy-Authorization: Basic``): an ``http://`` server's requests go to the proxy in absolute
form (``GET http://server/path``); an ``https://`` server is reached through an HTTP
``CONNECT`` tunnel, TLS to the server inside it, as client-go does. A proxy that cannot be
reached, or refuses the tunnel (any status but 2xx), is a :class:`ConnectError` (the request
was not sent).
"""

from __future__ import annotations

import asyncio
import base64
import socket
import ssl
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

from workloadbuilder.cluster._transport._base import (
    IDEMPOTENT as _IDEMPOTENT,
)
from workloadbuilder.cluster._transport._base import MAX_HEAD as _MAX_HEAD
from workloadbuilder.cluster._transport._base import STREAM_HIGH_WATER as _STREAM_HIGH_WATER
from workloadbuilder.cluster._transport._base import (
    ConnectError,
    Disconnected,
    Headers,
    ProtocolError,
    Response,
    TLSError,
    TransportError,
)
from workloadbuilder.cluster._transport._base import Connection as _Connection
from workloadbuilder.cluster._transport._base import decompress as _decompress
from workloadbuilder.cluster._transport._stream import Stream
from workloadbuilder.cluster._transport._stream import StreamConnection as _StreamConnection

__all__ = [
    "ConnectError",
    "Disconnected",
    "Headers",
    "HttpTransport",
    "ProtocolError",
    "Response",
    "Stream",
    "TLSError",
    "TransportError",
]


class HttpTransport:
    """Keep-alive HTTP/1.1 to one server (``http://`` or ``https://`` base URL; a path in it
    prefixes every request target).

    ``ssl_context`` is used for ``https`` (a default context when None); ``server_hostname``
    overrides the name the certificate is checked against (SNI). At most
    ``max_connections`` requests are in flight (one per connection; more wait). Belongs to
    the event loop it is first used in.
    """

    def __init__(
        self,
        base_url: str,
        *,
        ssl_context: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
        max_connections: int = 100,
        idle_timeout: float = 15.0,
        proxy: str | None = None,
        proxy_headers: Mapping[str, str] | None = None,
    ) -> None:
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        host = f"[{self.host}]" if ":" in self.host else self.host
        default_port = self.port == (443 if parts.scheme == "https" else 80)
        self._host_header = host if default_port else f"{host}:{self.port}"
        self._prefix = parts.path.rstrip("/")
        self._ssl: ssl.SSLContext | None = None
        self._server_hostname: str | None = None
        if parts.scheme == "https":
            self._ssl = ssl_context if ssl_context is not None else ssl.create_default_context()
            self._server_hostname = server_hostname or None
        #: the proxy's (host, port), or None; the CONNECT request of a tunnel
        self._proxy: tuple[str, int] | None = None
        self._connect_request = b""
        #: header fields every request sends (an ``http://`` server's proxy credentials)
        self._extra_fields: tuple[tuple[str, str], ...] = ()
        if proxy:
            self._proxy, fields = _proxy_endpoint(proxy, proxy_headers)
            if self._ssl is None:  # absolute-form requests to the proxy
                self._prefix = f"http://{self._host_header}{self._prefix}"
                self._extra_fields = fields
            else:
                authority = f"{host}:{self.port}"
                lines = [f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n"]
                lines += [f"{name}: {value}\r\n" for name, value in fields]
                self._connect_request = ("".join(lines) + "\r\n").encode("latin-1")
        self.max_connections = max(1, max_connections)
        self.idle_timeout = idle_timeout
        self._idle: list[_Connection] = []
        self._open: set[_Connection] = set()
        self._streams: set[_StreamConnection] = set()
        self._sem: asyncio.Semaphore | None = None
        self._closed = False
        #: the last tuple of header fields encoded, and its encoding (most requests of a
        #: client send the same fields)
        self._fields_for: tuple[tuple[str, str], ...] | None = None
        self._fields = ""

    @property
    def connections(self) -> int:
        """Open connections of the pool (idle or carrying a request; streams not counted)."""
        return len(self._open)

    @property
    def streams(self) -> int:
        """Open streams (each on a connection of its own)."""
        return len(self._streams)

    async def request(
        self,
        method: str,
        target: str,
        headers: Iterable[tuple[str, str]] = (),
        body: bytes | None = None,
        *,
        timeout: float = 30.0,
        connect_timeout: float = 10.0,
    ) -> Response:
        """Send one request (``target``: path and query, already encoded) and read the whole
        response. Raises a :class:`TransportError` or ``TimeoutError`` (see the module)."""
        if self._closed:
            raise RuntimeError("HttpTransport is closed")
        sem = self._sem
        if sem is None:
            sem = self._sem = asyncio.Semaphore(self.max_connections)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        data = self._encode(method, target, headers, body)
        resend = method in _IDEMPOTENT
        async with sem:
            while True:
                conn = self._take_idle()
                if conn is None:
                    conn = await self._connect(loop, min(deadline, loop.time() + connect_timeout))
                try:
                    resp = await conn.send(data, head_only=method == "HEAD", deadline=deadline)
                except Disconnected as e:
                    conn.close()
                    self._open.discard(conn)
                    if resend and not e.head_received:
                        resend = False
                        continue
                    raise
                except BaseException:
                    conn.close()
                    self._open.discard(conn)
                    raise
                break
            if conn.usable() and not self._closed:
                conn.idle_since = time.monotonic()
                self._idle.append(conn)
            else:
                conn.close()
                self._open.discard(conn)
        encoding = resp.headers._items.get("content-encoding")
        if encoding and encoding.lower() != "identity":
            resp.body = _decompress(resp.body, encoding)
        return resp

    async def stream(
        self,
        target: str,
        headers: Iterable[tuple[str, str]] = (),
        *,
        connect_timeout: float = 10.0,
        head_timeout: float | None = None,
        high_water: int = _STREAM_HIGH_WATER,
    ) -> Stream:
        """Send a GET on a new connection of its own and return once the response head is in;
        read the body with :meth:`Stream.read`, then :meth:`Stream.close` it. The connection
        is never returned to the pool. ``head_timeout``: seconds for the head after the
        connection is made (None: no bound); the body has no deadline. ``high_water``: body
        bytes buffered before the socket stops being read (until the next read; a larger
        piece is never refused). Raises as :meth:`request` does."""
        if self._closed:
            raise RuntimeError("HttpTransport is closed")
        loop = asyncio.get_running_loop()
        data = self._encode("GET", target, headers, None)
        conn = await self._connect(
            loop,
            loop.time() + connect_timeout,
            lambda: _StreamConnection(loop, max(1, high_water), self._streams),
            into=self._streams,
        )
        assert isinstance(conn, _StreamConnection)
        deadline = None if head_timeout is None else loop.time() + head_timeout
        try:
            head = await conn.send(data, head_only=False, deadline=deadline)
        except BaseException:
            conn.close()
            raise
        return Stream(conn, head)

    async def close(self) -> None:
        """Close every connection and stream; the transport is unusable after."""
        self._closed = True
        for conn in list(self._open):
            conn.close()
        self._open.clear()
        self._idle.clear()
        for stream in list(self._streams):
            stream.stop()
        self._streams.clear()

    # -------------------------------------------------------------- internals

    def _encode(
        self, method: str, target: str, headers: Iterable[tuple[str, str]], body: bytes | None
    ) -> bytes:
        if " " in target or "\r" in target or "\n" in target:
            raise ValueError(f"invalid request target {target!r}")
        if headers.__class__ is tuple and headers == self._fields_for:
            fields = self._fields  # the same header fields as the last request: encoded
        else:
            fields = self._encode_fields(headers)
            if headers.__class__ is tuple:
                self._fields_for, self._fields = cast(tuple[tuple[str, str], ...], headers), fields
        if body is not None:
            length = f"Content-Length: {len(body)}\r\n"
        elif method in ("POST", "PUT", "PATCH"):
            length = "Content-Length: 0\r\n"
        else:
            length = ""
        head = f"{method} {self._prefix}{target} HTTP/1.1\r\n{fields}{length}\r\n".encode()
        return head + body if body else head

    def _encode_fields(self, headers: Iterable[tuple[str, str]]) -> str:
        """``Host``, the caller's fields and ``Accept-Encoding`` (unless the caller sent
        one), each line CRLF-terminated."""
        lines = [f"Host: {self._host_header}\r\n"]
        has_encoding = False
        for name, value in (*self._extra_fields, *headers):
            if "\r" in value or "\n" in value or "\r" in name or "\n" in name or ":" in name:
                raise ValueError(f"invalid header {name!r}")
            if name.lower() == "accept-encoding":
                has_encoding = True
            lines.append(f"{name}: {value}\r\n")
        if not has_encoding:
            lines.append("Accept-Encoding: gzip\r\n")
        return "".join(lines)

    def _take_idle(self) -> _Connection | None:
        idle = self._idle
        now = time.monotonic()
        while idle:
            conn = idle.pop()
            if conn.usable() and now - conn.idle_since < self.idle_timeout:
                return conn
            conn.close()
            self._open.discard(conn)
        return None

    async def _connect(
        self,
        loop: asyncio.AbstractEventLoop,
        deadline: float,
        factory: Callable[[], _Connection] | None = None,
        into: set[_StreamConnection] | set[_Connection] | None = None,
    ) -> _Connection:
        protocol = factory or (lambda: _Connection(loop))
        try:
            async with asyncio.timeout_at(deadline):
                if self._proxy is None:
                    _, conn = await loop.create_connection(
                        protocol,
                        self.host,
                        self.port,
                        ssl=self._ssl,
                        server_hostname=self._server_hostname if self._ssl is not None else None,
                    )
                elif self._ssl is None:  # absolute-form requests on a connection to the proxy
                    _, conn = await loop.create_connection(protocol, *self._proxy)
                else:
                    sock = await self._tunnel(loop)
                    try:
                        _, conn = await loop.create_connection(
                            protocol,
                            sock=sock,
                            ssl=self._ssl,
                            server_hostname=self._server_hostname or self.host,
                        )
                    except BaseException:
                        sock.close()
                        raise
        except ssl.SSLError as e:  # before OSError: SSLError is one
            raise TLSError(f"TLS handshake with {self._host_header} failed: {e}") from e
        except TimeoutError:
            raise TimeoutError(f"connecting to {self._host_header} timed out") from None
        except ConnectError:
            raise
        except OSError as e:
            raise ConnectError(f"cannot connect to {self._host_header}: {e}") from e
        opened: set[Any] = self._open if into is None else into
        opened.add(conn)
        if self._closed:
            conn.close()
            opened.discard(conn)
            raise RuntimeError("HttpTransport is closed")
        return conn

    async def _tunnel(self, loop: asyncio.AbstractEventLoop) -> socket.socket:
        """A socket connected to the proxy, with a ``CONNECT`` tunnel to the server open on
        it (the TLS handshake with the server is the caller's). Raises
        :class:`ConnectError` when the proxy cannot be reached or refuses."""
        assert self._proxy is not None
        where = f"proxy {self._proxy[0]}:{self._proxy[1]}"
        try:
            infos = await loop.getaddrinfo(*self._proxy, type=socket.SOCK_STREAM)
        except OSError as e:
            raise ConnectError(f"cannot connect to {where}: {e}") from e
        error: OSError | None = None
        for family, kind, proto, _, address in infos:
            sock = socket.socket(family, kind, proto)
            try:
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                await loop.sock_connect(sock, address)
            except OSError as e:
                sock.close()
                error = e
                continue
            except BaseException:
                sock.close()
                raise
            try:
                await self._open_tunnel(loop, sock, where)
            except BaseException:
                sock.close()
                raise
            return sock
        raise ConnectError(f"cannot connect to {where}: {error}")

    async def _open_tunnel(
        self, loop: asyncio.AbstractEventLoop, sock: socket.socket, where: str
    ) -> None:
        """Send the ``CONNECT`` request on ``sock`` and read the proxy's answer (its head:
        the server speaks only after the client's TLS hello, so nothing follows it)."""
        try:
            await loop.sock_sendall(sock, self._connect_request)
            head = bytearray()
            while b"\r\n\r\n" not in head:
                data = await loop.sock_recv(sock, 4096)
                if not data:
                    raise ConnectError(f"{where} closed the connection before its answer")
                head += data
                if len(head) > _MAX_HEAD:
                    raise ConnectError(f"{where}: answer to CONNECT too large")
        except OSError as e:
            raise ConnectError(f"{where}: CONNECT failed: {e}") from e
        text, _, rest = bytes(head).partition(b"\r\n\r\n")
        status_line = text.split(b"\r\n", 1)[0].decode("latin-1")
        parts = status_line.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise ConnectError(f"{where}: not an HTTP answer to CONNECT: {status_line[:80]!r}")
        if not 200 <= int(parts[1]) < 300:
            raise ConnectError(f"{where} refused the tunnel to {self._host_header}: {status_line}")
        if rest:
            raise ConnectError(f"{where}: unexpected bytes after its answer to CONNECT")


def _proxy_endpoint(
    proxy: str, headers: Mapping[str, str] | None
) -> tuple[tuple[str, int], tuple[tuple[str, str], ...]]:
    """The proxy URL's (host, port) and the header fields it needs (``Proxy-Authorization``
    from the URL's credentials, then ``headers``). Only ``http://`` proxies are spoken."""
    parts = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"unsupported proxy {proxy!r}: only http:// proxies are supported")
    fields: list[tuple[str, str]] = []
    if parts.username is not None:
        user = urllib.parse.unquote(parts.username)
        password = urllib.parse.unquote(parts.password or "")
        token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        fields.append(("Proxy-Authorization", f"Basic {token}"))
    for name, value in (headers or {}).items():
        if "\r" in value or "\n" in value or "\r" in name or "\n" in name or ":" in name:
            raise ValueError(f"invalid proxy header {name!r}")
        fields.append((name, value))
    return (parts.hostname, parts.port or 80), tuple(fields)
