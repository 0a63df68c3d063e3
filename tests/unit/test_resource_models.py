"""The ``resource.k8s.io/v1`` models: documents as the v1.37 API server serves them
round-trip through the codec unchanged (unknown fields kept), wrong shapes name the field
path, and the pod's claim fields parse."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from workloadbuilder.api import (
    RESOURCE_KINDS,
    CodecError,
    DeviceClass,
    PodResourceClaim,
    PodResourceClaimStatus,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
    from_dict,
    resource_object_from_dict,
    resource_object_to_dict,
    to_dict,
)

V1 = "resource.k8s.io/v1"
SPEC = {
    "devices": {
        "requests": [
            {
                "name": "gpu",
                "exactly": {
                    "deviceClassName": "gpu.example.com",
                    "selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}],
                    "allocationMode": "ExactCount",
                    "count": 2,
                },
            },
            {"name": "alt", "firstAvailable": [{"name": "a", "deviceClassName": "x"}]},
        ],
        "constraints": [{"requests": ["gpu"], "matchAttribute": "gpu.example.com/numa"}],
        "config": [{"requests": ["gpu"], "opaque": {"driver": "d", "parameters": {"k": 1}}}],
    }
}
DOCS: list[dict[str, Any]] = [
    {
        "apiVersion": V1,
        "kind": "DeviceClass",
        "metadata": {"name": "gpu.example.com"},
        "spec": {
            "selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}],
            "extendedResourceName": "example.com/gpu",
        },
    },
    {
        "apiVersion": V1,
        "kind": "ResourceSlice",
        "metadata": {"name": "n1-gpus"},
        "spec": {
            "driver": "gpu.example.com",
            "pool": {"name": "n1", "generation": 3, "resourceSliceCount": 1},
            "nodeName": "n1",
            "devices": [
                {
                    "name": "gpu-0",
                    "attributes": {"model": {"string": "H100"}, "numa": {"int": 0}},
                    "capacity": {"memory": {"value": "80Gi"}},
                    "taints": [{"key": "k", "effect": "NoSchedule"}],
                }
            ],
            "sharedCounters": [{"name": "c", "counters": {"x": {"value": "1"}}}],
        },
    },
    {
        "apiVersion": V1,
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ns", "finalizers": ["x"]},
        "spec": SPEC,
        "status": {
            "allocation": {
                "devices": {
                    "results": [{"request": "gpu", "driver": "d", "pool": "n1", "device": "gpu-0"}]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["n1"]}
                            ]
                        }
                    ]
                },
                "allocationTimestamp": "2026-12-01T00:00:00Z",
            },
            "reservedFor": [
                {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "g", "uid": "u"}
            ],
        },
    },
    {
        "apiVersion": V1,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t", "namespace": "ns"},
        "spec": {"metadata": {"labels": {"a": "b"}}, "spec": SPEC},
    },
]


@pytest.mark.parametrize("doc", DOCS, ids=[d["kind"] for d in DOCS])
def test_documents_round_trip(doc: dict[str, Any]) -> None:
    obj = resource_object_from_dict(copy.deepcopy(doc))
    assert isinstance(obj, RESOURCE_KINDS[doc["kind"]])
    assert resource_object_to_dict(obj) == doc


def test_typed_fields() -> None:
    claim = resource_object_from_dict(DOCS[2])
    assert isinstance(claim, ResourceClaim)
    req = claim.spec.devices.requests[0]
    assert req.exactly is not None and req.exactly.count == 2
    assert claim.spec.devices.requests[1].first_available  # kept, for the scheduler to refuse
    assert claim.spec.devices.constraints[0].match_attribute == "gpu.example.com/numa"
    assert claim.status is not None and claim.status.reserved_for[0].resource == "podgroups"
    sl = resource_object_from_dict(DOCS[1])
    assert isinstance(sl, ResourceSlice) and sl.spec.pool.generation == 3
    assert sl.spec.devices[0].unknown_fields == {"taints": [{"key": "k", "effect": "NoSchedule"}]}
    assert isinstance(resource_object_from_dict(DOCS[0]), DeviceClass)
    assert isinstance(resource_object_from_dict(DOCS[3]), ResourceClaimTemplate)


def test_pod_claim_fields() -> None:
    entry = from_dict({"name": "gpu", "resourceClaimTemplateName": "t"}, PodResourceClaim)
    assert entry.resource_claim_template_name == "t" and entry.resource_claim_name is None
    st = from_dict({"name": "gpu", "resourceClaimName": "p-gpu-x"}, PodResourceClaimStatus)
    assert to_dict(st) == {"name": "gpu", "resourceClaimName": "p-gpu-x"}


@pytest.mark.parametrize(
    ("doc", "path"),
    [
        ({"apiVersion": V1, "kind": "Widget"}, "kind"),
        ({"apiVersion": "resource.k8s.io/v1beta1", "kind": "DeviceClass"}, "apiVersion"),
        (
            {"apiVersion": V1, "kind": "ResourceSlice", "metadata": {}, "spec": {"driver": "d"}},
            "spec.pool",
        ),
        (
            {
                "apiVersion": V1,
                "kind": "ResourceClaim",
                "spec": {"devices": {"requests": [{"name": "r", "exactly": {"count": "2"}}]}},
            },
            "spec.devices.requests[0].exactly",
        ),
    ],
)
def test_wrong_shapes_name_the_field(doc: dict[str, Any], path: str) -> None:
    with pytest.raises(CodecError) as err:
        resource_object_from_dict(doc)
    assert err.value.path.startswith(path)
