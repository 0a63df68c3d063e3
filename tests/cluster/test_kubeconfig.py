"""KubeCluster's own kubeconfig loader (``_kube/_kubeconfig.py``): what it reads and how files
merge, against small HTTP(S) servers on 127.0.0.1. The older cases (contexts, client certificates
as files and data, errors, in-cluster) are in test_kube_unit.py."""

from __future__ import annotations

import base64
import os
import ssl
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from fresh import run_fresh

from workloadbuilder.cluster import KubeCluster, KubeConfigError, RetryPolicy
from workloadbuilder.cluster._kube import _kubeconfig
from workloadbuilder.errors import ApiError
from workloadbuilder.testing._pki import Pki

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}}


class Server:
    """Answers every request with a Pod; records the Authorization header of each."""

    def __init__(self) -> None:
        self.auth: list[str | None] = []
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.auth.append(request.headers.get("Authorization"))
        return web.json_response(POD)

    async def start(self, ssl_context: ssl.SSLContext | None = None) -> str:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=ssl_context).start()
        port = self._runner.addresses[0][1]
        self.url = f"{'https' if ssl_context else 'http'}://127.0.0.1:{port}"
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    s = Server()
    await s.start()
    try:
        yield s
    finally:
        await s.stop()


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return Pki(tmp_path / "pki")


@pytest.fixture
async def tls_server(pki: Pki) -> AsyncIterator[Server]:
    serving = pki.serving("server")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(str(serving.cert), str(serving.key))
    s = Server()
    await s.start(ctx)
    try:
        yield s
    finally:
        await s.stop()


def _write(path: Path, doc: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc))
    return path


def _config(
    clusters: dict[str, dict[str, Any]],
    users: dict[str, dict[str, Any]],
    contexts: dict[str, tuple[str, str]],
    current: str | None = None,
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": c} for n, c in clusters.items()],
        "users": [{"name": n, "user": u} for n, u in users.items()],
        "contexts": [
            {"name": n, "context": {"cluster": c, "user": u}} for n, (c, u) in contexts.items()
        ],
    }
    if current is not None:
        doc["current-context"] = current
    return doc


async def _get(path: Path | str, **options: Any) -> KubeCluster:
    cluster = KubeCluster.from_kubeconfig(path, **options)
    try:
        assert await cluster.get("Pod", "p", "ns") == POD
    finally:
        await cluster.close()
    return cluster


async def test_kubeconfig_lists_merge_first_file_wins(server: Server, tmp_path: Path) -> None:
    # a: defines cluster "c" (the server) and user "u" (token one), no current-context
    # b: redefines "u" (ignored: the first file wins), adds context "x", sets current-context
    # c: sets another current-context (ignored: the first file that sets it wins)
    a = _write(
        tmp_path / "a",
        _config({"c": {"server": server.url}}, {"u": {"token": "one"}}, {}),
    )
    b = _write(
        tmp_path / "b",
        _config({}, {"u": {"token": "two"}}, {"x": ("c", "u"), "y": ("c", "v")}, current="x"),
    )
    c = _write(tmp_path / "c", _config({}, {"v": {"token": "three"}}, {}, current="y"))
    merged = os.pathsep.join(str(p) for p in (a, b, tmp_path / "missing", c))
    assert "context x" in repr(KubeCluster.from_kubeconfig(merged))  # before it is opened
    await _get(merged)
    await _get(merged, context="y")
    assert server.auth == ["Bearer one", "Bearer three"]


async def test_relative_paths_are_relative_to_the_file_that_names_them(
    tls_server: Server, pki: Pki, tmp_path: Path
) -> None:
    sub = tmp_path / "conf"
    sub.mkdir()
    (sub / "ca.pem").write_bytes(pki.ca_cert.read_bytes())
    (sub / "token").write_text("from-file\n")  # trailing whitespace is not part of the token
    path = _write(
        sub / "config",
        _config(
            {"c": {"server": tls_server.url, "certificate-authority": "ca.pem"}},
            {"u": {"tokenFile": "token"}},
            {"x": ("c", "u")},
            current="x",
        ),
    )
    cwd = os.getcwd()
    os.chdir(tmp_path)  # relative to the file, not to the working directory
    try:
        await _get(path)
    finally:
        os.chdir(cwd)
    assert tls_server.auth == ["Bearer from-file"]


