"""core/v1 node selectors against a node (name and labels): the device node selectors of
ResourceSlices and allocations, and the required node affinity of pods (NodeAffinity)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["node_name_selector", "node_selector_matches", "terms_match"]


def _match_expression(expr: Mapping[str, Any], value: str | None) -> bool:
    op = expr.get("operator")
    values = [str(v) for v in expr.get("values") or ()]
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and values:
        try:
            lhs, rhs = int(value), int(values[0])
        except ValueError:
            return False
        return lhs > rhs if op == "Gt" else lhs < rhs
    return False


def node_selector_matches(
    selector: Mapping[str, Any] | None, name: str, labels: Mapping[str, str]
) -> bool:
    """A core/v1 ``NodeSelector`` (terms ORed; expressions and ``metadata.name`` fields
    ANDed) against a node; None matches every node."""
    if selector is None:
        return True
    return terms_match(selector.get("nodeSelectorTerms") or (), name, labels)


def terms_match(terms: Iterable[Mapping[str, Any]], name: str, labels: Mapping[str, str]) -> bool:
    """Node selector terms (ORed; expressions and ``metadata.name`` fields ANDed; an empty term
    matches nothing) against a node: required node affinity and device node selectors."""
    for term in terms:
        exprs = term.get("matchExpressions") or ()
        fields = term.get("matchFields") or ()
        if not exprs and not fields:
            continue
        if all(_match_expression(e, labels.get(str(e.get("key")))) for e in exprs) and all(
            _match_expression(f, name if f.get("key") == "metadata.name" else None) for f in fields
        ):
            return True
    return False


def node_name_selector(node: str) -> dict[str, Any]:
    """The selector of exactly the node named ``node`` (by its ``metadata.name`` field)."""
    return {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        ]
    }
