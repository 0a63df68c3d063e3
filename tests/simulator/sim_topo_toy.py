"""A stand-in scheduler that honours topology constraints and CompositePodGroup trees, to
test the simulator's own reporting (domains, composite records, the composite and topology
invariants) independently of the real Scheduler's progress on them.

``TopoToyScheduler`` places a root (a PodGroup without a parent, or a CompositePodGroup tree)
all or nothing, first-fit by requests (and nodeSelector): a group with a topology key tries
its key's domains in name order; a tree tries its own key's domains and places each child
inside, with the child's own key; the tree succeeds when ``minGroupCount`` children (1 for
basic) placed.
Broken modes: ``spread=True`` ignores topology keys (a gang lands across domains);
``one_child=True`` binds only the first child of every tree."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workloadbuilder.api import CompositePodGroup, PodGroup
from workloadbuilder.cluster import Cluster
from workloadbuilder.simulator import parse_quantity


def _req(pod: Mapping[str, Any]) -> dict[str, float]:
    total: dict[str, float] = {}
    for c in pod["spec"].get("containers") or ():
        for r, q in (((c.get("resources") or {}).get("requests")) or {}).items():
            total[r] = total.get(r, 0.0) + parse_quantity(q)
    return total


def _fits(free: Mapping[str, float], req: Mapping[str, float]) -> bool:
    return all(free.get(r, 0.0) >= q for r, q in req.items())


def _take(free: dict[str, float], req: Mapping[str, float]) -> None:
    for r, q in req.items():
        free[r] = free.get(r, 0.0) - q


def _key(obj: PodGroup | CompositePodGroup) -> str | None:
    c = obj.spec.scheduling_constraints
    return c.topology[0].key if c is not None and c.topology else None


class TopoToyScheduler:
    """See the module docstring."""

    def __init__(self, cluster: Cluster, *, spread: bool = False, one_child: bool = False) -> None:
        self.cluster = cluster
        self.spread = spread
        self.one_child = one_child
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
        self.nodes = {
            n["metadata"]["name"]: n
            for n in (await self.cluster.list("Node")).items
            if isinstance(n, dict)
        }
        pods = [p for p in (await self.cluster.list("Pod")).items if isinstance(p, dict)]
        self.free: dict[str, dict[str, float]] = {
            name: {r: parse_quantity(q) for r, q in n["status"]["allocatable"].items()}
            for name, n in self.nodes.items()
        }
        for p in pods:
            node = p["spec"].get("nodeName")
            if node and p.get("status", {}).get("phase") not in ("Succeeded", "Failed"):
                _take(self.free[node], _req(p))
        self.members: dict[str, list[dict[str, Any]]] = {}
        for p in pods:
            group = (p["spec"].get("schedulingGroup") or {}).get("podGroupName")
            if group:
                self.members.setdefault(group, []).append(p)
        groups = [g for g in (await self.cluster.list("PodGroup")).items if isinstance(g, PodGroup)]
        comps = [
            c
            for c in (await self.cluster.list("CompositePodGroup")).items
            if isinstance(c, CompositePodGroup)
        ]
        self.children: dict[str, list[PodGroup | CompositePodGroup]] = {}
        for g in [*groups, *comps]:
            parent = g.spec.parent_composite_pod_group_name
            if parent:
                self.children.setdefault(parent, []).append(g)
        bound = 0
        roots: list[PodGroup | CompositePodGroup] = [
            g for g in [*comps, *groups] if not g.spec.parent_composite_pod_group_name
        ]
        for root in roots:
            placed = self._place(root, set(self.nodes))
            if placed is None:
                continue
            for pod, node in placed:
                ns = pod["metadata"]["namespace"]
                await self.cluster.bind(ns, pod["metadata"]["name"], node)
                bound += 1
        return bound

    def _domains(self, key: str | None, allowed: set[str]) -> list[set[str]]:
        if key is None or self.spread:
            return [allowed]
        values: dict[str, set[str]] = {}
        for name in allowed:
            v = self.nodes[name]["metadata"].get("labels", {}).get(key)
            if v is not None:
                values.setdefault(v, set()).add(name)
        return [values[v] for v in sorted(values)]

    def _place(
        self, g: PodGroup | CompositePodGroup, allowed: set[str]
    ) -> list[tuple[dict[str, Any], str]] | None:
        for domain in self._domains(_key(g), allowed):
            saved = {n: dict(f) for n, f in self.free.items()}
            result = self._place_in(g, domain)
            if result is not None:
                return result
            self.free = saved
        return None

    def _place_in(
        self, g: PodGroup | CompositePodGroup, domain: set[str]
    ) -> list[tuple[dict[str, Any], str]] | None:
        if isinstance(g, CompositePodGroup):
            gang = g.spec.scheduling_policy.gang
            need = gang.min_group_count if gang is not None else 1
            placed: list[tuple[dict[str, Any], str]] = []
            done = 0
            for child in self.children.get(g.metadata.name or "", []):
                got = self._place(child, domain)
                if got:
                    placed += got
                    done += 1
                    if self.one_child:
                        return placed
            return placed if done >= need else None
        members = self.members.get(g.metadata.name or "", [])
        waiting = [p for p in members if not p["spec"].get("nodeName")]
        gang = g.spec.scheduling_policy.gang
        need = gang.min_count if gang is not None else 1
        if not waiting or len(members) < need:
            return None
        out: list[tuple[dict[str, Any], str]] = []
        for p in waiting:
            selector = p["spec"].get("nodeSelector") or {}
            for node in sorted(domain):
                labels = self.nodes[node]["metadata"].get("labels", {})
                if any(labels.get(k) != v for k, v in selector.items()):
                    continue
                if _fits(self.free[node], _req(p)):
                    _take(self.free[node], _req(p))
                    out.append((p, node))
                    break
        already = len(members) - len(waiting)
        if already + len(out) < need:
            return None
        return out