async def test_token_file_is_read_again_after_the_period(
    server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = tmp_path / "token"
    token.write_text("old")
    path = _write(
        tmp_path / "config",
        _config(
            {"c": {"server": server.url}}, {"u": {"tokenFile": str(token)}}, {"x": ("c", "u")}, "x"
        ),
    )
    clock = [1000.0]
    monkeypatch.setattr(_kubeconfig, "_now", lambda: clock[0])
    cluster = KubeCluster.from_kubeconfig(path)
    try:
        await cluster.get("Pod", "p", "ns")
        token.write_text("new")
        await cluster.get("Pod", "p", "ns")  # within the period: the cached token
        clock[0] += _kubeconfig.TOKEN_FILE_PERIOD
        await cluster.get("Pod", "p", "ns")
        token.unlink()  # being replaced: the last token is kept
        clock[0] += _kubeconfig.TOKEN_FILE_PERIOD
        await cluster.get("Pod", "p", "ns")
    finally:
        await cluster.close()
    assert server.auth == ["Bearer old", "Bearer old", "Bearer new", "Bearer new"]


async def test_token_wins_over_token_file_then_basic_auth(server: Server, tmp_path: Path) -> None:
    users = {
        "both": {"token": "tok", "tokenFile": str(tmp_path / "nothing-here")},
        "basic": {"username": "alice", "password": "s3cret"},
        "none": {},
    }
    path = _write(
        tmp_path / "config",
        _config({"c": {"server": server.url}}, users, {n: ("c", n) for n in users}, current="both"),
    )
    for name in users:
        await _get(path, context=name)
    basic = "Basic " + base64.b64encode(b"alice:s3cret").decode()
    assert server.auth == ["Bearer tok", basic, None]


async def test_insecure_skip_tls_verify_and_tls_server_name(
    tls_server: Server, pki: Pki, tmp_path: Path
) -> None:
    ca = base64.b64encode(pki.ca_cert.read_bytes()).decode()
    clusters = {
        "unverified": {"server": tls_server.url},  # the system CAs do not know ours
        "insecure": {"server": tls_server.url, "insecure-skip-tls-verify": True},
        "named": {
            "server": tls_server.url,
            "certificate-authority-data": ca,
            "tls-server-name": "localhost",
        },
        "misnamed": {
            "server": tls_server.url,
            "certificate-authority-data": ca,
            "tls-server-name": "elsewhere.example",
        },
    }
    path = _write(
        tmp_path / "config",
        _config(clusters, {"u": {}}, {n: (n, "u") for n in clusters}, current="insecure"),
    )
    await _get(path, context="insecure")
    await _get(path, context="named")
    no_retry = RetryPolicy(max_attempts=1)
    for name in ("unverified", "misnamed"):
        cluster = KubeCluster.from_kubeconfig(path, context=name, retry=no_retry)
        try:
            with pytest.raises(ApiError):
                await cluster.get("Pod", "p", "ns")
        finally:
            await cluster.close()
    assert len(tls_server.auth) == 2


def test_configuration_errors_name_what_is_wrong(tmp_path: Path) -> None:
    clusters = {"c": {"server": "https://127.0.0.1:9", "certificate-authority-data": "%%%"}}
    path = _write(
        tmp_path / "config",
        _config(clusters, {"u": {}}, {"x": ("c", "u"), "dangling": ("gone", "u")}),
    )
    with pytest.raises(KubeConfigError, match="no current-context"):
        KubeCluster.from_kubeconfig(path)
    with pytest.raises(KubeConfigError, match="cluster 'gone'"):
        KubeCluster.from_kubeconfig(path, context="dangling")
    cluster = KubeCluster.from_kubeconfig(path, context="x")  # TLS material is read on open
    with pytest.raises(KubeConfigError, match="certificate-authority-data"):
        _kubeconfig.read_kubeconfig([str(path)], "x").settings()
    assert cluster.server is None
    missing = _write(
        tmp_path / "missing-cert",
        _config(
            {"c": {"server": "https://127.0.0.1:9"}},
            {"u": {"client-certificate": "nope.crt", "client-key": "nope.key"}},
            {"x": ("c", "u")},
            current="x",
        ),
    )
    with pytest.raises(KubeConfigError, match=r"cannot read client-certificate .*nope\.crt"):
        _kubeconfig.read_kubeconfig([str(missing)]).settings()


@pytest.mark.parametrize(
    "fields",
    [{"as": "alice"}, {"as-groups": ["admins"]}, {"as": "bob", "as-user-extra": {"k": ["v"]}}],
    ids=["as", "as-groups", "as-user-extra"],
)
def test_impersonation_is_refused_not_ignored(tmp_path: Path, fields: dict[str, Any]) -> None:
    path = _write(
        tmp_path / "config",
        _config(
            {"c": {"server": "https://127.0.0.1:9"}},
            {"u": {"token": "t", **fields}},
            {"x": ("c", "u")},
            current="x",
        ),
    )
    with pytest.raises(KubeConfigError, match="impersonation is not supported") as e:
        KubeCluster.from_kubeconfig(path)
    assert all(k in str(e.value) for k in fields) and "'u'" in str(e.value)


async def test_exec_plugin_credentials(server: Server, tmp_path: Path) -> None:
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        textwrap.dedent(
            """
            import json, os
            info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
            print(json.dumps({
                "apiVersion": info["apiVersion"], "kind": "ExecCredential",
                "status": {"token": "from-plugin-" + os.environ["EXTRA"]},
            }))
            """
        )
    )
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": sys.executable,
            "args": [str(plugin)],
            "env": [{"name": "EXTRA", "value": "x"}],
            "interactiveMode": "Never",
        }
    }
    path = _write(
        tmp_path / "config",
        _config({"c": {"server": server.url}}, {"u": user}, {"x": ("c", "u")}, current="x"),
    )
    await _get(path)
    assert server.auth == ["Bearer from-plugin-x"]


