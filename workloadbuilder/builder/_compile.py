"""Resolving an item's configuration and compiling items into Workload templates.

Semantics of upstream ``resolveSchedulingConfig`` / ``compileWorkloadItemTree`` (v0.37.2):
the controller default, then the user's input field by field (a set input wins), then the
callbacks in order. A nil policy compiles to ``basic``; a gang policy without a resolved
``minCount`` is a build error.
"""

from __future__ import annotations

import json

import attrs

from workloadbuilder.api import (
    AllDisruptionMode,
    BasicSchedulingPolicy,
    CompositeBasicSchedulingPolicy,
    CompositeGangSchedulingPolicy,
    CompositePodGroupSchedulingConstraints,
    CompositePodGroupSchedulingPolicy,
    CompositePodGroupTemplate,
    DisruptionMode,
    GangSchedulingPolicy,
    PodGroupResourceClaim,
    PodGroupSchedulingConstraints,
    PodGroupSchedulingPolicy,
    PodGroupTemplate,
    SingleDisruptionMode,
    TopologyConstraint,
    WorkloadSpec,
)
from workloadbuilder.builder._types import (
    DisruptionModeName,
    PolicyName,
    SchedulingConfig,
    WorkloadInput,
    WorkloadItem,
)
from workloadbuilder.errors import BuildError

__all__ = [
    "check_tree",
    "compile_composite",
    "compile_leaf",
    "compile_tree",
    "map_input",
    "resolve_config",
]


def _q(value: str) -> str:
    return json.dumps(value)


def _input_policy(inp: WorkloadInput, composite: bool) -> tuple[PolicyName | None, int | None]:
    if composite:
        cp = inp.composite_policy
        if cp is None:
            return None, None
        if cp.basic is not None:
            return "basic", None
        if cp.gang is not None:
            return "gang", cp.gang.min_group_count
        return None, None
    p = inp.policy
    if p is None:
        return None, None
    if p.basic is not None:
        return "basic", None
    if p.gang is not None:
        return "gang", p.gang.min_count
    return None, None


def _input_mode(
    mode: object,
) -> DisruptionModeName | None:
    single = getattr(mode, "single", None)
    all_ = getattr(mode, "all", None)
    if single is not None:
        return "single"
    if all_ is not None:
        return "all"
    return None


def map_input(item: WorkloadItem) -> SchedulingConfig:
    """The user's input of ``item`` as a (partial) SchedulingConfig; unset blocks stay unset."""
    inp = item.input
    composite = item.is_composite
    policy, min_count = _input_policy(inp, composite)
    constraints = inp.composite_constraints if composite else inp.constraints
    topology: tuple[TopologyConstraint, ...] = ()
    if constraints is not None:
        topology = tuple(TopologyConstraint(key=t.key) for t in constraints.topology)
    mode_block = inp.composite_disruption_mode if composite else inp.disruption_mode
    claims: tuple[PodGroupResourceClaim, ...] = ()
    if not composite:
        claims = tuple(
            PodGroupResourceClaim(
                name=c.name,
                resource_claim_name=c.resource_claim_name,
                resource_claim_template_name=c.resource_claim_template_name,
            )
            for c in inp.resource_claims
        )
    return SchedulingConfig(
        policy=policy,
        min_count=min_count,
        topology=topology,
        disruption_mode=_input_mode(mode_block) if mode_block is not None else None,
        resource_claims=claims,
    )


def resolve_config(item: WorkloadItem) -> SchedulingConfig:
    """Default config, overridden field by field by the user's input, then the callbacks."""
    resolved = item.default_config or SchedulingConfig()
    user = map_input(item)
    if user.policy is not None:
        resolved = attrs.evolve(resolved, policy=user.policy, min_count=user.min_count)
    if user.topology:
        resolved = attrs.evolve(resolved, topology=user.topology)
    if user.disruption_mode is not None:
        resolved = attrs.evolve(resolved, disruption_mode=user.disruption_mode)
    if user.resource_claims:
        resolved = attrs.evolve(resolved, resource_claims=user.resource_claims)
    for callback in item.callbacks:
        result = callback(resolved)
        if not isinstance(result, SchedulingConfig):
            raise TypeError(
                f"callback of workload item {_q(item.name)} returned {type(result).__name__}, "
                "not a SchedulingConfig"
            )
        resolved = result
    return resolved


