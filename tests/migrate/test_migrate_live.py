"""The live read and apply on MemoryCluster (the real API server: test_migrate_e2e.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from _objects import pod

from workloadbuilder.api import PodGroup, Workload
from workloadbuilder.cluster import MemoryCluster, ResourceInfo, _protocol, register_resource
from workloadbuilder.errors import NotFound
from workloadbuilder.migrate import MigrationError, apply_objects, migrate, read_cluster

NAME = "kueue.x-k8s.io/pod-group-name"
COUNT = "kueue.x-k8s.io/pod-group-total-count"


async def _cluster_with_a_gang() -> MemoryCluster:
    cluster = MemoryCluster()
    await cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}})
    for i in range(2):
        await cluster.create(pod(f"p{i}", labels={NAME: "grp"}, annotations={COUNT: "2"}))
    owned = pod("owned", labels={NAME: "other"}, annotations={COUNT: "1"})
    owned["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": "rs",
            "uid": "u",
            "controller": True,
        }
    ]
    await cluster.create(owned)
    return cluster


async def test_read_cluster_skips_owned_objects_and_server_fields() -> None:
    cluster = await _cluster_with_a_gang()
    objects = await read_cluster(cluster, "ns")
    assert sorted(o["metadata"]["name"] for o in objects) == ["p0", "p1"]
    assert all("resourceVersion" not in o["metadata"] and "status" not in o for o in objects)


async def test_apply_dry_runs_then_creates_only_the_new_groups() -> None:
    cluster = await _cluster_with_a_gang()
    result = migrate(await read_cluster(cluster, "ns"))
    applied = await apply_objects(cluster, list(result.objects), only_new=True)
    assert applied.created == ("Workload ns/grp", "PodGroup ns/grp")
    assert [u.split(":")[0] for u in applied.untouched] == ["Pod ns/p0", "Pod ns/p1"]
    assert isinstance(await cluster.get("Workload", "grp", "ns"), Workload)
    pg = await cluster.get("PodGroup", "grp", "ns")
    assert isinstance(pg, PodGroup) and pg.spec.scheduling_policy.gang is not None
    p0 = await cluster.get("Pod", "p0", "ns")
    assert isinstance(p0, dict) and "schedulingGroup" not in p0["spec"]


async def test_nothing_is_created_when_the_dry_run_refuses_one_object() -> None:
    cluster = await _cluster_with_a_gang()
    result = migrate(await read_cluster(cluster, "ns"))
    objects = list(result.objects)
    objects[1] = {**objects[1], "metadata": {**objects[1]["metadata"], "name": "Bad_Name"}}
    with pytest.raises(MigrationError, match="refused by the server-side dry run"):
        await apply_objects(cluster, objects, only_new=True)
    with pytest.raises(NotFound):
        await cluster.get("Workload", "grp", "ns")


@pytest.mark.parametrize(
    "example",
    sorted(
        p.name
        for p in (Path(__file__).resolve().parents[2] / "examples" / "migrate").glob("*.yaml")
    ),
)
async def test_every_examples_objects_are_admitted_by_memory_cluster(
    example: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Deployments are known for this test only (the registry is global: other suites, e.g.
    # the simulator's, refuse kinds it does not list)
    monkeypatch.setattr(_protocol, "_REGISTRY", dict(_protocol._REGISTRY))
    monkeypatch.setattr(_protocol, "_BY_GVK", dict(_protocol._BY_GVK))
    register_resource(
        ResourceInfo(group="apps", version="v1", kind="Deployment", plural="deployments"),
        default=False,
    )
    path = Path(__file__).resolve().parents[2] / "examples" / "migrate" / example
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    cluster = MemoryCluster()
    for obj in migrate(docs, tier_labels={"1": "topology.kubernetes.io/rack"}).objects:
        await cluster.create(obj)
