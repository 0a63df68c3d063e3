"""The least-privilege RBAC of ``examples/deploy/integrations`` on the real v1.37.2 API
server.

The Namespace, ServiceAccount, ClusterRole(Binding) and Role(Binding) are applied as the
admin; the integrations then run as ``system:serviceaccount:workloadbuilder-system:
workloadbuilder-integrations`` (a client certificate for that user: RBAC matches
ServiceAccount subjects by user name) over a Cluster wrapper that records every API call:
leader election, the ``--job-mode auto`` probe, JobSet / LWS / opted-in Job objects created,
resized, mirrored (events) and deleted. No call is forbidden; every granted rule is used
(``get`` of scheduling objects only happens after an ``AlreadyExists`` and is exempt); the
ClusterRole equals ``integrations.rules_for(...)``; requests outside the role are
``Forbidden``; the Deployment, Service and MutatingWebhookConfiguration pass server-side dry
runs.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from controlplane._recording import RecordingCluster, rules_granted
from workloadbuilder.api import PodGroup
from workloadbuilder.cluster import KubeCluster
from workloadbuilder.errors import Forbidden, NotFound
from workloadbuilder.integrations import rules_for
from workloadbuilder.integrations.cli import detect_native_job_integration, run_integrations
from workloadbuilder.integrations.job import SCHEDULING_ANNOTATION
from workloadbuilder.integrations.rbac import LEADER_ELECTION_RULES
from workloadbuilder.runtime import LeaderElector
from workloadbuilder.testing import (
    ControlPlane,
    make_job,
    make_jobset,
    make_lws,
    make_replicated_job,
    make_scheduling,
)

pytestmark = pytest.mark.controlplane

DEPLOY = Path(__file__).resolve().parents[2] / "examples" / "deploy" / "integrations"
NS = "workloadbuilder-system"
SA = "workloadbuilder-integrations"

_PATHS = {
    "Namespace": "/api/v1/namespaces",
    "ServiceAccount": f"/api/v1/namespaces/{NS}/serviceaccounts",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "Role": f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/roles",
    "RoleBinding": f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/rolebindings",
    "Deployment": f"/apis/apps/v1/namespaces/{NS}/deployments",
    "Service": f"/api/v1/namespaces/{NS}/services",
    "MutatingWebhookConfiguration": (
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
    ),
}


def _manifests() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    docs: list[dict[str, Any]] = []
    for name in kustomization["resources"]:
        docs.extend(d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d)
    return docs


async def _until(check: Callable[[], Awaitable[bool]], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, "condition not reached before the deadline"
        await asyncio.sleep(0.1)


def test_clusterrole_matches_the_code() -> None:
    (role,) = [d for d in _manifests() if d["kind"] == "ClusterRole"]
    assert rules_granted(role["rules"]) == rules_granted(rules_for(["job", "jobset", "lws"]))
    (lease_role,) = [d for d in _manifests() if d["kind"] == "Role"]
    assert {v for r in lease_role["rules"] for v in r["verbs"]} == {
        v for r in LEADER_ELECTION_RULES for v in r["verbs"]
    }


@pytest.fixture(scope="module")
def sa_kubeconfig(control_plane: ControlPlane, crds: list[str]) -> Path:
    """Apply the manifests (RBAC for real, the rest as dry runs); a kubeconfig of the
    ServiceAccount's identity."""
    with control_plane.client() as api:
        for doc in _manifests():
            if doc["kind"] in ("Deployment", "Service", "MutatingWebhookConfiguration"):
                r = api.create(_PATHS[doc["kind"]], doc, dry_run=True)
            else:
                r = api.create(_PATHS[doc["kind"]], doc)
                if r.status == 409:
                    continue
            assert r.ok, f"{doc['kind']}: {r.message}"
    user = f"system:serviceaccount:{NS}:{SA}"
    return control_plane.mint_kubeconfig(
        user, ["system:serviceaccounts", f"system:serviceaccounts:{NS}"]
    )


