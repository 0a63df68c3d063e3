"""The least-privilege RBAC of ``examples/deploy/scheduler`` against the real v1.37.2 API
server.

The Namespace, ServiceAccount, ClusterRole(Binding) and Role(Binding) are applied as the
admin; a token for the ServiceAccount from the TokenRequest API (the identity
``system:serviceaccount:<ns>:<sa>`` in the service-account groups) then runs the reference
scheduler:

* in process, over a ``Cluster`` wrapper that records every API call (verb, group, resource,
  subresource) and every ``Forbidden``: it elects itself leader, schedules a gang, reports an
  unschedulable gang (PodGroup and pod status, events), preempts a low-priority pod for a
  high-priority one (PodDisruptionBudget informer, ``DisruptionTarget``, ``Preempted`` event,
  delete, ``nominatedNodeName``), renews and releases the Lease. No call
  is forbidden, and the calls made are exactly the rules granted (each rule is needed);
* as the Deployment's command line (``workloadbuilder`` + the container args), until
  ``/readyz`` says it is synced and leading, then SIGTERM;

requests the scheduler never makes are ``403 Forbidden`` for that identity; and the
Deployment and its pod pass server-side dry runs (schema, ``restricted`` Pod Security).
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import signal
import socket
import ssl
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
import yaml
from waits import priority_class_admitted

from controlplane._recording import RecordingCluster, Rule, rules_granted
from workloadbuilder.api import (
    GangSchedulingPolicy,
    ObjectMeta,
    PodGroup,
    PodGroupSchedulingPolicy,
    PodGroupSpec,
)
from workloadbuilder.cluster import KubeCluster
from workloadbuilder.errors import NotFound
from workloadbuilder.runtime import LeaderElector
from workloadbuilder.scheduler import Scheduler, SchedulerConfig
from workloadbuilder.testing import ControlPlane, RestClient
from workloadbuilder.testing.builders import make_node, make_pod, make_priority_class

pytestmark = pytest.mark.controlplane

DEPLOY = Path(__file__).resolve().parents[2] / "examples" / "deploy" / "scheduler"
CLI = str(Path(sys.executable).parent / "workloadbuilder")
NODE_LABEL = "deploy-rbac.workloadbuilder.test/pool"


# ---- the manifests ----------------------------------------------------------------------


def _manifests() -> list[dict[str, Any]]:
    """The documents of the kustomization's resources, in its order."""
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    docs: list[dict[str, Any]] = []
    for name in kustomization["resources"]:
        docs.extend(d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d)
    return docs


def _one(kind: str) -> dict[str, Any]:
    (doc,) = [d for d in _manifests() if d["kind"] == kind]
    return doc


def _container() -> dict[str, Any]:
    containers: list[dict[str, Any]] = _one("Deployment")["spec"]["template"]["spec"]["containers"]
    (container,) = containers
    return container


def _deployment_args(namespace: str) -> list[str]:
    """The container's args as the kubelet passes them ($(POD_NAMESPACE) expanded)."""
    return [str(a).replace("$(POD_NAMESPACE)", namespace) for a in _container()["args"]]


def _flag(args: Sequence[str], name: str) -> str:
    return args[list(args).index(name) + 1]


def _granted() -> set[Rule]:
    """Every (group, resource, verb) the ClusterRole and the Role grant."""
    return rules_granted([*_one("ClusterRole")["rules"], *_one("Role")["rules"]])


_COLLECTIONS = {
    "Namespace": "/api/v1/namespaces",
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
}


def _apply(api: RestClient, doc: Mapping[str, Any]) -> None:
    """Create, or replace when it exists (the session's server is shared)."""
    meta = doc["metadata"]
    collection = _COLLECTIONS[doc["kind"]].format(ns=meta.get("namespace", ""))
    resp = api.create(collection, doc)
    if resp.status == 409:
        path = f"{collection}/{meta['name']}"
        current = api.get(path)
        assert current.ok, current.message
        rv = current.body["metadata"]["resourceVersion"]
        resp = api.replace(path, {**doc, "metadata": {**meta, "resourceVersion": rv}})
    assert resp.ok, f"{doc['kind']} {meta['name']}: {resp.status} {resp.message}"


