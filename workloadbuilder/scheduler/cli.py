"""``workloadbuilder scheduler`` and ``workloadbuilder explain podgroup``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import sys
from typing import Any

import attrs

from workloadbuilder.api import CompositePodGroup, PodGroup, to_dict
from workloadbuilder.cluster import Cluster
from workloadbuilder.errors import ApiError, NotFound, WorkloadBuilderError
from workloadbuilder.runtime import (
    HealthServer,
    LeaderElector,
    RateLimitedCluster,
    add_event_loop_flag,
    add_kube_flags,
    check_access,
    credential_source,
    kube_cluster,
)
from workloadbuilder.scheduler._config import DEFAULT_SCHEDULER_NAME, SchedulerConfig
from workloadbuilder.scheduler._metrics import REGISTRY, WATCH_STALLS
from workloadbuilder.scheduler._plugins import default_framework
from workloadbuilder.scheduler._profile import ConfigError, LoadedConfig, load_config
from workloadbuilder.scheduler._scheduler import CONDITION_INITIALLY_SCHEDULED, Scheduler

__all__ = ["explain_report", "explain_text", "register", "render_explain", "waiting_state"]

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
            "SIGTERM. --config reads a KubeSchedulerConfiguration (one profile); explicitly "
            "given leader election flags override it."
        ),
    )
    add_kube_flags(p)
    p.add_argument(
        "--config",
        metavar="FILE",
        help="a KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) YAML file",
    )
    p.add_argument(
        "--scheduler-name",
        default=None,
        help=f"pods to schedule (default {DEFAULT_SCHEDULER_NAME}; with --config: the "
        "profile's schedulerName)",
    )
    p.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run only while holding the Lease",
    )
    p.add_argument(
        "--leader-elect-lease-namespace",
        "--leader-elect-resource-namespace",
        dest="leader_elect_lease_namespace",
        default=None,
        help="namespace of the Lease (default kube-system)",
    )
    p.add_argument(
        "--leader-elect-lease-name",
        "--leader-elect-resource-name",
        dest="leader_elect_lease_name",
        default=None,
        help="Lease name (default: scheduler name)",
    )
    p.add_argument(
        "--kube-api-qps",
        type=float,
        default=None,
        help="client-side requests per second (ignored with --config: clientConnection.qps)",
    )
    p.add_argument(
        "--kube-api-burst",
        type=int,
        default=None,
        help="client-side burst (ignored with --config: clientConnection.burst)",
    )
    p.add_argument("--metrics-port", type=int, default=10269, help="0 disables the endpoint")
    p.add_argument("--bind-address", default="0.0.0.0", help="address for metrics and health")
    p.add_argument(
        "--bind-concurrency",
        type=int,
        default=64,
        help="parallel pods/binding (in process, SchedulerConfig.bind_concurrency: 16)",
    )
    add_event_loop_flag(p)
    p.add_argument(
        "--gc-freeze",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="freeze the long-lived heap for the garbage collector once the informers synced "
        "(see docs/scheduler.md, 'The garbage collector'; default on)",
    )
    p.set_defaults(func=_scheduler_command)

    e = subparsers.add_parser(
        "explain",
        help="explain why a pod group is (not) scheduled",
        description=(
            "Explain a PodGroup on a live cluster: its policy and minCount, priority, how many "
            "of its pods exist and are bound, on which nodes, its PodGroupInitiallyScheduled "
            "condition and the scheduler's latest explanation; a gang that is still gated "
            "(its PodGroup missing, or fewer than minCount pods) is reported as waiting. "
            "KIND is 'podgroup'. Exit 0 on success, 1 when the cluster cannot be reached or "
            "the PodGroup does not exist, 2 on usage errors."
        ),
    )
    esub = e.add_subparsers(dest="what", metavar="KIND")
    pg = esub.add_parser(
        "podgroup",
        help="a PodGroup's state and latest explanation",
        description="Explain why PodGroup NAME is (not) scheduled.",
    )
    pg.add_argument("name")
    pg.add_argument("-n", "--namespace", default="default")
    pg.add_argument(
        "-o", "--output", choices=["text", "json", "yaml"], default="text", help="output format"
    )
    add_kube_flags(pg)
    pg.set_defaults(func=_explain_command)
    e.set_defaults(func=lambda args: _usage(e, "explain needs a KIND (known: podgroup)"))


def _usage(parser: argparse.ArgumentParser, message: str) -> int:
    parser.print_usage(sys.stderr)
    print(f"error: {message}", file=sys.stderr)
    return 2


# ---- explain ----------------------------------------------------------------------------


async def explain_report(cluster: Cluster, name: str, namespace: str) -> dict[str, Any]:
    """A PodGroup's state as data: policy, pods, nodes, condition and explanation (what
    ``explain podgroup -o json|yaml`` prints)."""
    try:
        pg = await cluster.get("PodGroup", name, namespace)
    except NotFound:
        pg = None
    pods = [
        p
        for p in (await cluster.list("Pod", namespace)).items
        if isinstance(p, dict)
        and ((p.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName") == name
    ]
    live = [p for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
    bound = [p for p in live if (p.get("spec") or {}).get("nodeName")]
    if pg is None:
        if not live:
            raise WorkloadBuilderError(f'podgroup "{name}" not found in namespace "{namespace}"')
        return _missing_group_report(name, namespace, len(live), len(bound))
    assert isinstance(pg, PodGroup)
    gang = pg.spec.scheduling_policy.gang
    conds = pg.status.conditions if pg.status is not None else ()
    cond = next((c for c in conds if c.type == CONDITION_INITIALLY_SCHEDULED), None)
    if gang is not None and len(live) < gang.min_count and (cond is None or cond.status != "True"):
        # gated: the scheduler does not attempt the gang and writes no status (as upstream)
        state = waiting_state(len(live), gang.min_count)
    elif cond is not None:
        state = f"{cond.type}={cond.status} ({cond.reason})"
    else:
        state = "not attempted yet"
    report: dict[str, Any] = {
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
        "tree": await tree_report(cluster, pg, pods)
        if pg.spec.parent_composite_pod_group_name
        else None,
    }
    if cond is not None and cond.status == "False":
        report["preemption"] = await preemption_state(cluster, pg, cond.message or "")
    return report


async def preemption_state(cluster: Cluster, pg: PodGroup, message: str) -> str:
    """What workload-aware preemption does for an unschedulable group, or why it cannot."""
    if pg.spec.preemption_policy == "Never":
        return "not eligible: preemptionPolicy Never"
    for marker in ("waiting for ", "preempting ", "preemption would not help"):
        at = message.rfind(marker)
        if at >= 0:
            return message[at:].split("; ")[0]
    prio = pg.spec.priority or 0
    try:
        items = (await cluster.list("Pod")).items  # the domain is the whole cluster
    except ApiError:
        items = (await cluster.list("Pod", pg.metadata.namespace)).items
    lower = sum(
        1
        for p in items
        if isinstance(p, dict)
        and (p.get("spec") or {}).get("nodeName")
        and int((p.get("spec") or {}).get("priority") or 0) < prio
    )
    if not lower:
        return "no lower-priority units"
    return f"{lower} lower-priority pods run; preempting them would not make the group fit"


def waiting_state(existing: int, min_count: int) -> str:
    """The state of a gated gang: ``waiting: 2 of 3 pods exist``."""
    return f"waiting: {existing} of {min_count} {'pod' if min_count == 1 else 'pods'} exist"


def _missing_group_report(name: str, namespace: str, live: int, bound: int) -> dict[str, Any]:
    """Pods name a PodGroup that does not exist (yet): they wait for it."""
    return {
        "namespace": namespace,
        "name": name,
        "policy": None,
        "minCount": None,
        "priorityClassName": None,
        "priority": None,
        "pods": {"live": live, "bound": bound},
        "nodes": [],
        "state": f"waiting: the PodGroup does not exist; {live} "
        f"{'pod names' if live == 1 else 'pods name'} it",
        "condition": None,
        "explanation": None,
    }


def render_explain(report: dict[str, Any]) -> str:
    """The human-readable form of :func:`explain_report`."""
    lines = [f"PodGroup:  {report['namespace']}/{report['name']}"]
    if report["policy"] == "gang":
        lines.append(f"Policy:    gang (minCount {report['minCount']})")
    elif report["policy"] == "basic":
        lines.append("Policy:    basic")
    if report["priorityClassName"] or report["priority"] is not None:
        parts = [
            report["priorityClassName"] or "",
            "" if report["priority"] is None else str(report["priority"]),
        ]
        lines.append(f"Priority:  {' '.join(p for p in parts if p)}")
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
    if report.get("preemption"):
        lines.append(f"Preemption: {report['preemption']}")
    if report.get("tree"):
        lines.append("Tree:")
        lines.extend(render_tree(report["tree"], report["name"]))
    return "\n".join(lines) + "\n"


async def tree_report(cluster: Cluster, pg: PodGroup, pods: list[dict[str, Any]]) -> dict[str, Any]:
    """The CompositePodGroup tree a PodGroup belongs to, from its root, each level with its
    state (``explain podgroup`` shows it). Pods of the other leaves are listed in the
    namespace."""
    namespace = pg.metadata.namespace or "default"
    cpgs = {
        str(o.metadata.name): o
        for o in (await cluster.list("CompositePodGroup", namespace)).items
        if isinstance(o, CompositePodGroup)
    }
    groups = {
        str(o.metadata.name): o
        for o in (await cluster.list("PodGroup", namespace)).items
        if isinstance(o, PodGroup)
    }
    all_pods = [p for p in (await cluster.list("Pod", namespace)).items if isinstance(p, dict)]
    root = pg.spec.parent_composite_pod_group_name or ""
    seen: set[str] = set()
    while root in cpgs and cpgs[root].spec.parent_composite_pod_group_name and root not in seen:
        seen.add(root)
        root = cpgs[root].spec.parent_composite_pod_group_name or root

    def leaf(g: PodGroup) -> dict[str, Any]:
        name = str(g.metadata.name)
        mine = [
            p
            for p in all_pods
            if ((p.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName") == name
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        ]
        gang = g.spec.scheduling_policy.gang
        conds = g.status.conditions if g.status is not None else ()
        c = next((c for c in conds if c.type == CONDITION_INITIALLY_SCHEDULED), None)
        topo = g.spec.scheduling_constraints.topology if g.spec.scheduling_constraints else ()
        return {
            "kind": "PodGroup",
            "name": name,
            "policy": f"gang (minCount {gang.min_count})" if gang is not None else "basic",
            "topology": topo[0].key if topo else None,
            "pods": {"live": len(mine), "bound": sum(1 for p in mine if p["spec"].get("nodeName"))},
            "state": f"{c.type}={c.status} ({c.reason})" if c is not None else "not attempted yet",
            "explanation": (c.message or None) if c is not None else None,
            "scheduled": c is not None and c.status == "True",
            "children": [],
        }

    def composite(name: str, depth: int) -> dict[str, Any]:
        cpg = cpgs.get(name)
        if cpg is None or depth > 4:
            return {
                "kind": "CompositePodGroup",
                "name": name,
                "state": "does not exist",
                "children": [],
                "scheduled": False,
            }
        kids = [
            composite(n, depth + 1)
            for n, c in sorted(cpgs.items())
            if c.spec.parent_composite_pod_group_name == name
        ]
        kids += [
            leaf(g)
            for n, g in sorted(groups.items())
            if g.spec.parent_composite_pod_group_name == name
        ]
        gang = cpg.spec.scheduling_policy.gang
        need = gang.min_group_count if gang is not None else 1
        done = sum(1 for k in kids if k["scheduled"])
        topo = cpg.spec.scheduling_constraints.topology if cpg.spec.scheduling_constraints else ()
        return {
            "kind": "CompositePodGroup",
            "name": name,
            "policy": f"gang (minGroupCount {need})" if gang is not None else "basic",
            "topology": topo[0].key if topo else None,
            "state": f"{done} of {len(kids)} child groups scheduled (needs {need})",
            "scheduled": done >= need and done > 0,
            "children": kids,
        }

    return composite(root, 1)


def render_tree(node: dict[str, Any], mark: str, depth: int = 1) -> list[str]:
    """Indented lines of a :func:`tree_report` (``<-`` marks the PodGroup asked about)."""
    pad = "  " * depth
    where = f", {node['topology']}" if node.get("topology") else ""
    pods = f", {node['pods']['bound']}/{node['pods']['live']} pods bound" if "pods" in node else ""
    here = "  <-" if node["kind"] == "PodGroup" and node["name"] == mark else ""
    lines = [
        f"{pad}{node['kind']} {node['name']}: {node.get('policy', '')}{where}{pods}; "
        f"{node['state']}{here}"
    ]
    if node.get("explanation") and node["kind"] == "PodGroup" and node["name"] != mark:
        lines.append(f"{pad}  why: {node['explanation']}")
    for child in node["children"]:
        lines.extend(render_tree(child, mark, depth + 1))
    return lines


async def explain_text(cluster: Cluster, name: str, namespace: str) -> str:
    """A human-readable account of a PodGroup: policy, pods, condition and explanation."""
    return render_explain(await explain_report(cluster, name, namespace))


#: explain is interactive: a few quick attempts, each reported, instead of minutes of retries
_EXPLAIN_RETRY_ATTEMPTS = 3


async def _report_and_sleep(delay: float) -> None:
    print(f"cannot reach the API server; retrying in {delay:.1f}s", file=sys.stderr, flush=True)
    await asyncio.sleep(delay)


async def _explain_command(args: argparse.Namespace) -> int:
    from workloadbuilder.cluster import RetryPolicy

    policy = RetryPolicy(
        max_attempts=_EXPLAIN_RETRY_ATTEMPTS,
        initial_backoff=0.5,
        max_backoff=2.0,
        max_elapsed=10.0,
        sleep=_report_and_sleep,
    )
    cluster = kube_cluster(args, retry=policy, connect_timeout=3.0, request_timeout=10.0)
    try:
        report = await explain_report(cluster, args.name, args.namespace)
    except ApiError as e:
        if e.status != 0:  # an answer from the server (403, ...): report it as it is
            raise
        raise WorkloadBuilderError(
            f"cannot reach the API server after {_EXPLAIN_RETRY_ATTEMPTS} attempts: {e}"
        ) from None
    finally:
        await cluster.close()
    if args.output == "json":
        print(json.dumps(report, indent=2))
    elif args.output == "yaml":
        import yaml

        print(yaml.safe_dump(report, sort_keys=False), end="")
    else:
        print(render_explain(report), end="")
    return 0


# ---- scheduler --------------------------------------------------------------------------


def _settings(args: argparse.Namespace) -> LoadedConfig:
    """The configuration file (if any) with the command-line flags applied the way
    kube-scheduler applies them: explicitly given leader election flags override the file;
    the deprecated client flags (``--kube-api-qps/burst``) only count without a file."""
    if args.config:
        if args.scheduler_name is not None:
            raise ConfigError(
                "--scheduler-name cannot be combined with --config: set "
                "profiles[0].schedulerName in the file"
            )
        loaded = load_config(args.config)
        if args.kube_api_qps is not None or args.kube_api_burst is not None:
            _log.warning("--kube-api-qps/--kube-api-burst are ignored with --config")
    else:
        config = SchedulerConfig(scheduler_name=args.scheduler_name or DEFAULT_SCHEDULER_NAME)
        loaded = LoadedConfig(
            scheduler=config,
            framework=default_framework(
                gang_strategy=config.gang_scoring,
                single_strategy=config.single_scoring,
                score_resources=config.score_resources,
            ),
        )
        if args.kube_api_qps is not None or args.kube_api_burst is not None:
            loaded.client_connection = attrs.evolve(
                loaded.client_connection, qps=args.kube_api_qps, burst=args.kube_api_burst
            )
    le = loaded.leader_election
    overrides: dict[str, Any] = {}
    if args.leader_elect is not None:
        overrides["leader_elect"] = args.leader_elect
    if args.leader_elect_lease_namespace is not None:
        overrides["resource_namespace"] = args.leader_elect_lease_namespace
    if args.leader_elect_lease_name is not None:
        overrides["resource_name"] = args.leader_elect_lease_name
    loaded.leader_election = attrs.evolve(le, **overrides)
    loaded.scheduler = attrs.evolve(
        loaded.scheduler,
        bind_concurrency=max(1, args.bind_concurrency),
        preemption=True,
        gc_freeze=getattr(args, "gc_freeze", True),
    )
    return loaded


def _rate_limited(cluster: Cluster, loaded: LoadedConfig) -> Cluster:
    """client-go's QPS/burst (defaults 50/100 once either is set; a negative QPS: none)."""
    cc = loaded.client_connection
    if cc.qps is None and cc.burst is None:
        return cluster
    qps = cc.qps if cc.qps else 50.0
    if qps < 0:
        return cluster
    return RateLimitedCluster(cluster, qps=qps, burst=cc.burst or 100)


