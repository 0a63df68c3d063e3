"""Start-up credential checks shared by long-running components (the scheduler,
``integrations run``): a component whose credentials the API server rejects (401), or that
is not allowed to read a kind it cannot work without (403), stops at once with one clear
line naming where the credentials came from -- never the credential itself -- instead of
retrying forever."""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import Iterable
from pathlib import Path

from workloadbuilder.cluster import Cluster, ResourceInfo, resource_info
from workloadbuilder.errors import (
    ApiError,
    Forbidden,
    NotFound,
    Unauthorized,
    WorkloadBuilderError,
)

__all__ = ["AccessError", "check_access", "credential_source"]

#: where a pod's service-account token is mounted
SERVICE_ACCOUNT_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"
#: start-up checks in flight at once
_CONCURRENT = 8


class AccessError(WorkloadBuilderError):
    """The component cannot run with its credentials: ``status`` 401 (rejected) or 403
    (not allowed to read a kind it needs)."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


def credential_source(args: argparse.Namespace) -> str:
    """Where the kube flags (:func:`~workloadbuilder.runtime.add_kube_flags`) take the
    credentials from, for messages: the kubeconfig file(s) and context, or the pod's
    service-account token (client-go's default loading rules)."""
    path = getattr(args, "kubeconfig", None)
    context = getattr(args, "context", None)
    where = f", context {context}" if context else ", current context"
    if path:
        return f"kubeconfig {path}{where}"
    env = os.environ.get("KUBECONFIG")
    if env:
        return f"kubeconfig {env} (from $KUBECONFIG){where}"
    home = Path.home() / ".kube" / "config"
    if home.exists() or not os.environ.get("KUBERNETES_SERVICE_HOST"):
        return f"kubeconfig {home}{where}"
    return f"the pod's service account token ({SERVICE_ACCOUNT_TOKEN})"


async def check_access(
    cluster: Cluster,
    kinds: Iterable[str | ResourceInfo],
    *,
    source: str,
    component: str,
    rbac: str,
) -> None:
    """List each of ``kinds`` once (one object): raise :class:`AccessError` when the server
    rejects the credentials (401) or forbids listing one of them (403). ``source`` names
    the credentials (:func:`credential_source`), ``component`` the program, ``rbac`` where
    its role is described. A kind the server does not serve, and a server that cannot be
    reached (after the client's retries), are left to the component: it retries as before."""
    infos: list[ResourceInfo] = []
    seen: set[tuple[str, str]] = set()
    for kind in kinds:
        info = resource_info(kind)
        if (info.group, info.plural) not in seen:
            seen.add((info.group, info.plural))
            infos.append(info)
    # the lists go out together (at most _CONCURRENT in flight: one round trip instead of
    # one per kind); their answers are read in the order of ``kinds``, so the error raised,
    # and whether one is, are those of checking them one after another
    limit = asyncio.Semaphore(_CONCURRENT)

    async def probe(info: ResourceInfo) -> Exception | None:
        # every failure is returned, none raised: a task group would wrap it in an
        # ExceptionGroup, and the first in order must surface as itself
        async with limit:
            try:
                await cluster.list(info, limit=1)
            except Exception as e:
                return e
            return None

    async with asyncio.TaskGroup() as group:
        probes = [group.create_task(probe(info)) for info in infos]
    for info, task in zip(infos, probes, strict=True):
        error = task.result()
        if error is None or isinstance(error, NotFound):
            continue
        if not isinstance(error, (ApiError, OSError)):
            raise error  # what checking one after another would have let through
        if isinstance(error, Unauthorized):
            raise AccessError(
                f"the API server rejected the credentials from {source} (401 Unauthorized: "
                f"the token or client certificate is invalid, expired or revoked); "
                f"{component} cannot work without valid credentials",
                status=401,
            ) from None
        if isinstance(error, Forbidden):
            what = f"{info.plural}.{info.group}" if info.group else info.plural
            raise AccessError(
                f"{component} is not allowed to list {what} with the credentials from "
                f"{source} (403 Forbidden: {error.message}); it cannot work without reading "
                f"them: grant list and watch on {what} to its identity (see {rbac})",
                status=403,
            ) from None
        return  # unreachable or failing: not an answer about the credentials
