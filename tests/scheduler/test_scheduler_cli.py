"""``workloadbuilder scheduler`` and ``workloadbuilder explain`` as processes against the real
API server (fake Nodes): leader election, metrics, health, scheduling, graceful SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from workloadbuilder.api import (
    GangSchedulingPolicy,
    ObjectMeta,
    PodGroup,
    PodGroupSchedulingPolicy,
    PodGroupSpec,
)
from workloadbuilder.errors import NotFound
from workloadbuilder.testing.builders import make_node, make_pod

pytestmark = pytest.mark.controlplane

CLI = str(Path(sys.executable).parent / "workloadbuilder")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return int(r.status), r.read().decode()
    except urllib.error.HTTPError as e:
        return int(e.code), ""


async def _poll(check: Any, timeout: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await check():
        if loop.time() > deadline:
            raise AssertionError("not reached before the deadline")
        await asyncio.sleep(0.2)


@pytest.mark.parametrize("event_loop", ["uvloop", "asyncio"])
async def test_scheduler_command_end_to_end(control_plane: Any, event_loop: str) -> None:
    from workloadbuilder.cluster import KubeCluster

    ns = control_plane.create_namespace("schedcli-")
    name = f"wb-{ns}"
    node = f"{ns}-node"
    port = _free_port()
    kubeconfig = str(control_plane.kubeconfig)
    kube = KubeCluster.from_kubeconfig(control_plane.kubeconfig)
    proc = subprocess.Popen(
        [
            CLI,
            "scheduler",
            "--kubeconfig",
            kubeconfig,
            "--scheduler-name",
            name,
            "--leader-elect",
            "--leader-elect-lease-namespace",
            ns,
            "--metrics-port",
            str(port),
            "--bind-address",
            "127.0.0.1",
            "--event-loop",
            event_loop,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        fake = make_node(node).resources({"cpu": "4", "memory": "8Gi", "pods": "110"}).obj()
        status = fake.pop("status")
        await kube.create(fake)
        await kube.patch("Node", node, {"status": status}, subresource="status")
        await kube.create(
            PodGroup(
                metadata=ObjectMeta(name="g", namespace=ns),
                spec=PodGroupSpec(
                    scheduling_policy=PodGroupSchedulingPolicy(
                        gang=GangSchedulingPolicy(min_count=2)
                    )
                ),
            )
        )
        for i in range(2):
            pod = make_pod(f"g-{i}", ns).scheduler_name(name).pod_group("g").container_name("c")
            await kube.create(pod.obj())

        async def bound() -> bool:
            assert proc.poll() is None, proc.communicate()
            pods = (await kube.list("Pod", ns)).items
            return all(p["spec"].get("nodeName") == node for p in pods)  # type: ignore[index]

        await _poll(bound)
        status, _ = await asyncio.to_thread(_get, f"http://127.0.0.1:{port}/healthz")
        assert status == 200
        status, _ = await asyncio.to_thread(_get, f"http://127.0.0.1:{port}/readyz")
        assert status == 200
        status, metrics = await asyncio.to_thread(_get, f"http://127.0.0.1:{port}/metrics")
        assert status == 200
        assert 'scheduler_podgroup_schedule_attempts_total{result="scheduled"} 1.0' in metrics
        lease = await kube.get("Lease", name, ns)
        assert isinstance(lease, dict) and lease["spec"]["holderIdentity"]

        out = await asyncio.to_thread(
            subprocess.run,
            [
                CLI,
                "explain",
                "podgroup",
                "g",
                "-n",
                ns,
                "--kubeconfig",
                kubeconfig,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        assert "gang (minCount 2)" in out.stdout
        assert "2/2 pods bound" in out.stdout
        assert "PodGroupInitiallyScheduled=True (Scheduled)" in out.stdout

        as_json = await asyncio.to_thread(
            subprocess.run,
            [CLI, "explain", "podgroup", "g", "-n", ns, "-o", "json", "--kubeconfig", kubeconfig],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert as_json.returncode == 0, as_json.stderr
        report = json.loads(as_json.stdout)
        assert (report["name"], report["minCount"], report["pods"]) == (
            "g",
            2,
            {"live": 2, "bound": 2},
        )
        assert report["condition"]["type"] == "PodGroupInitiallyScheduled"
        assert report["condition"]["status"] == "True"

        missing = await asyncio.to_thread(
            subprocess.run,
            [
                CLI,
                "explain",
                "podgroup",
                "nope",
                "-n",
                ns,
                "--kubeconfig",
                kubeconfig,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert missing.returncode == 1 and "not found" in missing.stderr
        assert "Traceback" not in missing.stderr

        proc.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(proc.wait, 30)
        _, err = proc.communicate()
        assert code == 0, err
        assert f"event loop {event_loop})" in err  # the start-up line names the loop
        lease = await kube.get("Lease", name, ns)
        assert isinstance(lease, dict) and not lease["spec"].get("holderIdentity")  # released
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for i in range(2):
            with contextlib.suppress(NotFound):
                await kube.delete("Pod", f"g-{i}", ns, grace_period_seconds=0)
        with contextlib.suppress(NotFound):
            await kube.delete("Node", node)
        await kube.close()
