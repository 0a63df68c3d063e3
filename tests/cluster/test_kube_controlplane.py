"""KubeCluster against the real v1.37.2 API server: what only a real server can show.

The shared behaviour suite (test_behaviour.py) covers CRUD/watch/selector semantics on both
implementations; this file checks KubeCluster's own mapping of real server answers: typed
errors and field causes, RBAC/authentication failures, server-side apply conflicts, dry
run, binding/eviction/events, pagination, and kinds the generated client does not know.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import yaml

from workloadbuilder.api import (
    CompositePodGroup,
    Condition,
    PodGroup,
    PodGroupStatus,
    Workload,
    from_dict,
)
from workloadbuilder.cluster import KubeCluster, Preconditions
from workloadbuilder.errors import (
    AlreadyExists,
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
    Unauthorized,
)
from workloadbuilder.testing.builders import (
    make_node,
    make_pod,
    make_pod_group_template,
    make_workload,
)

pytestmark = pytest.mark.controlplane


@pytest.fixture
async def kube(control_plane: Any) -> AsyncIterator[KubeCluster]:
    cluster = KubeCluster.from_kubeconfig(control_plane.kubeconfig)
    try:
        yield cluster
    finally:
        await cluster.close()


@pytest.fixture
async def ns(kube: KubeCluster) -> AsyncIterator[str]:
    name = f"kube-{uuid.uuid4().hex[:8]}"
    await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    with contextlib.suppress(NotFound):
        await kube.delete("Namespace", name)


def _workload(name: str, ns: str, min_count: int | None = 2) -> dict[str, Any]:
    workers = make_pod_group_template("workers").gang(min_count)
    return make_workload(name, ns).pod_group_template(workers).obj()


def _pod(name: str, ns: str) -> dict[str, Any]:
    return make_pod(name, ns).container_name("c").image("registry.example/app:1").obj()


async def test_typed_round_trip_of_our_kinds(kube: KubeCluster, ns: str) -> None:
    created = await kube.create(_workload("w", ns))
    assert isinstance(created, Workload)
    assert created.metadata.uid
    got = await kube.get("Workload", "w", ns)
    assert got == created
    pg = from_dict(
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "g", "namespace": ns},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}},
        },
        PodGroup,
    )
    stored = await kube.create(pg)
    assert isinstance(stored, PodGroup)
    # server defaulting comes back in the model
    assert stored.spec.disruption_mode is not None
    cpg = await kube.create(
        {
            "apiVersion": "scheduling.k8s.io/v1alpha3",
            "kind": "CompositePodGroup",
            "metadata": {"name": "c", "namespace": ns},
            "spec": {
                "workloadRef": {"workloadName": "w", "templateName": "workers"},
                "schedulingPolicy": {"gang": {"minGroupCount": 1}},
            },
        }
    )
    assert isinstance(cpg, CompositePodGroup)
    page = await kube.list("CompositePodGroup", ns)
    assert [o.metadata.name for o in page.items if isinstance(o, CompositePodGroup)] == ["c"]


async def test_invalid_causes_match_the_server_message(kube: KubeCluster, ns: str) -> None:
    bad = _workload("Bad_Name", ns, min_count=None)
    with pytest.raises(Invalid) as info:
        await kube.create(bad)
    err = info.value
    assert err.status == 422
    paths = {c.path for c in err.causes}
    assert "metadata.name" in paths
    assert "spec.podGroupTemplates[0].schedulingPolicy.gang.minCount" in paths
    for cause in err.causes:
        # each converted cause renders exactly as the server rendered it in the message
        assert str(cause) in err.message
    name_error = next(c for c in err.causes if c.path == "metadata.name")
    assert name_error.type == "Invalid value"
    assert name_error.value == "Bad_Name"


async def test_conflicts_and_not_found(kube: KubeCluster, ns: str) -> None:
    created = await kube.create(_workload("w", ns))
    assert isinstance(created, Workload)
    with pytest.raises(AlreadyExists):
        await kube.create(_workload("w", ns))
    labelled = attrs.evolve(created, metadata=attrs.evolve(created.metadata, labels={"a": "1"}))
    await kube.update(labelled)
    with pytest.raises(Conflict):  # stale resourceVersion
        await kube.update(
            attrs.evolve(created, metadata=attrs.evolve(created.metadata, labels={"a": "2"}))
        )
    with pytest.raises(Conflict):
        await kube.delete("Workload", "w", ns, preconditions=Preconditions(uid="not-the-uid"))
    with pytest.raises(NotFound):
        await kube.get("Workload", "missing", ns)
    with pytest.raises(NotFound):
        await kube.patch("Workload", "missing", {"metadata": {"labels": {"a": "b"}}}, ns)


async def test_dry_run_does_not_persist(kube: KubeCluster, ns: str) -> None:
    out = await kube.create(_workload("dry", ns), dry_run=True)
    assert isinstance(out, Workload)
    with pytest.raises(NotFound):
        await kube.get("Workload", "dry", ns)


async def test_server_side_apply_conflicts_and_force(kube: KubeCluster, ns: str) -> None:
    def cm(value: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": ns},
            "data": {"k": value},
        }

    first = await kube.patch("ConfigMap", "cm", cm("a"), ns, patch_type="apply", field_manager="a")
    assert isinstance(first, dict)
    assert first["data"] == {"k": "a"}
    with pytest.raises(Conflict) as info:
        await kube.patch("ConfigMap", "cm", cm("b"), ns, patch_type="apply", field_manager="b")
    assert info.value.body["details"]["causes"][0]["field"] == ".data.k"
    forced = await kube.patch(
        "ConfigMap", "cm", cm("b"), ns, patch_type="apply", field_manager="b", force=True
    )
    assert isinstance(forced, dict)
    assert forced["data"] == {"k": "b"}
    merged = await kube.patch("ConfigMap", "cm", {"data": {"m": "1"}}, ns)
    assert isinstance(merged, dict)
    assert merged["data"] == {"k": "b", "m": "1"}
    patched = await kube.patch(
        "ConfigMap", "cm", [{"op": "remove", "path": "/data/m"}], ns, patch_type="json"
    )
    assert isinstance(patched, dict)
    assert patched["data"] == {"k": "b"}


async def test_bind_evict_and_events(kube: KubeCluster, ns: str) -> None:
    node = f"node-{uuid.uuid4().hex[:6]}"
    await kube.create(make_node(node).obj())
    try:
        pod = await kube.create(_pod("p", ns))
        assert isinstance(pod, dict)
        await kube.bind(ns, "p", node, pod_uid=pod["metadata"]["uid"])
        bound = await kube.get("Pod", "p", ns)
        assert isinstance(bound, dict)
        assert bound["spec"]["nodeName"] == node
        with pytest.raises(Conflict):
            await kube.bind(ns, "p", node)
        await kube.create_event(
            namespace=ns,
            involved_object={
                "apiVersion": "v1",
                "kind": "Pod",
                "name": "p",
                "uid": pod["metadata"]["uid"],
            },
            reason="Scheduled",
            message=f"bound to {node}",
            reporting_component="wb-test",
        )
        events = await kube.list("Event", ns, field_selector="involvedObject.name=p")
        assert [(e["reason"], e["message"]) for e in events.items if isinstance(e, dict)] == [
            ("Scheduled", f"bound to {node}")
        ]
        await kube.evict(ns, "p")
        after = await kube.get("Pod", "p", ns)  # no kubelet: graceful deletion has begun
        assert isinstance(after, dict)
        assert after["metadata"].get("deletionTimestamp")
        with pytest.raises(NotFound):
            await kube.evict(ns, "missing")
    finally:
        await kube.delete("Node", node)


async def test_pagination(kube: KubeCluster, ns: str) -> None:
    for i in range(5):
        await kube.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": f"c{i}", "namespace": ns},
            }
        )
    names: list[str] = []
    token: str | None = None
    pages = 0
    while True:
        page = await kube.list("ConfigMap", ns, limit=2, continue_token=token)
        pages += 1
        names += [o["metadata"]["name"] for o in page.items if isinstance(o, dict)]
        token = page.continue_token
        if token is None:
            break
    assert pages >= 3
    assert sorted(n for n in names if n.startswith("c")) == [f"c{i}" for i in range(5)]


async def test_watch_from_list_version_sees_typed_changes(kube: KubeCluster, ns: str) -> None:
    start = await kube.list("Workload", ns)
    created = await kube.create(_workload("w", ns))
    assert isinstance(created, Workload)
    await kube.delete("Workload", "w", ns)
    seen: list[tuple[str, str | None]] = []
    async for event in kube.watch("Workload", ns, resource_version=start.resource_version):
        if event.type == "BOOKMARK":
            continue
        assert isinstance(event.object, Workload)
        seen.append((event.type, event.object.metadata.name))
        if event.type == "DELETED":
            break
    assert seen == [("ADDED", "w"), ("DELETED", "w")]


async def test_rbac_and_authentication_errors(control_plane: Any, tmp_path: Path, ns: str) -> None:
    nobody = control_plane.mint_kubeconfig("nobody")
    async with KubeCluster.from_kubeconfig(nobody) as cluster:
        with pytest.raises(Forbidden) as info:
            await cluster.list("Pod", ns)
        assert "nobody" in str(info.value)
    doc = yaml.safe_load(Path(control_plane.kubeconfig).read_text())
    user = {"token": "not-a-valid-token"}
    doc["users"] = [{"name": u["name"], "user": user} for u in doc["users"]]
    bogus = tmp_path / "bogus.kubeconfig"
    bogus.write_text(yaml.safe_dump(doc))
    async with KubeCluster.from_kubeconfig(bogus) as cluster:
        with pytest.raises(Unauthorized):
            await cluster.list("Pod", ns)


async def test_typed_update_status(kube: KubeCluster, ns: str) -> None:
    pg = await kube.create(
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "g", "namespace": ns},
            "spec": {"schedulingPolicy": {"basic": {}}},
        }
    )
    assert isinstance(pg, PodGroup)
    cond = Condition(
        type="PodGroupScheduled",
        status="False",
        reason="Unschedulable",
        message="0/3 nodes",
        last_transition_time="2026-01-01T00:00:00Z",
    )
    updated = await kube.update_status(
        attrs.evolve(pg, status=PodGroupStatus(conditions=(cond,))), field_manager="t"
    )
    assert isinstance(updated, PodGroup)
    assert updated.status is not None
    assert [c.reason for c in updated.status.conditions] == ["Unschedulable"]
    assert updated.metadata.name == "g"


async def test_uncompressed_responses_on_request(control_plane: Any, ns: str) -> None:
    # kube-apiserver gzips a response over 128 KiB for a client that accepts gzip;
    # compression=False (or disable-compression in the kubeconfig) gets it plain
    data = {f"k{i}": "v" * 1000 for i in range(200)}
    seen = {}
    for compression in (True, False):
        cluster = KubeCluster.from_kubeconfig(control_plane.kubeconfig, compression=compression)
        async with cluster as kube:
            if compression:
                await kube.create(
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "metadata": {"name": "big", "namespace": ns},
                        "data": data,
                    }
                )
            status, headers, body = await kube._exchange(
                "GET", f"/api/v1/namespaces/{ns}/configmaps/big", (), None, "application/json"
            )
            assert status == 200 and json.loads(body)["data"] == data
            seen[compression] = headers.get("content-encoding")
    assert seen == {True: "gzip", False: None}
