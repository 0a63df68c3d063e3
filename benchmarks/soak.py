"""Soak runs: does the scheduler stay flat (memory, time per cycle) over a long run?

``sim``: a generated trace (default 24 simulated hours, >= 20,000 pods in gang Jobs of 8-64
pods arriving all day, running 5-60 minutes, deleted 2 hours after their expected end)
through the simulator in this process. After
every simulator round it samples the process RSS (``/proc/self/status``) and the wall time
the round took (the scheduler and controllers running to idle at one simulated instant).

``real``: ``workloadbuilder scheduler`` (a subprocess) against the harness's kube-apiserver
for ``--minutes`` wall minutes: gangs (PodGroup + pods) arrive continuously and are deleted
a while after they are bound (as finished work), keeping the fake Nodes busy. Every
``--every`` seconds it samples the scheduler's RSS (``/proc/<pid>/status``) and, from its
``/metrics``, the mean pod-group attempt duration in that interval.

Both write ``<out>/soak-<mode>.json`` and a picture ``<out>/soak-<mode>.png`` (RSS and time
per cycle against time).

    .venv/bin/python benchmarks/soak.py sim --out docs/reliability
    .venv/bin/python benchmarks/soak.py real --minutes 60 --out docs/reliability

Loopback only; every wait is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "chaos"))


def rss_mib(pid: int | str = "self") -> float:
    """Resident set size (``VmRSS``) in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cpu_seconds(pid: int | str = "self") -> float:
    """User + system CPU seconds of a process so far (``/proc/<pid>/stat``)."""
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load1() -> float:
    """The machine's one-minute load average: the soak shares the machine, and a time per
    cycle (wall clock) rises with it while CPU seconds per pod do not."""
    return float(Path("/proc/loadavg").read_text().split()[0])


# ---------------------------------------------------------------------- the trace


def trace(hours: float, pods: int, nodes: int, seed: int) -> str:
    """The scenario YAML: a NodePool and gang Jobs arriving uniformly over ``hours``."""
    rng = random.Random(seed)
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "sim.workloadbuilder.io/v1alpha1",
            "kind": "NodePool",
            "metadata": {"name": "soak"},
            "spec": {"count": nodes, "allocatable": {"cpu": "32", "memory": "256Gi"}},
        }
    ]
    total = 0
    i = 0
    while total < pods:
        size = rng.randint(8, 64)
        arrival = rng.uniform(0, hours * 3600)
        duration = rng.randint(5, 60)
        delete_at = int(arrival) + 60 * duration + 7200
        docs.append(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": f"gang-{i:05d}",
                    "annotations": {
                        "sim.workloadbuilder.io/arrival": f"{int(arrival)}s",
                        "sim.workloadbuilder.io/duration": f"{duration}m",
                        # finished work is cleaned up (as a TTL controller would), else the
                        # cluster itself grows all day
                        "sim.workloadbuilder.io/delete-at": f"{delete_at}s",
                    },
                },
                "spec": {
                    "parallelism": size,
                    "completions": size,
                    "completionMode": "Indexed",
                    "scheduling": {"schedulingPolicy": {"gang": {}}},
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "c",
                                    "image": "registry.k8s.io/pause:3.10",
                                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                                }
                            ],
                        }
                    },
                },
            }
        )
        total += size
        i += 1
    return yaml.safe_dump_all(docs, sort_keys=False)


