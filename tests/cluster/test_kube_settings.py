"""``KubeCluster`` takes the project's own :class:`ClientSettings` (a kubernetes-asyncio
``Configuration`` is still accepted, read on open), and says who it is in its User-Agent:
``workloadbuilder/<version> (<os>/<arch>) python/<version>``, not kubernetes-asyncio."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import AsyncIterator

import pytest
from test_transport import Server, ok  # tests/cluster is on sys.path (rootdir-relative)

import workloadbuilder
from workloadbuilder.cluster import ClientSettings, KubeCluster

POD = b'{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns"}}'


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    s = Server()
    s.default = ok(POD)
    await s.start()
    try:
        yield s
    finally:
        await s.stop()


async def test_kube_cluster_on_client_settings(server: Server) -> None:
    tokens = iter(["Bearer one", "Bearer two"])

    async def authorization() -> str | None:
        return next(tokens)

    settings = ClientSettings(host=server.url, authorization=authorization)
    kube = KubeCluster(settings)
    assert kube.server == server.url and repr(kube) == f"KubeCluster({server.url})"
    async with kube:
        await kube.get("Pod", "p", "ns")
        await kube.get("Pod", "p", "ns")
    assert [r.headers["authorization"] for r in server.requests] == ["Bearer one", "Bearer two"]
    agent = server.requests[0].headers["user-agent"]
    assert re.fullmatch(
        rf"workloadbuilder/{re.escape(workloadbuilder.__version__)} \([a-z0-9]+/[\w-]+\)"
        r" python/\d+\.\d+\.\d+\S*",
        agent,
    ), agent
    assert "kubernetes-asyncio" not in agent
    with pytest.raises(TypeError, match="ClientSettings"):
        KubeCluster()


def test_client_settings_need_no_kubernetes_asyncio() -> None:
    code = (
        "import sys\n"
        "from workloadbuilder.cluster import ClientSettings, KubeCluster\n"
        "KubeCluster(ClientSettings(host='http://127.0.0.1:9'))\n"
        "print('kubernetes_asyncio' in sys.modules, 'aiohttp' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
