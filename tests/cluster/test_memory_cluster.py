"""MemoryCluster specifics that the real server cannot be made to show on demand (410 after a
short history, bookmarks, close) and its helpers (selectors, patches, PDB eviction)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from workloadbuilder.api import (
    GangSchedulingPolicy,
    ObjectMeta,
    PodGroup,
    PodGroupSchedulingPolicy,
    PodGroupSpec,
)
from workloadbuilder.cluster import Informer, MemoryCluster, object_key, pods_by_node
from workloadbuilder.cluster._patch import (
    PatchError,
    json_merge_patch,
    json_patch,
    strategic_merge_patch,
)
from workloadbuilder.cluster._selectors import (
    label_selector_from_dict,
    match_labels,
    parse_label_selector,
)
from workloadbuilder.errors import ApiError, Gone, NotFound, TooManyRequests


def cm(name: str, ns: str = "default", **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    meta.update(extra.pop("metadata", {}))
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, **extra}


def pod(name: str, ns: str = "default", **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, **meta},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }


async def test_watch_from_version_older_than_history_is_gone() -> None:
    c = MemoryCluster(history=3)
    first = await c.create(cm("a"))
    assert isinstance(first, dict)
    start = first["metadata"]["resourceVersion"]
    for i in range(5):
        await c.create(cm(f"b{i}"))
    with pytest.raises(Gone):
        async for _ in c.watch("ConfigMap", "default", resource_version=start):
            pass
    # the newest three events can still be replayed
    recent = str(int(c.resource_version) - 3)
    seen = []
    async for ev in c.watch("ConfigMap", "default", resource_version=recent, timeout_seconds=0.05):
        if ev.type != "BOOKMARK":
            seen.append(ev.object["metadata"]["name"])  # type: ignore[index]
    assert seen == ["b2", "b3", "b4"]


async def test_watch_timeout_ends_with_bookmark_and_close_ends_watches() -> None:
    c = MemoryCluster()
    events = [ev async for ev in c.watch("ConfigMap", "default", timeout_seconds=0.05)]
    assert [e.type for e in events] == ["BOOKMARK"]
    bookmark = events[0].object
    assert isinstance(bookmark, dict)
    assert bookmark["metadata"]["resourceVersion"] == c.resource_version

    async def consume() -> int:
        n = 0
        async for ev in c.watch("ConfigMap", "default", resource_version=c.resource_version):
            n += ev.type == "ADDED"
        return n

    task = asyncio.ensure_future(consume())
    await asyncio.sleep(0)
    await c.create(cm("x"))
    await asyncio.sleep(0)
    await c.close()
    assert await asyncio.wait_for(task, 5) == 1


async def test_informer_relists_after_gone_without_losing_or_duplicating() -> None:
    c = MemoryCluster(history=2)
    await c.create(cm("keep", data={"v": "1"}))
    await c.create(cm("change", data={"v": "1"}))
    await c.create(cm("remove"))
    log: list[tuple[str, str]] = []
    inf = Informer(c, "ConfigMap", "default")
    inf.add_handler(
        on_add=lambda o: log.append(("add", object_key(o))),
        on_update=lambda a, b: log.append(("update", object_key(b))),
        on_delete=lambda o: log.append(("delete", object_key(o))),
    )
    await inf.start()
    await inf.wait_synced(5)
    await inf.stop()
    log.clear()
    # while the informer is stopped, more than `history` changes happen
    changed = await c.get("ConfigMap", "change", "default")
    assert isinstance(changed, dict)
    await c.update({**changed, "data": {"v": "2"}})
    await c.delete("ConfigMap", "remove", "default")
    await c.create(cm("new"))
    await c.create(cm("other", "kube-system"))  # other namespaces do not matter
    await inf.start()
    deadline = asyncio.get_running_loop().time() + 5
    while len(log) < 3 and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.01)
    await inf.stop()
    assert inf.list_count == 2  # the watch from the old version was Gone: relisted
    assert sorted(log) == [
        ("add", "default/new"),
        ("delete", "default/remove"),
        ("update", "default/change"),
    ]
    assert sorted(inf.keys()) == ["default/change", "default/keep", "default/new"]


async def test_informer_index_follows_updates() -> None:
    c = MemoryCluster()
    for i in range(4):
        await c.create(pod(f"p{i}"))
    async with Informer(c, "Pod", indexers={"node": pods_by_node}) as inf:
        await c.bind("default", "p1", "n1")
        await c.bind("default", "p2", "n1")
        await c.bind("default", "p3", "n2")
        deadline = asyncio.get_running_loop().time() + 5
        while len(inf.by_index("node", "n2")) < 1:
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.01)
        assert sorted(object_key(p) for p in inf.by_index("node", "n1")) == [
            "default/p1",
            "default/p2",
        ]
        assert sorted(inf.index_values("node")) == ["n1", "n2"]


async def test_namespace_deletion_removes_its_content() -> None:
    c = MemoryCluster()
    await c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gone"}})
    await c.create(cm("a", "gone"))
    await c.create(cm("held", "gone", metadata={"finalizers": ["x.io/hold"]}))
    await c.delete("Namespace", "gone")
    ns = await c.get("Namespace", "gone")
    assert isinstance(ns, dict) and ns["status"]["phase"] == "Terminating"
    with pytest.raises(NotFound):
        await c.get("ConfigMap", "a", "gone")
    with pytest.raises(ApiError) as info:
        await c.create(cm("late", "gone"))
    assert info.value.status == 403
    await c.patch("ConfigMap", "held", {"metadata": {"finalizers": None}}, "gone")
    with pytest.raises(NotFound):
        await c.get("Namespace", "gone")


async def test_job_delete_orphans_by_default_and_cascades_background() -> None:
    c = MemoryCluster()
    job = await c.create(
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {}}
    )
    assert isinstance(job, dict)
    ref = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": job["metadata"]["uid"]}
    await c.create(pod("jp", ownerReferences=[ref]))
    await c.delete("Job", "j", "default")
    orphan = await c.get("Pod", "jp", "default")
    assert isinstance(orphan, dict) and "ownerReferences" not in orphan["metadata"]


async def test_gc_keeps_dependents_with_another_live_owner() -> None:
    c = MemoryCluster()
    a = await c.create(cm("a"))
    b = await c.create(cm("b"))
    assert isinstance(a, dict) and isinstance(b, dict)
    refs = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": o["metadata"]["name"],
            "uid": o["metadata"]["uid"],
        }
        for o in (a, b)
    ]
    await c.create(cm("dep", metadata={"ownerReferences": refs}))
    await c.delete("ConfigMap", "a", "default")
    dep = await c.get("ConfigMap", "dep", "default")
    assert isinstance(dep, dict)
    assert [r["name"] for r in dep["metadata"]["ownerReferences"]] == ["b"]
    await c.delete("ConfigMap", "b", "default")
    with pytest.raises(NotFound):
        await c.get("ConfigMap", "dep", "default")


async def test_eviction_honours_pod_disruption_budgets() -> None:
    c = MemoryCluster()
    for i in range(3):
        await c.create(pod(f"w{i}", labels={"app": "w"}))
        got = await c.get("Pod", f"w{i}", "default")
        assert isinstance(got, dict)
        await c.update_status({**got, "status": {"phase": "Running"}})
    await c.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "pdb", "namespace": "default"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "w"}}},
        }
    )
    await c.evict("default", "w0")
    with pytest.raises(TooManyRequests):
        await c.evict("default", "w1")
    assert c.count("Pod", "default") == 2


async def test_typed_objects_follow_the_requested_version() -> None:
    c = MemoryCluster()
    pg = PodGroup(
        metadata=ObjectMeta(name="g", namespace="default"),
        spec=PodGroupSpec(
            scheduling_policy=PodGroupSchedulingPolicy(gang=GangSchedulingPolicy(min_count=1))
        ),
        api_version="scheduling.k8s.io/v1alpha3",
    )
    created = await c.create(pg)
    assert isinstance(created, PodGroup)
    assert created.api_version == "scheduling.k8s.io/v1alpha3"
    got = await c.get("PodGroup", "g", "default")
    assert isinstance(got, PodGroup) and got.api_version == "scheduling.k8s.io/v1beta1"


async def test_admission_off_stores_what_it_is_given() -> None:
    c = MemoryCluster(admission=False)
    pg = PodGroup(
        metadata=ObjectMeta(name="g", namespace="default"),
        spec=PodGroupSpec(scheduling_policy=PodGroupSchedulingPolicy()),
    )
    created = await c.create(pg)
    assert isinstance(created, PodGroup)
    assert created.metadata.finalizers == () and created.spec.disruption_mode is None


def test_label_selector_parsing() -> None:
    reqs = parse_label_selector("a=1, b != 2, c in (x,y), d notin (z), e, !f, g>3")
    labels = {"a": "1", "b": "3", "c": "y", "e": "", "g": "4"}
    assert match_labels(reqs, labels)
    assert not match_labels(reqs, {**labels, "f": "1"})
    assert not match_labels(reqs, {**labels, "g": "3"})
    with pytest.raises(ApiError):
        parse_label_selector("a in (x")
    sel = label_selector_from_dict(
        {"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "b", "operator": "Exists"}]}
    )
    assert sel({"a": "1", "b": ""}) and not sel({"a": "1"})
    assert not label_selector_from_dict(None)({"a": "1"})


def test_patches() -> None:
    assert json_merge_patch({"a": {"b": 1, "c": 2}}, {"a": {"b": None, "d": 3}}) == {
        "a": {"c": 2, "d": 3}
    }
    doc = json_patch(
        {"l": [1, 2], "m": {"x": 1}},
        [
            {"op": "add", "path": "/l/-", "value": 3},
            {"op": "move", "from": "/m/x", "path": "/m/y"},
            {"op": "copy", "from": "/l", "path": "/k"},
            {"op": "remove", "path": "/l/0"},
        ],
    )
    assert doc == {"l": [2, 3], "m": {"y": 1}, "k": [1, 2, 3]}
    with pytest.raises(PatchError):
        json_patch({"a": 1}, [{"op": "remove", "path": "/b"}])
    for bad_index in ("\u00b2", "\u0661", "01", "-1"):  # non-ASCII digits pass isdigit()
        with pytest.raises(PatchError):
            json_patch({"l": [1, 2]}, [{"op": "remove", "path": f"/l/{bad_index}"}])
    merged = strategic_merge_patch(
        {
            "metadata": {"finalizers": ["a"]},
            "status": {"conditions": [{"type": "A", "status": "True"}]},
            "spec": {"containers": [{"name": "c", "image": "1"}], "tolerations": [{"k": 1}]},
        },
        {
            "metadata": {"finalizers": ["b"], "$deleteFromPrimitiveList/finalizers": ["a"]},
            "status": {"conditions": [{"type": "B", "status": "False"}]},
            "spec": {
                "containers": [{"name": "c", "image": "2"}, {"name": "d", "$patch": "delete"}],
                "tolerations": [{"k": 2}],
            },
        },
    )
    assert merged["metadata"]["finalizers"] == ["b"]
    assert [c["type"] for c in merged["status"]["conditions"]] == ["A", "B"]
    assert merged["spec"]["containers"] == [{"name": "c", "image": "2"}]
    assert merged["spec"]["tolerations"] == [{"k": 2}]


async def test_share_objects_returns_the_stored_version() -> None:
    c = MemoryCluster(share_objects=True)
    await c.create(cm("s"))
    a = await c.get("ConfigMap", "s", "default")
    b = await c.get("ConfigMap", "s", "default")
    assert a is b
    copying = MemoryCluster()
    await copying.create(cm("s"))
    assert await copying.get("ConfigMap", "s", "default") is not await copying.get(
        "ConfigMap", "s", "default"
    )


async def test_paged_list_of_many_objects() -> None:
    c = MemoryCluster()
    for ns in ("a", "b"):
        await c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        for i in range(25):
            await c.create(cm(f"c{i:02d}", ns))
    seen: list[tuple[str, str]] = []
    token = None
    while True:
        page = await c.list("ConfigMap", limit=7, continue_token=token)
        seen.extend((o["metadata"]["namespace"], o["metadata"]["name"]) for o in page.items)  # type: ignore[index]
        token = page.continue_token
        if token is None:
            break
    assert seen == sorted(seen) and len(seen) == len(set(seen)) == 50


async def test_informer_over_typed_pod_groups_indexes_by_workload() -> None:
    from workloadbuilder.api import WorkloadReference
    from workloadbuilder.cluster import groups_by_workload

    c = MemoryCluster()
    for i, workload in enumerate(("w1", "w1", "w2")):
        await c.create(
            PodGroup(
                metadata=ObjectMeta(name=f"g{i}", namespace="default"),
                spec=PodGroupSpec(
                    scheduling_policy=PodGroupSchedulingPolicy(
                        gang=GangSchedulingPolicy(min_count=1)
                    ),
                    workload_ref=WorkloadReference(workload_name=workload, template_name="t"),
                ),
            )
        )
    async with Informer(c, "PodGroup", indexers={"workload": groups_by_workload}) as inf:
        groups = inf.by_index("workload", "default/w1")
        assert sorted(object_key(g) for g in groups) == ["default/g0", "default/g1"]
        assert all(isinstance(g, PodGroup) for g in groups)
        cached = inf.get("g2", "default")
        assert isinstance(cached, PodGroup)
        assert cached.spec.workload_ref is not None
        assert cached.spec.workload_ref.workload_name == "w2"


async def test_informer_skips_the_deletion_of_an_incarnation_its_paged_list_outran() -> None:
    from workloadbuilder.cluster import ClusterProxy

    c = MemoryCluster()
    await c.create(cm("a"))
    await c.create(cm("b"))

    class RecreateBetweenPages(ClusterProxy):
        """Deletes and re-creates ``b`` after the first page: MemoryCluster's second page
        then returns the new ``b``, newer than the list's resourceVersion."""

        async def list(self, kind: Any, namespace: Any = None, **kw: Any) -> Any:
            if kw.get("continue_token"):
                await c.delete("ConfigMap", "b", "default")
                await c.create(cm("b", data={"v": "2"}))
            return await super().list(kind, namespace, **kw)

    log: list[tuple[str, str]] = []
    inf = Informer(RecreateBetweenPages(c), "ConfigMap", "default", page_size=1)
    inf.add_handler(
        on_add=lambda o: log.append(("add", object_key(o))),
        on_update=lambda a, b: log.append(("update", object_key(b))),
        on_delete=lambda o: log.append(("delete", object_key(o))),
    )
    async with inf:
        await c.create(cm("z"))  # a marker: once it is seen, the replay before it was handled
        deadline = asyncio.get_running_loop().time() + 5
        while ("add", "default/z") not in log and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        cached = inf.get("b", "default")
    assert log == [("add", "default/a"), ("add", "default/b"), ("add", "default/z")]
    assert isinstance(cached, dict) and cached["data"] == {"v": "2"}


