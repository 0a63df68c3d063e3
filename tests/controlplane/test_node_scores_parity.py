"""Upstream is the oracle for the node-level Score plugins: the same objects through
kube-scheduler v1.37.2 and through ours (two control planes, as
``test_pod_constraints_parity.py``), each scenario built so that one plugin decides the node
(the others tie or agree), comparing where the pods bind.

Scenarios: preferred node affinity (NodeAffinity), an untolerated ``PreferNoSchedule`` taint
(TaintToleration), cpu/memory balance (NodeResourcesBalancedAllocation), a node that has the
pod's image (ImageLocality), and a gang whose pods prefer one zone and avoid a soft-tainted
node of it (NodeAffinity and TaintToleration in a pod-group cycle).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from controlplane._parity import UPSTREAM, ParitySide, both, parity_sides, until
from workloadbuilder.testing import ControlPlane
from workloadbuilder.testing.builders import make_node, make_pod, make_pod_group

pytestmark = [pytest.mark.controlplane]

OURS = "wb-node-scores"
ZONE = "topology.kubernetes.io/zone"
TIMEOUT = 30.0
MB = 1024 * 1024


class Side(ParitySide):
    """One scheduler under test, with Nodes carrying taints and images."""

    def __init__(self, name: str, plane: ControlPlane, scheduler_name: str) -> None:
        super().__init__(name, plane, scheduler_name, "nodescores")

    async def scored_node(
        self,
        name: str,
        *,
        cpu: str = "4",
        memory: str = "16Gi",
        labels: dict[str, str] | None = None,
        taints: list[dict[str, str]] | None = None,
        images: list[dict[str, Any]] | None = None,
    ) -> str:
        """A fake Ready Node (as :meth:`ParitySide.node`) with taints and ``status.images``."""
        full = self.full(name)
        node = make_node(full).label("kubernetes.io/hostname", full).labels(labels or {})
        node.resources({"cpu": cpu, "memory": memory, "pods": "110"}).ready()
        node.taints(*(taints or ()))
        obj = node.obj()
        status = obj.pop("status")
        if images:
            status["images"] = images
        await self.cluster.create(obj)
        self.track("Node", full)
        await self.cluster.patch("Node", full, {"status": status}, subresource="status")
        return full

    async def pod(
        self,
        name: str,
        group: str | None = None,
        *,
        cpu: str = "1",
        memory: str = "1Gi",
        node: str | None = None,
        image: str | None = None,
        spec: dict[str, Any] | None = None,
    ) -> None:
        p = make_pod(name, self.namespace).scheduler_name(self.scheduler_name)
        if group is not None:
            p.pod_group(group)
        if node is not None:
            p.node_name(self.full(node))
        if image is not None:
            p.image(image)
        obj = p.request("cpu", cpu).request("memory", memory).obj()
        obj["spec"].update(spec or {})
        await self.cluster.create(obj)

    async def settled(self, bound: list[str]) -> dict[str, str]:
        """Wait until the ``bound`` pods are bound; the placement of every bound pod."""

        async def probe() -> dict[str, str] | None:
            placed = await self.placement()
            return placed if all(p in placed for p in bound) else None

        return await until(probe, f"{self.name}: {bound} bound", timeout=TIMEOUT, interval=0.2)


@pytest.fixture
async def sides(
    upstream_plane: ControlPlane, our_plane: ControlPlane
) -> AsyncIterator[tuple[Side, Side]]:
    upstream = Side("upstream", upstream_plane, UPSTREAM)
    ours = Side("ours", our_plane, OURS)
    async with parity_sides(upstream, ours) as pair:
        yield pair


def _prefer(*terms: tuple[int, dict[str, str]]) -> dict[str, Any]:
    return {
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": w,
                        "preference": {
                            "matchExpressions": [
                                {"key": k, "operator": "In", "values": [v]}
                                for k, v in labels.items()
                            ]
                        },
                    }
                    for w, labels in terms
                ]
            }
        }
    }


SOFT = {"key": "dedicated", "value": "batch", "effect": "PreferNoSchedule"}
TOLERATE = {"key": "dedicated", "operator": "Equal", "value": "batch"}


async def test_preferred_node_affinity_decides(sides: tuple[Side, Side]) -> None:
    """Three equal nodes; the pod prefers tier=fast (10) and disk=ssd (20): the node with
    both wins, the one with tier=fast only does not."""

    async def scenario(s: Side) -> dict[str, str]:
        await s.scored_node("a", labels={"tier": "slow"})
        await s.scored_node("b", labels={"tier": "fast"})
        await s.scored_node("c", labels={"tier": "fast", "disk": "ssd"})
        await s.pod("p", spec=_prefer((10, {"tier": "fast"}), (20, {"disk": "ssd"})))
        return await s.settled(["p"])

    up, ours = await both(sides, scenario)
    print(f"\nupstream: {up}\nours: {ours}")
    assert up == ours == {"p": "c"}


async def test_prefer_no_schedule_taint_decides(sides: tuple[Side, Side]) -> None:
    """The larger node (LeastAllocated's and the balance's choice) has an untolerated
    PreferNoSchedule taint: a plain pod goes to the smaller one, a pod tolerating the taint
    (no effect given: every effect) to the larger one."""

    async def scenario(s: Side) -> dict[str, str]:
        await s.scored_node("big", cpu="16", taints=[SOFT])
        await s.scored_node("small", cpu="8")
        await s.pod("plain")
        await s.settled(["plain"])
        await s.pod("tolerating", spec={"tolerations": [TOLERATE]})
        return await s.settled(["plain", "tolerating"])

    up, ours = await both(sides, scenario)
    print(f"\nupstream: {up}\nours: {ours}")
    assert up == ours == {"plain": "small", "tolerating": "big"}


async def test_balanced_allocation_decides(sides: tuple[Side, Side]) -> None:
    """Half of a's cpu and half of b's memory are used (equal LeastAllocated scores): a
    cpu-heavy pod goes to b, where it balances the node."""

    async def scenario(s: Side) -> dict[str, str]:
        await s.scored_node("a", cpu="8", memory="16Gi")
        await s.scored_node("b", cpu="8", memory="16Gi")
        await s.pod("cpu-hog", cpu="4", memory="0", node="a")
        await s.pod("mem-hog", cpu="0", memory="8Gi", node="b")
        await s.pod("p", cpu="2", memory="1Mi")
        return await s.settled(["p"])

    up, ours = await both(sides, scenario)
    print(f"\nupstream: {up}\nours: {ours}")
    assert up["p"] == ours["p"] == "b"


async def test_image_locality_decides(sides: tuple[Side, Side]) -> None:
    """Three equal nodes; only b lists the pod's 2000 MiB image (untagged in the pod: the
    node lists it as :latest)."""

    async def scenario(s: Side) -> dict[str, str]:
        image = f"example.com/{s.namespace}/big"
        await s.scored_node("a")
        await s.scored_node("b", images=[{"names": [f"{image}:latest"], "sizeBytes": 2000 * MB}])
        await s.scored_node("c")
        await s.pod("p", image=image)
        return await s.settled(["p"])

    up, ours = await both(sides, scenario)
    print(f"\nupstream: {up}\nours: {ours}")
    assert up == ours == {"p": "b"}


async def test_a_gang_prefers_a_zone_and_avoids_its_soft_tainted_node(
    sides: tuple[Side, Side],
) -> None:
    """A gang of 2 whose pods prefer zone x (weight 100): of the two zone-x nodes one has an
    untolerated PreferNoSchedule taint; both pods bind on the other (the zone-y node and the
    tainted one lose on both schedulers, whatever their resource scoring)."""

    async def scenario(s: Side) -> dict[str, str]:
        zone_x, zone_y = {ZONE: f"{s.namespace}-x"}, {ZONE: f"{s.namespace}-y"}
        await s.scored_node("a", labels=zone_y)
        await s.scored_node("b", labels=zone_x)
        await s.scored_node("c", labels=zone_x, taints=[SOFT])
        await s.cluster.create(make_pod_group("g", s.namespace).gang(2).obj())
        for i in range(2):
            await s.pod(f"g-{i}", "g", spec=_prefer((100, zone_x)))
        return await s.settled(["g-0", "g-1"])

    up, ours = await both(sides, scenario)
    print(f"\nupstream: {up}\nours: {ours}")
    assert up == ours == {"g-0": "b", "g-1": "b"}
