"""No secret in the logs: the scheduler and the integrations (with the webhook) run as their
own ServiceAccounts from ``examples/deploy/`` (a real token from the TokenRequest API), at
the most verbose log level, do their job, and stop; their whole output must not contain the
token (nor its signature part), an ``Authorization``/``Bearer`` header, or private-key
material. Also with a token the API server rejects (the error path, where clients tend to
echo what they sent): a clean error naming where the credentials came from, non-zero exit,
and no token in the output; the same with a valid token that may read nothing (403).

(That the roles suffice and are minimal is checked by test_deploy_rbac.py and
test_integrations_deploy.py.)
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from workloadbuilder.testing import ControlPlane, RestClient, make_lws, make_scheduling
from workloadbuilder.testing.builders import make_node, make_pod, make_pod_group

pytestmark = pytest.mark.controlplane

ROOT = Path(__file__).resolve().parents[2]
CLI = str(Path(sys.executable).parent / "workloadbuilder")
POOL = "least-privilege-logs.workloadbuilder.test/pool"
_COLLECTIONS = {
    "Namespace": "/api/v1/namespaces",
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
}


def _docs(component: str) -> list[dict[str, Any]]:
    base = ROOT / "examples" / "deploy" / component
    kustomization = yaml.safe_load((base / "kustomization.yaml").read_text())
    out: list[dict[str, Any]] = []
    for name in kustomization["resources"]:
        out.extend(d for d in yaml.safe_load_all((base / name).read_text()) if d)
    return out


def _apply(api: RestClient, doc: dict[str, Any]) -> None:
    meta = doc["metadata"]
    collection = _COLLECTIONS[doc["kind"]].format(ns=meta.get("namespace", ""))
    resp = api.create(collection, doc)
    if resp.status == 409:
        path = f"{collection}/{meta['name']}"
        rv = api.get(path).body["metadata"]["resourceVersion"]
        resp = api.replace(path, {**doc, "metadata": {**meta, "resourceVersion": rv}})
    assert resp.ok, f"{doc['kind']} {meta['name']}: {resp.status} {resp.message}"


def _kubeconfig(plane: ControlPlane, path: Path, token: str) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "cp",
                        "cluster": {
                            "server": plane.server,
                            "certificate-authority": str(plane.ca_file),
                        },
                    }
                ],
                "users": [{"name": "sa", "user": {"token": token}}],
                "contexts": [{"name": "sa", "context": {"cluster": "cp", "user": "sa"}}],
                "current-context": "sa",
            }
        )
    )
    path.chmod(0o600)
    return path


def _identity(plane: ControlPlane, component: str, tmp: Path) -> tuple[str, Path, list[str]]:
    """Apply the component's RBAC (not its Deployment) and mint a token: (token, kubeconfig,
    the Deployment's args)."""
    docs = _docs(component)
    (sa,) = [d for d in docs if d["kind"] == "ServiceAccount"]
    ns, name = sa["metadata"]["namespace"], sa["metadata"]["name"]
    with plane.client() as api:
        for d in docs:
            if d["kind"] in _COLLECTIONS:
                _apply(api, d)
        resp = api.create(
            f"/api/v1/namespaces/{ns}/serviceaccounts/{name}/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
        )
    assert resp.status == 201, resp.message
    token = str(resp.body["status"]["token"])
    (dep,) = [d for d in docs if d["kind"] == "Deployment"]
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    args = [str(a).replace("$(POD_NAMESPACE)", ns) for a in container["args"]]
    return token, _kubeconfig(plane, tmp / f"{component}.kubeconfig", token), args


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
            return int(r.status) == 200
    except (OSError, urllib.error.HTTPError):
        return False


def _assert_no_secrets(output: str, token: str, extra: tuple[str, ...] = ()) -> None:
    signature = token.rsplit(".", 1)[-1]
    for needle in (token, signature, *extra):
        assert needle not in output, "a secret appears in the log"
    lowered = output.lower()
    for needle in ("bearer ", "authorization:", "private key"):
        assert needle not in lowered, f"{needle!r} appears in the log"