async def run_sim(args: argparse.Namespace) -> dict[str, Any]:
    """The simulated day, sampled after every round."""
    from workloadbuilder.simulator import Simulation, parse_scenario

    text = trace(args.hours, args.pods, args.nodes, args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    scenario = parse_scenario(text, source="soak-trace")
    samples: list[dict[str, float]] = []
    last = time.perf_counter()
    t0 = last

    def progress(info: Any) -> None:
        nonlocal last
        now = time.perf_counter()
        samples.append(
            {
                "sim_s": info.time,
                "wall_s": round(now - t0, 3),
                "round_ms": round(1000 * (now - last), 3),
                "rss_mib": round(rss_mib(), 1),
                "bound": info.pods_bound,
                "waiting_groups": info.groups_waiting,
            }
        )
        last = now

    result = await Simulation(scenario, progress=progress).run()
    violations = [str(v) for v in result.violations]
    return {
        "mode": "sim",
        "hours": args.hours,
        "pods": sum(1 for _ in result.pods),
        "gangs": len(result.groups),
        "nodes": args.nodes,
        "rounds": len(samples),
        "wall_s": round(time.perf_counter() - t0, 1),
        "violations": violations,
        "samples": samples,
    }


# ---------------------------------------------------------------------- the real server


def _metric(text: str, name: str) -> float:
    total = 0.0
    for m in re.finditer(rf"^{re.escape(name)}(?:{{[^}}]*}})? ([0-9.eE+-]+)$", text, re.M):
        total += float(m.group(1))
    return total


class Churn:
    """The real soak's workload: gangs of 8-64 pods (PodGroup + pods) arrive while less than
    ``capacity`` cpus are requested, and are deleted (finished work) a while after all their
    pods are bound. ``api``/``obs``: the chaos helpers' client and bound-pod observer."""

    def __init__(
        self, api: Any, ns: str, scheduler: str, obs: Any, rng: random.Random, capacity: float
    ) -> None:
        self.api, self.ns, self.scheduler, self.obs = api, ns, scheduler, obs
        self.rng, self.capacity = rng, capacity
        self.live: list[tuple[Any, float]] = []  # (gang, delete after this time; 0: not bound)
        self.created = 0
        self.finished = 0
        self._i = 0

    async def step(self, now: float, *, arrive: bool = True, linger: bool = True) -> None:
        """One round: maybe one new gang, bound gangs get a time to finish (5-30 s, or now
        with ``linger=False``), finished gangs are deleted."""
        from _chaos import Gang, create_gangs

        if arrive and sum(g.size for g, _ in self.live) < self.capacity:
            g = Gang(f"g{self._i:06d}", self.rng.randint(8, 64))
            self._i += 1
            await create_gangs(self.api, self.ns, self.scheduler, self.ns, [g])
            self.created += g.size
            self.live.append((g, 0.0))
        for k, (g, at) in enumerate(self.live):
            if at == 0.0 and all(p in self.obs.node_of for p in g.pods):
                self.live[k] = (g, now + (self.rng.uniform(5, 30) if linger else 0.0))
        for g, at in [x for x in self.live if 0 < x[1] <= now]:
            self.live.remove((g, at))
            await self.delete(g)
            self.finished += g.size

    async def delete(self, g: Any) -> None:
        """Delete a gang's pods (grace 0) and its PodGroup; forget them in the observer."""
        opts = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
        for p in g.pods:
            await self.api.call(
                "DELETE", f"/api/v1/namespaces/{self.ns}/pods/{p}", opts, ok=(200, 404)
            )
        await self.api.call(
            "DELETE",
            f"/apis/scheduling.k8s.io/v1beta1/namespaces/{self.ns}/podgroups/{g.name}",
            opts,
            ok=(200, 404),
        )
        for p in g.pods:
            self.obs.node_of.pop(p, None)
            self.obs.bound_at.pop(p, None)


async def run_real(args: argparse.Namespace) -> dict[str, Any]:
    """The scheduler subprocess against a real API server for ``args.minutes``."""
    from _chaos import (
        Api,
        Observer,
        SchedulerProcess,
        create_nodes,
        scheduler_argv,
        wait_until,
    )

    from workloadbuilder.testing import ControlPlane

    rng = random.Random(args.seed)
    samples: list[dict[str, float]] = []
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    # the PodGroup protection controller removes the finalizer of deleted PodGroups; without
    # it every deleted PodGroup stays (terminating) and the scheduler rightly keeps it
    async with ControlPlane(with_controller_manager=True) as plane:
        ns = plane.create_namespace("soak-")
        scheduler = f"soak-{ns}"
        async with Api(plane.kubeconfig) as api:
            await create_nodes(api, ns, args.nodes)
            obs = Observer(api, ns)
            obs.start()
            proc = SchedulerProcess(
                scheduler_argv(plane.kubeconfig, scheduler), plane.log_dir / "soak-scheduler.log"
            )
            await wait_until(proc.ready, "the scheduler ready", 120)
            churn = Churn(api, ns, scheduler, obs, rng, args.load * args.nodes * 32)
            t0 = time.monotonic()
            end = t0 + 60 * args.minutes
            next_sample = t0
            prev = (0.0, 0.0)
            prev_cpu = (cpu_seconds(proc.pid), 0)
            try:
                while time.monotonic() < end:
                    assert proc.alive(), proc.log_path.read_text()[-3000:]
                    now = time.monotonic()
                    await churn.step(now)
                    created = churn.created
                    if now >= next_sample:
                        next_sample = now + args.every
                        text = await asyncio.to_thread(
                            lambda: (
                                urllib.request.urlopen(
                                    f"http://127.0.0.1:{proc.port}/metrics", timeout=5
                                )
                                .read()
                                .decode()
                            )
                        )
                        base = "scheduler_podgroup_scheduling_attempt_duration_seconds"
                        s_sum = _metric(text, base + "_sum")
                        s_count = _metric(text, base + "_count")
                        d_count = s_count - prev[1]
                        mean_ms = 1000 * (s_sum - prev[0]) / d_count if d_count else 0.0
                        prev = (s_sum, s_count)
                        cpu = cpu_seconds(proc.pid)
                        d_pods = created - prev_cpu[1]
                        cpu_ms_pod = 1000 * (cpu - prev_cpu[0]) / d_pods if d_pods else 0.0
                        prev_cpu = (cpu, created)
                        samples.append(
                            {
                                "wall_s": round(now - t0, 1),
                                "rss_mib": round(rss_mib(proc.pid), 1),
                                "cycle_ms": round(mean_ms, 3),
                                "cycles": d_count,
                                "cpu_ms_per_pod": round(cpu_ms_pod, 3),
                                "load1": load1(),
                                "pods_created": created,
                                "pods_finished": churn.finished,
                            }
                        )
                        print(json.dumps(samples[-1]), flush=True)
                    await asyncio.sleep(0.05)
            finally:
                code = proc.terminate()
                await obs.stop()
    return {
        "mode": "real",
        "minutes": args.minutes,
        "nodes": args.nodes,
        "pods_created": churn.created,
        "pods_finished": churn.finished,
        "exit_code": code,
        "samples": samples,
    }


# ---------------------------------------------------------------------- pictures


def picture(report: dict[str, Any], path: Path) -> None:
    """RSS and time per cycle against time, one panel each."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = report["samples"]
    sim = report["mode"] == "sim"
    x = [p["sim_s"] / 3600 for p in s] if sim else [p["wall_s"] / 60 for p in s]
    y_time = [p["round_ms"] for p in s] if sim else [p["cycle_ms"] for p in s]
    loaded = [(xi, p) for xi, p in zip(x, s, strict=True) if "load1" in p]
    rows = 3 if loaded else 2
    fig, axes = plt.subplots(rows, 1, figsize=(8, 2.5 * rows), sharex=True)
    a, b = axes[0], axes[1]
    a.plot(x, [p["rss_mib"] for p in s], lw=1)
    a.set_ylabel("RSS (MiB)")
    a.set_ylim(bottom=0)
    b.plot(x, y_time, lw=0.6 if sim else 1)
    b.set_ylabel("ms per round" if sim else "ms per pod-group cycle")
    if not sim:
        b.set_ylim(bottom=0)
    if loaded:  # the machine is shared: wall-clock times rise with its load
        c = axes[2]
        c.plot([xi for xi, _ in loaded], [p["load1"] for _, p in loaded], lw=1, color="grey")
        c.set_ylabel("load average (1 min)")
        c.set_ylim(bottom=0)
        cpu = [(xi, p["cpu_ms_per_pod"]) for xi, p in loaded if p.get("cpu_ms_per_pod")]
        if cpu:
            d = c.twinx()
            d.plot([xi for xi, _ in cpu], [v for _, v in cpu], lw=1, color="tab:green")
            d.set_ylabel("scheduler CPU ms per pod", color="tab:green")
            d.set_ylim(bottom=0)
    axes[-1].set_xlabel("simulated hours" if sim else "wall minutes")
    if sim:
        b.set_yscale("log")
    title = (
        f"simulated {report['hours']:g} h: {report['pods']:,} pods, {report['gangs']:,} gangs"
        if sim
        else f"real API server, {report['minutes']:g} min: {report['pods_created']:,} pods"
    )
    a.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """Run one soak and write its report and picture."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("mode", choices=("sim", "real"))
    p.add_argument("--out", default="reports/soak")
    p.add_argument("--seed", type=int, default=16)
    p.add_argument("--hours", type=float, default=24.0, help="sim: simulated hours")
    p.add_argument("--pods", type=int, default=20_000, help="sim: pods in the trace")
    p.add_argument("--nodes", type=int, default=None, help="fake nodes (sim 100, real 50)")
    p.add_argument("--minutes", type=float, default=60.0, help="real: wall minutes")
    p.add_argument("--every", type=float, default=10.0, help="real: seconds between samples")
    p.add_argument("--load", type=float, default=0.8, help="real: share of cpus requested")
    args = p.parse_args(argv)
    if args.nodes is None:
        args.nodes = 100 if args.mode == "sim" else 50
    report = asyncio.run(run_sim(args) if args.mode == "sim" else run_real(args))
    out = Path(args.out)
    (out / f"soak-{args.mode}.json").write_text(json.dumps(report, indent=1) + "\n")
    picture(report, out / f"soak-{args.mode}.png")
    s = report["samples"]
    half = len(s) // 2
    key = "round_ms" if args.mode == "sim" else "cycle_ms"
    summary = {k: v for k, v in report.items() if k != "samples"} | {
        "rss_first_half_max_mib": max((x["rss_mib"] for x in s[:half]), default=0),
        "rss_second_half_max_mib": max((x["rss_mib"] for x in s[half:]), default=0),
        f"{key}_first_half_mean": round(sum(x[key] for x in s[:half]) / max(1, half), 3),
        f"{key}_second_half_mean": round(sum(x[key] for x in s[half:]) / max(1, len(s) - half), 3),
    }
    print(json.dumps(summary, indent=1))
    return 0 if not report.get("violations") and report.get("exit_code", 0) == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
