"""The runtime layer: clocks, the Component protocol, health server, rate limit, kube flags."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

import pytest

from workloadbuilder.cluster import KubeConfigError, MemoryCluster
from workloadbuilder.runtime import (
    Clock,
    Component,
    HealthServer,
    ManualClock,
    RateLimitedCluster,
    TokenBucket,
    WallClock,
    add_kube_flags,
    kube_cluster,
)
from workloadbuilder.scheduler import Scheduler


def test_every_clock_satisfies_the_protocol() -> None:
    from workloadbuilder.simulator import VirtualClock  # the simulator's clock is a runtime Clock

    for clock in (WallClock(), ManualClock(), VirtualClock()):
        assert isinstance(clock, Clock)


async def test_manual_clock() -> None:
    clock = ManualClock(start=100.0)
    assert clock.now() == 100.0
    clock.advance(5)
    await clock.sleep(2.5)
    assert clock.now() == 107.5
    with pytest.raises(ValueError):
        clock.advance(-1)


async def test_the_scheduler_is_a_component() -> None:
    cluster = MemoryCluster()
    s = Scheduler(cluster, clock=ManualClock())
    assert isinstance(s, Component)
    await s.start()
    assert await s.until_idle() == 0
    assert s.next_wakeup() is None
    await s.stop()
    await cluster.close()


async def _get(port: int, path: str) -> tuple[str, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    await writer.drain()
    data = await reader.read()
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0].decode(), body


async def test_health_server() -> None:
    from prometheus_client import CollectorRegistry, Counter

    registry = CollectorRegistry()
    Counter("things", "Things.", registry=registry).inc()
    ready = False
    server = HealthServer(lambda: ready, registry=registry)
    await server.start("127.0.0.1", 0)
    assert server.port is not None
    try:
        assert await _get(server.port, "/healthz") == ("HTTP/1.1 200 OK", b"ok")
        status, _ = await _get(server.port, "/readyz")
        assert status == "HTTP/1.1 503 Service Unavailable"
        ready = True
        assert (await _get(server.port, "/readyz?verbose"))[0] == "HTTP/1.1 200 OK"
        status, body = await _get(server.port, "/metrics")
        assert status == "HTTP/1.1 200 OK" and b"things_total 1.0" in body
        assert (await _get(server.port, "/nope"))[0] == "HTTP/1.1 404 Not Found"
    finally:
        await server.stop()


async def test_token_bucket_allows_burst_then_qps() -> None:
    clock = ManualClock(start=0.0)
    bucket = TokenBucket(qps=2.0, burst=3, clock=clock)
    assert [bucket.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.reserve() == pytest.approx(0.5)
    assert bucket.reserve() == pytest.approx(1.0)  # queued behind the previous reservation
    clock.advance(10)  # refills, capped at burst
    assert [bucket.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError):
        TokenBucket(qps=0, burst=1)


async def test_rate_limited_cluster_waits_for_tokens() -> None:
    clock = ManualClock(start=0.0)
    inner = MemoryCluster()
    cluster = RateLimitedCluster(inner, qps=1.0, burst=1, clock=clock)
    await cluster.list("Node")
    await cluster.list("Node")  # waits one token: the manual clock moves by 1 s
    assert clock.now() == pytest.approx(1.0)
    await cluster.close()


def _parse(argv: list[str], *, namespace: bool = False) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_kube_flags(parser, namespace=namespace)
    return parser.parse_args(argv)


def test_kube_flags_and_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        """
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts:
- {name: a, context: {cluster: c, user: u}}
- {name: b, context: {cluster: c, user: u}}
current-context: a
"""
    )
    args = _parse(["--kubeconfig", str(kubeconfig), "--context", "b"])
    assert "context b" in repr(kube_cluster(args))
    assert _parse(["-n", "x"], namespace=True).namespace == "x"
    with pytest.raises(KubeConfigError):
        kube_cluster(_parse(["--kubeconfig", str(kubeconfig), "--context", "nope"]))
    # no kubeconfig anywhere, inside a pod: the service account (here: none mounted)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    with pytest.raises(KubeConfigError, match="not running in a cluster"):
        kube_cluster(_parse([]))
