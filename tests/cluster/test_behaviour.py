"""One behaviour suite for every Cluster implementation (MemoryCluster and KubeCluster on the
real v1.37.2 API server). Differences that cannot be hidden are documented in
docs/cluster.md; assertions here hold on both."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import attrs
import pytest
from waits import priority_class_admitted

from workloadbuilder.api import (
    Condition,
    GangSchedulingPolicy,
    ObjectMeta,
    PodGroup,
    PodGroupSchedulingPolicy,
    PodGroupSpec,
    PodGroupStatus,
    PodGroupTemplate,
    Workload,
    WorkloadSpec,
)
from workloadbuilder.cluster import (
    Cluster,
    Informer,
    KubeObject,
    Preconditions,
    WatchEvent,
    pods_by_pod_group,
)
from workloadbuilder.errors import (
    AlreadyExists,
    ApiError,
    BadRequest,
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
)
from workloadbuilder.testing.builders import make_pod

T = TypeVar("T")


async def eventually(
    probe: Callable[[], Awaitable[T]],
    predicate: Callable[[T], bool],
    *,
    timeout: float = 60.0,
) -> T:
    """Poll ``probe`` until ``predicate`` holds, with a deadline."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = await probe()
        if predicate(value):
            return value
        if loop.time() > deadline:
            pytest.fail(f"condition not reached within {timeout}s; last value: {value!r}")
        await asyncio.sleep(0.1)


async def exists(c: Cluster, kind: str, name: str, ns: str | None = None) -> bool:
    try:
        await c.get(kind, name, ns)
    except NotFound:
        return False
    return True


def cm(name: str, ns: str, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    meta.update(extra.pop("metadata", {}))
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, **extra}


def pod(name: str, ns: str, *, group: str | None = None, **spec: Any) -> dict[str, Any]:
    """A pod with one container ``c``; ``spec``: more pod-spec fields (camelCase)."""
    builder = make_pod(name, ns).container_name("c")
    if group:
        builder.pod_group(group)
    for key, value in spec.items():
        builder.field(f"spec.{key}", value)
    return builder.obj()


def pod_group(name: str, ns: str, min_count: int = 2, **spec: Any) -> PodGroup:
    return PodGroup(
        metadata=ObjectMeta(name=name, namespace=ns),
        spec=PodGroupSpec(
            scheduling_policy=PodGroupSchedulingPolicy(
                gang=GangSchedulingPolicy(min_count=min_count)
            ),
            **spec,
        ),
    )


def meta(obj: KubeObject) -> dict[str, Any]:
    if isinstance(obj, dict):
        return dict(obj["metadata"])
    m = obj.metadata
    return {
        "name": m.name,
        "namespace": m.namespace,
        "uid": m.uid,
        "resourceVersion": m.resource_version,
        "generation": m.generation,
        "creationTimestamp": m.creation_timestamp,
        "deletionTimestamp": m.deletion_timestamp,
        "finalizers": list(m.finalizers),
        "labels": dict(m.labels),
    }


def names(items: Any) -> list[str]:
    return [meta(i)["name"] for i in items]


# ----------------------------------------------------------------------------- CRUD


async def test_create_get_delete(cluster: Cluster, ns: str) -> None:
    created = await cluster.create(cm("one", ns, data={"k": "v"}))
    assert isinstance(created, dict)
    m = created["metadata"]
    assert m["uid"] and m["resourceVersion"] and m["creationTimestamp"]
    assert m["namespace"] == ns
    got = await cluster.get("ConfigMap", "one", ns)
    assert isinstance(got, dict)
    assert got["data"] == {"k": "v"}
    assert got["metadata"]["uid"] == m["uid"]
    with pytest.raises(AlreadyExists):
        await cluster.create(cm("one", ns))
    await cluster.delete("ConfigMap", "one", ns)
    with pytest.raises(NotFound):
        await cluster.get("ConfigMap", "one", ns)
    with pytest.raises(NotFound):
        await cluster.delete("ConfigMap", "one", ns)


async def test_returned_objects_are_not_aliased(cluster: Cluster, ns: str) -> None:
    body = cm("alias", ns, data={"k": "v"})
    created = await cluster.create(body)
    body["data"]["k"] = "changed-by-caller"
    assert isinstance(created, dict)
    created["data"]["k"] = "changed-too"
    got = await cluster.get("ConfigMap", "alias", ns)
    assert isinstance(got, dict)
    assert got["data"] == {"k": "v"}


async def test_generate_name(cluster: Cluster, ns: str) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "gen-"}}
    a = await cluster.create(body, ns)
    b = await cluster.create(body, ns)
    na, nb = meta(a)["name"], meta(b)["name"]
    assert na.startswith("gen-") and nb.startswith("gen-") and na != nb


