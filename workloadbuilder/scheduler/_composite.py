"""Placing a CompositePodGroup tree in one cycle (upstream's
``compositePodGroupSchedulingPlacementAlgorithm``), on one snapshot, top-down:

* a composite's own topology constraint picks a domain (each candidate domain inside the
  parent's is tried; the one where most pods land wins, seeded tie-break);
* each child is placed inside its parent's domain with its own constraint, in name order;
  a child that succeeds stays assumed in the snapshot (later siblings see it), a child that
  fails is reverted;
* PlacementFeasible counts successful children against ``minGroupCount`` (1 for basic) and
  aborts early; a composite that misses it reverts its whole subtree.

Beyond upstream (which is greedy, without backtracking): when the greedy pass at a
composite misses ``minGroupCount``, a bounded depth-first search tries the children's other
placements (every candidate domain of each leaf child, or leaving it out) within a budget of
leaf attempts and a deadline, and takes the first combination that reaches the quorum. It
runs only when greedy failed, so it is never worse than greedy. ``mode="greedy"`` turns it
off (configured per profile; see ``TopologyPlacementGenerator``'s args).
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Sequence

import attrs
import numpy as np

from workloadbuilder.scheduler._cache import GroupKey, PodInfo
from workloadbuilder.scheduler._cycle import run_pod_group_cycle
from workloadbuilder.scheduler._framework import Diagnosis, Framework
from workloadbuilder.scheduler._interface import Code, Placement, Status
from workloadbuilder.scheduler._resources import PodRequirements
from workloadbuilder.scheduler._snapshot import Snapshot
from workloadbuilder.scheduler._tree import TreeNode

__all__ = ["SearchConfig", "TreeResult", "place_tree"]


@attrs.frozen(kw_only=True)
class SearchConfig:
    """The composite search: ``bounded`` (greedy, then backtracking when greedy misses the
    quorum) or ``greedy`` (upstream); ``budget`` leaf attempts and ``deadline`` seconds per
    cycle."""

    mode: str = "bounded"
    budget: int = 512
    deadline: float = 1.0


@attrs.define
class TreeResult:
    """Outcome of a tree cycle (the snapshot is reverted)."""

    ok: bool
    assignments: list[tuple[PodInfo, str]] = attrs.field(factory=list)
    #: ``(kind, name)`` of every level that succeeded
    succeeded: set[tuple[str, str]] = attrs.field(factory=set)
    #: ``(kind, name)`` -> why that level did not fit
    explanations: dict[tuple[str, str], str] = attrs.field(factory=dict)
    diagnoses: dict[PodRequirements, Diagnosis] = attrs.field(factory=dict)
    #: ``(kind, name)`` -> the domain it was placed in
    domains: dict[tuple[str, str], tuple[tuple[str, str], ...]] = attrs.field(factory=dict)
    #: the bounded search found what greedy could not
    searched: bool = False


def _within(placements: Sequence[Placement], parent: Placement) -> list[Placement]:
    """The child's candidates restricted to the parent's domain (empty ones dropped)."""
    if parent.mask is None:
        return list(placements)
    out: list[Placement] = []
    for p in placements:
        if p.mask is None:
            out.append(parent)
            continue
        n = min(p.mask.size, parent.mask.size)
        mask = np.zeros(parent.mask.size, dtype=bool)
        mask[:n] = p.mask[:n] & parent.mask[:n]
        rows = np.flatnonzero(mask)
        if rows.size:
            out.append(
                Placement(name=p.name, mask=mask, rows=rows, domain=(*parent.domain, *p.domain))
            )
    return out


_Ref = tuple[str, str]
_Mark = tuple[int, int, frozenset[_Ref], dict[_Ref, tuple[tuple[str, str], ...]]]


class _Ctx:
    def __init__(
        self,
        fw: Framework,
        snap: Snapshot,
        pending: dict[GroupKey, list[PodInfo]],
        scheduled: dict[GroupKey, int],
        search: SearchConfig,
    ) -> None:
        self.fw, self.snap, self.pending, self.scheduled = fw, snap, pending, scheduled
        self.search = search
        self.assignments: list[tuple[PodInfo, str]] = []
        self.succeeded: set[tuple[str, str]] = set()
        self.explanations: dict[tuple[str, str], str] = {}
        self.diagnoses: dict[PodRequirements, Diagnosis] = {}
        self.domains: dict[tuple[str, str], tuple[tuple[str, str], ...]] = {}
        self.attempts = 0
        self.deadline = 0.0
        self.searched = False

    def mark(self) -> _Mark:
        return (
            self.snap.mark(),
            len(self.assignments),
            frozenset(self.succeeded),
            dict(self.domains),
        )

    def revert(self, m: _Mark) -> None:
        self.snap.revert(m[0])
        del self.assignments[m[1] :]
        self.succeeded = set(m[2])
        self.domains = dict(m[3])


def _tie(seed: int, node: TreeNode, placement: Placement) -> int:
    return zlib.crc32(f"{seed}\x00{node.namespace}/{node.name}\x00{placement.name}".encode())


def _leaf(ctx: _Ctx, leaf: TreeNode, parent: Placement, only: Placement | None = None) -> bool:
    assert leaf.group is not None
    ref = ("PodGroup", leaf.name)
    pods = ctx.pending.get(leaf.key, [])
    sched = ctx.scheduled.get(leaf.key, 0)
    if not pods:
        ok = sched > 0 and sched >= leaf.min_count
        if ok:
            ctx.succeeded.add(ref)
        else:
            ctx.explanations[ref] = "no pods to schedule"
        return ok
    if only is not None:
        placements: list[Placement] | Status = [only]
    else:
        placements = ctx.fw.run_placement_generate(leaf.group, ctx.snap)
        if not isinstance(placements, Status):
            placements = _within(placements, parent)
            if not placements:
                key = leaf.topology_key or "topology"
                placements = Status(
                    code=Code.UNSCHEDULABLE,
                    message=f"{key}: no domain inside {_domain_text(parent)}",
                )
    if isinstance(placements, Status):
        ctx.explanations[ref] = placements.message
        return False
    ctx.attempts += 1
    res = run_pod_group_cycle(
        ctx.fw,
        ctx.snap,
        pods,
        min_count=leaf.min_count,
        scheduled=sched,
        gang=leaf.is_gang,
        placements=placements,
        group=leaf.group,
    )
    ctx.diagnoses.update(res.diagnoses)
    if not res.status.ok:
        ctx.explanations[ref] = res.explanation or res.status.message
        return False
    table = ctx.snap.table
    for p, node in res.assignments:
        ctx.snap.assume(p, table.index[node], table.vector(p.req.requests))
        ctx.assignments.append((p, node))
    ctx.succeeded.add(ref)
    ctx.domains[ref] = res.domain
    ctx.explanations.pop(ref, None)
    return True


def _domain_text(p: Placement) -> str:
    if not p.domain:
        return "the cluster"
    return ", ".join(f"{k}={v}" for k, v in p.domain)


def _place(ctx: _Ctx, node: TreeNode, parent: Placement) -> bool:
    if node.kind == "PodGroup":
        return _leaf(ctx, node, parent)
    return _composite(ctx, node, parent)


def _composite(ctx: _Ctx, node: TreeNode, parent: Placement) -> bool:
    ref = ("CompositePodGroup", node.name)
    key = node.topology_key
    if key is None:
        candidates = [parent]
    else:
        got = ctx.fw.run_placement_generate_for(
            key, node.name, list(_subtree_members(ctx, node)), ctx.snap
        )
        if isinstance(got, Status):
            ctx.explanations[ref] = got.message
            return False
        candidates = _within(got, parent)
        if not candidates:
            ctx.explanations[ref] = f"{key}: no domain inside {_domain_text(parent)}"
            return False
    if len(candidates) == 1:
        return _children(ctx, node, candidates[0])
    best: tuple[int, int, Placement] | None = None
    best_fail: tuple[int, str] | None = None
    for pl in candidates:
        m = ctx.mark()
        before = len(ctx.assignments)
        ok = _children(ctx, node, pl)
        placed = len(ctx.assignments) - before
        if ok:
            score = (placed, -_tie(ctx.fw.placement_seed, node, pl))
            if best is None or score > (best[0], best[1]):
                best = (score[0], score[1], pl)
        else:
            kids = sum(1 for c in node.children if (c.kind, c.name) in ctx.succeeded)
            if best_fail is None or kids > best_fail[0]:
                best_fail = (kids, pl.domain[-1][1] if pl.domain else pl.name)
        ctx.revert(m)
    if best is not None:
        ok = _children(ctx, node, best[2])
        assert ok, "re-applying the chosen composite placement failed"
        return True
    kids, where = best_fail if best_fail is not None else (0, "")
    assert key is not None
    noun = key.rsplit("/", 1)[-1]
    ctx.explanations[ref] = (
        f"{key}: no {noun} fits {node.min_count} child groups; best is {where} with {kids}; "
        + ctx.explanations.get(ref, "")
    ).rstrip("; ")
    return False


def _subtree_members(ctx: _Ctx, node: TreeNode) -> list[PodInfo]:
    out: list[PodInfo] = []
    for leaf in node.leaves():
        if leaf.group is not None:
            out.extend(ctx.snap.group_members(leaf.group))
    return out


def _greedy(ctx: _Ctx, node: TreeNode, pl: Placement) -> int:
    ok_count = 0
    remaining = len(node.children)
    st = ctx.fw.run_placement_feasible(node.min_count, 0, remaining)
    if st.code is Code.UNSCHEDULABLE:
        return 0
    for child in node.children:
        remaining -= 1
        m = ctx.mark()
        if _place(ctx, child, pl):
            ok_count += 1
        else:
            ctx.revert(m)
        st = ctx.fw.run_placement_feasible(node.min_count, ok_count, remaining)
        if st.code is Code.UNSCHEDULABLE:
            break
    return ok_count


def _options(ctx: _Ctx, child: TreeNode, pl: Placement) -> list[Placement | None]:
    """A leaf child's candidate domains inside ``pl`` (None: as greedy would place it)."""
    if child.kind != "PodGroup" or child.group is None:
        return [None]
    got = ctx.fw.run_placement_generate(child.group, ctx.snap)
    if isinstance(got, Status):
        return []
    inside = _within(got, pl)
    return [None] if len(inside) <= 1 else list(inside)


