"""Chaos harness: a gang workload on fake Nodes of a real API server, ``workloadbuilder
scheduler`` as a subprocess that is SIGKILLed and restarted, an observer that watches every
pod and PodGroup of the namespace, and the end-state checks.

Used by ``tests/chaos/test_*.py`` (CI sizes) and, with ``CHAOS_SCALE=full``, by ``make
chaos`` (the full counts). Every wait has a deadline; everything talks to 127.0.0.1.

What the observer records (monotonic clock of the test process):

* per pod: the first ``spec.nodeName`` seen and when, and any later change of it (a double
  bind: the API server never moves a bound pod, so a change means the pod was deleted and
  re-created, or bound twice);
* per PodGroup: the sequence of ``PodGroupInitiallyScheduled`` statuses seen (a regression is
  a ``True`` followed by anything else).

A watch that ends, fails or answers 410 Gone is followed by a relist (the relisted objects
are processed like events), so the observer survives API server restarts.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

import aiohttp
import attrs

from workloadbuilder.testing import AsyncRestClient
from workloadbuilder.testing.builders import make_node, make_pod, make_pod_group

__all__ = [
    "CLI",
    "CONDITION",
    "NODE_CPU",
    "PG_PATH",
    "PODS_PATH",
    "POOL_KEY",
    "Api",
    "Gang",
    "Observer",
    "SchedulerProcess",
    "analyse",
    "bounded",
    "cleanup",
    "create_gangs",
    "create_namespace",
    "create_nodes",
    "die_with_parent",
    "free_port",
    "gang_pod",
    "gang_sizes",
    "max_concurrent",
    "percentile",
    "scale",
    "scheduler_argv",
    "violations",
    "wait_until",
    "write_report",
]

CLI = str(Path(sys.executable).parent / "workloadbuilder")
POOL_KEY = "chaos.workloadbuilder.test/pool"
NODE_CPU = 32
PODS_PATH = "/api/v1/namespaces/{ns}/pods"
PG_PATH = "/apis/scheduling.k8s.io/v1beta1/namespaces/{ns}/podgroups"
CONDITION = "PodGroupInitiallyScheduled"


def scale() -> str:
    """``ci`` (default) or ``full`` (``CHAOS_SCALE=full``, ``make chaos``)."""
    return "full" if os.environ.get("CHAOS_SCALE", "ci") == "full" else "ci"


# ---------------------------------------------------------------------- HTTP


class Api(AsyncRestClient):
    """The admin client of the fault tests: connection errors and 429/5xx are retried, 30
    times 0.5 s apart (bounded: the API server may be restarting)."""

    def __init__(self, kubeconfig: Path, limit: int = 32) -> None:
        super().__init__(kubeconfig, limit=limit, attempts=30, timeout=30.0)


async def bounded(n: int, jobs: Iterable[Callable[[], Awaitable[Any]]]) -> None:
    """Run the coroutine factories with at most ``n`` in flight."""
    sem = asyncio.Semaphore(n)

    async def one(job: Callable[[], Awaitable[Any]]) -> None:
        async with sem:
            await job()

    await asyncio.gather(*(one(j) for j in jobs))


async def wait_until(
    check: Callable[[], bool | Awaitable[bool]], what: str, timeout: float, step: float = 0.1
) -> None:
    """Poll ``check`` until true; AssertionError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if not isinstance(got, bool):
            got = await got
        if got:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        await asyncio.sleep(step)


# ---------------------------------------------------------------------- workload


@attrs.frozen
class Gang:
    """One PodGroup of ``size`` pods, ``minCount == size``; ``cpu`` per pod; pods named
    ``<name>-NN`` unless ``members`` names them (a controller's pods)."""

    name: str
    size: int
    cpu: int = 1
    members: tuple[str, ...] = ()

    @property
    def pods(self) -> list[str]:
        """Its pod names."""
        if self.members:
            return list(self.members)
        return [f"{self.name}-{j:02d}" for j in range(self.size)]


