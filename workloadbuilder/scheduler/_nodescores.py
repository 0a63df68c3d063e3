"""Node-level Score plugins as kube-scheduler v1.37.2 scores: NodeResourcesBalancedAllocation
and ImageLocality, and the normalisation NodeAffinity and TaintToleration share
(:class:`NormalizeFactors`, upstream's ``DefaultNormalizeScore``).

Scores are integers 0..100 as upstream computes them (the same integer truncations), held in
float arrays because the framework adds them up weighted. A Score plugin sees the feasible
rows of one signature at once (``score``) and then, in a gang cycle, one row again each time
a pod of the cycle was placed on it (``score_one``): the pods placed earlier in the cycle
count in the node's usage (BalancedAllocation), as in upstream's assumed pods.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from workloadbuilder.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS
from workloadbuilder.scheduler._interface import Rows
from workloadbuilder.scheduler._resources import PodRequirements

if TYPE_CHECKING:
    from workloadbuilder.scheduler._cache import NodeTable

__all__ = [
    "MAX_NODE_SCORE",
    "ImageLocality",
    "NodeResourcesBalancedAllocation",
    "NormalizeFactors",
    "balanced_score",
    "image_priority",
]

#: upstream's ``framework.MaxNodeScore``
MAX_NODE_SCORE = 100
_MB = 1024 * 1024
#: ImageLocality's thresholds: below 23 MiB of (spread-scaled) image bytes a node scores 0;
#: at 1000 MiB per container image it scores 100
MIN_IMAGE_THRESHOLD = 23 * _MB
MAX_CONTAINER_THRESHOLD = 1000 * _MB
_NATIVE = (CPU, MEMORY, EPHEMERAL_STORAGE)
_BOUND = 10_000  # signatures remembered per plugin (bounded in long-running schedulers)


class NormalizeFactors:
    """Upstream's ``DefaultNormalizeScore`` (``100 * raw // max``; ``100 -`` that when
    reversed; all 0, or all 100 reversed, when the maximum is 0), over the rows given to a
    plugin's ``score`` -- the feasible nodes, as upstream normalises over the nodes that
    passed Filter -- and the maximum of each signature's last evaluation, for ``score_one``.

    The choice for ``score_one``: the cycle refreshes one row of an evaluation after a pod
    was placed on it, and the refreshed score must stay comparable with the other rows of
    that evaluation, so it is normalised by the factor the evaluation used (the raw scores
    NodeAffinity and TaintToleration normalise depend on the node object only, which does
    not change within a cycle, so the refreshed value equals the evaluated one). A
    signature never evaluated is normalised over that row alone."""

    __slots__ = ("_max",)

    def __init__(self) -> None:
        self._max: dict[PodRequirements, int] = {}

    def normalize(
        self, req: PodRequirements, raw: npt.NDArray[np.int64], *, reverse: bool
    ) -> npt.NDArray[np.float64]:
        """``raw`` (one per feasible row) normalised over its maximum, remembered for
        ``req``."""
        top = int(raw.max()) if raw.size else 0
        if len(self._max) > _BOUND:
            self._max.clear()
        self._max[req] = top
        if top == 0:
            return np.full(raw.size, float(MAX_NODE_SCORE) if reverse else 0.0)
        out = (MAX_NODE_SCORE * raw) // top
        if reverse:
            out = MAX_NODE_SCORE - out
        return out.astype(np.float64)

    def normalize_one(self, req: PodRequirements, raw: int, *, reverse: bool) -> float:
        """One raw score normalised by the maximum of ``req``'s last evaluation."""
        if raw == 0:  # the common case, whatever the maximum: 0, or 100 reversed
            return float(MAX_NODE_SCORE) if reverse else 0.0
        top = self._max.get(req, raw)
        top = raw if raw > top else top
        if top == 0:
            return float(MAX_NODE_SCORE) if reverse else 0.0
        out = (MAX_NODE_SCORE * raw) // top
        return float(MAX_NODE_SCORE - out if reverse else out)


# ---- NodeResourcesBalancedAllocation -------------------------------------------------------


def _is_scalar(name: str) -> bool:
    """Upstream's ``IsScalarResourceName``: extended and prefixed native resources (a name
    with a ``/``), hugepages and attachable volumes."""
    return "/" in name or name.startswith(("hugepages-", "attachable-volumes-"))


def _std(fractions: Sequence[float]) -> float:
    n = len(fractions)
    if n == 2:
        return abs((fractions[0] - fractions[1]) / 2)
    if n > 2:
        total = 0.0
        for f in fractions:  # in order, as upstream (no compensated summation)
            total = total + f
        mean = total / n
        acc = 0.0
        for f in fractions:
            acc = acc + (f - mean) * (f - mean)
        return math.sqrt(acc / n)
    return 0.0