async def test_rbac_is_sufficient_and_minimal(
    control_plane: ControlPlane, sa_kubeconfig: Path
) -> None:
    kubeconfig = sa_kubeconfig
    ns = control_plane.create_namespace("deploy-int-")
    admin = KubeCluster.from_kubeconfig(control_plane.kubeconfig)
    rec = RecordingCluster(KubeCluster.from_kubeconfig(kubeconfig))
    try:
        # a Lease left by an earlier test's integrations (same name) would make the elector
        # only get/update it, and the role's `create` would look unused
        with contextlib.suppress(NotFound):
            await admin.delete("Lease", SA, NS)
        assert await detect_native_job_integration(rec, ns) is True
        stop = asyncio.Event()
        elector = LeaderElector(rec, identity="test", name=SA, namespace=NS, retry_period=0.2)
        task = asyncio.create_task(
            run_integrations(rec, ["job", "jobset", "lws"], stop=stop, elector=elector)
        )
        await admin.create(
            make_jobset("js", ns)
            .scheduling(make_scheduling().gang())
            .replicated_job(make_replicated_job("w"))
            .obj()
        )
        await admin.create(
            make_lws("l", ns).replicas(1).size(2).scheduling(make_scheduling()).obj()
        )
        job = make_job("opt", ns).parallelism(2).obj()
        job["metadata"]["annotations"] = {
            SCHEDULING_ANNOTATION: json.dumps({"schedulingPolicy": {"gang": {}}})
        }
        await admin.create(job)

        async def groups() -> list[PodGroup]:
            return [p for p in (await admin.list("PodGroup", ns)).items if isinstance(p, PodGroup)]

        await _until(lambda: _count(groups, 3))
        # resize (patch), status mirroring (events), deletion (delete)
        await admin.patch("Job", "opt", {"spec": {"parallelism": 3}}, ns)
        await _until(lambda: _min_counts(groups, 3))
        pg = next(p for p in await groups() if p.metadata.name == "l-0")
        cond = {
            "type": "PodGroupInitiallyScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "no nodes",
            "lastTransitionTime": "2026-12-01T00:00:00Z",
        }
        await admin.patch(
            "PodGroup",
            pg.metadata.name or "",
            {"status": {"conditions": [cond]}},
            ns,
            subresource="status",
        )

        async def has_event() -> bool:
            return any(isinstance(e, dict) for e in (await admin.list("Event", ns)).items)

        await _until(has_event)
        await admin.delete("LeaderWorkerSet", "l", ns)

        async def workload_gone() -> bool:
            names = [w.metadata.name for w in (await admin.list("Workload", ns)).items]  # type: ignore[union-attr]
            return "l" not in names

        await _until(workload_gone)
        stop.set()
        assert await asyncio.wait_for(task, 30) == 0
    finally:
        await admin.close()
    assert rec.forbidden == []
    granted = rules_granted(rules_for(["job", "jobset", "lws"])) | {
        ("coordination.k8s.io", "leases", v) for v in ("get", "create", "update")
    }
    assert rec.used <= granted, rec.used - granted
    exempt = {
        ("scheduling.k8s.io", r, "get") for r in ("workloads", "podgroups", "compositepodgroups")
    }
    exempt |= {
        ("scheduling.k8s.io", "compositepodgroups", v) for v in ("create", "patch", "delete")
    }
    exempt |= {("scheduling.k8s.io", "podgroups", "delete")}  # GC'd with their Workload here
    assert granted - exempt <= rec.used, (granted - exempt) - rec.used
    # outside the role
    outsider = KubeCluster.from_kubeconfig(kubeconfig)
    try:
        for call in (
            outsider.create(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": "x"},
                    "spec": {"containers": [{"name": "c", "image": "x"}]},
                },
                ns,
            ),
            outsider.delete("Job", "opt", ns),
            outsider.list("ConfigMap", ns),
        ):
            with pytest.raises(Forbidden):
                await call
    finally:
        await outsider.close()
        await rec.close()


async def _count(groups: Callable[[], Awaitable[list[PodGroup]]], n: int) -> bool:
    return len(await groups()) >= n


