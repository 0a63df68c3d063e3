"""The Helm chart ``charts/workloadbuilder`` with a real ``helm`` (v4, built from the Go module
proxy by ``make helm``) and the real v1.37.2 API server.

* ``helm lint --strict`` and ``helm template`` for the defaults and for each values file in
  ``charts/workloadbuilder/ci/`` (one per component set-up): the objects each renders, every
  one valid for the 1.37 schemas (strict);
* the committed rendering ``deploy/workloadbuilder.yaml`` is the chart's current default output;
* least privilege: the scheduler's ClusterRole and Role grant exactly what the hand-kept
  ``examples/deploy/scheduler`` grants (which ``test_deploy_rbac.py`` proves sufficient and
  each rule used), the integrations' exactly ``rules_for(kinds)`` (``test_integrations_deploy``
  proves those), plus leader election and, with a self-signed certificate, ``get``/``patch``
  of their own MutatingWebhookConfiguration only;
* on the real API server: the rendered objects applied as the admin (the Deployments and the
  webhook as server-side dry runs, so that nothing intercepts other tests' pods), then the
  components' command lines from the rendered Deployments run as their ServiceAccounts (a
  TokenRequest token): the scheduler leads and schedules a gang, the integrations and the
  webhook become ready; neither is refused anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from controlplane._recording import rules_granted
from controlplane.test_deploy_rbac import (
    _cleanup,
    _free_port,
    _http_status,
    _lease_holder,
    _make_gang,
    _make_nodes,
    _pods,
    _poll,
)
from workloadbuilder.cluster import KubeCluster
from workloadbuilder.integrations import rules_for
from workloadbuilder.integrations.rbac import SELF_SIGNED_RULES
from workloadbuilder.testing import ControlPlane, RestClient

pytestmark = pytest.mark.controlplane

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "workloadbuilder"
VALUES = sorted((CHART / "ci").glob("*-values.yaml"))
CLI = str(Path(sys.executable).parent / "workloadbuilder")
K8S_VERSION = "1.37.0"


def _helm_version() -> str:
    text = (ROOT / "hack" / "build-helm.sh").read_text()
    match = re.search(r"^HELMV=(\S+)$", text, re.MULTILINE)
    assert match is not None
    return match.group(1)


@pytest.fixture(scope="module")
def helm() -> str:
    """The helm binary (``WORKLOADBUILDER_HELM``, or the cache ``make helm`` fills). Missing,
    the tests fail (CI must run them), as those of the control plane do."""
    default = Path.home() / ".cache/workloadbuilder/helm" / _helm_version() / "bin/helm"
    path = Path(os.environ.get("WORKLOADBUILDER_HELM") or default)
    if not os.access(path, os.X_OK):
        pytest.fail(f"helm is not built ({path}): run `make helm` (or `make test`)")
    return str(path)


def _template(
    helm: str,
    *,
    values: Sequence[Path] = (),
    sets: Sequence[str] = (),
    release: str = "workloadbuilder",
    namespace: str = "workloadbuilder-system",
) -> list[dict[str, Any]]:
    argv = [helm, "template", release, str(CHART), "--namespace", namespace]
    for v in values:
        argv += ["-f", str(v)]
    for s in sets:
        argv += ["--set", s]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def _kinds(docs: list[dict[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for d in docs:
        out[d["kind"]] = out.get(d["kind"], 0) + 1
    return out


def _one(docs: list[dict[str, Any]], kind: str, name_suffix: str = "") -> dict[str, Any]:
    (doc,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"].endswith(name_suffix)]
    return doc


# ---- lint and template -------------------------------------------------------------------


@pytest.mark.parametrize("values", [None, *VALUES], ids=lambda v: v.name if v else "defaults")
def test_helm_lint(helm: str, values: Path | None) -> None:
    argv = [helm, "lint", "--strict", str(CHART)] + (["-f", str(values)] if values else [])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in done.stdout


#: the objects each set-up renders
EXPECTED_KINDS: dict[str, dict[str, int]] = {
    "defaults": {
        "ServiceAccount": 2, "ClusterRole": 2, "ClusterRoleBinding": 2, "Role": 2,
        "RoleBinding": 2, "ConfigMap": 1, "Deployment": 2, "Service": 2,
        "PodDisruptionBudget": 2, "MutatingWebhookConfiguration": 1,
    },
    "scheduler-values.yaml": {
        "ServiceAccount": 1, "ClusterRole": 1, "ClusterRoleBinding": 1, "Role": 1,
        "RoleBinding": 1, "ConfigMap": 1, "Deployment": 1, "Service": 1,
        "PodDisruptionBudget": 1,
    },
    "integrations-values.yaml": {
        "ServiceAccount": 1, "ClusterRole": 1, "ClusterRoleBinding": 1, "Role": 1,
        "RoleBinding": 1, "Deployment": 1, "Service": 1, "PodDisruptionBudget": 1,
        "MutatingWebhookConfiguration": 1, "Issuer": 1, "Certificate": 1,
    },
    "webhook-self-signed-values.yaml": {
        "Namespace": 1, "ServiceAccount": 1, "ClusterRole": 1, "ClusterRoleBinding": 1,
        "Role": 1, "RoleBinding": 1, "Deployment": 1, "Service": 1, "PodDisruptionBudget": 1,
        "MutatingWebhookConfiguration": 1,
    },
    "integrations-no-webhook-values.yaml": {
        "ServiceAccount": 1, "ClusterRole": 1, "ClusterRoleBinding": 1, "Deployment": 1,
        "Service": 1, "PodDisruptionBudget": 1,
    },
}  # fmt: skip


@pytest.mark.parametrize("values", [None, *VALUES], ids=lambda v: v.name if v else "defaults")
def test_template_renders_each_set_up_valid_for_1_37(helm: str, values: Path | None) -> None:
    docs = _template(helm, values=[values] if values else [])
    assert _kinds(docs) == EXPECTED_KINDS[values.name if values else "defaults"]
    for doc in docs:
        if doc["apiVersion"].startswith("cert-manager.io/"):
            continue  # not a Kubernetes schema
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)  # raises when invalid
        assert doc["metadata"]["labels"]["app.kubernetes.io/part-of"] == "workloadbuilder"


def test_each_component_is_switchable(helm: str) -> None:
    none = _template(helm, sets=["scheduler.enabled=false", "integrations.enabled=false"])
    assert none == []
    names = {d["metadata"]["name"] for d in _template(helm, sets=["integrations.enabled=false"])}
    assert names and all("integrations" not in n for n in names)


def test_image_tag_and_scheduler_configuration_are_values(helm: str) -> None:
    import workloadbuilder

    docs = _template(helm, sets=["image.repository=registry.example.com/wb", "image.tag=1.2.3"])
    images = {
        c["image"]
        for d in docs
        if d["kind"] == "Deployment"
        for c in d["spec"]["template"]["spec"]["containers"]
    }
    assert images == {"registry.example.com/wb:1.2.3"}
    defaults = _template(helm)
    images = {
        c["image"]
        for d in defaults
        if d["kind"] == "Deployment"
        for c in d["spec"]["template"]["spec"]["containers"]
    }
    assert images == {f"workloadbuilder:{workloadbuilder.__version__}"}
    (values,) = [v for v in VALUES if v.name == "scheduler-values.yaml"]
    docs = _template(helm, values=[values])
    config = yaml.safe_load(_one(docs, "ConfigMap")["data"]["config.yaml"])
    assert config == yaml.safe_load(values.read_text())["scheduler"]["config"]
    deployment = _one(docs, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[:3] == ["scheduler", "--config", "/etc/workloadbuilder/scheduler/config.yaml"]


def test_a_self_signed_webhook_runs_one_replica(helm: str) -> None:
    (values,) = [v for v in VALUES if v.name == "webhook-self-signed-values.yaml"]
    docs = _template(helm, values=[values], sets=["integrations.replicas=3"])
    deployment = _one(docs, "Deployment")
    assert deployment["spec"]["replicas"] == 1
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--self-signed" in args and "--tls-cert" not in args
    assert args[args.index("--webhook-configuration") + 1] == "workloadbuilder-integrations"


def test_the_committed_rendering_is_current(helm: str) -> None:
    done = subprocess.run(
        [str(ROOT / "hack" / "render-deploy.sh"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HELM": helm},
    )
    assert done.returncode == 0, "run `make deploy`:\n" + done.stdout[-3000:] + done.stderr
    kustomization = yaml.safe_load((ROOT / "deploy" / "kustomization.yaml").read_text())
    assert kustomization["resources"] == ["workloadbuilder.yaml"]
    import workloadbuilder

    assert kustomization["images"][0]["newTag"] == workloadbuilder.__version__


# ---- least privilege ---------------------------------------------------------------------


def _example_docs(component: str) -> list[dict[str, Any]]:
    return [
        d
        for p in sorted((ROOT / "examples" / "deploy" / component).glob("*.yaml"))
        for d in yaml.safe_load_all(p.read_text())
        if d
    ]


def _rules(docs: list[dict[str, Any]], kind: str, component: str) -> list[dict[str, Any]]:
    """The rules of the component's ClusterRole, or of its leader-election Role."""
    suffix = f"-{component}" if kind == "ClusterRole" else f"-{component}-leader-election"
    (doc,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"].endswith(suffix)]
    return list(doc["rules"])


def _named_rules(rules: list[dict[str, Any]]) -> set[tuple[str, str, str, tuple[str, ...]]]:
    return {
        (g, r, v, tuple(sorted(rule.get("resourceNames", ()))))
        for rule in rules
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }


def test_the_schedulers_rbac_is_the_hand_checked_one(helm: str) -> None:
    """The chart's scheduler rules equal examples/deploy/scheduler's (proven exact by
    test_deploy_rbac.py). When rules are added there, port them to
    charts/workloadbuilder/templates/scheduler/clusterrole.yaml."""
    chart = _template(helm)
    examples = _example_docs("scheduler")
    assert _named_rules(_rules(chart, "ClusterRole", "scheduler")) == _named_rules(
        _rules(examples, "ClusterRole", "scheduler")
    )
    assert _named_rules(_rules(chart, "Role", "scheduler")) == _named_rules(
        _rules(examples, "Role", "scheduler")
    )


def _without_integrations(values: Path) -> bool:
    doc = yaml.safe_load(values.read_text()) or {}
    return (doc.get("integrations") or {}).get("enabled") is False


def test_a_set_up_without_integrations_renders_none(helm: str) -> None:
    off = [v for v in VALUES if _without_integrations(v)]
    assert off, "a values file switches the integrations off"
    for values in off:
        docs = _template(helm, values=[values])
        assert not [d for d in docs if "integrations" in d["metadata"]["name"]], values.name


@pytest.mark.parametrize(
    "values",
    [None, *(v for v in VALUES if not _without_integrations(v))],
    ids=lambda v: v.name if v else "defaults",
)
def test_the_integrations_rbac_is_rules_for_their_kinds(helm: str, values: Path | None) -> None:
    docs = _template(helm, values=[values] if values else [])
    assert any(d["kind"] == "ClusterRole" and "integrations" in d["metadata"]["name"] for d in docs)
    args = _one(docs, "Deployment", "-integrations")["spec"]["template"]["spec"]["containers"][0][
        "args"
    ]
    kinds = args[args.index("--kinds") + 1].split(",")
    name = "workloadbuilder-integrations"
    want = rules_granted(rules_for(kinds))
    named = set()
    if "--self-signed" in args:
        named = {(g, r, v, (name,)) for g, r, v in rules_granted(SELF_SIGNED_RULES)}
    role = _rules(docs, "ClusterRole", "integrations")
    assert _named_rules(role) == {(*rule, ()) for rule in want} | named
    if "--leader-elect" in args:
        assert _named_rules(_rules(docs, "Role", "integrations")) == {
            ("coordination.k8s.io", "leases", "create", ()),
            ("coordination.k8s.io", "leases", "get", (name,)),
            ("coordination.k8s.io", "leases", "update", (name,)),
        }
    else:
        assert not [d for d in docs if d["kind"] in ("Role", "RoleBinding")]
    if values is None:  # the default set-up grants what examples/deploy/integrations does
        assert _named_rules(role) == _named_rules(
            _rules(_example_docs("integrations"), "ClusterRole", "integrations")
        )


# ---- on the real API server ----------------------------------------------------------------

RELEASE = "wbchart"
NAMESPACE = "wbchart-system"
SCHEDULER_NAME = "wbchart-scheduler"

_COLLECTIONS = {
    "Namespace": "/api/v1/namespaces",
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
    "ConfigMap": "/api/v1/namespaces/{ns}/configmaps",
    "Service": "/api/v1/namespaces/{ns}/services",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
    "PodDisruptionBudget": "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
    "Deployment": "/apis/apps/v1/namespaces/{ns}/deployments",
    "MutatingWebhookConfiguration": (
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
    ),
}
#: applied as server-side dry runs only: no controller makes pods of the placeholder image,
#: and no webhook of this test intercepts other tests' pods
_DRY_RUN = ("Deployment", "MutatingWebhookConfiguration")


def _apply(api: RestClient, doc: Mapping[str, Any]) -> None:
    meta = doc["metadata"]
    collection = _COLLECTIONS[doc["kind"]].format(ns=meta.get("namespace", ""))
    if doc["kind"] in _DRY_RUN:
        resp = api.create(collection, doc, dry_run=True)
        assert resp.ok, f"{doc['kind']} {meta['name']}: {resp.status} {resp.message}"
        return
    resp = api.create(collection, doc)
    if resp.status == 409:
        path = f"{collection}/{meta['name']}"
        current = api.get(path)
        assert current.ok, current.message
        rv = current.body["metadata"]["resourceVersion"]
        resp = api.replace(path, {**doc, "metadata": {**meta, "resourceVersion": rv}})
    assert resp.ok, f"{doc['kind']} {meta['name']}: {resp.status} {resp.message}"


def _token_kubeconfig(
    control_plane: ControlPlane,
    api: RestClient,
    name: str,
    directory: Path,
    *,
    namespace: str = NAMESPACE,
) -> Path:
    """A kubeconfig with a TokenRequest token of the ServiceAccount ``namespace/name``."""
    resp = api.create(
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600},
        },
    )
    assert resp.status == 201, resp.message
    path = directory / f"{name}.kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "cp",
                        "cluster": {
                            "server": control_plane.server,
                            "certificate-authority": str(control_plane.ca_file),
                        },
                    }
                ],
                "users": [{"name": "sa", "user": {"token": resp.body["status"]["token"]}}],
                "contexts": [{"name": "sa", "context": {"cluster": "cp", "user": "sa"}}],
                "current-context": "sa",
            }
        )
    )
    path.chmod(0o600)
    return path


