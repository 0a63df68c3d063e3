"""The pod-group scheduling algorithm (``podGroupSchedulingDefaultAlgorithm`` and the
placement loop around it), on one :class:`~workloadbuilder.scheduler._snapshot.Snapshot`.

Pods are evaluated in the given (deterministic) order. Each pod runs the Filter and Score
plugins over the placement's nodes and, when a node fits, is assumed in the snapshot so the
next pods see it. Pods with equal requirements share one evaluation: the filter verdicts and
scores of a signature are computed once for all nodes (vectorised) and then only the row of
the node that just received a pod is refreshed. PlacementFeasible (GangScheduling) runs
before and after every pod and aborts as soon as ``minCount`` can no longer be reached; a
signature that found no node stops counting as "remaining" (nodes only fill up in a cycle).
"""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt

from workloadbuilder.resources import PODS, format_quantity
from workloadbuilder.scheduler._cache import GroupInfo, NodeTable, PodInfo
from workloadbuilder.scheduler._framework import Diagnosis, Framework
from workloadbuilder.scheduler._interface import (
    Code,
    Placement,
    PlacementSet,
    ReservePlugin,
    Rows,
    Status,
)
from workloadbuilder.scheduler._resources import PodRequirements
from workloadbuilder.scheduler._snapshot import Snapshot

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
    #: the topology domain the pods were placed in (``(key, value)`` pairs)
    domain: tuple[tuple[str, str], ...] = ()
    #: what Reserve plugins reserved for the assignments (see ``Framework.run_commit``)
    reservations: tuple[Any, ...] = ()


class _Eval:
    """Filter verdicts and scores of one signature over all node rows."""

    __slots__ = ("fw", "gang", "mask", "req", "score", "snap", "static", "vec")

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
        #: the usage-independent part of each evaluated row's score (NaN: not evaluated)
        self.static: npt.NDArray[np.float64] = np.full(table.capacity, np.nan)
        rows = np.flatnonzero(mask)
        if rows.size:
            rows = rows[fw.run_usage_filters(req, vec, table, rows)]
            if rows.size:
                static, usage = fw.run_score_parts(req, vec, table, rows, gang)
                self.static[rows] = static
                self.score[rows] = static + usage

    def best(self) -> int:
        """The best row, or -1 when no node fits (lowest row wins ties: deterministic)."""
        row = int(self.score.argmax())
        return row if self.score[row] > _NEG else -1

    def ranked(self) -> Rows:
        """Every fitting row, best first (lowest row on ties, as :meth:`best`)."""
        rows = np.flatnonzero(self.score > _NEG)
        order = np.lexsort((rows, -self.score[rows]))
        out: Rows = rows[order]
        return out

    def refresh(self, row: int) -> None:
        """Re-evaluate one row after its usage changed."""
        if not self.mask[row]:
            return
        table = self.snap.table
        if not self.fw.run_usage_filters_one(self.req, self.vec, table, row):
            self.score[row] = _NEG
            return
        static = self.static[row]
        if static != static:  # NaN: not evaluated at first, so every plugin scores it now
            self.score[row] = self.fw.run_score_one(self.req, self.vec, table, row, self.gang)
            return
        usage = self.fw.run_usage_score_one(self.req, self.vec, table, row, self.gang)
        self.score[row] = static + usage


def _pod_scored(
    fw: Framework,
    snap: Snapshot,
    pod: PodInfo,
    score: npt.NDArray[np.float64],
    masks: Sequence[npt.NDArray[np.bool_]] = (),
) -> npt.NDArray[np.float64] | None:
    """``score`` plus the per-pod Score plugins' (InterPodAffinity, PodTopologySpread), over
    the rows that pass every filter and ``masks`` (the Reserve plugins' feasible rows; the
    other rows are -inf); None when no per-pod plugin has anything to score for ``pod``."""
    scorers = fw.pod_scorers(pod, snap)
    if not scorers:
        return None
    ok = score > _NEG
    for m in masks:
        ok &= m[: ok.size]
    rows = np.flatnonzero(ok)
    out = np.full(score.size, _NEG)
    if rows.size:
        out[rows] = score[rows] + fw.run_pod_score(scorers, pod, snap, rows)
    return out


