"""workloadbuilder.resources: effective pod requests as kube-scheduler computes them."""

from __future__ import annotations

import pytest

from workloadbuilder.resources import is_pod_level_resource, parse_quantity, pod_requests


def _c(**requests: str) -> dict[str, object]:
    return {"resources": {"requests": requests}}


def test_sidecars_add_cumulatively_to_later_init_containers() -> None:
    spec = {
        "initContainers": [
            {**_c(cpu="1"), "restartPolicy": "Always"},
            _c(cpu="2"),  # runs next to the first sidecar: 3
            {**_c(cpu="1"), "restartPolicy": "Always"},
            _c(cpu="2500m"),  # next to both sidecars: 4.5
        ],
        "containers": [_c(cpu="1")],
    }
    # containers + sidecars = 3, the largest init phase = 4.5
    assert pod_requests(spec) == {"cpu": 4500}
    spec["containers"] = [_c(cpu="3")]
    assert pod_requests(spec) == {"cpu": 5000}


def test_pod_level_resources_override_and_overhead_adds() -> None:
    pod = {
        "spec": {
            "containers": [_c(cpu="1", memory="1Gi", **{"nvidia.com/gpu": "1"})],
            "resources": {"requests": {"cpu": "4"}, "limits": {"memory": "8Gi"}},
            "overhead": {"cpu": "250m", "memory": "64Mi"},
        }
    }
    assert pod_requests(pod) == {
        "cpu": 4250,
        "memory": 8 * 2**30 + 64 * 2**20,
        "nvidia.com/gpu": 1,  # not a pod-level resource: from the containers
    }
    assert is_pod_level_resource("hugepages-2Mi") and not is_pod_level_resource("pods")


def test_invalid_quantities() -> None:
    spec = {"containers": [_c(cpu="lots", memory="1Gi")]}
    with pytest.raises(ValueError):
        pod_requests(spec)
    assert pod_requests(spec, strict=False) == {"memory": 2**30}


def test_repeated_quantities_parse_the_same_per_resource() -> None:
    # parsed strings are remembered per (text, cpu or not): the second call must agree
    for _ in range(2):
        assert parse_quantity("500m", "cpu") == 500
        assert parse_quantity("500m", "memory") == 1  # 0.5 bytes, rounded up
        assert parse_quantity("1Gi", "memory") == 2**30
        assert parse_quantity("1Gi") == 2**30
        assert parse_quantity(2, "cpu") == 2000
        with pytest.raises(ValueError):
            parse_quantity("12x", "cpu")
