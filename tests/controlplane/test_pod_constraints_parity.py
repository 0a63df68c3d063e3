"""Upstream is the oracle for pods' own constraints: the same scenarios through kube-scheduler
v1.37.2 and through ours (two control planes, as ``test_scheduler_parity.py``), comparing
what is observable: which pods bind, how many distinct nodes / which zones they use, the
PodGroup's ``PodGroupInitiallyScheduled`` status and reason, each pod's ``PodScheduled``
status and reason, and the upstream Filter reason that our message repeats.

Scenarios (host ports, one-worker-per-node anti-affinity, existing pods' anti-affinity, zone
spread of a gang, a pod whose PersistentVolumeClaim does not exist).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest

from controlplane._parity import UPSTREAM, ParitySide, both, parity_sides, until
from workloadbuilder.testing import ControlPlane
from workloadbuilder.testing.builders import make_pod, make_pod_group

pytestmark = [pytest.mark.controlplane]

OURS = "wb-constraints"
HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
TIMEOUT = 30.0


class Side(ParitySide):
    """One scheduler under test, with builders of constrained pods."""

    def __init__(self, name: str, plane: ControlPlane, scheduler_name: str) -> None:
        super().__init__(name, plane, scheduler_name, "constraints")

    async def pod(
        self,
        name: str,
        group: str | None = None,
        *,
        labels: dict[str, str] | None = None,
        spec: dict[str, Any] | None = None,
        ports: list[dict[str, Any]] | None = None,
        node: str | None = None,
        cpu: str = "1",
    ) -> None:
        p = make_pod(name, self.namespace).scheduler_name(self.scheduler_name)
        if group is not None:
            p.pod_group(group)
        if node is not None:
            p.node_name(self.full(node))
        obj = p.request("cpu", cpu).request("memory", "1Gi").obj()
        obj["metadata"].setdefault("labels", {}).update(labels or {})
        if ports:
            obj["spec"]["containers"][0]["ports"] = ports
        obj["spec"].update(spec or {})
        await self.cluster.create(obj)

    async def gang(self, name: str, size: int, **pod: Any) -> None:
        await self.cluster.create(make_pod_group(name, self.namespace).gang(size).obj())
        for i in range(size):
            await self.pod(f"{name}-{i}", name, **pod)

    async def settled(self, bound: list[str], pending: list[str] = ()) -> dict[str, str]:
        """Wait until the ``bound`` pods are bound and the ``pending`` ones are
        ``PodScheduled=False`` (a pod may be tried before the scheduler sees a new node and
        be retried: a first verdict is not the last); the placement of every bound pod."""

        async def probe() -> dict[str, str] | None:
            placed = await self.placement()
            if any(p not in placed for p in bound):
                return None
            for p in pending:
                cond = await self.scheduled(p)
                if p in placed or cond is None or cond[0] != "False":
                    return None
            return placed

        return await until(
            probe,
            f"{self.name}: {bound} bound, {list(pending)} pending",
            timeout=TIMEOUT,
            interval=0.2,
        )


@pytest.fixture
async def sides(
    upstream_plane: ControlPlane, our_plane: ControlPlane
) -> AsyncIterator[tuple[Side, Side]]:
    upstream = Side("upstream", upstream_plane, UPSTREAM)
    ours = Side("ours", our_plane, OURS)
    async with parity_sides(upstream, ours) as pair:
        yield pair


def _anti(selector: dict[str, str], key: str = HOST) -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": selector}, "topologyKey": key}
    return {
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    }


async def test_host_ports_on_one_node(sides: tuple[Side, Side]) -> None:
    """Two pods asking for hostPort 8080 and one on UDP, one node: the second TCP pod stays
    pending with NodePorts' reason; the UDP one shares the node."""

    async def scenario(s: Side) -> tuple[dict[str, str], tuple[str, str, str] | None]:
        await s.node("a")
        tcp = [{"containerPort": 80, "hostPort": 8080}]
        await s.pod("p1", ports=tcp)
        await s.settled(["p1"])
        await s.pod("p2", ports=tcp)
        await s.pod("udp", ports=[{"containerPort": 80, "hostPort": 8080, "protocol": "UDP"}])
        placed = await s.settled(["udp"], ["p2"])
        return placed, await s.scheduled("p2")

    (up, up_p2), (ours, our_p2) = await both(sides, scenario)
    print(f"\nupstream: {up} {up_p2}\nours: {ours} {our_p2}")
    assert up == ours == {"p1": "a", "udp": "a"}
    assert up_p2 is not None and our_p2 is not None
    assert up_p2[:2] == our_p2[:2] == ("False", "Unschedulable")
    assert "didn't have free ports for the requested pod ports" in up_p2[2]
    assert "didn't have free ports for the requested pod ports" in our_p2[2]


