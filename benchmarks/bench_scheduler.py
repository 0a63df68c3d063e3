"""Scheduler throughput and latency, in the style of kube-scheduler's scheduler_perf.

In process on MemoryCluster: N nodes, then gangs of 8-64 pods (one PodGroup each, minCount =
size) up to P pods, created in W waves; after each wave the scheduler runs until idle.
Reports pods/s two ways — pods bound / time until the scheduler is idle again (cycles,
bindings, status writes and events all finished), and pods bound / time until the last
binding returned (what scheduler_perf's throughput counts) — p50/p99 of "group ready -> all
its pods bound" (ready = the wave that completed the group was created), and the process's
peak RSS.

    .venv/bin/python benchmarks/bench_scheduler.py                 # 5,000 nodes, 10,000 pods
    .venv/bin/python benchmarks/bench_scheduler.py --waves 20 --json
    .venv/bin/python benchmarks/bench_scheduler.py --topology      # rack-constrained gangs
    .venv/bin/python benchmarks/bench_scheduler.py --compare       # both, same process
    .venv/bin/python benchmarks/bench_scheduler.py --profile /tmp/s.prof  # cProfile it
    .venv/bin/python benchmarks/bench_scheduler.py --no-gc-freeze  # without the GC policy
    .venv/bin/python benchmarks/bench_scheduler.py --event-loop asyncio  # not on uvloop

The scheduler runs on the event loop `workloadbuilder scheduler` uses by default (uvloop
when installed; ``--event-loop`` as on the CLI); the output names it.

The output also gives the CPU seconds spent in garbage collections during the scheduling
phase (and their number by generation), and how many ``Scheduled`` events were recorded
and dropped (in process the binds outrun the event writers; see docs/performance.md).

``--topology``: the nodes carry four topology levels (zone = the cluster, block = 256 nodes,
rack = 32 nodes, host) and every gang has ``schedulingConstraints.topology: [{key: rack}]``.
``--compare`` runs the unconstrained benchmark and then the topology one and reports the
throughput ratio.

``--pod-constraints``: the nodes carry ``kubernetes.io/hostname`` and one of 8 zones, and every
gang's pods carry ``app: <gang>``, a required pod anti-affinity on ``kubernetes.io/hostname``
against their own gang (one worker per node) and a ``maxSkew: 1`` ``DoNotSchedule`` zone
spread of their gang; the run checks both held. ``--compare-constraints`` runs the
unconstrained benchmark and then this one in the same process and reports the ratio.

    .venv/bin/python benchmarks/bench_scheduler.py --compare-constraints
"""

from __future__ import annotations

import argparse
import cProfile
import gc
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
    PodGroupSchedulingConstraints,
    PodGroupSchedulingPolicy,
    PodGroupSpec,
    TopologyConstraint,
)
from workloadbuilder.cluster import Cluster, MemoryCluster
from workloadbuilder.runtime import add_event_loop_flag, gc_policy, resolve_event_loop
from workloadbuilder.runtime import run as run_on_loop
from workloadbuilder.scheduler import Scheduler, SchedulerConfig


class TimedBinds:
    """Delegates to a cluster and records when each pod's binding returned."""

    def __init__(self, inner: Cluster) -> None:
        self._inner = inner
        self.bound_at: dict[tuple[str, str], float] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def bind(
        self, namespace: str, pod_name: str, node_name: str, *, pod_uid: str | None = None
    ) -> None:
        await self._inner.bind(namespace, pod_name, node_name, pod_uid=pod_uid)
        self.bound_at[(namespace, pod_name)] = time.perf_counter()


ZONE = "topology.kubernetes.io/zone"
BLOCK = "topology.kubernetes.io/block"
RACK = "topology.kubernetes.io/rack"
HOST = "kubernetes.io/hostname"


ZONES = 8


def _node(i: int, topology: bool = False, constraints: bool = False) -> dict[str, Any]:
    alloc = {"cpu": "32", "memory": "128Gi", "pods": "110", "ephemeral-storage": "500Gi"}
    name = f"node-{i:05d}"
    labels = {"rack": f"rack-{i // 8}"}
    if constraints:
        labels = {HOST: name, ZONE: f"zone-{i % ZONES}"}
    if topology:
        labels = {
            ZONE: "zone-0",
            BLOCK: f"block-{i // 256:02d}",
            RACK: f"rack-{i // 32:03d}",
            HOST: name,
        }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": alloc, "capacity": alloc},
    }


def _constrained(pod: dict[str, Any], group: str) -> dict[str, Any]:
    """One worker per node and a balanced zone spread, both of the pod's own gang."""
    mine = {"matchLabels": {"app": group}}
    pod["metadata"]["labels"] = {"app": group}
    pod["spec"]["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": mine, "topologyKey": HOST}
            ]
        }
    }
    pod["spec"]["topologySpreadConstraints"] = [
        {
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": mine,
        }
    ]
    return pod