def gang_sizes(pods: int, rng: random.Random, low: int = 8, high: int = 64) -> list[int]:
    """Gang sizes in [low, high] summing to ``pods`` (the last one absorbs a remainder)."""
    sizes: list[int] = []
    left = pods
    while left > 0:
        size = min(rng.randint(low, high), left)
        if 0 < left - size < low:
            size = left if left <= high else left - low
        sizes.append(size)
        left -= size
    return sizes


async def create_nodes(api: Api, pool: str, count: int) -> list[str]:
    """Fake Ready nodes of ``NODE_CPU`` cpu, labelled and tainted for this pool only (other
    tests' schedulers share the server)."""
    names = [f"{pool}-n{i:04d}" for i in range(count)]

    async def one(name: str) -> None:
        node = (
            make_node(name)
            .label("kubernetes.io/hostname", name)
            .label(POOL_KEY, pool)
            .taint(POOL_KEY, pool)
            .resources({"cpu": str(NODE_CPU), "memory": "256Gi", "pods": "110"})
            .ready()
            .obj()
        )
        await api.call("POST", "/api/v1/nodes", node, ok=(201, 409))
        await api.call(
            "PATCH",
            f"/api/v1/nodes/{name}/status",
            {"status": node["status"]},
            content_type="application/merge-patch+json",
        )

    await bounded(16, [lambda n=n: one(n) for n in names])
    return names


def gang_pod(gang: Gang, name: str, ns: str, scheduler: str, pool: str) -> dict[str, Any]:
    """One member of ``gang``: on the pool's nodes only."""
    return (
        make_pod(name, ns)
        .pod_group(gang.name)
        .scheduler_name(scheduler)
        .node_selector(POOL_KEY, pool)
        .toleration(POOL_KEY, pool, effect="NoSchedule", operator="Equal")
        .container_name("c")
        .request("cpu", str(gang.cpu))
        .request("memory", "64Mi")
        .obj()
    )


async def create_gangs(
    api: Api, ns: str, scheduler: str, pool: str, gangs: list[Gang], *, groups_first: bool = True
) -> None:
    """Every PodGroup, then every pod (16 requests in flight)."""
    if groups_first:
        await bounded(
            16,
            [
                lambda g=g: api.call(
                    "POST",
                    PG_PATH.format(ns=ns),
                    make_pod_group(g.name, ns).gang(g.size).obj(),
                    ok=(201, 409),  # 409: a retry after a lost answer
                )
                for g in gangs
            ],
        )
    await bounded(
        16,
        [
            lambda g=g, p=p: api.call(
                "POST", PODS_PATH.format(ns=ns), gang_pod(g, p, ns, scheduler, pool), ok=(201, 409)
            )
            for g in gangs
            for p in g.pods
        ],
    )


async def create_namespace(api: Api, ns: str) -> None:
    """Create ``ns`` (409 is fine)."""
    await api.call(
        "POST",
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        ok=(201, 409),
    )


async def cleanup(api: Api, ns: str, nodes: Iterable[str]) -> None:
    """Delete the namespace's pods (grace 0), PodGroups and events, and the pool's nodes: the
    session's API server is shared with other tests."""
    opts = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
    for path in (PODS_PATH, PG_PATH, "/api/v1/namespaces/{ns}/events"):
        await api.call("DELETE", path.format(ns=ns), opts)
    await bounded(
        16, [lambda n=n: api.call("DELETE", f"/api/v1/nodes/{n}", ok=(200, 404)) for n in nodes]
    )


# ---------------------------------------------------------------------- observer


def _condition(obj: dict[str, Any]) -> str | None:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == CONDITION:
            return str(c.get("status"))
    return None


