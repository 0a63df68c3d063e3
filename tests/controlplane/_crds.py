"""Structural JobSet and LeaderWorkerSet CRDs for the tests (from the published API types,
reduced to the fields the integrations read) and the fixture that installs them with the
example TrainJob CRD."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from workloadbuilder.testing import ControlPlane

__all__ = ["JOBSET_CRD", "LWS_CRD", "crds", "crds_kcm", "install_crds"]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "trainjob"

_ANY = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
_SCHEDULING = {
    "type": "object",
    "description": "KEP-6089 building blocks (WorkloadPodGroup* / per-entry lists)",
    "x-kubernetes-preserve-unknown-fields": True,
}


def _crd(group: str, kind: str, plural: str, version: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {"spec": spec, "status": _ANY},
                        }
                    },
                }
            ],
        },
    }


#: jobset.x-k8s.io/v1alpha2 JobSetSpec (api/jobset/v1alpha2/jobset_types.go), reduced
JOBSET_CRD = _crd(
    "jobset.x-k8s.io",
    "JobSet",
    "jobsets",
    "v1alpha2",
    {
        "type": "object",
        "properties": {
            "replicatedJobs": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["name", "template"],
                    "properties": {
                        "name": {"type": "string"},
                        "replicas": {"type": "integer", "format": "int32", "default": 1},
                        "groupName": {"type": "string"},
                        "dependsOn": {"type": "array", "items": _ANY},
                        "template": _ANY,
                    },
                },
            },
            "startupPolicy": _ANY,
            "successPolicy": _ANY,
            "failurePolicy": _ANY,
            "network": _ANY,
            "suspend": {"type": "boolean"},
            "managedBy": {"type": "string"},
            "ttlSecondsAfterFinished": {"type": "integer", "format": "int32"},
            "coordinator": _ANY,
            "scheduling": _SCHEDULING,
        },
    },
)

#: leaderworkerset.x-k8s.io/v1 LeaderWorkerSetSpec (api/leaderworkerset/v1), reduced
LWS_CRD = _crd(
    "leaderworkerset.x-k8s.io",
    "LeaderWorkerSet",
    "leaderworkersets",
    "v1",
    {
        "type": "object",
        "properties": {
            "replicas": {"type": "integer", "format": "int32", "default": 1},
            "leaderWorkerTemplate": {
                "type": "object",
                "properties": {
                    "size": {"type": "integer", "format": "int32", "default": 1},
                    "leaderTemplate": _ANY,
                    "workerTemplate": _ANY,
                    "restartPolicy": {"type": "string"},
                    "subGroupPolicy": _ANY,
                    "resizePolicy": {"type": "string"},
                },
            },
            "rolloutStrategy": _ANY,
            "startupPolicy": {"type": "string"},
            "networkConfig": _ANY,
            "scheduling": _SCHEDULING,
        },
    },
)


@pytest.fixture(scope="session")
def crds(control_plane: ControlPlane) -> list[str]:
    """Install the JobSet, LWS and TrainJob CRDs and wait until they are served."""
    return install_crds(control_plane)


@pytest.fixture(scope="session")
def crds_kcm(control_plane_kcm: ControlPlane) -> list[str]:
    """The same CRDs on the plane with kube-controller-manager."""
    return install_crds(control_plane_kcm)


def install_crds(control_plane: ControlPlane) -> list[str]:
    """Install the JobSet, LWS and TrainJob CRDs on ``control_plane``; their names once
    served."""
    trainjob = yaml.safe_load((EXAMPLE / "crd.yaml").read_text())
    names = []
    with control_plane.client() as api:
        for crd in (JOBSET_CRD, LWS_CRD, trainjob):
            for attempt in range(10):  # a loaded server may answer 429/5xx for a moment
                r = api.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
                if r.ok or r.status == 409:
                    break
                assert r.status >= 429, f"{crd['metadata']['name']}: {r.status} {r.message}"
                time.sleep(0.5 * (attempt + 1))
            else:
                pytest.fail(f"CRD {crd['metadata']['name']} not created: {r.message}")
            names.append(crd["metadata"]["name"])
        deadline = time.monotonic() + 180
        for crd in (JOBSET_CRD, LWS_CRD, trainjob):
            name, spec = crd["metadata"]["name"], crd["spec"]
            collection = (
                f"/apis/{spec['group']}/{spec['versions'][0]['name']}/{spec['names']['plural']}"
            )
            while True:
                r = api.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
                conds = (r.body or {}).get("status", {}).get("conditions", []) if r.ok else []
                established = any(
                    c.get("type") == "Established" and c.get("status") == "True" for c in conds
                )
                if established and api.get(collection).ok:  # served, not only established
                    break
                if time.monotonic() > deadline:
                    pytest.fail(f"CRD {name} not served: {r.status} {conds}")
                time.sleep(0.2)
    return names
