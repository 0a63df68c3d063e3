"""``workloadbuilder scheduler`` and ``workloadbuilder explain podgroup`` (the explain report
itself is :mod:`workloadbuilder.scheduler.explain`; its public names are re-exported here)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from typing import Any

import attrs

from workloadbuilder.cluster import Cluster
from workloadbuilder.runtime import (
    LeaderElector,
    RateLimitedCluster,
    add_event_loop_flag,
    add_kube_flags,
    add_serving_flags,
    cancel_all,
    check_access_or_close,
    kube_cluster,
    lead_or_stop,
    leader_elector,
    report_lost_lease,
    start_health,
    stop_on_signals,
)
from workloadbuilder.scheduler._config import DEFAULT_SCHEDULER_NAME, SchedulerConfig
from workloadbuilder.scheduler._metrics import REGISTRY, WATCH_STALLS
from workloadbuilder.scheduler._plugins import default_framework
from workloadbuilder.scheduler._profile import ConfigError, LoadedConfig, load_config
from workloadbuilder.scheduler._scheduler import Scheduler
from workloadbuilder.scheduler.explain import (
    explain_command,
    explain_report,
    explain_text,
    render_explain,
    waiting_state,
)

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
            "SIGTERM. --config reads a KubeSchedulerConfiguration: each of its profiles "
            "schedules the pods naming its schedulerName (one cache and queue for all); "
            "explicitly given leader election flags override it."
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
        "profiles' schedulerNames)",
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
    add_serving_flags(p, metrics_port=10269)
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
    _register_explain(subparsers)


def _register_explain(subparsers: SubParsers[argparse.ArgumentParser]) -> None:
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
    pg.set_defaults(func=explain_command)
    e.set_defaults(func=lambda args: _usage(e, "explain needs a KIND (known: podgroup)"))


def _usage(parser: argparse.ArgumentParser, message: str) -> int:
    parser.print_usage(sys.stderr)
    print(f"error: {message}", file=sys.stderr)
    return 2


# ---- scheduler --------------------------------------------------------------------------


def _settings(args: argparse.Namespace) -> LoadedConfig:
    """The configuration file (if any) with the command-line flags applied the way
    kube-scheduler applies them: explicitly given leader election flags override the file;
    the deprecated client flags (``--kube-api-qps/burst``) only count without a file."""
    if args.config:
        if args.scheduler_name is not None:
            raise ConfigError(
                "--scheduler-name cannot be combined with --config: set each profile's "
                "schedulerName (profiles[i].schedulerName) in the file"
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
    # rejected credentials or no right to read nodes and pods: stop now, say why
    await check_access_or_close(
        cluster,
        args,
        ("Node", "Pod"),
        component="the scheduler",
        rbac="examples/deploy/scheduler/clusterrole.yaml",
    )
    config = loaded.scheduler
    scheduler = Scheduler(cluster, config, frameworks=loaded.frameworks)
    names = ", ".join(loaded.frameworks)
    stop = stop_on_signals()
    elector: LeaderElector | None = None
    le = loaded.leader_election
    if le.leader_elect:
        elector = leader_elector(
            cluster,
            name=le.resource_name or config.scheduler_name,
            namespace=le.resource_namespace,
            lease_duration=le.lease_duration,
            renew_deadline=le.renew_deadline,
            retry_period=le.retry_period,
        )
    health = await start_health(
        args,
        lambda: scheduler.started and (elector is None or elector.leading),
        registry=REGISTRY,
    )
    code = 0
    tasks: list[asyncio.Task[Any]] = []
    _log.info(
        "scheduler %s starting (bind concurrency %d, leader election %s, event loop %s)",
        names,
        config.bind_concurrency,
        f"on, lease {le.resource_namespace}/{le.resource_name or config.scheduler_name}"
        if le.leader_elect
        else "off",
        type(asyncio.get_running_loop()).__module__.split(".")[0],
    )
    try:
        stopper = asyncio.create_task(stop.wait())
        if elector is not None:
            _log.info("waiting to acquire the leader lease")
            if not await lead_or_stop(elector, stopper):
                return 0
            tasks.append(asyncio.create_task(elector.keep()))
        runner = asyncio.create_task(scheduler.run())
        tasks.append(runner)
        _log.info(
            "scheduling pods with schedulerName %s",
            names if len(loaded.frameworks) == 1 else f"in {names} (one profile each)",
        )
        done, _ = await asyncio.wait({stopper, *tasks}, return_when=asyncio.FIRST_COMPLETED)
        if stopper not in done:
            for t in done:
                if t is runner and t.exception() is not None:
                    raise t.exception()  # type: ignore[misc]
            code = report_lost_lease()
        else:
            _log.info("stopping")
        stopper.cancel()
    finally:
        await cancel_all(tasks)
        await scheduler.stop()
        if elector is not None:
            await elector.release()
        await health.stop()
        await cluster.close()
    return code