@attrs.frozen(kw_only=True)
class Deployed:
    """The applied RBAC and the ServiceAccount's credentials."""

    namespace: str
    user: str
    groups: tuple[str, ...]
    token: str
    kubeconfig: Path


class TokenClient:
    """Minimal HTTPS JSON client with a bearer token (RestClient speaks client certs only)."""

    def __init__(self, server: str, ca_file: Path, token: str) -> None:
        parsed = urllib.parse.urlsplit(server)
        assert parsed.hostname is not None and parsed.port is not None
        ctx = ssl.create_default_context(cafile=str(ca_file))
        self._conn = http.client.HTTPSConnection(parsed.hostname, parsed.port, context=ctx)
        self._token = token

    def request(
        self, method: str, path: str, body: Mapping[str, Any] | None = None
    ) -> tuple[int, dict[str, Any]]:
        """Send one request; the status and the decoded JSON answer."""
        headers = {"Authorization": f"Bearer {self._token}", "Accept": "application/json"}
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            ctype = "application/merge-patch+json" if method == "PATCH" else "application/json"
            headers["Content-Type"] = ctype
        self._conn.request(method, path, body=payload, headers=headers)
        resp = self._conn.getresponse()
        raw = resp.read()
        decoded = json.loads(raw) if raw else {}
        return resp.status, decoded if isinstance(decoded, dict) else {}

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()


@pytest.fixture(scope="module")
def deployed(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Deployed:
    """Apply every manifest but the Deployment as the admin, then get the ServiceAccount a
    token through the TokenRequest API (what the kubelet mounts into the pod) and write a
    kubeconfig with it.

    (``ControlPlane.mint_kubeconfig`` cannot stand in here: the user name
    ``system:serviceaccount:workloadbuilder-system:workloadbuilder-scheduler`` has 70
    characters, more than the 64 an X.509 common name may have, and the certificate cannot
    be made. A real token is the more faithful identity anyway.)
    """
    sa = _one("ServiceAccount")["metadata"]
    ns, name = sa["namespace"], sa["name"]
    with control_plane.client() as api:
        for doc in _manifests():
            if doc["kind"] != "Deployment":
                _apply(api, doc)
        resp = api.create(
            f"/api/v1/namespaces/{ns}/serviceaccounts/{name}/token",
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": 3600},
            },
        )
    assert resp.status == 201, resp.message
    token = str(resp.body["status"]["token"])
    kubeconfig = tmp_path_factory.mktemp("deploy-rbac") / "scheduler.kubeconfig"
    kubeconfig.write_text(
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
                "users": [{"name": "sa", "user": {"token": token}}],
                "contexts": [{"name": "sa", "context": {"cluster": "cp", "user": "sa"}}],
                "current-context": "sa",
            }
        )
    )
    kubeconfig.chmod(0o600)
    return Deployed(
        namespace=ns,
        user=f"system:serviceaccount:{ns}:{name}",
        groups=("system:serviceaccounts", f"system:serviceaccounts:{ns}", "system:authenticated"),
        token=token,
        kubeconfig=kubeconfig,
    )


@pytest.fixture
def sa_client(control_plane: ControlPlane, deployed: Deployed) -> Iterator[TokenClient]:
    """A client authenticated as the scheduler's ServiceAccount."""
    client = TokenClient(control_plane.server, control_plane.ca_file, deployed.token)
    try:
        yield client
    finally:
        client.close()


def test_token_authenticates_as_the_service_account(
    deployed: Deployed, sa_client: TokenClient
) -> None:
    status, body = sa_client.request(
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
    )
    assert status == 201, body
    user = body["status"]["userInfo"]
    assert user["username"] == deployed.user
    assert set(deployed.groups) <= set(user["groups"])


# ---- helpers ----------------------------------------------------------------------------


