"""The lean transport's parts that every connection shares: its errors, the response
types, and one keep-alive HTTP/1.1 connection (:class:`Connection`) on an asyncio
protocol (see the package's docstring)."""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Iterator, Mapping
from typing import cast

__all__ = [
    "BODY_BY_LENGTH",
    "BODY_CHUNKED",
    "BODY_TO_CLOSE",
    "IDEMPOTENT",
    "MAX_HEAD",
    "STREAM_HIGH_WATER",
    "ConnectError",
    "Connection",
    "Disconnected",
    "Headers",
    "ProtocolError",
    "Response",
    "TLSError",
    "TransportError",
    "decompress",
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


class Connection(asyncio.Protocol):
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


def decompress(body: bytes, encoding: str) -> bytes:
    enc = encoding.lower().strip()
    try:
        if enc in ("gzip", "x-gzip"):
            return zlib.decompress(body, 16 + zlib.MAX_WBITS)
        if enc == "deflate":
            return zlib.decompress(body)
    except zlib.error as e:
        raise ProtocolError(f"cannot decode {enc} body: {e}") from e
    raise ProtocolError(f"unsupported content-encoding {encoding!r}")


#: the names the stream connection and the transport share with this module
IDEMPOTENT = _IDEMPOTENT
STREAM_HIGH_WATER = _STREAM_HIGH_WATER
MAX_HEAD = _MAX_HEAD
BODY_BY_LENGTH, BODY_CHUNKED, BODY_TO_CLOSE = _LENGTH, _CHUNKED, _CLOSE
_decompress = decompress
