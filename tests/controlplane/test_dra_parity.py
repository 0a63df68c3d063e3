"""DRA parity: the same Dynamic Resource Allocation scenarios through kube-scheduler v1.37.2
and through our scheduler, each on its own plane with kube-controller-manager's
resourceclaim controller running (``DRAWorkloadResourceClaims`` on everywhere). The tests
create the ResourceSlices (no driver, no kubelet).

Compared: which pods are bound, and for each claim whether it is allocated, how many devices
from which pool (the pool is the pod's node for node-local slices, so it is compared as "the
pod's node" / the slice's name), and ``reservedFor`` (resource and name). Messages are
printed (``pytest -s``), not compared.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, TypeVar

import pytest

from controlplane._parity import (
    UPSTREAM,
    ParitySide,
    both,
    parity_plane,
    parity_sides,
    until,
)
from workloadbuilder.api import PodGroup, from_dict
from workloadbuilder.testing import ControlPlane
from workloadbuilder.testing.builders import (
    make_pod,
    make_pod_group,
)

pytestmark = [pytest.mark.controlplane, pytest.mark.controllermanager]

OURS = "wb-dra-parity"
DRIVER = "gpu.example.com"
V1 = "resource.k8s.io/v1"
TIMEOUT = 40.0
_T = TypeVar("_T")


@pytest.fixture(scope="module")
def upstream_plane(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """kube-scheduler and kube-controller-manager (resourceclaim controller)."""
    with parity_plane(control_plane, upstream=True, controller_manager=True) as plane:
        yield plane


@pytest.fixture(scope="module")
def our_plane(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """kube-controller-manager only: our scheduler runs in process."""
    with parity_plane(control_plane, upstream=False, controller_manager=True) as plane:
        yield plane


async def _until(probe: Callable[[], Awaitable[_T | None]], what: str) -> _T:
    return await until(probe, what, timeout=TIMEOUT, interval=0.2)


class Side(ParitySide):
    """One scheduler: its plane, a namespace, and cluster-scoped objects prefixed by it
    (nodes and PriorityClasses from :class:`ParitySide`)."""

    def __init__(self, name: str, plane: ControlPlane, scheduler_name: str) -> None:
        super().__init__(name, plane, scheduler_name, "dra")

    async def device_class(self, name: str, *more: str) -> str:
        full = self.full(name)
        exprs = [f'device.driver == "{DRIVER}"', *more]
        await self.cluster.create(
            {
                "apiVersion": V1,
                "kind": "DeviceClass",
                "metadata": {"name": full},
                "spec": {"selectors": [{"cel": {"expression": e}} for e in exprs]},
            }
        )
        self.track("DeviceClass", full)
        return full

    async def slice(self, name: str, where: dict[str, Any], devices: list[dict[str, Any]]) -> str:
        full = self.full(name)
        await self.cluster.create(
            {
                "apiVersion": V1,
                "kind": "ResourceSlice",
                "metadata": {"name": full},
                "spec": {
                    "driver": DRIVER,
                    "pool": {"name": full, "generation": 1, "resourceSliceCount": 1},
                    **where,
                    "devices": devices,
                },
            }
        )
        self.track("ResourceSlice", full)
        return full

    async def node_with_gpus(self, name: str, count: int, **node: Any) -> str:
        full = await self.node(name, **node)
        await self.slice(
            f"{name}-gpus",
            {"nodeName": full},
            [
                {"name": f"gpu-{i}", "attributes": {"model": {"string": "H100"}}}
                for i in range(count)
            ],
        )
        return full

    def _spec(self, cls: str, count: int, selectors: tuple[str, ...] = ()) -> dict[str, Any]:
        exactly: dict[str, Any] = {"deviceClassName": self.full(cls), "count": count}
        if selectors:
            exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
        return {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}

    async def claim(
        self, name: str, cls: str, count: int = 1, *, selectors: tuple[str, ...] = ()
    ) -> None:
        await self.cluster.create(
            {
                "apiVersion": V1,
                "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": self.namespace},
                "spec": self._spec(cls, count, selectors),
            }
        )

    async def template(self, name: str, cls: str, count: int = 1) -> None:
        await self.cluster.create(
            {
                "apiVersion": V1,
                "kind": "ResourceClaimTemplate",
                "metadata": {"name": name, "namespace": self.namespace},
                "spec": {"spec": self._spec(cls, count)},
            }
        )

    async def pod(
        self,
        name: str,
        *,
        group: str | None = None,
        claims: dict[str, str] | None = None,
        templates: dict[str, str] | None = None,
        cpu: str = "1",
        priority_class: str | None = None,
    ) -> None:
        pod = make_pod(name, self.namespace).scheduler_name(self.scheduler_name)
        pod.request("cpu", cpu).request("memory", "1Gi")
        if priority_class:
            pod.priority_class(priority_class)
        if group:
            pod.pod_group(group)
        for entry, claim in (claims or {}).items():
            pod.pod_resource_claim(entry, claim=claim)
        for entry, template in (templates or {}).items():
            pod.pod_resource_claim(entry, template=template)
        await self.cluster.create(pod.obj())

    async def pod_group(
        self,
        name: str,
        min_count: int,
        *,
        claims: dict[str, str] | None = None,
        templates: dict[str, str] | None = None,
    ) -> None:
        pg = make_pod_group(name, self.namespace).gang(min_count)
        for entry, claim in (claims or {}).items():
            pg.resource_claim(entry, claim=claim)
        for entry, template in (templates or {}).items():
            pg.resource_claim(entry, template=template)
        await self.cluster.create(from_dict(pg.obj(), PodGroup))

    # ---- reading -----------------------------------------------------------------------

    async def outcome(self) -> dict[str, Any]:
        """Bound pods, PodScheduled reasons, and per claim (named by its pod claim entry and
        owner for generated ones) allocation facts and reservedFor."""
        pods = await self.pods()
        uid_of = {str(p["metadata"]["uid"]): n for n, p in pods.items()}
        node_of = {n: p["spec"].get("nodeName") for n, p in pods.items()}
        out: dict[str, Any] = {"bound": {}, "pending": {}, "claims": {}}
        for n, p in sorted(pods.items()):
            if node_of[n]:
                out["bound"][n] = True
            else:
                cond = next(
                    (
                        c
                        for c in (p.get("status") or {}).get("conditions") or ()
                        if c.get("type") == "PodScheduled"
                    ),
                    {},
                )
                out["pending"][n] = (cond.get("status"), cond.get("reason"))
                out.setdefault("messages", {})[n] = cond.get("message")
        for c in (await self.cluster.list("ResourceClaim", self.namespace)).items:
            assert isinstance(c, dict)
            meta = c["metadata"]
            owner = next(iter(meta.get("ownerReferences") or ()), None)
            label = meta["name"]
            if owner is not None:
                owner_name = uid_of.get(owner["uid"], owner["name"])
                entry = (meta.get("annotations") or {}).get("resource.kubernetes.io/pod-claim-name")
                label = f"{owner['kind']}/{owner_name}/{entry}"
            status = c.get("status") or {}
            results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or ()
            reserved = sorted(
                (r.get("apiGroup", ""), r["resource"], r["name"])
                for r in status.get("reservedFor") or ()
            )
            pools = set()
            for r in results:
                pool = r["pool"]
                users = [pn for pn, node in node_of.items() if node and node == pool]
                pools.add("<pod's node>" if users else pool.removeprefix(f"{self.namespace}-"))
            out["claims"][label] = {
                "allocated": bool(status.get("allocation")),
                "devices": len(results),
                "pools": sorted(pools),
                "reservedFor": reserved,
            }
        return out


@pytest.fixture
async def sides(
    upstream_plane: ControlPlane, our_plane: ControlPlane
) -> AsyncIterator[tuple[Side, Side]]:
    upstream = Side("upstream", upstream_plane, UPSTREAM)
    ours = Side("ours", our_plane, OURS)
    async with parity_sides(upstream, ours) as pair:
        yield pair


def _shared(o: dict[str, Any]) -> dict[str, Any]:
    """What must agree: everything but the messages; the pools the claims got as a multiset
    (which pod of a gang lands on which node is not a DRA question)."""
    out = {k: v for k, v in o.items() if k not in ("messages", "claims")}
    claims = o["claims"]
    out["claims"] = {
        k: {f: v for f, v in c.items() if f != "pools"} for k, c in sorted(claims.items())
    }
    out["pools"] = sorted(tuple(c["pools"]) for c in claims.values())
    return out


def _report(title: str, up: dict[str, Any], ours: dict[str, Any]) -> None:
    print(f"\n== {title}\n  upstream: {up}\n  ours:     {ours}")


async def _settle(s: Side, ready: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        o = await s.outcome()
        return o if ready(o) else None

    return await _until(probe, f"{s.name}: the expected state")


def _decided(n_pods: int, held: tuple[str, ...] = ()) -> Callable[[dict[str, Any]], bool]:
    """Every pod bound or with a PodScheduled condition (``held``: pods PreEnqueue keeps
    without one)."""

    def ready(o: dict[str, Any]) -> bool:
        pending = o["pending"]
        return len(o["bound"]) + len(pending) == n_pods and all(
            v[0] is not None for n, v in pending.items() if n not in held
        )

    return ready


async def test_pod_claims_on_node_local_devices(sides: tuple[Side, Side]) -> None:
    async def scenario(s: Side) -> dict[str, Any]:
        await s.device_class("gpu")
        await s.node_with_gpus("a", 2)
        await s.node_with_gpus("b", 1)
        for i in range(4):
            await s.claim(f"c{i}", "gpu")
            await s.pod(f"p{i}", claims={"gpu": f"c{i}"})
        return await _settle(s, _decided(4))

    up, ours = await both(sides, scenario)
    _report("pod claims on node-local devices (3 devices, 4 pods)", up, ours)
    assert len(up["bound"]) == 3
    assert _shared(up) == _shared(ours)


async def test_claim_for_two_devices_and_a_missing_claim(sides: tuple[Side, Side]) -> None:
    async def scenario(s: Side) -> dict[str, Any]:
        await s.device_class("gpu")
        await s.node_with_gpus("a", 3)
        await s.claim("two", "gpu", count=2)
        await s.claim("two-more", "gpu", count=2)
        await s.pod("p-two", claims={"gpu": "two"})
        await s.pod("p-two-more", claims={"gpu": "two-more"})
        await s.pod("p-missing", claims={"gpu": "missing"})
        return await _settle(s, _decided(3, held=("p-missing",)))

    up, ours = await both(sides, scenario)
    _report("two devices per claim; a missing claim", up, ours)
    assert len(up["bound"]) == 1
    assert up["pending"]["p-missing"] == (None, None)  # held by PreEnqueue, no condition
    assert _shared(up) == _shared(ours)

    async def later(s: Side) -> dict[str, Any]:
        await s.claim("missing", "gpu", count=1)
        return await _settle(s, lambda o: "p-missing" in o["bound"])

    up, ours = await both(sides, later)
    _report("the missing claim created", up, ours)
    assert _shared(up)["claims"] == _shared(ours)["claims"]


async def test_gang_with_template_claims_all_or_nothing(sides: tuple[Side, Side]) -> None:
    async def scenario(s: Side) -> dict[str, Any]:
        await s.device_class("gpu")
        await s.template("one-gpu", "gpu")
        await s.node_with_gpus("a", 1)
        await s.node_with_gpus("b", 1)
        await s.pod_group("train", 3)
        for i in range(3):
            await s.pod(f"train-{i}", group="train", templates={"gpu": "one-gpu"})
        return await _settle(s, _decided(3))

    up, ours = await both(sides, scenario)
    _report("gang of 3 with per-pod template claims, 2 devices", up, ours)
    assert up["bound"] == {}
    assert _shared(up) == _shared(ours)

    async def grow(s: Side) -> dict[str, Any]:
        await s.node_with_gpus("c", 1)
        return await _settle(s, lambda o: len(o["bound"]) == 3)

    up, ours = await both(sides, grow)
    _report("a third device arrives", up, ours)
    assert _shared(up) == _shared(ours)


async def test_group_claim_on_a_rack_wide_device(sides: tuple[Side, Side]) -> None:
    async def scenario(s: Side) -> dict[str, Any]:
        await s.device_class("fabric")
        for n in ("r1a", "r1b"):
            await s.node(n, labels={"rack": "r1"})
        await s.node("r2a", cpu="16", labels={"rack": "r2"})
        await s.slice(
            "fabric-r1",
            {
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}
                    ]
                }
            },
            [{"name": "switch"}],
        )
        await s.template("fabric", "fabric")
        await s.pod_group("ring", 2, templates={"fabric": "fabric"})
        for i in range(2):
            await s.pod(f"ring-{i}", group="ring", templates={"fabric": "fabric"}, cpu="3")
        o = await _settle(s, _decided(2))
        racks = set()
        for p in (await s.pods()).values():
            node = p["spec"].get("nodeName")
            if node:
                obj = await s.cluster.get("Node", node)
                assert isinstance(obj, dict)
                racks.add(obj["metadata"]["labels"]["rack"])
        o["racks"] = sorted(racks)
        return o

    up, ours = await both(sides, scenario)
    _report("a PodGroup claim on a rack-wide device", up, ours)
    assert _shared(up) == _shared(ours)


async def test_one_claim_shared_by_two_pods(sides: tuple[Side, Side]) -> None:
    async def scenario(s: Side) -> dict[str, Any]:
        await s.device_class("gpu")
        await s.node_with_gpus("a", 1)
        await s.node_with_gpus("b", 1)
        await s.claim("shared", "gpu")
        for n in ("p", "q"):
            await s.pod(n, claims={"gpu": "shared"})
        # both must end bound; upstream may first mark the second pod Unschedulable (the
        # claim's allocation not yet seen) and bind it on the retry, so wait for the end
        # state rather than the first decided one
        o = await _settle(s, lambda o: len(o["bound"]) == 2)
        nodes = {p["spec"].get("nodeName") for p in (await s.pods()).values()}
        o["same_node"] = len(nodes) == 1
        return o

    up, ours = await both(sides, scenario)
    _report("one claim shared by two pods", up, ours)
    assert len(up["bound"]) == 2 and up["same_node"]
    # which of the two equal nodes is a tie-break (upstream's is random): not compared
    shared_up, shared_ours = _shared(up), _shared(ours)
    for o in (shared_up, shared_ours):
        assert len(o.pop("pools")) == 1
    assert shared_up == shared_ours


async def test_claim_reservations_through_the_pods_lifecycle(sides: tuple[Side, Side]) -> None:
    """As upstream's test/integration/dra workload-claims case: a basic PodGroup with its own
    claim, two pods sharing a pod-level claim; the pods' reservations go with the pods
    (kube-controller-manager), the PodGroup's with the PodGroup."""

    async def reservations(s: Side) -> dict[str, Any]:
        out = {}
        for name in ("for-group", "for-pods"):
            c = await s.cluster.get("ResourceClaim", name, s.namespace)
            assert isinstance(c, dict)
            st = c.get("status") or {}
            out[name] = (
                bool(st.get("allocation")),
                sorted((r.get("resource"), r.get("name")) for r in st.get("reservedFor") or ()),
            )
        return out

    async def scenario(s: Side) -> list[dict[str, Any]]:
        await s.device_class("gpu")
        await s.node_with_gpus("a", 2)
        await s.claim("for-group", "gpu")
        await s.claim("for-pods", "gpu")
        pg = make_pod_group("pg", s.namespace).basic().resource_claim("grp", claim="for-group")
        await s.cluster.create(from_dict(pg.obj(), PodGroup))
        for n in ("p1", "p2"):
            await s.pod(n, group="pg", claims={"grp": "for-group", "own": "for-pods"})
        await _settle(s, lambda o: len(o["bound"]) == 2)
        steps = [await reservations(s)]
        for n in ("p1", "p2"):
            await s.cluster.delete("Pod", n, s.namespace, grace_period_seconds=0)

            async def released(n: str = n) -> dict[str, Any] | None:
                r = await reservations(s)
                return r if all(x[1] != n for x in r["for-pods"][1]) else None

            steps.append(await _until(released, f"{s.name}: {n} released"))
        await s.cluster.delete("PodGroup", "pg", s.namespace)

        async def group_released() -> dict[str, Any] | None:
            r = await reservations(s)
            return r if not r["for-group"][1] else None

        steps.append(await _until(group_released, f"{s.name}: the PodGroup's claim released"))
        return steps

    up, ours = await both(sides, scenario)
    for i, (u, o) in enumerate(zip(up, ours, strict=True)):
        print(f"\n== lifecycle step {i}\n  upstream: {u}\n  ours:     {o}")
    assert up[0]["for-group"] == (True, [("podgroups", "pg")])
    assert up == ours