async def _until(check: Any, what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.2)


def _stop(proc: subprocess.Popen[str]) -> tuple[int, str]:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)
    out = proc.stdout.read() if proc.stdout is not None else ""
    if proc.stdout is not None:
        proc.stdout.close()
    return int(proc.returncode), out


async def test_scheduler_logs_hold_no_token(control_plane: ControlPlane, tmp_path: Path) -> None:
    token, kubeconfig, args = _identity(control_plane, "scheduler", tmp_path)
    scheduler = args[args.index("--scheduler-name") + 1]
    ns = control_plane.create_namespace("lp-logs-")
    node = f"{ns}-n0"
    port = _free_port()
    argv = [CLI, "-vv", *args, f"--kubeconfig={kubeconfig}", f"--metrics-port={port}"]
    argv += ["--bind-address=127.0.0.1"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with control_plane.client() as api:
        try:
            body = (
                make_node(node)
                .label(POOL, ns)
                .taint(POOL, ns)
                .resources({"cpu": "8", "memory": "16Gi", "pods": "110"})
                .obj()
            )
            assert api.create("/api/v1/nodes", body).ok
            pgs = f"/apis/scheduling.k8s.io/v1beta1/namespaces/{ns}/podgroups"
            assert api.create(pgs, make_pod_group("g", ns).gang(2).obj()).ok
            for i in range(2):
                pod = (
                    make_pod(f"g-{i}", ns)
                    .pod_group("g")
                    .scheduler_name(scheduler)
                    .node_selector(POOL, ns)
                    .toleration(POOL, ns, effect="NoSchedule", operator="Equal")
                    .request("cpu", "1")
                    .obj()
                )
                assert api.create(f"/api/v1/namespaces/{ns}/pods", pod).ok

            async def bound() -> bool:
                assert proc.poll() is None, _stop(proc)[1][-3000:]
                items = api.get(f"/api/v1/namespaces/{ns}/pods").body["items"]
                return all(p["spec"].get("nodeName") == node for p in items)

            await _until(bound, "the gang bound")
        finally:
            code, out = _stop(proc)
            api.delete(f"/api/v1/nodes/{node}")
    assert code == 0, out[-3000:]
    assert "DEBUG" in out  # the most verbose level was on
    _assert_no_secrets(out, token)


async def test_integrations_and_webhook_logs_hold_no_token(
    control_plane: ControlPlane, crds: list[str], tmp_path: Path
) -> None:
    from workloadbuilder.integrations.webhook import self_signed

    token, kubeconfig, args = _identity(control_plane, "integrations", tmp_path)
    cert, key, ca = self_signed(str(tmp_path / "tls"), ["127.0.0.1"])
    key_pem = Path(key).read_text().strip().splitlines()[1]  # a line of the key material
    args = [a for a in args]
    args[args.index("--tls-cert") + 1] = cert
    args[args.index("--tls-key") + 1] = key
    hook = _free_port()
    args[args.index("--webhook-port") + 1] = str(hook)
    metrics = _free_port()
    args[args.index("--metrics-port") + 1] = str(metrics)
    argv = [CLI, "-vv", *args, f"--kubeconfig={kubeconfig}", "--webhook-host=127.0.0.1"]
    argv += ["--bind-address=127.0.0.1"]
    ns = control_plane.create_namespace("lp-logs-")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        with control_plane.client() as api:

            async def ready() -> bool:
                assert proc.poll() is None, _stop(proc)[1][-3000:]
                return await asyncio.to_thread(_ready, metrics)

            await _until(ready, "the integrations ready (leading)")
            lws = make_lws("l", ns).replicas(1).size(2).scheduling(make_scheduling()).obj()
            path = f"/apis/leaderworkerset.x-k8s.io/v1/namespaces/{ns}/leaderworkersets"
            assert api.create(path, lws).ok

            async def planned() -> bool:
                pgs = f"/apis/scheduling.k8s.io/v1beta1/namespaces/{ns}/podgroups"
                return [g["metadata"]["name"] for g in api.get(pgs).body["items"]] == ["l-0"]

            await _until(planned, "the LWS's PodGroup")
        review = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "u",
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
        import http.client
        import json

        ctx = ssl.create_default_context(cadata=ca.decode())
        conn = http.client.HTTPSConnection("127.0.0.1", hook, context=ctx, timeout=10)
        conn.request("POST", "/mutate", body=json.dumps(review).encode())
        answer = json.loads(conn.getresponse().read())
        conn.close()
        assert answer["response"]["patchType"] == "JSONPatch"
    finally:
        code, out = _stop(proc)
    assert code == 0, out[-3000:]
    assert "DEBUG" in out
    _assert_no_secrets(out, token, (key_pem,))


@pytest.mark.parametrize("verbosity", [(), ("-vv",)], ids=["default", "debug"])
@pytest.mark.parametrize("component", ["scheduler", "integrations"])
def test_a_rejected_token_is_not_echoed(
    control_plane: ControlPlane, tmp_path: Path, component: str, verbosity: tuple[str, ...]
) -> None:
    token = "eyJhbGciOiJSUzI1NiJ9.e30." + secrets.token_urlsafe(40)  # looks like a JWT
    kubeconfig = _kubeconfig(control_plane, tmp_path / "bad.kubeconfig", token)
    args = (
        ["scheduler", "--no-leader-elect", "--metrics-port=0"]
        if component == "scheduler"
        else ["integrations", "run", "--kinds=lws", "--metrics-port=0"]
    )
    proc = subprocess.Popen(
        [CLI, *verbosity, *args, f"--kubeconfig={kubeconfig}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(90)  # both stop at start-up (the integrations used to retry forever)
    code, out = _stop(proc)
    assert code == 1, out[-3000:]
    if not verbosity:  # stack traces only at debug level
        assert "Traceback" not in out, out[-3000:]
    assert "401 Unauthorized" in out, out[-3000:]
    # the message names where the credentials came from (never the credential)
    assert f"rejected the credentials from kubeconfig {kubeconfig}" in out, out[-3000:]
    _assert_no_secrets(out, token)


@pytest.mark.parametrize("component", ["scheduler", "integrations"])
def test_a_token_without_rights_stops_with_the_rule_to_grant(
    control_plane: ControlPlane, tmp_path: Path, component: str
) -> None:
    """A valid token of a ServiceAccount with no role: 403 on the first kind the component
    must read; it exits 1 naming the kind and its role file, without echoing the token."""
    ns = control_plane.create_namespace("lp-norole-")
    with control_plane.client() as api:
        sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "nobody"}}
        assert api.create(f"/api/v1/namespaces/{ns}/serviceaccounts", sa).ok
        resp = api.create(
            f"/api/v1/namespaces/{ns}/serviceaccounts/nobody/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
        )
    assert resp.status == 201, resp.message
    token = str(resp.body["status"]["token"])
    kubeconfig = _kubeconfig(control_plane, tmp_path / "nobody.kubeconfig", token)
    args = (
        ["scheduler", "--metrics-port=0"]  # with leader election (the default) too
        if component == "scheduler"
        else ["integrations", "run", "--kinds=lws", "--metrics-port=0", "--leader-elect"]
    )
    proc = subprocess.Popen(
        [CLI, *args, f"--kubeconfig={kubeconfig}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(90)  # it exits at once; a loaded machine starts it slowly
    code, out = _stop(proc)
    assert code == 1, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    kind, role = (
        ("nodes", "examples/deploy/scheduler/clusterrole.yaml")
        if component == "scheduler"
        else ("workloads.scheduling.k8s.io", "examples/deploy/integrations/clusterrole.yaml")
    )
    assert f"not allowed to list {kind} with the credentials from kubeconfig" in out, out
    assert "403 Forbidden" in out and role in out, out
    assert f"system:serviceaccount:{ns}:nobody" in out, out
    _assert_no_secrets(out, token)
