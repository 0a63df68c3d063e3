"""KubeCluster's client CPU per request on a real kube-apiserver: the lean HTTP/1.1 transport
vs aiohttp, on asyncio's event loop vs uvloop, alternating in one process on one API server.

Per round and transport: ``--pods`` pending pods are created (by an untimed admin client),
then ``KubeCluster`` (``transport="auto"`` = lean, or ``"aiohttp"``) binds each and records
its ``Scheduled`` event -- the two writes a scheduler makes per pod -- with ``--concurrency``
pods in flight, each combination of transport and event loop (``--transports``,
``--event-loops``) on a fresh loop. Reported: this process's CPU (``time.process_time``) per
request and per pod, and requests/s. The scheduler and the watch are not involved: this is
the request path alone.

``--case watch``: the watch path alone. Per round, ``--pods`` pods are created and then
bound by the admin client (untimed: one pod ``MODIFIED`` event each, as a scheduler's
bindings make); then ``KubeCluster.watch`` (bookmarks on, as the informers ask) replays them
from the resourceVersion before the bindings, and the CPU of receiving and decoding them is
measured until the last one: CPU per event (µs) and events/s.

    WORKLOADBUILDER_BIN_DIR=... .venv/bin/python benchmarks/bench_transport.py --rounds 3
    WORKLOADBUILDER_BIN_DIR=... .venv/bin/python benchmarks/bench_transport.py --case watch
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workloadbuilder.cluster import KubeCluster
from workloadbuilder.runtime import run as run_on_loop
from workloadbuilder.testing import AsyncRestClient, ControlPlane
from workloadbuilder.testing.builders import make_pod


async def _bounded(n: int, jobs: list[Any]) -> None:
    sem = asyncio.Semaphore(n)

    async def one(job: Any) -> None:
        async with sem:
            await job()

    await asyncio.gather(*(one(j) for j in jobs))


async def _create_pods(admin: AsyncRestClient, ns: str, count: int) -> list[str]:
    """Create ``count`` unbound pods in ``ns`` (32 at a time); returns their names."""
    names = [f"p{i:05d}" for i in range(count)]

    async def create(name: str) -> None:
        pod = make_pod(name).scheduler_name("bench-transport").request("cpu", "1").obj()
        await admin.call("POST", f"/api/v1/namespaces/{ns}/pods", pod)

    await _bounded(32, [lambda n=n: create(n) for n in names])
    return names


async def one_round(
    plane: ControlPlane, admin: AsyncRestClient, transport: str, ns: str, args: argparse.Namespace
) -> dict[str, Any]:
    names = await _create_pods(admin, ns, args.pods)
    cluster = KubeCluster.from_kubeconfig(plane.kubeconfig, transport=transport)  # type: ignore[arg-type]
    async with cluster as kube:
        await kube.get("Namespace", ns)  # connect, load credentials: not timed

        async def place(name: str) -> None:
            await kube.bind(ns, name, "node-x")
            await kube.create_event(
                namespace=ns,
                involved_object={"apiVersion": "v1", "kind": "Pod", "name": name},
                reason="Scheduled",
                message=f"Successfully assigned {ns}/{name} to node-x",
            )

        cpu0, wall0 = time.process_time(), time.perf_counter()
        await _bounded(args.concurrency, [lambda n=n: place(n) for n in names])
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    requests = 2 * args.pods
    return {
        "transport": "lean" if transport == "auto" else transport,
        "pods": args.pods,
        "requests": requests,
        "cpu_s": round(cpu, 3),
        "cpu_us_per_request": round(cpu / requests * 1e6, 1),
        "cpu_ms_per_pod": round(cpu / args.pods * 1e3, 3),
        "requests_per_s": round(requests / wall, 1),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }


async def watch_round(
    plane: ControlPlane, admin: AsyncRestClient, transport: str, ns: str, args: argparse.Namespace
) -> dict[str, Any]:
    names = await _create_pods(admin, ns, args.pods)

    async def bind(name: str) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": ns},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "node-x"},
        }
        await admin.call("POST", f"/api/v1/namespaces/{ns}/pods/{name}/binding", body)

    listed = await admin.call("GET", f"/api/v1/namespaces/{ns}/pods?limit=1")
    rv = str(listed["metadata"]["resourceVersion"])
    await _bounded(32, [lambda n=n: bind(n) for n in names])
    cluster = KubeCluster.from_kubeconfig(plane.kubeconfig, transport=transport)  # type: ignore[arg-type]
    async with cluster as kube:
        await kube.get("Namespace", ns)  # connect, load credentials: not timed
        seen = 0
        cpu0, wall0 = time.process_time(), time.perf_counter()
        async for event in kube.watch("Pod", ns, resource_version=rv):
            if event.type == "MODIFIED":
                seen += 1
                if seen == args.pods:
                    break
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return {
        "case": "watch",
        "transport": "lean" if transport == "auto" else transport,
        "pods": args.pods,
        "events": seen,
        "cpu_s": round(cpu, 3),
        "cpu_us_per_event": round(cpu / max(1, seen) * 1e6, 1),
        "events_per_s": round(seen / wall, 1),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }


async def combination(
    plane: ControlPlane, args: argparse.Namespace, r: int, transport: str, loop: str
) -> dict[str, Any]:
    """One round of one transport on the running loop, in a namespace of its own."""
    name = "lean" if transport == "auto" else transport
    ns = f"bench-transport-{r}-{name}-{loop}"
    async with AsyncRestClient(plane.kubeconfig, limit=32, transport="lean") as admin:
        await admin.call(
            "POST",
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        )
        body = watch_round if args.case == "watch" else one_round
        res = await body(plane, admin, transport, ns, args)
        await admin.call("DELETE", f"/api/v1/namespaces/{ns}")
    res["event_loop"] = loop
    return res


def run(plane: ControlPlane, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every round: each event loop x transport, alternating, each on a fresh loop."""
    results = []
    for r in range(args.rounds):
        for loop in args.event_loops:
            for transport in args.transports:
                t = "auto" if transport == "lean" else transport
                res = run_on_loop(combination(plane, args, r, t, loop), event_loop=loop)
                if args.case == "watch":
                    figures = (
                        f"{res['cpu_us_per_event']:7.1f} us CPU/event  "
                        f"{res['events_per_s']:8.1f} events/s"
                    )
                else:
                    figures = (
                        f"{res['cpu_us_per_request']:7.1f} us CPU/request  "
                        f"{res['requests_per_s']:7.1f} req/s"
                    )
                print(
                    f"# round {r + 1} {res['transport']:7s} {loop:7s} {figures}  "
                    f"load {res['load_avg_1m']}",
                    file=sys.stderr,
                )
                results.append(res)
    return results


