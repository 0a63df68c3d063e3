"""Gang scheduling on a real kube-apiserver v1.37.2: upstream kube-scheduler, ours, a ceiling.

One command starts etcd + kube-apiserver from the harness (every workload-aware-scheduling
feature gate on), creates fake Nodes (32 cpu, 128Gi, 110 pods, Ready), then for each
contender, one after the other on the same API server: creates the whole workload in a fresh
namespace (PodGroups of 8-32 pods, minCount = size, cpu 1 / memory 1Gi per pod; everything
created before the contender starts), starts the contender as a subprocess, waits until every
pod is bound (a watch on the namespace), stops it and deletes the pods and groups.

``--pod-constraints`` (``make bench-real-constraints``): the nodes spread over 8 zones
(``topology.kubernetes.io/zone``), and every gang's pods carry ``app: <gang>``, a required pod
anti-affinity on ``kubernetes.io/hostname`` against their own gang (one worker per node) and a
``maxSkew: 1`` ``DoNotSchedule`` zone spread of their gang; after each upstream and ours run
the benchmark checks that both held (``CONSTRAINTS BROKEN`` and exit 1 otherwise; the ceiling
binds anywhere, as ever).

Contenders:

* ``upstream``: kube-scheduler v1.37.2, gates on, clientConnection qps/burst 5000 (as
  scheduler_perf), leader election off.
* ``ours``: ``workloadbuilder scheduler`` as a subprocess (leader election off, metrics off;
  ``--ours-arg`` passes extra flags, e.g. ``--ours-arg=--bind-concurrency=32``).
* ``ceiling``: a plain client (this file with ``--ceiling-worker``) that issues exactly the
  writes parity requires -- per pod the binding and the ``Scheduled`` event, per group one
  status patch -- with bounded concurrency (``--ceiling-concurrency``, default 64) and a
  trivial node choice, on the same lean HTTP/1.1 client as ours' requests
  (``--ceiling-transport=aiohttp`` for aiohttp), on the same event loop as ours by default
  (uvloop when installed; ``--ceiling-event-loop``, and ``--ours-arg=--event-loop=...`` for
  ours). No scheduler can beat it on this API server.

Reported per run: seconds from the contender's start to all pods bound, pods/s (pods / that
time) and the binding-phase rate (pods / (last bind - first bind)), time to first bind,
p50/p99 group latency (group complete -> all its pods bound; every group is complete when
the contender starts, so this is measured from its start), when the namespace holds one
event per pod (events may trail the binds; CPU is read after that), CPU seconds of
the contender, kube-apiserver and etcd (from ``/proc/<pid>/stat``), the contender's peak
RSS (``VmHWM``), the partial windows (per gang: its first pod bound -> its last pod bound,
p50/p99, as the watch sees them), the most gangs partially bound at one moment and their
time-weighted mean over the binding phase, and the
ratios ours/upstream and ours/ceiling. Also per run: how many pods got a ``Scheduled``
event (a run short of one per pod is marked ``EVENTS MISSING`` and the command exits 1),
ours' event and watch-stall counters (from its metrics endpoint), and the API server's
account of the run per pod -- ``apiserver_request_total`` by verb, resource, subresource
and code, ``apiserver_watch_events_total`` by resource and ``etcd_requests_total`` by
operation, the differences of kube-apiserver's ``/metrics`` from before the contender
starts to after its events are written, less the benchmark's own requests (a second table;
``requests_per_pod`` in ``--json``).

Other modes (``--mode``; upstream and ours, no ceiling):

* ``stream``: the contender runs while gangs of 8-32 pods are created at a fixed rate
  (``--stream-rates``, tried in order, for ``--stream-seconds`` each); per gang the time from
  its last pod created to all its pods bound; the highest rate kept up with (all bound,
  p99 <= ``--stream-p99``, the creator reached 90 % of the rate).
* ``queueing``: ``--backlog-gangs`` gangs that cannot fit (a node selector no node has) are
  added in ``--backlog-steps`` while the contender runs; after each step ``--probes``
  fitting gangs of 8 arrive one at a time and the time to bind each is recorded (it must
  stay flat as the backlog grows); then nodes that fit the backlog are added in
  ``--drain-steps``, each with the seconds until the pods that now fit are bound.

    .venv/bin/python benchmarks/bench_real.py                         # 500 nodes, 2,000 pods
    .venv/bin/python benchmarks/bench_real.py --nodes 1000 --pods 5000 --repeat 2
    .venv/bin/python benchmarks/bench_real.py --only ours --json
    .venv/bin/python benchmarks/bench_real.py --mode stream --nodes 1000
    .venv/bin/python benchmarks/bench_real.py --mode queueing --nodes 100

Needs the binaries (``make controlplane``; ``WORKLOADBUILDER_BIN_DIR`` or ``--bin-dir``).
Loopback only; every wait is bounded (``--timeout`` per contender).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import functools
import json
import os
import platform
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Literal

import aiohttp
import yaml
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workloadbuilder.runtime import resolve_event_loop
from workloadbuilder.runtime import run as run_on_loop
from workloadbuilder.testing import AsyncRestClient, ControlPlane
from workloadbuilder.testing.builders import make_node, make_pod, make_pod_group

CONTENDERS = ("upstream", "ours", "ceiling")
ZONE = "topology.kubernetes.io/zone"
ZONES = 8
SCHEDULER_NAMES = {
    "upstream": "default-scheduler",
    "ours": "workloadbuilder-scheduler",
    "ceiling": "bench-ceiling",
}
NODE_CPU, NODE_MEMORY, NODE_PODS = 32, "128Gi", 110
PODS_PATH = "/api/v1/namespaces/{ns}/pods"
PG_PATH = "/apis/scheduling.k8s.io/v1beta1/namespaces/{ns}/podgroups"
_CLK = os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------------- HTTP


class Api(AsyncRestClient):
    """The benchmark's admin client: no environment lookups, no retries."""

    def __init__(
        self, kubeconfig: Path, limit: int = 64, transport: Literal["aiohttp", "lean"] = "aiohttp"
    ) -> None:
        super().__init__(kubeconfig, limit=limit, transport=transport)


async def _bounded(n: int, jobs: list[Callable[[], Any]]) -> None:
    """Run the coroutine factories with at most ``n`` in flight."""
    sem = asyncio.Semaphore(n)

    async def one(job: Callable[[], Any]) -> None:
        async with sem:
            await job()

    await asyncio.gather(*(one(j) for j in jobs))


# ---------------------------------------------------------------------- workload


def group_sizes(pods: int, seed: int) -> list[int]:
    """Gang sizes 8-32 that sum to ``pods`` (the last one absorbs a remainder below 8)."""
    rng = random.Random(seed)
    sizes: list[int] = []
    left = pods
    while left > 0:
        size = min(rng.randint(8, 32), left)
        if left - size < 8 and left - size > 0:
            size = left if left <= 32 else left - 8
        sizes.append(size)
        left -= size
    return sizes