async def test_cel_selectors_over_attributes_and_capacity(sides: tuple[Side, Side]) -> None:
    """A class selector over an attribute and a request selector over a capacity: only the
    devices matching both are allocated, the same devices on both schedulers."""
    model = f'device.attributes["{DRIVER}"].model == "H100"'
    memory = f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0'

    def dev(name: str, kind: str, mem: str) -> dict[str, Any]:
        return {
            "name": name,
            "attributes": {"model": {"string": kind}},
            "capacity": {"memory": {"value": mem}},
        }

    async def scenario(s: Side) -> dict[str, Any]:
        await s.device_class("h100", model)
        a = await s.node("a")
        b = await s.node("b")
        await s.slice(
            "a-gpus",
            {"nodeName": a},
            [
                dev("gpu-0", "A100", "80Gi"),
                dev("gpu-1", "H100", "20Gi"),
                dev("gpu-2", "H100", "80Gi"),
            ],
        )
        await s.slice(
            "b-gpus", {"nodeName": b}, [dev("gpu-0", "H100", "40Gi"), dev("gpu-1", "A100", "40Gi")]
        )
        for i in range(3):
            await s.claim(f"c{i}", "h100", selectors=(memory,))
            await s.pod(f"p{i}", claims={"gpu": f"c{i}"})
        o = await _settle(s, _decided(3))
        devices = []
        for c in (await s.cluster.list("ResourceClaim", s.namespace)).items:
            assert isinstance(c, dict)
            alloc = (c.get("status") or {}).get("allocation") or {}
            for r in (alloc.get("devices") or {}).get("results") or ():
                devices.append((r["pool"].removeprefix(f"{s.namespace}-"), r["device"]))
        o["devices"] = sorted(devices)
        return o

    up, ours = await both(sides, scenario)
    _report("CEL selectors over an attribute (class) and a capacity (request)", up, ours)
    assert up["devices"] == [("a-gpus", "gpu-2"), ("b-gpus", "gpu-0")]
    assert len(up["bound"]) == 2 and len(up["pending"]) == 1
    assert (up["devices"], _shared(up)) == (ours["devices"], _shared(ours))


