"""PodDisruptionBudgets as preemption sees them (upstream's ``filterVictimsWithPDBViolation``).

The scheduler does not compute budgets: it reads ``status.disruptionsAllowed`` and
``status.disruptedPods`` as the disruption controller (kube-controller-manager) wrote them. A
budget with no status allows no disruption. A unit of victims *violates* a budget when
preempting it, after the more important units before it, would take a budget below zero;
a unit is violating when any of its pods is (a ``disruptionMode: all`` group is never split).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

import attrs

__all__ = [
    "DisruptionBudget",
    "LabeledPod",
    "PodUnit",
    "disruption_budget",
    "split_by_budget_violation",
]


class LabeledPod(Protocol):
    """What a budget looks at in a pod."""

    @property
    def namespace(self) -> str:
        """The pod's namespace."""
        ...

    @property
    def name(self) -> str:
        """The pod's name."""
        ...

    @property
    def labels(self) -> Mapping[str, str]:
        """The pod's labels."""
        ...


class PodUnit(Protocol):
    """A preemption unit: its pods."""

    @property
    def pods(self) -> Sequence[LabeledPod]:
        """The unit's pods."""
        ...


U = TypeVar("U", bound=PodUnit)


@attrs.frozen
class DisruptionBudget:
    """One ``policy/v1`` PodDisruptionBudget: its selector, and what its status allows."""

    namespace: str
    name: str
    #: None: the selector selects nothing (nil, empty, or invalid, as kube-scheduler v1.37.2)
    selects: Callable[[Mapping[str, str]], bool] | None
    #: ``status.disruptionsAllowed`` (0 when the status is not written yet)
    allowed: int
    #: ``status.disruptedPods`` names: already being disrupted, not counted again
    disrupted: frozenset[str]
    #: one ``matchLabels`` pair every selected pod has (an index key), if any
    index_key: tuple[str, str] | None = None


def _requirement(expr: Mapping[str, Any]) -> Callable[[Mapping[str, str]], bool] | None:
    key = str(expr.get("key") or "")
    op = expr.get("operator")
    values = frozenset(str(v) for v in expr.get("values") or ())
    if op == "In" and values:
        return lambda labels: labels.get(key) in values
    if op == "NotIn" and values:
        return lambda labels: labels.get(key) not in values
    if op == "Exists" and not values:
        return lambda labels: key in labels
    if op == "DoesNotExist" and not values:
        return lambda labels: key not in labels
    return None  # an invalid requirement: the whole selector is invalid


def _selector(sel: Any) -> Callable[[Mapping[str, str]], bool] | None:
    if not isinstance(sel, Mapping):
        return None
    reqs: list[Callable[[Mapping[str, str]], bool]] = []
    wanted = {str(k): str(v) for k, v in (sel.get("matchLabels") or {}).items()}
    if wanted:
        reqs.append(lambda labels: all(labels.get(k) == v for k, v in wanted.items()))
    for expr in sel.get("matchExpressions") or ():
        req = _requirement(expr) if isinstance(expr, Mapping) else None
        if req is None:
            return None
        reqs.append(req)
    if not reqs:
        return None  # an empty selector matches nothing here (as v1.37.2's preemption)
    return lambda labels: all(r(labels) for r in reqs)


def disruption_budget(obj: Mapping[str, Any]) -> DisruptionBudget:
    """A :class:`DisruptionBudget` from a PodDisruptionBudget object."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    sel = spec.get("selector")
    labels = sel.get("matchLabels") if isinstance(sel, Mapping) else None
    first = min(((str(k), str(v)) for k, v in labels.items()), default=None) if labels else None
    return DisruptionBudget(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""),
        selects=_selector(sel),
        allowed=int(status.get("disruptionsAllowed") or 0),
        disrupted=frozenset(str(n) for n in status.get("disruptedPods") or {}),
        index_key=first,
    )


def split_by_budget_violation(
    units: Sequence[U], budgets: Sequence[DisruptionBudget]
) -> tuple[list[tuple[U, int]], list[U]]:
    """``(violating, non_violating)``, both in the order of ``units`` (most important first):
    preempting the units in that order, each budget's allowance is spent pod by pod; a pod
    whose budget goes below zero violates it, and a unit with one violating pod is violating
    (with the count of its violating pods)."""
    left = [b.allowed for b in budgets]
    # candidates per pod without scanning every budget: by namespace, then by one label pair
    # each budget requires (budgets with only expressions are always candidates)
    keyed: dict[str, dict[tuple[str, str], list[int]]] = {}
    unkeyed: dict[str, list[int]] = {}
    for i, b in enumerate(budgets):
        if b.selects is None:
            continue
        if b.index_key is not None:
            keyed.setdefault(b.namespace, {}).setdefault(b.index_key, []).append(i)
        else:
            unkeyed.setdefault(b.namespace, []).append(i)

    def candidates(p: LabeledPod) -> list[int]:
        out = list(unkeyed.get(p.namespace, ()))
        index = keyed.get(p.namespace)
        if index:
            for pair in p.labels.items():
                out.extend(index.get(pair, ()))
        out.sort()  # budget order, as upstream walks its list
        return out

    def violates(p: LabeledPod) -> bool:
        if not p.labels or not budgets:
            return False
        for i in candidates(p):
            b = budgets[i]
            if b.selects is None or not b.selects(p.labels):
                continue
            if p.name in b.disrupted:
                continue
            left[i] -= 1
            if left[i] < 0:
                return True
        return False

    violating: list[tuple[U, int]] = []
    fine: list[U] = []
    for u in units:
        n = sum(1 for p in u.pods if violates(p))
        if n:
            violating.append((u, n))
        else:
            fine.append(u)
    return violating, fine