async def _poll(check: Callable[[], Awaitable[bool]], timeout: float = 90.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await check():
        if loop.time() > deadline:
            raise AssertionError("condition not reached before the deadline")
        await asyncio.sleep(0.2)


async def _make_nodes(admin: KubeCluster, pool: str, count: int) -> list[str]:
    names = [f"{pool}-node-{i}" for i in range(count)]
    alloc = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    for name in names:
        await admin.create(make_node(name).label(NODE_LABEL, pool).resources(alloc).obj())
    return names


async def _make_gang(
    admin: KubeCluster,
    namespace: str,
    name: str,
    *,
    size: int,
    cpu: str,
    scheduler_name: str,
    pool: str,
) -> list[str]:
    await admin.create(
        PodGroup(
            metadata=ObjectMeta(name=name, namespace=namespace),
            spec=PodGroupSpec(
                scheduling_policy=PodGroupSchedulingPolicy(
                    gang=GangSchedulingPolicy(min_count=size)
                )
            ),
        )
    )
    pods = [f"{name}-{i}" for i in range(size)]
    for pod in pods:
        member = make_pod(pod, namespace).scheduler_name(scheduler_name).pod_group(name)
        # other tests' nodes share this server: stay on ours
        member.node_selector(NODE_LABEL, pool)
        member.container_name("c").request("cpu", cpu).request("memory", "64Mi")
        await admin.create(member.obj())
    return pods


def _condition(obj: Mapping[str, Any], type_: str) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == type_:
            return dict(c)
    return None


async def _pod_group(admin: KubeCluster, namespace: str, name: str) -> dict[str, Any]:
    from workloadbuilder.api import object_to_dict

    pg = await admin.get("PodGroup", name, namespace)
    assert isinstance(pg, PodGroup)
    return object_to_dict(pg)


async def _pods(admin: KubeCluster, namespace: str) -> dict[str, dict[str, Any]]:
    items = (await admin.list("Pod", namespace)).items
    return {p["metadata"]["name"]: p for p in items if isinstance(p, dict)}


async def _event_reasons(admin: KubeCluster, namespace: str) -> dict[str, set[str]]:
    """pod name -> reasons of the events about it."""
    out: dict[str, set[str]] = {}
    for e in (await admin.list("Event", namespace)).items:
        assert isinstance(e, dict)
        out.setdefault(e["involvedObject"]["name"], set()).add(e["reason"])
    return out


async def _lease_holder(admin: KubeCluster, namespace: str, name: str) -> str:
    lease = await admin.get("Lease", name, namespace)
    assert isinstance(lease, dict)
    return str(lease["spec"].get("holderIdentity") or "")


async def _make_claim_pod(
    admin: KubeCluster, namespace: str, node: str, *, scheduler_name: str
) -> tuple[str, list[tuple[str, str]]]:
    """A pod with a DRA claim and a device on ``node`` for it (so the scheduler watches the
    DRA kinds and patches the claim and its status); returns the pod and the cluster-scoped
    objects to delete."""
    cls = f"{namespace}-gpu"
    await admin.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": cls},
            "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]},
        }
    )
    await admin.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-gpus"},
            "spec": {
                "driver": "gpu.example.com",
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "nodeName": node,
                "devices": [{"name": "gpu-0"}],
            },
        }
    )
    await admin.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "gpu", "namespace": namespace},
            "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": cls}}]}},
        }
    )
    pod = make_pod("with-claim", namespace).scheduler_name(scheduler_name)
    pod.node_selector(NODE_LABEL, namespace).pod_resource_claim("gpu", claim="gpu")
    await admin.create(pod.container_name("c").request("cpu", "100m").obj())
    return "with-claim", [("ResourceSlice", f"{node}-gpus"), ("DeviceClass", cls)]


