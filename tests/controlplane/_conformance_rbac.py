"""The conformance runner's own RBAC (examples/conformance/): bind the ClusterRole to a user
on a real API server, and a Cluster that records the rules each call needs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from controlplane._recording import RecordingCluster, Rule, rules_granted
from workloadbuilder.cluster import KubeCluster
from workloadbuilder.testing import ControlPlane

__all__ = [
    "INTEGRATION_PROFILE_ONLY",
    "RUNNER_USER",
    "SCHEDULER_PROFILE_ONLY",
    "RecordingCluster",
    "granted",
    "restricted_runner",
]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "conformance"
RUNNER_USER = "conformance-runner"


#: the rules only the integration profile uses (Workloads, the sample kinds)
INTEGRATION_PROFILE_ONLY: set[Rule] = {
    ("scheduling.k8s.io", "workloads", "list"),
    ("scheduling.k8s.io", "workloads", "delete"),
    ("scheduling.k8s.io", "workloads", "create"),
    ("", "configmaps", "create"),
    ("batch", "jobs", "list"),
    *(
        (g, r, v)
        for g, r in (
            ("batch", "jobs"),
            ("jobset.x-k8s.io", "jobsets"),
            ("leaderworkerset.x-k8s.io", "leaderworkersets"),
        )
        for v in ("create", "get", "patch", "delete")
    ),
}
#: the rules only the scheduler profile uses (fake Nodes, PriorityClasses, its own groups)
SCHEDULER_PROFILE_ONLY: set[Rule] = {
    ("", "nodes", "create"),
    ("", "nodes", "delete"),
    ("", "nodes/status", "patch"),
    ("scheduling.k8s.io", "priorityclasses", "create"),
    ("scheduling.k8s.io", "priorityclasses", "delete"),
    ("", "events", "list"),
    ("", "pods", "get"),
    ("scheduling.k8s.io", "podgroups", "create"),
    ("scheduling.k8s.io", "podgroups", "get"),
    ("scheduling.k8s.io", "podgroups", "patch"),
    ("scheduling.k8s.io", "compositepodgroups", "create"),
    ("scheduling.k8s.io", "compositepodgroups", "get"),
    ("", "pods/status", "patch"),
    *(("policy", "poddisruptionbudgets", v) for v in ("create", "get", "list", "delete")),
    *(
        ("resource.k8s.io", r, v)
        for r in ("deviceclasses", "resourceslices")
        for v in ("create", "delete")
    ),
    *(
        ("resource.k8s.io", r, v)
        for r in ("resourceclaims", "resourceclaimtemplates")
        for v in ("create", "list", "delete")
    ),
}


def _docs() -> list[dict[str, Any]]:
    return [
        yaml.safe_load((EXAMPLE / f).read_text())
        for f in ("clusterrole.yaml", "clusterrolebinding.yaml")
    ]


def granted() -> set[Rule]:
    """Every (group, resource, verb) the ClusterRole grants."""
    return rules_granted(_docs()[0]["rules"])


def restricted_runner(plane: ControlPlane) -> RecordingCluster:
    """Apply the ClusterRole and its binding to :data:`RUNNER_USER` (as the admin) and
    return a recording Cluster authenticated as that user."""
    with plane.client() as api:
        for doc, path in zip(
            _docs(),
            (
                "/apis/rbac.authorization.k8s.io/v1/clusterroles",
                "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            ),
            strict=True,
        ):
            resp = api.create(path, doc)
            assert resp.status in (201, 409), resp.message
    return RecordingCluster(KubeCluster.from_kubeconfig(plane.mint_kubeconfig(RUNNER_USER)))