def _fraction_score(requested: Sequence[int], allocatable: Sequence[int]) -> int:
    fractions = [
        min(float(r) / float(a), 1.0) for r, a in zip(requested, allocatable, strict=True) if a
    ]
    return int((1 - _std(fractions)) * float(MAX_NODE_SCORE))


def balanced_score(
    requested: Sequence[int], allocated: Sequence[int], allocatable: Sequence[int]
) -> int:
    """Upstream's balanced score of one node: how balanced the requested fractions are with
    the pod (``requested``: the node's requests plus the pod's) against without it
    (``allocated``), per resource over ``allocatable`` (0: the resource is left out). Each
    balance is ``(1 - std) * 100`` (50..100); the score is ``50 + (50 + with - without) // 2``,
    so a pod that improves the node's balance scores towards 100, one that spoils it towards
    50."""
    with_pod = _fraction_score(requested, allocatable)
    without = _fraction_score(allocated, allocatable)
    return MAX_NODE_SCORE // 2 + (MAX_NODE_SCORE // 2 + with_pod - without) // 2


def _vector_balance(
    used: list[npt.NDArray[np.float64]], alloc: list[npt.NDArray[np.float64]], size: int
) -> npt.NDArray[np.int64]:
    """:func:`_fraction_score` for many rows: the same operations in the same order on
    arrays (a left-out resource adds 0.0, which changes no sum)."""
    n = np.zeros(size, dtype=np.int64)
    total = np.zeros(size, dtype=np.float64)
    first = np.zeros(size, dtype=np.float64)
    second = np.zeros(size, dtype=np.float64)
    fracs: list[tuple[npt.NDArray[np.bool_], npt.NDArray[np.float64]]] = []
    for u, a in zip(used, alloc, strict=True):
        inc = a > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            f = np.where(inc, np.minimum(u / np.where(inc, a, 1.0), 1.0), 0.0)
        first = np.where(inc & (n == 0), f, first)
        second = np.where(inc & (n == 1), f, second)
        total = total + f
        n = n + inc
        fracs.append((inc, f))
    std = np.where(n == 2, np.abs((first - second) / 2), 0.0)
    many = n > 2
    if many.any():
        cnt = np.where(many, n, 1).astype(np.float64)
        mean = total / cnt
        acc = np.zeros(size, dtype=np.float64)
        for inc, f in fracs:
            d = f - mean
            acc = acc + np.where(inc, d * d, 0.0)
        std = np.where(many, np.sqrt(acc / cnt), std)
    return np.floor((1 - std) * float(MAX_NODE_SCORE)).astype(np.int64)


