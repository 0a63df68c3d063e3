"""A small fault-injecting HTTP proxy for tests, on 127.0.0.1 in front of a real API server.

Clients speak plain HTTP to the proxy; the proxy forwards to the upstream HTTPS server with
its own client certificate (so it needs no credentials from the client). Before forwarding
it may inject, at random with the configured probabilities:

* ``429`` TooManyRequests with a ``Retry-After`` header (the request is not forwarded);
* ``500``/``503`` (not forwarded);
* a stall longer than the client's timeout (not forwarded);
* a reset: the connection is dropped without an answer (not forwarded);
* a lost answer: the request is forwarded (it runs), then the connection is dropped
  without relaying the answer (only for paths ending in ``lost_answer_suffix``);

and on watch streams: cut the connection after a random number of events (mid-line), or
stall (stop relaying without closing). :meth:`FaultProxy.drop_watches` cuts every open watch;
:meth:`FaultProxy.stall_watches` makes the open watches of a path stall at once (the
connection stays open and nothing more is relayed: a silent stall).
Non-idempotent requests (POST, JSON patch) only get faults that a server would also give
before running them (429, resets before forwarding), so a retried create cannot run twice.
``counts`` tallies what was injected.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import random
import ssl
import time
from pathlib import Path

import aiohttp
import attrs
import yaml
from aiohttp import web

__all__ = ["FaultPlan", "FaultProxy"]

_HOP_HEADERS = {
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "authorization",
    "accept-encoding",
    # aiohttp decompresses the upstream body: relaying its Content-Encoding would make the
    # client try to decompress it again
    "content-encoding",
}


@attrs.define
class FaultPlan:
    """Probabilities (0..1) of each fault per request, and watch-stream faults."""

    p_429: float = 0.0
    retry_after: tuple[int, ...] = (0, 1)
    p_5xx: float = 0.0
    p_stall: float = 0.0
    stall_seconds: float = 3.0
    p_reset: float = 0.0
    #: forward the request, then drop the connection without the answer (the client cannot
    #: tell whether it ran); only for request paths ending in ``lost_answer_suffix``
    p_lost_answer: float = 0.0
    lost_answer_suffix: str = ""
    #: cut a watch after a uniform random number of relayed lines in this range (None: never)
    watch_cut_after: tuple[int, int] | None = None
    #: probability that a watch, instead of being cut, stalls (stops relaying) at that point
    p_watch_stall: float = 0.0


class FaultProxy:
    """HTTP on 127.0.0.1 -> HTTPS upstream, with faults from :attr:`plan`."""

    def __init__(
        self,
        upstream: str,
        *,
        ca_file: Path,
        cert_file: Path,
        key_file: Path,
        plan: FaultPlan | None = None,
        seed: int = 0,
    ) -> None:
        self.upstream = upstream.rstrip("/")
        self.plan = plan or FaultPlan()
        self.counts: collections.Counter[str] = collections.Counter()
        self._rng = random.Random(seed)
        self._ssl = ssl.create_default_context(cafile=str(ca_file))
        self._ssl.load_cert_chain(str(cert_file), str(key_file))
        self._session: aiohttp.ClientSession | None = None
        self._runner: web.AppRunner | None = None
        self._watches: set[web.StreamResponse] = set()
        self._watch_requests: dict[web.StreamResponse, web.Request] = {}
        self._stalled: set[web.StreamResponse] = set()
        #: every request: (monotonic time, method, path, query) -- what a client asked when
        self.log: list[tuple[float, str, str, dict[str, str]]] = []
        self._release = asyncio.Event()
        self.url = ""

    @classmethod
    def in_front_of(
        cls, server: str, kubeconfig: str | Path, *, plan: FaultPlan | None = None, seed: int = 0
    ) -> FaultProxy:
        """A proxy to ``server`` with the CA and client certificate of ``kubeconfig`` (a
        control plane's admin kubeconfig: its first cluster and user)."""
        doc = yaml.safe_load(Path(kubeconfig).read_text())
        user = doc["users"][0]["user"]
        return cls(
            server,
            ca_file=Path(doc["clusters"][0]["cluster"]["certificate-authority"]),
            cert_file=Path(user["client-certificate"]),
            key_file=Path(user["client-key"]),
            plan=plan,
            seed=seed,
        )

    async def start(self) -> str:
        """Listen on an ephemeral 127.0.0.1 port; returns the proxy's URL."""
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self._ssl, limit=200),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
        )
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        return self.url

    async def stop(self) -> None:
        """Stop listening and close upstream connections."""
        self._release.set()
        self.drop_watches()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    def drop_watches(self) -> int:
        """Cut every open watch connection; returns how many."""
        n = 0
        for resp in list(self._watches):
            request = self._watch_requests.get(resp)
            if request is not None and request.transport is not None:
                request.transport.abort()
                n += 1
        self.counts["watch_dropped"] += n
        return n

    def stall_watches(self, path: str) -> int:
        """Make every open watch whose request path ends with ``path`` stall: nothing more
        is relayed, the connection stays open (until the client gives up or the proxy
        stops). Returns how many."""
        n = 0
        for resp, request in list(self._watch_requests.items()):
            if request.path.endswith(path) and resp not in self._stalled:
                self._stalled.add(resp)
                n += 1
        self.counts["watch_stall"] += n
        return n

    async def _hold(self, request: web.Request) -> None:
        """Relay nothing until the proxy stops or the client closes the connection."""
        while not self._release.is_set():
            transport = request.transport
            if transport is None or transport.is_closing():
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._release.wait(), 0.2)

    def _chance(self, p: float) -> bool:
        return p > 0 and self._rng.random() < p

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        plan = self.plan
        is_watch = request.query.get("watch") in ("1", "true")
        content_type = request.headers.get("Content-Type", "")
        idempotent = request.method in ("GET", "PUT", "DELETE") or (
            request.method == "PATCH" and "json-patch" not in content_type
        )
        self.counts["requests"] += 1
        self.log.append((time.monotonic(), request.method, request.path, dict(request.query)))
        if self._chance(plan.p_429):
            self.counts["429"] += 1
            return _status(
                429,
                "TooManyRequests",
                "injected",
                {"Retry-After": str(self._rng.choice(plan.retry_after))},
            )
        if self._chance(plan.p_reset):
            self.counts["reset"] += 1
            if request.transport is not None:
                request.transport.abort()
            raise asyncio.CancelledError
        if idempotent and self._chance(plan.p_5xx):
            code = self._rng.choice((500, 503))
            self.counts[str(code)] += 1
            return _status(code, "InternalError", "injected")
        if idempotent and not is_watch and self._chance(plan.p_stall):
            self.counts["stall"] += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._release.wait(), plan.stall_seconds)
            return _status(504, "Timeout", "injected stall")
        if (
            not is_watch
            and request.path.endswith(plan.lost_answer_suffix)
            and self._chance(plan.p_lost_answer)
        ):
            await self._forward(request, is_watch)
            self.counts["lost_answer"] += 1
            if request.transport is not None:
                request.transport.abort()
            raise asyncio.CancelledError
        return await self._forward(request, is_watch)

    async def _forward(self, request: web.Request, is_watch: bool) -> web.StreamResponse:
        assert self._session is not None
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS}
        upstream = await self._session.request(
            request.method,
            self.upstream + request.path_qs,
            headers=headers,
            data=body or None,
            timeout=aiohttp.ClientTimeout(total=None if is_watch else 60, sock_connect=10),
        )
        if not is_watch or upstream.status != 200:
            async with upstream:
                data = await upstream.read()
                out = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP_HEADERS}
                return web.Response(status=upstream.status, body=data, headers=out)
        return await self._relay_watch(request, upstream)

    async def _relay_watch(
        self, request: web.Request, upstream: aiohttp.ClientResponse
    ) -> web.StreamResponse:
        plan = self.plan
        cut_after = (
            self._rng.randint(*plan.watch_cut_after) if plan.watch_cut_after is not None else None
        )
        stall = cut_after is not None and self._chance(plan.p_watch_stall)
        resp = web.StreamResponse(
            status=200, headers={"Content-Type": upstream.headers.get("Content-Type", "")}
        )
        await resp.prepare(request)
        self._watches.add(resp)
        self._watch_requests[resp] = request
        lines = 0
        buf = b""
        try:
            async with upstream:
                async for chunk in upstream.content.iter_any():
                    buf += chunk
                    while (i := buf.find(b"\n")) >= 0:
                        line, buf = buf[: i + 1], buf[i + 1 :]
                        if resp in self._stalled:
                            await self._hold(request)
                            if request.transport is not None:
                                request.transport.abort()
                            return resp
                        if cut_after is not None and lines >= cut_after:
                            if stall:
                                self.counts["watch_stall"] += 1
                                await self._release.wait()
                            else:
                                self.counts["watch_cut"] += 1
                                await resp.write(line[: max(1, len(line) // 2)])
                            if request.transport is not None:
                                request.transport.abort()
                            return resp
                        await resp.write(line)
                        lines += 1
            await resp.write_eof()
        except (ConnectionError, aiohttp.ClientError, RuntimeError):
            pass  # the client went away (or we dropped it)
        finally:
            self._watches.discard(resp)
            self._watch_requests.pop(resp, None)
            self._stalled.discard(resp)
        return resp


def _status(
    code: int, reason: str, message: str, headers: dict[str, str] | None = None
) -> web.Response:
    return web.json_response(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        },
        status=code,
        headers=headers,
    )
