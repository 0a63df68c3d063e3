"""Fixtures of the cluster behaviour suite: one ``cluster`` per implementation.

``cluster`` is parametrised over ``memory`` (:class:`MemoryCluster`) and ``kube``
(``KubeCluster`` on the real v1.37.2 API server of the ``control_plane`` fixture; marked
``controlplane``). ``gc_cluster`` is the same over ``control_plane_kcm`` (the real garbage
collector, namespace and PodGroup protection controllers run in kube-controller-manager).
``ns`` is a fresh Namespace object per test.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from workloadbuilder.cluster import Cluster, MemoryCluster
from workloadbuilder.errors import NotFound


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