@pytest.fixture(scope="module")
def installed(
    helm: str,
    control_plane: ControlPlane,
    crds: list[str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[list[dict[str, Any]], dict[str, Path]]]:
    """The chart rendered for the release wbchart in wbchart-system (its scheduler profile
    renamed so that no other test's pods are ours), applied; a kubeconfig per ServiceAccount."""
    directory = tmp_path_factory.mktemp("helm-chart")
    values = directory / "values.yaml"
    values.write_text(
        yaml.safe_dump(
            {
                "scheduler": {
                    "config": {
                        "apiVersion": "kubescheduler.config.k8s.io/v1",
                        "kind": "KubeSchedulerConfiguration",
                        "profiles": [{"schedulerName": SCHEDULER_NAME}],
                    }
                }
            }
        )
    )
    docs = _template(
        helm,
        values=[values],
        sets=["namespace.create=true"],
        release=RELEASE,
        namespace=NAMESPACE,
    )
    order = list(_COLLECTIONS)
    with control_plane.client() as api:
        for doc in sorted(docs, key=lambda d: order.index(d["kind"])):
            _apply(api, doc)
        kubeconfigs = {
            component: _token_kubeconfig(
                control_plane, api, f"{RELEASE}-workloadbuilder-{component}", directory
            )
            for component in ("scheduler", "integrations")
        }
    yield docs, kubeconfigs


def _container_of(docs: list[dict[str, Any]], component: str) -> dict[str, Any]:
    deployment = _one(docs, "Deployment", f"-{component}")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return dict(container)


def _command_line(container: Mapping[str, Any], replace: Mapping[str, str]) -> list[str]:
    """The container's command and args as the kubelet runs them ($(POD_NAMESPACE) expanded),
    with the in-pod file paths replaced by local ones."""
    assert container["command"] == ["workloadbuilder"]
    args = [str(a).replace("$(POD_NAMESPACE)", NAMESPACE) for a in container["args"]]
    return [CLI, *(replace.get(a, a) for a in args)]


@contextlib.contextmanager
def _running(argv: list[str]) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


async def _stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGTERM)
    code = await asyncio.to_thread(proc.wait, 30)
    output = proc.stdout.read() if proc.stdout is not None else ""
    assert code == 0, output
    assert "forbidden" not in output.lower(), output
    return output