async def create_nodes(
    api: Api,
    count: int,
    *,
    names: list[str] | None = None,
    labels: dict[str, str] | None = None,
    zones: int = 0,
) -> None:
    """Fake Ready nodes (``node-NNNNN``, or ``names``); status is written through the status
    subresource. ``zones``: node ``i`` also gets ``topology.kubernetes.io/zone:
    zone-<i % zones>``."""

    async def one(name: str) -> None:
        zone = {ZONE: f"zone-{int(name[5:]) % zones}"} if zones else {}
        node = (
            make_node(name)
            .label("kubernetes.io/hostname", name)
            .labels({**(labels or {}), **zone})
            .resources({"cpu": str(NODE_CPU), "memory": NODE_MEMORY, "pods": str(NODE_PODS)})
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

    todo = names if names is not None else [f"node-{i:05d}" for i in range(count)]
    await _bounded(64, [functools.partial(one, n) for n in todo])


def _constrained(pod: dict[str, Any], group: str) -> dict[str, Any]:
    """One worker per node and a balanced zone spread, both of the pod's own gang."""
    mine = {"matchLabels": {"app": group}}
    pod["metadata"].setdefault("labels", {})["app"] = group
    term = {"labelSelector": mine, "topologyKey": "kubernetes.io/hostname"}
    pod["spec"]["affinity"] = {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    }
    spread = {
        "maxSkew": 1,
        "topologyKey": ZONE,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": mine,
    }
    pod["spec"]["topologySpreadConstraints"] = [spread]
    return pod


async def constraints_held(api: Api, ns: str, zones: int) -> bool:
    """Every gang's bound pods on distinct nodes, and its pods per zone within 1."""
    pods = (await api.call("GET", PODS_PATH.format(ns=ns))).get("items") or []
    nodes_of: dict[str, list[str]] = {}
    for pod in pods:
        node = pod["spec"].get("nodeName")
        if node:
            nodes_of.setdefault(pod["spec"]["schedulingGroup"]["podGroupName"], []).append(node)
    for nodes in nodes_of.values():
        per_zone = [0] * zones
        for n in nodes:
            per_zone[int(n[5:]) % zones] += 1
        if len(set(nodes)) != len(nodes) or max(per_zone) - min(per_zone) > 1:
            return False
    return True


async def create_workload(
    api: Api, ns: str, scheduler: str, sizes: list[int], *, constrained: bool = False
) -> None:
    """The namespace, then every PodGroup and its pods (64 requests in flight); with
    ``constrained``, each gang's pods repel each other per node and spread over the zones."""
    await api.call(
        "POST",
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        ok=(201, 409),
    )
    groups = [make_pod_group(f"g{i:05d}").gang(size).obj() for i, size in enumerate(sizes)]
    await _bounded(
        64, [functools.partial(api.call, "POST", PG_PATH.format(ns=ns), g) for g in groups]
    )
    pods = [
        make_pod(f"g{i:05d}-{j:02d}")
        .pod_group(f"g{i:05d}")
        .scheduler_name(scheduler)
        .container_name("c")
        .request("cpu", "1")
        .request("memory", "1Gi")
        .obj()
        for i, size in enumerate(sizes)
        for j in range(size)
    ]
    if constrained:
        pods = [_constrained(p, p["spec"]["schedulingGroup"]["podGroupName"]) for p in pods]
    await _bounded(
        64, [functools.partial(api.call, "POST", PODS_PATH.format(ns=ns), p) for p in pods]
    )


async def cleanup(api: Api, ns: str, deadline: float) -> None:
    """Delete every pod (grace 0), PodGroup and Event of the namespace; wait (bounded) for the
    pods to be gone so the next contender sees empty nodes."""
    opts = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
    for path in (PODS_PATH.format(ns=ns), PG_PATH.format(ns=ns), f"/api/v1/namespaces/{ns}/events"):
        while True:  # a collection of 10,000 pods can outlast the server's 60 s request limit
            try:
                await api.call("DELETE", path, opts)
                break
            except (RuntimeError, TimeoutError) as e:  # 504 from the server, or our timeout
                if isinstance(e, RuntimeError) and ": 504 " not in str(e):
                    raise
                if time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(1.0)
    while time.monotonic() < deadline:
        left = await api.call("GET", PODS_PATH.format(ns=ns) + "?limit=1")
        if not left.get("items"):
            return
        await asyncio.sleep(0.5)
    raise RuntimeError(f"pods of {ns} still present after cleanup")


# ---------------------------------------------------------------------- measuring


def proc_cpu(pid: int) -> float:
    """utime + stime of a process, in seconds."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _CLK


def proc_hwm_mib(pid: int) -> float:
    """Peak resident set size (``VmHWM``) in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def children_named(names: tuple[str, ...]) -> dict[str, int]:
    """Our direct children with these command names (the harness's etcd and apiserver)."""
    found: dict[str, int] = {}
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = (entry / "stat").read_text()
            comm = stat[stat.index("(") + 1 : stat.rindex(")")]
            ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
            if ppid == me and comm in names:
                found[comm] = int(entry.name)
    return found


async def _watch_lines(api: Api, path: str, rv: str, seconds: int) -> AsyncIterator[bytes]:
    url = f"{api.server}{path}?watch=1&resourceVersion={rv}&timeoutSeconds={seconds}"
    async with api.session.get(url, timeout=aiohttp.ClientTimeout(total=seconds + 30)) as resp:
        if resp.status != 200:
            raise RuntimeError(f"watch {path}: {resp.status}")
        async for line in resp.content:
            yield line


async def watch_binds(
    api: Api,
    ns: str,
    expected: int,
    bound: dict[str, float],
    deadline: float,
    own: dict[str, int] | None = None,
) -> None:
    """Record the first time each pod of ``ns`` is seen with ``spec.nodeName``, until all
    ``expected`` are bound or the deadline passes. Re-lists after a watch ends (bounded).
    ``own`` counts the requests sent (``"LIST pods"``, ``"WATCH pods"``)."""
    path = PODS_PATH.format(ns=ns)
    own = {} if own is None else own
    for _ in range(1000):
        own["LIST pods"] = own.get("LIST pods", 0) + 1
        listed = await api.call("GET", path)
        now = time.monotonic()
        for p in listed.get("items", []):
            if p["spec"].get("nodeName"):
                bound.setdefault(p["metadata"]["name"], now)
        if len(bound) >= expected:
            return
        left = int(deadline - time.monotonic())
        if left <= 0:
            return
        rv = listed["metadata"]["resourceVersion"]
        own["WATCH pods"] = own.get("WATCH pods", 0) + 1
        with contextlib.suppress(aiohttp.ClientError, TimeoutError):
            async for line in _watch_lines(api, path, rv, max(1, min(left, 300))):
                ev = json.loads(line)
                obj = ev.get("object") or {}
                if ev.get("type") in ("ADDED", "MODIFIED") and (obj.get("spec") or {}).get(
                    "nodeName"
                ):
                    bound.setdefault(obj["metadata"]["name"], time.monotonic())
                    if len(bound) >= expected:
                        return
                if time.monotonic() > deadline:
                    return


def partial_windows(sizes: list[int], bound: dict[str, float]) -> tuple[list[float], int, float]:
    """Per gang whose pods all bound: first bind -> last bind (the time it was partially
    bound, as a watcher sees it); the most gangs partial at one moment, and the mean number
    partial over the binding phase (time-weighted)."""
    windows: list[float] = []
    edges: list[tuple[float, int]] = []
    for i, size in enumerate(sizes):
        names = [f"g{i:05d}-{j:02d}" for j in range(size)]
        ts = [bound[n] for n in names if n in bound]
        if not ts:
            continue
        first = min(ts)
        last = max(ts) if len(ts) == size else float("inf")
        if len(ts) == size:
            windows.append(last - first)
        if last > first:
            edges.append((first, 1))
            edges.append((last, -1))
    edges.sort()  # at equal times an end (-1) sorts before a start (+1)
    current = peak = 0
    area = 0.0
    last_t = edges[0][0] if edges else 0.0
    for t, d in edges:
        area += current * (t - last_t)
        last_t = t
        current += d
        peak = max(peak, current)
    span = (edges[-1][0] - edges[0][0]) if edges else 0.0
    return windows, peak, (area / span if span > 0 else 0.0)


async def count_events(api: Api, ns: str, own: dict[str, int] | None = None) -> int:
    """Events in the namespace (a one-item page and its remaining count); ``own`` counts
    the request (``"LIST events"``)."""
    if own is not None:
        own["LIST events"] = own.get("LIST events", 0) + 1
    page = await api.call("GET", f"/api/v1/namespaces/{ns}/events?limit=1")
    items = len(page.get("items") or ())
    return items + int((page.get("metadata") or {}).get("remainingItemCount") or 0)


async def wait_events(
    api: Api, ns: str, expected: int, deadline: float, own: dict[str, int] | None = None
) -> float:
    """Wait (bounded) until the namespace holds ``expected`` events; when that was seen."""
    while time.monotonic() < deadline:
        if await count_events(api, ns, own) >= expected:
            break
        await asyncio.sleep(0.25)
    return time.monotonic()


async def scheduled_events(api: Api, ns: str, own: dict[str, int]) -> int:
    """Pods of ``ns`` with a ``Scheduled`` event (one list of the namespace's events)."""
    own["LIST events"] = own.get("LIST events", 0) + 1
    listed = await api.call(
        "GET", f"/api/v1/namespaces/{ns}/events?fieldSelector=reason%3DScheduled"
    )
    return len({(e.get("involvedObject") or {}).get("name") for e in listed.get("items") or ()})


#: ours' own counters read at the end of its run (``--metrics-port``)
SCHEDULER_COUNTERS = (
    "scheduler_events_dropped_total",
    "scheduler_event_writes_total",
    "scheduler_watch_stalls_total",
)


async def scrape_scheduler(api: Api, port: int) -> dict[str, float]:
    """Ours' :data:`SCHEDULER_COUNTERS` from its metrics endpoint (label sets summed)."""
    out: dict[str, float] = {}
    with contextlib.suppress(aiohttp.ClientError, TimeoutError):
        async with (
            aiohttp.ClientSession(trust_env=False) as session,
            session.get(
                f"http://127.0.0.1:{port}/metrics", timeout=aiohttp.ClientTimeout(total=10)
            ) as resp,
        ):
            text = await resp.text()
        for fam in text_string_to_metric_families(text):
            for smp in fam.samples:
                if smp.name in SCHEDULER_COUNTERS:
                    out[smp.name] = out.get(smp.name, 0.0) + smp.value
    return out


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * len(s)) - 1))]


