"""Differential vectors: the Builder against upstream workloadbuilder v0.37.2.

``test_builder_upstream_vectors.json`` was produced by running the Go library
``k8s.io/component-helpers/scheduling/schedulingv1/workloadbuilder`` v0.37.2 (the version
kube-controller-manager v1.37.2 uses) on 150 random Job-style items: a leaf
``trainer-pgt-0`` at ``spec.scheduling`` with the Job controller's defaults (basic, the pod
template's priority class, gang minCount defaulting to parallelism clamped to >= 1) and random,
often invalid, ``spec.scheduling`` building blocks, some of them as updates of an old item.
Each vector records the exact ``Validate`` error strings and the compiled Workload / PodGroup
specs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest

from workloadbuilder.api import JobSchedulingConfiguration, OwnerReference, from_dict, to_dict
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

_VECTORS = json.loads(
    (Path(__file__).with_name("test_builder_upstream_vectors.json")).read_text()
)["cases"]

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
