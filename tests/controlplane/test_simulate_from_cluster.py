"""``simulate --from-cluster`` on the real v1.37.2 API server.

A private plane (no kube-scheduler) where our scheduler runs in process: two 4-CPU nodes, a
running low-priority gang (``disruptionMode: all``) and a pending one. The cluster is
snapshotted by ``workloadbuilder simulate --from-cluster`` (a subprocess, as a user runs it)
with the token of a ServiceAccount bound to the shipped read-only ClusterRole
(``examples/simulations/from-cluster-clusterrole.yaml``); no object's resourceVersion changes
and the ServiceAccount cannot write. The simulator's answer for a new gang is then checked
against what our scheduler does when the gang is really created: one that waits (no room, no
lower priority to preempt) stays unscheduled, one of high priority preempts the running gang
as one unit and starts.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from controlplane._parity import ParitySide, until
from workloadbuilder.testing import ControlPlane

pytestmark = [pytest.mark.controlplane]

ROOT = Path(__file__).resolve().parents[2]
CLUSTER_ROLE = ROOT / "examples" / "simulations" / "from-cluster-clusterrole.yaml"
OURS = "wb-whatif"
TIMEOUT = 30.0
SNAPSHOT_KINDS = (
    ("Node", None),
    ("PriorityClass", None),
    ("Pod", "ns"),
    ("PodGroup", "ns"),
    ("Workload", "ns"),
    ("PersistentVolumeClaim", "ns"),
)


class Side(ParitySide):
    """Our scheduler on the private plane, with gang builders."""

    def __init__(self, plane: ControlPlane) -> None:
        super().__init__("ours", plane, OURS, "whatif")
        self.plane = plane

    def gang(self, name: str, size: int, cpu: str, priority: str) -> list[dict[str, Any]]:
        """A PodGroup (preempted whole) and ``size`` pods of ``cpu`` CPU."""
        docs: list[dict[str, Any]] = [
            {
                "apiVersion": "scheduling.k8s.io/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": name, "namespace": self.namespace},
                "spec": {
                    "schedulingPolicy": {"gang": {"minCount": size}},
                    "priorityClassName": priority,
                    "disruptionMode": {"all": {}},
                },
            }
        ]
        for i in range(size):
            docs.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": f"{name}-{i}", "namespace": self.namespace},
                    "spec": {
                        "schedulerName": OURS,
                        # no kubelet: a victim deleted with a grace period would stay
                        # Terminating (and keep its node's CPU) until it ends
                        "terminationGracePeriodSeconds": 0,
                        "priorityClassName": priority,
                        "schedulingGroup": {"podGroupName": name},
                        "containers": [
                            {
                                "name": "c",
                                "image": "registry.k8s.io/pause:3.10",
                                "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}},
                            }
                        ],
                    },
                }
            )
        return docs

    async def create_all(self, docs: list[dict[str, Any]]) -> None:
        for doc in docs:
            await self.cluster.create(doc)

    async def bound(self, group: str) -> list[str]:
        """The nodes of ``group``'s bound pods."""
        return sorted(
            str(p["spec"]["nodeName"])
            for p in (await self.pods()).values()
            if (p["spec"].get("schedulingGroup") or {}).get("podGroupName") == group
            and p["spec"].get("nodeName")
        )

    async def condition(self, group: str) -> dict[str, Any] | None:
        pg = await self.cluster.get("PodGroup", group, self.namespace)
        data = pg if isinstance(pg, dict) else _to_dict(pg)
        for c in (data.get("status") or {}).get("conditions") or ():
            if c.get("type") == "PodGroupInitiallyScheduled":
                return dict(c)
        return None


def _to_dict(obj: Any) -> dict[str, Any]:
    from workloadbuilder.api import object_to_dict

    return object_to_dict(obj)


@pytest.fixture
async def side(our_plane: ControlPlane) -> AsyncIterator[Side]:
    s = Side(our_plane)
    try:
        await s.start_ours()
        yield s
    finally:
        await s.close()


def _reader_kubeconfig(plane: ControlPlane, namespace: str, tmp_path: Path) -> Path:
    """A ServiceAccount bound to the shipped ClusterRole, and a kubeconfig with its token."""
    role = yaml.safe_load(CLUSTER_ROLE.read_text())
    role_name = f"{namespace}-reader"
    role["metadata"]["name"] = role_name
    with plane.client() as api:
        for path, obj in (
            ("/apis/rbac.authorization.k8s.io/v1/clusterroles", role),
            (
                f"/api/v1/namespaces/{namespace}/serviceaccounts",
                {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "whatif"}},
            ),
            (
                "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRoleBinding",
                    "metadata": {"name": role_name},
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": role_name,
                    },
                    "subjects": [
                        {"kind": "ServiceAccount", "name": "whatif", "namespace": namespace}
                    ],
                },
            ),
        ):
            resp = api.create(path, obj)
            assert resp.ok, f"{path}: {resp.status} {resp.message}"
        resp = api.create(
            f"/api/v1/namespaces/{namespace}/serviceaccounts/whatif/token",
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": 3600},
            },
        )
        assert resp.status == 201, resp.message
        token = str(resp.body["status"]["token"])
    config = tmp_path / "whatif.kubeconfig"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "cp",
                        "cluster": {
                            "server": plane.server,
                            "certificate-authority": str(plane.ca_file),
                        },
                    }
                ],
                "users": [{"name": "whatif", "user": {"token": token}}],
                "contexts": [{"name": "whatif", "context": {"cluster": "cp", "user": "whatif"}}],
                "current-context": "whatif",
            }
        )
    )
    config.chmod(0o600)
    return config


