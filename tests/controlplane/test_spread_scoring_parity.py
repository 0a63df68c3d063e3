"""Upstream is the oracle for PodTopologySpread's Score: the same objects through
kube-scheduler v1.37.2 and through ours (two control planes, as
``test_pod_constraints_parity.py``), where the spread score, not the resource score,
decides where pods go. Compared: how many pods each zone / node gets.

Scenarios: single pods with a ``ScheduleAnyway`` zone constraint, created one at a time
(a big zone and a small one: the resource score alone fills the big zone); a gang with that
constraint; the system default constraints of pods a Service selects, and of a ReplicaSet's
pods, over a big and a small node (the default hostname spread alternates them), while a pod
nothing selects follows the resource score.
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

OURS = "wb-spread-score"
ZONE = "topology.kubernetes.io/zone"
TIMEOUT = 30.0


class Side(ParitySide):
    """One scheduler under test, with builders of spread pods."""

    def __init__(self, name: str, plane: ControlPlane, scheduler_name: str) -> None:
        super().__init__(name, plane, scheduler_name, "spread")

    async def zoned(self, name: str, zone: str, cpu: str) -> None:
        """A node of ``cpu`` cores and as many GiB (every node equally balanced)."""
        await self.node(name, cpu=cpu, memory=f"{cpu}Gi", labels={ZONE: f"{self.namespace}-{zone}"})

    async def pod(
        self,
        name: str,
        group: str | None = None,
        *,
        labels: dict[str, str] | None = None,
        spec: dict[str, Any] | None = None,
        owner: dict[str, Any] | None = None,
    ) -> None:
        p = make_pod(name, self.namespace).scheduler_name(self.scheduler_name)
        if group is not None:
            p.pod_group(group)
        obj = p.request("cpu", "1").request("memory", "1Gi").obj()
        obj["metadata"]["labels"] = dict(labels or {})
        if owner is not None:
            obj["metadata"]["ownerReferences"] = [owner]
        obj["spec"].update(spec or {})
        await self.cluster.create(obj)

    async def bound(self, names: list[str]) -> dict[str, str]:
        """Wait until every pod of ``names`` is bound; where they went."""

        async def probe() -> dict[str, str] | None:
            placed = await self.placement()
            return placed if all(n in placed for n in names) else None

        placed = await until(probe, f"{self.name}: {names} bound", timeout=TIMEOUT, interval=0.1)
        return {n: placed[n] for n in names}

    async def one_by_one(self, names: list[str], **pod: Any) -> dict[str, str]:
        """Create the pods one at a time, each once the one before is bound."""
        for i, n in enumerate(names):
            await self.pod(n, **pod)
            await self.bound(names[: i + 1])
        return await self.bound(names)


@pytest.fixture
async def sides(
    upstream_plane: ControlPlane, our_plane: ControlPlane
) -> AsyncIterator[tuple[Side, Side]]:
    upstream = Side("upstream", upstream_plane, UPSTREAM)
    ours = Side("ours", our_plane, OURS)
    async with parity_sides(upstream, ours) as pair:
        yield pair


def _soft_zone(app: str) -> dict[str, Any]:
    return {
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": ZONE,
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app": app}},
            }
        ]
    }


async def _two_zones(s: Side) -> None:
    """Zone a: two 16-core nodes; zone b: one 4-core node."""
    await s.zoned("a1", "a", "16")
    await s.zoned("a2", "a", "16")
    await s.zoned("b1", "b", "4")


async def test_schedule_anyway_balances_single_pods_over_zones(sides: tuple[Side, Side]) -> None:
    async def scenario(s: Side) -> Counter[str]:
        await _two_zones(s)
        names = [f"w{i}" for i in range(4)]
        placed = await s.one_by_one(names, labels={"app": "w"}, spec=_soft_zone("w"))
        return Counter(node[0] for node in placed.values())

    up, ours = await both(sides, scenario)
    print(f"\nupstream: {up}\nours: {ours}")
    assert up == ours == Counter({"a": 2, "b": 2})


async def test_a_gang_with_a_soft_zone_constraint(sides: tuple[Side, Side]) -> None:
    async def scenario(s: Side) -> Counter[str]:
        await _two_zones(s)
        await s.cluster.create(make_pod_group("g", s.namespace).gang(4).obj())
        names = [f"g-{i}" for i in range(4)]
        for n in names:
            await s.pod(n, "g", labels={"app": "g"}, spec=_soft_zone("g"))
        placed = await s.bound(names)
        return Counter(node[0] for node in placed.values())

    up, ours = await both(sides, scenario)
    print(f"\nupstream: {up}\nours: {ours}")
    assert up == ours == Counter({"a": 2, "b": 2})


async def _big_and_small(s: Side) -> None:
    """No zones: a 16-core node and a 4-core one."""
    await s.node("big", cpu="16", memory="16Gi")
    await s.node("small", cpu="4", memory="4Gi")


async def test_system_defaults_spread_a_services_pods_over_hosts(sides: tuple[Side, Side]) -> None:
    async def scenario(s: Side) -> tuple[Counter[str], Counter[str]]:
        await _big_and_small(s)
        await s.cluster.create(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "web", "namespace": s.namespace},
                "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]},
            }
        )
        web = await s.one_by_one([f"web-{i}" for i in range(4)], labels={"app": "web"})
        lone = await s.one_by_one([f"lone-{i}" for i in range(2)], labels={"app": "lone"})
        return Counter(web.values()), Counter(lone.values())

    up, ours = await both(sides, scenario)
    print(f"\nupstream: {up}\nours: {ours}")
    assert up == ours == (Counter({"big": 2, "small": 2}), Counter({"big": 2}))


async def test_system_defaults_spread_a_replica_sets_pods_over_hosts(
    sides: tuple[Side, Side],
) -> None:
    async def scenario(s: Side) -> Counter[str]:
        await _big_and_small(s)
        rs = await s.cluster.create(
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {"name": "rs", "namespace": s.namespace},
                "spec": {
                    "replicas": 0,
                    "selector": {"matchLabels": {"app": "rs"}},
                    "template": {
                        "metadata": {"labels": {"app": "rs"}},
                        "spec": {"containers": [{"name": "c", "image": "pause"}]},
                    },
                },
            }
        )
        assert isinstance(rs, dict)
        owner = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": "rs",
            "uid": rs["metadata"]["uid"],
            "controller": True,
        }
        placed = await s.one_by_one(
            [f"rs-{i}" for i in range(4)], labels={"app": "rs"}, owner=owner
        )
        return Counter(placed.values())

    up, ours = await both(sides, scenario)
    print(f"\nupstream: {up}\nours: {ours}")
    assert up == ours == Counter({"big": 2, "small": 2})


async def test_an_empty_selector_counts_no_pod_in_the_filter(sides: tuple[Side, Side]) -> None:
    """``labelSelector: {}`` on a ``DoNotSchedule`` hostname constraint: upstream counts no
    pod for it, so a pod pinned to a node already running 3 pods binds; the same constraint
    with a selector matching those pods keeps it pending (3 ahead of the empty node)."""

    async def scenario(s: Side) -> tuple[bool, str | None]:
        await s.node("a")
        await s.node("b")
        for i in range(3):
            p = make_pod(f"old-{i}", s.namespace).node_name(s.full("a"))
            obj = p.request("cpu", "100m").obj()
            obj["metadata"]["labels"] = {"app": "x"}
            await s.cluster.create(obj)
        host = {"nodeSelector": {"kubernetes.io/hostname": s.full("a")}}

        def spread(selector: dict[str, Any]) -> dict[str, Any]:
            c = {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": selector,
                "nodeAffinityPolicy": "Ignore",
            }
            return {**host, "topologySpreadConstraints": [c]}

        await s.pod("empty", labels={"app": "x"}, spec=spread({}))
        await s.pod("matching", labels={"app": "x"}, spec=spread({"matchLabels": {"app": "x"}}))
        placed = await s.bound(["empty"])

        async def verdict() -> str | None:
            pod = (await s.pods())["matching"]
            for c in (pod.get("status") or {}).get("conditions") or ():
                if c.get("type") == "PodScheduled" and c.get("status") == "False":
                    return str(c.get("reason"))
            return None

        reason = await until(verdict, f"{s.name}: matching pending", timeout=TIMEOUT, interval=0.2)
        return placed["empty"] == "a", reason

    up, ours = await both(sides, scenario)
    print(f"\nupstream: {up}\nours: {ours}")
    assert up == ours == (True, "Unschedulable")
