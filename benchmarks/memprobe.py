"""Where does the scheduler's memory go in a real-API-server churn? (issue 16, "Soak")

The workload of ``benchmarks/soak.py real`` (gangs of 8-64 pods arriving while less than
``--load`` of the cpus are requested, deleted 5-30 s after they are bound), with
``workloadbuilder scheduler`` run by ``benchmarks/_memprobe_child.py``. Every ``--every``
finished pods (after ``--warm``) the workload drains (no new gangs; every live one bound and
deleted; 3 s quiet) and the child is probed (SIGUSR1): RSS, mallinfo2, objects by type, the
sizes of every container the Scheduler reaches, tracemalloc snapshots (tracing starts at the
first probe). At the end: a ``malloc_trim`` probe (SIGUSR2) and a summary with the top
growing allocation sites between the first and the last snapshot.

    .venv/bin/python benchmarks/memprobe.py --pods 20000 --every 5000 --out reports/memprobe

Loopback only; every wait is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "chaos"))


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """The churn, the probes; returns the probe reports."""
    from _chaos import (
        Api,
        Observer,
        SchedulerProcess,
        create_nodes,
        scheduler_argv,
        wait_until,
    )
    from soak import Churn  # the soak's workload, probed

    from workloadbuilder.testing import ControlPlane

    rng = random.Random(args.seed)
    out = Path(args.out).absolute()
    out.mkdir(parents=True, exist_ok=True)
    for f in out.glob("*"):
        f.unlink()
    child = str(Path(__file__).with_name("_memprobe_child.py"))
    probes: list[dict[str, Any]] = []
    async with ControlPlane(with_controller_manager=True) as plane:
        ns = plane.create_namespace("probe-")
        scheduler = f"probe-{ns}"
        async with Api(plane.kubeconfig) as api:
            await create_nodes(api, ns, args.nodes)
            obs = Observer(api, ns)
            obs.start()
            argv = scheduler_argv(plane.kubeconfig, scheduler)
            argv = [sys.executable, child, str(out), *argv[1:]]
            proc = SchedulerProcess(argv, out / "scheduler.log")
            await wait_until(proc.ready, "the scheduler ready", 120)
            churn = Churn(api, ns, scheduler, obs, rng, args.load * args.nodes * 32)
            targets = [args.warm + k * args.every for k in range(args.probes)]
            t0 = time.monotonic()

            async def probe(sig: signal.Signals, name: str, n: int) -> dict[str, Any]:
                path = out / f"{name}-{n}.json"
                os.kill(proc.pid, sig)
                await wait_until(path.exists, f"{path.name}", 600, step=0.5)
                await asyncio.sleep(1.0)  # written in one go, but let it finish
                return dict(json.loads(path.read_text()))

            async def take(n: int) -> dict[str, Any]:
                """Probe ``n``, with the churn's count and the wall time; kept."""
                p = await probe(signal.SIGUSR1, "probe", n)
                p |= {"pods_finished": churn.finished, "wall_s": round(time.monotonic() - t0, 1)}
                probes.append(p)
                return p

            try:
                for k, target in enumerate(targets):
                    while churn.finished < target:
                        assert proc.alive(), proc.log_path.read_text()[-3000:]
                        more = churn.created < target
                        await churn.step(time.monotonic(), arrive=more, linger=more)
                        await asyncio.sleep(0.05)
                    await asyncio.sleep(3.0)  # the deletions reach the scheduler
                    p = await take(k + 1)
                    print(
                        json.dumps(
                            {
                                "probe": k + 1,
                                "pods": churn.finished,
                                "wall_s": p["wall_s"],
                                "rss_mib": round(p["rss_kib"] / 1024, 1),
                                "uordblks_mib": round(p["mallinfo"]["uordblks"] / 2**20, 1),
                                "fordblks_mib": round(p["mallinfo"]["fordblks"] / 2**20, 1),
                                "gc_objects": p["gc_objects"],
                                "traced_kib": p.get("traced_kib"),
                                "events_queued": p.get("events_queued"),
                                "events_dropped": p.get("events_dropped"),
                            }
                        ),
                        flush=True,
                    )
                if args.final_quiet:
                    await asyncio.sleep(args.final_quiet)  # no load: backlogs drain
                    p = await take(len(targets) + 1)
                    print(
                        json.dumps(
                            {
                                "probe": "quiet",
                                "rss_mib": round(p["rss_kib"] / 1024, 1),
                                "gc_objects": p["gc_objects"],
                            }
                        ),
                        flush=True,
                    )
                trim = await probe(signal.SIGUSR2, "trim", 1)
                print(json.dumps({"trim": trim}), flush=True)
            finally:
                code = proc.terminate()
                await obs.stop()
    return {"probes": probes, "trim": trim, "exit_code": code, "out": str(out)}


def growth(out: Path, first: int, last: int, top: int = 25) -> list[str]:
    """The top growing allocation sites (traceback groups) between two snapshots."""
    a = tracemalloc.Snapshot.load(str(out / f"snap-{first}.pickle"))
    b = tracemalloc.Snapshot.load(str(out / f"snap-{last}.pickle"))
    lines = []
    for stat in b.compare_to(a, "traceback")[:top]:
        lines.append(f"{stat.size_diff / 1024:+.1f} KiB {stat.count_diff:+d} blocks")
        lines.extend("    " + ln for ln in stat.traceback.format(limit=6))
    return lines


def main(argv: list[str] | None = None) -> int:
    """Run the probe; print the growth."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="reports/memprobe")
    p.add_argument("--seed", type=int, default=16)
    p.add_argument("--nodes", type=int, default=50)
    p.add_argument("--load", type=float, default=0.8)
    p.add_argument("--warm", type=int, default=5000, help="pods finished before the 1st probe")
    p.add_argument("--every", type=int, default=5000, help="pods finished between probes")
    p.add_argument("--probes", type=int, default=4)
    p.add_argument("--final-quiet", type=float, default=0.0, help="seconds idle, then a probe")
    args = p.parse_args(argv)
    report = asyncio.run(run(args))
    out = Path(report["out"])
    n = len(report["probes"])
    if n >= 3 and (out / f"snap-{n}.pickle").exists():
        print("\n".join(growth(out, 2, n)))
    first, last = report["probes"][0], report["probes"][-1]
    tf, tl = first["types"], last["types"]
    grew = sorted(((tl.get(t, 0) - tf.get(t, 0), t) for t in tl), reverse=True)[:20]
    print("objects by type, growth first -> last probe:")
    for d, t in grew:
        print(f"  {d:+d} {t} ({tl[t]})")
    sf, sl = first["sizes"], last["sizes"]
    changed = sorted(
        ((sl.get(k, 0) - sf.get(k, 0), k) for k in set(sf) | set(sl)),
        key=lambda x: -abs(x[0]),
    )[:30]
    print("containers reachable from the Scheduler, growth first -> last probe:")
    for d, k in changed:
        if d:
            print(f"  {d:+d} {k} ({sl.get(k, 0)})")
    (out / "summary.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    return 0 if report["exit_code"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