@attrs.define
class Observer:
    """Watches the pods and PodGroups of one namespace (see the module docstring)."""

    api: Api
    ns: str
    bound_at: dict[str, float] = attrs.field(factory=dict)
    node_of: dict[str, str] = attrs.field(factory=dict)
    moved: list[tuple[str, str, str]] = attrs.field(factory=list)
    conditions: dict[str, list[str]] = attrs.field(factory=dict)
    condition_events: int = 0
    last_condition_at: float = 0.0
    relists: int = 0
    _tasks: list[asyncio.Task[None]] = attrs.field(factory=list)

    def start(self) -> None:
        """Start both watch loops."""
        self._tasks = [
            asyncio.create_task(self._loop(PODS_PATH.format(ns=self.ns), self._pod)),
            asyncio.create_task(self._loop(PG_PATH.format(ns=self.ns), self._group)),
        ]

    async def stop(self) -> None:
        """Cancel the watch loops."""
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t

    def _pod(self, obj: dict[str, Any], now: float) -> None:
        name = obj["metadata"]["name"]
        node = (obj.get("spec") or {}).get("nodeName")
        if not node:
            return
        first = self.node_of.get(name)
        if first is None:
            self.node_of[name] = node
            self.bound_at[name] = now
        elif first != node:
            self.moved.append((name, first, node))

    def _group(self, obj: dict[str, Any], now: float) -> None:
        name = obj["metadata"]["name"]
        status = _condition(obj)
        seq = self.conditions.setdefault(name, [])
        value = status or "-"
        if not seq or seq[-1] != value:
            seq.append(value)
            if status is not None:
                self.condition_events += 1
                self.last_condition_at = now

    async def _loop(self, path: str, handle: Callable[[dict[str, Any], float], None]) -> None:
        while True:
            try:
                listed = await self.api.call("GET", path)
                self.relists += 1
                now = time.monotonic()
                for item in listed.get("items", []):
                    handle(item, now)
                rv = listed["metadata"]["resourceVersion"]
                url = (
                    f"{self.api.server}{path}?watch=1&allowWatchBookmarks=true"
                    f"&resourceVersion={rv}&timeoutSeconds=120"
                )
                async with self.api.session.get(
                    url, timeout=aiohttp.ClientTimeout(total=None, sock_read=150)
                ) as resp:
                    if resp.status != 200:
                        await asyncio.sleep(0.2)
                        continue
                    async for line in resp.content:
                        ev = json.loads(line)
                        kind = ev.get("type")
                        if kind == "ERROR":
                            break  # 410 Gone and the like: relist
                        if kind in ("ADDED", "MODIFIED"):
                            handle(ev["object"], time.monotonic())
            except asyncio.CancelledError:
                raise
            except (aiohttp.ClientError, TimeoutError, ConnectionError, RuntimeError, ValueError):
                await asyncio.sleep(0.2)


# ---------------------------------------------------------------------- the scheduler


def die_with_parent() -> None:
    """In the forked child before exec: SIGKILL when the test process dies (Linux
    ``PR_SET_PDEATHSIG``), so an interrupted run leaves no component behind."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)


class SchedulerProcess:
    """``workloadbuilder scheduler`` as a subprocess (its own session, output to a log)."""

    def __init__(self, argv: list[str], log: Path) -> None:
        self.port = free_port()
        self.argv = argv = [*argv, f"--metrics-port={self.port}"]
        self.log_path = log
        self._log = log.open("ab")
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )

    @property
    def pid(self) -> int:
        """Its process id."""
        return self.proc.pid

    def alive(self) -> bool:
        """Still running."""
        return self.proc.poll() is None

    async def ready(self) -> bool:
        """``/readyz`` answers 200 (informers synced, and leading with leader election)."""

        def probe() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=2) as r:
                    return int(r.status) == 200
            except (OSError, ValueError):
                return False

        return await asyncio.to_thread(probe)

    def kill(self) -> None:
        """SIGKILL and reap."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        self._log.close()

    def terminate(self) -> int:
        """SIGTERM, SIGKILL after 20 s; the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(20)
        self._log.close()
        return int(self.proc.returncode)


def free_port() -> int:
    """A free loopback TCP port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scheduler_argv(kubeconfig: Path, scheduler: str, *extra: str) -> list[str]:
    """The scheduler's command line: no leader election (unless ``extra``); the metrics and
    health port is appended by :class:`SchedulerProcess`."""
    return [
        CLI,
        "scheduler",
        f"--kubeconfig={kubeconfig}",
        f"--scheduler-name={scheduler}",
        "--bind-address=127.0.0.1",
        *(extra or ("--no-leader-elect",)),
    ]


# ---------------------------------------------------------------------- analysis


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * len(s)) - 1))]


