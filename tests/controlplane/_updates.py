"""Hypothesis strategies of updates to a stored Workload / PodGroup / CompositePodGroup.

Each draws ``(label, new object)`` from the stored object: allowed changes (labels, gang
``minCount``) and changes of immutable fields (policies, names, templates, references,
disruption modes, priorities, constraints, claims). The verdict is left to the comparison.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
from hypothesis import strategies as st

from workloadbuilder.api import (
    AllDisruptionMode,
    BasicSchedulingPolicy,
    CompositeBasicSchedulingPolicy,
    CompositeGangSchedulingPolicy,
    CompositePodGroup,
    CompositePodGroupSchedulingConstraints,
    CompositePodGroupSchedulingPolicy,
    CompositePodGroupTemplate,
    DisruptionMode,
    GangSchedulingPolicy,
    PodGroup,
    PodGroupResourceClaim,
    PodGroupSchedulingConstraints,
    PodGroupSchedulingPolicy,
    PodGroupTemplate,
    SingleDisruptionMode,
    TopologyConstraint,
    TypedLocalObjectReference,
    Workload,
    WorkloadReference,
)

__all__ = ["updates"]

Obj = Workload | PodGroup | CompositePodGroup
_KEYS = ("topology.kubernetes.io/zone", "topology.kubernetes.io/rack", "kubernetes.io/hostname")


def _flip_disruption(mode: DisruptionMode | None) -> DisruptionMode | None:
    if mode is None or mode.single is not None:
        return DisruptionMode(all=AllDisruptionMode())
    return DisruptionMode(single=SingleDisruptionMode())


def _min_counts() -> st.SearchStrategy[int]:
    return st.integers(-1, 12)


def _pg_policy_change(
    draw: st.DrawFn, policy: PodGroupSchedulingPolicy
) -> PodGroupSchedulingPolicy:
    if policy.gang is not None and draw(st.booleans()):
        return attrs.evolve(policy, gang=GangSchedulingPolicy(min_count=draw(_min_counts())))
    if policy.gang is not None:
        return PodGroupSchedulingPolicy(basic=BasicSchedulingPolicy())
    return PodGroupSchedulingPolicy(gang=GangSchedulingPolicy(min_count=draw(st.integers(1, 5))))


def _leaf_change(draw: st.DrawFn, leaf: Any) -> tuple[str, Any]:
    """A change of one field of a PodGroupTemplate or PodGroupSpec (same field names)."""
    field = draw(
        st.sampled_from(
            (
                "policy",
                "policy",
                "disruption",
                "priority",
                "priority-class",
                "preemption",
                "constraints",
                "claims",
            )
        )
    )
    if field == "policy":
        return field, attrs.evolve(
            leaf, scheduling_policy=_pg_policy_change(draw, leaf.scheduling_policy)
        )
    if field == "disruption":
        return field, attrs.evolve(leaf, disruption_mode=_flip_disruption(leaf.disruption_mode))
    if field == "priority":
        return field, attrs.evolve(leaf, priority=draw(st.sampled_from((None, 0, 5, 1000))))
    if field == "priority-class":
        return field, attrs.evolve(
            leaf, priority_class_name=draw(st.sampled_from((None, "high", "low")))
        )
    if field == "preemption":
        return field, attrs.evolve(
            leaf, preemption_policy=draw(st.sampled_from((None, "Never", "PreemptLowerPriority")))
        )
    if field == "constraints":
        key = draw(st.sampled_from(_KEYS))
        new = (
            None
            if leaf.scheduling_constraints is not None and draw(st.booleans())
            else (PodGroupSchedulingConstraints(topology=(TopologyConstraint(key=key),)))
        )
        return field, attrs.evolve(leaf, scheduling_constraints=new)
    claims = draw(
        st.sampled_from(
            (
                (),
                (PodGroupResourceClaim(name="gpu", resource_claim_template_name="gpu-t"),),
                (PodGroupResourceClaim(name="nic", resource_claim_name="nic-c"),),
            )
        )
    )
    return field, attrs.evolve(leaf, resource_claims=claims)


def _map_first_leaf(
    templates: tuple[CompositePodGroupTemplate, ...],
    fn: Callable[[PodGroupTemplate], PodGroupTemplate],
) -> tuple[tuple[CompositePodGroupTemplate, ...], bool]:
    out = []
    done = False
    for cpg in templates:
        if not done and cpg.pod_group_templates:
            first = fn(cpg.pod_group_templates[0])
            cpg = attrs.evolve(cpg, pod_group_templates=(first, *cpg.pod_group_templates[1:]))
            done = True
        elif not done and cpg.composite_pod_group_templates:
            children, done = _map_first_leaf(cpg.composite_pod_group_templates, fn)
            cpg = attrs.evolve(cpg, composite_pod_group_templates=children)
        out.append(cpg)
    return tuple(out), done


def _labels(draw: st.DrawFn, obj: Obj) -> Obj:
    labels = {**obj.metadata.labels, "changed": draw(st.sampled_from(("a", "b")))}
    return attrs.evolve(obj, metadata=attrs.evolve(obj.metadata, labels=labels))


@st.composite
def _workload_update(draw: st.DrawFn, w: Workload) -> tuple[str, Workload]:
    spec = w.spec
    choice = draw(
        st.sampled_from(
            (
                "labels",
                "leaf",
                "leaf",
                "leaf",
                "rename-template",
                "add-template",
                "remove-template",
                "controller-ref",
                "composite",
            )
        )
    )
    if choice == "labels":
        return choice, _labels(draw, w)  # type: ignore[return-value]
    if choice == "controller-ref":
        ref = draw(
            st.sampled_from(
                (None, TypedLocalObjectReference(api_group="batch", kind="Job", name="other"))
            )
        )
        return choice, attrs.evolve(w, spec=attrs.evolve(spec, controller_ref=ref))
    if spec.pod_group_templates:
        templates = spec.pod_group_templates
        if choice in ("leaf", "composite"):
            label, first = _leaf_change(draw, templates[0])
            new = (first, *templates[1:])
            return f"leaf-{label}", attrs.evolve(
                w, spec=attrs.evolve(spec, pod_group_templates=new)
            )
        if choice == "rename-template":
            new = (attrs.evolve(templates[0], name="renamed-x"), *templates[1:])
        elif choice == "add-template":
            extra = PodGroupTemplate(
                name="added-x",
                scheduling_policy=PodGroupSchedulingPolicy(basic=BasicSchedulingPolicy()),
            )
            new = (
                *templates,
                attrs.evolve(
                    extra,
                    priority=templates[0].priority,
                    priority_class_name=templates[0].priority_class_name,
                ),
            )
        else:
            new = templates[:-1]
        return choice, attrs.evolve(w, spec=attrs.evolve(spec, pod_group_templates=new))
    cpgs = spec.composite_pod_group_templates
    if choice == "leaf":
        label = "leaf"

        def change(leaf: PodGroupTemplate) -> PodGroupTemplate:
            nonlocal label
            label, out = _leaf_change(draw, leaf)
            return out  # type: ignore[no-any-return]

        new_cpgs, _ = _map_first_leaf(cpgs, change)
        return f"nested-leaf-{label}", attrs.evolve(
            w, spec=attrs.evolve(spec, composite_pod_group_templates=new_cpgs)
        )
    first = cpgs[0]
    if choice == "composite":
        sub = draw(st.sampled_from(("min-group-count", "policy", "disruption", "constraints")))
        if sub == "min-group-count" and first.scheduling_policy.gang is not None:
            first = attrs.evolve(
                first,
                scheduling_policy=CompositePodGroupSchedulingPolicy(
                    gang=CompositeGangSchedulingPolicy(min_group_count=draw(_min_counts()))
                ),
            )
        elif sub in ("policy", "min-group-count"):
            policy = (
                CompositePodGroupSchedulingPolicy(basic=CompositeBasicSchedulingPolicy())
                if first.scheduling_policy.gang is not None
                else CompositePodGroupSchedulingPolicy(
                    gang=CompositeGangSchedulingPolicy(min_group_count=1)
                )
            )
            first = attrs.evolve(first, scheduling_policy=policy)
        elif sub == "disruption":
            first = attrs.evolve(first, disruption_mode=_flip_disruption(first.disruption_mode))
        else:
            first = attrs.evolve(
                first,
                scheduling_constraints=CompositePodGroupSchedulingConstraints(
                    topology=(TopologyConstraint(key=draw(st.sampled_from(_KEYS))),)
                ),
            )
        new_cpgs = (first, *cpgs[1:])
        return f"composite-{sub}", attrs.evolve(
            w, spec=attrs.evolve(spec, composite_pod_group_templates=new_cpgs)
        )
    if choice == "rename-template":
        new_cpgs = (attrs.evolve(first, name="renamed-x"), *cpgs[1:])
    elif choice == "add-template":
        new_cpgs = (
            *cpgs,
            attrs.evolve(
                first,
                name="added-x",
                composite_pod_group_templates=(),
                pod_group_templates=(
                    PodGroupTemplate(
                        name="added-leaf-x",
                        scheduling_policy=PodGroupSchedulingPolicy(basic=BasicSchedulingPolicy()),
                    ),
                ),
            ),
        )
    else:
        new_cpgs = cpgs[:-1]
    return choice, attrs.evolve(w, spec=attrs.evolve(spec, composite_pod_group_templates=new_cpgs))


@st.composite
def _pod_group_update(draw: st.DrawFn, pg: PodGroup) -> tuple[str, PodGroup]:
    choice = draw(st.sampled_from(("labels", "spec", "spec", "spec", "workload-ref", "parent")))
    if choice == "labels":
        return choice, _labels(draw, pg)  # type: ignore[return-value]
    spec = pg.spec
    if choice == "spec":
        label, spec = _leaf_change(draw, spec)
        return label, attrs.evolve(pg, spec=spec)
    if choice == "workload-ref":
        ref = draw(
            st.sampled_from((None, WorkloadReference(workload_name="w2", template_name="t2")))
        )
        return choice, attrs.evolve(pg, spec=attrs.evolve(spec, workload_ref=ref))
    parent = draw(st.sampled_from((None, "parent-x")))
    return choice, attrs.evolve(pg, spec=attrs.evolve(spec, parent_composite_pod_group_name=parent))


@st.composite
def _cpg_update(draw: st.DrawFn, cpg: CompositePodGroup) -> tuple[str, CompositePodGroup]:
    choice = draw(
        st.sampled_from(
            (
                "labels",
                "min-group-count",
                "policy",
                "disruption",
                "constraints",
                "priority",
                "preemption",
                "workload-ref",
                "parent",
            )
        )
    )
    spec = cpg.spec
    if choice == "labels":
        return choice, _labels(draw, cpg)  # type: ignore[return-value]
    if choice == "min-group-count":
        if spec.scheduling_policy.gang is None:
            choice = "policy"
        else:
            spec = attrs.evolve(
                spec,
                scheduling_policy=CompositePodGroupSchedulingPolicy(
                    gang=CompositeGangSchedulingPolicy(min_group_count=draw(_min_counts()))
                ),
            )
    if choice == "policy":
        spec = attrs.evolve(
            spec,
            scheduling_policy=CompositePodGroupSchedulingPolicy(
                basic=CompositeBasicSchedulingPolicy()
            )
            if spec.scheduling_policy.gang is not None
            else CompositePodGroupSchedulingPolicy(
                gang=CompositeGangSchedulingPolicy(min_group_count=2)
            ),
        )
    elif choice == "disruption":
        spec = attrs.evolve(spec, disruption_mode=_flip_disruption(spec.disruption_mode))
    elif choice == "constraints":
        spec = attrs.evolve(
            spec,
            scheduling_constraints=CompositePodGroupSchedulingConstraints(
                topology=(TopologyConstraint(key=draw(st.sampled_from(_KEYS))),)
            ),
        )
    elif choice == "priority":
        spec = attrs.evolve(spec, priority=draw(st.sampled_from((None, 0, 7))))
    elif choice == "preemption":
        spec = attrs.evolve(
            spec, preemption_policy=draw(st.sampled_from(("Never", "PreemptLowerPriority")))
        )
    elif choice == "workload-ref":
        spec = attrs.evolve(
            spec, workload_ref=WorkloadReference(workload_name="w2", template_name="t2")
        )
    elif choice == "parent":
        spec = attrs.evolve(
            spec, parent_composite_pod_group_name=draw(st.sampled_from((None, "p-x")))
        )
    return choice, attrs.evolve(cpg, spec=spec)


def updates(stored: Obj) -> st.SearchStrategy[tuple[str, Obj]]:
    """``(label, new object)`` for an update of ``stored`` (as the server returned it)."""
    if isinstance(stored, Workload):
        return _workload_update(stored)
    if isinstance(stored, PodGroup):
        return _pod_group_update(stored)
    return _cpg_update(stored)
