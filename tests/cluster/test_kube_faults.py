"""Fault tests: KubeCluster (and an Informer over it) behind a fault-injecting proxy in front
of the real v1.37.2 API server.

The proxy (``_faultproxy.py``) injects 429 (with Retry-After), 500/503, stalls longer than
the client timeout, connection resets, and cuts or stalls watch streams mid-event. Writes
that define the expected history go straight to the server; readers go through the proxy.
The readers must see every change exactly once, in order, and never crash.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from _faultproxy import FaultPlan, FaultProxy  # tests/cluster is on sys.path (rootdir-relative)
from kubernetes_asyncio.client import Configuration

from workloadbuilder.api import PodGroup
from workloadbuilder.cluster import KubeCluster, KubeObject, RetryPolicy
from workloadbuilder.errors import ApiError, Gone, NotFound

pytestmark = pytest.mark.controlplane

Event = tuple[str, str, str | None]  # (type, name, resourceVersion; None for DELETED)


@pytest.fixture
async def direct(control_plane: Any) -> AsyncIterator[KubeCluster]:
    cluster = KubeCluster.from_kubeconfig(control_plane.kubeconfig)
    try:
        yield cluster
    finally:
        await cluster.close()


@pytest.fixture
async def ns(direct: KubeCluster) -> AsyncIterator[str]:
    name = f"faults-{uuid.uuid4().hex[:8]}"
    await direct.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    with contextlib.suppress(NotFound):
        await direct.delete("Namespace", name)


@pytest.fixture
async def proxy(control_plane: Any) -> AsyncIterator[FaultProxy]:
    fp = FaultProxy.in_front_of(control_plane.server, control_plane.kubeconfig, seed=4)
    await fp.start()
    try:
        yield fp
    finally:
        await fp.stop()


@pytest.fixture
async def faulty(proxy: FaultProxy) -> AsyncIterator[KubeCluster]:
    cluster = KubeCluster(
        Configuration(host=proxy.url),
        retry=RetryPolicy(max_attempts=12, initial_backoff=0.02, max_backoff=0.3),
        request_timeout=1.0,
        connect_timeout=2.0,
        watch_idle_timeout=1.5,
    )
    try:
        yield cluster
    finally:
        await cluster.close()


READ_FAULTS = FaultPlan(
    p_429=0.15,
    retry_after=(0, 1),
    p_5xx=0.15,
    p_stall=0.05,
    stall_seconds=2.0,
    p_reset=0.1,
    watch_cut_after=(0, 4),
    p_watch_stall=0.25,
)


def _cm(name: str, ns: str, value: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns},
        "data": {"v": value},
    }


def _rv(obj: KubeObject) -> str:
    if isinstance(obj, dict):
        return str(obj["metadata"]["resourceVersion"])
    return str(obj.metadata.resource_version)


def _name(obj: KubeObject) -> str:
    if isinstance(obj, dict):
        return str(obj["metadata"]["name"])
    return str(obj.metadata.name)


async def _write_history(
    direct: KubeCluster,
    ns: str,
    proxy: FaultProxy,
    *,
    objects: int = 6,
    rounds: int = 3,
) -> list[Event]:
    """Create, update and delete ConfigMaps straight on the server; return the events a
    watcher must see, in order. Watches through the proxy are also cut now and then."""
    expected: list[Event] = []
    names = [f"cm-{i}" for i in range(objects)]
    for name in names:
        created = await direct.create(_cm(name, ns, "0"))
        expected.append(("ADDED", name, _rv(created)))
    for r in range(1, rounds + 1):
        for name in names:
            patched = await direct.patch("ConfigMap", name, {"data": {"v": str(r)}}, ns)
            expected.append(("MODIFIED", name, _rv(patched)))
        proxy.drop_watches()
        await asyncio.sleep(0)  # let the watchers notice
    for name in names[::2]:
        await direct.delete("ConfigMap", name, ns)
        expected.append(("DELETED", name, None))
    sentinel = await direct.create(_cm("zz-sentinel", ns, "end"))
    expected.append(("ADDED", "zz-sentinel", _rv(sentinel)))
    return expected


async def _wait_for(cond: Callable[[], bool], what: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def test_watch_resumed_through_faults_sees_every_event_once(
    direct: KubeCluster, ns: str, proxy: FaultProxy, faulty: KubeCluster
) -> None:
    start = await direct.list("ConfigMap", ns)
    proxy.plan = READ_FAULTS
    seen: list[Event] = []
    errors: list[BaseException] = []
    restarts = 0

    async def watcher() -> None:
        nonlocal restarts
        rv = start.resource_version
        while True:
            try:
                async for ev in faulty.watch("ConfigMap", ns, resource_version=rv):
                    rv = _rv(ev.object)
                    if ev.type != "BOOKMARK":
                        name = _name(ev.object)
                        seen.append((ev.type, name, None if ev.type == "DELETED" else rv))
            except Gone as e:  # would make exactly-once impossible: fail the test
                errors.append(e)
                return
            except ApiError:
                pass  # retries exhausted for this attempt; a caller simply tries again
            restarts += 1

    task = asyncio.create_task(watcher())
    try:
        expected = await _write_history(direct, ns, proxy)
        await _wait_for(
            lambda: bool(errors) or ("ADDED", "zz-sentinel", expected[-1][2]) in seen,
            "the sentinel event",
        )
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    print(f"faults: {dict(proxy.counts)}; watch restarts: {restarts}")
    assert errors == []
    assert seen == expected  # nothing lost, nothing twice, in order
    injected = sum(proxy.counts[k] for k in ("429", "500", "503", "stall", "reset"))
    assert injected > 0
    assert restarts > 0  # the stream really was cut / stalled and resumed


async def test_informer_over_faulty_cluster_never_loses_or_duplicates(
    direct: KubeCluster, ns: str, proxy: FaultProxy, faulty: KubeCluster
) -> None:
    from workloadbuilder.cluster import Informer

    proxy.plan = READ_FAULTS
    informer = Informer(faulty, "ConfigMap", ns, watch_timeout=20, relist_backoff=0.1)
    groups = Informer(faulty, "PodGroup", ns, watch_timeout=20, relist_backoff=0.1)
    seen: list[Event] = []
    group_seen: list[tuple[str, str, str]] = []

    def on_add(obj: KubeObject) -> None:
        seen.append(("ADDED", _name(obj), _rv(obj)))

    def on_update(old: KubeObject, new: KubeObject) -> None:
        assert _name(old) == _name(new)
        seen.append(("MODIFIED", _name(new), _rv(new)))

    def on_delete(obj: KubeObject) -> None:
        seen.append(("DELETED", _name(obj), None))

    async def on_group(obj: KubeObject, new: KubeObject | None = None) -> None:
        latest = new if new is not None else obj
        assert isinstance(latest, PodGroup)  # typed models through the informer too
        group_seen.append(("ADDED" if new is None else "MODIFIED", _name(latest), _rv(latest)))

    informer.add_handler(on_add=on_add, on_update=on_update, on_delete=on_delete)
    groups.add_handler(on_add=on_group, on_update=on_group)
    await informer.start()
    await groups.start()
    try:
        await informer.wait_synced(timeout=60)
        await groups.wait_synced(timeout=60)
        assert seen == []  # empty namespace
        group_expected: list[tuple[str, str, str]] = []
        for i in range(3):
            pg = await direct.create(
                {
                    "apiVersion": "scheduling.k8s.io/v1beta1",
                    "kind": "PodGroup",
                    "metadata": {"name": f"pg-{i}", "namespace": ns},
                    "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}},
                }
            )
            group_expected.append(("ADDED", f"pg-{i}", _rv(pg)))
            pg = await direct.patch(
                "PodGroup", f"pg-{i}", {"metadata": {"labels": {"round": "1"}}}, ns
            )
            group_expected.append(("MODIFIED", f"pg-{i}", _rv(pg)))
        expected = await _write_history(direct, ns, proxy)
        await _wait_for(
            lambda: (
                ("ADDED", "zz-sentinel", expected[-1][2]) in seen
                and len(group_seen) >= len(group_expected)
            ),
            "the informers to catch up",
        )
        # The informers' tasks are alive: the faults never escaped into the caller.
        for inf in (informer, groups):
            assert inf._task is not None
            assert not inf._task.done()
        assert seen == expected
        assert group_seen == group_expected
        cached = sorted((_name(o), _rv(o)) for o in informer.list())
        listed = await direct.list("ConfigMap", ns)
        assert cached == sorted((_name(o), _rv(o)) for o in listed.items)
        assert informer.list_count == 1  # resumed every time, never had to relist
        print(f"faults: {dict(proxy.counts)}")
    finally:
        await informer.stop()
        await groups.stop()
    injected = sum(proxy.counts[k] for k in ("429", "500", "503", "stall", "reset"))
    assert injected > 0


async def test_requests_through_faults_succeed_or_fail_typed(
    direct: KubeCluster, ns: str, proxy: FaultProxy, faulty: KubeCluster
) -> None:
    """429/5xx/stalls are absorbed by retries (5xx and stalls only hit idempotent requests,
    as a server could answer them after running a create); creates are never duplicated."""
    proxy.plan = FaultPlan(p_429=0.2, retry_after=(0,), p_5xx=0.15, p_stall=0.05)
    ops: list[Callable[[], Awaitable[Any]]] = []
    for i in range(8):
        name = f"w-{i}"
        ops += [
            functools.partial(faulty.create, _cm(name, ns, "0")),
            functools.partial(faulty.get, "ConfigMap", name, ns),
            functools.partial(faulty.patch, "ConfigMap", name, {"data": {"v": "1"}}, ns),
            functools.partial(
                faulty.patch,
                "ConfigMap",
                name,
                _cm(name, ns, "2"),
                ns,
                patch_type="apply",
                field_manager="t",
                force=True,
            ),
        ]
    for op in ops:
        await op()  # every one succeeds despite the faults
    page = await faulty.list("ConfigMap", ns)
    mine = sorted(_name(o) for o in page.items if _name(o).startswith("w-"))
    assert mine == [f"w-{i}" for i in range(8)]
    for i in range(0, 8, 2):
        await faulty.delete("ConfigMap", f"w-{i}", ns)
    left = await direct.list("ConfigMap", ns)
    assert sorted(_name(o) for o in left.items if _name(o).startswith("w-")) == [
        f"w-{i}" for i in range(1, 8, 2)
    ]
    assert proxy.counts["429"] > 0

    # With resets as well, a caller gets either a result or a typed ApiError, nothing else.
    proxy.plan = FaultPlan(p_429=0.2, retry_after=(0,), p_reset=0.3)
    outcomes: list[str] = []
    for i in range(10):
        try:
            await faulty.create(_cm(f"r-{i}", ns, "0"))
            outcomes.append("ok")
        except ApiError as e:
            assert e.reason == "ConnectionError"  # a reset POST is not retried
            outcomes.append("error")
    created = await direct.list("ConfigMap", ns)
    names = {_name(o) for o in created.items}
    for i, outcome in enumerate(outcomes):
        # the proxy resets before forwarding: a failed create did not happen
        assert (f"r-{i}" in names) == (outcome == "ok")
    print(f"faults: {dict(proxy.counts)}; create outcomes: {outcomes}")
    assert outcomes.count("error") == proxy.counts["reset"]  # no POST retried after a reset