# ---------------------------------------------------------------------- request accounting

#: families of kube-apiserver's /metrics the benchmark diffs around each contender
_FAMILIES = ("apiserver_request_total", "apiserver_watch_events_total", "etcd_requests_total")


async def scrape_apiserver(api: Api) -> dict[str, float]:
    """kube-apiserver's request, watch-event and etcd counters, flattened to
    ``"REQ VERB resource[/subresource] CODE"``, ``"WATCH resource"`` and ``"ETCD op type"``.
    Non-resource requests (``/metrics``, ``/healthz``) are left out."""
    async with api.session.get(
        f"{api.server}/metrics", timeout=aiohttp.ClientTimeout(total=60)
    ) as resp:
        if resp.status != 200:
            raise RuntimeError(f"GET /metrics: {resp.status}")
        text = await resp.text()
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        if fam.name + "_total" not in _FAMILIES and fam.name not in _FAMILIES:
            continue
        for s in fam.samples:
            if not s.name.endswith("_total"):
                continue
            lb = s.labels
            if s.name == "apiserver_request_total":
                if not lb.get("resource"):
                    continue
                res = lb["resource"] + (f"/{lb['subresource']}" if lb.get("subresource") else "")
                key = f"REQ {lb.get('verb', '')} {res} {lb.get('code', '')}"
            elif s.name == "apiserver_watch_events_total":
                key = f"WATCH {lb.get('resource') or lb.get('kind', '')}"
            else:
                key = f"ETCD {lb.get('operation', '')} {lb.get('type', '')}"
            out[key] = out.get(key, 0.0) + s.value
    return out


def request_account(
    before: dict[str, float], after: dict[str, float], own: dict[str, int], pods: int
) -> dict[str, float]:
    """Per pod: what the API server counted between ``before`` and ``after``, less the
    benchmark's own requests (``own``: ``"VERB resource"`` -> count, code 200). Keys as
    :func:`scrape_apiserver`'s, zero rows left out; ``REQ total`` sums the requests."""
    diff: dict[str, float] = {}
    for key, value in after.items():
        d = value - before.get(key, 0.0)
        if key.startswith("REQ ") and key.endswith(" 200"):
            d -= own.get(key[4:-4], 0)
        if d > 0:
            diff[key] = d
    diff["REQ total"] = sum(v for k, v in diff.items() if k.startswith("REQ "))
    return {k: round(v / pods, 3) for k, v in sorted(diff.items())}


# ---------------------------------------------------------------------- contenders


#: the project's packages, compiled to bytecode before a contender starts
PACKAGES = ("workloadbuilder", "scheduler", "integrations", "simulator", "benchmarks")


def contender_env(tree: Path | None = None) -> dict[str, str]:
    """A contender's environment: this one, but with bytecode written and read (an installed
    copy has it; ``PYTHONDONTWRITEBYTECODE`` would compile every project module from source
    at each start, ~0.3 s of CPU), and ``tree`` first on ``PYTHONPATH`` when given."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    return env


def precompile(tree: Path) -> None:
    """Write the bytecode of ``tree``'s packages (``__pycache__``, ignored by git), so that a
    contender's start-up does not include compiling them."""
    dirs = [d for d in PACKAGES if (tree / d).is_dir()]
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "-j", "0", *dirs],
        cwd=tree,
        env=contender_env(),
        stdout=subprocess.DEVNULL,
        check=True,
    )


