"""DeviceClasses, ResourceSlices and ResourceClaims for the DRA behaviour tests (created by
the test: no driver, no kubelet)."""

from __future__ import annotations

import contextlib
from typing import Any

from sched_helpers import Env

from workloadbuilder.api import PodGroup, from_dict
from workloadbuilder.errors import NotFound
from workloadbuilder.testing.builders import make_pod, make_pod_group

DRIVER = "gpu.example.com"
V1 = "resource.k8s.io/v1"


class Dra:
    """Creates the test's DRA objects (cluster-scoped ones with the env's prefix) and removes
    them again on the real server."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self.cluster_scoped: list[tuple[str, str]] = []

    def name(self, name: str) -> str:
        return f"{self.env.prefix}{name}"

    async def device_class(self, name: str, *expressions: str) -> str:
        full = self.name(name)
        exprs = expressions or (f'device.driver == "{DRIVER}"',)
        await self.env.cluster.create(
            {
                "apiVersion": V1,
                "kind": "DeviceClass",
                "metadata": {"name": full},
                "spec": {"selectors": [{"cel": {"expression": e}} for e in exprs]},
            }
        )
        self.cluster_scoped.append(("DeviceClass", full))
        return full

    async def node_slice(
        self, node: str, count: int, *, attributes: dict[str, Any] | None = None, **per: Any
    ) -> str:
        """A slice of ``count`` devices local to ``node`` (``gpu-0``...), pool = node.
        ``per`` maps an attribute to a list of per-device values."""
        devices = []
        for i in range(count):
            attrs = {k: {"string": v} for k, v in (attributes or {}).items()}
            for k, values in per.items():
                attrs[k] = (
                    {"int": values[i]} if isinstance(values[i], int) else {"string": values[i]}
                )
            devices.append(
                {
                    "name": f"gpu-{i}",
                    "attributes": attrs,
                    "capacity": {"memory": {"value": "80Gi"}},
                }
            )
        return await self.slice(
            f"{node}-gpus", {"nodeName": node}, pool=node, devices=devices, prefix_pool=False
        )

    async def gpu_partitions(
        self,
        node: str,
        *,
        gpus: int = 1,
        slices: int = 7,
        taints: dict[str, list[dict[str, Any]]] | None = None,
    ) -> None:
        """Partitionable GPUs local to ``node`` (pool = node): per GPU ``j`` a counter set
        ``gpu-j`` (``slices`` slices, 40Gi of memory) in a slice of its own, and devices
        ``gpu-j`` (the whole GPU: every slice, 40Gi) and ``gpu-j-s<k>`` (one slice, 5Gi),
        with the attribute ``kind`` full or slice. ``taints`` maps a device to its taints."""
        devices: list[dict[str, Any]] = []
        sets: list[dict[str, Any]] = []
        for j in range(gpus):
            cs = f"gpu-{j}"
            sets.append(
                {
                    "name": cs,
                    "counters": {"slices": {"value": str(slices)}, "memory": {"value": "40Gi"}},
                }
            )
            parts = [(cs, "full", slices, "40Gi")]
            parts += [(f"{cs}-s{k}", "slice", 1, "5Gi") for k in range(slices)]
            for name, kind, n, mem in parts:
                dev: dict[str, Any] = {
                    "name": name,
                    "attributes": {"kind": {"string": kind}},
                    "consumesCounters": [
                        {
                            "counterSet": cs,
                            "counters": {"slices": {"value": str(n)}, "memory": {"value": mem}},
                        }
                    ],
                }
                if taints and name in taints:
                    dev["taints"] = taints[name]
                devices.append(dev)
        where = {"nodeName": node}
        await self.slice(
            f"{node}-counters", where, pool=node, prefix_pool=False, shared_counters=sets, count=2
        )
        await self.slice(
            f"{node}-gpus", where, pool=node, devices=devices, prefix_pool=False, count=2
        )

    async def taint_rule(self, name: str, selector: dict[str, str], taint: dict[str, str]) -> str:
        """A DeviceTaintRule putting ``taint`` on the devices ``selector`` selects."""
        full = self.name(name)
        await self.env.cluster.create(
            {
                "apiVersion": V1,
                "kind": "DeviceTaintRule",
                "metadata": {"name": full},
                "spec": {"deviceSelector": selector, "taint": taint},
            }
        )
        self.cluster_scoped.append(("DeviceTaintRule", full))
        return full

    async def slice(
        self,
        name: str,
        where: dict[str, Any],
        *,
        pool: str,
        devices: list[dict[str, Any]] | None = None,
        driver: str = DRIVER,
        prefix_pool: bool = True,
        shared_counters: list[dict[str, Any]] | None = None,
        count: int = 1,
    ) -> str:
        full = self.name(name)
        content: dict[str, Any] = (
            {"sharedCounters": shared_counters} if shared_counters else {"devices": devices or []}
        )
        await self.env.cluster.create(
            {
                "apiVersion": V1,
                "kind": "ResourceSlice",
                "metadata": {"name": full},
                "spec": {
                    "driver": driver,
                    # pools (and so device ids) are cluster-wide: one of the test's own
                    "pool": {
                        "name": self.name(pool) if prefix_pool else pool,
                        "generation": 1,
                        "resourceSliceCount": count,
                    },
                    **where,
                    **content,
                },
            }
        )
        self.cluster_scoped.append(("ResourceSlice", full))
        return full

    async def claim(
        self,
        name: str,
        device_class: str,
        *,
        count: int | None = None,
        selectors: tuple[str, ...] = (),
        mode: str | None = None,
        requests: list[dict[str, Any]] | None = None,
        constraints: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        if requests is None:
            exactly: dict[str, Any] = {"deviceClassName": device_class}
            if selectors:
                exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
            if count is not None:
                exactly["count"] = count
            if mode is not None:
                exactly["allocationMode"] = mode
            requests = [{"name": "gpu", "exactly": exactly}]
        devices: dict[str, Any] = {"requests": requests}
        if constraints:
            devices["constraints"] = constraints
        out = await self.env.cluster.create(
            {
                "apiVersion": V1,
                "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": self.env.namespace},
                "spec": {"devices": devices},
            }
        )
        assert isinstance(out, dict)
        return out

    async def get_claim(self, name: str) -> dict[str, Any]:
        out = await self.env.cluster.get("ResourceClaim", name, self.env.namespace)
        assert isinstance(out, dict)
        return out

    async def pod(
        self,
        name: str,
        claims: dict[str, str],
        group: str | None = None,
        *,
        cpu: str = "1",
        templates: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """A pod of the env's scheduler with ``resourceClaims`` entries (entry -> claim)."""
        pod = make_pod(name, self.env.namespace).scheduler_name(self.env.scheduler_name)
        pod.request("cpu", cpu).request("memory", "1Gi")
        if group:
            pod.pod_group(group)
        for entry, claim in claims.items():
            pod.pod_resource_claim(entry, claim=claim)
        for entry, template in (templates or {}).items():
            pod.pod_resource_claim(entry, template=template)
        out = await self.env.cluster.create(pod.obj())
        assert isinstance(out, dict)
        return out

    async def pod_group(
        self,
        name: str,
        min_count: int,
        *,
        claims: dict[str, str] | None = None,
        templates: dict[str, str] | None = None,
    ) -> PodGroup:
        pg = make_pod_group(name, self.env.namespace).gang(min_count)
        for entry, claim in (claims or {}).items():
            pg.resource_claim(entry, claim=claim)
        for entry, template in (templates or {}).items():
            pg.resource_claim(entry, template=template)
        out = await self.env.cluster.create(from_dict(pg.obj(), PodGroup))
        assert isinstance(out, PodGroup)
        return out

    async def cleanup(self) -> None:
        if self.env.backend == "memory":
            return
        for kind, name in reversed(self.cluster_scoped):
            with contextlib.suppress(NotFound):
                await self.env.cluster.delete(kind, name)


def allocated(claim: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """``(request, driver, pool, device)`` of a claim's allocation."""
    alloc = (claim.get("status") or {}).get("allocation") or {}
    return [
        (r["request"], r["driver"], r["pool"], r["device"])
        for r in (alloc.get("devices") or {}).get("results") or ()
    ]


def reserved(claim: dict[str, Any]) -> list[tuple[str, str, str]]:
    """``(apiGroup, resource, name)`` of a claim's ``reservedFor``."""
    return [
        (r.get("apiGroup", ""), r["resource"], r["name"])
        for r in (claim.get("status") or {}).get("reservedFor") or ()
    ]