async def test_create_in_missing_namespace_is_not_found(cluster: Cluster) -> None:
    with pytest.raises(NotFound):
        await cluster.create(cm("x", f"missing-{uuid.uuid4().hex[:8]}"))


async def test_invalid_name_is_rejected(cluster: Cluster, ns: str) -> None:
    with pytest.raises(Invalid) as info:
        await cluster.create(cm("Not_Valid", ns))
    assert [c.path for c in info.value.causes] == ["metadata.name"]


async def test_dry_run_does_not_persist(cluster: Cluster, ns: str) -> None:
    out = await cluster.create(cm("dry", ns, data={"a": "b"}), dry_run=True)
    assert meta(out)["name"] == "dry"
    assert not await exists(cluster, "ConfigMap", "dry", ns)


# ----------------------------------------------------------------------------- concurrency


async def test_update_conflict_and_monotonic_resource_versions(cluster: Cluster, ns: str) -> None:
    first = await cluster.create(cm("cc", ns, data={"n": "0"}))
    assert isinstance(first, dict)
    second = await cluster.update({**first, "data": {"n": "1"}})
    assert isinstance(second, dict)
    assert int(second["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])
    with pytest.raises(Conflict):
        await cluster.update({**first, "data": {"n": "stale"}})
    got = await cluster.get("ConfigMap", "cc", ns)
    assert isinstance(got, dict)
    assert got["data"] == {"n": "1"}


async def test_delete_preconditions(cluster: Cluster, ns: str) -> None:
    obj = await cluster.create(cm("pre", ns))
    with pytest.raises(Conflict):
        await cluster.delete("ConfigMap", "pre", ns, preconditions=Preconditions(uid="nope"))
    with pytest.raises(Conflict):
        await cluster.delete(
            "ConfigMap", "pre", ns, preconditions=Preconditions(resource_version="1")
        )
    m = meta(obj)
    await cluster.delete(
        "ConfigMap",
        "pre",
        ns,
        preconditions=Preconditions(uid=m["uid"], resource_version=m["resourceVersion"]),
    )
    assert not await exists(cluster, "ConfigMap", "pre", ns)


async def test_generation_follows_spec_not_status_or_metadata(cluster: Cluster, ns: str) -> None:
    created = await cluster.create(pod("gen", ns))
    assert isinstance(created, dict)
    assert created["metadata"]["generation"] == 1
    created["metadata"]["labels"] = {"x": "y"}
    labelled = await cluster.update(created)
    assert isinstance(labelled, dict)
    assert labelled["metadata"]["generation"] == 1
    labelled["status"]["phase"] = "Running"
    running = await cluster.update_status(labelled)
    assert isinstance(running, dict)
    assert running["metadata"]["generation"] == 1
    running["spec"]["containers"][0]["image"] = "registry.k8s.io/pause:3.9"
    bumped = await cluster.update(running)
    assert isinstance(bumped, dict)
    assert bumped["metadata"]["generation"] == 2
    # v1.37.2 does not maintain metadata.generation for the scheduling.k8s.io kinds
    pg = await cluster.create(pod_group("gen", ns))
    assert isinstance(pg, PodGroup)
    assert pg.metadata.generation is None


async def test_unconditional_update(cluster: Cluster, ns: str) -> None:
    obj = await cluster.create(cm("uu", ns, data={"a": "1"}))
    assert isinstance(obj, dict)
    del obj["metadata"]["resourceVersion"]
    out = await cluster.update({**obj, "data": {"a": "2"}})
    assert isinstance(out, dict) and out["data"] == {"a": "2"}
    same = await cluster.update(out)
    assert meta(same)["resourceVersion"] == meta(out)["resourceVersion"]  # a no-op update
    pg = await cluster.create(pod_group("uu", ns))
    assert isinstance(pg, PodGroup)
    with pytest.raises(Invalid) as info:
        await cluster.update(
            attrs.evolve(pg, metadata=attrs.evolve(pg.metadata, resource_version=None))
        )
    assert [c.path for c in info.value.causes] == ["metadata.resourceVersion"]


# ----------------------------------------------------------------------------- status


async def test_status_subresource_is_separate(cluster: Cluster, ns: str) -> None:
    pg = await cluster.create(pod_group("st", ns))
    assert isinstance(pg, PodGroup)
    assert pg.status is None or not pg.status.conditions
    cond = Condition(
        type="PodGroupInitiallyScheduled",
        status="True",
        reason="Scheduled",
        message="",
        last_transition_time="2026-01-01T00:00:00Z",
    )
    # update() ignores status
    upd = await cluster.update(attrs.evolve(pg, status=PodGroupStatus(conditions=(cond,))))
    assert isinstance(upd, PodGroup)
    assert upd.status is None or not upd.status.conditions
    # update_status() ignores spec
    changed_spec = attrs.evolve(
        upd.spec,
        scheduling_policy=PodGroupSchedulingPolicy(gang=GangSchedulingPolicy(min_count=5)),
    )
    st = await cluster.update_status(
        attrs.evolve(upd, spec=changed_spec, status=PodGroupStatus(conditions=(cond,)))
    )
    assert isinstance(st, PodGroup)
    assert st.status is not None and [c.type for c in st.status.conditions] == [
        "PodGroupInitiallyScheduled"
    ]
    assert st.spec.scheduling_policy.gang == GangSchedulingPolicy(min_count=2)
    # a merge patch of the status subresource
    patched = await cluster.patch(
        "PodGroup",
        "st",
        {"status": {"conditions": [{**_cond_dict(cond), "reason": "Again"}]}},
        ns,
        subresource="status",
    )
    assert isinstance(patched, PodGroup)
    assert patched.status is not None and patched.status.conditions[0].reason == "Again"


async def test_status_conditions_are_validated(cluster: Cluster, ns: str) -> None:
    await cluster.create(pod_group("cv", ns))
    with pytest.raises(Invalid) as info:
        await cluster.patch(
            "PodGroup",
            "cv",
            {"status": {"conditions": [{"type": "PodGroupInitiallyScheduled", "status": "Maybe"}]}},
            ns,
            subresource="status",
        )
    assert [(c.path, c.type) for c in info.value.causes] == [
        ("status.conditions[0].status", "Unsupported value"),
        ("status.conditions[0].lastTransitionTime", "Required value"),
        ("status.conditions[0].reason", "Required value"),
    ]
    ok = {
        "type": "A",
        "status": "True",
        "reason": "Ok",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    with pytest.raises(Invalid) as dup:
        await cluster.patch(
            "PodGroup", "cv", {"status": {"conditions": [ok, ok]}}, ns, subresource="status"
        )
    assert [(c.path, c.type) for c in dup.value.causes] == [
        ("status.conditions[1]", "Duplicate value")
    ]


def _cond_dict(c: Condition) -> dict[str, Any]:
    return {
        "type": c.type,
        "status": c.status,
        "reason": c.reason,
        "message": c.message,
        "lastTransitionTime": c.last_transition_time,
    }


# ----------------------------------------------------------------------------- selectors


async def test_empty_namespace_lists_and_watches_all_namespaces(cluster: Cluster, ns: str) -> None:
    mark = {"labels": {"empty-ns-test": ns}}
    await cluster.create(cm("first", ns, metadata=mark))
    page = await cluster.list("ConfigMap", "", label_selector=f"empty-ns-test={ns}")
    assert names(page.items) == ["first"]
    stream = cluster.watch(
        "ConfigMap",
        "",
        resource_version=page.resource_version,
        label_selector=f"empty-ns-test={ns}",
        timeout_seconds=30,
    )

    async def first_added() -> str:
        async for ev in stream:
            if ev.type == "ADDED":
                return names([ev.object])[0]
        return ""

    seen = asyncio.ensure_future(first_added())
    await asyncio.sleep(0)
    await cluster.create(cm("second", ns, metadata=mark))
    try:
        assert await asyncio.wait_for(seen, 30) == "second"
    finally:
        await stream.aclose()  # type: ignore[attr-defined]


async def test_label_selectors(cluster: Cluster, ns: str) -> None:
    labels = {
        "a": {"tier": "web", "env": "prod"},
        "b": {"tier": "db", "env": "prod"},
        "c": {"tier": "web", "env": "dev"},
        "d": {"other": "x"},
    }
    for name, lab in labels.items():
        await cluster.create(cm(name, ns, metadata={"labels": lab}))

    async def sel(s: str) -> list[str]:
        return sorted(names((await cluster.list("ConfigMap", ns, label_selector=s)).items))

    assert await sel("tier=web") == ["a", "c"]
    assert await sel("tier==web,env=prod") == ["a"]
    assert await sel("tier!=web") == ["b", "d"]
    assert await sel("env in (prod, dev),tier notin (db)") == ["a", "c"]
    assert await sel("tier") == ["a", "b", "c"]
    assert await sel("!tier") == ["d"]
    with pytest.raises(ApiError) as info:
        await sel("tier in (a")
    assert info.value.status == 400


async def test_field_selectors(cluster: Cluster, ns: str) -> None:
    await cluster.create(pod("p1", ns, nodeName="node-a"))
    await cluster.create(pod("p2", ns, nodeName="node-b"))
    await cluster.create(pod("p3", ns))

    async def sel(s: str) -> list[str]:
        return sorted(names((await cluster.list("Pod", ns, field_selector=s)).items))

    assert await sel("spec.nodeName=node-a") == ["p1"]
    assert await sel("spec.nodeName=") == ["p3"]
    assert await sel("spec.nodeName!=node-a") == ["p2", "p3"]
    assert await sel("metadata.name=p2") == ["p2"]
    assert await sel(f"metadata.namespace={ns},status.phase=Pending") == ["p1", "p2", "p3"]
    assert await sel("spec.schedulerName=default-scheduler") == ["p1", "p2", "p3"]
    with pytest.raises(ApiError) as info:
        await sel("spec.notAField=1")
    assert info.value.status == 400


async def test_pagination(cluster: Cluster, ns: str) -> None:
    want = [f"page-{i}" for i in range(7)]
    for name in reversed(want):
        await cluster.create(cm(name, ns))
    seen: list[str] = []
    token: str | None = None
    pages = 0
    while True:
        page = await cluster.list(
            "ConfigMap", ns, limit=3, continue_token=token, label_selector=None
        )
        pages += 1
        seen.extend(n for n in names(page.items) if n.startswith("page-"))
        assert len(page.items) <= 3
        token = page.continue_token
        if not token:
            break
    assert seen == want
    assert pages >= 3


# ----------------------------------------------------------------------------- watches


async def collect(stream: Any, count: int, timeout: float = 30.0) -> list[WatchEvent]:
    out: list[WatchEvent] = []

    async def run() -> None:
        async for ev in stream:
            if ev.type == "BOOKMARK":
                continue
            out.append(ev)
            if len(out) >= count:
                break

    try:
        await asyncio.wait_for(run(), timeout)
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()
    return out


async def test_watch_from_resource_version(cluster: Cluster, ns: str) -> None:
    a = await cluster.create(cm("wa", ns, data={"v": "1"}))
    start = meta(a)["resourceVersion"]
    await cluster.create(cm("wb", ns))
    got = await cluster.get("ConfigMap", "wa", ns)
    assert isinstance(got, dict)
    await cluster.update({**got, "data": {"v": "2"}})
    await cluster.delete("ConfigMap", "wb", ns)
    events = await collect(
        cluster.watch("ConfigMap", ns, resource_version=start, timeout_seconds=20), 3
    )
    assert [(e.type, meta(e.object)["name"]) for e in events] == [
        ("ADDED", "wb"),
        ("MODIFIED", "wa"),
        ("DELETED", "wb"),
    ]
    rvs = [int(meta(e.object)["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and rvs[0] > int(start)


async def test_watch_without_version_starts_with_current_state(cluster: Cluster, ns: str) -> None:
    await cluster.create(cm("s1", ns))
    await cluster.create(cm("s2", ns))
    events = await collect(cluster.watch("ConfigMap", ns, timeout_seconds=20), 2)
    assert sorted((e.type, meta(e.object)["name"]) for e in events) == [
        ("ADDED", "s1"),
        ("ADDED", "s2"),
    ]
    stream = cluster.watch("ConfigMap", ns, label_selector="app=w", timeout_seconds=20)
    task = asyncio.ensure_future(collect(stream, 1))
    await asyncio.sleep(0)
    started = time.monotonic()
    made = await cluster.create(cm("s3", ns, metadata={"labels": {"app": "w"}}))
    live = await task
    # s3 arrives either in the watch's initial state or as a live event, whichever side of
    # the watch's start its create lands; on failure, say when the watch ended and what
    # the server holds
    got = [(e.type, meta(e.object)["name"]) for e in live]
    if got != [("ADDED", "s3")]:
        listed = await cluster.list("ConfigMap", ns, label_selector="app=w")
        held = [(meta(o)["name"], meta(o)["resourceVersion"]) for o in listed.items]
        pytest.fail(
            f"watch gave {got} and ended {time.monotonic() - started:.2f}s after s3's create"
            f" (resourceVersion {meta(made)['resourceVersion']}); the server lists {held}"
        )


async def test_watch_label_selector_transitions(cluster: Cluster, ns: str) -> None:
    obj = await cluster.create(cm("t", ns, metadata={"labels": {"app": "x"}}))
    start = meta(obj)["resourceVersion"]
    got = await cluster.get("ConfigMap", "t", ns)
    assert isinstance(got, dict)
    got["metadata"]["labels"] = {"app": "other"}
    moved = await cluster.update(got)
    assert isinstance(moved, dict)
    moved["metadata"]["labels"] = {"app": "x"}
    await cluster.update(moved)
    events = await collect(
        cluster.watch(
            "ConfigMap", ns, resource_version=start, label_selector="app=x", timeout_seconds=20
        ),
        2,
    )
    assert [e.type for e in events] == ["DELETED", "ADDED"]


# ----------------------------------------------------------------------------- finalizers


async def test_finalizers_hold_deletion(cluster: Cluster, ns: str) -> None:
    await cluster.create(cm("fin", ns, metadata={"finalizers": ["example.com/hold"]}))
    await cluster.delete("ConfigMap", "fin", ns)
    held = await cluster.get("ConfigMap", "fin", ns)
    assert isinstance(held, dict)
    assert held["metadata"]["deletionTimestamp"]
    assert held["metadata"]["finalizers"] == ["example.com/hold"]
    with pytest.raises(Invalid) as info:
        await cluster.patch(
            "ConfigMap",
            "fin",
            {"metadata": {"finalizers": ["example.com/hold", "example.com/new"]}},
            ns,
        )
    assert [c.path for c in info.value.causes] == ["metadata.finalizers"]
    await cluster.patch("ConfigMap", "fin", {"metadata": {"finalizers": None}}, ns)
    await eventually(lambda: exists(cluster, "ConfigMap", "fin", ns), lambda e: not e)


# ----------------------------------------------------------------------------- patches


async def test_patch_types(cluster: Cluster, ns: str) -> None:
    await cluster.create(cm("pt", ns, data={"a": "1", "b": "2"}, metadata={"labels": {"x": "1"}}))
    merged = await cluster.patch("ConfigMap", "pt", {"data": {"a": None, "c": "3"}}, ns)
    assert isinstance(merged, dict) and merged["data"] == {"b": "2", "c": "3"}
    jp = await cluster.patch(
        "ConfigMap",
        "pt",
        [
            {"op": "test", "path": "/data/b", "value": "2"},
            {"op": "replace", "path": "/data/b", "value": "20"},
            {"op": "add", "path": "/metadata/labels/y", "value": "2"},
        ],
        ns,
        patch_type="json",
    )
    assert isinstance(jp, dict)
    assert jp["data"] == {"b": "20", "c": "3"} and jp["metadata"]["labels"] == {"x": "1", "y": "2"}
    with pytest.raises(ApiError):
        await cluster.patch(
            "ConfigMap",
            "pt",
            [{"op": "test", "path": "/data/b", "value": "nope"}],
            ns,
            patch_type="json",
        )
    sp = await cluster.patch(
        "ConfigMap",
        "pt",
        {"metadata": {"labels": {"x": None, "z": "3"}}},
        ns,
        patch_type="strategic",
    )
    assert isinstance(sp, dict) and sp["metadata"]["labels"] == {"y": "2", "z": "3"}


async def test_strategic_merge_of_conditions(cluster: Cluster, ns: str) -> None:
    await cluster.create(pod("sm", ns))
    await cluster.bind(ns, "sm", "node-1")
    ready = {"type": "Ready", "status": "False", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    out = await cluster.patch(
        "Pod",
        "sm",
        {"status": {"conditions": [ready]}},
        ns,
        patch_type="strategic",
        subresource="status",
    )
    assert isinstance(out, dict)
    types = sorted(c["type"] for c in out["status"]["conditions"])
    assert types == ["PodScheduled", "Ready"]


async def test_server_side_apply(cluster: Cluster, ns: str) -> None:
    cfg = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa", "namespace": ns}}
    await cluster.patch(
        "ConfigMap",
        "ssa",
        {**cfg, "data": {"x": "1", "y": "2"}},
        ns,
        patch_type="apply",
        field_manager="alpha",
    )
    out = await cluster.patch(
        "ConfigMap",
        "ssa",
        {**cfg, "data": {"x": "1"}},
        ns,
        patch_type="apply",
        field_manager="alpha",
    )
    assert isinstance(out, dict) and out["data"] == {"x": "1"}
    with pytest.raises(Conflict):
        await cluster.patch(
            "ConfigMap",
            "ssa",
            {**cfg, "data": {"x": "3"}},
            ns,
            patch_type="apply",
            field_manager="beta",
        )
    forced = await cluster.patch(
        "ConfigMap",
        "ssa",
        {**cfg, "data": {"x": "3"}},
        ns,
        patch_type="apply",
        field_manager="beta",
        force=True,
    )
    assert isinstance(forced, dict) and forced["data"] == {"x": "3"}


async def test_dry_run_or_rejected_apply_keeps_field_ownership(cluster: Cluster, ns: str) -> None:
    hold = "example.com/hold"
    meta = {"name": "own", "namespace": ns}
    await cluster.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {**meta, "finalizers": [hold]}}
    )

    async def apply(manager: str, value: str, **kw: Any) -> KubeObject:
        cfg = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": dict(meta)}
        cfg.update(kw.pop("extra", {}))
        return await cluster.patch(
            "ConfigMap",
            "own",
            {**cfg, "data": {"k": value}},
            ns,
            patch_type="apply",
            field_manager=manager,
            **kw,
        )

    await apply("alice", "a")
    # a forced dry run would take data.k from alice if it were real
    dry = await apply("bob", "b", force=True, dry_run=True)
    assert isinstance(dry, dict) and dry["data"] == {"k": "b"}
    out = await apply("alice", "c")  # alice still owns data.k alone: no conflict
    assert isinstance(out, dict) and out["data"] == {"k": "c"}
    await cluster.delete("ConfigMap", "own", ns)  # held by the finalizer
    with pytest.raises(Invalid):  # no new finalizers on an object being deleted
        await apply("bob", "b", force=True, extra={"metadata": {**meta, "finalizers": ["x.io/y"]}})
    out = await apply("alice", "d")  # the rejected forced apply took nothing from alice
    assert isinstance(out, dict) and out["data"] == {"k": "d"}
    await cluster.patch("ConfigMap", "own", {"metadata": {"finalizers": None}}, ns)
    assert not await exists(cluster, "ConfigMap", "own", ns)


# ----------------------------------------------------------------------------- pods


async def test_binding(cluster: Cluster, ns: str) -> None:
    created = await cluster.create(pod("b", ns))
    assert isinstance(created, dict)
    assert created["status"]["phase"] == "Pending"
    await cluster.bind(ns, "b", "node-1", pod_uid=created["metadata"]["uid"])
    got = await cluster.get("Pod", "b", ns)
    assert isinstance(got, dict)
    assert got["spec"]["nodeName"] == "node-1"
    scheduled = [c for c in got["status"].get("conditions", []) if c["type"] == "PodScheduled"]
    assert [c["status"] for c in scheduled] == ["True"]
    with pytest.raises(Conflict):
        await cluster.bind(ns, "b", "node-2")
    await cluster.create(pod("b2", ns))
    with pytest.raises(Conflict):
        await cluster.bind(ns, "b2", "node-1", pod_uid="not-the-uid")
    with pytest.raises(NotFound):
        await cluster.bind(ns, "nope", "node-1")


async def test_pod_priority_from_class(cluster: Cluster, ns: str) -> None:
    pc_name = f"wb-{uuid.uuid4().hex[:8]}"
    await cluster.create(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": pc_name},
            "value": 1234,
            "preemptionPolicy": "Never",
        }
    )
    try:
        await priority_class_admitted(cluster, ns, pc_name)
        p = await cluster.create(pod("prio", ns, priorityClassName=pc_name))
        assert isinstance(p, dict)
        assert p["spec"]["priority"] == 1234
        assert p["spec"]["preemptionPolicy"] == "Never"
        g = await cluster.create(
            pod_group("prio-g", ns, priority_class_name=pc_name, preemption_policy="Never")
        )
        assert isinstance(g, PodGroup)
        assert (g.spec.priority, g.spec.preemption_policy) == (1234, "Never")
        # PodGroup preemptionPolicy is defaulted before the Priority admission plugin runs, so
        # a class with preemptionPolicy Never needs it spelled out
        with pytest.raises(Forbidden):
            await cluster.create(pod_group("prio-g1", ns, priority_class_name=pc_name))
        with pytest.raises(Forbidden):
            await cluster.create(pod_group("prio-g3", ns, priority=5))
        with pytest.raises(Forbidden):
            await cluster.create(pod("prio2", ns, priorityClassName="no-such-class"))
        with pytest.raises(Forbidden):
            await cluster.create(pod_group("prio-g2", ns, priority_class_name="no-such-class"))
    finally:
        await cluster.delete("PriorityClass", pc_name)


async def test_evict_pending_pod(cluster: Cluster, ns: str) -> None:
    await cluster.create(pod("ev", ns))
    await cluster.evict(ns, "ev")
    await eventually(lambda: exists(cluster, "Pod", "ev", ns), lambda e: not e)
    with pytest.raises(NotFound):
        await cluster.evict(ns, "ev")


async def test_create_event(cluster: Cluster, ns: str) -> None:
    target = await cluster.create(cm("evt-target", ns))
    m = meta(target)
    await cluster.create_event(
        namespace=ns,
        involved_object={
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": m["name"],
            "namespace": ns,
            "uid": m["uid"],
            "fieldPath": "data",
        },
        reason="Tested",
        message="hello",
        type="Warning",
    )
    events = await cluster.list("Event", ns, field_selector="involvedObject.name=evt-target")
    assert len(events.items) == 1
    ev = events.items[0]
    assert isinstance(ev, dict)
    assert (ev["reason"], ev["message"], ev["type"]) == ("Tested", "hello", "Warning")
    assert ev["involvedObject"]["fieldPath"] == "data"


# ----------------------------------------------------------------------------- our kinds


async def test_pod_group_defaults_and_protection_finalizer(cluster: Cluster, ns: str) -> None:
    pg = await cluster.create(pod_group("defaults", ns))
    assert isinstance(pg, PodGroup)
    assert pg.spec.disruption_mode is not None and pg.spec.disruption_mode.single is not None
    assert pg.spec.priority == 0
    assert "scheduling.k8s.io/podgroup-protection" in pg.metadata.finalizers
    assert pg.api_version == "scheduling.k8s.io/v1beta1"


async def test_admission_rejects_invalid_workload(cluster: Cluster, ns: str) -> None:
    bad = Workload(
        metadata=ObjectMeta(name="bad", namespace=ns),
        spec=WorkloadSpec(
            pod_group_templates=(
                PodGroupTemplate(
                    name="Bad_Name",
                    scheduling_policy=PodGroupSchedulingPolicy(
                        gang=GangSchedulingPolicy(min_count=2)
                    ),
                ),
            )
        ),
    )
    with pytest.raises(Invalid) as info:
        await cluster.create(bad)
    paths = {c.path for c in info.value.causes}
    assert "spec.podGroupTemplates[0].name" in paths
    assert 'Workload.scheduling.k8s.io "bad" is invalid' in str(info.value)
    assert not await exists(cluster, "Workload", "bad", ns)


async def test_admission_rejects_invalid_pod_group(cluster: Cluster, ns: str) -> None:
    bad = PodGroup(
        metadata=ObjectMeta(name="bad-pg", namespace=ns),
        spec=PodGroupSpec(scheduling_policy=PodGroupSchedulingPolicy()),
    )
    with pytest.raises(Invalid) as info:
        await cluster.create(bad)
    assert any(c.path.startswith("spec.schedulingPolicy") for c in info.value.causes)
    good = await cluster.create(pod_group("good-pg", ns))
    assert isinstance(good, PodGroup)
    # the scheduling policy cannot switch from gang to basic
    basic = PodGroupSchedulingPolicy(basic=attrs.evolve(_basic()))
    with pytest.raises(Invalid) as upd:
        await cluster.update(
            attrs.evolve(good, spec=attrs.evolve(good.spec, scheduling_policy=basic))
        )
    assert any(c.path.startswith("spec.schedulingPolicy") for c in upd.value.causes)


@pytest.mark.parametrize("min_count", [2147483648, "3"])
async def test_undecodable_pod_group_is_a_bad_request(
    cluster: Cluster, ns: str, min_count: Any
) -> None:
    """A body the server cannot decode (int32 overflow, a string for a number) is a 400
    BadRequest, not a 422 Invalid; a missing required field is Invalid."""
    doc = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "undecodable", "namespace": ns},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    }
    with pytest.raises(BadRequest) as info:
        await cluster.create(doc)
    assert info.value.status == 400
    assert "PodGroup" in str(info.value)
    doc["spec"] = {}
    with pytest.raises(Invalid) as inv:
        await cluster.create(doc)
    assert [c.path for c in inv.value.causes] == ["spec.schedulingPolicy"]


def _basic() -> Any:
    from workloadbuilder.api import BasicSchedulingPolicy

    return BasicSchedulingPolicy()


# ----------------------------------------------------------------------------- GC + protection


def _owner_ref(owner: KubeObject, *, block: bool = False) -> dict[str, Any]:
    m = meta(owner)
    ref: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": m["name"],
        "uid": m["uid"],
    }
    if block:
        ref["blockOwnerDeletion"] = True
    return ref


async def test_gc_background(gc_cluster: Cluster, gc_ns: str) -> None:
    c, ns = gc_cluster, gc_ns
    owner = await c.create(cm("owner", ns))
    await c.create(cm("dep", ns, metadata={"ownerReferences": [_owner_ref(owner)]}))
    await c.delete("ConfigMap", "owner", ns, propagation_policy="Background")
    await eventually(lambda: exists(c, "ConfigMap", "dep", ns), lambda e: not e)


async def test_gc_orphan(gc_cluster: Cluster, gc_ns: str) -> None:
    c, ns = gc_cluster, gc_ns
    owner = await c.create(cm("owner", ns))
    await c.create(cm("dep", ns, metadata={"ownerReferences": [_owner_ref(owner)]}))
    await c.delete("ConfigMap", "owner", ns, propagation_policy="Orphan")
    await eventually(lambda: exists(c, "ConfigMap", "owner", ns), lambda e: not e)
    dep = await c.get("ConfigMap", "dep", ns)
    assert isinstance(dep, dict)
    assert not dep["metadata"].get("ownerReferences")


async def test_gc_foreground_waits_for_blocking_dependents(gc_cluster: Cluster, gc_ns: str) -> None:
    c, ns = gc_cluster, gc_ns
    owner = await c.create(cm("owner", ns))
    await c.create(
        cm(
            "dep",
            ns,
            metadata={
                "ownerReferences": [_owner_ref(owner, block=True)],
                "finalizers": ["example.com/hold"],
            },
        )
    )
    await c.delete("ConfigMap", "owner", ns, propagation_policy="Foreground")
    held = await c.get("ConfigMap", "owner", ns)
    assert "foregroundDeletion" in meta(held)["finalizers"]
    assert meta(held)["deletionTimestamp"]
    dep = await eventually(
        lambda: c.get("ConfigMap", "dep", ns), lambda d: bool(meta(d).get("deletionTimestamp"))
    )
    assert await exists(c, "ConfigMap", "owner", ns)
    assert meta(dep)["finalizers"] == ["example.com/hold"]
    await c.patch("ConfigMap", "dep", {"metadata": {"finalizers": None}}, ns)
    await eventually(lambda: exists(c, "ConfigMap", "owner", ns), lambda e: not e)
    assert not await exists(c, "ConfigMap", "dep", ns)


async def test_pod_group_protection(gc_cluster: Cluster, gc_ns: str) -> None:
    c, ns = gc_cluster, gc_ns
    await c.create(pod_group("prot", ns))
    await c.create(pod("member", ns, group="prot"))
    await c.delete("PodGroup", "prot", ns)
    held = await c.get("PodGroup", "prot", ns)
    assert meta(held)["deletionTimestamp"]
    # v1.37.2 admits new members of a PodGroup that is being deleted
    await c.create(pod("late", ns, group="prot"))
    await c.delete("Pod", "late", ns)
    member = await c.get("Pod", "member", ns)
    assert isinstance(member, dict)
    await c.update_status({**member, "status": {**member["status"], "phase": "Succeeded"}})
    await eventually(lambda: exists(c, "PodGroup", "prot", ns), lambda e: not e)


# ----------------------------------------------------------------------------- informers


async def test_informer_sees_every_change_once(cluster: Cluster, ns: str) -> None:
    await cluster.create(pod("i0", ns, group="g1"))
    log: list[tuple[str, str]] = []
    inf = Informer(cluster, "Pod", ns, indexers={"group": pods_by_pod_group}, watch_timeout=2)

    async def on_update(old: KubeObject, new: KubeObject) -> None:
        log.append(("update", meta(new)["name"]))

    inf.add_handler(
        on_add=lambda o: log.append(("add", meta(o)["name"])),
        on_update=on_update,
        on_delete=lambda o: log.append(("delete", meta(o)["name"])),
    )
    await inf.start()
    try:
        await inf.wait_synced(timeout=30)
        assert inf.synced
        assert log == [("add", "i0")]
        await cluster.create(pod("i1", ns, group="g1"))
        await cluster.bind(ns, "i1", "node-1")
        await cluster.delete("Pod", "i0", ns)
        await cluster.create(pod("i2", ns, group="g2"))
        await eventually(lambda: _ret(list(log)), lambda entries: len(entries) >= 6)
        assert log == [
            ("add", "i0"),
            ("add", "i1"),
            ("update", "i1"),  # bound
            ("update", "i0"),  # deletionTimestamp set
            ("delete", "i0"),
            ("add", "i2"),
        ]
        assert sorted(names(inf.by_index("group", f"{ns}/g1"))) == ["i1"]
        cached = inf.get("i1", ns)
        assert isinstance(cached, dict) and cached["spec"]["nodeName"] == "node-1"
        # the watch (timeout 2 s) is resumed from the last version without duplicates
        await cluster.create(pod("i3", ns))
        await eventually(lambda: _ret(list(log)), lambda entries: len(entries) >= 7)
        assert log[6:] == [("add", "i3")]
    finally:
        await inf.stop()


async def _ret(value: T) -> T:
    return value


async def test_match_label_keys_are_merged_into_selectors_at_create(
    cluster: Cluster, ns: str
) -> None:
    """The pod strategy (both gates on in v1.37): matchLabelKeys become ``In``,
    mismatchLabelKeys ``NotIn`` requirements with the pod's own values; keys the pod lacks and
    terms without a labelSelector are left alone."""
    term = {
        "labelSelector": {"matchLabels": {"app": "w"}},
        "topologyKey": "kubernetes.io/hostname",
        "matchLabelKeys": ["job", "missing"],
        "mismatchLabelKeys": ["team"],
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": ns,
            "labels": {"app": "w", "job": "j1", "team": "a"},
        },
        "spec": {
            "containers": [{"name": "c", "image": "busybox"}],
            "affinity": {
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]},
                "podAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 1, "podAffinityTerm": {**term, "mismatchLabelKeys": []}}
                    ]
                },
            },
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": "zone",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "w"}},
                    "matchLabelKeys": ["job"],
                }
            ],
        },
    }
    got = await cluster.create(pod)
    assert isinstance(got, dict)
    spec = got["spec"]
    anti = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert anti[0]["labelSelector"]["matchExpressions"] == [
        {"key": "job", "operator": "In", "values": ["j1"]},
        {"key": "team", "operator": "NotIn", "values": ["a"]},
    ]
    pref = spec["affinity"]["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert pref[0]["podAffinityTerm"]["labelSelector"]["matchExpressions"] == [
        {"key": "job", "operator": "In", "values": ["j1"]}
    ]
    assert spec["topologySpreadConstraints"][0]["labelSelector"]["matchExpressions"] == [
        {"key": "job", "operator": "In", "values": ["j1"]}
    ]