async def _versions(side: Side) -> dict[tuple[str, str], str]:
    """resourceVersion of every object the snapshot reads (in the test's namespace)."""
    out: dict[tuple[str, str], str] = {}
    for kind, scope in SNAPSHOT_KINDS:
        ns = side.namespace if scope else None
        for obj in (await side.cluster.list(kind, ns)).items:
            data = obj if isinstance(obj, dict) else _to_dict(obj)
            meta = data["metadata"]
            out[(kind, f"{meta.get('namespace', '')}/{meta['name']}")] = str(
                meta["resourceVersion"]
            )
    return out


async def _simulate(
    config: Path, namespace: str, new: list[dict[str, Any]], tmp_path: Path
) -> tuple[dict[str, Any], str]:
    """``workloadbuilder simulate --from-cluster -f NEW -o json --save``: (output, stderr)."""
    new_file = tmp_path / "new.yaml"
    new_file.write_text(yaml.safe_dump_all(new))
    save = tmp_path / "snapshot.yaml"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "import sys; from workloadbuilder.cli import main; sys.exit(main())",
        "simulate",
        "--from-cluster",
        "--kubeconfig",
        str(config),
        "-n",
        namespace,
        "--scheduler-name",
        OURS,
        "-f",
        str(new_file),
        "--save",
        str(save),
        "-o",
        "json",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    assert save.exists()
    return json.loads(out), err.decode()


async def test_what_if_matches_the_scheduler(side: Side, tmp_path: Path) -> None:
    low = await side.priority_class("low", 10)
    high = await side.priority_class("high", 1000)
    n0 = await side.node("n-0")
    n1 = await side.node("n-1")
    await side.create_all(side.gang("running", 2, "3", low))
    assert await until(
        lambda: _nonempty(side.bound("running"), 2), "running bound", timeout=TIMEOUT, interval=0.1
    ) == sorted([n0, n1])
    await side.create_all(side.gang("stuck", 2, "4", low))
    await until(
        lambda: _false(side.condition("stuck")), "stuck refused", timeout=TIMEOUT, interval=0.1
    )
    config = _reader_kubeconfig(side.plane, side.namespace, tmp_path)

    # 1. a gang that must wait: the simulator says so, and why; so does the scheduler
    before = await _versions(side)
    waits = side.gang("later", 2, "2", low)
    out, err = await _simulate(config, side.namespace, waits, tmp_path)
    assert await _versions(side) == before  # read-only: nothing was written
    assert "snapshot:" in err
    answers = {a["name"]: a for a in out["whatIf"]}
    assert set(answers) == {"later"}
    assert not answers["later"]["started"], answers
    assert "lack cpu" in str(answers["later"]["reason"]), (answers, out["podGroups"], out["pods"])
    await side.create_all(waits)
    cond = await until(
        lambda: _false(side.condition("later")), "later refused", timeout=TIMEOUT, interval=0.1
    )
    assert "lack cpu" in str(cond.get("message"))
    assert await side.bound("later") == []

    # 2. a gang of high priority: the simulator says it preempts "running" whole and starts
    # now on both nodes; the scheduler does the same
    urgent = side.gang("urgent", 2, "4", high)
    out, _ = await _simulate(config, side.namespace, urgent, tmp_path)
    answers = {a["name"]: a for a in out["whatIf"]}
    assert set(answers) == {"urgent"}
    assert answers["urgent"]["started"] and sorted(answers["urgent"]["nodes"]) == [n0, n1]
    assert answers["urgent"]["preempts"] == [f"PodGroup {side.namespace}/running (2 pods)"]
    await side.create_all(urgent)
    assert await until(
        lambda: _nonempty(side.bound("urgent"), 2), "urgent bound", timeout=TIMEOUT, interval=0.1
    ) == sorted([n0, n1])
    assert await side.bound("running") == []

    # the ServiceAccount cannot write
    await _cannot_write(config, side.namespace)


async def _nonempty(probe: Any, size: int) -> list[str] | None:
    got: list[str] = await probe
    return got if len(got) == size else None


async def _false(probe: Any) -> dict[str, Any] | None:
    cond: dict[str, Any] | None = await probe
    return cond if cond is not None and cond.get("status") == "False" else None


async def _cannot_write(config: Path, namespace: str) -> None:
    from workloadbuilder.cluster import KubeCluster
    from workloadbuilder.errors import Forbidden

    cluster = KubeCluster.from_kubeconfig(str(config))
    try:
        with pytest.raises(Forbidden):
            await cluster.create(
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}, namespace
            )
    finally:
        await cluster.close()
