"""Property tests over the shared strategies (the same ones the control-plane tests reuse)."""

from __future__ import annotations

from typing import Any

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import composite_pod_groups, nearly_valid_cases, pod_groups, workloads

from workloadbuilder.api import GangSchedulingPolicy, PodGroupTemplate, Workload
from workloadbuilder.validation import validate_object

ALWAYS_INVALID = {
    "Workload/bad-template-name",
    "Workload/duplicate-template-name",
    "Workload/too-many-templates",
    "Workload/mixed-priorities",
    "Workload/controller-ref",
    "Workload/template-field",
    "Workload/spec-union",
}


@settings(max_examples=150, deadline=None)
@given(
    st.one_of(workloads(), pod_groups(with_priority=True), composite_pod_groups(with_priority=True))
)
def test_strategies_produce_valid_objects(obj: Any) -> None:
    assert [str(e) for e in validate_object(obj)] == []
    assert validate_object(obj, obj) == []  # a no-op update is always valid


@settings(max_examples=200, deadline=None)
@given(nearly_valid_cases())
def test_mutations_are_detected(case: tuple[str, Any]) -> None:
    name, obj = case
    errors = validate_object(obj)
    assert errors == validate_object(obj)  # deterministic
    if name in ALWAYS_INVALID:
        assert errors, name
    for e in errors:
        assert e.path.split(".")[0].split("[")[0] in ("metadata", "spec"), str(e)
        assert str(e).startswith(f"{e.path}: {e.type}")


def _bump_min_counts(w: Workload, delta: int) -> Workload:
    def leaf(t: PodGroupTemplate) -> PodGroupTemplate:
        gang = t.scheduling_policy.gang
        if gang is None:
            return t
        policy = attrs.evolve(
            t.scheduling_policy, gang=GangSchedulingPolicy(min_count=max(1, gang.min_count - delta))
        )
        return attrs.evolve(t, scheduling_policy=policy)

    def composite(c: Any) -> Any:
        return attrs.evolve(
            c,
            pod_group_templates=tuple(leaf(t) for t in c.pod_group_templates),
            composite_pod_group_templates=tuple(
                composite(x) for x in c.composite_pod_group_templates
            ),
        )

    spec = attrs.evolve(
        w.spec,
        pod_group_templates=tuple(leaf(t) for t in w.spec.pod_group_templates),
        composite_pod_group_templates=tuple(
            composite(c) for c in w.spec.composite_pod_group_templates
        ),
    )
    return attrs.evolve(w, spec=spec)


@settings(max_examples=100, deadline=None)
@given(workloads(), st.integers(1, 50))
def test_changing_min_counts_is_a_valid_update(w: Workload, delta: int) -> None:
    assert validate_object(_bump_min_counts(w, delta), w) == []
