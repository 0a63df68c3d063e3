"""KubeCluster's request path does no per-request environment lookups (issue 14): its aiohttp
session has ``trust_env`` off, the proxy is explicit (a kubeconfig's ``proxy-url``, or the
environment's proxy resolved once), and events carry a host name computed once."""

from __future__ import annotations

import socket
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from kubernetes_asyncio.client import Configuration

from workloadbuilder.cluster import KubeCluster

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}}


class Recorder:
    """An HTTP server answering every request with a Pod, recording (method, target, Host)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []
        self.bodies: list[Any] = []
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.seen.append((request.method, str(request.raw_path), request.host))
        if request.can_read_body:
            self.bodies.append(await request.json())
        return web.json_response(POD, status=201 if request.method == "POST" else 200)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


@pytest.fixture
async def server() -> AsyncIterator[Recorder]:
    rec = Recorder()
    await rec.start()
    try:
        yield rec
    finally:
        await rec.stop()


@pytest.fixture(autouse=True)
def _no_proxy_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(var, raising=False)
        monkeypatch.delenv(var.lower(), raising=False)


async def test_session_does_not_trust_the_environment(server: Recorder) -> None:
    # the default path (no proxy) has no aiohttp session at all: requests and watches go on
    # the lean transport
    async with KubeCluster(Configuration(host=server.url)) as kube:
        assert await kube.get("Pod", "p", "ns") == POD
        assert kube._session is None and kube._http is not None
    # where aiohttp carries the requests (a proxy, or transport="aiohttp"), its session
    # does not trust the environment
    async with KubeCluster(Configuration(host=server.url), transport="aiohttp") as kube:
        assert await kube.get("Pod", "p", "ns") == POD
        session = kube._session
        assert session is not None
        assert session.trust_env is False
        assert not session.closed
        assert session.connector.limit == kube.max_connections


async def test_environment_proxy_is_read_once_not_per_request(
    server: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = 0
    real = urllib.request.getproxies

    def counting() -> dict[str, str]:
        nonlocal calls
        calls += 1
        return real()

    monkeypatch.setattr(urllib.request, "getproxies", counting)
    async with KubeCluster(Configuration(host=server.url)) as kube:
        for _ in range(5):
            await kube.get("Pod", "p", "ns")
    assert calls == 1
    assert len(server.seen) == 5


async def test_environment_proxy_is_honoured(
    server: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the "API server" name does not resolve: only the proxy (our recorder) can answer
    monkeypatch.setenv("HTTP_PROXY", server.url)
    async with KubeCluster(Configuration(host="http://apiserver.invalid:6443")) as kube:
        assert await kube.get("Pod", "p", "ns") == POD
    method, target, host = server.seen[0]
    assert (method, host.split(":")[0]) == ("GET", "apiserver.invalid")
    assert target.startswith("http://apiserver.invalid:6443/api/v1/namespaces/ns/pods/p")


async def test_no_proxy_exempts_the_server(
    server: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    async with KubeCluster(Configuration(host=server.url)) as kube:
        assert await kube.get("Pod", "p", "ns") == POD
    assert server.seen[0][1] == "/api/v1/namespaces/ns/pods/p"


async def test_kubeconfig_proxy_url_is_used(server: Recorder, tmp_path: Path) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "c",
                "cluster": {"server": "http://apiserver.invalid:6443", "proxy-url": server.url},
            }
        ],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(config))
    async with KubeCluster.from_kubeconfig(path) as kube:
        assert await kube.get("Pod", "p", "ns") == POD
    assert server.seen[0][2].split(":")[0] == "apiserver.invalid"


async def test_event_host_name_is_computed_once(
    server: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = socket.gethostname()

    def refuse() -> str:
        raise AssertionError("gethostname called per event")

    monkeypatch.setattr(socket, "gethostname", refuse)
    async with KubeCluster(Configuration(host=server.url)) as kube:
        for _ in range(2):
            await kube.create_event(
                namespace="ns",
                involved_object={"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u"},
                reason="Scheduled",
                message="assigned",
            )
    assert [b["reportingInstance"] for b in server.bodies] == [host, host]
