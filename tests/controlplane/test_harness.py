"""The harness itself: versions, served APIs, feature gates, identities, life cycle, CLI."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from workloadbuilder.testing import (
    WAS_FEATURE_GATES,
    BinariesNotFoundError,
    ControlPlane,
    ControlPlaneError,
    RestClient,
    find_binaries,
)

pytestmark = pytest.mark.controlplane


def test_version_is_v1_37_2(api: RestClient) -> None:
    resp = api.get("/version")
    assert resp.status == 200
    assert resp.body["gitVersion"] == "v1.37.2"
    assert (resp.body["major"], resp.body["minor"]) == ("1", "37")


def test_scheduling_versions_served(api: RestClient) -> None:
    beta = api.get("/apis/scheduling.k8s.io/v1beta1")
    alpha = api.get("/apis/scheduling.k8s.io/v1alpha3")
    assert beta.status == 200 and alpha.status == 200
    beta_names = {r["name"] for r in beta.body["resources"]}
    alpha_names = {r["name"] for r in alpha.body["resources"]}
    assert {"workloads", "podgroups", "podgroups/status"} <= beta_names
    assert "compositepodgroups" not in beta_names  # CompositePodGroup is v1alpha3 only
    assert {"workloads", "podgroups", "compositepodgroups", "compositepodgroups/status"} <= (
        alpha_names
    )
    # Workload has no status subresource.
    assert "workloads/status" not in beta_names | alpha_names
    # v1alpha2 (1.36) is gone.
    assert api.get("/apis/scheduling.k8s.io/v1alpha2").status == 404


def test_all_was_feature_gates_enabled(api: RestClient) -> None:
    status, raw = api.request_raw("GET", "/metrics")
    assert status == 200
    text = raw.decode()
    for gate in WAS_FEATURE_GATES:
        match = re.search(
            rf'kubernetes_feature_enabled\{{name="{gate}",stage="(\w*)"\}} (\d)', text
        )
        assert match, f"gate {gate} missing from /metrics"
        assert match.group(2) == "1", f"gate {gate} is off"


def test_job_scheduling_field_is_served(api: RestClient, namespace: str) -> None:
    # WorkloadWithJob on: spec.scheduling persists on a Job.
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {
            "parallelism": 2,
            "completions": 2,
            "scheduling": {"schedulingPolicy": {"gang": {"minCount": 2}}},
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "busybox"}],
                }
            },
        },
    }
    resp = api.create(f"/apis/batch/v1/namespaces/{namespace}/jobs", job, dry_run=True)
    assert resp.status == 201, resp.message
    assert resp.body["spec"]["scheduling"] == {"schedulingPolicy": {"gang": {"minCount": 2}}}


def test_minted_identity_is_subject_to_rbac(control_plane: ControlPlane, namespace: str) -> None:
    path = f"/apis/scheduling.k8s.io/v1beta1/namespaces/{namespace}/podgroups"
    with control_plane.client("alice", ["team-a"]) as alice:
        denied = alice.get(path)
        assert denied.status == 403
        assert 'User "alice"' in denied.message
    with control_plane.client() as admin:
        role = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "pg-reader"},
            "rules": [
                {
                    "apiGroups": ["scheduling.k8s.io"],
                    "resources": ["podgroups"],
                    "verbs": ["get", "list"],
                }
            ],
        }
        binding = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "team-a-reads"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "pg-reader",
            },
            "subjects": [
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "team-a"}
            ],
        }
        rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}"
        assert admin.create(f"{rbac}/roles", role).status == 201
        assert admin.create(f"{rbac}/rolebindings", binding).status == 201
    kubeconfig = control_plane.mint_kubeconfig("alice", ["team-a"])
    doc = yaml.safe_load(kubeconfig.read_text())
    assert kubeconfig.is_absolute()
    assert doc["clusters"][0]["cluster"]["server"] == control_plane.server
    user = doc["users"][0]["user"]
    with RestClient(
        control_plane.server,
        ca_file=Path(doc["clusters"][0]["cluster"]["certificate-authority"]),
        cert_file=Path(user["client-certificate"]),
        key_file=Path(user["client-key"]),
    ) as alice:
        # RBAC decisions are cached for a moment only on webhook authorizers; RBAC is immediate.
        assert alice.get(path).status == 200
        assert alice.create(path, {"apiVersion": "scheduling.k8s.io/v1beta1"}).status == 403


def test_admin_kubeconfig_is_usable(control_plane: ControlPlane) -> None:
    doc = yaml.safe_load(control_plane.kubeconfig.read_text())
    cluster = doc["clusters"][0]["cluster"]
    user = doc["users"][0]["user"]
    with RestClient(
        cluster["server"],
        ca_file=Path(cluster["certificate-authority"]),
        cert_file=Path(user["client-certificate"]),
        key_file=Path(user["client-key"]),
    ) as client:
        review = client.create(
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        )
    assert review.status == 201, review.message
    assert "system:masters" in review.body["status"]["userInfo"]["groups"]


def test_missing_binaries_error_says_how_to_build(tmp_path: Path) -> None:
    with pytest.raises(BinariesNotFoundError) as info:
        find_binaries(tmp_path)
    message = str(info.value)
    assert "hack/build-controlplane.sh" in message
    assert "etcd" in message and "kube-apiserver" in message
    assert info.value.missing == ["etcd", "kube-apiserver"]
    with pytest.raises(BinariesNotFoundError):
        ControlPlane(bin_dir=tmp_path)


async def test_async_context_manager_starts_and_cleans_up(control_plane: ControlPlane) -> None:
    # A second, private plane (the session one keeps running): own ports, own PKI.
    async with ControlPlane(bin_dir=control_plane.bin_dir) as plane:
        run_dir = plane.run_dir
        assert plane.running and plane.server != control_plane.server
        with plane.client() as client:
            assert client.get("/readyz").status == 200
        pids = [p.popen.pid for p in plane._procs]
    assert not plane.running
    assert not run_dir.exists()  # temporary run directory removed
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_cli_up_prints_kubeconfig_and_stops_on_sigterm(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    run_dir = tmp_path / "cli"
    env = dict(os.environ, WORKLOADBUILDER_BIN_DIR=str(control_plane.bin_dir))
    proc = subprocess.Popen(
        [sys.executable, "-m", "workloadbuilder.cli", "controlplane", "up", "--dir", str(run_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until ready (or the process exits)
        assert line.startswith("KUBECONFIG="), (line, proc.stderr.read() if proc.stderr else "")
        kubeconfig = Path(line.strip().split("=", 1)[1])
        assert kubeconfig.is_absolute() and kubeconfig.is_file()
        cluster = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]
        assert cluster["server"].startswith("https://127.0.0.1:")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    logs = run_dir / "logs"
    assert (logs / "kube-apiserver.log").is_file() and (logs / "etcd.log").is_file()
    assert not (run_dir / "etcd-data").exists()
    # every component of that plane is gone
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert str(run_dir) not in out


def test_cli_build_reuses_cached_binaries(control_plane: ControlPlane) -> None:
    env = dict(os.environ, WORKLOADBUILDER_BIN_DIR=str(control_plane.bin_dir))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "workloadbuilder.cli",
            "controlplane",
            "build",
            "etcd",
            "kube-apiserver",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == str(control_plane.bin_dir)
    assert "cached:" in out.stderr and "building" not in out.stderr


def test_cli_controlplane_without_subcommand_is_a_usage_error() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "workloadbuilder.cli", "controlplane"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 2
    assert "sub-command is required" in out.stderr


def test_second_start_is_refused_and_harmless(control_plane: ControlPlane, api: RestClient) -> None:
    with pytest.raises(ControlPlaneError, match="already started"):
        control_plane.start()
    assert control_plane.running
    assert api.get("/readyz").status == 200


def test_minted_identity_may_be_longer_than_64_characters(control_plane: ControlPlane) -> None:
    """Service-account usernames exceed the RFC 5280 64-character CN bound; the API server
    reads such client certificates anyway, so RBAC tests can act as a service account."""
    user = "system:serviceaccount:workloadbuilder-system:workloadbuilder-scheduler"
    groups = ["system:serviceaccounts", "system:serviceaccounts:workloadbuilder-system"]
    assert len(user) > 64
    doc = yaml.safe_load(control_plane.mint_kubeconfig(user, groups).read_text())
    cred = doc["users"][0]["user"]
    with RestClient(
        control_plane.server,
        ca_file=Path(doc["clusters"][0]["cluster"]["certificate-authority"]),
        cert_file=Path(cred["client-certificate"]),
        key_file=Path(cred["client-key"]),
    ) as sa:
        review = sa.create(
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        )
    assert review.status == 201, review.message
    info = review.body["status"]["userInfo"]
    assert info["username"] == user
    assert set(groups) <= set(info["groups"])
