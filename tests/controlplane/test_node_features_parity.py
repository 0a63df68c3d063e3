"""Upstream is the oracle for NodeDeclaredFeatures: the same objects through kube-scheduler
v1.37.2 and through ours (two control planes), comparing which node each pod lands on, the
pending pod's PodScheduled status, reason and Filter message, and what happens when a node
starts declaring the feature.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from controlplane._parity import UPSTREAM, ParitySide, both, parity_sides, until
from workloadbuilder.testing import ControlPlane
from workloadbuilder.testing.builders import make_pod

pytestmark = [pytest.mark.controlplane]

OURS = "wb-node-features"
FEATURE = "RestartAllContainersOnContainerExits"
TIMEOUT = 30.0


class Side(ParitySide):
    def __init__(self, name: str, plane: ControlPlane, scheduler_name: str) -> None:
        super().__init__(name, plane, scheduler_name, "features")

    async def declare(self, node: str, *features: str) -> None:
        await self.cluster.patch(
            "Node",
            self.full(node),
            {"status": {"declaredFeatures": list(features)}},
            subresource="status",
        )

    async def restart_all_pod(self, name: str) -> None:
        obj = (
            make_pod(name, self.namespace)
            .scheduler_name(self.scheduler_name)
            .request("cpu", "1")
            .request("memory", "1Gi")
            .obj()
        )
        c = obj["spec"]["containers"][0]
        c["restartPolicy"] = "Never"
        c["restartPolicyRules"] = [
            {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}
        ]
        await self.cluster.create(obj)

    async def node_of(self, pod: str) -> str | None:
        obj = (await self.pods())[pod]
        node = obj["spec"].get("nodeName")
        return None if node is None else str(node)[len(self.namespace) + 1 :]


@pytest.fixture
async def sides(
    upstream_plane: ControlPlane, our_plane: ControlPlane
) -> AsyncIterator[tuple[Side, Side]]:
    async with parity_sides(
        Side("upstream", upstream_plane, UPSTREAM), Side("ours", our_plane, OURS)
    ) as pair:
        yield pair


async def test_restart_all_containers_needs_a_declaring_node(sides: tuple[Side, Side]) -> None:
    """Nodes a (declares nothing) and b (declares another feature): the pod stays pending with
    the plugin's reason; once b declares the feature, the pod lands on b."""

    async def scenario(s: Side) -> tuple[tuple[str, str, str] | None, str | None]:
        await s.node("a")
        await s.node("b")
        await s.declare("b", "VolumeBindMountOptions")
        await s.restart_all_pod("p")

        async def pending() -> tuple[str, str, str] | None:
            cond = await s.scheduled("p")
            return cond if cond is not None and cond[0] == "False" else None

        cond = await until(pending, f"{s.name}: p pending", timeout=TIMEOUT, interval=0.2)
        await s.declare("b", FEATURE)

        async def placed() -> str | None:
            return await s.node_of("p")

        return cond, await until(placed, f"{s.name}: p bound", timeout=TIMEOUT, interval=0.2)

    (up_cond, up_node), (our_cond, our_node) = await both(sides, scenario)
    print(f"\nupstream: {up_cond} {up_node}\nours: {our_cond} {our_node}")
    assert up_node == our_node == "b"
    assert up_cond is not None and our_cond is not None
    assert up_cond[:2] == our_cond[:2] == ("False", "Unschedulable")
    reason = "2 node(s) didn't match Pod's required features"
    assert reason in up_cond[2] and reason in our_cond[2]
