"""Backlog drain in process: the heavy-queueing drain of ``bench_real.py --mode queueing``
on MemoryCluster, with a simulated API round trip, so the scheduler's own drain policy
(re-attempts, explanation writes, binding) can be measured without a loaded API server.

``--gangs`` gangs of ``--gang-size`` pods (cpu 1, memory 1Gi) with a node selector no node
has wait while ``--nodes`` other nodes exist; then nodes that fit them (32 cpu, 110 pods,
the selector's label) are added in ``--steps`` bursts (each node: create, then its status,
as a kubelet registers). Every write the scheduler makes (binding, status patch, Event)
takes ``--latency`` seconds first, at most ``--server-concurrency`` at a time (a
saturated API server: the others wait their turn). Per step: seconds until every pod that
now fits is bound, pods/s, when the bindings were sent (first, median, last), the writes
made during the step by kind, the scheduler's attempts, and the CPU seconds of the whole
process (scheduler and simulated server) during the step.

    .venv/bin/python benchmarks/bench_drain.py                   # 2,000 gangs, 2 steps
    .venv/bin/python benchmarks/bench_drain.py --latency 0.05 --json
    .venv/bin/python benchmarks/bench_drain.py --status-refresh-interval 0   # rewrite all
    .venv/bin/python benchmarks/bench_drain.py --gangs 5000 --steps 4 --preemption \
        --profile /tmp/drain.prof     # the full size; cProfile of the drain steps only
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workloadbuilder.cluster import Cluster, MemoryCluster
from workloadbuilder.scheduler import Scheduler, SchedulerConfig
from workloadbuilder.testing.builders import make_node, make_pod, make_pod_group

POOL = "bench.workloadbuilder.io/pool"
NODE_CPU = 32


class SlowWrites:
    """Delegates to a cluster; every write of the scheduler waits ``latency`` first (an API
    round trip) and is counted by kind."""

    def __init__(self, inner: Cluster, latency: float, capacity: int) -> None:
        self._inner = inner
        self.latency = latency
        self.writes: dict[str, int] = {}
        #: when each binding was sent (monotonic)
        self.bind_sent: list[float] = []
        #: bindings that succeeded (the steps poll this, not a list of every pod: listing
        #: 10,000 pods every 50 ms cost the shared event loop more than the scheduler did)
        self.bound = 0
        #: writes the "server" serves at once (a saturated API server queues the rest)
        self._server = asyncio.Semaphore(capacity)

    async def _wait(self) -> None:
        async with self._server:
            await asyncio.sleep(self.latency)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _count(self, what: str) -> None:
        self.writes[what] = self.writes.get(what, 0) + 1

    async def bind(
        self, namespace: str, pod_name: str, node_name: str, *, pod_uid: str | None = None
    ) -> None:
        self._count("binding")
        self.bind_sent.append(time.monotonic())
        await self._wait()
        await self._inner.bind(namespace, pod_name, node_name, pod_uid=pod_uid)
        self.bound += 1

    async def patch(self, kind: str, *args: Any, **kwargs: Any) -> Any:
        self._count(f"{kind} status" if kwargs.get("subresource") == "status" else kind)
        await self._wait()
        return await self._inner.patch(kind, *args, **kwargs)

    async def create_event(self, **kwargs: Any) -> None:
        self._count(f"Event {kwargs.get('reason')}")
        await self._wait()
        await self._inner.create_event(**kwargs)


async def _node(c: MemoryCluster, name: str, labels: dict[str, str]) -> None:
    obj = (
        make_node(name)
        .labels(labels)
        .resources({"cpu": str(NODE_CPU), "memory": "128Gi", "pods": "110"})
        .ready()
        .obj()
    )
    status = obj.pop("status")
    await c.create(obj)
    await c.patch("Node", name, {"status": status}, subresource="status")


async def run(args: argparse.Namespace) -> dict[str, Any]:
    inner = MemoryCluster(share_objects=True)
    slow = SlowWrites(inner, args.latency, args.server_concurrency)
    for i in range(args.nodes):
        await _node(inner, f"node-{i:05d}", {})
    extra: dict[str, Any] = {}
    if hasattr(SchedulerConfig(), "status_refresh_interval"):  # (older trees: compare)
        extra["status_refresh_interval"] = args.status_refresh_interval
    config = SchedulerConfig(preemption=args.preemption, **extra)
    s = Scheduler(slow, config)
    attempts = [0]
    one = s.schedule_one

    def counted(e: Any) -> None:  # every entity attempt (the run loop calls schedule_one)
        attempts[0] += 1
        one(e)

    s.schedule_one = counted  # type: ignore[assignment]
    runner = asyncio.create_task(s.run())
    ns = "default"
    names: list[str] = []
    for g in range(args.gangs):
        gname = f"b{g:05d}"
        await inner.create(make_pod_group(gname, ns).gang(args.gang_size).obj())
        for j in range(args.gang_size):
            pod = make_pod(f"{gname}-{j:02d}", ns).pod_group(gname)
            pod.scheduler_name(config.scheduler_name).node_selectors({POOL: "x"})
            await inner.create(pod.request("cpu", "1").request("memory", "1Gi").obj())
            names.append(f"{gname}-{j:02d}")
    t = time.monotonic()
    while s.queue.counts()["PodGroup"].get("unschedulable", 0) < args.gangs:
        if time.monotonic() - t > args.timeout:
            raise SystemExit("the backlog was not attempted in time")
        await asyncio.sleep(0.05)
    backlog_s = time.monotonic() - t
    total = args.gangs * args.gang_size
    need = -(-total // NODE_CPU)
    steps = []
    added = 0
    prof = cProfile.Profile() if args.profile else None
    if prof is not None:
        prof.enable()
    for step in range(1, args.steps + 1):
        upto = need * step // args.steps
        writes0, attempts0 = dict(slow.writes), attempts[0]
        t = time.monotonic()
        cpu0 = time.process_time()
        await asyncio.gather(
            *(_node(inner, f"extra-{i:05d}", {POOL: "x"}) for i in range(added, upto))
        )
        expect = min(total, upto * NODE_CPU // args.gang_size * args.gang_size)
        while True:
            got = slow.bound
            if got >= expect or time.monotonic() - t > args.timeout:
                break
            await asyncio.sleep(0.05)
        secs = time.monotonic() - t
        cpu = time.process_time() - cpu0
        sent = [x - t for x in slow.bind_sent if x >= t]
        bound_before = sum(st["pods_bound"] for st in steps)
        writes = {k: v - writes0.get(k, 0) for k, v in slow.writes.items()}
        steps.append(
            {
                "nodes_added": upto - added,
                "pods_bound": got - bound_before,
                "seconds": round(secs, 2),
                "pods_per_s": round((got - bound_before) / max(secs, 1e-6), 1),
                "cpu_s": round(cpu, 2),
                "attempts": attempts[0] - attempts0,
                "binds_sent_s": [round(sent[int(q * (len(sent) - 1))], 2) for q in (0, 0.5, 1)]
                if sent
                else [],
                "writes": {k: v for k, v in sorted(writes.items()) if v},
            }
        )
        added = upto
    if prof is not None:
        prof.disable()
        prof.dump_stats(args.profile)
    await s.stop()
    runner.cancel()
    await inner.close()
    return {
        "gangs": args.gangs,
        "gang_size": args.gang_size,
        "latency_s": args.latency,
        "status_refresh_interval": args.status_refresh_interval,
        "backlog_attempted_s": round(backlog_s, 2),
        "steps": steps,
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--gangs", type=int, default=2000)
    p.add_argument("--gang-size", type=int, default=2)
    p.add_argument("--nodes", type=int, default=100, help="nodes the backlog does not fit")
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--latency", type=float, default=0.02, help="seconds per write")
    p.add_argument(
        "--server-concurrency", type=int, default=16, help="writes served at once (the rest wait)"
    )
    p.add_argument("--status-refresh-interval", type=float, default=30.0)
    p.add_argument("--preemption", action="store_true", help="as the scheduler command runs")
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--profile", metavar="FILE", help="cProfile the drain steps, stats to FILE")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    out = asyncio.run(run(args))
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for k, v in out.items():
            if k != "steps":
                print(f"{k:28} {v}")
        for st in out["steps"]:
            print(json.dumps(st))
    return 0


if __name__ == "__main__":
    sys.exit(main())