async def _make_volume_pod(
    admin: KubeCluster, namespace: str, node: str, *, scheduler_name: str
) -> tuple[str, list[tuple[str, str]]]:
    """A pod with two WaitForFirstConsumer claims, one a local PersistentVolume on ``node``
    can take, one of a class that provisions (so the scheduler watches the volume kinds,
    updates the volume's claimRef and the claim's selected node, and, as no PV controller
    runs here to bind them, undoes both when the binding times out); returns the pod and the
    cluster-scoped objects to delete."""
    static, dynamic = f"{namespace}-local", f"{namespace}-fast"
    for cls, provisioner in (
        (static, "kubernetes.io/no-provisioner"),
        (dynamic, "fast.example.com"),
    ):
        await admin.create(
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": {"name": cls},
                "provisioner": provisioner,
                "volumeBindingMode": "WaitForFirstConsumer",
            }
        )
    host = {"key": NODE_LABEL, "operator": "In", "values": [namespace]}
    await admin.create(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": f"{namespace}-pv"},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": static,
                "local": {"path": "/data"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [host]}]}},
            },
        }
    )
    # what kube-controller-manager's PV controller would do first (it does not run here)
    await admin.patch(
        "PersistentVolume",
        f"{namespace}-pv",
        {"status": {"phase": "Available"}},
        subresource="status",
    )
    for name, cls in (("static", static), ("dynamic", dynamic)):
        await admin.create(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": cls,
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            }
        )
    pod = make_pod("with-volumes", namespace).scheduler_name(scheduler_name)
    obj = pod.node_selector(NODE_LABEL, namespace).container_name("c").request("cpu", "100m").obj()
    obj["spec"]["volumes"] = [
        {"name": n, "persistentVolumeClaim": {"claimName": n}} for n in ("static", "dynamic")
    ]
    await admin.create(obj)
    return "with-volumes", [
        ("PersistentVolume", f"{namespace}-pv"),
        ("StorageClass", static),
        ("StorageClass", dynamic),
    ]


async def _volume_writes_undone(admin: KubeCluster, namespace: str) -> bool:
    """The volume's claimRef and the claim's selected node were taken back."""
    pv = await admin.get("PersistentVolume", f"{namespace}-pv")
    pvc = await admin.get("PersistentVolumeClaim", "dynamic", namespace)
    assert isinstance(pv, dict) and isinstance(pvc, dict)
    annotations = pvc["metadata"].get("annotations") or {}
    return "claimRef" not in pv["spec"] and "volume.kubernetes.io/selected-node" not in annotations


async def _cleanup(
    admin: KubeCluster, namespace: str, pods: Sequence[str], nodes: Sequence[str]
) -> None:
    for pod in pods:
        with contextlib.suppress(NotFound):
            await admin.delete("Pod", pod, namespace, grace_period_seconds=0)
    for node in nodes:
        with contextlib.suppress(NotFound):
            await admin.delete("Node", node)


# ---- the tests --------------------------------------------------------------------------