def _pod(name: str, group: str, cpu: str, memory: str, scheduler: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": scheduler,
            "schedulingGroup": {"podGroupName": group},
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": cpu, "memory": memory}},
                }
            ],
        },
    }


class _GcTimer:
    """CPU time spent in garbage collections, and their number by generation, while ``on``."""

    def __init__(self) -> None:
        self.on = False
        self.seconds = 0.0
        self.collections = [0, 0, 0]
        self._t0 = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if not self.on:
            return
        if phase == "start":
            self._t0 = time.process_time()
        else:
            self.seconds += time.process_time() - self._t0
            self.collections[info["generation"]] += 1

    def close(self) -> None:
        gc.callbacks.remove(self._callback)


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


async def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    inner = MemoryCluster(admission=not args.no_admission, share_objects=args.share_objects)
    cluster = TimedBinds(inner)
    for i in range(args.nodes):
        await inner.create(_node(i, args.topology, args.pod_constraints))
    gangs: list[tuple[str, int, str, str]] = []
    total = 0
    shapes = [("500m", "1Gi"), ("1", "2Gi"), ("2", "4Gi"), ("4", "8Gi")]
    while total < args.pods:
        size = min(rng.randint(args.min_gang, args.max_gang), args.pods - total)
        cpu, mem = rng.choice(shapes)
        gangs.append((f"gang-{len(gangs):05d}", size, cpu, mem))
        total += size
    config = SchedulerConfig(record_events=not args.no_events, gc_freeze=not args.no_gc_freeze)
    s = Scheduler(cluster, config)
    await s.start()
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    waves = [gangs[i :: args.waves] for i in range(args.waves)]
    profiler = cProfile.Profile() if args.profile else None
    gc_time = _GcTimer()
    ready_at: dict[str, float] = {}
    sched_time = 0.0
    cpu_time = 0.0
    bound = 0
    bind_time = 0.0
    for wave in waves:
        for name, size, cpu, mem in wave:
            await inner.create(
                PodGroup(
                    metadata=ObjectMeta(name=name, namespace="default"),
                    spec=PodGroupSpec(
                        scheduling_policy=PodGroupSchedulingPolicy(
                            gang=GangSchedulingPolicy(min_count=size)
                        ),
                        scheduling_constraints=(
                            PodGroupSchedulingConstraints(topology=[TopologyConstraint(key=RACK)])
                            if args.topology
                            else None
                        ),
                    ),
                )
            )
            for j in range(size):
                pod = _pod(f"{name}-{j}", name, cpu, mem, config.scheduler_name)
                if args.pod_constraints:
                    pod = _constrained(pod, name)
                await inner.create(pod)
        t0 = time.perf_counter()
        c0 = time.process_time()
        for name, *_ in wave:
            ready_at[name] = t0
        if profiler is not None:
            profiler.enable()
        gc_time.on = True
        bound += await s.until_idle()
        gc_time.on = False
        if profiler is not None:
            profiler.disable()
        sched_time += time.perf_counter() - t0
        cpu_time += time.process_time() - c0
        keys = [("default", f"{n}-{j}") for n, size, *_ in wave for j in range(size)]
        wave_binds = [cluster.bound_at[k] for k in keys if k in cluster.bound_at]
        bind_time += (max(wave_binds) - t0) if wave_binds else 0.0
    rss_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    gc_time.close()
    if profiler is not None:
        profiler.dump_stats(args.profile)
    latencies = []
    for name, size, *_ in gangs:
        times = [cluster.bound_at.get(("default", f"{name}-{j}")) for j in range(size)]
        if all(t is not None for t in times):
            latencies.append(max(t for t in times if t is not None) - ready_at[name])
    in_one_rack = True
    if args.topology:  # check the constraint held for every gang
        racks: dict[str, set[str]] = {}
        for pod in (await inner.list("Pod", "default")).items:
            assert isinstance(pod, dict)
            node = pod["spec"].get("nodeName")
            if node:
                group = pod["spec"]["schedulingGroup"]["podGroupName"]
                racks.setdefault(group, set()).add(f"rack-{int(node[5:]) // 32:03d}")
        in_one_rack = all(len(r) == 1 for r in racks.values())
    constraints_held = True
    if args.pod_constraints:  # one pod per node and zones within 1 of each other, per gang
        nodes_of: dict[str, list[str]] = {}
        for pod in (await inner.list("Pod", "default")).items:
            assert isinstance(pod, dict)
            node = pod["spec"].get("nodeName")
            if node:
                nodes_of.setdefault(pod["spec"]["schedulingGroup"]["podGroupName"], []).append(node)
        for nodes in nodes_of.values():
            zones = [int(n[5:]) % ZONES for n in nodes]
            per_zone = [zones.count(z) for z in range(ZONES)]
            if len(set(nodes)) != len(nodes) or max(per_zone) - min(per_zone) > 1:
                constraints_held = False
    events_dropped = s.status.events_dropped
    await s.stop()
    # the collector policy is process-wide and a second install is a no-op: without this,
    # the next run of --compare* would start without it (its start-up heap unfrozen, walked
    # by the full collections of its scheduling phase), unlike this one
    gc_policy.uninstall()
    await inner.close()
    mode = "topology (rack-constrained gangs)" if args.topology else "unconstrained"
    if args.pod_constraints:
        mode = "pod constraints (one per node, zone spread)"
    return {
        "mode": mode,
        "machine": f"{platform.machine()} {platform.processor() or ''} python "
        f"{platform.python_version()}".strip(),
        "nodes": args.nodes,
        "pods": total,
        "gangs": len(gangs),
        "waves": args.waves,
        "event_loop": resolve_event_loop(args.event_loop),
        "events": not args.no_events,
        "events_recorded": inner.count("Event", "default"),
        "events_dropped": events_dropped,
        "bound": bound,
        "seconds": round(sched_time, 3),
        "pods_per_second": round(bound / sched_time, 1) if sched_time else None,
        "cpu_seconds": round(cpu_time, 3),
        "pods_per_cpu_second": round(bound / cpu_time, 1) if cpu_time else None,
        "gc_cpu_seconds": round(gc_time.seconds, 3),
        "gc_collections": gc_time.collections,
        "seconds_to_last_bind": round(bind_time, 3),
        "pods_per_second_to_last_bind": round(bound / bind_time, 1) if bind_time else None,
        "group_latency_p50_s": round(_pct(latencies, 0.50), 4),
        "group_latency_p99_s": round(_pct(latencies, 0.99), 4),
        "peak_rss_mib": round(rss_peak / 1024, 1),
        "rss_before_scheduling_mib": round(rss_before / 1024, 1),
        **({"every_gang_in_one_rack": in_one_rack} if args.topology else {}),
        **({"constraints_held": constraints_held} if args.pod_constraints else {}),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--nodes", type=int, default=5000)
    p.add_argument("--pods", type=int, default=10000)
    p.add_argument("--min-gang", type=int, default=8)
    p.add_argument("--max-gang", type=int, default=64)
    p.add_argument("--waves", type=int, default=1, help="arrival waves (1 = all at once)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-events", action="store_true", help="do not record Events")
    p.add_argument("--no-admission", action="store_true", help="MemoryCluster without admission")
    p.add_argument("--topology", action="store_true", help="rack-constrained gangs, 4 levels")
    p.add_argument("--compare", action="store_true", help="unconstrained, then --topology")
    p.add_argument(
        "--pod-constraints",
        action="store_true",
        help="gangs with one-per-node anti-affinity and a zone spread",
    )
    p.add_argument(
        "--compare-constraints",
        action="store_true",
        help="unconstrained, then --pod-constraints",
    )
    p.add_argument(
        "--share-objects",
        action="store_true",
        help="MemoryCluster(share_objects=True): watches hand out the stored dicts, uncopied",
    )
    p.add_argument(
        "--no-gc-freeze",
        action="store_true",
        help="SchedulerConfig(gc_freeze=False): leave the garbage collector as it is",
    )
    add_event_loop_flag(p)
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--profile", metavar="FILE", help="cProfile the scheduling phase only (pstats file)"
    )
    args = p.parse_args()
    if args.compare_constraints:
        results = []
        for constrained in (False, True):
            args.pod_constraints = constrained
            results.append(run_on_loop(run(args), event_loop=args.event_loop))
        plain, constrained_run = results
        out: Any = {
            "unconstrained": plain,
            "pod_constraints": constrained_run,
            "constrained_vs_unconstrained_pods_per_second": round(
                (constrained_run["pods_per_second"] or 0) / (plain["pods_per_second"] or 1), 3
            ),
        }
    elif args.compare:
        results = []
        for topology in (False, True):
            args.topology = topology
            results.append(run_on_loop(run(args), event_loop=args.event_loop))
        plain, topo = results
        ratio = {
            "topology_vs_unconstrained_pods_per_second": round(
                (topo["pods_per_second"] or 0) / (plain["pods_per_second"] or 1), 3
            ),
            "topology_vs_unconstrained_to_last_bind": round(
                (topo["pods_per_second_to_last_bind"] or 0)
                / (plain["pods_per_second_to_last_bind"] or 1),
                3,
            ),
        }
        out = {"unconstrained": plain, "topology": topo, **ratio}
    else:
        out = run_on_loop(run(args), event_loop=args.event_loop)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        both = args.compare or args.compare_constraints
        sections = [("", out)] if not both else list(out.items())
        for title, result in sections:
            if isinstance(result, dict):
                if title:
                    print(f"== {title}")
                for k, v in result.items():
                    print(f"{k:36} {v}")
            else:
                print(f"{title:36} {result}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
