"""CompositePodGroup trees (the ``CompositePodGroup`` gate): the root of a hierarchy is the
queued entity; its children are PodGroups and CompositePodGroups that name it in
``spec.parentCompositePodGroupName`` (same namespace). Built from the cache on demand.

Runtime layout rules as kube-scheduler checks them: no cycle, depth at most 4
(``WorkloadMaxTreeDepth``); a child whose parent does not exist yet waits for it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

import attrs

from workloadbuilder.api import CompositePodGroup
from workloadbuilder.scheduler._cache import Cache, GroupInfo, GroupKey, PodInfo

__all__ = ["MAX_TREE_DEPTH", "RootRef", "TreeNode", "build_tree", "find_root"]

MAX_TREE_DEPTH = 4

NodeKind = Literal["PodGroup", "CompositePodGroup"]


@attrs.frozen
class RootRef:
    """Where a group's hierarchy is rooted: ``kind``/``name``, or why it cannot be known yet
    (``waiting``: a parent does not exist yet) or at all (``invalid``)."""

    kind: NodeKind
    namespace: str
    name: str
    waiting: str = ""
    invalid: str = ""


@attrs.define(eq=False)
class TreeNode:
    """One level of a tree: a leaf PodGroup (``group``) or a CompositePodGroup (``cpg``)."""

    kind: NodeKind
    namespace: str
    name: str
    group: GroupInfo | None = None
    cpg: CompositePodGroup | None = None
    children: list[TreeNode] = attrs.field(factory=list)
    depth: int = 1

    @property
    def key(self) -> GroupKey:
        """``(namespace, name)``."""
        return (self.namespace, self.name)

    @property
    def is_gang(self) -> bool:
        """Gang policy (``gang.minCount`` / ``gang.minGroupCount``)."""
        if self.group is not None:
            return self.group.is_gang
        return self.cpg is not None and self.cpg.spec.scheduling_policy.gang is not None

    @property
    def min_count(self) -> int:
        """minCount of a leaf; ``minGroupCount`` (1 for basic) of a composite."""
        if self.group is not None:
            return self.group.min_count
        gang = self.cpg.spec.scheduling_policy.gang if self.cpg is not None else None
        return int(gang.min_group_count) if gang is not None else 1

    @property
    def topology_key(self) -> str | None:
        """``schedulingConstraints.topology[0].key`` of this level."""
        if self.group is not None:
            pg = self.group.pod_group
            c = pg.spec.scheduling_constraints if pg is not None else None
            return c.topology[0].key if c is not None and c.topology else None
        cc = self.cpg.spec.scheduling_constraints if self.cpg is not None else None
        return cc.topology[0].key if cc is not None and cc.topology else None

    def leaves(self) -> Iterator[TreeNode]:
        """Every leaf PodGroup below (or at) this level, in order."""
        if self.kind == "PodGroup":
            yield self
        for c in self.children:
            yield from c.leaves()

    def composites(self) -> Iterator[TreeNode]:
        """Every CompositePodGroup below (or at) this level, in order."""
        if self.kind == "CompositePodGroup":
            yield self
        for c in self.children:
            yield from c.composites()

    def members(self, cache: Cache) -> Iterator[PodInfo]:
        """Every known pod of the tree's leaves."""
        for leaf in self.leaves():
            if leaf.group is not None:
                yield from cache.members(leaf.group)


def _parent_of_group(g: GroupInfo) -> str | None:
    pg = g.pod_group
    return (pg.spec.parent_composite_pod_group_name or None) if pg is not None else None


def find_root(cache: Cache, namespace: str, kind: NodeKind, name: str) -> RootRef:
    """Walk ``parentCompositePodGroupName`` up from a group to the root of its hierarchy."""
    seen: list[str] = []
    if kind == "PodGroup":
        g = cache.groups.get((namespace, name))
        parent = _parent_of_group(g) if g is not None else None
        if parent is None:
            return RootRef("PodGroup", namespace, name)
        seen.append(name)
        current = parent
    else:
        current = name
    depth = len(seen)
    while True:
        depth += 1
        if current in seen:
            return RootRef(
                "CompositePodGroup",
                namespace,
                current,
                invalid="composite pod group hierarchy has a cycle: "
                + " -> ".join([*seen, current]),
            )
        cpg = cache.composite_groups.get((namespace, current))
        if cpg is None:
            return RootRef(
                "CompositePodGroup",
                namespace,
                current,
                waiting=f'waiting for composite pod group "{current}" to appear',
            )
        seen.append(current)
        parent = cpg.spec.parent_composite_pod_group_name
        if not parent:
            if depth > MAX_TREE_DEPTH:
                return RootRef(
                    "CompositePodGroup",
                    namespace,
                    current,
                    invalid=(
                        f"composite pod group hierarchy is deeper than {MAX_TREE_DEPTH} levels"
                    ),
                )
            return RootRef("CompositePodGroup", namespace, current)
        current = parent


def build_tree(cache: Cache, namespace: str, root: str) -> TreeNode | str:
    """The tree under the CompositePodGroup ``root`` (children by name), or why it is invalid
    (deeper than 4 levels, a cycle)."""
    cpg = cache.composite_groups.get((namespace, root))
    if cpg is None:
        return f'composite pod group "{root}" does not exist'
    kids: dict[str, list[tuple[NodeKind, str]]] = {}
    for (ns, name), c in cache.composite_groups.items():
        parent = c.spec.parent_composite_pod_group_name
        if ns == namespace and parent:
            kids.setdefault(parent, []).append(("CompositePodGroup", name))
    for (ns, name), g in cache.groups.items():
        parent = _parent_of_group(g)
        if ns == namespace and parent:
            kids.setdefault(parent, []).append(("PodGroup", name))

    def node(kind: NodeKind, name: str, depth: int, path: tuple[str, ...]) -> TreeNode | str:
        if depth > MAX_TREE_DEPTH:
            return f"composite pod group hierarchy is deeper than {MAX_TREE_DEPTH} levels"
        if kind == "PodGroup":
            return TreeNode(
                "PodGroup", namespace, name, group=cache.groups[(namespace, name)], depth=depth
            )
        if name in path:
            return f"composite pod group hierarchy has a cycle at {name!r}"
        n = TreeNode(
            "CompositePodGroup",
            namespace,
            name,
            cpg=cache.composite_groups[(namespace, name)],
            depth=depth,
        )
        for k, child in sorted(kids.get(name, ()), key=lambda c: c[1]):
            sub = node(k, child, depth + 1, (*path, name))
            if isinstance(sub, str):
                return sub
            n.children.append(sub)
        return n

    return node("CompositePodGroup", root, 1, ())
