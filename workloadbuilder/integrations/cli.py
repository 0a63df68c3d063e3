"""``workloadbuilder integrations run``: the reference integrations and the pod webhook."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import tempfile
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from workloadbuilder.cluster import Cluster, ResourceInfo, resource_info
from workloadbuilder.errors import ApiError
from workloadbuilder.integrations import KINDS, integration_for
from workloadbuilder.runtime import (
    HealthServer,
    LeaderElector,
    Reconciler,
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

if TYPE_CHECKING:  # aiohttp's server is imported only when a webhook is served
    from workloadbuilder.integrations.webhook import PodWebhook

__all__ = ["IntegrationsMetrics", "detect_native_job_integration", "register", "run_integrations"]

_log = logging.getLogger(__name__)
SubParsers = argparse._SubParsersAction

COMPONENT = "workloadbuilder-integrations"


def register(subparsers: SubParsers[argparse.ArgumentParser]) -> None:
    """Add ``integrations run``."""
    p = subparsers.add_parser(
        "integrations",
        help="run the reference Job / JobSet / LeaderWorkerSet integrations and pod webhook",
        description="Controllers that create the Workload, CompositePodGroups and PodGroups "
        "of Jobs, JobSets and LeaderWorkerSets, and the pod webhook that links their pods.",
    )
    sub = p.add_subparsers(dest="action", metavar="ACTION")
    run = sub.add_parser(
        "run",
        help="run the integrations (and the webhook)",
        description="Reconcile the chosen kinds; with --webhook-port also serve the "
        "pod-mutating webhook over TLS. Serves /metrics, /healthz, /readyz.",
    )
    add_kube_flags(run)
    run.add_argument(
        "--kinds",
        default=",".join(KINDS),
        help=f"comma-separated kinds to integrate (default {','.join(KINDS)})",
    )
    run.add_argument(
        "--job-mode",
        choices=["auto", "native", "opt-in"],
        default="auto",
        help="native: kube-controller-manager's WorkloadWithJob integration handles Jobs, do "
        "not run ours; opt-in: Jobs with the workloadbuilder.io/scheduling annotation; auto: "
        "native when the API server keeps Job spec.scheduling (default)",
    )
    run.add_argument("--webhook-port", type=int, default=None, help="serve the webhook here")
    run.add_argument("--webhook-host", default="0.0.0.0")
    run.add_argument("--tls-cert", help="serving certificate (PEM), reloaded on change")
    run.add_argument("--tls-key", help="serving key (PEM), reloaded on change")
    run.add_argument(
        "--self-signed",
        action="store_true",
        help="development: make a CA + certificate and patch the caBundle of "
        "--webhook-configuration",
    )
    run.add_argument(
        "--webhook-configuration",
        default="workloadbuilder-integrations",
        help="the MutatingWebhookConfiguration whose caBundle --self-signed patches",
    )
    run.add_argument(
        "--webhook-hosts",
        default="workloadbuilder-integrations.workloadbuilder-system.svc,localhost,127.0.0.1",
        help="names of the --self-signed certificate",
    )
    run.add_argument("--leader-elect", action="store_true", help="run only while holding the Lease")
    run.add_argument("--leader-elect-lease-name", default=COMPONENT)
    run.add_argument("--leader-elect-lease-namespace", default="kube-system")
    run.add_argument("--workers", type=int, default=2, help="parallel reconciles per kind")
    add_serving_flags(run, metrics_port=10271)
    add_event_loop_flag(run)
    run.set_defaults(func=_run_command)
    p.set_defaults(func=lambda args: _usage(p))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_usage()
    return 2


def _kinds(value: str) -> list[str]:
    names = [k.strip() for k in value.split(",") if k.strip()]
    unknown = [k for k in names if k not in KINDS]
    if unknown or not names:
        raise SystemExit(
            f"error: unknown --kinds {','.join(unknown) if unknown else repr(value)}: "
            f"choose from {','.join(KINDS)}"
        )
    return names


def _owner_kind(kind: str) -> ResourceInfo:
    gvk = integration_for(kind).gvk
    return resource_info(gvk.kind, gvk.api_version)


async def detect_native_job_integration(cluster: Cluster, namespace: str = "default") -> bool:
    """True when the API server keeps ``spec.scheduling`` of a Job (the ``WorkloadWithJob``
    gate is on; a server-side dry run, nothing is stored)."""
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"generateName": "workloadbuilder-probe-", "namespace": namespace},
        "spec": {
            "scheduling": {"schedulingPolicy": {"basic": {}}},
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
                }
            },
        },
    }
    try:
        out = await cluster.create(job, namespace, dry_run=True)
    except ApiError as e:
        _log.info("Job spec.scheduling probe failed (%s): assuming no native integration", e)
        return False
    return isinstance(out, dict) and (out.get("spec") or {}).get("scheduling") is not None


class IntegrationsMetrics:
    """A prometheus collector over the reconcilers' and the webhook's counters."""

    def __init__(self, reconcilers: Sequence[Reconciler], webhook: PodWebhook | None) -> None:
        self.reconcilers = reconcilers
        self.webhook = webhook

    def collect(self) -> Iterator[Any]:
        """The ``workloadbuilder_integration_*`` and ``workloadbuilder_webhook_*`` series."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        rec = CounterMetricFamily(
            "workloadbuilder_integration_reconciles", "reconciles", labels=["kind"]
        )
        err = CounterMetricFamily(
            "workloadbuilder_integration_reconcile_errors", "failed reconciles", labels=["kind"]
        )
        depth = GaugeMetricFamily(
            "workloadbuilder_integration_queue_depth", "keys queued", labels=["kind"]
        )
        for r in self.reconcilers:
            kind = r.resource.kind
            rec.add_metric([kind], r.reconciles)
            err.add_metric([kind], r.errors)
            depth.add_metric([kind], r.queue.pending)
        yield from (rec, err, depth)
        if self.webhook is not None:
            w = CounterMetricFamily(
                "workloadbuilder_webhook_reviews", "admission reviews", labels=["result"]
            )
            w.add_metric(["patched"], self.webhook.patched)
            w.add_metric(["unchanged"], self.webhook.reviews - self.webhook.patched)
            w.add_metric(["rejected"], self.webhook.rejected)
            yield w


