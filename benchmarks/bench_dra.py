"""Scheduler throughput with Dynamic Resource Allocation, in process on MemoryCluster.

N nodes, each with one ResourceSlice of D devices (``gpu.example.com``: attribute ``model``,
capacity ``memory``), one DeviceClass, and gangs of 8-64 pods (one PodGroup each, minCount =
size) whose pods each have one claim from a ResourceClaimTemplate of the gang (1-8 devices,
with a CEL selector over an attribute and a capacity), created until the devices asked for
reach ``--fill`` of the devices there are. MemoryCluster's ResourceClaim controller makes the
claims. The scheduler then runs until idle: every cycle, allocation, claim status write
(finalizer + allocation + reservedFor), binding, status write and event finished.

Reports pods/s (pods bound / wall time until idle) and pods per CPU second of this process
(steadier on a shared machine), how many pods and devices were allocated, and checks that no
device was allocated twice.

    .venv/bin/python benchmarks/bench_dra.py                  # 1,000 nodes x 8 devices
    .venv/bin/python benchmarks/bench_dra.py --nodes 200 --json
    .venv/bin/python benchmarks/bench_dra.py --partitions 7   # 8 GPUs x 7 slices per node
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import random
import resource
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workloadbuilder.api import (
    GangSchedulingPolicy,
    ObjectMeta,
    PodGroup,
    PodGroupSchedulingPolicy,
    PodGroupSpec,
)
from workloadbuilder.cluster import MemoryCluster
from workloadbuilder.scheduler import Scheduler, SchedulerConfig

DRIVER = "gpu.example.com"
SELECTOR = (
    f'device.attributes["{DRIVER}"].model == "H100" && '
    f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0'
)


def _node(i: int) -> dict[str, Any]:
    alloc = {"cpu": "128", "memory": "1024Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": f"node-{i:05d}", "labels": {"rack": f"rack-{i // 16}"}},
        "status": {"allocatable": alloc, "capacity": alloc},
    }


def _slice(i: int, devices: int) -> dict[str, Any]:
    node = f"node-{i:05d}"
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpus"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"gpu-{d}",
                    "attributes": {"model": {"string": "H100"}, "index": {"int": d}},
                    "capacity": {"memory": {"value": "80Gi"}},
                }
                for d in range(devices)
            ],
        },
    }


def _partitioned(i: int, gpus: int, parts: int) -> list[dict[str, Any]]:
    """A node's partitionable GPUs: a slice of counter sets (``gpu-<d>``: ``parts`` slices,
    40Gi) and a slice of devices: per GPU the whole GPU (kind full) and ``parts`` one-slice
    partitions (kind slice), each consuming its GPU's counters."""
    node = f"node-{i:05d}"
    pool = {"name": node, "generation": 1, "resourceSliceCount": 2}
    sets = [
        {
            "name": f"gpu-{d}",
            "counters": {"slices": {"value": str(parts)}, "memory": {"value": "40Gi"}},
        }
        for d in range(gpus)
    ]
    devices = []
    for d in range(gpus):
        cut = [(f"gpu-{d}", "full", parts, "40Gi")]
        cut += [(f"gpu-{d}-s{k}", "slice", 1, "5Gi") for k in range(parts)]
        for name, kind, n, mem in cut:
            devices.append(
                {
                    "name": name,
                    "attributes": {"model": {"string": "H100"}, "kind": {"string": kind}},
                    "capacity": {"memory": {"value": mem}},
                    "consumesCounters": [
                        {
                            "counterSet": f"gpu-{d}",
                            "counters": {"slices": {"value": str(n)}, "memory": {"value": mem}},
                        }
                    ],
                }
            )
    spec = {"driver": DRIVER, "nodeName": node, "pool": pool}
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-counters"},
            "spec": {**spec, "sharedCounters": sets},
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-gpus"},
            "spec": {**spec, "devices": devices},
        },
    ]


def _first_available(name: str) -> dict[str, Any]:
    """A template: the whole GPU, else two slices of one."""

    def sub(sub_name: str, kind: str, count: int) -> dict[str, Any]:
        expr = f'device.attributes["{DRIVER}"].kind == "{kind}"'
        return {
            "name": sub_name,
            "deviceClassName": "gpu",
            "count": count,
            "selectors": [{"cel": {"expression": expr}}],
        }

    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "firstAvailable": [sub("full", "full", 1), sub("two", "slice", 2)],
                        }
                    ]
                }
            }
        },
    }


def _template(name: str, count: int) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {
                                "deviceClassName": "gpu",
                                "count": count,
                                "selectors": [{"cel": {"expression": SELECTOR}}],
                            },
                        }
                    ]
                }
            }
        },
    }