def _best(score: npt.NDArray[np.float64]) -> int:
    """The best row of ``score``, or -1 (lowest row wins ties)."""
    row = int(score.argmax())
    return row if score[row] > _NEG else -1


def _ranked(score: npt.NDArray[np.float64]) -> Rows:
    """Every row of ``score`` above -inf, best first (lowest row on ties)."""
    rows = np.flatnonzero(score > _NEG)
    out: Rows = rows[np.lexsort((rows, -score[rows]))]
    return out


def _reserve(
    fw: Framework,
    snap: Snapshot,
    pod: PodInfo,
    ev: _Eval,
    dead: set[tuple[Any, int]],
    plugins: list[ReservePlugin],
) -> tuple[int, Diagnosis | None]:
    """The best row where every Reserve plugin (DRA) can serve ``pod``, reserved there;
    ``(-1, diagnosis)`` when there is none. ``dead`` remembers rows that failed for a shape
    key (pods of equal claims fail on the same nodes; devices only get taken in a cycle).
    ``plugins``: the Reserve plugins that apply to ``pod``."""
    st = fw.run_reserve_pre_filter(plugins, pod, snap)
    if not st.ok:
        total = snap.table.count
        return -1, Diagnosis(
            total=total, reasons=(), plugins=frozenset({st.plugin}), pre_filter=st.message
        )
    shape = fw.run_reserve_shape_key(plugins, pod, snap)
    masks, unchecked = fw.run_reserve_masks(plugins, pod, snap)
    scored = _pod_scored(fw, snap, pod, ev.score, masks) if fw.pod_scoring else None
    score = ev.score if scored is None else scored
    candidates: Iterable[int] = []
    if not masks:
        first = _best(score)
        if first >= 0:
            candidates = [first]
    else:  # the best row the masks allow (no ranking of every row; lowest row on ties)
        allowed = masks[0]
        for m in masks[1:]:
            allowed = allowed & m
        masked = np.where(allowed[: score.size], score, _NEG)
        first = int(masked.argmax())
        if masked[first] > _NEG:
            candidates = [first]
        else:
            first = -1 if _best(score) < 0 else first
    tried_all = False
    while True:
        for row in candidates:
            if shape is not None and (shape, row) in dead:
                continue
            if fw.run_reserve_pod(plugins, pod, snap, row, unchecked):  # (rows the masks allow)
                return row, None
            if shape is not None:
                dead.add((shape, row))
        if tried_all or first < 0:
            break
        ranked = _ranked(score)
        for m in masks:
            ranked = ranked[m[ranked]]
        # lazily: the first rows usually pass (the masks already hold the plugins' verdicts)
        candidates = (r for r in ranked.tolist() if r != first)
        tried_all = True
    return -1, fw.run_reserve_diagnosis(plugins, pod, snap, ev.ranked())


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
    #: the pods placed (keys), for the device explanation
    placed_keys: set[tuple[str, str]] = attrs.field(factory=set)


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
    placed_keys: set[tuple[str, str]] = set()
    dead: set[tuple[Any, int]] = set()
    extra: dict[PodRequirements, Diagnosis] = {}  # PreFilter verdicts of single pods
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
        if req.claims and not fw.reserving(pod):  # never bind as if the claims were not there
            failed[req] = Diagnosis(
                total=table.count,
                reasons=(),
                pre_filter="the pod has resourceClaims but the DynamicResources plugin is "
                "disabled in this profile",
            )
            if first_failed is None:
                first_failed = req
            remaining -= left[req]
            status = fw.run_placement_feasible(min_count, scheduled + placed, remaining)
            if status.code is Code.UNSCHEDULABLE:
                break
            continue
        reserving = fw.reserving(pod) if row >= 0 and fw.reserve else None
        if row >= 0 and not reserving and fw.pod_scoring:
            # no Reserve plugin applies, but a per-pod score may (the pods around it)
            scored = _pod_scored(fw, snap, pod, ev.score)
            if scored is not None:
                row = _best(scored)
        if reserving:
            row, why = _reserve(fw, snap, pod, ev, dead, reserving)
            if row < 0 and why is not None:
                if why.pre_filter:  # this pod's own claims: other pods of the shape may fit
                    extra.setdefault(req, why)
                    if first_failed is None:
                        first_failed = req
                    status = fw.run_placement_feasible(min_count, scheduled + placed, remaining)
                    if status.code is Code.UNSCHEDULABLE:
                        break
                    continue
                base = fw.run_filter_diagnosis(req, table, placement)
                diag = attrs.evolve(
                    base, reasons=base.reasons + why.reasons, plugins=base.plugins | why.plugins
                )
                if first_failed is None:
                    first_failed = req
                if not _shares_failure(reserving, snap, pod):
                    # what failed this pod depends on the pod itself (its labels, its pod
                    # constraints): the other pods of its signature are still tried
                    extra.setdefault(req, diag)
                    status = fw.run_placement_feasible(min_count, scheduled + placed, remaining)
                    if status.code is Code.UNSCHEDULABLE:
                        break
                    continue
                failed[req] = diag
                remaining -= left[req]
                status = fw.run_placement_feasible(min_count, scheduled + placed, remaining)
                if status.code is Code.UNSCHEDULABLE:
                    break
                continue
        if row < 0:
            failed[req] = fw.run_filter_diagnosis(req, table, placement)
            if first_failed is None:
                first_failed = req
            remaining -= left[req]
        else:
            snap.assume(pod, row, vecs[req])
            placed += 1
            placed_keys.add(pod.key)
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
    for req, diag in extra.items():
        failed.setdefault(req, diag)
    return _Attempt(status, placed, first_failed, failed, remaining, nodes, placed_keys)