async def run_integrations(
    cluster: Cluster,
    kinds: Sequence[str],
    *,
    stop: asyncio.Event,
    webhook: PodWebhook | None = None,
    webhook_address: tuple[str, int] | None = None,
    elector: LeaderElector | None = None,
    workers: int = 2,
    health: HealthServer | None = None,
) -> int:
    """Run one Reconciler per kind (while leading, with ``elector``) and the webhook
    (always: a standby answers reviews from its own caches) until ``stop``; 1 when the lease
    was lost. ``stop`` is honoured during start-up too (informers still listing)."""
    reconcilers = [Reconciler(cluster, integration_for(k), component=COMPONENT) for k in kinds]
    if webhook is not None:
        webhook.resolvers = list(reconcilers)
    if health is not None:
        from prometheus_client import CollectorRegistry

        registry = CollectorRegistry()
        registry.register(IntegrationsMetrics(reconcilers, webhook))
        health.registry = registry
        health.ready = lambda: (
            all(r.started for r in reconcilers) and (elector is None or elector.leading)
        )
    tasks: list[asyncio.Task[Any]] = []
    code = 0
    try:
        stopper = asyncio.create_task(stop.wait())
        tasks.append(stopper)

        async def start() -> None:
            for r in reconcilers:
                await r.start()
            if webhook is not None and webhook_address is not None:
                await webhook.start(*webhook_address)

        starting = asyncio.create_task(start())
        done, _ = await asyncio.wait({starting, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if starting not in done:  # stopped while the informers were still listing
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await starting
            return 0
        starting.result()
        if elector is not None:
            if not await lead_or_stop(elector, stopper):
                return 0
            tasks.append(asyncio.create_task(elector.keep()))
        runners = [asyncio.create_task(r.run(workers=workers)) for r in reconcilers]
        tasks.extend(runners)
        done, _ = await asyncio.wait(set(tasks), return_when=asyncio.FIRST_COMPLETED)
        if stopper not in done:
            code = report_lost_lease()
    finally:
        await cancel_all(tasks)
        for r in reconcilers:
            await r.stop()
        if webhook is not None:
            await webhook.stop()
        if elector is not None:
            await elector.release()
    return code


async def _run_command(args: argparse.Namespace) -> int:
    kinds = _kinds(args.kinds)
    if args.self_signed and (args.tls_cert or args.tls_key):
        raise SystemExit("error: --self-signed cannot be combined with --tls-cert/--tls-key")
    if args.webhook_port is not None and not (args.self_signed or (args.tls_cert and args.tls_key)):
        raise SystemExit("error: --webhook-port needs --tls-cert and --tls-key, or --self-signed")
    cluster = kube_cluster(args)
    # rejected credentials or no right to read what the reconcilers read: stop now
    await check_access_or_close(
        cluster,
        args,
        ["Workload", "PodGroup", "Pod", *(_owner_kind(k) for k in kinds)],
        component="integrations run",
        rbac="examples/deploy/integrations/clusterrole.yaml",
    )
    if "job" in kinds and args.job_mode != "opt-in":
        native = args.job_mode == "native" or await detect_native_job_integration(cluster)
        if native:
            print("Jobs: kube-controller-manager's native integration is on; not running ours")
            kinds = [k for k in kinds if k != "job"]
    webhook: PodWebhook | None = None
    tmp: tempfile.TemporaryDirectory[str] | None = None
    if args.webhook_port is not None:
        from workloadbuilder.integrations.webhook import PodWebhook, patch_ca_bundle, self_signed

        cert, key = args.tls_cert, args.tls_key
        if args.self_signed:
            tmp = tempfile.TemporaryDirectory(prefix="wb-webhook-")
            hosts = [h for h in args.webhook_hosts.split(",") if h]
            cert, key, ca = self_signed(tmp.name, hosts)
            n = await patch_ca_bundle(cluster, args.webhook_configuration, ca)
            print(f"patched caBundle of {n} webhook(s) in {args.webhook_configuration}")
        webhook = PodWebhook([], cert_file=cert, key_file=key)
    elector = None
    if args.leader_elect:
        elector = leader_elector(
            cluster, name=args.leader_elect_lease_name, namespace=args.leader_elect_lease_namespace
        )
    stop = stop_on_signals()
    health = await start_health(args, lambda: False)
    try:
        return await run_integrations(
            cluster,
            kinds,
            stop=stop,
            webhook=webhook,
            webhook_address=(args.webhook_host, args.webhook_port)
            if args.webhook_port is not None
            else None,
            elector=elector,
            workers=max(1, args.workers),
            health=health,
        )
    finally:
        await health.stop()
        await cluster.close()
        if tmp is not None:
            tmp.cleanup()