def _search(ctx: _Ctx, node: TreeNode, pl: Placement) -> bool:
    children = node.children
    need = node.min_count

    def out_of_budget() -> bool:
        return ctx.attempts >= ctx.search.budget or time.perf_counter() > ctx.deadline

    def dfs(i: int, ok_count: int) -> bool:
        if ok_count >= need:
            for child in children[i:]:  # the rest as greedy would: they can only add
                m = ctx.mark()
                if not _place(ctx, child, pl):
                    ctx.revert(m)
            return True
        if ok_count + (len(children) - i) < need or out_of_budget():
            return False
        child = children[i]
        for option in _options(ctx, child, pl):
            if out_of_budget():
                return False
            m = ctx.mark()
            placed = (
                _place(ctx, child, pl) if option is None else _leaf(ctx, child, pl, only=option)
            )
            if placed and dfs(i + 1, ok_count + 1):
                return True
            ctx.revert(m)
        return dfs(i + 1, ok_count)  # leave this child out

    return dfs(0, 0)


def _children(ctx: _Ctx, node: TreeNode, pl: Placement) -> bool:
    ref = ("CompositePodGroup", node.name)
    m = ctx.mark()
    ok_count = _greedy(ctx, node, pl)
    if ok_count < node.min_count and ctx.search.mode == "bounded" and len(node.children) > 1:
        greedy_expl = dict(ctx.explanations)
        ctx.revert(m)
        if _search(ctx, node, pl):
            ctx.searched = True
            ok_count = sum(1 for c in node.children if (c.kind, c.name) in ctx.succeeded)
        else:
            ctx.revert(m)
            ctx.explanations = greedy_expl
            ok_count = _greedy(ctx, node, pl)  # report (and leave) what greedy did
    if ok_count >= node.min_count:
        ctx.succeeded.add(ref)
        ctx.domains[ref] = pl.domain
        ctx.explanations.pop(ref, None)
        return True
    failed = [c for c in node.children if (c.kind, c.name) not in ctx.succeeded]
    why = "; ".join(
        f"{c.name}: {ctx.explanations.get((c.kind, c.name), 'not placed')}" for c in failed
    )
    ctx.explanations[ref] = (
        f"minGroupCount {node.min_count}: {ok_count} of {len(node.children)} child groups fit"
        + (f" in {_domain_text(pl)}" if pl.domain else "")
        + (f"; {why}" if why else "")
    )
    ctx.revert(m)
    return False


