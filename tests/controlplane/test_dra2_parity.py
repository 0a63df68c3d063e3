"""DRA round 2 parity: prioritized alternatives, partitionable devices and device taints
through kube-scheduler v1.37.2 and through our scheduler, each on its own plane (no driver,
no kubelet: the tests create the ResourceSlices; the claims are the pods' own, so no
resourceclaim controller is needed).

Compared: which pods are bound, and per claim the ``request`` (``<request>/<subrequest>``
for a ``firstAvailable`` alternative) and the device of each allocation result. Messages
are printed (``pytest -s``), not compared.
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
from workloadbuilder.testing.builders import make_pod, make_pod_group

pytestmark = [pytest.mark.controlplane]

OURS = "wb-dra2-parity"
DRIVER = "gpu.example.com"
V1 = "resource.k8s.io/v1"
TIMEOUT = 40.0
KIND = f'device.attributes["{DRIVER}"].kind == "{{}}"'
_T = TypeVar("_T")


@pytest.fixture(scope="module")
def upstream_plane(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """kube-scheduler v1.37.2."""
    with parity_plane(control_plane, upstream=True, controller_manager=False) as plane:
        yield plane


@pytest.fixture(scope="module")
def our_plane(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """No scheduler: ours runs in process."""
    with parity_plane(control_plane, upstream=False, controller_manager=False) as plane:
        yield plane


class Side(ParitySide):
    """One scheduler's side: DeviceClasses, slices, claims and pods of its own."""

    def __init__(self, name: str, plane: ControlPlane, scheduler_name: str) -> None:
        super().__init__(name, plane, scheduler_name, "dra2")

    async def device_class(self, name: str) -> str:
        full = self.full(name)
        await self.cluster.create(
            {
                "apiVersion": V1,
                "kind": "DeviceClass",
                "metadata": {"name": full},
                "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
            }
        )
        self.track("DeviceClass", full)
        return full

    async def slice(self, name: str, node: str, count: int, content: dict[str, Any]) -> None:
        """A slice local to ``node`` in the pool named after the node (``count`` slices)."""
        full = self.full(name)
        await self.cluster.create(
            {
                "apiVersion": V1,
                "kind": "ResourceSlice",
                "metadata": {"name": full},
                "spec": {
                    "driver": DRIVER,
                    "pool": {"name": node, "generation": 1, "resourceSliceCount": count},
                    "nodeName": node,
                    **content,
                },
            }
        )
        self.track("ResourceSlice", full)

    async def partitioned_gpu(self, name: str, slices: int) -> str:
        """A node with one partitionable GPU: the whole GPU ``gpu`` (kind full) and
        ``s<k>`` (kind slice), consuming the counter set ``gpu-0``."""
        node = await self.node(name, cpu="16")
        await self.slice(
            f"{name}-counters",
            node,
            2,
            {
                "sharedCounters": [
                    {
                        "name": "gpu-0",
                        "counters": {
                            "slices": {"value": str(slices)},
                            "memory": {"value": "40Gi"},
                        },
                    }
                ]
            },
        )
        parts = [("gpu", "full", slices, "40Gi")]
        parts += [(f"s{k}", "slice", 1, "5Gi") for k in range(slices)]
        devices = [
            {
                "name": dev,
                "attributes": {"kind": {"string": kind}},
                "consumesCounters": [
                    {
                        "counterSet": "gpu-0",
                        "counters": {"slices": {"value": str(n)}, "memory": {"value": mem}},
                    }
                ],
            }
            for dev, kind, n, mem in parts
        ]
        await self.slice(f"{name}-gpus", node, 2, {"devices": devices})
        return node

    async def claim(self, name: str, requests: list[dict[str, Any]]) -> None:
        await self.cluster.create(
            {
                "apiVersion": V1,
                "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": self.namespace},
                "spec": {"devices": {"requests": requests}},
            }
        )

    def exactly(self, cls: str, kind: str | None = None, **more: Any) -> list[dict[str, Any]]:
        ex: dict[str, Any] = {"deviceClassName": self.full(cls), **more}
        if kind:
            ex["selectors"] = [{"cel": {"expression": KIND.format(kind)}}]
        return [{"name": "gpu", "exactly": ex}]

    def full_else_slices(self, cls: str) -> list[dict[str, Any]]:
        def sub(name: str, kind: str, count: int) -> dict[str, Any]:
            return {
                "name": name,
                "deviceClassName": self.full(cls),
                "count": count,
                "selectors": [{"cel": {"expression": KIND.format(kind)}}],
            }

        return [{"name": "gpu", "firstAvailable": [sub("full", "full", 1), sub("two", "slice", 2)]}]

    async def pod(self, name: str, claim: str, group: str | None = None) -> None:
        pod = make_pod(name, self.namespace).scheduler_name(self.scheduler_name)
        pod.request("cpu", "1").request("memory", "1Gi")
        if group:
            pod.pod_group(group)
        pod.pod_resource_claim("gpu", claim=claim)
        await self.cluster.create(pod.obj())

    async def pod_group(self, name: str, min_count: int) -> None:
        pg = make_pod_group(name, self.namespace).gang(min_count)
        await self.cluster.create(from_dict(pg.obj(), PodGroup))

    async def outcome(self) -> dict[str, Any]:
        """Bound pods, pending pods' PodScheduled status, and per claim its results as
        (request, device)."""
        pods = await self.pods()
        out: dict[str, Any] = {"bound": [], "pending": {}, "claims": {}, "messages": {}}
        for n, p in sorted(pods.items()):
            if p["spec"].get("nodeName"):
                out["bound"].append(n)
                continue
            cond = next(
                (
                    c
                    for c in (p.get("status") or {}).get("conditions") or ()
                    if c.get("type") == "PodScheduled"
                ),
                {},
            )
            out["pending"][n] = (cond.get("status"), cond.get("reason"))
            out["messages"][n] = cond.get("message")
        for c in (await self.cluster.list("ResourceClaim", self.namespace)).items:
            assert isinstance(c, dict)
            alloc = (c.get("status") or {}).get("allocation") or {}
            out["claims"][c["metadata"]["name"]] = [
                (r["request"], r["device"])
                for r in (alloc.get("devices") or {}).get("results") or ()
            ]
        return out