async def _min_counts(groups: Callable[[], Awaitable[list[PodGroup]]], n: int) -> bool:
    return any(
        p.spec.scheduling_policy.gang is not None and p.spec.scheduling_policy.gang.min_count == n
        for p in await groups()
        if (p.metadata.name or "").startswith("opt-")
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _status(url: str, context: ssl.SSLContext | None = None, body: bytes | None = None) -> Any:
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5, context=context) as r:
            return int(r.status), r.read()
    except urllib.error.HTTPError as e:
        return int(e.code), b""
    except OSError:
        return 0, b""


async def test_deployment_command_line_runs_as_the_service_account(
    control_plane: ControlPlane, sa_kubeconfig: Path, tmp_path: Path
) -> None:
    """``workloadbuilder`` + the Deployment's args (kubeconfig for the token, loopback ports,
    certificate files for the Secret): ready = synced and leading, the webhook answers over
    TLS, objects are created, SIGTERM releases the Lease and exits 0."""
    from workloadbuilder.integrations.webhook import self_signed

    (dep,) = [d for d in _manifests() if d["kind"] == "Deployment"]
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["workloadbuilder"]
    args = [a.replace("$(POD_NAMESPACE)", NS) for a in container["args"]]
    cert, key, ca = self_signed(str(tmp_path), ["127.0.0.1"])
    metrics, hook = _free_port(), _free_port()
    argv = [
        str(Path(sys.executable).parent / "workloadbuilder"),
        *args,
        "--kubeconfig",
        str(sa_kubeconfig),
        "--tls-cert",
        cert,
        "--tls-key",
        key,
        "--webhook-port",
        str(hook),
        "--webhook-host",
        "127.0.0.1",
        "--metrics-port",
        str(metrics),
        "--bind-address",
        "127.0.0.1",
    ]
    ns = control_plane.create_namespace("deploy-cli-")
    admin = KubeCluster.from_kubeconfig(control_plane.kubeconfig)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:

        async def ready() -> bool:
            assert proc.poll() is None, proc.communicate()
            code, _ = await asyncio.to_thread(_status, f"http://127.0.0.1:{metrics}/readyz")
            return bool(code == 200)

        await _until(ready)
        lease = await admin.get("Lease", SA, NS)
        assert isinstance(lease, dict) and lease["spec"]["holderIdentity"].endswith(f"_{proc.pid}")
        await admin.create(
            make_lws("l", ns).replicas(1).size(2).scheduling(make_scheduling()).obj()
        )

        async def group() -> bool:
            return [p.metadata.name for p in (await admin.list("PodGroup", ns)).items] == ["l-0"]  # type: ignore[union-attr]

        await _until(group)
        review = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "x",
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "operation": "CREATE",
                "namespace": ns,
                "object": {
                    "metadata": {
                        "name": "l-0",
                        "labels": {
                            "leaderworkerset.sigs.k8s.io/name": "l",
                            "leaderworkerset.sigs.k8s.io/group-index": "0",
                        },
                    },
                    "spec": {"containers": []},
                },
            },
        }
        ctx = ssl.create_default_context(cadata=ca.decode())
        code, body = await asyncio.to_thread(
            _status, f"https://127.0.0.1:{hook}/mutate", ctx, json.dumps(review).encode()
        )
        assert code == 200
        assert json.loads(base64.b64decode(json.loads(body)["response"]["patch"])) == [
            {"op": "add", "path": "/spec/schedulingGroup", "value": {"podGroupName": "l-0"}}
        ]
        code, text = await asyncio.to_thread(_status, f"http://127.0.0.1:{metrics}/metrics")
        assert code == 200 and b"workloadbuilder_webhook_reviews_total" in text
        proc.send_signal(signal.SIGTERM)
        exit_code = await asyncio.to_thread(proc.wait, 30)
        output = proc.stdout.read() if proc.stdout is not None else ""
        assert exit_code == 0, output
        assert "forbidden" not in output.lower(), output
        lease = await admin.get("Lease", SA, NS)
        assert isinstance(lease, dict) and lease["spec"]["holderIdentity"] == ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        await admin.close()
