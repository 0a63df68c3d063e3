"""Watch streams: the body of a watch split into lines under a silence bound
(:func:`watch_lines`, one timer per stream), and each line decoded into a :class:`WatchEvent`
(:func:`watch_event`; ``ERROR`` events raise their ``ApiError``). The same for every
transport: a stream is only a ``read()`` coroutine."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from workloadbuilder.cluster._kube._codec import decode_object, loads
from workloadbuilder.cluster._kube._errors import error_from_status
from workloadbuilder.cluster._protocol import ResourceInfo, WatchEvent
from workloadbuilder.cluster._transport import TransportError

__all__ = ["ReadChunk", "WatchStalled", "watch_event", "watch_lines"]

logger = logging.getLogger("workloadbuilder.cluster._kube")

#: reads the next piece of a watch's body (``b""`` at its end)
ReadChunk = Callable[[], Awaitable[bytes]]


class WatchStalled(Exception):
    """Nothing arrived on a watch within its bound."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"nothing received for {seconds:.0f}s")
        self.seconds = seconds


async def watch_lines(
    read: ReadChunk, *, first: float | None = None, silent: float | None = None
) -> AsyncIterator[bytes]:
    """The body that ``read`` returns piece by piece, split at newlines (no bound on a line's
    length). A dropped connection ends the stream (the caller resumes from its last
    resourceVersion); no byte for ``first`` seconds at the start or ``silent`` seconds later
    raises :class:`WatchStalled`.

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
                        raise WatchStalled(bound or 0.0) from None
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


def watch_event(line: bytes, info: ResourceInfo, what: str) -> WatchEvent | None:
    try:
        raw = loads(line)
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
    return WatchEvent(type=etype, object=decode_object(obj, info))