async def test_the_charts_scheduler_runs_as_its_service_account_and_schedules_a_gang(
    control_plane: ControlPlane,
    installed: tuple[list[dict[str, Any]], dict[str, Path]],
    tmp_path: Path,
) -> None:
    docs, kubeconfigs = installed
    config = tmp_path / "config.yaml"
    config.write_text(_one(docs, "ConfigMap")["data"]["config.yaml"])
    container = _container_of(docs, "scheduler")
    mount = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}["config"]
    port = _free_port()
    argv = [
        *_command_line(container, {f"{mount}/config.yaml": str(config)}),
        "--kubeconfig",
        str(kubeconfigs["scheduler"]),
        "--metrics-port",  # the last occurrence wins
        str(port),
        "--bind-address",
        "127.0.0.1",
    ]
    ns = control_plane.create_namespace("helmchart-")
    admin = KubeCluster.from_kubeconfig(control_plane.kubeconfig)
    nodes: list[str] = []
    pods: list[str] = []
    try:
        with _running(argv) as proc:

            async def ready() -> bool:
                assert proc.poll() is None, proc.communicate()
                url = f"http://127.0.0.1:{port}/readyz"
                return await asyncio.to_thread(_http_status, url) == 200

            await _poll(ready)
            holder = await _lease_holder(admin, NAMESPACE, SCHEDULER_NAME)
            assert holder.endswith(f"_{proc.pid}")
            nodes = await _make_nodes(admin, ns, 1)
            pods = await _make_gang(
                admin, ns, "g", size=2, cpu="1", scheduler_name=SCHEDULER_NAME, pool=ns
            )

            async def bound() -> bool:
                assert proc.poll() is None, proc.communicate()
                current = await _pods(admin, ns)
                return all(current[p]["spec"].get("nodeName") == nodes[0] for p in pods)

            await _poll(bound)
            await _stop(proc)
            assert await _lease_holder(admin, NAMESPACE, SCHEDULER_NAME) == ""
    finally:
        await _cleanup(admin, ns, pods, nodes)
        await admin.close()