async def test_status_patch_changes_only_status_and_leaves_earlier_versions_intact() -> None:
    c = MemoryCluster()
    created = await c.create(pod("s", labels={"a": "1"}))
    assert isinstance(created, dict)
    since = created["metadata"]["resourceVersion"]
    await c.patch(
        "Pod",
        "s",
        {
            "metadata": {"labels": {"a": "2"}},
            "spec": {"nodeName": "n", "containers": None},
            "status": {"phase": "Running", "qosClass": None},
        },
        "default",
        subresource="status",
    )
    await c.patch(
        "Pod",
        "s",
        {"status": {"$patch": "replace", "phase": "Failed"}},
        "default",
        subresource="status",
        patch_type="strategic",
    )
    got = await c.get("Pod", "s", "default")
    assert isinstance(got, dict)
    assert got["metadata"]["labels"] == {"a": "1"}
    assert got["spec"] == created["spec"]
    assert got["status"] == {"phase": "Failed"}
    versions = []
    async for ev in c.watch("Pod", "default", resource_version=since, timeout_seconds=0.05):
        if ev.type == "MODIFIED":
            assert isinstance(ev.object, dict)
            versions.append(
                (ev.object["status"], ev.object["spec"], ev.object["metadata"]["labels"])
            )
    assert versions == [
        ({"phase": "Running"}, created["spec"], {"a": "1"}),
        ({"phase": "Failed"}, created["spec"], {"a": "1"}),
    ]
