"""Helpers for the integration tests."""

from __future__ import annotations

from workloadbuilder.cluster import Cluster
from workloadbuilder.runtime import Reconciler


async def run_until_quiet(*reconcilers: Reconciler, rounds: int = 20) -> int:
    """Step the reconcilers until none has anything to do now."""
    total = 0
    for _ in range(rounds):
        n = 0
        for r in reconcilers:
            n += await r.until_idle()
        total += n
        if n == 0:
            break
    return total


async def names(cluster: Cluster, kind: str, ns: str = "default") -> list[str]:
    """Sorted names of ``kind`` objects in ``ns``."""
    out = []
    for o in (await cluster.list(kind, ns)).items:
        out.append(o["metadata"]["name"] if isinstance(o, dict) else o.metadata.name)
    return sorted(out)
