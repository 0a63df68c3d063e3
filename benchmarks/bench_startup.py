"""The scheduler's start-up cost on a real kube-apiserver: CPU of ``workloadbuilder scheduler``
from exec until it is idle, on ``--nodes`` fake Nodes and no pending pod.

The control plane and the nodes are created once; then, ``--rounds`` times, each variant
(``--variant NAME=TREE[,FLAG...]``: a source tree put first on ``PYTHONPATH`` -- ``.`` for
this one, or e.g. an unpacked copy of main -- and extra scheduler flags) is started (its
bytecode compiled first, as an installed copy has it), its CPU (``/proc/<pid>/stat``)
sampled every 0.25 s for ``--seconds``, and stopped. Reported per run: its CPU seconds at
the end, when it got within 10 ms of that (``idle s``), and the load average.

    WORKLOADBUILDER_BIN_DIR=... .venv/bin/python benchmarks/bench_startup.py --nodes 1000 \\
        --variant main=/tmp/wb-main --variant asyncio=.,--event-loop=asyncio \\
        --variant uvloop=.,--event-loop=uvloop
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_real import Api, contender_env, create_nodes, precompile, proc_cpu

from workloadbuilder.testing import ControlPlane


def one(plane: ControlPlane, tree: Path, flags: list[str], seconds: float) -> dict[str, Any]:
    """Start the scheduler from ``tree`` and sample its CPU until ``seconds`` have passed."""
    env = contender_env(tree)
    argv = [
        sys.executable,
        "-c",
        "import sys; from workloadbuilder.cli import main; sys.exit(main())",
        "scheduler",
        f"--kubeconfig={plane.kubeconfig}",
        "--no-leader-elect",
        "--metrics-port=0",
        *flags,
    ]
    load = os.getloadavg()[0]
    log = (plane.log_dir / "bench-startup.log").open("ab")
    proc = subprocess.Popen(argv, cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT)
    samples: list[tuple[float, float]] = []
    t0 = time.monotonic()
    try:
        while (now := time.monotonic() - t0) < seconds:
            if proc.poll() is not None:
                raise RuntimeError(f"the scheduler exited with {proc.returncode}")
            samples.append((now, proc_cpu(proc.pid)))
            time.sleep(0.25)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    end_cpu = samples[-1][1]
    idle_at = next(t for t, cpu in samples if cpu >= end_cpu - 0.01)  # within 10 ms of the end
    return {
        "idle_s": round(idle_at, 2),
        "cpu_s": round(end_cpu, 3),
        "load_avg_1m": round(load, 2),
    }


def main(argv: list[str] | None = None) -> int:
    """Parse the flags, run every variant ``--rounds`` times (alternating), print a table."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument(
        "--variant",
        action="append",
        default=[],
        help="NAME=TREE[,FLAG...] (repeatable; default: this tree as is)",
    )
    p.add_argument("--bin-dir", default=None)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    here = Path(__file__).resolve().parents[1]
    variants: list[tuple[str, Path, list[str]]] = []
    for spec in args.variant or ["this=."]:
        name, _, rest = spec.partition("=")
        tree, *flags = rest.split(",")
        path = Path(tree)
        variants.append((name, (here / path if not path.is_absolute() else path).resolve(), flags))
    for _, tree, _ in variants:
        precompile(tree)
    results = []
    with ControlPlane(bin_dir=args.bin_dir) as plane:

        async def nodes() -> None:
            async with Api(plane.kubeconfig, limit=64) as api:
                await create_nodes(api, args.nodes)

        asyncio.run(nodes())
        for r in range(args.rounds):
            for name, tree, flags in variants:
                res = {"variant": name, "round": r + 1, **one(plane, tree, flags, args.seconds)}
                print(json.dumps(res), file=sys.stderr)
                results.append(res)
    if args.json:
        print(json.dumps({"nodes": args.nodes, "results": results}, indent=2))
        return 0
    print(f"{'variant':<10} {'round':>5} {'idle s':>7} {'CPU s':>6} load")
    for res in results:
        print(
            f"{res['variant']:<10} {res['round']:>5} {res['idle_s']:>7} {res['cpu_s']:>6} "
            f"{res['load_avg_1m']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
