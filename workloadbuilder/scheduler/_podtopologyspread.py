"""PodTopologySpread: ``whenUnsatisfiable: DoNotSchedule`` topology spread constraints,
gang-aware (see :mod:`._podconstraints` for what the cycle's placed pods count for)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from workloadbuilder.scheduler._interface import (
    SUCCESS,
    ClusterEventWithHint,
    SharedLister,
    Status,
)
from workloadbuilder.scheduler._nodematch import node_matches_affinity, tolerates_all
from workloadbuilder.scheduler._podconstraints import (
    ASSIGNED,
    NODE_EVENTS,
    SPREAD_LABEL_REASON,
    SPREAD_REASON,
    Domains,
    Mask,
    MaskPlugin,
    matching,
)
from workloadbuilder.scheduler._podspec import SpreadConstraint
from workloadbuilder.scheduler._resources import PodRequirements
from workloadbuilder.scheduler._snapshot import Snapshot

if TYPE_CHECKING:
    from workloadbuilder.scheduler._cache import NodeTable, PodInfo

__all__ = ["PodTopologySpread"]


class PodTopologySpread(MaskPlugin):
    """``whenUnsatisfiable: DoNotSchedule`` topology spread constraints (kube-scheduler's
    PodTopologySpread Filter)."""

    name = "PodTopologySpread"

    def __init__(self) -> None:
        super().__init__()
        #: per node epoch and (constraints, signature): what does not change while the nodes
        #: do not (see :meth:`_static`)
        self._epoch: tuple[int, int, int] = (-1, -1, -1)
        self._statics: dict[Any, _SpreadStatic] = {}

    def events_to_register(self) -> list[ClusterEventWithHint]:
        """A pod is bound or leaves its node, or a node appears or changes labels."""
        return [ASSIGNED, NODE_EVENTS]

    def applies(self, pod: PodInfo) -> bool:
        """Pods with ``DoNotSchedule`` constraints."""
        c = pod.constraints
        return c is not None and any(s.hard for s in c.spread)

    def pre_filter_pod(self, pod: PodInfo, lister: SharedLister) -> Status:
        """Holds on every node."""
        return SUCCESS

    def _static(
        self, table: NodeTable, hard: tuple[SpreadConstraint, ...], req: PodRequirements
    ) -> _SpreadStatic:
        token = (id(table), table.epoch, table.capacity)
        if token != self._epoch:
            self._statics.clear()
            self._epoch = token
        got = self._statics.get((hard, req))
        if got is None:
            got = self._statics[(hard, req)] = _SpreadStatic(table, hard, req, self.domains)
        return got

    def _evaluate(
        self, pod: PodInfo, lister: SharedLister
    ) -> tuple[Mask, list[tuple[str, str, Mask]]]:
        assert pod.constraints is not None and isinstance(lister, Snapshot)
        table = lister.table
        hard = pod.constraints.hard_spread
        st = self._static(table, hard, pod.req)
        skewed = np.zeros(table.capacity, dtype=bool)
        details: list[str] = []
        ns = pod.namespace
        for i, c in enumerate(hard):
            ids, eligible, seen = st.ids[i], st.eligible[i], st.seen[i]
            per_domain = np.zeros(seen.size, dtype=np.int64)
            for p, row in matching(lister, c.selector, ns.__eq__):
                if eligible[row] and not p.deleting:
                    per_domain[ids[row]] += 1

            def add(
                state: list[int],
                p: PodInfo,
                row: int,
                c: SpreadConstraint = c,
                eligible: Mask = eligible,
                ids: npt.NDArray[np.int64] = ids,
            ) -> None:
                if eligible[row] and p.namespace == ns and c.selector.matches(p.labels):
                    state.append(int(ids[row]))

            for d in self.folds.get(("spread", c, ns, pod.req), lister, list, add):
                per_domain[d] += 1
            domains = st.domains[i]
            low = int(per_domain[seen].min()) if domains else 0
            if domains < c.min_domains:
                low = 0
            limit = c.max_skew + low - (1 if c.selector.matches(pod.labels) else 0)
            bad = (per_domain > limit)[ids] & st.keyed[i]
            if bad.any():
                details.append(f"{c.describe()} (domain minimum {low})")
                skewed |= bad
        skewed &= ~st.missing
        long_skew = "would exceed " + "; ".join(details) if details else "would exceed maxSkew"
        return ~(st.missing | skewed) & st.present, [
            (
                SPREAD_LABEL_REASON,
                "lack a topology key of the pod's spread constraints",
                st.missing,
            ),
            (SPREAD_REASON, long_skew, skewed),
        ]


class _SpreadStatic:
    """What a pod's spread constraints see of the nodes, for one node epoch: per constraint
    the rows' domain ids, the rows that count (every constraint's key, the inclusion
    policies), the domains they form; the present rows and those missing a key."""

    __slots__ = ("domains", "eligible", "ids", "keyed", "missing", "present", "seen")

    def __init__(
        self,
        table: NodeTable,
        hard: tuple[SpreadConstraint, ...],
        req: PodRequirements,
        domains: Domains,
    ) -> None:
        cap = table.capacity
        rows = table.present_rows()
        self.present = np.zeros(cap, dtype=bool)
        self.present[rows] = True
        all_keys = self.present.copy()
        for c in hard:
            all_keys &= domains.of(table, c.topology_key)[0] >= 0
        affine = np.zeros(cap, dtype=bool)
        tolerated = np.zeros(cap, dtype=bool)
        tolerations = req.toleration_list()
        for r in np.flatnonzero(all_keys):
            affine[r] = node_matches_affinity(req, table.labels[r], table.names[r] or "")
            tolerated[r] = tolerates_all(tolerations, table.taints[r])
        self.missing = np.zeros(cap, dtype=bool)
        self.ids: list[npt.NDArray[np.int64]] = []
        self.keyed: list[Mask] = []
        self.eligible: list[Mask] = []
        self.seen: list[Mask] = []
        self.domains: list[int] = []
        for c in hard:
            ids, values = domains.of(table, c.topology_key)
            keyed = self.present & (ids >= 0)
            self.missing |= self.present & (ids < 0)
            eligible = all_keys
            if c.honor_node_affinity:
                eligible = eligible & affine
            if c.honor_node_taints:
                eligible = eligible & tolerated
            seen = np.zeros(len(values) + 1, dtype=bool)  # the last entry: no such label
            seen[ids[eligible]] = True
            seen[-1] = False
            self.ids.append(ids)
            self.keyed.append(keyed)
            self.eligible.append(eligible)
            self.seen.append(seen)
            self.domains.append(int(seen.sum()))
