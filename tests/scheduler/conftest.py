"""Fixtures for the scheduler behaviour tests: one ``env`` per test on MemoryCluster and on the
real v1.37.2 API server (fake Nodes, no kubelets)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from sched_helpers import Env

from workloadbuilder.cluster import Cluster
from workloadbuilder.runtime import ManualClock
from workloadbuilder.testing import ControlPlane


@pytest.fixture(scope="session")
def scheduler_plane(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """A control plane of the scheduler suite's own: the scheduler caches every Node and Pod of
    the cluster, so Nodes and pods other suites leave on the shared plane would change what it
    sees (node counts in explanations, free capacity)."""
    with ControlPlane(bin_dir=control_plane.bin_dir) as plane:
        yield plane


@pytest.fixture(params=["memory", pytest.param("kube", marks=pytest.mark.controlplane)])
async def env(request: pytest.FixtureRequest) -> AsyncIterator[Env]:
    """The same behaviour on MemoryCluster and on the real API server."""
    if request.param == "memory":
        from workloadbuilder.cluster import MemoryCluster

        cluster: Cluster = MemoryCluster()
        e = Env(cluster, "default", "memory")
    else:
        from workloadbuilder.cluster import KubeCluster

        cp = request.getfixturevalue("scheduler_plane")
        namespace = cp.create_namespace("sched-")
        cluster = KubeCluster.from_kubeconfig(cp.kubeconfig)
        e = Env(cluster, namespace, "kube")
    try:
        yield e
    finally:
        await e.cleanup()
        await cluster.close()


@pytest.fixture
async def mem_env() -> AsyncIterator[tuple[Env, ManualClock]]:
    """MemoryCluster with a virtual clock shared by cluster and scheduler."""
    from workloadbuilder.cluster import MemoryCluster

    clock = ManualClock()
    cluster = MemoryCluster(clock=clock.now)
    e = Env(cluster, "default", "memory")
    try:
        yield e, clock
    finally:
        await e.cleanup()
        await cluster.close()