@pytest.fixture
async def sides(
    upstream_plane: ControlPlane, our_plane: ControlPlane
) -> AsyncIterator[tuple[Side, Side]]:
    upstream = Side("upstream", upstream_plane, UPSTREAM)
    ours = Side("ours", our_plane, OURS)
    async with parity_sides(upstream, ours) as pair:
        yield pair


async def _settle(s: Side, ready: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        o = await s.outcome()
        return o if ready(o) else None

    return await until(probe, f"{s.name}: the expected state", timeout=TIMEOUT, interval=0.2)


def _decided(n: int) -> Callable[[dict[str, Any]], bool]:
    def ready(o: dict[str, Any]) -> bool:
        pending = o["pending"]
        return len(o["bound"]) + len(pending) == n and all(v[0] for v in pending.values())

    return ready


def _report(title: str, up: dict[str, Any], ours: dict[str, Any]) -> None:
    print(f"\n== {title}\n  upstream: {up}\n  ours:     {ours}")


def _compared(o: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in o.items() if k != "messages"}


async def _run(sides: tuple[Side, Side], scenario: Callable[[Side], Awaitable[_T]]) -> list[_T]:
    return await both(sides, scenario)


async def test_first_available_falls_back_to_its_second_alternative(
    sides: tuple[Side, Side],
) -> None:
    async def scenario(s: Side) -> dict[str, Any]:
        cls = await s.device_class("gpu")
        node = await s.node("a")
        await s.slice("a-gpus", node, 1, {"devices": [{"name": "gpu-0"}]})
        subs = [
            {"name": "two", "deviceClassName": cls, "count": 2},
            {"name": "one", "deviceClassName": cls},
        ]
        await s.claim("choice", [{"name": "gpu", "firstAvailable": subs}])
        await s.pod("p", "choice")
        return await _settle(s, _decided(1))

    up, ours = await _run(sides, scenario)
    _report("firstAvailable: two devices, else one (one device)", up, ours)
    assert up["claims"] == {"choice": [("gpu/one", "gpu-0")]}
    assert _compared(up) == _compared(ours)


async def test_partitions_of_one_gpu_are_never_double_allocated(
    sides: tuple[Side, Side],
) -> None:
    async def scenario(s: Side) -> list[dict[str, Any]]:
        await s.device_class("gpu")
        await s.partitioned_gpu("a", 3)
        for i in range(4):
            await s.claim(f"part-{i}", s.exactly("gpu", "slice"))
            await s.pod(f"part-{i}", f"part-{i}")
        first = await _settle(s, _decided(4))
        # the three slices are out: the whole GPU has no counters left
        await s.claim("whole", s.exactly("gpu", "full"))
        await s.pod("whole", "whole")
        second = await _settle(s, _decided(5))
        devices = sorted(d for c in second["claims"].values() for _, d in c)
        return [
            {"bound": len(first["bound"]), "pending": len(first["pending"])},
            {"whole": second["pending"].get("whole"), "devices": devices},
            second,
        ]

    up, ours = await _run(sides, scenario)
    _report("4 pods for slices of a 3-slice GPU, then one for the whole GPU", up[2], ours[2])
    assert up[0] == {"bound": 3, "pending": 1}
    assert up[1] == {"whole": ("False", "Unschedulable"), "devices": ["s0", "s1", "s2"]}
    assert up[:2] == ours[:2]


async def test_a_gang_takes_whole_gpus_first_then_nothing_overlaps(
    sides: tuple[Side, Side],
) -> None:
    async def scenario(s: Side) -> list[dict[str, Any]]:
        await s.device_class("gpu")
        for n in ("a", "b"):
            await s.partitioned_gpu(n, 3)
        await s.pod_group("pair", 2)
        for i in range(2):
            await s.claim(f"pair-{i}", s.full_else_slices("gpu"))
            await s.pod(f"pair-{i}", f"pair-{i}", "pair")
        first = await _settle(s, _decided(2))
        await s.claim("late", s.full_else_slices("gpu"))
        await s.pod("late", "late")
        second = await _settle(s, _decided(3))
        return [first, second]

    up, ours = await _run(sides, scenario)
    for u, o in zip(up, ours, strict=True):
        _report("a gang of 2 (whole GPU else two slices) on 2 GPUs; then one more", u, o)
    assert up[0]["claims"] == {
        "pair-0": [("gpu/full", "gpu")],
        "pair-1": [("gpu/full", "gpu")],
    }
    assert up[1]["pending"] == {"late": ("False", "Unschedulable")}
    assert [_compared(o) for o in up] == [_compared(o) for o in ours]


async def test_a_tainted_device_is_skipped_unless_tolerated(sides: tuple[Side, Side]) -> None:
    async def scenario(s: Side) -> list[dict[str, Any]]:
        await s.device_class("gpu")
        node = await s.node("a", cpu="16")
        taint = {"key": "example.com/broken", "effect": "NoSchedule"}
        devices = [{"name": "gpu-0", "taints": [taint]}, {"name": "gpu-1"}]
        await s.slice("a-gpus", node, 1, {"devices": devices})
        for i in range(2):
            await s.claim(f"plain-{i}", s.exactly("gpu"))
            await s.pod(f"plain-{i}", f"plain-{i}")
        first = await _settle(s, _decided(2))
        tolerations = [{"key": "example.com/broken", "operator": "Exists"}]
        await s.claim("tolerant", s.exactly("gpu", tolerations=tolerations))
        await s.pod("tolerant", "tolerant")
        second = await _settle(s, lambda o: "tolerant" in o["bound"] or _decided(3)(o))
        return [
            {"bound": len(first["bound"]), "devices": sorted(first["claims"].items())},
            second,
        ]

    up, ours = await _run(sides, scenario)
    _report("a tainted and a clean device; two plain claims, then a tolerant one", up[1], ours[1])
    assert up[0]["bound"] == 1
    assert [d for _, c in up[0]["devices"] for _, d in c] == ["gpu-1"]
    assert up[1]["claims"]["tolerant"] == [("gpu", "gpu-0")]
    assert up[0]["bound"] == ours[0]["bound"]
    assert [d for _, c in ours[0]["devices"] for _, d in c] == ["gpu-1"]
    assert _compared(up[1])["claims"]["tolerant"] == _compared(ours[1])["claims"]["tolerant"]
    assert len(up[1]["bound"]) == len(ours[1]["bound"]) == 2


async def test_a_device_taint_rule_is_honoured(sides: tuple[Side, Side]) -> None:
    """DRADeviceTaintRules (GA, on in v1.37.2): a DeviceTaintRule's taint keeps the device
    it selects from untolerating requests, as a slice's own taint does."""

    async def scenario(s: Side) -> list[dict[str, Any]]:
        await s.device_class("gpu")
        node = await s.node("a", cpu="16")
        await s.slice("a-gpus", node, 1, {"devices": [{"name": "gpu-0"}, {"name": "gpu-1"}]})
        rule = s.full("maint")
        await s.cluster.create(
            {
                "apiVersion": V1,
                "kind": "DeviceTaintRule",
                "metadata": {"name": rule},
                "spec": {
                    "deviceSelector": {"driver": DRIVER, "pool": node, "device": "gpu-0"},
                    "taint": {"key": "example.com/maint", "effect": "NoSchedule"},
                },
            }
        )
        s.track("DeviceTaintRule", rule)
        for i in range(2):
            await s.claim(f"plain-{i}", s.exactly("gpu"))
            await s.pod(f"plain-{i}", f"plain-{i}")
        first = await _settle(s, _decided(2))
        tolerations = [{"key": "example.com/maint", "operator": "Exists"}]
        await s.claim("tolerant", s.exactly("gpu", tolerations=tolerations))
        await s.pod("tolerant", "tolerant")
        second = await _settle(s, lambda o: "tolerant" in o["bound"] or _decided(3)(o))
        return [
            {
                "bound": len(first["bound"]),
                "devices": sorted(d for c in first["claims"].values() for _, d in c),
            },
            {"tolerant": second["claims"]["tolerant"], "bound": len(second["bound"])},
        ]

    up, ours = await _run(sides, scenario)
    _report("a DeviceTaintRule on one of two devices", up[0], ours[0])
    _report("then a tolerating claim", up[1], ours[1])
    assert up == [
        {"bound": 1, "devices": ["gpu-1"]},
        {"tolerant": [("gpu", "gpu-0")], "bound": 2},
    ]
    assert up == ours


async def test_the_claims_of_one_pod_are_allocated_together(sides: tuple[Side, Side]) -> None:
    """A pod with two claims: the first's first alternative would take the only big device
    the second needs; upstream searches both claims together and the first falls back."""
    big = f'device.capacity["{DRIVER}"].memory.compareTo(quantity("8Gi")) >= 0'

    async def scenario(s: Side) -> dict[str, Any]:
        cls = await s.device_class("gpu")
        node = await s.node("a")
        devices = [
            {"name": "big", "capacity": {"memory": {"value": "8Gi"}}},
            {"name": "small", "capacity": {"memory": {"value": "4Gi"}}},
        ]
        await s.slice("a-gpus", node, 1, {"devices": devices})
        sel = [{"cel": {"expression": big}}]
        subs = [
            {"name": "big", "deviceClassName": cls, "selectors": sel},
            {"name": "any", "deviceClassName": cls},
        ]
        await s.claim("first", [{"name": "gpu", "firstAvailable": subs}])
        await s.claim(
            "second", [{"name": "gpu", "exactly": {"deviceClassName": cls, "selectors": sel}}]
        )
        pod = make_pod("p", s.namespace).scheduler_name(s.scheduler_name)
        pod.request("cpu", "1").request("memory", "1Gi")
        pod.pod_resource_claim("one", claim="first").pod_resource_claim("two", claim="second")
        await s.cluster.create(pod.obj())
        return await _settle(s, _decided(1))

    up, ours = await _run(sides, scenario)
    _report("two claims of one pod searched together", up, ours)
    assert up["claims"] == {"first": [("gpu/any", "small")], "second": [("gpu", "big")]}
    assert _compared(up) == _compared(ours)
