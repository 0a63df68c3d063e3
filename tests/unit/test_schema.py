"""Every object the builder and the kind adapters emit conforms to the v1.37 OpenAPI schema.

The independent source is ``kubernetes-validate`` 1.37 (JSON schemas generated from the
Kubernetes v1.37 OpenAPI document), in strict mode: unknown fields, wrong types and missing
required fields are errors. It covers ``scheduling.k8s.io`` v1beta1 Workload / PodGroup and
v1alpha3 Workload / PodGroup / CompositePodGroup.
"""

from __future__ import annotations

import copy
import importlib
import subprocess
import sys
from typing import Any

import kubernetes_validate
import pytest
import yaml
from fixtures.manifests import (
    EXAMPLES_DIR,
    built_objects,
    case_manifests,
    manifests,
    owned_manifests,
)

from workloadbuilder.api import object_from_dict

K8S_VERSION = "1.37.0"

CASES = manifests() + owned_manifests()


def schema_errors(obj: dict[str, Any]) -> str | None:
    try:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    except kubernetes_validate.ValidationError as e:
        path = ".".join(str(p) for p in e.path)
        return f"{obj.get('kind')} {obj.get('metadata', {}).get('name')}: {path}: {e.message}"
    return None


def test_the_schema_source_knows_our_kinds_and_rejects_bad_objects() -> None:
    """Guard against a vacuous check: the schemas exist and are strict."""
    good: dict[str, Any] = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pg"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}},
    }
    assert schema_errors(good) is None
    for api_version, kind in [
        ("scheduling.k8s.io/v1beta1", "Workload"),
        ("scheduling.k8s.io/v1alpha3", "Workload"),
        ("scheduling.k8s.io/v1alpha3", "PodGroup"),
        ("scheduling.k8s.io/v1alpha3", "CompositePodGroup"),
    ]:
        empty = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}, "spec": {}}
        # the schema exists (an unknown kind would raise SchemaNotFoundError) and is strict
        with pytest.raises(kubernetes_validate.ValidationError):
            kubernetes_validate.validate(
                {**empty, "spec": {"unknownField": 1}}, K8S_VERSION, strict=True
            )
    unknown = copy.deepcopy(good)
    unknown["spec"]["minCount"] = 2
    assert schema_errors(unknown) is not None
    wrong_type = copy.deepcopy(good)
    wrong_type["spec"]["schedulingPolicy"]["gang"]["minCount"] = "2"
    assert schema_errors(wrong_type) is not None
    missing = copy.deepcopy(good)
    del missing["spec"]["schedulingPolicy"]
    assert schema_errors(missing) is not None
    with pytest.raises(kubernetes_validate.SchemaNotFoundError):
        kubernetes_validate.validate(
            good | {"apiVersion": "scheduling.k8s.io/v1alpha2"}, K8S_VERSION, strict=True
        )


def test_every_adapter_mode_is_covered() -> None:
    kinds = {doc["kind"] for _, doc in CASES}
    assert kinds == {"Job", "JobSet", "LeaderWorkerSet", "GenericWorkload"}
    built = dict(built_objects(case_manifests()))
    emitted = {o["kind"] for objs in built.values() for o in objs}
    assert emitted == {"Workload", "PodGroup", "CompositePodGroup"}


@pytest.mark.parametrize("api_version", ["v1beta1", "v1alpha3"])
@pytest.mark.parametrize(("name", "manifest"), CASES, ids=[n for n, _ in CASES])
def test_built_objects_conform_to_the_v137_schema(
    name: str, manifest: dict[str, Any], api_version: str
) -> None:
    ((_, objects),) = built_objects([(name, manifest)], api_version=api_version)
    assert objects, "nothing was built"
    problems = [p for p in (schema_errors(o) for o in objects) if p]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(("name", "manifest"), CASES, ids=[n for n, _ in CASES])
def test_built_objects_round_trip_through_the_models(name: str, manifest: dict[str, Any]) -> None:
    ((_, objects),) = built_objects([(name, manifest)])
    for obj in objects:
        model = object_from_dict(obj)
        assert model.unknown_fields == {}
        assert model.kind == obj["kind"]


@pytest.mark.parametrize(("name", "manifest"), CASES, ids=[n for n, _ in CASES])
def test_built_objects_pass_the_sdk_validation(name: str, manifest: dict[str, Any]) -> None:
    """Cross-check with the SDK's upstream-equivalent validation (all gates on)."""
    validation = importlib.import_module("workloadbuilder.validation")
    ((_, objects),) = built_objects([(name, manifest)])
    problems = []
    for obj in objects:
        for err in validation.validate_object(object_from_dict(obj)):
            problems.append(f"{obj['kind']} {obj['metadata']['name']}: {err}")
    assert not problems, "\n".join(problems)


def test_builder_facade_objects_conform() -> None:
    from workloadbuilder.api import object_to_dict
    from workloadbuilder.builder import PodSet, simple_workload

    plan = simple_workload(
        name="facade",
        namespace="default",
        owner={
            "apiVersion": "example.com/v1",
            "kind": "Trainer",
            "metadata": {"name": "facade", "uid": "9c2d8a43-5e1f-4a6b-8c7d-0e9f1a2b3c4d"},
        },
        pod_sets=[
            PodSet(name="driver", replicas=1, gang=False),
            PodSet(
                name="workers",
                replicas=4,
                topology_key="topology.kubernetes.io/rack",
                disruption_mode="all",
            ),
        ],
        priority_class_name="high",
    )
    for obj in plan.objects():
        assert schema_errors(object_to_dict(obj)) is None


def test_python_example_prints_conforming_objects() -> None:
    script = EXAMPLES_DIR / "custom_operator.py"
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    docs = [d for d in yaml.safe_load_all(proc.stdout) if d]
    assert [d["kind"] for d in docs] == ["Workload", "PodGroup", "PodGroup"]
    for d in docs:
        assert schema_errors(d) is None
    names = {d["metadata"]["name"] for d in docs[1:]}
    assert all(f"#   {k}: " in proc.stdout for k in ("driver", "workers"))
    assert all(n in proc.stdout.split("# pod set")[1] for n in names)