def free_port() -> int:
    """A free loopback TCP port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spawn(
    name: str, plane: ControlPlane, ns: str, args: argparse.Namespace, metrics_port: int = 0
) -> subprocess.Popen[bytes]:
    """Start one contender as a subprocess, its output in the plane's log directory
    (``metrics_port``: ours serves its metrics there on loopback; 0: off)."""
    log = (plane.log_dir / f"bench-{name}.log").open("ab")
    kubeconfig = str(plane.kubeconfig)
    if name == "upstream":
        config = plane.run_dir / "bench-kube-scheduler.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "kubescheduler.config.k8s.io/v1",
                    "kind": "KubeSchedulerConfiguration",
                    "clientConnection": {"kubeconfig": kubeconfig, "qps": 5000, "burst": 5000},
                    "leaderElection": {"leaderElect": False},
                    "profiles": [{"schedulerName": SCHEDULER_NAMES["upstream"]}],
                },
                sort_keys=False,
            )
        )
        gates = ",".join(f"{k}={'true' if v else 'false'}" for k, v in plane.feature_gates.items())
        argv = [
            str(plane.bin_dir / "kube-scheduler"),
            f"--config={config}",
            f"--feature-gates={gates}",
            "--bind-address=127.0.0.1",
            "--secure-port=0",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--v=1",
        ]
    elif name == "ours":
        profile = ["-m", "cProfile", "-o", args.ours_profile] if args.ours_profile else []
        spy = []
        if args.ours_py_spy:  # py-spy (pip install py-spy) samples ours; collapsed stacks
            spy = [str(Path(sys.executable).parent / "py-spy"), "record", "--format=raw"]
            spy += ["--rate=200", f"--output={args.ours_py_spy}", "--"]
        argv = [
            *spy,
            *([sys.executable, *profile] if profile else []),
            str(Path(sys.executable).parent / "workloadbuilder"),
            "scheduler",
            f"--kubeconfig={kubeconfig}",
            "--no-leader-elect",
            f"--metrics-port={metrics_port}",
            "--bind-address=127.0.0.1",
            *args.ours_arg,
        ]
    else:
        argv = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--ceiling-worker",
            f"--kubeconfig={kubeconfig}",
            f"--namespace={ns}",
            f"--nodes={args.nodes}",
            f"--ceiling-concurrency={args.ceiling_concurrency}",
            f"--ceiling-transport={args.ceiling_transport}",
            f"--ceiling-event-loop={args.ceiling_event_loop}",
        ]
    return subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env=contender_env(),
    )


def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    """SIGTERM (or ``sig``), then SIGKILL of the process group after 15 s."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(15)


async def run_one(
    name: str, plane: ControlPlane, api: Api, args: argparse.Namespace, run: int
) -> dict[str, Any]:
    """Create the workload, run one contender until all pods are bound, clean up."""
    ns = f"bench-{name}-{run}"
    sizes = group_sizes(args.pods, args.seed)
    t = time.monotonic()
    await create_workload(api, ns, SCHEDULER_NAMES[name], sizes, constrained=args.pod_constraints)
    created_s = time.monotonic() - t
    server = children_named(("kube-apiserver", "etcd"))
    before = {k: proc_cpu(pid) for k, pid in server.items()}
    load = os.getloadavg()[0]
    bound: dict[str, float] = {}
    own: dict[str, int] = {}  # the benchmark's own requests, left out of the account
    requests_before = await scrape_apiserver(api)
    port = free_port() if name == "ours" else 0
    sched_metrics: dict[str, float] = {}
    t0 = time.monotonic()
    proc = spawn(name, plane, ns, args, metrics_port=port)
    watcher = asyncio.create_task(watch_binds(api, ns, args.pods, bound, t0 + args.timeout, own))
    try:
        while not watcher.done():
            if proc.poll() is not None and name != "ceiling":
                raise RuntimeError(f"{name} exited with {proc.returncode}; see {plane.log_dir}")
            await asyncio.wait({watcher}, timeout=0.5)
        watcher.result()
        t_end = time.monotonic()
        if name == "ceiling":  # it ends by itself once the events and statuses are written
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(60)
        # CPU is read once the contender's events are written too (they may trail the binds)
        events_s = await wait_events(api, ns, args.pods, time.monotonic() + 60, own) - t0
        alive = proc.poll() is None
        sched_cpu = proc_cpu(proc.pid) if alive else float("nan")
        rss = proc_hwm_mib(proc.pid) if alive else float("nan")
        after = {k: proc_cpu(pid) for k, pid in server.items()}
        requests_after = await scrape_apiserver(api)
        events_written = await scheduled_events(api, ns, own)
        if port and alive:
            sched_metrics = await scrape_scheduler(api, port)
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await watcher
        # py-spy writes its profile on SIGINT (and stops its child)
        stop(proc, signal.SIGINT if name == "ours" and args.ours_py_spy else signal.SIGTERM)
    held: bool | None = None
    if args.pod_constraints and name != "ceiling":  # the ceiling binds anywhere
        held = await constraints_held(api, ns, ZONES)
    if name == "ceiling" and not alive:
        usage = _ceiling_usage(plane, ns)
        sched_cpu, rss = usage.get("cpu_s", float("nan")), usage.get("rss_mib", float("nan"))
    await cleanup(api, ns, time.monotonic() + 120)
    times = sorted(bound.values())
    group_done: list[float] = []
    for i, size in enumerate(sizes):
        names = [f"g{i:05d}-{j:02d}" for j in range(size)]
        if all(n in bound for n in names):
            group_done.append(max(bound[n] for n in names) - t0)
    windows, max_partial, mean_partial = partial_windows(sizes, bound)
    complete = len(bound) >= args.pods
    seconds = (times[-1] - t0) if complete else float("nan")
    return {
        "contender": name,
        "run": run,
        "nodes": args.nodes,
        "pods": args.pods,
        "groups": len(sizes),
        "bound": len(bound),
        "complete": complete,
        **({"constraints_held": held} if held is not None else {}),
        "create_s": round(created_s, 2),
        "load_avg_1m": round(load, 2),
        "seconds_to_all_bound": round(seconds, 2),
        "pods_per_s": round(args.pods / seconds, 1) if complete else 0.0,
        "bind_phase_pods_per_s": (
            round(args.pods / max(times[-1] - times[0], 1e-6), 1) if complete else 0.0
        ),
        "first_bind_s": round(times[0] - t0, 2) if times else float("nan"),
        "events_done_s": round(events_s, 2),
        "group_p50_s": round(percentile(group_done, 0.5), 2),
        "group_p99_s": round(percentile(group_done, 0.99), 2),
        "partial_p50_s": round(percentile(windows, 0.5), 3),
        "partial_p99_s": round(percentile(windows, 0.99), 3),
        "partial_max_s": round(max(windows, default=0.0), 3),
        "max_gangs_partial": max_partial,
        "mean_gangs_partial": round(mean_partial, 2),
        "events_expected": args.pods,
        "events_written": events_written,
        "events_complete": events_written >= args.pods,
        "scheduler_metrics": sched_metrics,
        "requests_per_pod": request_account(requests_before, requests_after, own, args.pods),
        "cpu_s": {
            "scheduler": round(sched_cpu, 2),
            "apiserver": round(after.get("kube-apiserver", 0) - before.get("kube-apiserver", 0), 2),
            "etcd": round(after.get("etcd", 0) - before.get("etcd", 0), 2),
        },
        "scheduler_cpu_ms_per_pod": round(1000 * sched_cpu / args.pods, 3),
        "peak_rss_mib": round(rss, 1),
        "window_s": round(t_end - t0, 2),
        "event_loop": contender_loop(name, args),
    }


