"""A watch that stalls silently (the connection stays open, nothing arrives) is noticed
within a bound tied to the server's bookmark cadence, and an informer resumes it from its
last resourceVersion without missing an event; a healthy idle watch that gets its bookmarks
is never cut. Against a small scripted HTTP server on 127.0.0.1, with the cadence scaled down
(kube-apiserver sends a bookmark about every 60 s; here every 0.1-0.2 s)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from kubernetes_asyncio.client import Configuration

from workloadbuilder.cluster import Informer, KubeCluster

Step = Callable[[web.StreamResponse], Awaitable[None]]


class Script:
    """A fake API server: ``lists`` answers LISTs in order, ``watches`` are coroutine
    functions that write a watch response; every watch query is recorded."""

    def __init__(self) -> None:
        self.lists: list[dict[str, Any]] = []
        self.watches: list[Step] = []
        self.watch_queries: list[dict[str, str]] = []
        self.release = asyncio.Event()
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") not in ("1", "true"):
            return web.json_response(self.lists.pop(0) if len(self.lists) > 1 else self.lists[0])
        self.watch_queries.append(dict(request.query))
        resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        step = self.watches.pop(0) if self.watches else hold(self.release)
        await step(resp)
        return resp

    async def start(self) -> str:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self.runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.5)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self.runner.addresses[0][1]}"
        return self.url

    async def stop(self) -> None:
        self.release.set()
        if self.runner is not None:
            await self.runner.cleanup()


def cm(name: str, rv: int, value: str = "a") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": str(rv)},
        "data": {"v": value},
    }


def bookmark(rv: int) -> dict[str, Any]:
    return {
        "type": "BOOKMARK",
        "object": {"kind": "ConfigMap", "metadata": {"resourceVersion": str(rv)}},
    }


async def write(resp: web.StreamResponse, event: dict[str, Any]) -> None:
    await resp.write(json.dumps(event).encode() + b"\n")


def events_then(events: list[dict[str, Any]], then: Step) -> Step:
    async def step(resp: web.StreamResponse) -> None:
        for e in events:
            await write(resp, e)
        await then(resp)

    return step


def hold(release: asyncio.Event) -> Step:
    """Send nothing more and keep the connection open (a stall)."""

    async def step(resp: web.StreamResponse) -> None:
        await release.wait()

    return step


def bookmarks_every(interval: float, count: int, rv: int, *, delay_first: float = 0.0) -> Step:
    """A healthy idle watch: a bookmark every ``interval`` seconds, then the server ends it."""

    async def step(resp: web.StreamResponse) -> None:
        await asyncio.sleep(delay_first)
        for _ in range(count):
            await write(resp, bookmark(rv))
            await asyncio.sleep(interval)
        await resp.write_eof()

    return step


@pytest.fixture
async def script() -> AsyncIterator[Script]:
    s = Script()
    await s.start()
    try:
        yield s
    finally:
        await s.stop()


def kube(url: str, interval: float, **options: Any) -> KubeCluster:
    return KubeCluster(Configuration(host=url), watch_bookmark_interval=interval, **options)


async def test_a_silent_watch_is_dropped_after_twice_the_bookmark_interval(
    script: Script,
) -> None:
    script.watches.append(
        events_then([{"type": "ADDED", "object": cm("a", 5)}], hold(script.release))
    )
    cluster = kube(script.url, 0.2)
    try:
        started = time.monotonic()
        got = [e.type async for e in cluster.watch("ConfigMap", "ns", resource_version="4")]
        took = time.monotonic() - started
    finally:
        await cluster.close()
    assert got == ["ADDED"]
    assert cluster.watch_stalls == {"/api/v1/namespaces/ns/configmaps": 1}
    assert 0.4 <= took < 2.0, took  # 2 x 0.2 s after the last byte


async def test_a_watch_that_never_sends_a_byte_gets_one_interval_more(script: Script) -> None:
    script.watches.append(hold(script.release))
    cluster = kube(script.url, 0.2)
    try:
        started = time.monotonic()
        got = [e async for e in cluster.watch("ConfigMap", "ns", resource_version="4")]
        took = time.monotonic() - started
    finally:
        await cluster.close()
    assert got == [] and sum(cluster.watch_stalls.values()) == 1
    assert 0.6 <= took < 2.5, took  # (2 + 1) x 0.2 s


async def test_a_healthy_idle_watch_with_bookmarks_is_never_cut(script: Script) -> None:
    # the first bookmark late (as kube-apiserver's first one: up to two intervals), then
    # three per interval for 5 intervals; the server ends the watch itself
    script.watches.append(bookmarks_every(0.1, 15, 9, delay_first=0.45))
    cluster = kube(script.url, 0.3)
    try:
        got = [e.type async for e in cluster.watch("ConfigMap", "ns", resource_version="9")]
    finally:
        await cluster.close()
    assert got == ["BOOKMARK"] * 15
    assert cluster.watch_stalls == {}


async def test_without_bookmarks_only_the_idle_timeout_applies(script: Script) -> None:
    script.watches.append(
        events_then([], bookmarks_every(0.5, 2, 9, delay_first=0.5))  # silent 0.5 s
    )
    cluster = kube(script.url, 0.05, watch_idle_timeout=5.0)  # a stall bound of 0.1 s
    try:
        got = [
            e.type
            async for e in cluster.watch(
                "ConfigMap", "ns", resource_version="9", allow_bookmarks=False
            )
        ]
    finally:
        await cluster.close()
    assert got == ["BOOKMARK", "BOOKMARK"] and cluster.watch_stalls == {}


async def test_the_idle_timeout_still_caps_the_bound(script: Script) -> None:
    script.watches.append(hold(script.release))
    cluster = kube(script.url, 60.0, watch_idle_timeout=0.3)
    try:
        started = time.monotonic()
        assert [e async for e in cluster.watch("ConfigMap", "ns")] == []
        assert time.monotonic() - started < 2.0
    finally:
        await cluster.close()


async def test_an_informer_resumes_a_stalled_watch_and_misses_nothing(script: Script) -> None:
    script.lists.append(
        {
            "kind": "ConfigMapList",
            "apiVersion": "v1",
            "metadata": {"resourceVersion": "10"},
            "items": [cm("a", 10)],
        }
    )
    # the first watch delivers one change and then stalls; the change made meanwhile (rv 12)
    # is what the server replays to the watch resumed from rv 11
    script.watches.append(
        events_then([{"type": "MODIFIED", "object": cm("a", 11, "b")}], hold(script.release))
    )
    script.watches.append(
        events_then([{"type": "ADDED", "object": cm("c", 12)}, bookmark(12)], hold(script.release))
    )
    cluster = kube(script.url, 0.2)
    seen: list[tuple[str, str]] = []
    inf = Informer(cluster, "ConfigMap", "ns")
    inf.add_handler(
        on_add=lambda o: seen.append(("add", o["metadata"]["resourceVersion"])),
        on_update=lambda old, new: seen.append(("update", new["metadata"]["resourceVersion"])),
    )
    await inf.start()
    try:
        started = time.monotonic()
        while inf.get("c", "ns") is None:
            assert time.monotonic() - started < 10, "the stalled watch was not resumed"
            await asyncio.sleep(0.02)
        took = time.monotonic() - started
    finally:
        await inf.stop()
        await cluster.close()
    assert seen == [("add", "10"), ("update", "11"), ("add", "12")]
    assert inf.list_count == 1  # resumed, not relisted
    assert [q.get("resourceVersion") for q in script.watch_queries[:2]] == ["10", "11"]
    assert all(q.get("allowWatchBookmarks") == "true" for q in script.watch_queries)
    assert 300 <= float(script.watch_queries[0]["timeoutSeconds"]) < 600
    assert cluster.watch_stalls == {"/api/v1/namespaces/ns/configmaps": 1}
    assert took < 3.0, took


async def test_a_watch_without_bookmarks_ends_quietly_after_the_idle_timeout(
    script: Script,
) -> None:
    script.watches.append(hold(script.release))
    cluster = kube(script.url, 60.0, watch_idle_timeout=0.3)
    try:
        got = [e async for e in cluster.watch("ConfigMap", "ns", allow_bookmarks=False)]
    finally:
        await cluster.close()
    assert got == [] and cluster.watch_stalls == {}  # silence is normal there: not a stall


# ------------------------------------------------------------------ the bound's timer itself


def _reader(script: list[tuple[float, bytes]]) -> Callable[[], Awaitable[bytes]]:
    """A ``read`` that returns each piece after its delay, then b"" (the end); a piece with
    delay None never comes (a stall)."""
    steps = iter(script)

    async def read() -> bytes:
        step = next(steps, None)
        if step is None:
            return b""
        delay, data = step
        if delay < 0:
            await asyncio.Event().wait()
        await asyncio.sleep(delay)
        return data

    return read


async def test_the_bound_counts_while_reading_not_while_the_consumer_works() -> None:
    from workloadbuilder.cluster._kube._streams import watch_lines as _lines

    # every piece arrives within the bound (0.15 s); the consumer spends 0.3 s on each line
    read = _reader([(0.05, b"a\n"), (0.05, b"b\n"), (0.05, b"c\n")])
    got = []
    async for line in _lines(read, first=0.15, silent=0.15):
        got.append(line)
        await asyncio.sleep(0.3)
    assert got == [b"a", b"b", b"c"]


async def test_first_then_silent_bound_and_the_timer_is_released() -> None:
    from workloadbuilder.cluster._kube._streams import WatchStalled as _WatchStalled
    from workloadbuilder.cluster._kube._streams import watch_lines as _lines

    loop = asyncio.get_running_loop()
    # the first byte after 0.3 s (within first=0.5), then silence: stalled after silent=0.2
    read = _reader([(0.3, b"a\n"), (-1, b"")])
    started = loop.time()
    got = []
    with pytest.raises(_WatchStalled) as info:
        async for line in _lines(read, first=0.5, silent=0.2):
            got.append((line, loop.time() - started))
    took = loop.time() - started
    assert got[0][0] == b"a" and info.value.seconds == 0.2
    assert 0.5 - 0.01 <= took < 1.2, took  # 0.3 s to the first byte + 0.2 s of silence
    # no byte at all: the longer first bound
    started = loop.time()
    with pytest.raises(_WatchStalled) as info:
        async for _ in _lines(_reader([(-1, b"")]), first=0.4, silent=0.1):
            pass
    assert info.value.seconds == 0.4 and 0.4 - 0.01 <= loop.time() - started < 1.2
    # an ended stream leaves no timer behind: the loop has nothing scheduled for it
    handles = getattr(loop, "_scheduled", None)
    async for _ in _lines(_reader([(0.0, b"x\n")]), first=30.0, silent=30.0):
        pass
    if handles is not None:  # asyncio's loop: no live timer 30 s ahead
        assert not [h for h in handles if not h.cancelled() and h.when() > loop.time() + 20]


async def test_an_outside_cancellation_is_not_taken_for_a_stall() -> None:
    from workloadbuilder.cluster._kube._streams import watch_lines as _lines

    async def consume() -> None:
        async for _ in _lines(_reader([(-1, b"")]), first=0.2, silent=0.2):
            pass

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
