"""The checks (``missing-key``, ``not-nested``, ``not-coarser``, ``never-fits``,
``missing-label``) and :func:`lint_topology`, which runs them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from workloadbuilder.kinds import (
    IntegrationRegistry,
    default_registry,
)
from workloadbuilder.lint._collect import collect_input
from workloadbuilder.lint._model import (
    FINDING_TYPES,
    MAX_LISTED,
    Finding,
    TopologyLevel,
    TopologyLintResult,
)
from workloadbuilder.lint._tree import Instance, Level, Node, read_nodes
from workloadbuilder.resources import CPU, PODS, format_quantity

__all__ = ["lint_topology"]


# -- the checks ---------------------------------------------------------------------------


def _listed(names: Sequence[str]) -> str:
    names = sorted(names)
    if len(names) <= MAX_LISTED:
        return ", ".join(names)
    return ", ".join(names[:MAX_LISTED]) + f" and {len(names) - MAX_LISTED} more"


def _nearest_key(level: Level | None) -> tuple[Level | None, str | None]:
    while level is not None:
        if level.key is not None:
            return level, level.key
        level = level.parent
    return None, None


def _domains(nodes: Sequence[Node], key: str) -> dict[str, list[Node]]:
    out: dict[str, list[Node]] = {}
    for n in nodes:
        value = n.labels.get(key)
        if value is not None:
            out.setdefault(value, []).append(n)
    return out


def _check_levels(
    levels: Sequence[Level], nodes: Sequence[Node]
) -> tuple[list[Finding], list[TopologyLevel]]:
    findings: list[Finding] = []
    checked: list[TopologyLevel] = []
    seen_pairs: set[tuple[str, str, str]] = set()
    for lv in levels:
        _, parent_key = _nearest_key(lv.parent)
        domains = _domains(nodes, lv.key) if lv.key is not None else {}
        checked.append(
            TopologyLevel(
                subject=lv.subject,
                path=lv.path,
                template=lv.template,
                key=lv.key,
                parent_key=parent_key,
                domains=len(domains),
            )
        )
        if lv.key is None:
            continue
        if not domains:
            findings.append(
                Finding(
                    type="missing-key",
                    subject=lv.subject,
                    path=lv.key_path,
                    key=lv.key,
                    message=(
                        f"{lv.key}: no node has this label ({len(nodes)} nodes checked); "
                        f"template {lv.template!r} can never schedule"
                    ),
                )
            )
            continue
        if parent_key is None:
            continue
        pair = (lv.subject, lv.key_path, parent_key)
        if pair in seen_pairs:
            continue
        seen_pairs.add(pair)
        findings.extend(_nesting(lv, parent_key, domains, nodes))
    return findings, checked


def _nesting(
    lv: Level, parent_key: str, domains: Mapping[str, list[Node]], nodes: Sequence[Node]
) -> list[Finding]:
    assert lv.key is not None
    out: list[Finding] = []
    if parent_key == lv.key:
        out.append(
            Finding(
                type="not-coarser",
                subject=lv.subject,
                path=lv.key_path,
                key=lv.key,
                message=(
                    f"{lv.key}: the same key as its parent level: the parent is not coarser "
                    "than its child (the child constraint adds nothing)"
                ),
            )
        )
        return out
    parents = _domains(nodes, parent_key)
    for value, members in sorted(domains.items()):
        spread: dict[str, list[str]] = {}
        for n in members:
            spread.setdefault(n.labels.get(parent_key, f"(no {parent_key})"), []).append(n.name)
        if len(spread) > 1:
            parts = "; ".join(f"{p}: {_listed(ns)}" for p, ns in sorted(spread.items()))
            out.append(
                Finding(
                    type="not-nested",
                    subject=lv.subject,
                    path=lv.key_path,
                    key=lv.key,
                    message=(
                        f"{lv.key}={value} spans {len(spread)} domains of its parent level "
                        f"{parent_key} ({parts})"
                    ),
                    nodes=tuple(sorted(n.name for n in members)),
                    domains=tuple(sorted(spread)),
                )
            )
    # coarser: the parent's domains (among nodes with the child key) must be fewer than the
    # child's, and must not lie inside the child's (swapped levels)
    inside = all(
        len({n.labels.get(lv.key) for n in members if lv.key in n.labels}) <= 1
        for members in parents.values()
    )
    parent_count = len(
        {n.labels[parent_key] for ns in domains.values() for n in ns if parent_key in n.labels}
    )
    if parent_count >= len(domains) and inside and parent_count > 0:
        out.append(
            Finding(
                type="not-coarser",
                subject=lv.subject,
                path=lv.key_path,
                key=lv.key,
                message=(
                    f"{lv.key}: its parent level {parent_key} is not coarser: {parent_count} "
                    f"{parent_key} domains each lie inside one of the {len(domains)} {lv.key} "
                    "domains (are the levels swapped?)"
                ),
                domains=tuple(sorted(domains)),
            )
        )
    return out


def _demand(inst: Instance) -> list[dict[str, int]] | None:
    """The smallest set of pods whose placement schedules ``inst`` (None: unknown)."""
    if inst.composite:
        needs = [_demand(c) for c in inst.children]
        if not needs or any(d is None for d in needs):
            return None
        known = sorted((d for d in needs if d is not None), key=_size)
        k = 1 if inst.gang_min is None else inst.gang_min
        if k > len(known):
            return None
        return [p for d in known[:k] for p in d]
    if inst.pods is None or not inst.pods:
        return None
    k = 1 if inst.gang_min is None else inst.gang_min
    if k > len(inst.pods):
        return None
    return sorted(inst.pods, key=lambda p: _size([p]))[:k]


def _size(pods: Sequence[Mapping[str, int]]) -> tuple[int, ...]:
    total: dict[str, int] = {}
    for p in pods:
        for r, q in p.items():
            total[r] = total.get(r, 0) + q
    return (sum(1 for _ in pods), *sorted(total.values(), reverse=True))


def _packable(pods: Sequence[Mapping[str, int]], nodes: Sequence[Node]) -> int:
    """How many of ``pods`` first-fit-decreasing places on empty ``nodes``."""
    free = [dict(n.allocatable) for n in nodes]
    most: dict[str, int] = {}
    for f in free:
        for r, q in f.items():
            most[r] = max(most.get(r, 0), q)

    def share(p: Mapping[str, int]) -> float:
        return max([0.0, *(q / max(1, most.get(r, 0)) for r, q in p.items())])

    placed = 0
    for p in sorted(pods, key=share, reverse=True):
        need = {**p, PODS: p.get(PODS, 0) + 1}
        for f in free:
            if all(f.get(r, 0) >= q for r, q in need.items()):
                for r, q in need.items():
                    f[r] = f.get(r, 0) - q
                placed += 1
                break
    return placed


def _capacity(nodes: Sequence[Node], resources: Iterable[str]) -> str:
    parts = []
    for r in sorted(resources):
        total = sum(n.allocatable.get(r, 0) for n in nodes)
        parts.append(f"{r} {format_quantity(total, r)}")
    return ", ".join(parts)


def _requests_text(pods: Sequence[Mapping[str, int]]) -> str:
    kinds: dict[tuple[tuple[str, int], ...], int] = {}
    for p in pods:
        key = tuple(sorted(p.items()))
        kinds[key] = kinds.get(key, 0) + 1
    parts = []
    for key, n in kinds.items():
        req = ", ".join(f"{r} {format_quantity(q, r)}" for r, q in key) or "no requests"
        parts.append(f"{n} x {{{req}}}")
    return " + ".join(parts)


def _check_capacity(roots: Sequence[Instance], nodes: Sequence[Node]) -> list[Finding]:
    findings: list[Finding] = []
    reported: set[tuple[str, str]] = set()

    def visit(inst: Instance) -> None:
        lv = inst.level
        own_key = lv.key
        _, inherited = _nearest_key(lv.parent)
        key = own_key or inherited
        for child in inst.children:
            visit(child)
        if (lv.subject, lv.path) in reported:
            return
        demand = _demand(inst)
        if demand is None or not nodes:
            return
        if key is None:
            domains = {"(whole cluster)": list(nodes)}
        else:
            domains = _domains(nodes, key)
            if not domains:
                return  # missing-key already says it
        n = len(demand)
        best_name, best_nodes, best_fit = "", list[Node](), -1
        for name, members in sorted(domains.items()):
            fit = _packable(demand, members)
            if fit >= n:
                return
            if fit > best_fit:
                best_name, best_nodes, best_fit = name, members, fit
        reported.add((lv.subject, lv.path))
        resources = {r for p in demand for r in p} | {CPU}
        where = f"no {key} domain" if key is not None else "the whole cluster"
        what = (
            f"{inst.gang_min} of its child groups"
            if inst.composite and inst.gang_min is not None
            else ("one child group" if inst.composite else f"{n} pod{'s' if n != 1 else ''}")
        )
        largest = (
            f"the largest, {key}={best_name} ({len(best_nodes)} node"
            f"{'s' if len(best_nodes) != 1 else ''}), has {_capacity(best_nodes, resources)} "
            f"and holds {best_fit} of them"
            if key is not None
            else f"it has {_capacity(best_nodes, resources)} and holds {best_fit} of them"
        )
        findings.append(
            Finding(
                type="never-fits",
                subject=lv.subject,
                path=lv.key_path if lv.key is not None else lv.path,
                key=key or "",
                message=(
                    f"template {lv.template!r} can never schedule: it needs {what} "
                    f"({_requests_text(demand)}) in one domain, and {where} fits them on an "
                    f"empty cluster; {largest}"
                ),
                nodes=tuple(sorted(nd.name for nd in best_nodes)),
                domains=(best_name,),
            )
        )

    for root in roots:
        visit(root)
    return findings


def _missing_labels(levels: Sequence[Level], nodes: Sequence[Node]) -> list[Finding]:
    first_use: dict[str, Level] = {}
    for lv in levels:
        if lv.key is not None and lv.key not in first_use:
            first_use[lv.key] = lv
    out: list[Finding] = []
    for key, lv in first_use.items():
        lacking = [n.name for n in nodes if key not in n.labels]
        if not lacking or len(lacking) == len(nodes):
            continue  # none lack it, or missing-key says it
        out.append(
            Finding(
                type="missing-label",
                subject=lv.subject,
                path=lv.key_path,
                key=key,
                message=(
                    f"{len(lacking)} of {len(nodes)} nodes lack the label {key}, so no group "
                    f"constrained by it can use them: {_listed(lacking)}"
                ),
                nodes=tuple(sorted(lacking)),
            )
        )
    return out


def lint_topology(
    objects: Iterable[Any],
    nodes: Iterable[Mapping[str, Any]],
    *,
    registry: IntegrationRegistry | None = None,
) -> TopologyLintResult:
    """Check the topology constraints of ``objects`` (manifests, see the module docs) against
    ``nodes`` (Node manifests). Raises :class:`LintInputError` for an object it cannot read
    (an unknown kind, an invalid Workload, an adapter's validation error)."""
    registry = registry if registry is not None else default_registry()
    node_list = read_nodes(nodes)
    collected = collect_input(list(objects), registry)
    findings, checked = _check_levels(collected.levels, node_list)
    findings += _check_capacity(collected.roots, node_list)
    findings += _missing_labels(collected.levels, node_list)
    order = {t: i for i, t in enumerate(FINDING_TYPES)}
    findings.sort(key=lambda f: order[f.type])
    notes = list(collected.notes)
    if not any(lv.key for lv in collected.levels):
        notes.append("no topology constraints in the input")
    return TopologyLintResult(
        findings=tuple(findings), levels=tuple(checked), notes=tuple(notes), nodes=len(node_list)
    )
