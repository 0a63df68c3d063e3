"""Fixtures of the cluster behaviour suite: one ``cluster`` per implementation.

``cluster`` is parametrised over ``memory`` (:class:`MemoryCluster`) and ``kube``
(``KubeCluster`` on the real v1.37.2 API server of the ``control_plane`` fixture; marked
``controlplane``). ``gc_cluster`` is the same over ``control_plane_kcm`` (the real garbage
collector, namespace and PodGroup protection controllers run in kube-controller-manager).
``ns`` is a fresh Namespace object per test.

The unit tests of KubeCluster's request path (:data:`BOTH_LOOPS`) run on both event loops the
components may run on: asyncio's own and uvloop (``workloadbuilder.runtime.run``'s default
when installed); every other test here runs on asyncio's.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import pytest

from workloadbuilder.cluster import Cluster, MemoryCluster
from workloadbuilder.errors import NotFound

#: test files whose async tests run once per event loop (the transport, TLS, the loader, the
#: watches' stall bounds)
BOTH_LOOPS = frozenset(
    {
        "test_transport.py",
        "test_http_proxy.py",
        "test_kube_unit.py",
        "test_kube_session.py",
        "test_kubeconfig.py",
        "test_kube_watch_stall.py",
    }
)


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
    """asyncio and uvloop for :data:`BOTH_LOOPS`, asyncio for the rest (uvloop is a
    dependency where it builds; tests/unit/test_eventloop.py checks that it is installed)."""
    factories: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
        "asyncio": asyncio.new_event_loop
    }
    if item.path.name in BOTH_LOOPS and importlib.util.find_spec("uvloop") is not None:
        import uvloop

        factories["uvloop"] = uvloop.new_event_loop
    return factories


async def _open_kube(plane: Any) -> Cluster:
    from workloadbuilder.cluster import KubeCluster

    cluster = KubeCluster.from_kubeconfig(plane.kubeconfig)
    await cluster.open()
    return cluster


@pytest.fixture(
    params=["memory", pytest.param("kube", marks=pytest.mark.controlplane)],
)
async def cluster(request: pytest.FixtureRequest) -> AsyncIterator[Cluster]:
    """A Cluster: MemoryCluster or KubeCluster against the real API server."""
    if request.param == "memory":
        mem = MemoryCluster()
        yield mem
        await mem.close()
        return
    plane = request.getfixturevalue("control_plane")
    kube = await _open_kube(plane)
    yield kube
    await kube.close()


@pytest.fixture(
    params=[
        "memory",
        pytest.param("kube", marks=[pytest.mark.controlplane, pytest.mark.controllermanager]),
    ],
)
async def gc_cluster(request: pytest.FixtureRequest) -> AsyncIterator[Cluster]:
    """A Cluster whose garbage collection / PodGroup protection run (KCM on kube)."""
    if request.param == "memory":
        mem = MemoryCluster()
        yield mem
        await mem.close()
        return
    plane = request.getfixturevalue("control_plane_kcm")
    kube = await _open_kube(plane)
    yield kube
    await kube.close()


async def _make_namespace(c: Cluster) -> AsyncIterator[str]:
    name = f"wb-{uuid.uuid4().hex[:10]}"
    await c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    with contextlib.suppress(NotFound):
        await c.delete("Namespace", name)


@pytest.fixture
async def ns(cluster: Cluster) -> AsyncIterator[str]:
    """A fresh namespace in ``cluster``."""
    async for name in _make_namespace(cluster):
        yield name


@pytest.fixture
async def gc_ns(gc_cluster: Cluster) -> AsyncIterator[str]:
    """A fresh namespace in ``gc_cluster``."""
    async for name in _make_namespace(gc_cluster):
        yield name