class NodeResourcesBalancedAllocation:
    """Favours nodes whose requested fractions of ``resources`` (default cpu and memory)
    stay balanced once the pod is added (:func:`balanced_score`, 50..100). As upstream: the
    node's requests as they are (no non-zero defaults), the pod's own requests, a resource
    the node does not have (allocatable 0) left out, an extended resource the pod does not
    request left out, ``pods`` never counted; a pod requesting none of ``resources`` is not
    scored (0 on every node: upstream skips the plugin for best-effort pods). In a gang
    cycle the pods placed earlier count in the node's requests."""

    name = "NodeResourcesBalancedAllocation"

    def __init__(
        self, *, resources: Sequence[tuple[str, int]] = ((CPU, 1), (MEMORY, 1)), weight: int = 1
    ) -> None:
        if not resources:
            raise ValueError("NodeResourcesBalancedAllocation needs at least one resource")
        self.resources = tuple(resources)
        self.weight = weight
        self._plans: dict[tuple[PodRequirements, int], tuple[tuple[int, int], ...] | None] = {}
        self._last: tuple[Any, tuple[tuple[int, int], ...] | None] = (None, None)

    def _plan(self, req: PodRequirements, table: NodeTable) -> tuple[tuple[int, int], ...] | None:
        """``(column, pod amount)`` per resource that counts (a column of -1: the node
        side is 0 everywhere), or None for a pod requesting none of ``resources``."""
        key = (req, len(table.column_names))
        if key == self._last[0]:  # the signature of the cycle's evaluation, again
            return self._last[1]
        if key in self._plans:
            self._last = (key, self._plans[key])
            return self._last[1]
        amounts = dict(req.requests)
        plan: list[tuple[int, int]] = []
        best_effort = True
        for name, _ in self.resources:
            amount = 0 if name == PODS else int(amounts.get(name, 0))
            best_effort = best_effort and amount == 0
            if name not in _NATIVE and (not _is_scalar(name) or amount == 0):
                continue
            plan.append((table.columns.get(name, -1), amount))
        out = None if best_effort else tuple(plan)
        if len(self._plans) > _BOUND:
            self._plans.clear()
        self._plans[key] = out
        self._last = (key, out)
        return out

    def score(
        self,
        req: PodRequirements,
        vec: npt.NDArray[np.int64],
        table: NodeTable,
        rows: Rows,
        gang: bool,
    ) -> npt.NDArray[np.float64]:
        """50..100 per row (0 for a pod requesting none of ``resources``)."""
        plan = self._plan(req, table)
        if plan is None:
            return np.zeros(rows.size, dtype=np.float64)
        half = MAX_NODE_SCORE // 2
        if len(plan) == 2 and plan[0][0] >= 0 and plan[1][0] >= 0:
            fast = self._score_two(plan, table, rows)
            if fast is not None:
                return fast
        zero = np.zeros(rows.size, dtype=np.float64)
        alloc: list[npt.NDArray[np.float64]] = []
        with_pod: list[npt.NDArray[np.float64]] = []
        without: list[npt.NDArray[np.float64]] = []
        for col, amount in plan:
            if col < 0:
                alloc.append(zero)
                with_pod.append(zero)
                without.append(zero)
                continue
            used = table.used[rows, col]
            alloc.append(table.alloc[rows, col].astype(np.float64))
            without.append(used.astype(np.float64))
            with_pod.append((used + amount).astype(np.float64))
        a = _vector_balance(with_pod, alloc, rows.size)
        b = _vector_balance(without, alloc, rows.size)
        out: npt.NDArray[np.float64] = (half + (half + a - b) // 2).astype(np.float64)
        return out

    @staticmethod
    def _score_two(
        plan: tuple[tuple[int, int], ...], table: NodeTable, rows: Rows
    ) -> npt.NDArray[np.float64] | None:
        """:meth:`score` for two resources every row has (the default, cpu and memory):
        the std of two fractions is half their difference. None when a row lacks one."""
        (c0, p0), (c1, p1) = plan
        a0 = table.alloc[rows, c0].astype(np.float64)
        a1 = table.alloc[rows, c1].astype(np.float64)
        if not (a0.all() and a1.all()):
            return None
        u0, u1 = table.used[rows, c0], table.used[rows, c1]
        top = float(MAX_NODE_SCORE)
        w = np.abs((np.minimum((u0 + p0) / a0, 1.0) - np.minimum((u1 + p1) / a1, 1.0)) / 2)
        n = np.abs((np.minimum(u0 / a0, 1.0) - np.minimum(u1 / a1, 1.0)) / 2)
        with_pod = np.floor((1 - w) * top)
        without = np.floor((1 - n) * top)
        half = MAX_NODE_SCORE // 2
        out: npt.NDArray[np.float64] = half + np.floor_divide(half + with_pod - without, 2)
        return out

    def score_one(
        self,
        req: PodRequirements,
        vec: npt.NDArray[np.int64],
        table: NodeTable,
        row: int,
        gang: bool,
    ) -> float:
        """:meth:`score` for one row (the row a pod of the cycle was just placed on), in
        plain Python numbers: the same value."""
        plan = self._plan(req, table)
        if plan is None:
            return 0.0
        used_m, alloc_m = table.used, table.alloc
        if len(plan) == 2 and plan[0][0] >= 0 and plan[1][0] >= 0:
            # the default (cpu and memory), once per pod placed in a gang: the same
            # arithmetic as balanced_score, without the lists
            (c0, p0), (c1, p1) = plan
            alloc_row = alloc_m[row].tolist()
            a0, a1 = float(alloc_row[c0]), float(alloc_row[c1])
            if a0 and a1:
                used_row = used_m[row].tolist()
                u0, u1 = used_row[c0], used_row[c1]
                # min(x, 1.0) spelled out: this runs once per pod a gang cycle places
                w0, w1 = float(u0 + p0) / a0, float(u1 + p1) / a1
                n0, n1 = float(u0) / a0, float(u1) / a1
                w0, w1 = (w0 if w0 < 1.0 else 1.0), (w1 if w1 < 1.0 else 1.0)
                n0, n1 = (n0 if n0 < 1.0 else 1.0), (n1 if n1 < 1.0 else 1.0)
                with_pod = int((1 - abs((w0 - w1) / 2)) * 100.0)
                without = int((1 - abs((n0 - n1) / 2)) * 100.0)
                return float(50 + (50 + with_pod - without) // 2)
        requested: list[int] = []
        allocated: list[int] = []
        allocatable: list[int] = []
        for col, amount in plan:
            if col < 0:
                requested.append(0)
                allocated.append(0)
                allocatable.append(0)
                continue
            used = used_m.item(row, col)
            allocatable.append(alloc_m.item(row, col))
            allocated.append(used)
            requested.append(used + amount)
        return float(balanced_score(requested, allocated, allocatable))


# ---- ImageLocality ------------------------------------------------------------------------


def image_priority(total: int, count: int) -> int:
    """Upstream's ``calculatePriority``: the spread-scaled bytes of the pod's images on a
    node (``total``) between 23 MiB and ``1000 MiB * count`` (``count``: the pod's init
    containers, containers and image volumes), linearly to 0..100."""
    ceiling = MAX_CONTAINER_THRESHOLD * count
    if ceiling <= MIN_IMAGE_THRESHOLD:
        return 0
    clipped = min(max(total, MIN_IMAGE_THRESHOLD), ceiling)
    return MAX_NODE_SCORE * (clipped - MIN_IMAGE_THRESHOLD) // (ceiling - MIN_IMAGE_THRESHOLD)


def scaled_image_bytes(size: int, nodes_with_image: int, nodes: int) -> int:
    """Upstream's ``scaledImageScore``: an image's size scaled by the share of the cluster's
    nodes that have it (an image on every node counts fully, on few nodes little: spreading
    pods to where a rare image happens to be is not worth it)."""
    spread = float(nodes_with_image) / float(nodes)
    return int(float(size) * spread)


class ImageLocality:
    """Favours nodes that already have the pod's images (node ``status.images``): per
    image of the pod's init containers, containers and image volumes (names normalised:
    ``:latest`` when untagged) that the node lists, its size scaled by the share of nodes
    listing it (:func:`scaled_image_bytes`, over every node of the cluster, as upstream),
    summed and mapped to 0..100 by :func:`image_priority`. Not normalised (upstream has no
    NormalizeScore for it)."""

    name = "ImageLocality"
    #: its score reads only the node object and the pod: a cycle does not recompute a row's
    #: score as it places pods there
    usage_independent = True

    def __init__(self, *, weight: int = 1) -> None:
        self.weight = weight
        #: image name -> its scaled bytes per row, for one (images version, node count,
        #: capacity) of the table: a cluster's nodes list the same images for many pods
        self._scaled: dict[str, npt.NDArray[np.int64]] = {}
        self._scaled_for: tuple[int, int, int] = (-1, -1, -1)

    def _image_bytes(self, name: str, table: NodeTable) -> npt.NDArray[np.int64] | None:
        key = (table.images_version, table.count, table.capacity)
        if key != self._scaled_for:
            self._scaled.clear()
            self._scaled_for = key
        out = self._scaled.get(name)
        if out is None:
            holders = table.image_rows.get(name)
            if not holders:
                return None
            out = np.zeros(table.capacity, dtype=np.int64)
            n, nodes = len(holders), table.count
            for r, size in holders.items():
                out[r] = scaled_image_bytes(size, n, nodes)
            if len(self._scaled) > _BOUND:
                self._scaled.clear()
            self._scaled[name] = out
        return out

    def _sums(self, req: PodRequirements, table: NodeTable) -> npt.NDArray[np.int64] | None:
        acc: npt.NDArray[np.int64] | None = None
        for name in req.images:
            scaled = self._image_bytes(name, table)
            if scaled is not None:
                acc = scaled.copy() if acc is None else acc + scaled
        return acc

    def score(
        self,
        req: PodRequirements,
        vec: npt.NDArray[np.int64],
        table: NodeTable,
        rows: Rows,
        gang: bool,
    ) -> npt.NDArray[np.float64]:
        """0..100 per row."""
        if not req.images or not table.image_rows:
            return np.zeros(rows.size, dtype=np.float64)
        acc = self._sums(req, table)
        if acc is None:
            return np.zeros(rows.size, dtype=np.float64)
        count = len(req.images)
        ceiling = MAX_CONTAINER_THRESHOLD * count
        if ceiling <= MIN_IMAGE_THRESHOLD:
            return np.zeros(rows.size, dtype=np.float64)
        clipped = np.clip(acc[rows], MIN_IMAGE_THRESHOLD, ceiling)
        out = (MAX_NODE_SCORE * (clipped - MIN_IMAGE_THRESHOLD)) // (ceiling - MIN_IMAGE_THRESHOLD)
        return out.astype(np.float64)

    def score_one(
        self,
        req: PodRequirements,
        vec: npt.NDArray[np.int64],
        table: NodeTable,
        row: int,
        gang: bool,
    ) -> float:
        """:meth:`score` for one row (images do not change within a cycle: the same
        value)."""
        if not req.images or not table.image_rows:
            return 0.0
        nodes = table.count
        total = 0
        for name in req.images:
            holders = table.image_rows.get(name)
            if holders and row in holders:
                total += scaled_image_bytes(holders[row], len(holders), nodes)
        return float(image_priority(total, len(req.images)))