def place_tree(
    fw: Framework,
    snap: Snapshot,
    tree: TreeNode,
    pending: dict[GroupKey, list[PodInfo]],
    scheduled: dict[GroupKey, int],
    *,
    search: SearchConfig | None = None,
    root: Placement | None = None,
) -> TreeResult:
    """Place the tree rooted at ``tree`` (a CompositePodGroup): every pending pod of its
    leaves (``pending``, each list in the cycle's order), counting the pods already
    ``scheduled`` per leaf. Success needs the root's quorum and at least one new pod. The
    snapshot is reverted; the caller assumes ``assignments`` in the cache. ``root``: the
    nodes the whole tree must stay in (preemption tries one domain at a time)."""
    ctx = _Ctx(fw, snap, pending, scheduled, search or SearchConfig())
    ctx.deadline = time.perf_counter() + ctx.search.deadline
    mark = snap.mark()
    ok = _place(ctx, tree, root or Placement())
    ok = ok and bool(ctx.assignments)
    if ok:
        result = TreeResult(
            ok=True,
            assignments=list(ctx.assignments),
            succeeded=set(ctx.succeeded),
            explanations=dict(ctx.explanations),
            diagnoses=ctx.diagnoses,
            domains=dict(ctx.domains),
            searched=ctx.searched,
        )
    else:
        ref = ("CompositePodGroup", tree.name)
        ctx.explanations.setdefault(ref, "no new pod could be placed")
        result = TreeResult(ok=False, explanations=dict(ctx.explanations), diagnoses=ctx.diagnoses)
    snap.revert(mark)
    return result
