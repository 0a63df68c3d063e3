"""Indexes over the pods counted on nodes (bound, or assumed while their binding is in flight),
kept current by the cache, for the pod-constraint plugins: which counted pods carry a label, which
hold a given required anti-affinity term, which hold a term InterPodAffinity's Score reads
against the incoming pod (required affinity, preferred affinity and anti-affinity), which use a
host port.

They turn "which counted pods match this selector" from a walk over every pod into a lookup of
the pods carrying one label the selector requires (a selector with no such label falls back to
the walk). Rows are not indexed: a pod's row is read from ``counted_node`` when it is asked.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Generic, Protocol, TypeVar

from workloadbuilder.scheduler._podspec import AffinityTerm, PodConstraints, Selector

__all__ = ["PodIndex", "ScoreTerm"]

Pair = tuple[str, str]
PodKey = tuple[str, str]
#: a term an existing pod holds, read by InterPodAffinity's Score against the incoming pod:
#: ``(term, weight, hard)``; for a preferred term the sum of its weights in the pod (negative
#: for anti-affinity), for a required affinity term (``hard``) how many times the pod holds it
#: (each weighs ``hardPodAffinityWeight``)
ScoreTerm = tuple[AffinityTerm, int, bool]


def score_terms(c: PodConstraints) -> list[ScoreTerm]:
    """The terms of ``c`` that InterPodAffinity's Score reads against other pods, each once
    (a term a pod repeats counts as many times, as upstream's loop over the terms)."""
    hard: dict[AffinityTerm, int] = {}
    for t in c.affinity:
        hard[t] = hard.get(t, 0) + 1
    soft: dict[tuple[AffinityTerm, int], int] = {}
    for sign, terms in ((1, c.preferred_affinity), (-1, c.preferred_anti_affinity)):
        for w in terms:
            soft[(w.term, sign)] = soft.get((w.term, sign), 0) + sign * w.weight
    out: list[ScoreTerm] = [(t, n, True) for t, n in hard.items()]
    out.extend((t, w, False) for (t, _), w in soft.items() if w)
    return out


class _Pod(Protocol):
    """What the index reads of a pod (the cache's ``PodInfo``)."""

    @property
    def key(self) -> PodKey: ...

    @property
    def labels(self) -> dict[str, str]: ...

    @property
    def constraints(self) -> PodConstraints | None: ...


PodInfo = TypeVar("PodInfo", bound=_Pod)


class PodIndex(Generic[PodInfo]):
    """Counted pods by label, by required anti-affinity term, and by host port."""

    def __init__(self) -> None:
        self._by_label: dict[Pair, dict[PodKey, PodInfo]] = {}
        #: required anti-affinity term -> the counted pods holding it
        self.anti_terms: dict[AffinityTerm, dict[PodKey, PodInfo]] = {}
        self._anti_by_label: dict[Pair, set[AffinityTerm]] = {}
        self._anti_scan: set[AffinityTerm] = set()
        #: score term -> the counted pods holding it (empty: no counted pod has any, so
        #: InterPodAffinity's Score has nothing to read for a pod without preferences)
        self.score_terms: dict[ScoreTerm, dict[PodKey, PodInfo]] = {}
        #: ``(protocol, port)`` -> the counted pods using it
        self.ports: dict[tuple[str, int], dict[PodKey, PodInfo]] = {}

    def add(self, p: PodInfo) -> None:
        """``p`` is now counted on a node."""
        self._label(p, p.labels, +1)
        c = p.constraints
        if c is None:
            return
        for t in c.anti_affinity:
            holders = self.anti_terms.get(t)
            if holders is None:
                holders = self.anti_terms[t] = {}
                pairs = _pairs(t.selector)
                if pairs is None:
                    self._anti_scan.add(t)
                for pair in pairs or ():
                    self._anti_by_label.setdefault(pair, set()).add(t)
            holders[p.key] = p
        if c.affinity or c.preferred_affinity or c.preferred_anti_affinity:
            for st in score_terms(c):
                self.score_terms.setdefault(st, {})[p.key] = p
        for hp in c.host_ports:
            self.ports.setdefault((hp.protocol, hp.port), {})[p.key] = p

    def remove(self, p: PodInfo, labels: Mapping[str, str] | None = None) -> None:
        """``p`` is no longer counted (``labels``: the ones it was indexed under)."""
        self._label(p, p.labels if labels is None else labels, -1)
        c = p.constraints
        if c is None:
            return
        for t in c.anti_affinity:
            holders = self.anti_terms.get(t)
            if holders is not None and holders.pop(p.key, None) is not None and not holders:
                del self.anti_terms[t]
                self._anti_scan.discard(t)
                for pair in _pairs(t.selector) or ():
                    terms = self._anti_by_label.get(pair)
                    if terms is not None:
                        terms.discard(t)
                        if not terms:
                            del self._anti_by_label[pair]
        if c.affinity or c.preferred_affinity or c.preferred_anti_affinity:
            for st in score_terms(c):
                pods = self.score_terms.get(st)
                if pods is not None and pods.pop(p.key, None) is not None and not pods:
                    del self.score_terms[st]
        for hp in c.host_ports:
            users = self.ports.get((hp.protocol, hp.port))
            if users is not None and users.pop(p.key, None) is not None and not users:
                del self.ports[(hp.protocol, hp.port)]

    def relabel(self, p: PodInfo, old: Mapping[str, str]) -> None:
        """A counted pod's labels changed from ``old`` to ``p.labels``."""
        self._label(p, old, -1)
        self._label(p, p.labels, +1)

    def _label(self, p: PodInfo, labels: Mapping[str, str], sign: int) -> None:
        for pair in labels.items():
            if sign > 0:
                self._by_label.setdefault(pair, {})[p.key] = p
            else:
                pods = self._by_label.get(pair)
                if pods is not None and pods.pop(p.key, None) is not None and not pods:
                    del self._by_label[pair]

    def candidates(self, selector: Selector, everyone: Iterable[PodInfo]) -> Iterator[PodInfo]:
        """Counted pods that may match ``selector`` (a superset; the caller matches): those
        carrying the rarest label it requires, else ``everyone``."""
        if selector.nothing:
            return iter(())
        pairs = _pairs(selector)
        if pairs is None:
            return iter(everyone)
        best: list[dict[PodKey, PodInfo]] | None = None
        least = 0
        by_label = self._by_label
        for key, values in _required(selector):
            groups = [g for v in values if (g := by_label.get((key, v)))]
            n = sum(map(len, groups))
            if best is None or n < least:
                best, least = groups, n
                if n == 0:
                    return iter(())
        return (p for g in best or () for p in list(g.values()))

    def anti_terms_for(self, labels: Mapping[str, str]) -> Iterator[AffinityTerm]:
        """The held anti-affinity terms whose selector may match a pod with ``labels``."""
        seen: set[AffinityTerm] = set()
        for pair in labels.items():
            for t in self._anti_by_label.get(pair, ()):
                if t not in seen:
                    seen.add(t)
                    yield t
        yield from (t for t in self._anti_scan if t not in seen)


#: selector -> (its requirements of a label, its pairs): worked out once per selector
_SHAPES: dict[Selector, tuple[list[tuple[str, frozenset[str]]], list[Pair] | None]] = {}


def _shape(selector: Selector) -> tuple[list[tuple[str, frozenset[str]]], list[Pair] | None]:
    got = _SHAPES.get(selector)
    if got is None:
        if len(_SHAPES) > 100_000:  # bound it in long-running schedulers
            _SHAPES.clear()
        req = [(k, vs) for k, op, vs in selector.reqs if op in ("=", "in") and vs]
        pairs = [(req[0][0], v) for v in sorted(req[0][1])] if req else None
        got = _SHAPES[selector] = (req, pairs)
    return got


def _required(selector: Selector) -> list[tuple[str, frozenset[str]]]:
    """The requirements a matching pod must carry a label for: ``key = v`` / ``key in (...)``
    (not to be changed by the caller)."""
    return _shape(selector)[0]


def _pairs(selector: Selector) -> list[Pair] | None:
    """Every ``(key, value)`` one of which a matching pod must carry, for the selector's first
    such requirement; None when the selector requires none (index by scanning; not to be
    changed by the caller)."""
    return _shape(selector)[1]