def max_concurrent(intervals: Iterable[tuple[float, float]]) -> int:
    """The most intervals open at one moment."""
    events: list[tuple[float, int]] = []
    for a, b in intervals:
        if b > a:
            events.append((a, 1))
            events.append((b, -1))
    events.sort()
    best = cur = 0
    for _, d in events:
        cur += d
        best = max(best, cur)
    return best


async def analyse(
    api: Api, ns: str, obs: Observer, gangs: list[Gang], nodes: list[str]
) -> dict[str, Any]:
    """The end state from a fresh list (and the observer's history): the violations and the
    figures."""
    pods = (await api.call("GET", PODS_PATH.format(ns=ns))).get("items", [])
    groups = (await api.call("GET", PG_PATH.format(ns=ns))).get("items", [])
    by_name = {p["metadata"]["name"]: p for p in pods}
    expected = {p for g in gangs for p in g.pods}
    lost = sorted(expected - by_name.keys())
    extra = sorted(by_name.keys() - expected)
    final_node = {n: (p.get("spec") or {}).get("nodeName") for n, p in by_name.items()}
    # overcommit: cpu and pod count per node
    cpu: dict[str, int] = {}
    count: dict[str, int] = {}
    gang_of = {p: g for g in gangs for p in g.pods}
    for name, node in final_node.items():
        if node:
            cpu[node] = cpu.get(node, 0) + gang_of[name].cpu
            count[node] = count.get(node, 0) + 1
    overcommitted = sorted(n for n in cpu if cpu[n] > NODE_CPU or count[n] > 110)
    off_pool = sorted(n for n in cpu if n not in set(nodes))
    partial: list[str] = []
    bound_gangs = 0
    windows: list[float] = []
    intervals: list[tuple[float, float]] = []
    for g in gangs:
        n_bound = sum(1 for p in g.pods if final_node.get(p))
        if 0 < n_bound < g.size:
            partial.append(f"{g.name}: {n_bound}/{g.size}")
        if n_bound == g.size:
            bound_gangs += 1
        times = [obs.bound_at[p] for p in g.pods if p in obs.bound_at]
        if times:
            end = max(times) if len(times) == g.size else time.monotonic()
            windows.append(end - min(times))
            intervals.append((min(times), end))
    regressed = {
        g: seq
        for g, seq in obs.conditions.items()
        if "True" in seq and any(s != "True" for s in seq[seq.index("True") :])
    }
    final_cond = {g["metadata"]["name"]: _condition(g) for g in groups}
    moved_in_api = [
        (n, obs.node_of[n], final_node.get(n))
        for n in obs.node_of
        if n in final_node and final_node[n] != obs.node_of[n]
    ]
    return {
        "pods": len(expected),
        "gangs": len(gangs),
        "gangs_bound": bound_gangs,
        "lost_pods": lost,
        "unexpected_pods": extra,
        "double_bound": [*obs.moved, *moved_in_api],
        "overcommitted_nodes": overcommitted,
        "off_pool": off_pool,
        "partial_gangs": partial,
        "condition_regressions": regressed,
        "final_conditions": final_cond,
        "partial_window_p50_s": round(percentile(windows, 0.5), 3),
        "partial_window_p99_s": round(percentile(windows, 0.99), 3),
        "partial_window_max_s": round(max(windows, default=0.0), 3),
        "max_concurrently_partial": max_concurrent(intervals),
        "observer_relists": obs.relists,
    }


def violations(report: dict[str, Any]) -> dict[str, Any]:
    """The non-empty violation lists of an :func:`analyse` report."""
    keys = (
        "lost_pods",
        "unexpected_pods",
        "double_bound",
        "overcommitted_nodes",
        "off_pool",
        "partial_gangs",
        "condition_regressions",
    )
    return {k: report[k] for k in keys if report[k]}


def write_report(name: str, report: dict[str, Any]) -> None:
    """Print the report and, with ``CHAOS_REPORT_DIR``, write it as ``<name>.json`` there."""
    text = json.dumps(report, indent=2, sort_keys=True, default=str)
    print(f"\n== {name} ==\n{text}")
    out = os.environ.get("CHAOS_REPORT_DIR")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / f"{name}.json").write_text(text + "\n")
