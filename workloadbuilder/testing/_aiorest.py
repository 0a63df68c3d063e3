"""A small asyncio JSON client for a kubeconfig with a client certificate (the harness's admin
kubeconfig): one pooled aiohttp session, no environment lookups (``trust_env=False``), optional
bounded retries. Benchmarks and fault tests use it where the SDK's ``KubeCluster`` would
add its own behaviour to what is being measured. ``transport="lean"`` sends :meth:`call`'s
requests on :class:`~workloadbuilder.cluster.HttpTransport` (the client ``KubeCluster`` uses
for its unary requests) instead; :attr:`session` stays aiohttp's (for streams)."""

from __future__ import annotations

import asyncio
import json
import ssl
from pathlib import Path
from typing import Any, Literal

import aiohttp
import yaml

from workloadbuilder.cluster import HttpTransport, TransportError

__all__ = ["AsyncRestClient"]

_RETRIED_STATUSES = (429, 500, 502, 503, 504)


class AsyncRestClient:
    """``async with AsyncRestClient(kubeconfig) as api: await api.call("GET", path)``.

    ``limit`` bounds the connections of the pool; ``attempts`` (per client, or per call) is how
    many times a connection error or a 429/5xx is tried, 0.5 s apart (1: no retry);
    ``transport``: ``"aiohttp"`` or ``"lean"`` (:class:`~workloadbuilder.cluster.HttpTransport`)
    for :meth:`call`.
    """

    def __init__(
        self,
        kubeconfig: Path | str,
        *,
        limit: int = 64,
        attempts: int = 1,
        timeout: float = 60.0,
        transport: Literal["aiohttp", "lean"] = "aiohttp",
    ) -> None:
        doc = yaml.safe_load(Path(kubeconfig).read_text())
        cluster = doc["clusters"][0]["cluster"]
        user = doc["users"][0]["user"]
        self.server = str(cluster["server"]).rstrip("/")
        ctx = ssl.create_default_context(cafile=cluster["certificate-authority"])
        ctx.load_cert_chain(user["client-certificate"], user["client-key"])
        self._ctx = ctx
        self._limit = limit
        self._attempts = max(1, attempts)
        self._timeout = timeout
        self._session: aiohttp.ClientSession | None = None
        self._lean = (
            HttpTransport(self.server, ssl_context=ctx, max_connections=limit)
            if transport == "lean"
            else None
        )

    async def __aenter__(self) -> AsyncRestClient:
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=self._limit, ssl=self._ctx),
            trust_env=False,
            read_bufsize=2**21,
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._lean is not None:
            await self._lean.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        """The open session (inside ``async with``)."""
        assert self._session is not None, "use AsyncRestClient in `async with`"
        return self._session

    async def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        ok: tuple[int, ...] = (200, 201, 202),
        attempts: int | None = None,
    ) -> dict[str, Any]:
        """One request, decoded; raises ``RuntimeError`` on a status outside ``ok`` (after the
        retries, for connection errors and 429/5xx)."""
        data = None if body is None else json.dumps(body).encode()
        tries = self._attempts if attempts is None else max(1, attempts)
        last = ""
        for i in range(tries):
            if i:
                await asyncio.sleep(0.5)
            try:
                if self._lean is not None:
                    got = await self._lean.request(
                        method,
                        path,
                        (("Content-Type", content_type), ("Accept", "application/json")),
                        data,
                        timeout=self._timeout,
                    )
                    if got.status in ok:
                        return json.loads(got.body) if got.body else {}
                    if got.status not in _RETRIED_STATUSES or tries == 1:
                        raise RuntimeError(f"{method} {path}: {got.status} {got.body[:300]!r}")
                    last = str(got.status)
                    continue
                async with self.session.request(
                    method,
                    self.server + path,
                    data=data,
                    headers={"Content-Type": content_type, "Accept": "application/json"},
                    timeout=aiohttp.ClientTimeout(total=self._timeout),
                ) as resp:
                    raw = await resp.read()
                    if resp.status in ok:
                        return json.loads(raw) if raw else {}
                    if resp.status not in _RETRIED_STATUSES or tries == 1:
                        raise RuntimeError(f"{method} {path}: {resp.status} {raw[:300]!r}")
                    last = str(resp.status)
            except (aiohttp.ClientError, TimeoutError, ConnectionError, TransportError) as e:
                if tries == 1:
                    raise
                last = repr(e)
        raise RuntimeError(f"{method} {path}: gave up after {tries} attempts ({last})")