def _shares_failure(reserving: Sequence[ReservePlugin], snap: Snapshot, pod: PodInfo) -> bool:
    """Whether the other pods of ``pod``'s signature fail where it failed: every Reserve
    plugin that checked it gives a shape key (DRA: equal claims fail on the same nodes; the
    pod-constraint plugins give none)."""
    return all(r.shape_key(pod, snap) is not None for r in reserving)


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
    devices: Sequence[str] = (),
) -> str:
    # greedy placement could at best also fit the pods it did not get to evaluate
    fit = scheduled + placed + attempt.remaining
    parts: list[str] = []
    if gang:
        head = f"minCount {min_count}: at most {fit} {'pod fits' if fit == 1 else 'pods fit'}"
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
    parts.extend(devices)
    return "; ".join(parts)


def _device_lines(
    fw: Framework, snap: Snapshot, pods: Sequence[PodInfo], attempt: _Attempt
) -> list[str]:
    """The Reserve plugins' aggregate over the gang (DRA: per device class, how many pods
    can get their devices, and the selectors no device matches on some nodes), when a pod
    shape failed for them."""
    names = fw.reserve_names
    if not any(d.plugins & names and d.reasons for d in attempt.diagnoses.values()):
        return []
    return fw.run_explain_group(pods, attempt.placed_keys, snap)


def _tie(seed: int, group: GroupInfo | None, placement: Placement) -> int:
    """Deterministic (seeded) tie-break rank of a placement for a group: lower wins."""
    who = f"{group.namespace}/{group.name}" if group is not None else ""
    return zlib.crc32(f"{seed}\x00{who}\x00{placement.name}".encode())


