"""``workloadbuilder scheduler`` and ``workloadbuilder explain podgroup`` (and, when the
simulator is installed, ``workloadbuilder simulate``)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import json
import logging
import os
import signal
import socket
from typing import Any

import yaml

from scheduler._config import DEFAULT_SCHEDULER_NAME, SchedulerConfig
from scheduler._leader import LeaderElector
from scheduler._metrics import REGISTRY
from scheduler._scheduler import CONDITION_INITIALLY_SCHEDULED, Scheduler
from workloadbuilder.api import PodGroup, to_dict
from workloadbuilder.cluster import Cluster
from workloadbuilder.errors import NotFound, WorkloadBuilderError

__all__ = ["explain_report", "explain_text", "register", "render_explain"]

_log = logging.getLogger(__name__)
SubParsers = argparse._SubParsersAction


def register(subparsers: SubParsers[argparse.ArgumentParser]) -> None:
    """Add ``scheduler``, ``explain`` (and ``simulate`` when available)."""
    p = subparsers.add_parser(
        "scheduler",
        help="run the workload-aware gang scheduler against a cluster",
        description=(
            "Schedule pods whose spec.schedulerName is ours: PodGroups all-or-nothing, other "
            "pods one by one. Serves /metrics, /healthz and /readyz; stops gracefully on "
            "SIGTERM."
        ),
    )
    _kube_flags(p)
    p.add_argument("--scheduler-name", default=DEFAULT_SCHEDULER_NAME, help="pods to schedule")
    p.add_argument("--leader-elect", action="store_true", help="run only while holding the Lease")
    p.add_argument(
        "--leader-elect-lease-namespace", default="kube-system", help="namespace of the Lease"
    )
    p.add_argument(
        "--leader-elect-lease-name", default=None, help="Lease name (default: scheduler name)"
    )
    p.add_argument("--metrics-port", type=int, default=10269, help="0 disables the endpoint")
    p.add_argument("--bind-address", default="0.0.0.0", help="address for metrics and health")
    p.add_argument("--bind-concurrency", type=int, default=16, help="parallel pods/binding")
    p.set_defaults(func=_scheduler_command)

    e = subparsers.add_parser(
        "explain", help="explain why a pod group is (not) scheduled", description="explain"
    )
    esub = e.add_subparsers(dest="what", metavar="KIND")
    pg = esub.add_parser("podgroup", help="a PodGroup's state and latest explanation")
    pg.add_argument("name")
    pg.add_argument("-n", "--namespace", default="default")
    pg.add_argument(
        "-o", "--output", choices=["text", "json", "yaml"], default="text", help="output format"
    )
    _kube_flags(pg)
    pg.set_defaults(func=_explain_command)
    e.set_defaults(func=lambda args: _usage(e))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_usage()
    return 2


def _kube_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kubeconfig", help="path to the kubeconfig file (default: $KUBECONFIG)")
    p.add_argument("--context", help="the kubeconfig context to use")


async def _connect(args: argparse.Namespace) -> Cluster:
    from workloadbuilder.cluster._kube import KubeCluster

    cluster: Any = KubeCluster.from_kubeconfig(args.kubeconfig, args.context)
    if inspect.isawaitable(cluster):
        cluster = await cluster
    return cluster  # type: ignore[no-any-return]


# ---- explain ----------------------------------------------------------------------------


async def explain_report(cluster: Cluster, name: str, namespace: str) -> dict[str, Any]:
    """A PodGroup's state as data: policy, pods, nodes, condition and explanation (what
    ``explain podgroup -o json|yaml`` prints)."""
    try:
        pg = await cluster.get("PodGroup", name, namespace)
    except NotFound:
        raise WorkloadBuilderError(
            f'podgroup "{name}" not found in namespace "{namespace}"'
        ) from None
    assert isinstance(pg, PodGroup)
    pods = [
        p
        for p in (await cluster.list("Pod", namespace)).items
        if isinstance(p, dict)
        and ((p.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName") == name
    ]
    live = [p for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
    bound = [p for p in live if (p.get("spec") or {}).get("nodeName")]
    gang = pg.spec.scheduling_policy.gang
    conds = pg.status.conditions if pg.status is not None else ()
    cond = next((c for c in conds if c.type == CONDITION_INITIALLY_SCHEDULED), None)
    if cond is not None:
        state = f"{cond.type}={cond.status} ({cond.reason})"
    elif gang is not None and len(live) < gang.min_count:
        state = f"waiting for pods ({len(live)} of minCount {gang.min_count} exist)"
    else:
        state = "not attempted yet"
    return {
        "namespace": namespace,
        "name": name,
        "policy": "gang" if gang is not None else "basic",
        "minCount": gang.min_count if gang is not None else None,
        "priorityClassName": pg.spec.priority_class_name,
        "priority": pg.spec.priority,
        "pods": {"live": len(live), "bound": len(bound)},
        "nodes": sorted({str(p["spec"]["nodeName"]) for p in bound}),
        "state": state,
        "condition": to_dict(cond) if cond is not None else None,
        "explanation": (cond.message or None) if cond is not None else None,
    }


def render_explain(report: dict[str, Any]) -> str:
    """The human-readable form of :func:`explain_report`."""
    lines = [f"PodGroup:  {report['namespace']}/{report['name']}"]
    if report["policy"] == "gang":
        lines.append(f"Policy:    gang (minCount {report['minCount']})")
    else:
        lines.append("Policy:    basic")
    if report["priorityClassName"] or report["priority"] is not None:
        prio = f"{report['priorityClassName'] or ''} {report['priority'] or ''}".rstrip()
        lines.append(f"Priority:  {prio}")
    lines.append(f"Pods:      {report['pods']['bound']}/{report['pods']['live']} pods bound")
    nodes = report["nodes"]
    if nodes:
        shown = ", ".join(nodes[:8]) + (f", ... ({len(nodes)} nodes)" if len(nodes) > 8 else "")
        lines.append(f"Nodes:     {shown}")
    cond = report["condition"]
    since = (
        f" since {cond['lastTransitionTime']}" if cond and cond.get("lastTransitionTime") else ""
    )
    lines.append(f"State:     {report['state']}{since}")
    if report["explanation"]:
        lines.append(f"Why:       {report['explanation']}")
    return "\n".join(lines) + "\n"


async def explain_text(cluster: Cluster, name: str, namespace: str) -> str:
    """A human-readable account of a PodGroup: policy, pods, condition and explanation."""
    return render_explain(await explain_report(cluster, name, namespace))


async def _explain_command(args: argparse.Namespace) -> int:
    cluster = await _connect(args)
    try:
        report = await explain_report(cluster, args.name, args.namespace)
    finally:
        await cluster.close()
    if args.output == "json":
        print(json.dumps(report, indent=2))
    elif args.output == "yaml":
        print(yaml.safe_dump(report, sort_keys=False), end="")
    else:
        print(render_explain(report), end="")
    return 0


# ---- scheduler --------------------------------------------------------------------------


class _HealthServer:
    """``/metrics``, ``/healthz``, ``/readyz`` on a tiny asyncio HTTP/1.1 server."""

    def __init__(self, ready: Any) -> None:
        self.ready = ready
        self.server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> None:
        self.server = await asyncio.start_server(self._handle, host, port)

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await reader.readline()
            while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                pass
            parts = line.decode("latin-1").split()
            path = parts[1].split("?")[0] if len(parts) > 1 else "/"
            if path == "/metrics":
                from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

                status, ctype, body = "200 OK", CONTENT_TYPE_LATEST, generate_latest(REGISTRY)
            elif path in ("/healthz", "/livez"):
                status, ctype, body = "200 OK", "text/plain", b"ok"
            elif path == "/readyz":
                ok = bool(self.ready())
                status = "200 OK" if ok else "503 Service Unavailable"
                ctype, body = "text/plain", b"ok" if ok else b"not ready"
            else:
                status, ctype, body = "404 Not Found", "text/plain", b"not found"
            head = (
                f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n"
            )
            writer.write(head.encode("latin-1") + body)
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


async def _scheduler_command(args: argparse.Namespace) -> int:
    cluster = await _connect(args)
    config = SchedulerConfig(
        scheduler_name=args.scheduler_name, bind_concurrency=max(1, args.bind_concurrency)
    )
    scheduler = Scheduler(cluster, config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    elector: LeaderElector | None = None
    if args.leader_elect:
        elector = LeaderElector(
            cluster,
            identity=f"{socket.gethostname()}_{os.getpid()}",
            name=args.leader_elect_lease_name or args.scheduler_name,
            namespace=args.leader_elect_lease_namespace,
        )
    health = _HealthServer(lambda: scheduler.started and (elector is None or elector.leading))
    if args.metrics_port:
        await health.start(args.bind_address, args.metrics_port)
    code = 0
    tasks: list[asyncio.Task[Any]] = []
    try:
        stopper = asyncio.create_task(stop.wait())
        if elector is not None:
            acquire = asyncio.create_task(elector.acquire())
            done, _ = await asyncio.wait({acquire, stopper}, return_when=asyncio.FIRST_COMPLETED)
            if stopper in done:
                acquire.cancel()
                return 0
            tasks.append(asyncio.create_task(elector.keep()))
        runner = asyncio.create_task(scheduler.run())
        tasks.append(runner)
        done, _ = await asyncio.wait({stopper, *tasks}, return_when=asyncio.FIRST_COMPLETED)
        if stopper not in done:
            for t in done:
                if t is runner and t.exception() is not None:
                    raise t.exception()  # type: ignore[misc]
            print("error: lost the leader lease; exiting", flush=True)
            code = 1
        stopper.cancel()
    finally:
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        await scheduler.stop()
        if elector is not None:
            await elector.release()
        await health.stop()
        await cluster.close()
    return code
