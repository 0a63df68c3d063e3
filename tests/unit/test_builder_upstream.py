"""Differential vectors: the Builder against upstream workloadbuilder v0.37.2.

``test_builder_upstream_vectors.json`` was produced by running the Go library
``k8s.io/component-helpers/scheduling/schedulingv1/workloadbuilder`` v0.37.2 (the version
kube-controller-manager v1.37.2 uses) on 150 random Job-style items: a leaf
``trainer-pgt-0`` at ``spec.scheduling`` with the Job controller's defaults (basic, the pod
template's priority class, gang minCount defaulting to parallelism clamped to >= 1) and random,
often invalid, ``spec.scheduling`` building blocks, some of them as updates of an old item.
Each vector records the exact ``Validate`` error strings and the compiled Workload / PodGroup
specs.

``test_builder_upstream_tree_vectors.json`` holds 80 random WorkloadItem *trees* (composite and
leaf items, mixed/duplicate/invalid inputs, random allow-lists, some updates) run through the
same Go library: ``Validate`` errors, ``BuildWorkload`` result or error, and
``NewCompositePodGroup`` / ``NewPodGroup`` specs (the latter only for top-level templates, which
is all upstream can materialise).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest

from workloadbuilder.api import (
    JobSchedulingConfiguration,
    OwnerReference,
    WorkloadCompositePodGroupDisruptionMode,
    WorkloadCompositePodGroupSchedulingConstraints,
    WorkloadCompositePodGroupSchedulingPolicy,
    WorkloadPodGroupDisruptionMode,
    WorkloadPodGroupSchedulingConstraints,
    WorkloadPodGroupSchedulingPolicy,
    from_dict,
    to_dict,
)
from workloadbuilder.builder import (
    ALL_DISRUPTION_MODES,
    ALL_POLICIES,
    Builder,
    BuildOptions,
    SchedulingConfig,
    WorkloadInput,
    WorkloadItem,
)
from workloadbuilder.errors import BuildError

_VECTORS = json.loads((Path(__file__).with_name("test_builder_upstream_vectors.json")).read_text())[
    "cases"
]

OPTS = BuildOptions(
    name="wl",
    namespace="ns",
    owner=OwnerReference(
        api_version="batch/v1",
        kind="Job",
        name="trainer",
        uid="u",
        controller=True,
        block_owner_deletion=True,
    ),
    allowed_policies=ALL_POLICIES,
    allowed_disruption_modes=ALL_DISRUPTION_MODES,
)


def _item(case: dict[str, Any], scheduling: dict[str, Any] | None) -> WorkloadItem:
    cfg = from_dict(scheduling, JobSchedulingConfiguration) if scheduling is not None else None
    inp = WorkloadInput.at_standard_paths()
    if cfg is not None:
        inp = WorkloadInput.at_standard_paths(
            policy=cfg.scheduling_policy,
            constraints=cfg.scheduling_constraints,
            disruption_mode=cfg.disruption_mode,
            resource_claims=cfg.resource_claims,
        )
    parallelism = case["parallelism"]

    def default_min_count(c: SchedulingConfig) -> SchedulingConfig:
        if c.policy == "gang" and c.min_count is None:
            return attrs.evolve(c, min_count=max(1, 1 if parallelism is None else parallelism))
        return c

    return WorkloadItem(
        name="trainer-pgt-0",
        path="spec.scheduling",
        default_config=SchedulingConfig(policy="basic", priority_class_name=case["pcn"] or None),
        input=inp,
        callbacks=[default_min_count],
    )


@pytest.mark.parametrize("vector", _VECTORS, ids=[f"v{i}" for i in range(len(_VECTORS))])
def test_matches_upstream(vector: dict[str, Any]) -> None:
    case, expected = vector["input"], vector["expected"]
    builder = Builder(_item(case, case["scheduling"]), OPTS)
    old = _item(case, case["old"]) if "old" in case else None
    assert [str(e) for e in builder.validate(old_root=old)] == expected["errors"]
    if "buildError" in expected:
        with pytest.raises(BuildError, match=expected["buildError"]):
            builder.build_workload()
        return
    workload = builder.build_workload()
    spec = to_dict(workload.spec)
    assert spec == expected["workloadSpec"]
    assert to_dict(builder.new_pod_group("pg", "trainer-pgt-0").spec) == expected["podGroupSpec"]


def test_vectors_cover_errors_and_updates() -> None:
    assert len(_VECTORS) >= 100
    assert sum(1 for v in _VECTORS if v["expected"]["errors"]) > 30
    assert sum(1 for v in _VECTORS if "old" in v["input"]) > 20


# ------------------------------------------------------------------------------ trees

_TREE_VECTORS = json.loads(
    (Path(__file__).with_name("test_builder_upstream_tree_vectors.json")).read_text()
)["cases"]

_TREE_OWNER = OwnerReference(
    api_version="apps.example.com/v1", kind="Thing", name="t", uid="u", controller=True
)


def _block(value: Any, cls: type[Any]) -> Any:
    return from_dict(value, cls) if value is not None else None


def _tree_item(node: dict[str, Any], path: str) -> WorkloadItem:
    default = SchedulingConfig(priority_class_name=node["pcn"] or None)
    if node.get("defaultGang") is not None:
        default = attrs.evolve(default, policy="gang", min_count=node["defaultGang"])
    inp = WorkloadInput(
        policy=_block(node.get("policy"), WorkloadPodGroupSchedulingPolicy),
        constraints=_block(node.get("constraints"), WorkloadPodGroupSchedulingConstraints),
        disruption_mode=_block(node.get("mode"), WorkloadPodGroupDisruptionMode),
        composite_policy=_block(node.get("cpolicy"), WorkloadCompositePodGroupSchedulingPolicy),
        composite_constraints=_block(
            node.get("cconstraints"), WorkloadCompositePodGroupSchedulingConstraints
        ),
        composite_disruption_mode=_block(
            node.get("cmode"), WorkloadCompositePodGroupDisruptionMode
        ),
        policy_path="schedulingPolicy",
        constraints_path="schedulingConstraints",
        disruption_mode_path="disruptionMode",
    )
    children = [
        _tree_item(child, f"{path}.children[{i}]" if path else "")
        for i, child in enumerate(node.get("children", []))
    ]
    return WorkloadItem(
        name=node["name"], path=path, default_config=default, input=inp, children=children
    )


@pytest.mark.parametrize("vector", _TREE_VECTORS, ids=[f"t{i}" for i in range(len(_TREE_VECTORS))])
def test_tree_matches_upstream(vector: dict[str, Any]) -> None:
    case, expected = vector["input"], vector["expected"]
    opts = BuildOptions(
        name="wl",
        namespace="ns",
        owner=_TREE_OWNER,
        allowed_policies={("basic", "gang")[p] for p in case["policies"]},
        allowed_disruption_modes={("single", "all")[m] for m in case["modes"]},
    )
    builder = Builder(_tree_item(case["root"], "spec"), opts)
    old = _tree_item(case["old"], "") if "old" in case else None
    assert [str(e) for e in builder.validate(old_root=old)] == expected["errors"]
    if "buildError" in expected:
        with pytest.raises(BuildError) as info:
            builder.build_workload()
        assert str(info.value) == expected["buildError"]
        return
    assert to_dict(builder.build_workload().spec) == expected["spec"]

    def materialise(make: Any, name: str) -> Any:
        try:
            return to_dict(make(f"{name}-x", name).spec)
        except BuildError:
            return None

    cpgs = [materialise(builder.new_composite_pod_group, n) for n in case["cpgs"]]
    assert cpgs == expected["cpgs"]
    pgs = [materialise(builder.new_pod_group, n) for n in case["pgs"]]
    assert pgs == expected["pgs"]
