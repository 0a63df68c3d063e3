"""Volume parity: the same storage scenarios through kube-scheduler v1.37.2 and through our
scheduler, each on its own plane with kube-controller-manager's PV binder (and the PV / PVC
protection controllers) running, so claims are bound as on a real cluster: Immediate ones by
the controller, WaitForFirstConsumer ones after the scheduler's PreBind set the volume's
``claimRef``.

Compared: which pods bind to which node, which volume each claim ends up bound to, each
pending pod's ``PodScheduled`` status and reason, and the upstream Filter / PreFilter reason
that both messages contain. Scenarios: a missing claim, an unbound Immediate claim, a bound
volume's node affinity, WaitForFirstConsumer with static volumes (single pod and a gang), a
ReadWriteOncePod claim in use, a volume's zone, CSI volume limits.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import pytest

from controlplane._parity import UPSTREAM, ParitySide, both, parity_plane, parity_sides, until
from workloadbuilder.testing import ControlPlane
from workloadbuilder.testing.builders import make_pod, make_pod_group

pytestmark = [pytest.mark.controlplane, pytest.mark.controllermanager]

OURS = "wb-volumes"
HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
DRIVER = "disk.example.com"
TIMEOUT = 60.0
CONTROLLERS = (
    "persistentvolume-binder-controller",
    "persistentvolume-protection-controller",
    "persistentvolumeclaim-protection-controller",
    "podgroup-protection-controller",
)


@pytest.fixture(scope="module")
def upstream_plane(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """kube-scheduler and kube-controller-manager (the PV controllers)."""
    with parity_plane(
        control_plane, upstream=True, controller_manager=True, controllers=CONTROLLERS
    ) as plane:
        yield plane


@pytest.fixture(scope="module")
def our_plane(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """kube-controller-manager only: our scheduler runs in process."""
    with parity_plane(
        control_plane, upstream=False, controller_manager=True, controllers=CONTROLLERS
    ) as plane:
        yield plane


class Side(ParitySide):
    """One scheduler under test, with builders of storage objects (cluster-scoped ones named
    ``{namespace}-{name}``)."""

    def __init__(self, name: str, plane: ControlPlane, scheduler_name: str) -> None:
        super().__init__(name, plane, scheduler_name, "volumes")

    async def storage_class(self, name: str, *, wffc: bool = True) -> str:
        full = self.full(name)
        await self.cluster.create(
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": {"name": full},
                "provisioner": "kubernetes.io/no-provisioner",
                "volumeBindingMode": "WaitForFirstConsumer" if wffc else "Immediate",
            }
        )
        self.track("StorageClass", full)
        return full

    async def pv(
        self,
        name: str,
        cls: str,
        *,
        node: str | None = None,
        modes: tuple[str, ...] = ("ReadWriteOnce",),
        zone: str | None = None,
    ) -> str:
        """A volume: local on ``node``, else a CSI one of ``DRIVER`` (``zone``: labelled)."""
        full = self.full(name)
        spec: dict[str, Any] = {
            "capacity": {"storage": "10Gi"},
            "accessModes": list(modes),
            "storageClassName": cls,
        }
        if node is not None:
            spec["local"] = {"path": "/data"}
            term = {
                "matchExpressions": [{"key": HOST, "operator": "In", "values": [self.full(node)]}]
            }
            spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [term]}}
        else:
            spec["csi"] = {"driver": DRIVER, "volumeHandle": full}
        meta: dict[str, Any] = {"name": full}
        if zone is not None:
            meta["labels"] = {ZONE: zone}
        await self.cluster.create(
            {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta, "spec": spec}
        )
        self.track("PersistentVolume", full)
        return full

    async def pvc(self, name: str, cls: str, *, modes: tuple[str, ...] = ("ReadWriteOnce",)) -> str:
        await self.cluster.create(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": name, "namespace": self.namespace},
                "spec": {
                    "accessModes": list(modes),
                    "storageClassName": cls,
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            }
        )
        return name

    async def csi_node(self, node: str, count: int) -> None:
        full = self.full(node)
        await self.cluster.create(
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "CSINode",
                "metadata": {"name": full},
                "spec": {
                    "drivers": [{"name": DRIVER, "nodeID": full, "allocatable": {"count": count}}]
                },
            }
        )
        self.track("CSINode", full)

    async def pod(
        self,
        name: str,
        claims: tuple[str, ...],
        group: str | None = None,
        *,
        node: str | None = None,
        on: str | None = None,
    ) -> None:
        """A pod using ``claims`` (``node``: created bound there; ``on``: a node selector)."""
        p = make_pod(name, self.namespace).scheduler_name(self.scheduler_name)
        if group is not None:
            p.pod_group(group)
        if node is not None:
            p.node_name(self.full(node))
        if on is not None:
            p.node_selector(HOST, self.full(on))
        obj = p.request("cpu", "100m").obj()
        obj["spec"]["volumes"] = [
            {"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}}
            for i, c in enumerate(claims)
        ]
        await self.cluster.create(obj)

    async def claim_bound(self, name: str) -> str:
        """Wait until the PV controller bound the claim; its volume (without the prefix)."""

        async def probe() -> str | None:
            pvc = await self.cluster.get("PersistentVolumeClaim", name, self.namespace)
            assert isinstance(pvc, dict)
            vol = pvc["spec"].get("volumeName")
            done = (pvc.get("status") or {}).get("phase") == "Bound"
            return str(vol)[len(self.namespace) + 1 :] if vol and done else None

        return await until(probe, f"{self.name}: claim {name} bound", timeout=TIMEOUT, interval=0.2)

    async def settled(self, bound: list[str], pending: Sequence[str] = ()) -> dict[str, str]:
        """The ``bound`` pods bound and the ``pending`` ones ``PodScheduled=False``."""

        async def probe() -> tuple[dict[str, str]] | None:  # truthy, also when none is bound
            placed = await self.placement()
            if any(p not in placed for p in bound):
                return None
            for p in pending:
                cond = await self.scheduled(p)
                if p in placed or cond is None or cond[0] != "False":
                    return None
            return (placed,)

        (placed,) = await until(
            probe,
            f"{self.name}: {bound} bound, {list(pending)} pending",
            timeout=TIMEOUT,
            interval=0.2,
        )
        return placed


@pytest.fixture
async def sides(
    upstream_plane: ControlPlane, our_plane: ControlPlane
) -> AsyncIterator[tuple[Side, Side]]:
    upstream = Side("upstream", upstream_plane, UPSTREAM)
    ours = Side("ours", our_plane, OURS)
    async with parity_sides(upstream, ours) as pair:
        yield pair


def _same_pending(
    up: tuple[str, str, str] | None, ours: tuple[str, str, str] | None, reason: str
) -> None:
    assert up is not None and ours is not None
    assert up[:2] == ours[:2] == ("False", "Unschedulable")
    assert reason in up[2], up
    assert reason in ours[2], ours


async def test_a_missing_claim(sides: tuple[Side, Side]) -> None:
    async def scenario(s: Side) -> Any:
        await s.node("a")
        await s.pod("p", ("nope",))
        await s.settled([], ["p"])
        return await s.scheduled("p")

    up, ours = await both(sides, scenario)
    print(f"\nupstream: {up}\nours: {ours}")
    _same_pending(up, ours, 'persistentvolumeclaim "nope" not found')


async def test_an_unbound_immediate_claim(sides: tuple[Side, Side]) -> None:
    async def scenario(s: Side) -> Any:
        await s.node("a")
        cls = await s.storage_class("imm", wffc=False)
        await s.pvc("data", cls)  # no volume: the PV controller cannot bind it
        await s.pod("p", ("data",))
        await s.settled([], ["p"])
        return await s.scheduled("p")

    up, ours = await both(sides, scenario)
    print(f"\nupstream: {up}\nours: {ours}")
    _same_pending(up, ours, "pod has unbound immediate PersistentVolumeClaims")


async def test_a_bound_volume_node_affinity(sides: tuple[Side, Side]) -> None:
    """An Immediate claim the PV controller binds to a local volume on b: the pod goes to
    b; a claim whose volume is on a node that does not exist: pending."""

    async def scenario(s: Side) -> Any:
        await s.node("a")
        await s.node("b")
        cls = await s.storage_class("imm", wffc=False)
        await s.pv("on-b", cls, node="b")
        await s.pvc("data", cls)
        first = await s.claim_bound("data")
        await s.pv("on-x", cls, node="x")
        await s.pvc("lost", cls)
        second = await s.claim_bound("lost")
        await s.pod("p", ("data",))
        await s.pod("q", ("lost",))
        placed = await s.settled(["p"], ["q"])
        return placed, {"data": first, "lost": second}, await s.scheduled("q")

    (up, up_claims, up_q), (ours, our_claims, our_q) = await both(sides, scenario)
    print(f"\nupstream: {up} {up_q}\nours: {ours} {our_q}")
    assert up == ours == {"p": "b"}
    assert up_claims == our_claims == {"data": "on-b", "lost": "on-x"}
    _same_pending(up_q, our_q, "2 node(s) didn't match PersistentVolume's node affinity")


async def test_wait_for_first_consumer_binds_the_volume_of_the_chosen_node(
    sides: tuple[Side, Side],
) -> None:
    """One local volume on b: the pod goes to b and its claim is bound to that volume (our
    PreBind sets the claimRef, the PV controller binds); a second pod finds no volume."""

    async def scenario(s: Side) -> Any:
        await s.node("a")
        await s.node("b")
        cls = await s.storage_class("local")
        await s.pv("on-b", cls, node="b")
        await s.pvc("data", cls)
        await s.pvc("more", cls)
        await s.pod("p", ("data",))
        placed = await s.settled(["p"])
        volume = await s.claim_bound("data")
        await s.pod("q", ("more",))
        await s.settled(["p"], ["q"])
        return placed, volume, await s.scheduled("q")

    (up, up_v, up_q), (ours, our_v, our_q) = await both(sides, scenario)
    print(f"\nupstream: {up} {up_v} {up_q}\nours: {ours} {our_v} {our_q}")
    assert up == ours == {"p": "b"}
    assert up_v == our_v == "on-b"
    _same_pending(up_q, our_q, "didn't find available persistent volumes to bind")


async def test_a_gang_with_a_volume_per_node(sides: tuple[Side, Side]) -> None:
    """A gang of two whose claims each need one of two local volumes, one per node: the
    pods land on distinct nodes and the claims on distinct volumes."""

    async def scenario(s: Side) -> Any:
        await s.node("a")
        await s.node("b")
        cls = await s.storage_class("local")
        await s.pv("on-a", cls, node="a")
        await s.pv("on-b", cls, node="b")
        await s.cluster.create(make_pod_group("g", s.namespace).gang(2).obj())
        for i in range(2):
            await s.pvc(f"c{i}", cls)
            await s.pod(f"g-{i}", (f"c{i}",), "g")
        placed = await s.settled(["g-0", "g-1"])
        volumes = {f"c{i}": await s.claim_bound(f"c{i}") for i in range(2)}
        return placed, volumes

    (up, up_v), (ours, our_v) = await both(sides, scenario)
    print(f"\nupstream: {up} {up_v}\nours: {ours} {our_v}")
    for placed, volumes in ((up, up_v), (ours, our_v)):
        assert sorted(placed.values()) == ["a", "b"]
        assert {volumes[f"c{i}"] for i in range(2)} == {"on-a", "on-b"}
        for i in range(2):  # each pod on the node of its claim's volume
            assert volumes[f"c{i}"] == f"on-{placed[f'g-{i}']}"


async def test_a_read_write_once_pod_claim_in_use(sides: tuple[Side, Side]) -> None:
    async def scenario(s: Side) -> Any:
        await s.node("a")
        await s.node("b")
        cls = await s.storage_class("imm", wffc=False)
        await s.pv("solo", cls, modes=("ReadWriteOncePod",))
        await s.pvc("solo", cls, modes=("ReadWriteOncePod",))
        await s.claim_bound("solo")
        await s.pod("first", ("solo",), node="a")
        await s.pod("second", ("solo",))
        await s.settled(["first"], ["second"])
        return await s.scheduled("second")

    up, ours = await both(sides, scenario)
    print(f"\nupstream: {up}\nours: {ours}")
    _same_pending(
        up,
        ours,
        "2 node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode "
        "already in-use by another pod",
    )


async def test_a_volume_zone(sides: tuple[Side, Side]) -> None:
    async def scenario(s: Side) -> Any:
        await s.node("a", labels={ZONE: "z1"})
        await s.node("b", labels={ZONE: "z2"})
        cls = await s.storage_class("imm", wffc=False)
        await s.pv("z2", cls, zone="z2")
        await s.pvc("in-z2", cls)
        await s.claim_bound("in-z2")
        await s.pv("z3", cls, zone="z3")
        await s.pvc("in-z3", cls)
        await s.claim_bound("in-z3")
        await s.pod("p", ("in-z2",))
        await s.pod("q", ("in-z3",))
        placed = await s.settled(["p"], ["q"])
        return placed, await s.scheduled("q")

    (up, up_q), (ours, our_q) = await both(sides, scenario)
    print(f"\nupstream: {up} {up_q}\nours: {ours} {our_q}")
    assert up == ours == {"p": "b"}
    _same_pending(up_q, our_q, "2 node(s) had no available volume zone")


async def test_csi_volume_limits(sides: tuple[Side, Side]) -> None:
    """Node a takes one volume of the driver: a second volume there is refused, the same
    volume again is not; elsewhere it fits."""

    async def scenario(s: Side) -> Any:
        await s.node("a")
        await s.node("b")
        await s.csi_node("a", 1)
        cls = await s.storage_class("imm", wffc=False)
        for n in ("one", "two"):
            await s.pv(n, cls)
            await s.pvc(n, cls)
            await s.claim_bound(n)
        await s.pod("first", ("one",), node="a")
        await s.pod("same", ("one",), on="a")
        await s.pod("other", ("two",), on="a")
        placed = await s.settled(["first", "same"], ["other"])
        await s.pod("anywhere", ("two",))
        placed = await s.settled(["first", "same", "anywhere"], ["other"])
        return placed, await s.scheduled("other")

    (up, up_o), (ours, our_o) = await both(sides, scenario)
    print(f"\nupstream: {up} {up_o}\nours: {ours} {our_o}")
    assert up == ours == {"first": "a", "same": "a", "anywhere": "b"}
    _same_pending(up_o, our_o, "1 node(s) exceed max volume count")