def contender_loop(name: str, args: argparse.Namespace) -> str:
    """The event loop a contender runs on (``go`` for upstream)."""
    if name == "upstream":
        return "go"
    if name == "ceiling":
        return resolve_event_loop(args.ceiling_event_loop)
    choice = None
    for flag in args.ours_arg:
        if flag.startswith("--event-loop="):
            choice = flag.split("=", 1)[1]
    return resolve_event_loop(choice)  # type: ignore[arg-type]


def _ceiling_usage(plane: ControlPlane, ns: str) -> dict[str, float]:
    path = plane.run_dir / f"ceiling-{ns}.json"
    with contextlib.suppress(OSError, ValueError):
        return dict(json.loads(path.read_text()))
    return {}


# ---------------------------------------------------------------------- ceiling worker


async def ceiling_worker(args: argparse.Namespace) -> int:
    """List the pending pods and groups once, then bind every pod, record its ``Scheduled``
    event and write each group's status once: the writes upstream parity needs, nothing else.
    Then wait (bounded) to be stopped, reporting its CPU and peak RSS when it is."""
    limit, transport = args.ceiling_concurrency, args.ceiling_transport
    async with Api(Path(args.kubeconfig), limit=limit, transport=transport) as api:
        ns = args.namespace
        pods = (await api.call("GET", PODS_PATH.format(ns=ns)))["items"]
        groups: dict[str, list[dict[str, Any]]] = {}
        for p in pods:
            groups.setdefault(p["spec"]["schedulingGroup"]["podGroupName"], []).append(p)
        per_node = min(NODE_PODS, NODE_CPU)
        slots = [f"node-{i // per_node:05d}" for i in range(args.nodes * per_node)]
        sem = asyncio.Semaphore(args.ceiling_concurrency)
        host = platform.node()

        def now() -> str:
            return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

        async def place(p: dict[str, Any], node: str) -> None:
            meta = p["metadata"]
            async with sem:
                await api.call(
                    "POST",
                    PODS_PATH.format(ns=ns) + f"/{meta['name']}/binding",
                    {
                        "apiVersion": "v1",
                        "kind": "Binding",
                        "metadata": {"name": meta["name"], "namespace": ns, "uid": meta["uid"]},
                        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
                    },
                )
            async with sem:
                ts = now()
                await api.call(
                    "POST",
                    f"/api/v1/namespaces/{ns}/events",
                    {
                        "apiVersion": "v1",
                        "kind": "Event",
                        "metadata": {"generateName": f"{meta['name']}.", "namespace": ns},
                        "involvedObject": {
                            "apiVersion": "v1",
                            "kind": "Pod",
                            "name": meta["name"],
                            "namespace": ns,
                            "uid": meta["uid"],
                        },
                        "reason": "Scheduled",
                        "message": f"Successfully assigned {ns}/{meta['name']} to {node}",
                        "type": "Normal",
                        "source": {"component": "bench-ceiling"},
                        "reportingComponent": "bench-ceiling",
                        "reportingInstance": host,
                        "firstTimestamp": ts,
                        "lastTimestamp": ts,
                        "count": 1,
                    },
                )

        async def group(name: str, members: list[dict[str, Any]], nodes: list[str]) -> None:
            await asyncio.gather(*(place(p, n) for p, n in zip(members, nodes, strict=True)))
            cond = {
                "type": "PodGroupInitiallyScheduled",
                "status": "True",
                "reason": "Scheduled",
                "message": "",
                "lastTransitionTime": now(),
            }
            async with sem:
                await api.call(
                    "PATCH",
                    PG_PATH.format(ns=ns) + f"/{name}/status",
                    {"status": {"conditions": [cond]}},
                    content_type="application/merge-patch+json",
                )

        jobs = []
        used = 0
        for name in sorted(groups):
            members = groups[name]
            jobs.append(group(name, members, slots[used : used + len(members)]))
            used += len(members)
        await asyncio.gather(*jobs)
    usage = {
        "cpu_s": proc_cpu(os.getpid()),
        "rss_mib": proc_hwm_mib(os.getpid()),
    }
    out = Path(args.kubeconfig).parent / f"ceiling-{args.namespace}.json"
    out.write_text(json.dumps(usage))
    return 0


# ---------------------------------------------------------------------- other arrival modes

EXTRA_POOL = "bench.workloadbuilder.io/pool"


async def ensure_namespace(api: Api, ns: str) -> None:
    """Create the namespace (fine if it exists)."""
    await api.call(
        "POST",
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        ok=(201, 409),
    )


async def create_gang(
    api: Api,
    ns: str,
    scheduler: str,
    name: str,
    size: int,
    *,
    selector: dict[str, str] | None = None,
) -> float:
    """One PodGroup (minCount = size) and its pods (sent concurrently); returns when the last
    pod was created (monotonic)."""
    await api.call("POST", PG_PATH.format(ns=ns), make_pod_group(name).gang(size).obj())

    def pod(j: int) -> dict[str, Any]:
        b = make_pod(f"{name}-{j:02d}").pod_group(name).scheduler_name(scheduler)
        b.container_name("c").request("cpu", "1").request("memory", "1Gi")
        if selector:
            b.node_selectors(selector)
        return b.obj()

    await asyncio.gather(*(api.call("POST", PODS_PATH.format(ns=ns), pod(j)) for j in range(size)))
    return time.monotonic()


async def until_bound(
    bound: dict[str, float], names: list[str], deadline: float, watcher: asyncio.Task[None]
) -> bool:
    """Poll (20 ms) the watch's record until every pod in ``names`` is bound."""
    while time.monotonic() < deadline:
        if all(n in bound for n in names):
            return True
        if watcher.done():
            return all(n in bound for n in names)
        await asyncio.sleep(0.02)
    return False


async def warm_up(
    api: Api, ns: str, name: str, bound: dict[str, float], watcher: asyncio.Task[None], t: float
) -> float:
    """A first gang of 4, bound by the freshly started contender: it is running. Returns
    the seconds that took."""
    t0 = time.monotonic()
    await create_gang(api, ns, SCHEDULER_NAMES[name], "warm", 4)
    if not await until_bound(bound, [f"warm-{j:02d}" for j in range(4)], t, watcher):
        raise RuntimeError(f"{name} did not bind the warm-up gang")
    return time.monotonic() - t0


