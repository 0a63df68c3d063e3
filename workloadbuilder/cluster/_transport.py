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
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, cast

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

#: methods sent a second time, at once, when the connection breaks before the response head
#: arrives (RFC 9112 section 9.3.1; aiohttp does the same for the same methods)
_IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"})

#: the most bytes a response head (status line and headers) may take
_MAX_HEAD = 256 * 1024

#: a stream stops reading from its socket while this many body bytes wait to be read
_STREAM_HIGH_WATER = 2**21

_NONE, _LENGTH, _CHUNKED, _CLOSE = range(4)


class TransportError(Exception):
    """A failure of the HTTP transport (not an HTTP error status)."""


class ConnectError(TransportError):
    """The connection could not be made: the request was not sent."""


class TLSError(TransportError):
    """The TLS handshake failed (e.g. the server certificate did not verify)."""


class Disconnected(TransportError):
    """The connection closed or broke while a request was in flight: it may have run.
    ``head_received``: whether the response's status line and headers had arrived."""

    def __init__(self, message: str, *, head_received: bool = False) -> None:
        super().__init__(message)
        self.head_received = head_received


class ProtocolError(TransportError):
    """The server's response is not valid HTTP/1.1 (or uses an unsupported encoding)."""


class Headers(Mapping[str, str]):
    """Response headers; lookups ignore case (repeated headers are joined with ``", "``)."""

    __slots__ = ("_items",)

    def __init__(self, items: dict[str, str]) -> None:
        self._items = items  # lower-cased names

    def __getitem__(self, name: str) -> str:
        return self._items[name.lower()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"Headers({self._items!r})"


class Response:
    """A complete response: status, reason phrase, headers and the (decoded) body."""

    __slots__ = ("body", "headers", "reason", "status")

    def __init__(self, status: int, reason: str, headers: Headers, body: bytes) -> None:
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = body

    def __repr__(self) -> str:
        return f"Response({self.status} {self.reason}, {len(self.body)} bytes)"


class _Connection(asyncio.Protocol):
    """One keep-alive connection; at most one request in flight."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reusable = True
        self.idle_since = 0.0
        self._buf = bytearray()
        self._scan = 0
        self._waiter: asyncio.Future[Response] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._head_only = False
        self._status = 0
        self._reason = ""
        self._headers: Headers | None = None
        self._mode = _NONE
        self._remaining = 0
        self._body = bytearray()
        self._chunk = -1  # size of the chunk being read (-1: its size line is next)
        self._trailers = False

    # -------------------------------------------------------------- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        waiter = self._waiter
        if waiter is None or waiter.done():
            # bytes nobody asked for: the connection's state is unknown, drop it
            self.reusable = False
            self.close()
            return
        self._buf += data
        try:
            self._parse()
        except ProtocolError as e:
            self._fail(e)
            self.close()

    def eof_received(self) -> bool:
        return False  # close the transport; connection_lost finishes or fails the request

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.reusable = False
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        if self._headers is not None and self._mode == _CLOSE:
            self._body += self._buf
            self._buf.clear()
            self._finish(bytes(self._body))
            return
        head = self._headers is not None
        if exc is None:
            self._fail(Disconnected("the server closed the connection", head_received=head))
        else:
            err = Disconnected(f"connection lost: {exc}", head_received=head)
            err.__cause__ = exc
            self._fail(err)

    # -------------------------------------------------------------- requests

    def send(
        self, data: bytes, *, head_only: bool, deadline: float | None
    ) -> asyncio.Future[Response]:
        """Write one request; the future gets its response (or the failure). ``deadline``
        (loop time) bounds the whole response (None: no bound)."""
        assert self.transport is not None
        waiter: asyncio.Future[Response] = self._loop.create_future()
        self._waiter = waiter
        self._head_only = head_only
        self._headers = None
        self._scan = 0
        if deadline is not None:
            self._timer = self._loop.call_at(deadline, self._timed_out)
        self.transport.write(data)
        return waiter

    def close(self) -> None:
        """Close the connection (any request in flight fails with :class:`Disconnected`)."""
        self.reusable = False
        if self.transport is not None and not self.closed:
            self.closed = True
            self.transport.abort()

    def usable(self) -> bool:
        """Whether an idle connection may carry the next request."""
        t = self.transport
        return not self.closed and self.reusable and t is not None and not t.is_closing()

    def _timed_out(self) -> None:
        self._timer = None
        self._fail(TimeoutError("the request timed out"))
        self.close()

    def _fail(self, exc: BaseException) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        waiter, self._waiter = self._waiter, None
        self.reusable = False
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    def _finish(self, body: bytes) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        waiter, self._waiter = self._waiter, None
        headers = self._headers
        assert headers is not None
        self._headers = None
        self._body = bytearray()
        if self._buf:  # more than one response: not ours to read
            self.reusable = False
        if waiter is not None and not waiter.done():
            waiter.set_result(Response(self._status, self._reason, headers, body))

    # -------------------------------------------------------------- parsing

    def _parse(self) -> None:
        buf = self._buf
        while self._waiter is not None:
            if self._headers is None:
                head = self._take_head()
                if head is None:
                    return
                if not self._start(head):
                    continue  # an informational (1xx) response: the real one follows
                if self._mode == _NONE:
                    self._finish(b"")
                    return
            if self._mode == _LENGTH:
                if len(buf) < self._remaining:
                    return
                n = self._remaining
                if len(buf) == n:
                    body = bytes(buf)
                    buf.clear()
                else:
                    body = bytes(buf[:n])
                    del buf[:n]
                self._finish(body)
                return
            if self._mode == _CLOSE:
                self._body += buf
                buf.clear()
                return
            # chunked
            if self._chunked(buf):
                self._finish(bytes(self._body))
            return

    def _take_head(self) -> bytes | None:
        """The next response head, taken off the buffer without its blank line; None while
        it has not all arrived (the next search starts where this one stopped)."""
        buf = self._buf
        end = buf.find(b"\r\n\r\n", self._scan)
        if end < 0:
            if len(buf) > _MAX_HEAD:
                raise ProtocolError("response head too large")
            self._scan = max(0, len(buf) - 3)
            return None
        head = bytes(buf[:end])
        del buf[: end + 4]
        self._scan = 0
        return head

    def _start(self, head: bytes) -> bool:
        """Parse a response head; False for a 1xx response (skipped)."""
        try:
            text = head.decode("latin-1")
        except UnicodeDecodeError as e:  # pragma: no cover - latin-1 decodes any byte
            raise ProtocolError("undecodable response head") from e
        lines = text.split("\r\n")
        status_line = lines[0]
        parts = status_line.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
            raise ProtocolError(f"not an HTTP/1.x status line: {status_line[:80]!r}")
        try:
            status = int(parts[1])
        except ValueError:
            raise ProtocolError(f"bad status code: {status_line[:80]!r}") from None
        if not 100 <= status <= 999:
            raise ProtocolError(f"bad status code: {status_line[:80]!r}")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep or not name or name != name.strip():
                raise ProtocolError(f"bad header line: {line[:80]!r}")
            key = name.lower()
            value = value.strip()
            if key in headers:
                headers[key] = f"{headers[key]}, {value}"
            else:
                headers[key] = value
        if 100 <= status < 200:
            if status == 101:
                raise ProtocolError("unexpected protocol switch (101)")
            return False
        self._status = status
        self._reason = parts[2] if len(parts) > 2 else ""
        self._headers = Headers(headers)
        connection = headers.get("connection", "").lower()
        if parts[0] == "HTTP/1.0":
            self.reusable = self.reusable and "keep-alive" in connection
        elif "close" in connection:
            self.reusable = False
        te = headers.get("transfer-encoding")
        if self._head_only or status in (204, 304):
            self._mode = _NONE
        elif te is not None:
            if te.lower() != "chunked":
                raise ProtocolError(f"unsupported transfer-encoding {te!r}")
            self._mode = _CHUNKED
            self._chunk = -1
            self._trailers = False
            self._body = bytearray()
        elif "content-length" in headers:
            try:
                n = int(headers["content-length"])
            except ValueError:
                raise ProtocolError("bad content-length") from None
            if n < 0:
                raise ProtocolError("bad content-length")
            self._mode = _LENGTH if n else _NONE
            self._remaining = n
        else:
            self._mode = _CLOSE
            self.reusable = False
            self._body = bytearray()
        return True

    def _chunked(self, buf: bytearray) -> bool:
        """Consume chunked framing from ``buf``; True when the body is complete."""
        while True:
            if self._trailers:
                if buf[:2] == b"\r\n":
                    del buf[:2]
                    return True
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    if len(buf) > _MAX_HEAD:
                        raise ProtocolError("chunked trailers too large")
                    return False
                del buf[: end + 4]
                return True
            if self._chunk < 0:
                end = buf.find(b"\r\n")
                if end < 0:
                    if len(buf) > 1024:
                        raise ProtocolError("bad chunk size line")
                    return False
                line = bytes(buf[:end]).split(b";", 1)[0].strip()
                try:
                    size = int(line, 16)
                except ValueError:
                    raise ProtocolError(f"bad chunk size {line[:20]!r}") from None
                if size < 0:
                    raise ProtocolError("bad chunk size")
                del buf[: end + 2]
                if size == 0:
                    self._trailers = True
                    continue
                self._chunk = size
            n = self._chunk
            if len(buf) < n + 2:
                return False
            if buf[n : n + 2] != b"\r\n":
                raise ProtocolError("chunk not terminated by CRLF")
            self._body += buf[:n]
            del buf[: n + 2]
            self._chunk = -1


class _StreamConnection(_Connection):
    """A connection that carries one streamed response, then closes (never reused)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        high_water: int,
        registry: set[_StreamConnection],
    ) -> None:
        super().__init__(loop)
        self.reusable = False
        self._registry = registry  # the transport's open streams: left when closed
        self._high_water = high_water
        self._in_body = False
        self._data = bytearray()  # body bytes not read yet
        self._eof = False
        self._error: BaseException | None = None
        self._reader: asyncio.Future[None] | None = None
        self._paused = False
        self._inflate: zlib._Decompress | None = None

    # -------------------------------------------------------------- asyncio.Protocol

    def data_received(self, data: bytes) -> None:
        if self._eof or self._error is not None:
            return  # after the end: bytes nobody reads (the connection is closing)
        if not self._in_body and self._waiter is None:
            self.close()  # no request in flight (cannot happen): drop the connection
            return
        self._buf += data
        try:
            if not self._in_body:
                self._parse_head()
            if self._in_body:
                self._feed()
        except ProtocolError as e:
            self._end_with(e)
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._registry.discard(self)
        if not self._in_body:
            super().connection_lost(exc)  # fails the request waiting for the head
            return
        self.closed = True
        if self._eof or self._error is not None:
            return
        if self._mode == _CLOSE:
            self._end()  # read-to-close: the close is the end
            return
        if exc is None:
            err = Disconnected("the server closed the stream before its end", head_received=True)
        else:
            err = Disconnected(f"connection lost: {exc}", head_received=True)
            err.__cause__ = exc
        self._end_with(err)

    # -------------------------------------------------------------- the stream

    def close(self) -> None:
        """Close the connection (a stream's connection is never reused)."""
        super().close()
        self._registry.discard(self)

    def stop(self) -> None:
        """The reader is done: end the stream (reads return ``b""``) and close."""
        if not self._eof and self._error is None:
            self._eof = True
            self._wake()
        self.close()

    async def read(self) -> bytes:
        """The body bytes received since the last read (waiting for some); ``b""`` at the
        end of the body; :class:`Disconnected` or :class:`ProtocolError` if it broke."""
        while not self._data:
            if self._error is not None:
                raise self._error
            if self._eof:
                return b""
            reader = self._reader = self._loop.create_future()
            try:
                await reader
            finally:
                self._reader = None
        data = bytes(self._data)
        self._data.clear()
        t = self.transport
        if self._paused and not self.closed and t is not None and not t.is_closing():
            self._paused = False
            t.resume_reading()
        return data

    # -------------------------------------------------------------- internals

    def _parse_head(self) -> None:
        while not self._in_body:
            head = self._take_head()
            if head is None:
                return
            if not self._start(head):
                continue  # an informational (1xx) response: the real one follows
            headers = self._headers
            assert headers is not None
            encoding = headers._items.get("content-encoding", "identity").lower().strip()
            if encoding in ("gzip", "x-gzip"):
                self._inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
            elif encoding == "deflate":
                self._inflate = zlib.decompressobj()
            elif encoding != "identity":
                raise ProtocolError(f"unsupported content-encoding {encoding!r}")
            self._in_body = True
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            waiter, self._waiter = self._waiter, None
            if waiter is not None and not waiter.done():
                waiter.set_result(Response(self._status, self._reason, headers, b""))

    def _feed(self) -> None:
        buf = self._buf
        mode = self._mode
        if mode == _CHUNKED:
            done = self._chunked(buf)
            if self._body:
                self._deliver(bytes(self._body))
                self._body.clear()
            if done:
                self._end()
        elif mode == _LENGTH:
            n = min(len(buf), self._remaining)
            if n:
                self._deliver(bytes(buf[:n]))
                del buf[:n]
                self._remaining -= n
            if not self._remaining:
                self._end()
        elif mode == _CLOSE:
            if buf:
                self._deliver(bytes(buf))
                buf.clear()
        else:
            self._end()

    def _deliver(self, data: bytes) -> None:
        if self._inflate is not None:
            try:
                data = self._inflate.decompress(data)
            except zlib.error as e:
                raise ProtocolError(f"cannot decode the stream: {e}") from e
        if not data:
            return
        self._data += data
        self._wake()
        t = self.transport
        if len(self._data) > self._high_water and not self._paused and t and not t.is_closing():
            self._paused = True
            t.pause_reading()

    def _end(self) -> None:
        if self._inflate is not None:
            try:
                rest = self._inflate.flush()
            except zlib.error as e:  # pragma: no cover - flush of a valid stream
                raise ProtocolError(f"cannot decode the stream: {e}") from e
            self._inflate = None
            if rest:
                self._data += rest
        self._eof = True
        self._wake()
        self.close()

    def _end_with(self, exc: BaseException) -> None:
        if not self._in_body:
            self._fail(exc)
            return
        if not self._eof and self._error is None:
            self._error = exc
            self._wake()

    def _wake(self) -> None:
        reader = self._reader
        if reader is not None and not reader.done():
            reader.set_result(None)