async def test_one_worker_per_node_gang(sides: tuple[Side, Side]) -> None:
    """A gang of 4 with required anti-affinity among its pods on kubernetes.io/hostname: on 3
    nodes nothing binds; with a 4th node, 4 distinct nodes."""

    async def scenario(s: Side) -> tuple[tuple[str, str] | None, int, dict[str, str]]:
        for n in ("a", "b", "c"):
            await s.node(n)
        await s.gang("w", 4, labels={"app": "w"}, spec=_anti({"app": "w"}))

        async def decided() -> tuple[str, str] | None:
            return await s.group_condition("w")

        cond = await until(decided, f"{s.name}: w decided", timeout=TIMEOUT, interval=0.2)
        bound_before = len(await s.placement())
        await s.node("d")

        async def four() -> dict[str, str] | None:
            placed = await s.placement()
            return placed if len(placed) == 4 else None

        placed = await until(four, f"{s.name}: 4 bound", timeout=TIMEOUT, interval=0.2)
        return cond, bound_before, placed

    (up_cond, up_before, up), (our_cond, our_before, ours) = await both(sides, scenario)
    print(f"\nupstream: {up_cond} {up_before} {up}\nours: {our_cond} {our_before} {ours}")
    assert up_cond == our_cond == ("False", "Unschedulable")
    assert up_before == our_before == 0
    assert len(set(up.values())) == len(set(ours.values())) == 4


async def test_existing_pods_anti_affinity(sides: tuple[Side, Side]) -> None:
    """A bound pod's anti-affinity against app=x keeps an unconstrained app=x pod off its
    node (symmetry); an app=y pod pinned there is not affected."""

    async def scenario(s: Side) -> dict[str, str]:
        await s.node("a")
        await s.node("b")
        await s.pod("guard", labels={"app": "guard"}, spec=_anti({"app": "x"}), node="a")
        await s.pod("x", labels={"app": "x"}, spec={"nodeSelector": {}})
        await s.pod("y", labels={"app": "y"}, spec={"nodeSelector": {HOST: s.full("a")}})
        return await s.settled(["x", "y"])

    up, ours = await both(sides, scenario)
    print(f"\nupstream: {up}\nours: {ours}")
    assert up == ours == {"guard": "a", "x": "b", "y": "a"}


async def test_zone_spread_of_a_gang(sides: tuple[Side, Side]) -> None:
    """A gang of 4 with a maxSkew 1 zone spread, zone a with two nodes and zone b with one:
    two pods per zone."""

    async def scenario(s: Side) -> Counter[str]:
        await s.node("a1", labels={ZONE: f"{s.namespace}-a"})
        await s.node("a2", labels={ZONE: f"{s.namespace}-a"})
        await s.node("b1", labels={ZONE: f"{s.namespace}-b"})
        spread = {
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": ZONE,
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "g"}},
                }
            ]
        }
        await s.gang("g", 4, labels={"app": "g"}, spec=spread)

        async def four() -> dict[str, str] | None:
            placed = await s.placement()
            return placed if len(placed) == 4 else None

        placed = await until(four, f"{s.name}: 4 bound", timeout=TIMEOUT, interval=0.2)
        return Counter(n[0] for n in placed.values())

    up, ours = await both(sides, scenario)
    print(f"\nupstream: {up}\nours: {ours}")
    assert up == ours == Counter({"a": 2, "b": 2})


async def test_a_missing_persistent_volume_claim_keeps_the_pod_pending(
    sides: tuple[Side, Side],
) -> None:
    """A pod whose PersistentVolumeClaim does not exist: pending on both, naming the claim
    (VolumeRestrictions' PreFilter, the first to look it up)."""

    async def scenario(s: Side) -> tuple[dict[str, str], tuple[str, str, str] | None]:
        await s.node("a")
        pvc = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
        await s.pod("pvc", spec={"volumes": pvc})
        await s.pod("plain")
        placed = await s.settled(["plain"], ["pvc"])
        return placed, await s.scheduled("pvc")

    (up, up_c), (ours, our_c) = await both(sides, scenario)
    print(f"\nupstream: {up} {up_c}\nours: {ours} {our_c}")
    assert up == ours == {"plain": "a"}
    assert up_c is not None and our_c is not None
    assert up_c[:2] == our_c[:2] == ("False", "Unschedulable")
    assert 'persistentvolumeclaim "data" not found' in up_c[2]
    assert 'persistentvolumeclaim "data" not found' in our_c[2]
