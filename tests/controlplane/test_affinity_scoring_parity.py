"""Upstream is the oracle for InterPodAffinity's Score: the same objects through kube-scheduler
v1.37.2 and through ours (two control planes, as ``test_pod_constraints_parity.py``), where the
score decides: the nodes are alike for the other Score plugins (same size, the same pods on
each, or the difference too small to outweigh InterPodAffinity's weight 2 x 100), so without
InterPodAffinity's Score the choice would be a tie (upstream breaks ties at random).

Scenarios: an incoming pod's preferred affinity and anti-affinity, an existing pod's preferred
anti-affinity against the incoming pod (symmetry), an existing pod's required affinity
(``hardPodAffinityWeight``, default 1), a ``namespaceSelector`` selecting namespaces by label,
and a gang whose pods prefer each other's zone.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest

from controlplane._parity import UPSTREAM, ParitySide, both, parity_sides, until
from workloadbuilder.errors import NotFound
from workloadbuilder.testing import ControlPlane
from workloadbuilder.testing.builders import make_pod, make_pod_group

pytestmark = [pytest.mark.controlplane]

OURS = "wb-affinity-score"
ZONE = "topology.kubernetes.io/zone"
TIMEOUT = 30.0


class Side(ParitySide):
    """One scheduler under test, with builders of pods with pod (anti-)affinity."""

    def __init__(self, name: str, plane: ControlPlane, scheduler_name: str) -> None:
        super().__init__(name, plane, scheduler_name, "affscore")
        #: (namespace, pod) made outside this side's namespace, deleted first
        self.foreign: list[tuple[str, str]] = []

    async def zoned(self, name: str, zone: str) -> str:
        return await self.node(name, labels={ZONE: f"{self.namespace}-{zone}"})

    async def pod(
        self,
        name: str,
        group: str | None = None,
        *,
        labels: dict[str, str] | None = None,
        spec: dict[str, Any] | None = None,
        node: str | None = None,
        namespace: str | None = None,
        cpu: str = "1",
    ) -> None:
        p = make_pod(name, namespace or self.namespace).scheduler_name(self.scheduler_name)
        if group is not None:
            p.pod_group(group)
        if node is not None:
            p.node_name(self.full(node))
        obj = p.request("cpu", cpu).request("memory", "1Gi").obj()
        obj["metadata"].setdefault("labels", {}).update(labels or {})
        obj["spec"].update(spec or {})
        await self.cluster.create(obj)
        if namespace is not None:
            self.foreign.append((namespace, name))

    async def labelled_namespace(self, suffix: str, labels: dict[str, str]) -> str:
        name = self.full(suffix)
        await self.cluster.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}
        )
        self.track("Namespace", name)
        return name

    async def gang(self, name: str, size: int, **pod: Any) -> None:
        await self.cluster.create(make_pod_group(name, self.namespace).gang(size).obj())
        for i in range(size):
            await self.pod(f"{name}-{i}", name, **pod)

    async def settled(self, bound: list[str]) -> dict[str, str]:
        async def probe() -> dict[str, str] | None:
            placed = await self.placement()
            return placed if all(p in placed for p in bound) else None

        return await until(probe, f"{self.name}: {bound} bound", timeout=TIMEOUT, interval=0.2)

    async def close(self) -> None:
        for ns, pod in self.foreign:
            with contextlib.suppress(NotFound):
                await self.cluster.delete("Pod", pod, ns, grace_period_seconds=0)
        await super().close()


@pytest.fixture
async def sides(
    upstream_plane: ControlPlane, our_plane: ControlPlane
) -> AsyncIterator[tuple[Side, Side]]:
    upstream = Side("upstream", upstream_plane, UPSTREAM)
    ours = Side("ours", our_plane, OURS)
    async with parity_sides(upstream, ours) as pair:
        yield pair


def _prefer(kind: str, selector: dict[str, str], weight: int = 100, **term: Any) -> dict[str, Any]:
    t = {"labelSelector": {"matchLabels": selector}, "topologyKey": ZONE, **term}
    return {
        "affinity": {
            kind: {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": weight, "podAffinityTerm": t}
                ]
            }
        }
    }


async def test_preferred_affinity_picks_the_zone_of_the_matching_pod(
    sides: tuple[Side, Side],
) -> None:
    """db runs in zone b, a filler in zone a (alike for the other plugins): the pod that
    prefers db's zone goes to zone b."""

    async def scenario(s: Side) -> dict[str, str]:
        for n, z in (("a1", "a"), ("b1", "b")):
            await s.zoned(n, z)
        await s.pod("filler", labels={"app": "filler"}, node="a1")
        await s.pod("db", labels={"app": "db"}, node="b1")
        await s.settled(["filler", "db"])
        await s.pod("web", labels={"app": "web"}, spec=_prefer("podAffinity", {"app": "db"}))
        return await s.settled(["web"])

    up, ours = await both(sides, scenario)
    print(f"\nupstream: {up}\nours: {ours}")
    assert up["web"] == ours["web"] == "b1"


