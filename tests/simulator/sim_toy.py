"""A tiny stand-in scheduler on the Cluster protocol, for testing the simulator's own
machinery (the event loop and the invariant check) independently of the real Scheduler.

``ToyScheduler`` places whole gangs first-fit by cpu (all or nothing); ``broken=True`` binds
only the first pod of every gang, which the simulator must report as a violation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workloadbuilder.api import PodGroup
from workloadbuilder.cluster import Cluster
from workloadbuilder.simulator import parse_quantity


def _cpu(pod: Mapping[str, Any]) -> float:
    total = 0.0
    for c in pod["spec"].get("containers") or ():
        total += parse_quantity(((c.get("resources") or {}).get("requests") or {}).get("cpu", 0))
    return total


class ToyScheduler:
    """First-fit gang placement by cpu; groups in creation order."""

    def __init__(self, cluster: Cluster, *, broken: bool = False) -> None:
        self.cluster = cluster
        self.broken = broken
        self.explanations: dict[tuple[str, str], str] = {}

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def sync(self) -> None:
        return None

    def next_wakeup(self) -> float | None:
        return None

    async def until_idle(self) -> int:
        nodes = [n for n in (await self.cluster.list("Node")).items if isinstance(n, dict)]
        pods = [p for p in (await self.cluster.list("Pod")).items if isinstance(p, dict)]
        groups = [g for g in (await self.cluster.list("PodGroup")).items if isinstance(g, PodGroup)]
        free = {
            n["metadata"]["name"]: parse_quantity(n["status"]["allocatable"]["cpu"]) for n in nodes
        }
        for p in pods:
            node = p["spec"].get("nodeName")
            if node and p.get("status", {}).get("phase") not in ("Succeeded", "Failed"):
                free[node] -= _cpu(p)
        bound = 0
        for g in groups:
            ns, name = g.metadata.namespace or "default", g.metadata.name or ""
            members = [
                p
                for p in pods
                if p["metadata"]["namespace"] == ns
                and (p["spec"].get("schedulingGroup") or {}).get("podGroupName") == name
            ]
            waiting = [p for p in members if not p["spec"].get("nodeName")]
            gang = g.spec.scheduling_policy.gang
            need = gang.min_count if gang is not None else 1
            if not waiting or len(members) < need:
                continue
            trial = dict(free)
            placed: list[tuple[dict[str, Any], str]] = []
            for p in waiting:
                for node in sorted(trial):
                    if trial[node] >= _cpu(p):
                        trial[node] -= _cpu(p)
                        placed.append((p, node))
                        break
            already = len(members) - len(waiting)
            if already + len(placed) < need:
                self.explanations[(ns, name)] = f"minCount {need}: at most {len(placed)} pods fit"
                continue
            if self.broken and gang is not None:
                placed = placed[:1]
            for p, node in placed:
                await self.cluster.bind(ns, p["metadata"]["name"], node)
                free[node] -= _cpu(p)
                bound += 1
        return bound
