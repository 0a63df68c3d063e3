"""Waits shared by tests that run on both MemoryCluster and the real API server."""

from __future__ import annotations

import asyncio
import time

from workloadbuilder.cluster import Cluster
from workloadbuilder.errors import Forbidden


async def priority_class_admitted(
    cluster: Cluster, namespace: str, name: str, *, timeout: float = 30.0
) -> None:
    """Wait until the Priority admission plugin knows PriorityClass ``name``.

    The real plugin reads PriorityClasses from an informer, so right after the class is created
    a pod naming it may still be refused with "no PriorityClass with name ... was found".
    Probes with a dry-run pod create; MemoryCluster answers at once.
    """
    probe = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "priority-class-probe", "namespace": namespace},
        "spec": {"priorityClassName": name, "containers": [{"name": "c", "image": "probe"}]},
    }
    deadline = time.monotonic() + timeout
    while True:
        try:
            await cluster.create(probe, dry_run=True)
            return
        except Forbidden as e:
            if "no PriorityClass with name" not in str(e) or time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.05)