def _fit_counts(
    fw: Framework, table: NodeTable, req: PodRequirements, vec: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """Per node row: how many pods of ``req`` fit on it now, by resources alone (0 where a
    node-only filter rejects it) — an upper bound, exact for NodeResourcesFit."""
    static = fw.run_static_filters(req, table)
    cols = np.flatnonzero(vec)
    out = np.zeros(table.capacity, dtype=np.int64)
    rows = np.flatnonzero(static)
    if rows.size == 0:
        return out
    if cols.size == 0:
        out[rows] = 1 << 30
        return out
    free = table.alloc[np.ix_(rows, cols)] - table.used[np.ix_(rows, cols)]
    n = np.min(free // vec[cols], axis=1)
    out[rows] = np.maximum(n, 0)
    return out


def _noun(key: str) -> str:
    return key.rsplit("/", 1)[-1] or key


def _shape(req: PodRequirements, table: NodeTable, rows: Rows, need: int, homogeneous: bool) -> str:
    """`` x nvidia.com/gpu 8``: the requests that limit the domain (all when none alone)."""
    if not homogeneous:
        return ""
    items = [(name, amount) for name, amount in req.requests if name != PODS and amount > 0]
    limiting = []
    for name, amount in items:
        col = table.columns.get(name)
        if col is None:
            limiting.append((name, amount))
            continue
        free = table.alloc[rows, col] - table.used[rows, col]
        if int(np.maximum(free // amount, 0).sum()) < need:
            limiting.append((name, amount))
    shown = limiting or items
    if not shown:
        return ""
    return " x " + ", ".join(f"{name} {format_quantity(amount, name)}" for name, amount in shown)


def _topology_explanation(
    placement: Placement,
    table: NodeTable,
    pods: Sequence[PodInfo],
    *,
    need: int,
    placed: int,
    only: bool,
    inner: str,
) -> str:
    key, value = placement.domain[0]
    noun = _noun(key)
    sigs = {p.req for p in pods}
    rows = placement.rows if placement.rows is not None else table.present_rows()
    shape = _shape(next(iter(sigs)), table, rows, need, len(sigs) == 1)
    word = "pod" if need == 1 else "pods"
    if only:
        head = (
            f"{key}: the group is held in {noun} {value} (where its pods are), which fits "
            f"{placed} of {need} {word}{shape}"
        )
    else:
        head = f"{key}: no {noun} fits {need} {word}{shape}; best is {value} with {placed}"
    return f"{head}; {inner}" if inner else head


def run_pod_group_cycle(
    fw: Framework,
    snap: Snapshot,
    pods: Sequence[PodInfo],
    *,
    min_count: int,
    scheduled: int,
    gang: bool,
    placements: Sequence[Placement] | None = None,
    group: GroupInfo | None = None,
) -> CycleResult:
    """Try to place ``pods`` (deterministic order) so that ``scheduled`` plus the placed pods
    reach ``min_count``. With several PlacementGenerate candidates (topology domains), each
    candidate that can hold the quorum is simulated, best PlacementScore bound first, until
    no remaining candidate can beat the best feasible one; ties go to a seeded hash of the
    group and the placement. Returns the assignments; the snapshot is reverted (the caller
    assumes the pods in the cache)."""
    if placements is None:
        placements = [Placement()]
    mark = snap.mark()
    if len(placements) == 1 and not placements[0].domain:
        return _single(fw, snap, pods, mark, min_count, scheduled, gang, placements[0])
    table = snap.table
    for req in {p.req for p in pods}:
        table.vector(req.requests)  # every column first: vectors of one width
    sigs = Counter(p.req for p in pods)
    vecs = {req: table.vector(req.requests) for req in sigs}
    fits = {req: _fit_counts(fw, table, req, vecs[req]) for req in sigs}
    need = max(min_count - scheduled, 1) if gang else 1
    batch = PlacementSet(
        placements,
        [pl.rows if pl.rows is not None else _placement_rows(pl, table) for pl in placements],
    )
    upper = [(vecs[r], np.minimum(batch.sums(fits[r]), n)) for r, n in sigs.items()]
    caps_arr = np.zeros(len(placements), dtype=np.int64)
    for _, n_arr in upper:
        caps_arr += n_arr
    caps = [int(c) for c in caps_arr]
    bounds = fw.run_placement_score_bounds(
        _scored(group), batch, upper, snap, default=caps_arr.astype(np.float64)
    )
    candidates: list[tuple[float, int, int, Placement]] = [
        (
            np.inf if bounds is None else float(bounds[i]),
            _tie(fw.placement_seed, group, pl),
            i,
            pl,
        )
        for i, pl in enumerate(placements)
        if caps[i] >= need
    ]
    candidates.sort(key=lambda c: (-c[0], c[1]))
    nominated = _nominated_placement(placements, pods, table)
    if nominated is not None:  # upstream: the one placement holding the nominated nodes first
        candidates.sort(key=lambda c: c[3] is not nominated)
    best: tuple[float, int, Placement] | None = None
    failed: dict[int, _Attempt] = {}
    for bound, tb, i, pl in candidates:
        if best is not None and (best[0], -best[1]) >= (bound, -tb):
            break
        att = _attempt(
            fw, snap, pods, min_count=min_count, scheduled=scheduled, gang=gang, placement=pl
        )
        if att.status.ok:
            assigned = snap.assumed_since(mark)
            score = fw.run_placement_score(
                _scored(group), pl, assigned, snap, default=float(att.placed)
            )
            if best is None or (score, -tb) > (best[0], -best[1]):
                best = (score, tb, pl)
            snap.revert(mark)
            if pl is nominated:
                break
        else:
            failed[i] = att
            snap.revert(mark)
    if best is not None:
        res = _single(fw, snap, pods, mark, min_count, scheduled, gang, best[2])
        if res.status.ok:
            return res
    # nothing fits: report the domain that holds the most
    order = sorted(
        range(len(placements)),
        key=lambda i: (-caps[i], _tie(fw.placement_seed, group, placements[i])),
    )
    top = order[0]
    found = failed.get(top)
    if found is None:
        found = _attempt(
            fw,
            snap,
            pods,
            min_count=min_count,
            scheduled=scheduled,
            gang=gang,
            placement=placements[top],
        )
        snap.revert(mark)
    att = found
    inner = _explain(
        gang=gang,
        min_count=min_count,
        scheduled=scheduled,
        placed=att.placed,
        attempt=att,
        devices=_device_lines(fw, snap, pods, att),
    )
    pl = placements[top]
    if pl.domain:
        explanation = _topology_explanation(
            pl, table, pods, need=need, placed=att.placed, only=scheduled > 0, inner=inner
        )
    else:
        explanation = inner
    message = att.status.message if not att.status.ok else "no placement fits"
    return CycleResult(
        status=Status(code=Code.UNSCHEDULABLE, message=message),
        unplaced=tuple(pods),
        explanation=explanation,
        diagnoses=att.diagnoses,
    )


def _scored(group: GroupInfo | None) -> GroupInfo:
    """The group scored (single pods are scored as a group of their own)."""
    if group is None:
        return GroupInfo(namespace="", name="")
    return group


def _placement_rows(pl: Placement, table: NodeTable) -> Rows:
    if pl.mask is not None:
        return np.flatnonzero(pl.mask[: table.capacity] & table.present)
    return table.present_rows()


def _nominated_placement(
    placements: Sequence[Placement], pods: Sequence[PodInfo], table: NodeTable
) -> Placement | None:
    rows = [table.index.get(p.nominated_node) for p in pods if p.nominated_node]
    known = [r for r in rows if r is not None]
    if not known:
        return None
    holding = [pl for pl in placements if pl.mask is None or all(pl.mask[r] for r in known)]
    return holding[0] if len(holding) == 1 else None


def _single(
    fw: Framework,
    snap: Snapshot,
    pods: Sequence[PodInfo],
    mark: int,
    min_count: int,
    scheduled: int,
    gang: bool,
    placement: Placement,
) -> CycleResult:
    att = _attempt(
        fw, snap, pods, min_count=min_count, scheduled=scheduled, gang=gang, placement=placement
    )
    if att.status.ok:
        assigned = snap.assumed_since(mark)
        reservations = tuple(snap.records_since(mark))
        snap.revert(mark)
        names = tuple((p, snap.node_name(row)) for p, row in assigned)
        placed_keys = {p.key for p, _ in assigned}
        return CycleResult(
            status=att.status,
            assignments=names,
            unplaced=tuple(p for p in pods if p.key not in placed_keys),
            diagnoses=att.diagnoses,
            placement=placement.name,
            domain=placement.domain,
            reservations=reservations,
        )
    snap.revert(mark)
    return CycleResult(
        status=Status(code=Code.UNSCHEDULABLE, message=att.status.message),
        unplaced=tuple(pods),
        explanation=_explain(
            gang=gang,
            min_count=min_count,
            scheduled=scheduled,
            placed=att.placed,
            attempt=att,
            devices=_device_lines(fw, snap, pods, att),
        ),
        diagnoses=att.diagnoses,
    )
