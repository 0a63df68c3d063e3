"""The TrainJob operator: the integration (``trainjob_integration.py``) plus the pods.

``python examples/trainjob/trainjob_operator.py`` runs it on a MemoryCluster with one TrainJob and
prints what it created; ``--kubeconfig FILE`` runs it against a real cluster (install
``crd.yaml`` first). The Reconciler creates and keeps the Workload and the PodGroup; the
operator only creates its pods, linked with ``link_pod``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import contextlib

from trainjob_integration import TrainJobIntegration

from workloadbuilder.cluster import Cluster, MemoryCluster
from workloadbuilder.errors import AlreadyExists
from workloadbuilder.runtime import Reconciler, link_pod


def trainjob_pods(trainjob: dict[str, Any]) -> list[dict[str, Any]]:
    """The master and worker pods of ``trainjob``, linked to its gang."""
    plan = TrainJobIntegration().plan(trainjob)
    meta, spec = trainjob["metadata"], trainjob["spec"]
    owner = {
        "apiVersion": "example.com/v1",
        "kind": "TrainJob",
        "name": meta["name"],
        "uid": meta.get("uid", ""),
        "controller": True,
    }
    names = [f"{meta['name']}-master"] + [
        f"{meta['name']}-worker-{i}" for i in range(int(spec["workers"]))
    ]
    pods = []
    for name in names:
        template = spec["template"]
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                **dict(template.get("metadata") or {}),
                "name": name,
                "ownerReferences": [owner] if owner["uid"] else [],
            },
            "spec": dict(template["spec"]),
        }
        pods.append(link_pod(pod, plan, "trainer"))
    return pods


async def reconcile_pods(cluster: Cluster, trainjob: dict[str, Any]) -> None:
    """Create the pods of ``trainjob`` (create-or-skip)."""
    for pod in trainjob_pods(trainjob):
        with contextlib.suppress(AlreadyExists):
            await cluster.create(pod, trainjob["metadata"]["namespace"])


EXAMPLE: dict[str, Any] = {
    "apiVersion": "example.com/v1",
    "kind": "TrainJob",
    "metadata": {"name": "llm", "namespace": "default"},
    "spec": {
        "workers": 3,
        "template": {"spec": {"containers": [{"name": "train", "image": "trainer:1"}]}},
    },
}


async def main(argv: list[str] | None = None) -> int:
    """Run the operator once over the example TrainJob and print the objects."""
    args = argparse.ArgumentParser(description=__doc__)
    args.add_argument("--kubeconfig")
    ns = args.parse_args(argv)
    if ns.kubeconfig:
        from workloadbuilder.cluster import KubeCluster

        cluster: Cluster = KubeCluster.from_kubeconfig(ns.kubeconfig)
    else:
        cluster = MemoryCluster()
    try:
        try:
            trainjob = await cluster.create(EXAMPLE)
        except AlreadyExists:
            trainjob = await cluster.get("TrainJob", "llm", "default")
        assert isinstance(trainjob, dict)
        rec = Reconciler(cluster, TrainJobIntegration())
        await rec.start()
        await rec.until_idle()
        await reconcile_pods(cluster, trainjob)
        await rec.until_idle()
        await rec.stop()
        for kind in ("Workload", "PodGroup", "Pod"):
            for obj in (await cluster.list(kind, "default")).items:
                name = obj["metadata"]["name"] if isinstance(obj, dict) else obj.metadata.name
                group = ""
                if isinstance(obj, dict):
                    group = (obj["spec"].get("schedulingGroup") or {}).get("podGroupName", "")
                print(f"{kind:9} {name}" + (f" -> {group}" if group else ""))
    finally:
        await cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