async def test_preferred_anti_affinity_avoids_the_zone_of_the_matching_pod(
    sides: tuple[Side, Side],
) -> None:
    async def scenario(s: Side) -> dict[str, str]:
        for n, z in (("a1", "a"), ("b1", "b")):
            await s.zoned(n, z)
        await s.pod("noisy", labels={"app": "noisy"}, node="a1")
        await s.pod("filler", labels={"app": "filler"}, node="b1")
        await s.settled(["noisy", "filler"])
        spec = _prefer("podAntiAffinity", {"app": "noisy"})
        await s.pod("quiet", labels={"app": "quiet"}, spec=spec)
        return await s.settled(["quiet"])

    up, ours = await both(sides, scenario)
    print(f"\nupstream: {up}\nours: {ours}")
    assert up["quiet"] == ours["quiet"] == "b1"


async def test_an_existing_pods_preferred_anti_affinity_repels_the_incoming_pod(
    sides: tuple[Side, Side],
) -> None:
    async def scenario(s: Side) -> dict[str, str]:
        for n, z in (("a1", "a"), ("b1", "b")):
            await s.zoned(n, z)
        spec = _prefer("podAntiAffinity", {"app": "web"})
        await s.pod("loner", labels={"app": "loner"}, node="a1", spec=spec)
        await s.pod("filler", labels={"app": "filler"}, node="b1")
        await s.settled(["loner", "filler"])
        await s.pod("web", labels={"app": "web"})
        return await s.settled(["web"])

    up, ours = await both(sides, scenario)
    print(f"\nupstream: {up}\nours: {ours}")
    assert up["web"] == ours["web"] == "b1"


async def test_an_existing_pods_required_affinity_pulls_the_incoming_pod(
    sides: tuple[Side, Side],
) -> None:
    """hardPodAffinityWeight (default 1): a bound pod's required affinity to app=cache pulls
    an unconstrained app=cache pod into its zone."""

    async def scenario(s: Side) -> dict[str, str]:
        for n, z in (("a1", "a"), ("b1", "b")):
            await s.zoned(n, z)
        term = {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": ZONE}
        spec = {
            "affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
        }
        await s.pod("filler", labels={"app": "filler"}, node="a1")
        await s.pod("client", labels={"app": "client"}, node="b1", spec=spec)
        await s.settled(["filler", "client"])
        await s.pod("cache", labels={"app": "cache"})
        return await s.settled(["cache"])

    up, ours = await both(sides, scenario)
    print(f"\nupstream: {up}\nours: {ours}")
    assert up["cache"] == ours["cache"] == "b1"


async def test_a_namespace_selector_picks_the_pods_of_the_labelled_namespaces(
    sides: tuple[Side, Side],
) -> None:
    """A db pod in each zone, in two namespaces; the pod prefers the db of the namespaces
    labelled team=ml: that one's zone."""

    async def scenario(s: Side) -> dict[str, str]:
        for n, z in (("a1", "a"), ("b1", "b")):
            await s.zoned(n, z)
        ml = await s.labelled_namespace("ml", {"team": f"{s.namespace}-ml"})
        web = await s.labelled_namespace("web", {"team": f"{s.namespace}-web"})
        await s.pod("db-web", labels={"app": "db"}, node="a1", namespace=web)
        await s.pod("db-ml", labels={"app": "db"}, node="b1", namespace=ml)
        sel = {"namespaceSelector": {"matchLabels": {"team": f"{s.namespace}-ml"}}}
        await s.pod("p", labels={"app": "p"}, spec=_prefer("podAffinity", {"app": "db"}, **sel))
        return await s.settled(["p"])

    up, ours = await both(sides, scenario)
    print(f"\nupstream: {up}\nours: {ours}")
    assert up["p"] == ours["p"] == "b1"


async def test_a_gang_preferring_its_own_zone_lands_in_one_zone(
    sides: tuple[Side, Side],
) -> None:
    """Two zones of two nodes; a gang of 2 whose pods fill a node each and prefer the zone of
    app=g pods: the second pod follows the first into its zone."""

    async def scenario(s: Side) -> Counter[str]:
        for n, z in (("a1", "a"), ("b1", "b"), ("a2", "a"), ("b2", "b")):
            await s.zoned(n, z)
        spec = _prefer("podAffinity", {"app": "g"})
        await s.gang("g", 2, labels={"app": "g"}, cpu="3", spec=spec)
        placed = await s.settled(["g-0", "g-1"])
        return Counter(node[0] for node in placed.values())

    up, ours = await both(sides, scenario)
    print(f"\nupstream: {up}\nours: {ours}")
    assert sorted(up.values()) == sorted(ours.values()) == [2]


async def test_a_gang_avoiding_its_own_zone_spreads_over_the_zones(
    sides: tuple[Side, Side],
) -> None:
    """Two zones of two nodes; a gang of 2 small pods preferring not to share a zone with
    app=s pods: one per zone (packing alone would put both on one node)."""

    async def scenario(s: Side) -> Counter[str]:
        for n, z in (("a1", "a"), ("b1", "b"), ("a2", "a"), ("b2", "b")):
            await s.zoned(n, z)
        spec = _prefer("podAntiAffinity", {"app": "s"})
        await s.gang("s", 2, labels={"app": "s"}, spec=spec)
        placed = await s.settled(["s-0", "s-1"])
        return Counter(node[0] for node in placed.values())

    up, ours = await both(sides, scenario)
    print(f"\nupstream: {up}\nours: {ours}")
    assert up == ours == Counter({"a": 1, "b": 1})