class Stream:
    """A streamed response (:meth:`HttpTransport.stream`): ``status``, ``reason`` and
    ``headers`` at once, the body through :meth:`read`. Close it when done (its connection
    is never reused)."""

    __slots__ = ("_conn", "headers", "reason", "status")

    def __init__(self, conn: _StreamConnection, head: Response) -> None:
        self._conn = conn
        self.status = head.status
        self.reason = head.reason
        self.headers = head.headers

    async def read(self) -> bytes:
        """The next piece of the (decoded) body as it arrives; ``b""`` once the body is
        complete or the stream was closed. Raises :class:`Disconnected` when the connection
        breaks before the body's end, :class:`ProtocolError` for bad framing. No deadline
        of its own: bound it with ``asyncio.timeout``."""
        return await self._conn.read()

    async def read_all(self, limit: int = 2**24) -> bytes:
        """The rest of the body (at most ``limit`` bytes; more is a :class:`ProtocolError`)."""
        parts = bytearray()
        while True:
            data = await self._conn.read()
            if not data:
                return bytes(parts)
            parts += data
            if len(parts) > limit:
                raise ProtocolError(f"response body larger than {limit} bytes")

    @property
    def closed(self) -> bool:
        """Whether the connection is closed."""
        return self._conn.closed

    def close(self) -> None:
        """Close the connection (idempotent); a pending :meth:`read` returns ``b""``."""
        self._conn.stop()

    def __repr__(self) -> str:
        return f"Stream({self.status} {self.reason})"


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


def _decompress(body: bytes, encoding: str) -> bytes:
    enc = encoding.lower().strip()
    try:
        if enc in ("gzip", "x-gzip"):
            return zlib.decompress(body, 16 + zlib.MAX_WBITS)
        if enc == "deflate":
            return zlib.decompress(body)
    except zlib.error as e:
        raise ProtocolError(f"cannot decode {enc} body: {e}") from e
    raise ProtocolError(f"unsupported content-encoding {encoding!r}")