async def test_the_charts_integrations_and_webhook_run_as_their_service_account(
    installed: tuple[list[dict[str, Any]], dict[str, Path]],
) -> None:
    from workloadbuilder.integrations.webhook import self_signed

    docs, kubeconfigs = installed
    container = _container_of(docs, "integrations")
    with tempfile.TemporaryDirectory() as tls:
        cert, key, ca = self_signed(tls, ["localhost", "127.0.0.1"])
        port, webhook_port = _free_port(), _free_port()
        argv = [
            *_command_line(container, {"/tls/tls.crt": cert, "/tls/tls.key": key}),
            "--kubeconfig",
            str(kubeconfigs["integrations"]),
            "--metrics-port",
            str(port),
            "--webhook-port",
            str(webhook_port),
            "--webhook-host",
            "127.0.0.1",
            "--bind-address",
            "127.0.0.1",
        ]
        with _running(argv) as proc:

            async def ready() -> bool:
                assert proc.poll() is None, proc.communicate()
                url = f"http://127.0.0.1:{port}/readyz"
                return await asyncio.to_thread(_http_status, url) == 200

            await _poll(ready)
            review = await asyncio.to_thread(_admission_review, webhook_port, ca)
            assert review["response"] == {"uid": "helm-chart-1", "allowed": True}
            await _stop(proc)