async def _scheduler_command(args: argparse.Namespace) -> int:
    # what the scheduler does is logged at INFO by default; -v adds the details (DEBUG)
    logging.getLogger().setLevel(logging.DEBUG if getattr(args, "verbose", 0) else logging.INFO)
    loaded = _settings(args)
    if args.kubeconfig is None and loaded.client_connection.kubeconfig:
        args.kubeconfig = loaded.client_connection.kubeconfig
    # gzip accepted (client-go's default; kube-scheduler disables it): measured next to the
    # API server, reading the large list pages gzipped costs ours less CPU than reading them
    # plain through TLS (docs/performance.md); disable-compression in the kubeconfig turns it off
    kube = kube_cluster(args)
    WATCH_STALLS.source = lambda: kube.watch_stalls
    cluster = _rate_limited(kube, loaded)
    try:  # rejected credentials or no right to read nodes and pods: stop now, say why
        await check_access(
            cluster,
            ("Node", "Pod"),
            source=credential_source(args),
            component="the scheduler",
            rbac="examples/deploy/scheduler/clusterrole.yaml",
        )
    except BaseException:
        await cluster.close()
        raise
    config = loaded.scheduler
    scheduler = Scheduler(cluster, config, framework=loaded.framework)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    elector: LeaderElector | None = None
    le = loaded.leader_election
    if le.leader_elect:
        elector = LeaderElector(
            cluster,
            identity=f"{socket.gethostname()}_{os.getpid()}",
            name=le.resource_name or config.scheduler_name,
            namespace=le.resource_namespace,
            lease_duration=le.lease_duration,
            renew_deadline=le.renew_deadline,
            retry_period=le.retry_period,
        )
    health = HealthServer(
        lambda: scheduler.started and (elector is None or elector.leading), registry=REGISTRY
    )
    if args.metrics_port:
        await health.start(args.bind_address, args.metrics_port)
    code = 0
    tasks: list[asyncio.Task[Any]] = []
    _log.info(
        "scheduler %s starting (bind concurrency %d, leader election %s, event loop %s)",
        config.scheduler_name,
        config.bind_concurrency,
        f"on, lease {le.resource_namespace}/{le.resource_name or config.scheduler_name}"
        if le.leader_elect
        else "off",
        type(loop).__module__.split(".")[0],
    )
    try:
        stopper = asyncio.create_task(stop.wait())
        if elector is not None:
            _log.info("waiting to acquire the leader lease")
            acquire = asyncio.create_task(elector.acquire())
            done, _ = await asyncio.wait({acquire, stopper}, return_when=asyncio.FIRST_COMPLETED)
            if stopper in done:
                acquire.cancel()
                return 0
            tasks.append(asyncio.create_task(elector.keep()))
        runner = asyncio.create_task(scheduler.run())
        tasks.append(runner)
        _log.info("scheduling pods with schedulerName %s", config.scheduler_name)
        done, _ = await asyncio.wait({stopper, *tasks}, return_when=asyncio.FIRST_COMPLETED)
        if stopper not in done:
            for t in done:
                if t is runner and t.exception() is not None:
                    raise t.exception()  # type: ignore[misc]
            print("error: lost the leader lease; exiting", flush=True)
            code = 1
        else:
            _log.info("stopping")
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