async def run_stream(
    name: str, plane: ControlPlane, api: Api, args: argparse.Namespace, rate: float, run: int
) -> dict[str, Any]:
    """Steady stream: the contender runs; gangs (8-32 pods) are created at ``rate`` pods/s
    for ``--stream-seconds``. Per gang: its last pod created -> all its pods bound. It keeps
    up when every pod is bound, the p99 of that latency is at most ``--stream-p99`` and the
    creator reached 90 % of the rate."""
    ns = f"bench-{name}-stream{int(rate)}-{run}"
    sizes = group_sizes(max(8, int(rate * args.stream_seconds)), args.seed)
    total = sum(sizes)
    await ensure_namespace(api, ns)
    bound: dict[str, float] = {}
    deadline = time.monotonic() + args.timeout
    proc = spawn(name, plane, ns, args)
    cpu0 = 0.0
    watcher = asyncio.create_task(watch_binds(api, ns, total + 4, bound, deadline))
    created: dict[int, float] = {}
    try:
        warm_s = await warm_up(api, ns, name, bound, watcher, deadline)
        cpu0 = proc_cpu(proc.pid)
        sem = asyncio.Semaphore(max(4, args.ceiling_concurrency // 8))  # gangs being created

        async def one(i: int, size: int) -> None:
            async with sem:
                created[i] = await create_gang(api, ns, SCHEDULER_NAMES[name], f"g{i:05d}", size)

        start = time.monotonic()
        jobs: list[asyncio.Task[None]] = []
        sent = 0
        lag = 0.0
        for i, size in enumerate(sizes):
            due = start + sent / rate
            lag = max(lag, time.monotonic() - due)
            if (wait := due - time.monotonic()) > 0:
                await asyncio.sleep(wait)
            jobs.append(asyncio.create_task(one(i, size)))
            sent += size
        await asyncio.gather(*jobs)
        created_span = max(created.values()) - start
        names = [f"g{i:05d}-{j:02d}" for i, size in enumerate(sizes) for j in range(size)]
        done = await until_bound(bound, names, max(created.values()) + args.stream_grace, watcher)
        cpu = proc_cpu(proc.pid) - cpu0 if proc.poll() is None else float("nan")
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await watcher
        stop(proc)
    await cleanup(api, ns, time.monotonic() + 120)
    lat = [
        max(bound[f"g{i:05d}-{j:02d}"] for j in range(size)) - created[i]
        for i, size in enumerate(sizes)
        if all(f"g{i:05d}-{j:02d}" in bound for j in range(size))
    ]
    # the last gang is due at (total - its size) / rate: the stream lasts total / rate
    achieved = total / max(created_span + sizes[-1] / rate, 1e-6)
    p99 = percentile(lat, 0.99)
    return {
        "mode": "stream",
        "contender": name,
        "run": run,
        "rate_pods_per_s": rate,
        "achieved_pods_per_s": round(achieved, 1),
        "pods": total,
        "groups": len(sizes),
        "bound": sum(1 for n in bound if not n.startswith("warm-")),
        "warm_up_s": round(warm_s, 2),
        "latency_p50_s": round(percentile(lat, 0.5), 3),
        "latency_p99_s": round(p99, 3),
        "latency_max_s": round(max(lat, default=float("nan")), 3),
        "creator_lag_max_s": round(lag, 3),
        "keeps_up": bool(done and p99 <= args.stream_p99 and achieved >= 0.9 * rate),
        "scheduler_cpu_ms_per_pod": round(1000 * cpu / total, 3),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }


async def run_queueing(
    name: str, plane: ControlPlane, api: Api, args: argparse.Namespace, run: int
) -> dict[str, Any]:
    """Heavy queueing: gangs that cannot fit (``--backlog-gangs`` of ``--backlog-gang-size``,
    a node selector no node has yet) are added in ``--backlog-steps`` while the contender
    runs; after each step ``--probes`` fitting gangs of 8 arrive one by one (time from the
    last pod created to all bound: must stay flat as the backlog grows). Then nodes that fit
    the backlog are added in ``--drain-steps``; per step: seconds until the pods that now
    fit are bound, and pods/s."""
    ns = f"bench-{name}-queueing-{run}"
    sched = SCHEDULER_NAMES[name]
    per_node = min(NODE_PODS, NODE_CPU)
    gsize = args.backlog_gang_size
    backlog_pods = args.backlog_gangs * gsize
    await ensure_namespace(api, ns)
    bound: dict[str, float] = {}
    deadline = time.monotonic() + args.timeout
    proc = spawn(name, plane, ns, args)
    total = 4 + backlog_pods + 8 * args.probes * (args.backlog_steps + 1)
    watcher = asyncio.create_task(watch_binds(api, ns, total, bound, deadline))
    steps: list[dict[str, Any]] = []
    drains: list[dict[str, Any]] = []
    extra_nodes: list[str] = []
    probe_no = 0
    try:
        await warm_up(api, ns, name, bound, watcher, deadline)
        cpu0 = proc_cpu(proc.pid)
        made = 0
        sem = asyncio.Semaphore(max(4, args.ceiling_concurrency // max(gsize, 1)))

        async def unfit(i: int) -> None:
            async with sem:
                await create_gang(api, ns, sched, f"b{i:05d}", gsize, selector={EXTRA_POOL: "x"})

        for step in range(args.backlog_steps + 1):
            want = args.backlog_gangs * step // args.backlog_steps
            t = time.monotonic()
            await asyncio.gather(*(unfit(i) for i in range(made, want)))
            made_s = time.monotonic() - t
            made = want
            lats = []
            for _ in range(args.probes):
                pname = f"p{probe_no:04d}"
                probe_no += 1
                t_created = await create_gang(api, ns, sched, pname, 8)
                names = [f"{pname}-{j:02d}" for j in range(8)]
                if not await until_bound(bound, names, t_created + args.probe_timeout, watcher):
                    lats.append(float("inf"))
                    continue
                lats.append(max(bound[n] for n in names) - t_created)
            steps.append(
                {
                    "backlog_gangs": made,
                    "backlog_created_s": round(made_s, 2),
                    "probe_p50_s": round(percentile(lats, 0.5), 3),
                    "probe_max_s": round(max(lats), 3),
                }
            )
            print(f"# {name} queueing: backlog {made}: probes {lats}", file=sys.stderr)
        backlog_names = [f"b{i:05d}-{j:02d}" for i in range(made) for j in range(gsize)]
        need_nodes = -(-backlog_pods // per_node)
        added = 0
        for step in range(1, args.drain_steps + 1):
            upto = need_nodes * step // args.drain_steps
            t = time.monotonic()
            before = sum(1 for n in backlog_names if n in bound)
            new = [f"extra-{i:05d}" for i in range(added, upto)]
            await create_nodes(api, 0, names=new, labels={EXTRA_POOL: "x"})
            extra_nodes += new
            added = upto
            expect = min(backlog_pods, (upto * per_node) // gsize * gsize)
            while time.monotonic() < deadline and not watcher.done():
                if sum(1 for n in backlog_names if n in bound) >= expect:
                    break
                await asyncio.sleep(0.05)
            secs = time.monotonic() - t
            got = sum(1 for n in backlog_names if n in bound) - before
            times = sorted(bound[n] - t for n in backlog_names if n in bound and bound[n] >= t)
            drains.append(
                {
                    "nodes_added": len(new),
                    "pods_bound": got,
                    "seconds": round(secs, 2),
                    "pods_per_s": round(got / max(secs, 1e-6), 1),
                    # when the step's pods were bound (first, median, last; s after the step)
                    "bound_at_s": [round(percentile(times, q), 2) for q in (0.0, 0.5, 1.0)]
                    if times
                    else [],
                }
            )
            print(f"# {name} queueing: drain step {step}: {drains[-1]}", file=sys.stderr)
        cpu = proc_cpu(proc.pid) - cpu0 if proc.poll() is None else float("nan")
        rss = proc_hwm_mib(proc.pid) if proc.poll() is None else float("nan")
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await watcher
        stop(proc, signal.SIGINT if name == "ours" and args.ours_py_spy else signal.SIGTERM)
    await cleanup(api, ns, time.monotonic() + 300)
    for n in extra_nodes:
        await api.call("DELETE", f"/api/v1/nodes/{n}", ok=(200, 202, 404))
    flat = [st["probe_p50_s"] for st in steps]
    return {
        "mode": "queueing",
        "contender": name,
        "run": run,
        "backlog_gangs": args.backlog_gangs,
        "backlog_pods": backlog_pods,
        "steps": steps,
        "drain": drains,
        "probe_growth": round(flat[-1] / flat[0], 2) if flat and flat[0] > 0 else float("nan"),
        "scheduler_cpu_s": round(cpu, 2),
        "peak_rss_mib": round(rss, 1),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }


# ---------------------------------------------------------------------- report


def ratios(results: list[dict[str, Any]]) -> dict[str, float]:
    """ours/upstream and ours/ceiling of the mean pods/s over complete runs."""

    def mean(name: str) -> float:
        vals = [r["pods_per_s"] for r in results if r["contender"] == name and r["complete"]]
        return sum(vals) / len(vals) if vals else 0.0

    ours, up, ceil = mean("ours"), mean("upstream"), mean("ceiling")
    return {
        "ours_over_upstream": round(ours / up, 2) if up else 0.0,
        "ours_over_ceiling": round(ours / ceil, 2) if ceil else 0.0,
    }


def table(results: list[dict[str, Any]]) -> str:
    """A plain-text table, one row per contender run."""
    head = (
        f"{'contender':<9} {'run':>3} {'all bound s':>11} {'pods/s':>7} {'bind pods/s':>11} "
        f"{'1st bind s':>10} {'events s':>8} {'p50 s':>6} {'p99 s':>6} {'sched cpu':>9} "
        f"{'apisrv cpu':>10} "
        f"{'etcd cpu':>8} {'ms/pod':>6} {'rss MiB':>7} {'part p50':>8} {'part p99':>8} "
        f"{'max part':>8} {'mean part':>9} {'load':>5} {'loop':>7}"
    )
    lines = [head, "-" * len(head)]
    for r in results:
        c = r["cpu_s"]
        lines.append(
            f"{r['contender']:<9} {r['run']:>3} {r['seconds_to_all_bound']:>11} "
            f"{r['pods_per_s']:>7} {r['bind_phase_pods_per_s']:>11} {r['first_bind_s']:>10} "
            f"{r['events_done_s']:>8} "
            f"{r['group_p50_s']:>6} {r['group_p99_s']:>6} {c['scheduler']:>9} "
            f"{c['apiserver']:>10} {c['etcd']:>8} {r['scheduler_cpu_ms_per_pod']:>6} "
            f"{r['peak_rss_mib']:>7} {r['partial_p50_s']:>8} {r['partial_p99_s']:>8} "
            f"{r['max_gangs_partial']:>8} {r['mean_gangs_partial']:>9} {r['load_avg_1m']:>5} "
            f"{r.get('event_loop', ''):>7}"
            + ("" if r["complete"] else f"  INCOMPLETE {r['bound']}/{r['pods']}")
            + (
                ""
                if r["events_complete"]
                else f"  EVENTS MISSING {r['events_written']}/{r['events_expected']}"
            )
            + ("  CONSTRAINTS BROKEN" if r.get("constraints_held") is False else "")
        )
    return "\n".join(lines)


def requests_table(results: list[dict[str, Any]]) -> str:
    """Requests (and watch events, etcd operations) per pod, one column per contender run:
    what kube-apiserver counted during the run, less the benchmark's own requests."""
    cols = [f"{r['contender']}/{r['run']}" for r in results]
    keys = sorted({k for r in results for k in r["requests_per_pod"]})
    order = {"REQ": 0, "WATCH": 1, "ETCD": 2}
    keys.sort(key=lambda k: (order.get(k.split()[0], 3), k == "REQ total", k))
    width = max([len(k) for k in keys] + [10])
    head = f"{'per pod':<{width}} " + " ".join(f"{c:>11}" for c in cols)
    lines = [head, "-" * len(head)]
    for k in keys:
        vals = [r["requests_per_pod"].get(k, 0.0) for r in results]
        if not any(vals):  # below 0.0005 per pod everywhere (start-up lists and watches)
            continue
        lines.append(f"{k:<{width}} " + " ".join(f"{v:>11}" for v in vals))
    lines.append(
        f"{'events written':<{width}} "
        + " ".join(
            f"{str(r['events_written']) + '/' + str(r['events_expected']):>11}" for r in results
        )
    )
    for name in SCHEDULER_COUNTERS:
        if any(name in r["scheduler_metrics"] for r in results):
            vals = [r["scheduler_metrics"].get(name, "") for r in results]
            lines.append(f"{name:<{width}} " + " ".join(f"{v!s:>11}" for v in vals))
    return "\n".join(lines)


def stream_table(results: list[dict[str, Any]]) -> str:
    """One row per contender and rate, then the highest rate each kept up with."""
    head = (
        f"{'contender':<9} {'rate':>6} {'achieved':>8} {'pods':>6} {'p50 s':>7} {'p99 s':>7} "
        f"{'max s':>7} {'keeps up':>8} {'ms/pod':>6} {'load':>5}"
    )
    lines = [head, "-" * len(head)]
    for r in results:
        lines.append(
            f"{r['contender']:<9} {r['rate_pods_per_s']:>6} {r['achieved_pods_per_s']:>8} "
            f"{r['pods']:>6} {r['latency_p50_s']:>7} {r['latency_p99_s']:>7} "
            f"{r['latency_max_s']:>7} {r['keeps_up']!s:>8} {r['scheduler_cpu_ms_per_pod']:>6} "
            f"{r['load_avg_1m']:>5}"
        )
    for name in dict.fromkeys(r["contender"] for r in results):
        kept = [r["rate_pods_per_s"] for r in results if r["contender"] == name and r["keeps_up"]]
        lines.append(f"{name}: highest rate kept up with: {max(kept) if kept else 'none'} pods/s")
    return "\n".join(lines)


def queueing_table(results: list[dict[str, Any]]) -> str:
    """Per contender: the probe latency per backlog size, then the drain steps."""
    lines = []
    for r in results:
        lines.append(
            f"{r['contender']} run {r['run']}: backlog {r['backlog_gangs']} gangs / "
            f"{r['backlog_pods']} pods; cpu {r['scheduler_cpu_s']} s; rss {r['peak_rss_mib']} "
            f"MiB; load {r['load_avg_1m']}"
        )
        lines.append(f"  {'backlog gangs':>13} {'created s':>9} {'probe p50 s':>11} {'max s':>7}")
        for st in r["steps"]:
            lines.append(
                f"  {st['backlog_gangs']:>13} {st['backlog_created_s']:>9} "
                f"{st['probe_p50_s']:>11} {st['probe_max_s']:>7}"
            )
        lines.append(f"  {'nodes added':>13} {'pods bound':>10} {'seconds':>8} {'pods/s':>8}")
        for d in r["drain"]:
            lines.append(
                f"  {d['nodes_added']:>13} {d['pods_bound']:>10} {d['seconds']:>8} "
                f"{d['pods_per_s']:>8}"
            )
    return "\n".join(lines)


async def run_all(plane: ControlPlane, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Nodes once, then every contender (``--repeat`` times) on the same server."""
    async with Api(plane.kubeconfig, limit=64) as api:
        t = time.monotonic()
        await create_nodes(api, args.nodes, zones=ZONES if args.pod_constraints else 0)
        print(f"# {args.nodes} nodes in {time.monotonic() - t:.1f}s", file=sys.stderr)
        results: list[dict[str, Any]] = []
        contenders = args.only or (CONTENDERS if args.mode == "backlog" else CONTENDERS[:2])
        if args.mode != "backlog" and "ceiling" in contenders:
            raise SystemExit("the ceiling client runs in the backlog mode only")
        for run in range(1, args.repeat + 1):
            for name in contenders:
                if args.mode == "stream":
                    for rate in args.stream_rates:
                        r = await run_stream(name, plane, api, args, rate, run)
                        print(
                            f"# {name} stream {rate} pods/s: keeps up {r['keeps_up']} "
                            f"(p99 {r['latency_p99_s']} s)",
                            file=sys.stderr,
                        )
                        results.append(r)
                        if not r["keeps_up"]:
                            break
                    continue
                if args.mode == "queueing":
                    results.append(await run_queueing(name, plane, api, args, run))
                    continue
                r = await run_one(name, plane, api, args, run)
                print(
                    f"# {name} run {run}: {r['pods_per_s']} pods/s "
                    f"({r['bound']}/{r['pods']} bound)",
                    file=sys.stderr,
                )
                results.append(r)
        return results


def main(argv: list[str] | None = None) -> int:
    """Parse the flags, run the benchmark (or the ceiling worker), print the report."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=500)
    p.add_argument(
        "--pod-constraints",
        action="store_true",
        help="each gang one worker per node (pod anti-affinity) and spread over 8 zones",
    )
    p.add_argument("--pods", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=1, help="runs of each contender")
    p.add_argument("--only", action="append", choices=CONTENDERS, help="(repeatable)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per contender")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--ceiling-concurrency", type=int, default=64)
    p.add_argument(
        "--ceiling-transport",
        choices=("lean", "aiohttp"),
        default="lean",
        help="the ceiling client's HTTP client: the lean transport KubeCluster uses for its "
        "unary requests (default), or aiohttp",
    )
    p.add_argument(
        "--ceiling-event-loop",
        choices=("auto", "uvloop", "asyncio"),
        default="auto",
        help="the ceiling client's event loop (default auto: uvloop when installed, as ours; "
        "ours takes --ours-arg=--event-loop=...)",
    )
    p.add_argument(
        "--ours-arg", action="append", default=[], help="extra flag for workloadbuilder scheduler"
    )
    p.add_argument(
        "--ours-profile", metavar="FILE", help="run ours under cProfile, its stats to FILE"
    )
    p.add_argument(
        "--ours-py-spy",
        metavar="FILE",
        help="run ours under py-spy (collapsed stacks to FILE; CPU and RSS are py-spy's then)",
    )
    p.add_argument(
        "--mode",
        choices=("backlog", "stream", "queueing"),
        default="backlog",
        help="backlog: everything created first; stream: gangs at fixed rates while it runs; "
        "queueing: a growing backlog that cannot fit, probes, then capacity in steps",
    )
    p.add_argument(
        "--stream-rates",
        type=lambda v: [float(x) for x in v.split(",")],
        default=[100.0, 200.0, 400.0, 800.0],
        help="pods/s, comma-separated, tried in order until one is not kept up with",
    )
    p.add_argument("--stream-seconds", type=float, default=15.0)
    p.add_argument("--stream-p99", type=float, default=2.0, help="keeps up: p99 latency (s)")
    p.add_argument("--stream-grace", type=float, default=30.0, help="wait after the stream (s)")
    p.add_argument("--backlog-gangs", type=int, default=5000)
    p.add_argument("--backlog-gang-size", type=int, default=2)
    p.add_argument("--backlog-steps", type=int, default=5)
    p.add_argument("--probes", type=int, default=5, help="fitting gangs per backlog step")
    p.add_argument("--probe-timeout", type=float, default=60.0)
    p.add_argument("--drain-steps", type=int, default=4)
    p.add_argument("--bin-dir", default=None)
    p.add_argument("--json", action="store_true")
    p.add_argument("--ceiling-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    p.add_argument("--namespace", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.ceiling_worker:
        return run_on_loop(ceiling_worker(args), event_loop=args.ceiling_event_loop)
    if args.mode == "backlog" and args.pods > args.nodes * min(NODE_PODS, NODE_CPU):
        p.error("more pods than the nodes hold")
    precompile(Path(__file__).resolve().parents[1])
    with ControlPlane(bin_dir=args.bin_dir) as plane:
        results = asyncio.run(run_all(plane, args))
    report = {
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "command": " ".join(["benchmarks/bench_real.py", *(argv or sys.argv[1:])]),
        "results": results,
    }
    if args.mode == "backlog":
        report["ratios"] = ratios(results)
    if args.json:
        print(json.dumps(report, indent=2))
    elif args.mode == "stream":
        print(f"# {report['command']} ({os.cpu_count()} cpus, {platform.platform()})")
        print(stream_table(results))
    elif args.mode == "queueing":
        print(f"# {report['command']} ({os.cpu_count()} cpus, {platform.platform()})")
        print(queueing_table(results))
    else:
        print(f"# {report['command']} ({os.cpu_count()} cpus, {platform.platform()})")
        print(table(results))
        print()
        print(requests_table(results))
        rt = ratios(results)
        print(
            f"ours/upstream {rt['ours_over_upstream']}x   ours/ceiling {rt['ours_over_ceiling']}x "
            "(mean pods/s to all bound)"
        )
    if args.mode == "stream":
        return 0
    if args.mode == "queueing":
        ok = all(
            all(st["probe_max_s"] != float("inf") for st in r["steps"])
            and sum(d["pods_bound"] for d in r["drain"]) == r["backlog_pods"]
            for r in results
        )
        return 0 if ok else 1
    missing = [r for r in results if not r["events_complete"]]
    for r in missing:
        print(
            f"# {r['contender']} run {r['run']}: only {r['events_written']} of "
            f"{r['events_expected']} Scheduled events written",
            file=sys.stderr,
        )
    broken = [r for r in results if r.get("constraints_held") is False]
    for r in broken:
        print(f"# {r['contender']} run {r['run']}: pod constraints broken", file=sys.stderr)
    return 0 if all(r["complete"] for r in results) and not missing and not broken else 1


if __name__ == "__main__":
    sys.exit(main())
