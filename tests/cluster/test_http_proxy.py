"""The lean transport through an HTTP ``CONNECT`` proxy: an HTTPS server (client certificate,
server name) reached through a tunnel, keep-alive inside it, streams, proxy credentials,
refusals, ``NO_PROXY`` exclusions, and ``KubeCluster`` (requests and a watch) on the real API
server behind the proxy -- no aiohttp on the path."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ssl
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_transport import Server, ok, raw  # tests/cluster is on sys.path (rootdir-relative)
from test_transport import _mutual_tls as mutual_tls

from workloadbuilder.cluster import HttpTransport, KubeCluster, KubeConfigError, RetryPolicy
from workloadbuilder.cluster._transport import ConnectError


class ConnectProxy:
    """An HTTP proxy that speaks only ``CONNECT``: it records each CONNECT (target and
    headers), answers ``answer`` (a tunnel when it is 2xx) and pipes the bytes both ways."""

    def __init__(self, answer: str = "200 Connection established") -> None:
        self.answer = answer
        self.connects: list[tuple[str, dict[str, str]]] = []
        self.url = ""
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def stop(self) -> None:
        for w in list(self._writers):
            w.close()
        for t in list(self._tasks):
            t.cancel()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            headers = {}
            for line in lines[1:]:
                if line:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
            self.connects.append((target, headers))
            if method != "CONNECT":
                writer.write(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
                return
            if not self.answer.startswith("2"):
                writer.write(f"HTTP/1.1 {self.answer}\r\nContent-Length: 0\r\n\r\n".encode())
                await writer.drain()
                return
            host, _, port = target.rpartition(":")
            up_reader, up_writer = await asyncio.open_connection(host.strip("[]"), int(port))
            self._writers.add(up_writer)
            writer.write(f"HTTP/1.1 {self.answer}\r\n\r\n".encode())
            await writer.drain()
            await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            return
        finally:
            writer.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()


@pytest.fixture
async def proxy() -> AsyncIterator[ConnectProxy]:
    p = ConnectProxy()
    await p.start()
    try:
        yield p
    finally:
        await p.stop()


@pytest.fixture(autouse=True)
def _no_proxy_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(var, raising=False)
        monkeypatch.delenv(var.lower(), raising=False)


async def _tls_server(tmp_path: Path) -> tuple[Server, ssl.SSLContext, list[Any]]:
    server_ctx, ctx = mutual_tls(tmp_path)
    peers: list[Any] = []
    s = Server()

    async def who(request: Any, writer: asyncio.StreamWriter) -> bool:
        peers.append(writer.get_extra_info("peercert"))
        return await ok(b'{"ok":true}')(request, writer)

    s.default = who
    await s.start(server_ctx)
    return s, ctx, peers


async def test_https_through_a_connect_tunnel_with_keep_alive(
    tmp_path: Path, proxy: ConnectProxy
) -> None:
    s, ctx, peers = await _tls_server(tmp_path)
    try:
        port = s.url.rsplit(":", 1)[1]
        t = HttpTransport(
            f"https://localhost:{port}",
            ssl_context=ctx,
            proxy=f"http://u%40x:p%3Aw@{proxy.url[7:]}",
        )
        for _ in range(3):
            r = await t.request("GET", "/api/v1/pods", (("Authorization", "Bearer t"),))
            assert r.status == 200 and r.body == b'{"ok":true}'
        assert len(proxy.connects) == 1  # one tunnel, its TLS connection kept alive
        target, headers = proxy.connects[0]
        assert target == f"localhost:{port}" and headers["host"] == f"localhost:{port}"
        auth = base64.b64decode(headers["proxy-authorization"].split(" ", 1)[1]).decode()
        assert auth == "u@x:p:w"
        assert "authorization" not in headers  # the API token stays inside the tunnel
        # the server saw the client certificate, the request in origin form, no proxy fields
        assert dict(x[0] for x in peers[0]["subject"])["commonName"] == "alice"
        assert [r.target for r in s.requests] == ["/api/v1/pods"] * 3
        assert "proxy-authorization" not in s.requests[0].headers
        assert s.requests[0].headers["authorization"] == "Bearer t"
        # a stream (a watch) goes through a tunnel of its own
        s.replies = [
            raw(
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                b"6\r\nline1\n\r\n",
                b"6\r\nline2\n\r\n0\r\n\r\n",
            )
        ]
        stream = await t.stream("/api/v1/pods?watch=1")
        assert stream.status == 200 and await stream.read_all() == b"line1\nline2\n"
        stream.close()
        assert len(proxy.connects) == 2
        await t.close()
    finally:
        await s.stop()


async def test_tunnel_refused_or_proxy_unreachable_is_a_connect_error(
    tmp_path: Path, proxy: ConnectProxy
) -> None:
    s, ctx, _ = await _tls_server(tmp_path)
    try:
        proxy.answer = "407 Proxy Authentication Required"
        t = HttpTransport(s.url, ssl_context=ctx, proxy=proxy.url)
        with pytest.raises(ConnectError, match="refused the tunnel"):
            await t.request("GET", "/")
        await t.close()
        nowhere = HttpTransport(s.url, ssl_context=ctx, proxy="http://127.0.0.1:9")
        with pytest.raises(ConnectError):
            await nowhere.request("GET", "/")
        await nowhere.close()
        assert s.requests == []
        with pytest.raises(ValueError, match="only http:// proxies"):
            HttpTransport(s.url, proxy="socks5://127.0.0.1:1080")
    finally:
        await s.stop()


def _kubeconfig(tmp_path: Path, server: str, ca: Path, **cluster: Any) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "c",
                "cluster": {"server": server, "certificate-authority": str(ca), **cluster},
            }
        ],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(config))
    return path


async def test_kube_cluster_https_through_the_environment_proxy_and_no_proxy(
    tmp_path: Path, proxy: ConnectProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    from workloadbuilder.testing._pki import Pki

    pki = Pki(tmp_path / "pki")
    serving = pki.serving("server")
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(str(serving.cert), str(serving.key))
    s = Server()
    s.default = ok(b'{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}')
    await s.start(server_ctx)
    try:
        path = _kubeconfig(tmp_path, s.url, pki.ca_cert)
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        for transport in ("auto", "lean"):
            async with KubeCluster.from_kubeconfig(path, transport=transport) as kube:
                await kube.get("Pod", "p", "ns")
                assert kube._http is not None and kube._session is None
        assert [target for target, _ in proxy.connects] == [s.url[8:]] * 2
        # NO_PROXY exempts the server: straight to it
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        async with KubeCluster.from_kubeconfig(path) as kube:
            await kube.get("Pod", "p", "ns")
        assert len(proxy.connects) == 2 and len(s.requests) == 3
        # a proxy that refuses the tunnel: the request is retried, then fails as a connection
        # error would
        monkeypatch.delenv("NO_PROXY")
        proxy.answer = "403 Forbidden"
        sleeps: list[float] = []

        async def sleep(seconds: float) -> None:
            sleeps.append(seconds)

        policy = RetryPolicy(max_attempts=2, sleep=sleep)
        async with KubeCluster.from_kubeconfig(path, retry=policy) as kube:
            with pytest.raises(Exception, match="ConnectionError"):
                await kube.get("Pod", "p", "ns")
        assert len(sleeps) == 1 and len(s.requests) == 3
    finally:
        await s.stop()


async def test_unsupported_proxy_scheme_is_a_configuration_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _kubeconfig(
        tmp_path, "https://127.0.0.1:9", tmp_path / "ca.crt", **{"proxy-url": "socks5://h:1"}
    )
    (tmp_path / "ca.crt").write_bytes(b"")
    with pytest.raises(KubeConfigError):
        await KubeCluster.from_kubeconfig(path).open()


@pytest.mark.controlplane
async def test_kube_cluster_on_the_real_api_server_behind_a_connect_proxy(
    control_plane: Any, proxy: ConnectProxy, tmp_path: Path
) -> None:
    doc = yaml.safe_load(Path(control_plane.kubeconfig).read_text())
    for entry in doc["clusters"]:
        entry["cluster"]["proxy-url"] = proxy.url
    path = tmp_path / "proxied.kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    name = f"wb-proxy-{uuid.uuid4().hex[:10]}"
    async with KubeCluster.from_kubeconfig(path) as kube:
        assert kube._http is not None and kube._session is None
        listed = await kube.list("Namespace")
        await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        try:
            seen = []
            async for event in kube.watch(
                "Namespace", resource_version=listed.resource_version, timeout_seconds=5
            ):
                if event.type != "BOOKMARK":
                    obj = event.object
                    meta = obj.get("metadata", {}) if isinstance(obj, dict) else {}
                    seen.append(meta.get("name") if meta else getattr(obj, "name", None))
                if name in seen:
                    break
            assert name in seen
        finally:
            await kube.delete("Namespace", name)
    targets = {target for target, _ in proxy.connects}
    assert targets == {control_plane.server.split("://", 1)[1]}
    assert len(proxy.connects) >= 2  # the unary requests' tunnel and the watch's


def test_a_proxy_loads_neither_aiohttp_nor_kubernetes_asyncio() -> None:
    import json
    import os
    import subprocess
    import sys

    code = (
        "import asyncio, json, sys\n"
        "from workloadbuilder.cluster import ClientSettings, KubeCluster\n"
        "async def main():\n"
        "    kube = KubeCluster(ClientSettings(host='https://127.0.0.1:9'))\n"
        "    await kube.open()\n"
        "    lean = kube._http is not None and kube._http._proxy is not None\n"
        "    await kube.close()\n"
        "    print(json.dumps([lean, 'aiohttp' in sys.modules,\n"
        "                      'kubernetes_asyncio' in sys.modules]))\n"
        "asyncio.run(main())\n"
    )
    env = dict(os.environ, HTTPS_PROXY="http://127.0.0.1:9", NO_PROXY="")
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert json.loads(out.stdout) == [True, False, False]