def main(argv: list[str] | None = None) -> int:
    """Parse the flags, run the rounds, print a table (or JSON)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--case",
        choices=("requests", "watch"),
        default="requests",
        help="requests: bind + event per pod (default); watch: receive the pods' MODIFIED events",
    )
    p.add_argument("--pods", type=int, default=2000)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument(
        "--transports",
        type=lambda v: [x for x in v.split(",") if x],
        default=["aiohttp", "lean"],
        help="comma-separated: aiohttp, lean (default both)",
    )
    p.add_argument(
        "--event-loops",
        type=lambda v: [x for x in v.split(",") if x],
        default=["asyncio", "uvloop"],
        help="comma-separated: asyncio, uvloop (default both)",
    )
    p.add_argument("--bin-dir", default=None)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    for t in args.transports:
        if t not in ("aiohttp", "lean"):
            p.error(f"unknown transport {t!r}")
    for loop in args.event_loops:
        if loop not in ("asyncio", "uvloop"):
            p.error(f"unknown event loop {loop!r}")
    with ControlPlane(bin_dir=args.bin_dir) as plane:
        results = run(plane, args)
    if args.json:
        report = {
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
            "command": " ".join(["benchmarks/bench_transport.py", *(argv or sys.argv[1:])]),
            "results": results,
        }
        print(json.dumps(report, indent=2))
        return 0
    per_round = len(args.transports) * len(args.event_loops)
    if args.case == "watch":
        print(f"{'round':>5} {'transport':9} {'loop':7} {'us CPU/event':>12} {'events/s':>9} load")
        for i, res in enumerate(results):
            print(
                f"{i // per_round + 1:>5} {res['transport']:9} {res['event_loop']:7} "
                f"{res['cpu_us_per_event']:>12} {res['events_per_s']:>9} {res['load_avg_1m']}"
            )
        return 0
    print(
        f"{'round':>5} {'transport':9} {'loop':7} {'us CPU/request':>14} {'ms CPU/pod':>10} "
        f"{'req/s':>8} load"
    )
    for i, res in enumerate(results):
        print(
            f"{i // per_round + 1:>5} {res['transport']:9} {res['event_loop']:7} "
            f"{res['cpu_us_per_request']:>14} {res['cpu_ms_per_pod']:>10} "
            f"{res['requests_per_s']:>8} {res['load_avg_1m']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
