"""Node-side matching shared by the filters and the pod-constraint plugins: a pod's
``nodeSelector`` and required node affinity against a node's labels, and tolerations against
taints (``ToleratesTaint``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from workloadbuilder.scheduler._dra import terms_match
from workloadbuilder.scheduler._resources import PodRequirements

__all__ = ["node_matches_affinity", "tolerates", "tolerates_all"]


def node_matches_affinity(req: PodRequirements, labels: Mapping[str, str], name: str) -> bool:
    """``nodeSelector`` and required node affinity (terms ORed, expressions ANDed)."""
    for k, v in req.node_selector:
        if labels.get(k) != v:
            return False
    terms = req.affinity_terms()
    if not terms:
        return True
    return terms_match(terms, name, labels)


def tolerates(tol: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Whether ``tol`` tolerates ``taint``: an empty key with ``Exists`` tolerates every
    taint, an empty effect every effect, ``Equal`` (the default) compares values."""
    effect = tol.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = tol.get("key") or ""
    op = tol.get("operator") or "Equal"
    if not key:
        return op == "Exists"
    if key != taint.get("key"):
        return False
    if op == "Exists":
        return True
    return str(tol.get("value") or "") == str(taint.get("value") or "")


def tolerates_all(
    tolerations: Sequence[Mapping[str, Any]], taints: Iterable[Mapping[str, Any]]
) -> bool:
    """Whether every taint (the node table keeps ``NoSchedule`` and ``NoExecute``) is
    tolerated."""
    return all(any(tolerates(tol, t) for tol in tolerations) for t in taints)