def _input_union_error(item: WorkloadItem) -> str | None:
    inp = item.input
    if item.is_composite:
        leaf_blocks: tuple[tuple[str, object], ...] = (
            ("policy", inp.policy),
            ("constraints", inp.constraints),
            ("disruptionMode", inp.disruption_mode),
        )
        for block, value in leaf_blocks:
            if value is not None:
                return f"composite workload item {_q(item.name)} sets leaf building block: {block}"
        if inp.resource_claims:
            return (
                f"composite workload item {_q(item.name)} sets leaf building block: resourceClaims"
            )
        return None
    composite_blocks: tuple[tuple[str, object], ...] = (
        ("policy", inp.composite_policy),
        ("constraints", inp.composite_constraints),
        ("disruptionMode", inp.composite_disruption_mode),
    )
    for block, value in composite_blocks:
        if value is not None:
            return f"leaf workload item {_q(item.name)} sets composite building block: {block}"
    return None


def check_tree(root: WorkloadItem) -> str | None:
    """Structural checks of the tree (upstream ``validateWorkloadItemTree``): every item named,
    names unique across the tree, leaf/composite inputs not mixed. Returns the first problem."""
    seen: set[str] = set()
    stack = [root]
    # Pre-order, children in order, like the upstream recursion.
    while stack:
        item = stack.pop()
        if not item.name:
            return "workload item name cannot be empty"
        if item.name in seen:
            return (
                f"duplicate workload item name {_q(item.name)}: template names must be unique "
                "across the Workload"
            )
        seen.add(item.name)
        problem = _input_union_error(item)
        if problem:
            return problem
        stack.extend(reversed(item.children))
    return None


def _none_if_empty(value: str | None) -> str | None:
    return value or None


def _mode(mode: DisruptionModeName | None) -> DisruptionMode | None:
    if mode == "all":
        return DisruptionMode(all=AllDisruptionMode())
    if mode == "single":
        return DisruptionMode(single=SingleDisruptionMode())
    return None


def compile_leaf(item: WorkloadItem) -> PodGroupTemplate:
    """Resolve a leaf item and compile it into one PodGroupTemplate."""
    cfg = resolve_config(item)
    if cfg.policy == "gang":
        if cfg.min_count is None:
            raise BuildError("gang scheduling requires minCount to be set after resolution")
        policy = PodGroupSchedulingPolicy(gang=GangSchedulingPolicy(min_count=cfg.min_count))
    else:
        policy = PodGroupSchedulingPolicy(basic=BasicSchedulingPolicy())
    return PodGroupTemplate(
        name=item.name,
        scheduling_policy=policy,
        scheduling_constraints=(
            PodGroupSchedulingConstraints(topology=cfg.topology) if cfg.topology else None
        ),
        resource_claims=cfg.resource_claims,
        disruption_mode=_mode(cfg.disruption_mode),
        priority_class_name=_none_if_empty(cfg.priority_class_name),
    )


def compile_composite(item: WorkloadItem) -> CompositePodGroupTemplate:
    """Resolve a composite item and compile it (children recursively, in order)."""
    cfg = resolve_config(item)
    if cfg.policy == "gang":
        if cfg.min_count is None:
            raise BuildError(
                "composite gang scheduling requires minGroupCount to be set after resolution"
            )
        policy = CompositePodGroupSchedulingPolicy(
            gang=CompositeGangSchedulingPolicy(min_group_count=cfg.min_count)
        )
    else:
        policy = CompositePodGroupSchedulingPolicy(basic=CompositeBasicSchedulingPolicy())
    leaves: list[PodGroupTemplate] = []
    composites: list[CompositePodGroupTemplate] = []
    for child in item.children:
        if child.is_composite:
            composites.append(compile_composite(child))
        else:
            leaves.append(compile_leaf(child))
    return CompositePodGroupTemplate(
        name=item.name,
        scheduling_policy=policy,
        scheduling_constraints=(
            CompositePodGroupSchedulingConstraints(topology=cfg.topology) if cfg.topology else None
        ),
        disruption_mode=_mode(cfg.disruption_mode),
        priority_class_name=_none_if_empty(cfg.priority_class_name),
        pod_group_templates=tuple(leaves),
        composite_pod_group_templates=tuple(composites),
    )


def compile_tree(root: WorkloadItem) -> WorkloadSpec:
    """The WorkloadSpec of a tree: one PodGroupTemplate (leaf root) or one
    CompositePodGroupTemplate (composite root). Raises :class:`BuildError`."""
    problem = check_tree(root)
    if problem:
        raise BuildError(problem)
    if root.is_composite:
        return WorkloadSpec(composite_pod_group_templates=(compile_composite(root),))
    return WorkloadSpec(pod_group_templates=(compile_leaf(root),))
