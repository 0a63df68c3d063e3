"""The start-up and shutdown a long-running component command shares (``workloadbuilder
scheduler``, ``workloadbuilder integrations run``).

Such a command, in this order:

1. takes the kube flags (:func:`~workloadbuilder.runtime.add_kube_flags`), the serving flags
   (:func:`add_serving_flags`: ``--metrics-port``, ``--bind-address``) and ``--event-loop``
   (:func:`~workloadbuilder.runtime.add_event_loop_flag`; ``workloadbuilder.cli`` runs the
   command on the chosen loop);
2. connects (:func:`~workloadbuilder.runtime.kube_cluster`) and checks its credentials at once
   (:func:`check_access_or_close`: one clear line and a closed connection when they are
   rejected or a kind it needs is forbidden);
3. builds its leader elector, when asked (:func:`leader_elector`: the Lease holder identity is
   ``<hostname>_<pid>``, as client-go's), stops on SIGTERM and SIGINT (:func:`stop_on_signals`)
   and serves ``/metrics``, ``/healthz``, ``/readyz`` (:func:`start_health`, unless the port
   is 0);
4. while not stopped, waits for the Lease (:func:`lead_or_stop`), runs its loops until the
   stop signal or until one of them ends (a lost lease: :func:`report_lost_lease`, exit 1),
   then cancels and awaits them (:func:`cancel_all`) and releases the Lease, the health server
   and the connection.

What differs (the settings file of the scheduler, the kinds and the webhook of the
integrations, their logging) stays in each command.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
from collections.abc import Callable, Iterable
from typing import Any

from workloadbuilder.cluster import Cluster, ResourceInfo
from workloadbuilder.runtime._access import check_access, credential_source
from workloadbuilder.runtime._health import HealthServer
from workloadbuilder.runtime._leader import LeaderElector

__all__ = [
    "LOST_LEASE",
    "add_serving_flags",
    "cancel_all",
    "check_access_or_close",
    "lead_or_stop",
    "leader_elector",
    "process_identity",
    "report_lost_lease",
    "start_health",
    "stop_on_signals",
]

#: what a component prints (on stdout) before it exits with 1 when its lease was lost
LOST_LEASE = "error: lost the leader lease; exiting"


def add_serving_flags(parser: argparse.ArgumentParser, *, metrics_port: int) -> None:
    """``--metrics-port`` (default ``metrics_port``; 0 disables the endpoint) and
    ``--bind-address`` (default ``0.0.0.0``) for :func:`start_health`."""
    parser.add_argument(
        "--metrics-port", type=int, default=metrics_port, help="0 disables the endpoint"
    )
    parser.add_argument("--bind-address", default="0.0.0.0", help="address for metrics and health")


async def check_access_or_close(
    cluster: Cluster,
    args: argparse.Namespace,
    needs: Iterable[str | ResourceInfo],
    *,
    component: str,
    rbac: str,
) -> None:
    """:func:`~workloadbuilder.runtime.check_access` of ``needs`` with the credentials of the
    kube flags in ``args``; on failure (or cancellation) ``cluster`` is closed before the
    error propagates."""
    try:
        await check_access(
            cluster, needs, source=credential_source(args), component=component, rbac=rbac
        )
    except BaseException:
        await cluster.close()
        raise


def process_identity() -> str:
    """This process's Lease holder identity: ``<hostname>_<pid>``."""
    return f"{socket.gethostname()}_{os.getpid()}"


def leader_elector(
    cluster: Cluster,
    *,
    name: str,
    namespace: str,
    lease_duration: float = 15.0,
    renew_deadline: float = 10.0,
    retry_period: float = 2.0,
) -> LeaderElector:
    """A :class:`~workloadbuilder.runtime.LeaderElector` for Lease ``namespace/name`` with
    :func:`process_identity` (the timing defaults are the elector's, kube-scheduler's)."""
    return LeaderElector(
        cluster,
        identity=process_identity(),
        name=name,
        namespace=namespace,
        lease_duration=lease_duration,
        renew_deadline=renew_deadline,
        retry_period=retry_period,
    )


def stop_on_signals() -> asyncio.Event:
    """An event that SIGTERM and SIGINT set on the running loop (where signal handlers are
    supported)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    return stop


async def start_health(
    args: argparse.Namespace, ready: Callable[[], bool], *, registry: Any = None
) -> HealthServer:
    """A :class:`~workloadbuilder.runtime.HealthServer`, listening on the serving flags'
    address unless ``--metrics-port`` is 0 (then it only exists, for a uniform shutdown)."""
    health = HealthServer(ready, registry=registry)
    if args.metrics_port:
        await health.start(args.bind_address, args.metrics_port)
    return health


async def lead_or_stop(elector: LeaderElector, stopper: asyncio.Task[Any]) -> bool:
    """Wait until ``elector`` holds the Lease (True) or ``stopper`` is done (False: the
    acquisition is cancelled)."""
    acquire = asyncio.create_task(elector.acquire())
    done, _ = await asyncio.wait({acquire, stopper}, return_when=asyncio.FIRST_COMPLETED)
    if stopper in done:
        acquire.cancel()
        return False
    return True


async def cancel_all(tasks: Iterable[asyncio.Task[Any]]) -> None:
    """Cancel ``tasks`` and wait for each to end, ignoring what they raise."""
    tasks = list(tasks)
    for t in tasks:
        t.cancel()
    for t in tasks:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await t


def report_lost_lease() -> int:
    """Print :data:`LOST_LEASE` and return the exit code (1)."""
    print(LOST_LEASE, flush=True)
    return 1