async def test_scheduler_needs_exactly_the_granted_rules(
    control_plane: ControlPlane, deployed: Deployed
) -> None:
    ns = control_plane.create_namespace("deploy-")
    args = _deployment_args(deployed.namespace)
    scheduler_name = _flag(args, "--scheduler-name")
    lease_ns = _flag(args, "--leader-elect-lease-namespace")
    assert lease_ns == deployed.namespace
    admin = KubeCluster.from_kubeconfig(control_plane.kubeconfig)
    with contextlib.suppress(NotFound):  # fresh, so that "create" on leases is exercised
        await admin.delete("Lease", scheduler_name, lease_ns)
    rec = RecordingCluster(KubeCluster.from_kubeconfig(deployed.kubeconfig))
    nodes: list[str] = []
    pods: list[str] = []
    # preemption on, as ``workloadbuilder scheduler`` runs it: it reads PodDisruptionBudgets
    # and deletes its victims
    dra_objects: list[tuple[str, str]] = []
    sched = Scheduler(rec, SchedulerConfig(scheduler_name=scheduler_name, preemption=True))
    for plugin in sched.framework.reserve:  # no PV controller here: PreBind gives up soon
        if plugin.name == "VolumeBinding":
            plugin.bind_timeout = 2.0  # type: ignore[attr-defined]
    runner: asyncio.Task[None] | None = None
    classes = [f"{ns}-low", f"{ns}-high"]
    try:
        nodes = await _make_nodes(admin, ns, 2)
        for cls, value in zip(classes, (10, 1000), strict=True):
            await admin.create(make_priority_class(cls, value).obj())
        await admin.create(
            make_node(f"{ns}-pre")
            .label(NODE_LABEL, f"{ns}-pre")
            .resources({"cpu": "1", "memory": "8Gi", "pods": "110"})
            .obj()
        )
        nodes.append(f"{ns}-pre")
        elector = LeaderElector(
            rec, identity=f"{ns}_1", name=scheduler_name, namespace=lease_ns, retry_period=0.2
        )
        await asyncio.wait_for(elector.acquire(), 60)
        assert elector.leading
        assert await _lease_holder(admin, lease_ns, scheduler_name) == elector.identity

        runner = asyncio.create_task(sched.run())
        fits = await _make_gang(
            admin, ns, "fits", size=3, cpu="1", scheduler_name=scheduler_name, pool=ns
        )
        too_big = await _make_gang(
            admin, ns, "too-big", size=2, cpu="16", scheduler_name=scheduler_name, pool=ns
        )
        pods = fits + too_big
        # a low-priority pod running on the 1-cpu node, a high-priority one that needs it
        victim = make_pod("victim", ns).priority_class(classes[0]).node_name(f"{ns}-pre")
        victim_obj = victim.container_name("c").request("cpu", "1").obj()
        victim_obj["spec"]["terminationGracePeriodSeconds"] = 0  # no kubelet: gone at once
        await priority_class_admitted(admin, ns, classes[1])
        await admin.create(victim_obj)
        hp = make_pod("hp", ns).scheduler_name(scheduler_name).priority_class(classes[1])
        hp.node_selector(NODE_LABEL, f"{ns}-pre").container_name("c").request("cpu", "1")
        await admin.create(hp.obj())
        claim_pod, dra_objects = await _make_claim_pod(
            admin, ns, nodes[0], scheduler_name=scheduler_name
        )
        volume_pod, volume_objects = await _make_volume_pod(
            admin, ns, nodes[0], scheduler_name=scheduler_name
        )
        dra_objects += volume_objects
        pods += ["victim", "hp", claim_pod, volume_pod]
        undone = {("", "persistentvolumes", "update"), ("", "persistentvolumeclaims", "update")}

        async def done() -> bool:
            assert not runner.done(), runner
            assert rec.forbidden == [], rec.forbidden  # fail fast on a missing rule
            current = await _pods(admin, ns)
            events = await _event_reasons(admin, ns)
            fit_pg = await _pod_group(admin, ns, "fits")
            big_pg = await _pod_group(admin, ns, "too-big")
            return (
                all(current[p]["spec"].get("nodeName") in nodes for p in fits)
                and current[claim_pod]["spec"].get("nodeName") == nodes[0]
                and (_condition(fit_pg, "PodGroupInitiallyScheduled") or {}).get("status") == "True"
                and (_condition(big_pg, "PodGroupInitiallyScheduled") or {}).get("reason")
                == "Unschedulable"
                and all(
                    (_condition(current[p], "PodScheduled") or {}).get("status") == "False"
                    for p in too_big
                )
                and all("Scheduled" in events.get(p, ()) for p in fits)
                and all("FailedScheduling" in events.get(p, ()) for p in too_big)
                and "victim" not in current
                and "Preempted" in events.get("victim", ())
                and current["hp"]["spec"].get("nodeName") == f"{ns}-pre"
                and undone <= rec.used
                and await _volume_writes_undone(admin, ns)
            )

        await _poll(done)
        current = await _pods(admin, ns)
        assert not any(current[p]["spec"].get("nodeName") for p in too_big)
        big = _condition(await _pod_group(admin, ns, "too-big"), "PodGroupInitiallyScheduled")
        assert big is not None and big["status"] == "False" and "minCount 2" in big["message"]

        # still the leader: a renewal (get + update of the Lease) succeeds
        assert await elector.try_acquire_or_renew()
        await sched.stop()
        await asyncio.wait_for(runner, 30)
        await elector.release()
        assert await _lease_holder(admin, lease_ns, scheduler_name) == ""
    finally:
        if runner is not None and not runner.done():
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner
        await sched.stop()
        await rec.close()
        await _cleanup(admin, ns, pods, nodes)
        for cls in classes:
            with contextlib.suppress(NotFound):
                await admin.delete("PriorityClass", cls)
        for kind, name in dra_objects:
            with contextlib.suppress(NotFound):
                await admin.delete(kind, name)
        await admin.close()

    assert rec.forbidden == []
    granted = _granted()
    assert rec.used - granted == set(), "calls the RBAC does not grant"
    assert granted - rec.used == set(), "granted rules the scheduler never used"


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/api/v1/namespaces/{ns}/pods/x", None),  # it reads from its informer cache
        ("POST", "/api/v1/namespaces/{ns}/pods", {"apiVersion": "v1", "kind": "Pod"}),
        ("PATCH", "/api/v1/namespaces/{ns}/pods/x", {"metadata": {"labels": {"a": "b"}}}),
        ("POST", "/api/v1/namespaces/{ns}/pods/x/eviction", {"apiVersion": "policy/v1"}),
        ("PATCH", "/api/v1/nodes/x", {"spec": {"unschedulable": True}}),
        ("PUT", "/api/v1/nodes/x", {"apiVersion": "v1", "kind": "Node"}),
        ("GET", "/api/v1/secrets", None),
        ("GET", "/api/v1/namespaces/{lease_ns}/configmaps", None),
        (
            "POST",
            "/apis/scheduling.k8s.io/v1beta1/namespaces/{ns}/podgroups",
            {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup"},
        ),
        ("PATCH", "/apis/scheduling.k8s.io/v1beta1/namespaces/{ns}/podgroups/x", {}),
        ("DELETE", "/apis/scheduling.k8s.io/v1beta1/namespaces/{ns}/podgroups/x", None),
        ("GET", "/apis/scheduling.k8s.io/v1beta1/workloads", None),
        (
            "POST",
            "/apis/scheduling.k8s.io/v1/priorityclasses",
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass"},
        ),
        ("POST", "/apis/events.k8s.io/v1/namespaces/{ns}/events", {"apiVersion": "v1"}),
        ("PATCH", "/api/v1/namespaces/{ns}/events/x", {}),
        ("GET", "/apis/coordination.k8s.io/v1/namespaces/{lease_ns}/leases", None),
        ("GET", "/apis/coordination.k8s.io/v1/namespaces/{lease_ns}/leases/other", None),
        ("PUT", "/apis/coordination.k8s.io/v1/namespaces/{lease_ns}/leases/other", {}),
        ("DELETE", "/apis/coordination.k8s.io/v1/namespaces/{lease_ns}/leases/{lease}", None),
        (
            "POST",
            "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
            {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease"},
        ),
    ],
)
def test_requests_the_scheduler_never_makes_are_forbidden(
    deployed: Deployed,
    sa_client: TokenClient,
    method: str,
    path: str,
    body: dict[str, Any] | None,
) -> None:
    lease = _flag(_deployment_args(deployed.namespace), "--scheduler-name")
    path = path.format(ns="default", lease_ns=deployed.namespace, lease=lease)
    status, answer = sa_client.request(method, path, body)
    assert status == 403, (status, answer)
    assert f'User "{deployed.user}"' in answer["message"]


