"""PodTopologySpread: ``whenUnsatisfiable: DoNotSchedule`` topology spread constraints,
gang-aware (see :mod:`._podconstraints` for what the cycle's placed pods count for)."""

from __future__ import annotations

import functools
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
    #: nothing to check for a pod without constraints
    pod_scoped = True

    def __init__(self) -> None:
        super().__init__()
        #: per node epoch and (constraints, signature): what does not change while the nodes
        #: do not (see :meth:`_static`)
        self._epoch: tuple[int, int, int] = (-1, -1, -1)
        self._statics: _SpreadStatic | None = None

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

    def _static(self, table: NodeTable) -> _SpreadStatic:
        token = (id(table), table.epoch, table.capacity)
        if token != self._epoch or self._statics is None:
            self._statics = _SpreadStatic(table, self.domains)
            self._epoch = token
        return self._statics

    def _evaluate(
        self, pod: PodInfo, lister: SharedLister
    ) -> tuple[Mask, list[tuple[str, str, Mask]]]:
        assert pod.constraints is not None and isinstance(lister, Snapshot)
        table = lister.table
        hard = pod.constraints.hard_spread
        st = self._static(table)
        keys = tuple(sorted({c.topology_key for c in hard}))
        missing = st.missing(keys)
        skewed = np.zeros(table.capacity, dtype=bool)
        details: list[str] = []
        ns = pod.namespace
        for c in hard:
            ids, _ = self.domains.of(table, c.topology_key)
            eligible, seen, domains = st.domains_of(keys, c, pod.req)
            per_domain = np.zeros(seen.size, dtype=np.int64)
            for p, row in matching(lister, c.selector, ns.__eq__):
                if eligible[row] and not p.deleting:
                    per_domain[ids[row]] += 1

            def add(
                state: npt.NDArray[np.int64],
                p: PodInfo,
                row: int,
                c: SpreadConstraint = c,
                eligible: Mask = eligible,
                ids: npt.NDArray[np.int64] = ids,
            ) -> None:
                if eligible[row] and p.namespace == ns and c.selector.matches(p.labels):
                    state[ids[row]] += 1

            start = functools.partial(_counts, seen.size)
            placed = self.folds.get(("spread", c, ns, pod.req), lister, start, add)
            per_domain += placed
            low = int(per_domain[seen].min()) if domains else 0
            if domains < c.min_domains:
                low = 0
            limit = c.max_skew + low - (1 if c.selector.matches(pod.labels) else 0)
            bad = (per_domain > limit)[ids] & st.keyed(c.topology_key)
            if bad.any():
                details.append(f"{c.describe()} (domain minimum {low})")
                skewed |= bad
        skewed &= ~missing
        long_skew = "would exceed " + "; ".join(details) if details else "would exceed maxSkew"
        return ~(missing | skewed) & st.present, [
            (SPREAD_LABEL_REASON, "lack a topology key of the pod's spread constraints", missing),
            (SPREAD_REASON, long_skew, skewed),
        ]


class _SpreadStatic:
    """What spread constraints see of the nodes, for one node epoch, each part worked out once
    and kept: the present rows; per topology key the rows that carry it; per set of keys the
    present rows missing one; per signature the rows its node affinity admits and those whose
    taints it tolerates; per (keys, policies, signature) the rows that count and the domains
    they form."""

    def __init__(self, table: NodeTable, domains: Domains) -> None:
        self.table = table
        self.domains = domains
        self.present = np.zeros(table.capacity, dtype=bool)
        self.present[table.present_rows()] = True
        self._keyed: dict[str, Mask] = {}
        self._all: dict[tuple[str, ...], Mask] = {}
        self._affine: dict[PodRequirements, Mask] = {}
        self._tolerated: dict[PodRequirements, Mask] = {}
        self._counted: dict[Any, tuple[Mask, Mask, int]] = {}

    def keyed(self, key: str) -> Mask:
        """Present rows that carry ``key``."""
        got = self._keyed.get(key)
        if got is None:
            got = self._keyed[key] = self.present & (self.domains.of(self.table, key)[0] >= 0)
        return got

    def all_keys(self, keys: tuple[str, ...]) -> Mask:
        """Present rows that carry every key of ``keys``."""
        got = self._all.get(keys)
        if got is None:
            got = self.present.copy()
            for k in keys:
                got &= self.keyed(k)
            self._all[keys] = got
        return got

    def missing(self, keys: tuple[str, ...]) -> Mask:
        """Present rows without one of ``keys``."""
        return self.present & ~self.all_keys(keys)

    def affine(self, req: PodRequirements) -> Mask:
        """Present rows the signature's node selector and required affinity admit."""
        got = self._affine.get(req)
        if got is None:
            if not req.node_selector and not req.affinity:
                got = self.present
            else:
                got = np.zeros(self.table.capacity, dtype=bool)
                t = self.table
                for r in np.flatnonzero(self.present):
                    got[r] = node_matches_affinity(req, t.labels[r], t.names[r] or "")
            self._affine[req] = got
        return got

    def tolerated(self, req: PodRequirements) -> Mask:
        """Present rows whose taints the signature tolerates."""
        got = self._tolerated.get(req)
        if got is None:
            t = self.table
            got = self.present.copy()
            tolerations = req.toleration_list()
            for r in np.flatnonzero(self.present & t.tainted[: self.present.size]):
                got[r] = tolerates_all(tolerations, t.taints[r])
            self._tolerated[req] = got
        return got

    def domains_of(
        self, keys: tuple[str, ...], c: SpreadConstraint, req: PodRequirements
    ) -> tuple[Mask, Mask, int]:
        """``(rows that count, domain ids seen among them, how many)`` for ``c``."""
        who = req if (c.honor_node_affinity or c.honor_node_taints) else None
        token = (keys, c.topology_key, c.honor_node_affinity, c.honor_node_taints, who)
        got = self._counted.get(token)
        if got is None:
            eligible = self.all_keys(keys)
            if c.honor_node_affinity:
                eligible = eligible & self.affine(req)
            if c.honor_node_taints:
                eligible = eligible & self.tolerated(req)
            ids, values = self.domains.of(self.table, c.topology_key)
            seen = np.zeros(len(values) + 1, dtype=bool)  # the last entry: no such label
            seen[ids[eligible]] = True
            seen[-1] = False
            got = self._counted[token] = (eligible, seen, int(seen.sum()))
        return got


def _counts(size: int) -> npt.NDArray[np.int64]:
    """A count per domain id (and one for "no such label"), all 0."""
    return np.zeros(size, dtype=np.int64)