async def test_single_pod_preemption_frees_no_devices(sides: tuple[Side, Side]) -> None:
    """kube-scheduler v1.37.2 does not preempt a pod for the devices its claim holds (the
    DynamicResources plugin has no PreFilterExtensions; its Filter failure is unresolvable):
    a higher-priority pod short of cpu and of the only device stays pending, the holder
    keeps running. Ours matches."""

    async def scenario(s: Side) -> dict[str, Any]:
        await s.device_class("gpu")
        await s.node_with_gpus("a", 1)
        low = await s.priority_class("low", 10)
        high = await s.priority_class("high", 1000)
        await s.claim("held", "gpu")
        await s.claim("wanted", "gpu")
        await s.pod("holder", claims={"gpu": "held"}, cpu="4", priority_class=low)
        await _settle(s, lambda o: "holder" in o["bound"])
        await s.pod("urgent", claims={"gpu": "wanted"}, cpu="4", priority_class=high)
        o = await _settle(s, _decided(2))
        pods = await s.pods()
        o["holder_deleting"] = bool(pods["holder"]["metadata"].get("deletionTimestamp"))
        o["nominated"] = (pods["urgent"].get("status") or {}).get("nominatedNodeName")
        return o

    up, ours = await both(sides, scenario)
    _report("a single pod does not preempt for a device", up, ours)
    assert up["pending"] == {"urgent": ("False", "Unschedulable")}
    assert not up["holder_deleting"] and not up["nominated"]
    assert _shared(up) == _shared(ours)
