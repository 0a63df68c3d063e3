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
from scheduler._framework import Code, Framework, Placement, Status
from scheduler._resources import PodRequirements
from scheduler._snapshot import Snapshot

__all__ = ["CycleResult", "Diagnosis", "run_pod_group_cycle"]

_NEG = -np.inf


@attrs.frozen(kw_only=True)
class Diagnosis:
    """Why a pod shape found no node: ``(short, long, count)`` reasons over ``total`` nodes."""

    total: int
    reasons: tuple[tuple[str, str, int], ...]

    def pod_message(self) -> str:
        """Upstream's FailedScheduling wording: ``0/40 nodes are available: 3 ...``."""
        if not self.reasons:
            return f"0/{self.total} nodes are available."
        parts = sorted(f"{n} {short}" for short, _, n in self.reasons)
        return f"0/{self.total} nodes are available: {', '.join(parts)}."

    def node_summary(self) -> str:
        """``37 of 40 nodes lack nvidia.com/gpu: 8; 3 of 40 nodes are unschedulable``."""
        if self.total == 0:
            return "the cluster has no nodes"
        if not self.reasons:
            return f"none of {self.total} nodes fits"
        ordered = sorted(self.reasons, key=lambda r: (-r[2], r[1]))
        return "; ".join(f"{n} of {self.total} nodes {long}" for _, long, n in ordered)


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

    __slots__ = ("fw", "gang", "mask", "req", "score", "snap", "vec", "weights")

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
        mask = snap.static.mask(fw, req, snap.table)
        if placement.mask is not None:
            mask = mask & placement.mask[: mask.size]
        self.mask = mask
        table = snap.table
        self.score: npt.NDArray[np.float64] = np.full(table.capacity, _NEG)
        rows = np.flatnonzero(mask)
        if rows.size:
            ok = np.ones(rows.size, dtype=bool)
            for f in fw.usage_filters:
                ok &= f.filter(req, vec, table, rows)
            rows = rows[ok]
            if rows.size:
                self.score[rows] = self._score(rows)

    def _score(self, rows: npt.NDArray[np.intp]) -> npt.NDArray[np.float64]:
        total = np.zeros(rows.size, dtype=np.float64)
        for s in self.fw.scores:
            total += s.weight * s.score(self.req, self.vec, self.snap.table, rows, self.gang)
        return total

    def best(self) -> int:
        """The best row, or -1 when no node fits (lowest row wins ties: deterministic)."""
        row = int(np.argmax(self.score))
        return row if self.score[row] > _NEG else -1

    def refresh(self, row: int) -> None:
        """Re-evaluate one row after its usage changed."""
        if not self.mask[row]:
            return
        rows = np.array([row], dtype=np.intp)
        for f in self.fw.usage_filters:
            if not f.filter(self.req, self.vec, self.snap.table, rows)[0]:
                self.score[row] = _NEG
                return
        self.score[row] = self._score(rows)[0]


def diagnose(
    fw: Framework, snap: Snapshot, req: PodRequirements, placement: Placement
) -> Diagnosis:
    """Count, per filter, the nodes of the placement that reject ``req`` (first static
    filter that fails; every insufficient resource)."""
    table = snap.table
    candidates = table.present.copy()
    if placement.mask is not None:
        candidates &= placement.mask[: candidates.size]
    rows = np.flatnonzero(candidates)
    total = int(rows.size)
    vec = table.vector(req.requests)
    reasons: list[tuple[str, str, int]] = []
    for f in fw.static_filters:
        if rows.size == 0:
            break
        ok = f.filter(req, vec, table, rows)
        if not ok.all():
            reasons.extend(r for r in f.diagnose(req, vec, table, rows[~ok]) if r[2])
        rows = rows[ok]
    for f in fw.usage_filters:
        if rows.size == 0:
            break
        reasons.extend(r for r in f.diagnose(req, vec, table, rows) if r[2])
    return Diagnosis(total=total, reasons=tuple(reasons))


@attrs.define
class _Attempt:
    status: Status
    placed: int
    first_failed: PodRequirements | None
    diagnoses: dict[PodRequirements, Diagnosis]
    #: pods not evaluated when the cycle aborted (of shapes that had not failed yet)
    remaining: int = 0


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
            failed[req] = diagnose(fw, snap, req, placement)
            if first_failed is None:
                first_failed = req
            remaining -= left[req]
        else:
            snap.assume(pod, row, vecs[req])
            placed += 1
            for other in evals.values():
                other.refresh(row)
        status = fw.run_placement_feasible(min_count, scheduled + placed, remaining)
        if status.code is Code.UNSCHEDULABLE:
            break
    if placed == 0 and status.ok:
        status = Status(code=Code.UNSCHEDULABLE, message="no pod could be placed")
    elif status.code is Code.WAIT:
        status = Status(code=Code.UNSCHEDULABLE, message=status.message)
    return _Attempt(status, placed, first_failed, failed, remaining)


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
    if attempt.first_failed is not None:
        parts.append(attempt.diagnoses[attempt.first_failed].node_summary())
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
                score = (
                    sum(
                        p.weight * p.score_placement(placement, assigned, snap)
                        for p in fw.placement_score
                    )
                    if fw.placement_score
                    else float(att.placed)
                )
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
