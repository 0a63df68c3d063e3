"""MemoryCluster throughput and memory with a simulator-sized cluster.

Run: ``.venv/bin/python benchmarks/bench_memory_cluster.py`` (defaults: 5,000 nodes, 50,000
pods, watch fan-out to 1/10/50 watchers with 10,000 updates each). ``--json`` prints the
figures as JSON. ``--tracemalloc`` also measures the Python heap peak of building the cluster
(a separate pass; tracemalloc slows everything down, so its pass is not timed).

Figures: objects/s for create (nodes, pods), bind (pods/binding), status patch, update (full
object replace), list by index (``spec.nodeName`` field selector), watch fan-out (updates/s
and events delivered/s with N concurrent watchers) and peak RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import platform
import resource
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from typing import Any

from workloadbuilder.cluster import MemoryCluster

NAMESPACES = 50


def node(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": f"node-{i:05d}",
            "labels": {
                "kubernetes.io/hostname": f"node-{i:05d}",
                "topology.kubernetes.io/rack": f"rack-{i // 16}",
                "topology.kubernetes.io/zone": f"zone-{i % 4}",
            },
        },
        "spec": {},
        "status": {
            "capacity": {"cpu": "64", "memory": "256Gi", "pods": "110"},
            "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(i: int) -> dict[str, Any]:
    group = f"job-{i // 8}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{group}-{i % 8}",
            "namespace": f"ns-{i % NAMESPACES}",
            "labels": {"job-name": group, "batch.kubernetes.io/job-completion-index": str(i % 8)},
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": group,
                    "uid": f"00000000-0000-4000-8000-{i // 8:012d}",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "containers": [
                {
                    "name": "worker",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {
                        "requests": {"cpu": "4", "memory": "16Gi"},
                        "limits": {"cpu": "4", "memory": "16Gi"},
                    },
                }
            ],
            "schedulingGroup": {"podGroupName": group},
            "restartPolicy": "Never",
        },
    }


async def timed(label: str, n: int, fn: Callable[[], Awaitable[None]]) -> dict[str, Any]:
    # start every row on a collected heap, so a full collection owed to earlier rows is not
    # billed to whichever row happens to trigger it
    gc.collect()
    start = time.perf_counter()
    await fn()
    elapsed = time.perf_counter() - start
    row = {
        "operation": label,
        "count": n,
        "seconds": round(elapsed, 3),
        "per_second": round(n / elapsed),
    }
    print(f"{label:<42} {n:>8} in {elapsed:7.2f} s = {n / elapsed:>10,.0f}/s", file=sys.stderr)
    return row


async def build(c: MemoryCluster, nodes: int, pods: int) -> list[dict[str, Any]]:
    rows = []
    for n in range(NAMESPACES):
        await c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"ns-{n}"}})

    async def create_nodes() -> None:
        for i in range(nodes):
            await c.create(node(i))

    async def create_pods() -> None:
        for i in range(pods):
            await c.create(pod(i))

    rows.append(await timed("create nodes", nodes, create_nodes))
    rows.append(await timed("create pods", pods, create_pods))
    return rows


async def run(args: argparse.Namespace) -> dict[str, Any]:
    c = MemoryCluster(history=args.history, share_objects=args.share_objects)
    rows = await build(c, args.nodes, args.pods)
    names = [(f"ns-{i % NAMESPACES}", f"job-{i // 8}-{i % 8}") for i in range(args.pods)]

    async def bind_all() -> None:
        for i, (ns, name) in enumerate(names):
            await c.bind(ns, name, f"node-{i % args.nodes:05d}")

    rows.append(await timed("bind pods (pods/binding)", args.pods, bind_all))

    async def status_all() -> None:
        for ns, name in names:
            await c.patch("Pod", name, {"status": {"phase": "Running"}}, ns, subresource="status")

    rows.append(await timed("patch pod status (merge, subresource)", args.pods, status_all))

    sample = names[: args.updates]

    async def update_some() -> None:
        for ns, name in sample:
            obj = await c.get("Pod", name, ns)
            assert isinstance(obj, dict)
            meta = obj["metadata"]
            # build the new version without mutating what get() returned (shared objects)
            labels = {**meta["labels"], "touched": "yes"}
            await c.update({**obj, "metadata": {**meta, "labels": labels}})

    rows.append(await timed("get + update pods (full replace)", len(sample), update_some))

    async def list_by_node() -> None:
        total = 0
        for i in range(args.nodes):
            page = await c.list("Pod", field_selector=f"spec.nodeName=node-{i:05d}")
            total += len(page.items)
        assert total == args.pods

    rows.append(await timed("list pods by spec.nodeName (index)", args.nodes, list_by_node))

    for watchers in args.watchers:
        rows.extend(await fan_out(c, watchers, args.updates, names))

    rusage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "nodes": args.nodes,
        "pods": args.pods,
        "share_objects": args.share_objects,
        "results": rows,
        "peak_rss_mib": round(rusage.ru_maxrss / 1024, 1),
        "machine": {
            "python": platform.python_version(),
            "implementation": platform.python_implementation(),
            "system": f"{platform.system()} {platform.release()}",
            "processor": platform.processor() or platform.machine(),
            "cpus": _cpu_count(),
        },
    }


async def fan_out(
    c: MemoryCluster, watchers: int, updates: int, names: list[tuple[str, str]]
) -> list[dict[str, Any]]:
    start_rv = c.resource_version
    received = [0] * watchers
    done = asyncio.Event()

    async def consume(idx: int) -> None:
        async for ev in c.watch("Pod", resource_version=start_rv):
            if ev.type == "MODIFIED":
                received[idx] += 1
                if received[idx] == updates and all(r >= updates for r in received):
                    done.set()
                    return

    tasks = [asyncio.ensure_future(consume(i)) for i in range(watchers)]
    await asyncio.sleep(0)
    sample = names[:updates]

    async def produce_and_drain() -> None:
        for j, (ns, name) in enumerate(sample):
            await c.patch(
                "Pod",
                name,
                {"metadata": {"annotations": {"bench/round": f"{watchers}-{j}"}}},
                ns,
            )
            if j % 256 == 0:
                await asyncio.sleep(0)  # let the watchers run, as in a live system
        await asyncio.wait_for(done.wait(), 600)

    label = f"watch fan-out: {watchers} watcher(s), updates"
    row = await timed(label, updates, produce_and_drain)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    delivered = watchers * updates
    events_row = {
        "operation": f"watch fan-out: {watchers} watcher(s), events delivered",
        "count": delivered,
        "seconds": row["seconds"],
        "per_second": round(delivered / row["seconds"]),
    }
    print(
        f"{events_row['operation']:<42} {delivered:>8} in {row['seconds']:7.2f} s = "
        f"{events_row['per_second']:>10,.0f}/s",
        file=sys.stderr,
    )
    return [row, events_row]


def _cpu_count() -> int:
    import os

    return os.cpu_count() or 0


async def heap_peak(args: argparse.Namespace) -> float:
    tracemalloc.start()
    c = MemoryCluster(history=args.history)
    await build(c, args.nodes, args.pods)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return round(peak / 2**20, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=50000)
    parser.add_argument("--updates", type=int, default=10000)
    parser.add_argument("--history", type=int, default=10000)
    parser.add_argument(
        "--watchers", type=lambda s: [int(x) for x in s.split(",")], default=[1, 10, 50]
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument(
        "--share-objects",
        action="store_true",
        help="MemoryCluster(share_objects=True): reads and watches return the stored dicts",
    )
    parser.add_argument("--tracemalloc", action="store_true", help="also measure the heap peak")
    args = parser.parse_args()
    report = asyncio.run(run(args))
    if args.tracemalloc:
        report["heap_peak_mib_build"] = asyncio.run(heap_peak(args))
        print(
            f"tracemalloc heap peak (build): {report['heap_peak_mib_build']} MiB", file=sys.stderr
        )
    print(f"peak RSS: {report['peak_rss_mib']} MiB", file=sys.stderr)
    if args.json:
        print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