def _pod(name: str, group: str, template: str, scheduler: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": scheduler,
            "schedulingGroup": {"podGroupName": group},
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {
                        "requests": {"cpu": "1", "memory": "2Gi"},
                        "claims": [{"name": "gpu"}],
                    },
                }
            ],
        },
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    cluster = MemoryCluster(share_objects=True)
    await cluster.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        }
    )
    for i in range(args.nodes):
        await cluster.create(_node(i))
        if args.partitions:
            for sl in _partitioned(i, args.devices, args.partitions):
                await cluster.create(sl)
        else:
            await cluster.create(_slice(i, args.devices))
    supply = args.nodes * args.devices
    config = SchedulerConfig(record_events=not args.no_events)
    gangs: list[tuple[str, int, int]] = []
    asked = 0
    while asked < args.fill * supply:
        size = rng.randint(args.min_gang, args.max_gang)
        # partitions: one GPU's worth per pod (the whole GPU, else two slices)
        count = 1 if args.partitions else rng.randint(1, args.devices)
        gangs.append((f"gang-{len(gangs):05d}", size, count))
        asked += size * count
    pods = 0
    t_setup = time.perf_counter()
    for name, size, count in gangs:
        await cluster.create(_first_available(name) if args.partitions else _template(name, count))
        await cluster.create(
            PodGroup(
                metadata=ObjectMeta(name=name, namespace="default"),
                spec=PodGroupSpec(
                    scheduling_policy=PodGroupSchedulingPolicy(
                        gang=GangSchedulingPolicy(min_count=size)
                    )
                ),
            )
        )
        for j in range(size):
            await cluster.create(_pod(f"{name}-{j}", name, name, config.scheduler_name))
            pods += 1
    setup = time.perf_counter() - t_setup
    s = Scheduler(cluster, config)
    await s.start()
    t0, c0 = time.perf_counter(), time.process_time()
    bound = await s.until_idle()
    seconds = time.perf_counter() - t0
    cpu = time.process_time() - c0  # this process only: robust on a shared machine
    # check: every allocated device once; every bound pod's claim allocated on its node
    seen: set[tuple[str, str, str]] = set()
    twice = 0
    devices = 0
    slices_used: dict[tuple[str, str], int] = {}  # (pool, GPU) -> partitions' slices taken
    for c in (await cluster.list("ResourceClaim", "default")).items:
        assert isinstance(c, dict)
        alloc = (c.get("status") or {}).get("allocation") or {}
        for r in (alloc.get("devices") or {}).get("results") or ():
            key = (r["driver"], r["pool"], r["device"])
            twice += key in seen
            seen.add(key)
            devices += 1
            if args.partitions:
                gpu = "-".join(r["device"].split("-")[:2])
                n = args.partitions if r["device"] == gpu else 1
                slices_used[(r["pool"], gpu)] = slices_used.get((r["pool"], gpu), 0) + n
    unallocated_bound = 0
    for p in (await cluster.list("Pod", "default")).items:
        assert isinstance(p, dict)
        if p["spec"].get("nodeName"):
            name = p["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
            claim = await cluster.get("ResourceClaim", name, "default")
            assert isinstance(claim, dict)
            results = claim["status"]["allocation"]["devices"]["results"]
            unallocated_bound += any(r["pool"] != p["spec"]["nodeName"] for r in results)
    await s.stop()
    await cluster.close()
    return {
        "machine": f"{platform.machine()} python {platform.python_version()}",
        "nodes": args.nodes,
        "devices_per_node": args.devices,
        "gangs": len(gangs),
        "pods": pods,
        "devices_asked": asked,
        "setup_seconds": round(setup, 2),
        "bound": bound,
        "devices_allocated": devices,
        "devices_allocated_twice": twice,
        "gpus_over_their_counters": sum(n > args.partitions for n in slices_used.values())
        if args.partitions
        else 0,
        "bound_pods_with_devices_elsewhere": unallocated_bound,
        "seconds": round(seconds, 3),
        "pods_per_second": round(bound / seconds, 1) if seconds else None,
        "cpu_seconds": round(cpu, 3),
        "pods_per_cpu_second": round(bound / cpu, 1) if cpu else None,
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--devices", type=int, default=8)
    p.add_argument(
        "--partitions",
        type=int,
        default=0,
        help="partitionable GPUs with this many slices each; pods ask for the whole GPU, "
        "else two slices (firstAvailable)",
    )
    p.add_argument("--min-gang", type=int, default=8)
    p.add_argument("--max-gang", type=int, default=64)
    p.add_argument("--fill", type=float, default=0.9, help="devices asked / devices there")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-events", action="store_true", help="do not record Events")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    out = asyncio.run(run(args))
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for k, v in out.items():
            print(f"{k:36} {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