def test_rules_review_shows_the_lease_rules(deployed: Deployed, sa_client: TokenClient) -> None:
    lease = _flag(_deployment_args(deployed.namespace), "--scheduler-name")
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectRulesReview",
        "spec": {"namespace": deployed.namespace},
    }
    code, answer = sa_client.request(
        "POST", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", review
    )
    assert code == 201, answer
    status = answer["status"]
    assert not status.get("incomplete"), status
    lease_rules = {
        (verb, tuple(rule.get("resourceNames") or ()))
        for rule in status["resourceRules"]
        if "coordination.k8s.io" in rule["apiGroups"] and "leases" in rule["resources"]
        for verb in rule["verbs"]
    }
    assert lease_rules == {("create", ()), ("get", (lease,)), ("update", (lease,))}
    verbs = {v for rule in status["resourceRules"] for v in rule["verbs"]}
    assert not verbs & {"*", "deletecollection", "escalate", "bind", "impersonate"}
    # the one delete: preemption's victims (core pods, nothing else)
    deletes = {
        (g, r)
        for rule in status["resourceRules"]
        if "delete" in rule["verbs"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
    }
    assert deletes == {("", "pods")}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)
    except OSError:
        return 0


async def test_deployment_command_line_runs_as_the_service_account(
    control_plane: ControlPlane, deployed: Deployed
) -> None:
    """``workloadbuilder`` + the Deployment's args (the kubeconfig stands in for the mounted
    token; metrics on a free loopback port): ready = synced and leading, probes answer, a gang
    is scheduled, SIGTERM releases the Lease and exits 0."""
    container = _container()
    assert container["command"] == ["workloadbuilder"]
    args = _deployment_args(deployed.namespace)
    scheduler_name = _flag(args, "--scheduler-name")
    lease_ns = _flag(args, "--leader-elect-lease-namespace")
    port = _free_port()
    ns = control_plane.create_namespace("deploycli-")
    admin = KubeCluster.from_kubeconfig(control_plane.kubeconfig)
    argv = [
        CLI,
        *args,
        "--kubeconfig",
        str(deployed.kubeconfig),
        "--metrics-port",  # the last occurrence wins
        str(port),
        "--bind-address",
        "127.0.0.1",
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    nodes: list[str] = []
    pods: list[str] = []
    try:

        async def ready() -> bool:
            assert proc.poll() is None, proc.communicate()
            return await asyncio.to_thread(_http_status, f"http://127.0.0.1:{port}/readyz") == 200

        await _poll(ready)
        assert await asyncio.to_thread(_http_status, f"http://127.0.0.1:{port}/healthz") == 200
        holder = await _lease_holder(admin, lease_ns, scheduler_name)
        assert holder.endswith(f"_{proc.pid}")

        nodes = await _make_nodes(admin, ns, 1)
        pods = await _make_gang(
            admin, ns, "g", size=2, cpu="1", scheduler_name=scheduler_name, pool=ns
        )

        async def bound() -> bool:
            assert proc.poll() is None, proc.communicate()
            current = await _pods(admin, ns)
            return all(current[p]["spec"].get("nodeName") == nodes[0] for p in pods)

        await _poll(bound)
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(proc.wait, 30)
        output = proc.stdout.read() if proc.stdout is not None else ""
        assert code == 0, output
        assert "forbidden" not in output.lower(), output
        assert await _lease_holder(admin, lease_ns, scheduler_name) == ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        await _cleanup(admin, ns, pods, nodes)
        await admin.close()


def test_deployment_is_accepted_and_its_pod_is_pod_security_restricted(
    control_plane: ControlPlane, deployed: Deployed
) -> None:
    """Server-side dry runs as the admin: the Deployment is valid for the v1.37.2 server, and
    its pod passes the namespace's ``restricted`` Pod Security level (enforced: a pod without
    the security settings is rejected there)."""
    deployment = _one("Deployment")
    ns = deployment["metadata"]["namespace"]
    assert ns == deployed.namespace
    template = deployment["spec"]["template"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "scheduler-", "labels": template["metadata"]["labels"]},
        "spec": template["spec"],
    }
    bare = {
        **pod,
        "spec": {
            "containers": [{"name": "c", "image": template["spec"]["containers"][0]["image"]}]
        },
    }
    with control_plane.client() as api:
        resp = api.create(f"/apis/apps/v1/namespaces/{ns}/deployments", deployment, dry_run=True)
        assert resp.status == 201, resp.message
        resp = api.create(f"/api/v1/namespaces/{ns}/pods", pod, dry_run=True)
        assert resp.status == 201, resp.message
        resp = api.create(f"/api/v1/namespaces/{ns}/pods", bare, dry_run=True)
        assert resp.status == 403, resp.message
        assert 'violates PodSecurity "restricted' in resp.message