def test_a_plain_kubeconfig_does_not_import_kubernetes_asyncio(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "config",
        _config(
            {"c": {"server": "http://127.0.0.1:9"}}, {"u": {"token": "t"}}, {"x": ("c", "u")}, "x"
        ),
    )
    code = f"""
        import asyncio, json, sys
        from workloadbuilder.cluster import KubeCluster

        async def main():
            async with KubeCluster.from_kubeconfig({str(path)!r}) as kube:
                return kube.server

        server = asyncio.run(main())
        print(json.dumps([server, "kubernetes_asyncio" in sys.modules]))
    """
    assert run_fresh(code) == ["http://127.0.0.1:9", False]


async def test_disable_compression_asks_for_uncompressed_responses(
    server: Server, tmp_path: Path
) -> None:
    for disabled, expected in ((True, "identity"), (False, "gzip"), (None, "gzip")):
        entry: dict[str, Any] = {"server": server.url}
        if disabled is not None:
            entry["disable-compression"] = disabled
        path = _write(
            tmp_path / f"c-{disabled}",
            _config({"c": entry}, {"u": {"token": "t"}}, {"x": ("c", "u")}, current="x"),
        )
        kube = KubeCluster.from_kubeconfig(path)
        try:
            settings = await kube._client()
            assert settings.disable_compression is (disabled is True)
            headers = dict(await kube._headers(settings, "application/json"))
            assert headers.get("Accept-Encoding", "gzip") == expected
            assert headers["authorization"] == "Bearer t"
        finally:
            await kube.close()