def _admission_review(port: int, ca: bytes) -> dict[str, Any]:
    """POST a Pod CREATE review (a pod of no integrated workload) to the webhook over TLS."""
    import json
    import ssl
    import urllib.request

    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "helm-chart-1",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "operation": "CREATE",
            "namespace": "default",
            "object": {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p", "namespace": "default"},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            },
        },
    }
    ctx = ssl.create_default_context(cadata=ca.decode())
    req = urllib.request.Request(
        f"https://127.0.0.1:{port}/mutate",
        data=json.dumps(review).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10, context=ctx) as resp:
        return dict(json.loads(resp.read()))


async def test_a_self_signed_webhook_patches_its_own_ca_bundle_as_its_service_account(
    helm: str, control_plane: ControlPlane, crds: list[str], tmp_path: Path
) -> None:
    """ci/webhook-self-signed-values.yaml on the real API server: the MutatingWebhookConfiguration
    is created for real (deleted at the end: nothing else runs on the server meanwhile), the
    integrations' command line runs as their ServiceAccount, whose ClusterRole may get and
    patch only that one configuration: it patches the caBundle of every webhook in it, and the
    certificate it then serves for its Service's name verifies against that caBundle."""
    import base64
    import socket
    import ssl

    (values,) = [v for v in VALUES if v.name == "webhook-self-signed-values.yaml"]
    release, namespace = "wbss", "wbss-system"
    docs = _template(helm, values=[values], release=release, namespace=namespace)
    name = f"{release}-workloadbuilder-integrations"
    webhook_path = _COLLECTIONS["MutatingWebhookConfiguration"] + f"/{name}"
    order = list(_COLLECTIONS)
    with control_plane.client() as api:
        for doc in sorted(docs, key=lambda d: order.index(d["kind"])):
            if doc["kind"] == "MutatingWebhookConfiguration":
                resp = api.create(_COLLECTIONS[doc["kind"]], doc)
                assert resp.ok or resp.status == 409, resp.message
            else:
                _apply(api, doc)
        kubeconfig = _token_kubeconfig(control_plane, api, name, tmp_path, namespace=namespace)
    try:
        (container,) = _one(docs, "Deployment", "-integrations")["spec"]["template"]["spec"][
            "containers"
        ]
        port, webhook_port = _free_port(), _free_port()
        args = [str(a).replace("$(POD_NAMESPACE)", namespace) for a in container["args"]]
        argv = [
            CLI,
            *args,
            "--kubeconfig",
            str(kubeconfig),
            "--metrics-port",
            str(port),
            "--webhook-port",
            str(webhook_port),
            "--webhook-host",
            "127.0.0.1",
            "--bind-address",
            "127.0.0.1",
        ]
        with _running(argv) as proc:

            async def ready() -> bool:
                assert proc.poll() is None, proc.communicate()
                url = f"http://127.0.0.1:{port}/readyz"
                return await asyncio.to_thread(_http_status, url) == 200

            await _poll(ready)
            with control_plane.client() as api:
                current = api.get(webhook_path)
            assert current.ok, current.message
            bundles = {w["clientConfig"].get("caBundle", "") for w in current.body["webhooks"]}
            (bundle,) = bundles
            assert bundle
            ctx = ssl.create_default_context(cadata=base64.b64decode(bundle).decode())
            with (
                socket.create_connection(("127.0.0.1", webhook_port), timeout=10) as raw,
                ctx.wrap_socket(raw, server_hostname=f"{name}.{namespace}.svc") as tls,
            ):
                assert tls.version() is not None  # the handshake verified the chain and name
            await _stop(proc)
    finally:
        with control_plane.client() as api:
            api.delete(webhook_path)
