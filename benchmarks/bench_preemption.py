"""Workload-aware preemption: the decision time of the DefaultPreemption plugin.

In process on MemoryCluster: N nodes (8 cpu each) filled with low-priority gangs of 8 x 1
cpu (``disruptionMode: all`` for every other gang), then a stream of high-priority gangs of
8 x 1 cpu arriving one at a time; each preempts. Reports the plugin's victim-selection time
per preemption (``scheduler_podgroup_preemption_attempt_duration_seconds``: remove every
potential victim, place once, reprieve) and the whole pod-group cycle that ran it.

    .venv/bin/python benchmarks/bench_preemption.py                  # 1,250 nodes, 10,000 pods
    .venv/bin/python benchmarks/bench_preemption.py --nodes 125 --high 5
    .venv/bin/python benchmarks/bench_preemption.py --budgets 4     # PDBs over 1 gang in 4
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workloadbuilder.cluster import MemoryCluster
from workloadbuilder.scheduler import Scheduler, SchedulerConfig
from workloadbuilder.testing.builders import (
    make_node,
    make_pod,
    make_pod_group,
    make_priority_class,
)


class _Timed:
    """Times every PodGroupPostFilter call of a plugin (the preemption decision)."""

    def __init__(self, plugin: Any) -> None:
        self.plugin = plugin
        self.name = plugin.name
        self.times: list[float] = []
        self.successes = 0

    def post_filter(self, group: Any, lister: Any, message: str) -> Any:
        t0 = time.perf_counter()
        st = self.plugin.post_filter(group, lister, message)
        self.times.append(time.perf_counter() - t0)
        self.successes += 1 if st.ok else 0
        return st


async def _gang(
    cluster: MemoryCluster,
    name: str,
    cls: str,
    sched: str,
    *,
    all_mode: bool = False,
    budget: bool = False,
) -> None:
    pg = make_pod_group(name, "default").gang(8).priority_class(cls)
    if all_mode:
        pg.disruption_mode("all")
    await cluster.create(pg.obj())
    for i in range(8):
        pod = make_pod(f"{name}-{i}", "default").scheduler_name(sched).pod_group(name)
        pod.priority_class(cls).request("cpu", "1").request("memory", "1Gi").label("app", name)
        await cluster.create(pod.obj())
    if budget:  # a PodDisruptionBudget that allows no disruption (status as the controller's)
        pdb = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": f"pdb-{name}", "namespace": "default"},
            "spec": {"minAvailable": 8, "selector": {"matchLabels": {"app": name}}},
        }
        await cluster.create(pdb)
        status = {"disruptionsAllowed": 0, "currentHealthy": 8, "desiredHealthy": 8}
        await cluster.patch(
            "PodDisruptionBudget",
            f"pdb-{name}",
            {"status": {**status, "expectedPods": 8}},
            "default",
            subresource="status",
        )


async def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1250)
    ap.add_argument("--high", type=int, default=20, help="high-priority gangs, one at a time")
    ap.add_argument(
        "--budgets",
        type=int,
        default=0,
        metavar="K",
        help="a PodDisruptionBudget (no disruption allowed) over every K-th low gang",
    )
    args = ap.parse_args(argv)
    cluster = MemoryCluster()
    cfg = SchedulerConfig(preemption=True, record_events=False)
    await cluster.create(make_priority_class("low", 10).obj())
    await cluster.create(make_priority_class("high", 1000).obj())
    for n in range(args.nodes):
        node = make_node(f"n{n}").resources({"cpu": "8", "memory": "64Gi", "pods": 110})
        obj = node.obj()
        status = obj.pop("status")
        await cluster.create(obj)
        await cluster.patch("Node", f"n{n}", {"status": status}, subresource="status")
    for g in range(args.nodes):
        await _gang(
            cluster,
            f"low{g}",
            "low",
            cfg.scheduler_name,
            all_mode=g % 2 == 0,
            budget=args.budgets > 0 and g % args.budgets == 0,
        )
    s = Scheduler(cluster, cfg)
    timed = _Timed(s.framework.pod_group_post_filter[0])
    s.framework.pod_group_post_filter[0] = timed
    await s.start()
    t0 = time.perf_counter()
    bound = await s.until_idle()
    fill = time.perf_counter() - t0
    cycles: list[float] = []
    for h in range(args.high):
        await _gang(cluster, f"high{h}", "high", cfg.scheduler_name)
        t1 = time.perf_counter()
        await s.sync()
        await s.until_idle()  # the preempting cycle (the retry waits for its backoff)
        cycles.append(time.perf_counter() - t1)
    await asyncio.sleep(1.1)  # the backoff: the preemptors now bind on the freed nodes
    await s.until_idle()
    pods = (await cluster.list("Pod", "default")).items
    high_bound = sum(
        1
        for p in pods
        if isinstance(p, dict)
        and str(p["metadata"]["name"]).startswith("high")
        and p["spec"].get("nodeName")
    )
    await s.stop()
    out = {
        "nodes": args.nodes,
        "budgets": sum(1 for g in range(args.nodes) if args.budgets and g % args.budgets == 0),
        "low_pods_bound": bound,
        "fill_seconds": round(fill, 2),
        "preemptions": timed.successes,
        "high_pods_bound": high_bound,
        "decision_ms_p50": round(statistics.median(timed.times) * 1000, 1),
        "decision_ms_max": round(max(timed.times) * 1000, 1),
        "cycle_ms_p50": round(statistics.median(cycles) * 1000, 1),
        "cycle_ms_max": round(max(cycles) * 1000, 1),
    }
    print(out)
    return out


if __name__ == "__main__":
    asyncio.run(main())
