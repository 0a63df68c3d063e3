"""``workloadbuilder scheduler --config FILE`` as a process against the real API server: the
profile's schedulerName, plugin set, client rate limit and leader election come from the
file."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from workloadbuilder.errors import NotFound

pytestmark = pytest.mark.controlplane

CLI = str(Path(sys.executable).parent / "workloadbuilder")


async def _poll(check: Any, timeout: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await check():
        if loop.time() > deadline:
            raise AssertionError("not reached before the deadline")
        await asyncio.sleep(0.2)


async def test_scheduler_command_with_a_config_file(control_plane: Any, tmp_path: Path) -> None:
    from workloadbuilder.cluster import KubeCluster

    ns = control_plane.create_namespace("schedcfg-")
    name = f"wb-{ns}"
    node = f"{ns}-node"
    config = tmp_path / "sched.yaml"
    config.write_text(
        f"""
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {{qps: 20, burst: 40}}
leaderElection:
  leaderElect: true
  resourceNamespace: {ns}
  resourceName: cfg-lease
profiles:
- schedulerName: {name}
  plugins:
    filter:
      disabled: [{{name: TaintToleration}}]
"""
    )
    kube = KubeCluster.from_kubeconfig(control_plane.kubeconfig)
    proc = subprocess.Popen(
        [
            CLI,
            "scheduler",
            "--kubeconfig",
            str(control_plane.kubeconfig),
            "--config",
            str(config),
            "--metrics-port",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # a tainted node: only schedulable because TaintToleration is disabled in the file
        await kube.create(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": node, "labels": {"test-env": ns}},
                "spec": {"taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]},
            }
        )
        alloc = {"cpu": "4", "memory": "8Gi", "pods": "110"}
        await kube.patch(
            "Node",
            node,
            {"status": {"allocatable": alloc, "capacity": alloc}},
            subresource="status",
        )
        await kube.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p", "namespace": ns},
                "spec": {
                    "schedulerName": name,
                    "nodeSelector": {"test-env": ns},
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
                },
            }
        )

        async def bound() -> bool:
            assert proc.poll() is None, proc.communicate()
            pod = await kube.get("Pod", "p", ns)
            return isinstance(pod, dict) and pod["spec"].get("nodeName") == node

        await _poll(bound)
        lease = await kube.get("Lease", "cfg-lease", ns)
        assert isinstance(lease, dict) and lease["spec"]["holderIdentity"]
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(proc.wait, 30)
        assert code == 0, proc.communicate()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        with contextlib.suppress(NotFound):
            await kube.delete("Pod", "p", ns, grace_period_seconds=0)
        with contextlib.suppress(NotFound):
            await kube.delete("Node", node)
        await kube.close()
