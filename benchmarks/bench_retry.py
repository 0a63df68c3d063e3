"""CPU of ``KubeCluster``'s retry wrapper alone (``retry_call``), per request: a request that
succeeds at once (the happy path: every request of a healthy scheduler), one that fails for
good at once (a 404 or 409: no retry), and one whose first attempt fails with a retryable
503 and whose second succeeds (the retry path; the policy's sleep does not wait).

No API server: the "request" is a coroutine that returns or raises. Each variant
(``--variant NAME=TREE``: a source tree put first on ``sys.path`` -- ``.`` for this one, or an
unpacked copy of main) runs in a fresh child process; the variants alternate, ``--rounds``
times (their bytecode compiled first). Reported: µs of CPU (``time.process_time``) per call,
and the child's CPU to import ``workloadbuilder.cluster`` and ``KubeCluster``.

    .venv/bin/python benchmarks/bench_retry.py --variant main=/tmp/wb-main --variant new=.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

CHILD = r"""
import asyncio, json, sys, time
t0 = time.process_time()
from workloadbuilder.cluster import KubeCluster, RetryPolicy
from workloadbuilder.cluster._retry import retry_call
from workloadbuilder.errors import ApiError, NotFound
import_cpu = time.process_time() - t0
N = int(sys.argv[1])

async def nap(seconds):
    return None

policy = RetryPolicy(sleep=nap)

async def main():
    async def ok():
        return 1

    async def missing():
        raise NotFound("gone", status=404)

    state = [0]

    async def flaky():
        state[0] += 1
        if state[0] % 2:
            raise ApiError("unavailable", status=503)
        return 1

    out = {"import_ms": round(import_cpu * 1e3, 1), "tree": __import__("workloadbuilder").__file__}
    for name, fn, n in (("happy", ok, N), ("final", missing, N // 4), ("retried", flaky, N // 4)):
        for _ in range(min(n, 1000)):  # warm up
            try:
                await retry_call(fn, policy=policy, idempotent=True)
            except ApiError:
                pass
        t = time.process_time()
        for _ in range(n):
            try:
                await retry_call(fn, policy=policy, idempotent=True)
            except ApiError:
                pass
        out[name + "_us"] = round((time.process_time() - t) / n * 1e6, 2)
    print(json.dumps(out))

asyncio.run(main())
"""


def one(tree: Path, calls: int) -> dict[str, Any]:
    """Run the child on ``tree``; its figures."""
    env = dict(os.environ, PYTHONPATH=str(tree.resolve()))
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(calls)],
        env=env,
        cwd=tree.resolve(),  # ``-c`` puts the working directory first on sys.path
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    """Parse the flags, alternate the variants, print one line per run (or JSON)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--variant", action="append", required=True, help="NAME=TREE")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--calls", type=int, default=40000)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    variants = [v.split("=", 1) for v in args.variant]
    for _, tree in variants:  # bytecode written first, as an installed copy has it
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", "workloadbuilder"],
            cwd=tree,
            stdout=subprocess.DEVNULL,
            check=True,
        )
    results = []
    for r in range(1, args.rounds + 1):
        for name, tree in variants:
            got = {"variant": name, "round": r, **one(Path(tree), args.calls)}
            got["load_avg_1m"] = round(os.getloadavg()[0], 2)
            results.append(got)
            if not args.json:
                print(
                    f"{name:10} {r:>3}  happy {got['happy_us']:6.2f} µs  final "
                    f"{got['final_us']:6.2f} µs  retried {got['retried_us']:7.2f} µs  "
                    f"import {got['import_ms']:6.1f} ms  load {got['load_avg_1m']}"
                )
    if args.json:
        print(json.dumps({"command": " ".join(sys.argv), "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
