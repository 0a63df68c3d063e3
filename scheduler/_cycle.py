"""The pod-group scheduling algorithm (``podGroupSchedulingDefaultAlgorithm`` and the
placement loop around it), on one :class:`~scheduler._snapshot.Snapshot`.

Pods are evaluated in the given (deterministic) order. Each pod runs the Filter and Score
plugins over the placement's nodes and, when a node fits, is assumed in the snapshot so the
next pods see it. Pods with equal requirements share one evaluation: the filter verdicts and
scores of a signature are computed once for all nodes (vectorised) and then only the row of
the node that just received a pod is refreshed. PlacementFeasible (GangScheduling) runs
before and after every pod and aborts as soon as ``minCount`` can no longer be reached; a
signature that found no node stops counting as "remaining" (nodes only fill up in a cycle).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import attrs
import numpy as np
import numpy.typing as npt

from scheduler._cache import PodInfo
from scheduler._framework import Diagnosis, Framework
from scheduler._interface import Code, Placement, Status
from scheduler._resources import PodRequirements
from scheduler._snapshot import Snapshot

__all__ = ["CycleResult", "run_pod_group_cycle"]

_NEG = -np.inf


@attrs.frozen(kw_only=True)
class CycleResult:
    """Outcome of one pod-group cycle (the snapshot is already reverted)."""

    status: Status
    assignments: tuple[tuple[PodInfo, str], ...] = ()
    unplaced: tuple[PodInfo, ...] = ()
    explanation: str = ""
    diagnoses: dict[PodRequirements, Diagnosis] = attrs.field(factory=dict)
    placement: str = ""


class _Eval:
    """Filter verdicts and scores of one signature over all node rows."""

    __slots__ = ("fw", "gang", "mask", "req", "score", "snap", "vec")

    def __init__(
        self,
        fw: Framework,
        snap: Snapshot,
        req: PodRequirements,
        vec: npt.NDArray[np.int64],
        placement: Placement,
        gang: bool,
    ) -> None:
        self.fw, self.snap, self.req, self.vec, self.gang = fw, snap, req, vec, gang
        table = snap.table
        mask = fw.run_static_filters(req, table)
        if placement.mask is not None:
            mask = mask & placement.mask[: mask.size]
        self.mask = mask
        self.score: npt.NDArray[np.float64] = np.full(table.capacity, _NEG)
        rows = np.flatnonzero(mask)
        if rows.size:
            rows = rows[fw.run_usage_filters(req, vec, table, rows)]
            if rows.size:
                self.score[rows] = fw.run_score(req, vec, table, rows, gang)

    def best(self) -> int:
        """The best row, or -1 when no node fits (lowest row wins ties: deterministic)."""
        row = int(np.argmax(self.score))
        return row if self.score[row] > _NEG else -1

    def refresh(self, row: int) -> None:
        """Re-evaluate one row after its usage changed."""
        if not self.mask[row]:
            return
        table = self.snap.table
        if not self.fw.run_usage_filters_one(self.req, self.vec, table, row):
            self.score[row] = _NEG
            return
        rows = np.array([row], dtype=np.intp)
        self.score[row] = self.fw.run_score(self.req, self.vec, table, rows, self.gang)[0]


@attrs.define
class _Attempt:
    status: Status
    placed: int
    first_failed: PodRequirements | None
    diagnoses: dict[PodRequirements, Diagnosis]
    #: pods not evaluated when the cycle aborted (of shapes that had not failed yet)
    remaining: int = 0
    #: the node each placed pod went to, in placement order (for the explanation)
    nodes: list[str] = attrs.field(factory=list)


def _attempt(
    fw: Framework,
    snap: Snapshot,
    pods: Sequence[PodInfo],
    *,
    min_count: int,
    scheduled: int,
    gang: bool,
    placement: Placement,
) -> _Attempt:
    table = snap.table
    # create any new resource columns first so every vector has the final width
    for req in {p.req for p in pods}:
        table.vector(req.requests)
    vecs = {req: table.vector(req.requests) for req in {p.req for p in pods}}
    evals: dict[PodRequirements, _Eval] = {}
    failed: dict[PodRequirements, Diagnosis] = {}
    first_failed: PodRequirements | None = None
    left = Counter(p.req for p in pods)  # not yet evaluated, per signature
    remaining = len(pods)  # not yet evaluated and not of a failed signature
    placed = 0
    nodes: list[str] = []
    status = fw.run_placement_feasible(min_count, scheduled, remaining)
    if status.code is Code.UNSCHEDULABLE:
        return _Attempt(status, 0, None, failed, remaining)
    for pod in pods:
        req = pod.req
        left[req] -= 1
        if req in failed:
            continue
        remaining -= 1
        ev = evals.get(req)
        if ev is None:
            ev = evals[req] = _Eval(fw, snap, req, vecs[req], placement, gang)
        row = ev.best()
        if row < 0:
            failed[req] = fw.run_filter_diagnosis(req, table, placement)
            if first_failed is None:
                first_failed = req
            remaining -= left[req]
        else:
            snap.assume(pod, row, vecs[req])
            placed += 1
            nodes.append(snap.node_name(row))
            for other in evals.values():
                other.refresh(row)
        status = fw.run_placement_feasible(min_count, scheduled + placed, remaining)
        if status.code is Code.UNSCHEDULABLE:
            break
    if placed == 0 and status.ok:
        status = Status(code=Code.UNSCHEDULABLE, message="no pod could be placed")
    elif status.code is Code.WAIT:
        status = Status(code=Code.UNSCHEDULABLE, message=status.message)
    return _Attempt(status, placed, first_failed, failed, remaining, nodes)


def _where_placed(nodes: Sequence[str], limit: int = 4) -> str:
    """``3 fit on a, b, c`` / ``9 fit on 6 nodes: a, b, c, d and 2 more``: where the pods
    that fit went (so the node summary that follows reads as "what blocks the rest", not
    "nothing fits")."""
    distinct = sorted(set(nodes))
    shown = ", ".join(distinct[:limit])
    if len(distinct) > limit:
        shown += f" and {len(distinct) - limit} more"
    count = len(nodes)
    verb = "fits" if count == 1 else "fit"
    on = f"{len(distinct)} nodes: {shown}" if len(distinct) > limit else shown
    return f"{count} {verb} on {on}"


def _rest_blocked(placed: int, summary: str) -> str:
    """The node summary of the first pod shape that found no node; after some pods were
    placed it describes the nodes as those pods left them."""
    if placed == 0:
        return summary
    return f"the rest fit nowhere once those are placed: {summary}"


def _explain(
    *,
    gang: bool,
    min_count: int,
    scheduled: int,
    placed: int,
    attempt: _Attempt,
) -> str:
    # greedy placement could at best also fit the pods it did not get to evaluate
    fit = scheduled + placed + attempt.remaining
    parts: list[str] = []
    if gang:
        head = f"minCount {min_count}: at most {fit} pods fit"
        if scheduled:
            head += f" ({scheduled} already scheduled)"
        if fit < min_count:
            head += f", {min_count - fit} short"
        parts.append(head)
    else:
        parts.append("no pod fits")
    if placed and attempt.nodes:
        parts.append(_where_placed(attempt.nodes))
    if attempt.first_failed is not None:
        summary = attempt.diagnoses[attempt.first_failed].node_summary()
        parts.append(_rest_blocked(placed, summary))
        others = len(attempt.diagnoses) - 1
        if others > 0:
            parts.append(f"{others} other pod shape(s) fit nowhere either")
    return "; ".join(parts)


def run_pod_group_cycle(
    fw: Framework,
    snap: Snapshot,
    pods: Sequence[PodInfo],
    *,
    min_count: int,
    scheduled: int,
    gang: bool,
    placements: Sequence[Placement] | None = None,
) -> CycleResult:
    """Try to place ``pods`` (deterministic order) so that ``scheduled`` plus the placed pods
    reach ``min_count``. PlacementGenerate candidates are simulated one by one; the feasible
    ones are ranked by PlacementScore and the best is re-applied. Returns the assignments;
    the snapshot is reverted (the caller assumes the pods in the cache)."""
    if placements is None:
        placements = [Placement()]
    mark = snap.mark()
    best: tuple[float, int, Placement] | None = None
    last: _Attempt | None = None
    if len(placements) > 1:
        for i, placement in enumerate(placements):
            att = _attempt(
                fw,
                snap,
                pods,
                min_count=min_count,
                scheduled=scheduled,
                gang=gang,
                placement=placement,
            )
            assigned = snap.assumed_since(mark)
            if att.status.ok:
                score = fw.run_placement_score(placement, assigned, snap, default=float(att.placed))
                if best is None or score > best[0]:
                    best = (score, i, placement)
            elif last is None or att.placed > last.placed:
                last = att
            snap.revert(mark)
        chosen = [best[2]] if best is not None else []
    else:
        chosen = list(placements)
    for placement in chosen:
        att = _attempt(
            fw,
            snap,
            pods,
            min_count=min_count,
            scheduled=scheduled,
            gang=gang,
            placement=placement,
        )
        if att.status.ok:
            assigned = snap.assumed_since(mark)
            snap.revert(mark)
            names = tuple((p, snap.node_name(row)) for p, row in assigned)
            placed_keys = {p.key for p, _ in assigned}
            return CycleResult(
                status=att.status,
                assignments=names,
                unplaced=tuple(p for p in pods if p.key not in placed_keys),
                diagnoses=att.diagnoses,
                placement=placement.name,
            )
        last = att
        snap.revert(mark)
    assert last is not None
    return CycleResult(
        status=Status(code=Code.UNSCHEDULABLE, message=last.status.message),
        unplaced=tuple(pods),
        explanation=_explain(
            gang=gang, min_count=min_count, scheduled=scheduled, placed=last.placed, attempt=last
        ),
        diagnoses=last.diagnoses,
    )
