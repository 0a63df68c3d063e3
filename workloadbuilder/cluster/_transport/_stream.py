"""Streams on the lean transport (what a watch is): a GET whose body is read piece by piece
as it arrives, on a connection of its own (see the package's docstring)."""

from __future__ import annotations

import asyncio
import zlib

from workloadbuilder.cluster._transport._base import BODY_BY_LENGTH as _LENGTH
from workloadbuilder.cluster._transport._base import BODY_CHUNKED as _CHUNKED
from workloadbuilder.cluster._transport._base import BODY_TO_CLOSE as _CLOSE
from workloadbuilder.cluster._transport._base import Connection as _Connection
from workloadbuilder.cluster._transport._base import (
    Disconnected,
    ProtocolError,
    Response,
)

__all__ = ["Stream", "StreamConnection"]


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


StreamConnection = _StreamConnection
