"""The deployment manifests under ``examples/deploy/``: valid YAML, the expected kinds, the
Kubernetes 1.37 schemas (``kubernetes_validate``, strict: unknown fields are errors), and the
consistency between them (names, namespaces, ports, probes, the CLI's flags)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from workloadbuilder.scheduler.cli import register

DEPLOY_DIR = Path(__file__).resolve().parents[2] / "examples" / "deploy"
SCHEDULER_DIR = DEPLOY_DIR / "scheduler"
K8S_VERSION = "1.37.0"

EXPECTED_KINDS = {
    "namespace.yaml": "Namespace",
    "serviceaccount.yaml": "ServiceAccount",
    "clusterrole.yaml": "ClusterRole",
    "clusterrolebinding.yaml": "ClusterRoleBinding",
    "role.yaml": "Role",
    "rolebinding.yaml": "RoleBinding",
    "deployment.yaml": "Deployment",
    "kustomization.yaml": "Kustomization",
}


def _documents(path: Path) -> list[dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    assert docs, f"{path} is empty"
    for d in docs:
        assert isinstance(d, dict), f"{path}: a document is not a mapping"
    return docs


def _all_yaml() -> list[Path]:
    return sorted([*DEPLOY_DIR.rglob("*.yaml"), *DEPLOY_DIR.rglob("*.yml")])


def _by_kind(kind: str) -> dict[str, Any]:
    """The scheduler's manifest of ``kind`` (examples/deploy/integrations has its own test)."""
    files = sorted(SCHEDULER_DIR.glob("*.yaml"))
    (doc,) = [d for p in files for d in _documents(p) if d.get("kind") == kind]
    return doc


def test_every_expected_file_exists_with_its_kind() -> None:
    for name, kind in EXPECTED_KINDS.items():
        docs = _documents(SCHEDULER_DIR / name)
        assert [d["kind"] for d in docs] == [kind], name
    assert (SCHEDULER_DIR / "Dockerfile").is_file()


@pytest.mark.parametrize("path", _all_yaml(), ids=lambda p: str(p.relative_to(DEPLOY_DIR)))
def test_manifest_conforms_to_the_1_37_schema(path: Path) -> None:
    for doc in _documents(path):
        if doc.get("kind") == "Kustomization":
            continue  # not a Kubernetes API object; checked below
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_kustomization_lists_every_manifest_and_sets_the_namespace() -> None:
    (kustomization,) = _documents(SCHEDULER_DIR / "kustomization.yaml")
    listed = set(kustomization["resources"])
    on_disk = {p.name for p in SCHEDULER_DIR.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == on_disk
    assert kustomization["namespace"] == _by_kind("Namespace")["metadata"]["name"]


def test_names_and_namespaces_agree() -> None:
    ns = _by_kind("Namespace")["metadata"]["name"]
    sa = _by_kind("ServiceAccount")
    assert sa["metadata"]["namespace"] == ns
    sa_name = sa["metadata"]["name"]
    subject = {"kind": "ServiceAccount", "name": sa_name, "namespace": ns}
    crb, rb = _by_kind("ClusterRoleBinding"), _by_kind("RoleBinding")
    assert crb["subjects"] == [subject]
    assert rb["subjects"] == [subject]
    assert crb["roleRef"]["name"] == _by_kind("ClusterRole")["metadata"]["name"]
    role = _by_kind("Role")
    assert role["metadata"]["namespace"] == rb["metadata"]["namespace"] == ns
    assert rb["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    pod = _by_kind("Deployment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == sa_name


def _scheduler_args() -> argparse.Namespace:
    deployment = _by_kind("Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["workloadbuilder"]
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    ns = _by_kind("Namespace")["metadata"]["name"]
    # the kubelet expands $(POD_NAMESPACE) from the downward API
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    args = [a.replace("$(POD_NAMESPACE)", ns) for a in container["args"]]
    return parser.parse_args(args)


def test_deployment_args_are_accepted_by_the_cli_and_match_the_rbac() -> None:
    args = _scheduler_args()
    assert args.command == "scheduler"
    assert args.leader_elect
    assert args.scheduler_name == "workloadbuilder-scheduler"
    # the Lease the elector uses is the one the Role grants, in the Role's namespace
    lease = args.leader_elect_lease_name or args.scheduler_name
    role = _by_kind("Role")
    assert args.leader_elect_lease_namespace == role["metadata"]["namespace"]
    named = [r for r in role["rules"] if r.get("resourceNames")]
    assert named and all(r["resourceNames"] == [lease] for r in named)


def test_deployment_probes_ports_and_security_context() -> None:
    args = _scheduler_args()
    pod = _by_kind("Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["metrics"] == args.metrics_port
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert set(container["resources"]["requests"]) == {"cpu", "memory"}
    assert container["image"] == "workloadbuilder:0.1.0"
