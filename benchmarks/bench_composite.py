"""The cost of the CompositePodGroup search (beyond upstream's greedy placement).

One tree (a composite gang of two rack-constrained child gangs) that greedy placement
rejects: child ``a`` (2 x 4 cpu) prefers the fuller rack r1 (three 8-cpu nodes, one half
used), after which child ``b`` (2 x 8 cpu) fits nowhere; ``a`` in one of the 4-cpu racks
and ``b`` in r1 fit. ``--racks N`` adds N racks of five 4-cpu nodes, so the search has more
placements of ``a`` to try. For each mode (``greedy``, ``bounded``, set through the
profile's ``TopologyPlacementGenerator`` args as a user would) a fresh cluster and scheduler
schedule the tree ``--repeat`` times; timed: ``until_idle()`` (the cycle, and for a placed
tree its bindings on MemoryCluster).

    .venv/bin/python benchmarks/bench_composite.py --racks 50 --repeat 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workloadbuilder.cluster import MemoryCluster
from workloadbuilder.scheduler import Scheduler, load_config
from workloadbuilder.testing.builders import (
    make_composite_pod_group,
    make_node,
    make_pod,
    make_pod_group,
)

RACK = "topology.kubernetes.io/rack"


_CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- pluginConfig:
  - name: TopologyPlacementGenerator
    args: {compositeSearch: {mode: MODE}}
"""


async def _setup(racks: int, mode: str, tmp: Path) -> tuple[MemoryCluster, Scheduler]:
    cluster = MemoryCluster()
    nodes = [("r1a", "8", "r1"), ("r1b", "8", "r1"), ("r1c", "8", "r1")]
    nodes += [(f"r{k}n{i}", "4", f"r{k}") for k in range(2, racks + 2) for i in range(5)]
    for name, cpu, rack in nodes:
        await cluster.create(
            make_node(name).label(RACK, rack).resources({"cpu": cpu, "memory": "32Gi"}).obj()
        )
    busy = make_pod("busy", "default").request("cpu", "4").node_name("r1a")
    await cluster.create(busy.obj())
    await cluster.create(make_composite_pod_group("t", "default").gang(2).obj())
    for child, cpu in (("t-a", "4"), ("t-b", "8")):
        pg = make_pod_group(child, "default").gang(2).topology(RACK)
        await cluster.create(pg.parent("t").workload_ref("t", child).obj())
        for i in range(2):
            pod = make_pod(f"{child}-{i}", "default").pod_group(child).request("cpu", cpu)
            await cluster.create(pod.scheduler_name("workloadbuilder-scheduler").obj())
    path = tmp / f"sched-{mode}.yaml"
    path.write_text(_CONFIG.replace("MODE", mode))
    loaded = load_config(path)
    s = Scheduler(cluster, loaded.scheduler, framework=loaded.framework)
    await s.start()
    await s.sync()
    return cluster, s


async def run(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {
        "machine": f"{platform.machine()} python {platform.python_version()}",
        "racks": args.racks + 1,
        "nodes": 3 + 5 * args.racks,
    }
    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("greedy", "bounded"):
            times = []
            placed = 0
            for _ in range(args.repeat):
                cluster, s = await _setup(args.racks, mode, Path(tmp))
                t0 = time.perf_counter()
                placed = await s.until_idle()
                times.append(time.perf_counter() - t0)
                await s.stop()
                await cluster.close()
            out[mode] = {
                "pods_bound": placed,
                "ms_median": round(statistics.median(times) * 1000, 2),
                "ms_max": round(max(times) * 1000, 2),
            }
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--racks", type=int, default=10, help="extra racks of five 4-cpu nodes")
    p.add_argument("--repeat", type=int, default=20)
    args = p.parse_args()
    print(json.dumps(asyncio.run(run(args)), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
