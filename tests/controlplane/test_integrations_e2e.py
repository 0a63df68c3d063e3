"""The reference integrations and the pod webhook on the real v1.37.2 API server.

The JobSet and LeaderWorkerSet CRDs (structural schemas written for these tests from the
published API types, reduced to the fields the integrations read) and the example TrainJob
CRD are installed; the Reconcilers run against the server through ``KubeCluster``; the pod
webhook serves TLS on loopback and a ``MutatingWebhookConfiguration`` (``url`` client config,
``caBundle`` of a self-signed CA) makes kube-apiserver call it for every pod created in the
test's namespace. Pods are created the way their controllers would (labels, ownerReferences,
no ``schedulingGroup``) and must come back linked by the webhook.

There is no kube-controller-manager here: PodGroups keep their protection finalizer after a
delete (they show a ``deletionTimestamp``), and no garbage collector runs -- the controller
itself must leave nothing behind.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import importlib.util
import json
import random
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import pytest

from workloadbuilder import integrations
from workloadbuilder.api import PodGroup, Workload, object_to_dict
from workloadbuilder.cluster import ClusterProxy, KubeCluster
from workloadbuilder.errors import NotFound
from workloadbuilder.integrations.job import SCHEDULING_ANNOTATION, opted_in_job
from workloadbuilder.integrations.webhook import PodWebhook, self_signed
from workloadbuilder.kinds import plan_for, plan_job
from workloadbuilder.kinds.lws import lws_pods
from workloadbuilder.runtime import EVENT_GANG_UNSCHEDULABLE, Reconciler
from workloadbuilder.testing import (
    ControlPlane,
    make_job,
    make_jobset,
    make_lws,
    make_replicated_job,
    make_scheduling,
)

pytestmark = pytest.mark.controlplane

T = TypeVar("T")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "trainjob"


def _load(name: str) -> ModuleType:
    sys.path.insert(0, str(EXAMPLE))
    try:
        spec = importlib.util.spec_from_file_location(name, EXAMPLE / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(EXAMPLE))


async def _until(
    probe: Callable[[], Awaitable[T]], ok: Callable[[T], bool], *, timeout: float = 30.0
) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = await probe()
        if ok(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out; last value: {value!r}")
        await asyncio.sleep(0.1)


class _Env:
    def __init__(self, cluster: KubeCluster, namespace: str, reconcilers: list[Reconciler]):
        self.cluster = cluster
        self.ns = namespace
        self.reconcilers = reconcilers

    async def names(self, kind: str, *, live_only: bool = False) -> list[str]:
        out = []
        for o in (await self.cluster.list(kind, self.ns)).items:
            meta = o["metadata"] if isinstance(o, dict) else object_to_dict(o)["metadata"]
            if live_only and meta.get("deletionTimestamp"):
                continue
            out.append(meta["name"])
        return sorted(out)

    async def wait_names(self, kind: str, want: list[str], *, live_only: bool = True) -> None:
        await _until(lambda: self.names(kind, live_only=live_only), lambda n: n == sorted(want))


@contextlib.asynccontextmanager
async def _running(
    control_plane: ControlPlane,
    namespace: str,
    kinds: list[str],
    extra: Sequence[Any] = (),
) -> AsyncIterator[_Env]:
    cluster = KubeCluster.from_kubeconfig(control_plane.kubeconfig)
    reconcilers = [Reconciler(cluster, integrations.integration_for(k)) for k in kinds]
    reconcilers += [Reconciler(cluster, i) for i in extra]
    run_dir = control_plane.run_dir / f"webhook-{namespace}"
    cert, key, ca = self_signed(str(run_dir), ["127.0.0.1"])
    hook = PodWebhook(reconcilers, cert_file=cert, key_file=key)
    await hook.start("127.0.0.1", 0)
    config_name = f"wb-{namespace}"
    config = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": config_name},
        "webhooks": [
            {
                "name": "pods.integrations.workloadbuilder.io",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Fail",  # the test wants to see every call
                "timeoutSeconds": 5,
                "clientConfig": {
                    "url": f"https://127.0.0.1:{hook.port}/mutate",
                    "caBundle": base64.b64encode(ca).decode(),
                },
                "rules": [
                    {
                        "operations": ["CREATE"],
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "resources": ["pods"],
                        "scope": "Namespaced",
                    }
                ],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            }
        ],
    }
    from workloadbuilder.integrations.webhook import MUTATING_WEBHOOK_CONFIGURATION

    await cluster.create(config)
    tasks = []
    try:
        for r in reconcilers:
            await r.start()
        tasks = [asyncio.create_task(r.run()) for r in reconcilers]
        yield _Env(cluster, namespace, reconcilers)
    finally:
        with contextlib.suppress(NotFound):
            await cluster.delete(MUTATING_WEBHOOK_CONFIGURATION, config_name)
        for r in reconcilers:
            await r.stop()
        for t in tasks:
            t.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        await hook.stop()
        await cluster.close()


async def test_lws_groups_webhook_links_resize_and_cleanup(
    control_plane: ControlPlane, crds: list[str], namespace: str
) -> None:
    async with _running(control_plane, namespace, ["lws"]) as env:
        lws = make_lws("l", namespace).replicas(2).size(2).scheduling(make_scheduling()).obj()
        await env.cluster.create(lws)
        await env.wait_names("PodGroup", ["l-0", "l-1"])
        assert await env.names("Workload") == ["l"]
        # the pods as the LWS controller's StatefulSets create them: linked by the webhook
        for pod in lws_pods(lws):
            created = await env.cluster.create(pod)
            assert isinstance(created, dict)
            want = f"l-{pod['metadata']['labels']['leaderworkerset.sigs.k8s.io/group-index']}"
            assert created["spec"]["schedulingGroup"] == {"podGroupName": want}
        # a pod that is not ours passes unchanged
        other = await env.cluster.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "other", "namespace": namespace},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            }
        )
        assert isinstance(other, dict) and "schedulingGroup" not in other["spec"]
        # elastic: replicas 2 -> 3 -> 1
        live = await env.cluster.get("LeaderWorkerSet", "l", namespace)
        assert isinstance(live, dict)
        live["spec"]["replicas"] = 3
        live = await env.cluster.update(live)
        await env.wait_names("PodGroup", ["l-0", "l-1", "l-2"])
        assert isinstance(live, dict)
        live["spec"]["replicas"] = 1
        await env.cluster.update(live)
        await env.wait_names("PodGroup", ["l-0"])  # l-1, l-2 are terminating (finalizer)
        # deletion: no garbage collector here, the controller removes its objects
        await env.cluster.delete("LeaderWorkerSet", "l", namespace)
        await env.wait_names("Workload", [])
        await env.wait_names("PodGroup", [])


async def test_jobset_job_trainjob_and_events(
    control_plane: ControlPlane, crds: list[str], namespace: str
) -> None:
    operator = _load("trainjob_operator")
    async with _running(
        control_plane, namespace, ["jobset", "job"], [operator.TrainJobIntegration()]
    ) as env:
        # JobSet: one gang over both child Jobs; their pods (job-name label) are linked
        js = (
            make_jobset("js", namespace)
            .scheduling(make_scheduling().gang())
            .replicated_job(make_replicated_job("w").replicas(2))
            .obj()
        )
        await env.cluster.create(js)
        await _until(lambda: env.names("PodGroup"), lambda n: len(n) == 1)
        (js_group,) = await env.names("PodGroup")
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "js-w-1-0",
                "namespace": namespace,
                "labels": {
                    "batch.kubernetes.io/job-name": "js-w-1",
                    "jobset.sigs.k8s.io/jobset-name": "js",
                },
            },
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]},
        }
        created = await env.cluster.create(pod)
        assert isinstance(created, dict)
        assert created["spec"]["schedulingGroup"] == {"podGroupName": js_group}

        # an opted-in Job: exactly the native controller's objects
        job = make_job("opt", namespace).parallelism(2).obj()
        job["metadata"]["annotations"] = {
            SCHEDULING_ANNOTATION: json.dumps({"schedulingPolicy": {"gang": {}}})
        }
        live_job = await env.cluster.create(job)
        assert isinstance(live_job, dict)
        native = opted_in_job(live_job)
        assert native is not None
        plan = plan_job(native)
        wl_name = plan.workload.metadata.name or ""
        wl = await _until(lambda: _get(env, "Workload", wl_name), lambda w: isinstance(w, Workload))
        assert isinstance(wl, Workload)
        plan = plan.with_workload_uid(wl.metadata.uid or "")
        pg_name = plan.pod_groups[0].metadata.name or ""
        pg = await _until(lambda: _get(env, "PodGroup", pg_name), lambda p: p is not None)
        assert isinstance(pg, PodGroup)
        assert pg.metadata.owner_references == plan.pod_groups[0].metadata.owner_references
        assert pg.spec.scheduling_policy == plan.pod_groups[0].spec.scheduling_policy
        assert wl.spec == plan.workload.spec

        # the scheduler's verdict is mirrored as an event on the Job
        cond = {
            "type": "PodGroupInitiallyScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/0 nodes are available",
            "lastTransitionTime": "2026-12-01T00:00:00Z",
        }
        await env.cluster.patch(
            "PodGroup",
            pg_name,
            {"status": {"conditions": [cond]}},
            namespace,
            subresource="status",
        )

        async def events() -> list[tuple[str, str]]:
            return [
                (e["involvedObject"]["name"], e["reason"])
                for e in (await env.cluster.list("Event", namespace)).items
                if isinstance(e, dict)
            ]

        await _until(events, lambda ev: ("opt", EVENT_GANG_UNSCHEDULABLE) in ev)

        # a custom CRD with a 29-line integration
        tj = await env.cluster.create(
            {**operator.EXAMPLE, "metadata": {"name": "llm", "namespace": namespace}}
        )
        await _until(lambda: env.names("Workload"), lambda n: "llm" in n)

        async def tj_conditions() -> list[dict[str, Any]]:
            live = await env.cluster.get("TrainJob", "llm", namespace)
            assert isinstance(live, dict)
            return list((live.get("status") or {}).get("conditions") or [])

        # its integration declares conditions_path: the status subresource gets a condition
        conds = await _until(tj_conditions, lambda c: bool(c))
        assert [(c["type"], c["status"], c["reason"]) for c in conds] == [
            ("GangScheduled", "Unknown", "Pending")
        ]
        await operator.reconcile_pods(env.cluster, tj)
        tj_pods = [
            p
            for p in (await env.cluster.list("Pod", namespace)).items
            if isinstance(p, dict) and p["metadata"]["name"].startswith("llm-")
        ]
        assert len(tj_pods) == 4
        assert len({p["spec"]["schedulingGroup"]["podGroupName"] for p in tj_pods}) == 1

        # deleting the owners leaves no Workload behind (no GC in this control plane)
        await env.cluster.delete("JobSet", "js", namespace)
        await env.cluster.delete("Job", "opt", namespace)
        await env.cluster.delete("TrainJob", "llm", namespace)
        await env.wait_names("Workload", [])
        await env.wait_names("PodGroup", [])


async def _get(env: _Env, kind: str, name: str) -> Any:
    try:
        return await env.cluster.get(kind, name, env.ns)
    except NotFound:
        return None


async def test_jobset_suspend_keeps_the_gang_and_resize_moves_min_count(
    control_plane: ControlPlane, crds: list[str], namespace: str
) -> None:
    """On the real API server: a suspended JobSet still gets its Workload and PodGroup (the
    gang waits for its pods, not for the owner), resuming changes nothing, and growing a
    ReplicatedJob moves the gang's minCount through the integration's resize patch."""
    async with _running(control_plane, namespace, ["jobset"]) as env:
        js = (
            make_jobset("sus", namespace)
            .scheduling(make_scheduling().gang())
            .replicated_job(make_replicated_job("w").replicas(2))
            .obj()
        )
        js["spec"]["suspend"] = True
        await env.cluster.create(js)
        await _until(lambda: env.names("PodGroup"), lambda n: len(n) == 1)
        (name,) = await env.names("PodGroup")
        workloads = await env.names("Workload")
        assert len(workloads) == 1

        async def min_count() -> int | None:
            pg = await _get(env, "PodGroup", name)
            if not isinstance(pg, PodGroup) or pg.spec.scheduling_policy.gang is None:
                return None
            return int(pg.spec.scheduling_policy.gang.min_count)

        assert await min_count() == 2
        live = await env.cluster.get("JobSet", "sus", namespace)
        assert isinstance(live, dict)
        live["spec"]["suspend"] = False
        live = await env.cluster.update(live)
        assert isinstance(live, dict)
        live["spec"]["replicatedJobs"][0]["replicas"] = 3
        await env.cluster.update(live)
        assert await _until(min_count, lambda m: m == 3) == 3
        # the same objects, resized in place: nothing created twice, nothing left stale
        assert await env.names("PodGroup") == [name]
        assert await env.names("Workload") == workloads


def test_crds_are_structural(crds: list[str], control_plane: ControlPlane) -> None:
    with control_plane.client() as api:
        for name in crds:
            r = api.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
            conds = {c["type"]: c["status"] for c in r.body["status"]["conditions"]}
            assert conds.get("NonStructuralSchema", "False") == "False"
            assert conds["Established"] == "True"


async def test_gangs_end_bound_all_or_nothing_with_our_scheduler(
    control_plane: ControlPlane, crds: list[str], namespace: str
) -> None:
    from workloadbuilder.scheduler import Scheduler, SchedulerConfig
    from workloadbuilder.testing import make_node, make_pod_template

    pool_label = "integrations-e2e.workloadbuilder.test/pool"
    scheduler_name = f"wb-{namespace}"
    async with _running(control_plane, namespace, ["lws"]) as env:
        nodes = [f"{namespace}-n{i}" for i in range(2)]
        for n in nodes:
            node = make_node(n).label(pool_label, namespace)
            await env.cluster.create(
                node.resources({"cpu": "4", "memory": "8Gi", "pods": 110}).obj()
            )
        sched = Scheduler(env.cluster, SchedulerConfig(scheduler_name=scheduler_name))
        runner = asyncio.create_task(sched.run())
        try:

            def lws_of(name: str, replicas: int, cpu: str) -> dict[str, Any]:
                template = (
                    make_pod_template()
                    .scheduler_name(scheduler_name)
                    .node_selector(pool_label, namespace)
                    .request("cpu", cpu)
                )
                return (
                    make_lws(name, namespace)
                    .replicas(replicas)
                    .size(3)
                    .worker_template(template)
                    .scheduling(make_scheduling())
                    .obj()
                )

            fits = lws_of("fits", 2, "1")  # 2 gangs x 3 pods x 1 cpu: fit in 8 cpus
            big = lws_of("big", 1, "2")  # then 3 x 2 cpu: only 2 cpus are left
            for lws in (fits, big):
                await env.cluster.create(lws)
            await env.wait_names("PodGroup", ["big-0", "fits-0", "fits-1"])
            for lws in (fits, big):
                for pod in lws_pods(lws):
                    created = await env.cluster.create(pod)
                    assert isinstance(created, dict) and created["spec"]["schedulingGroup"]

            async def pods() -> dict[str, dict[str, Any]]:
                return {
                    p["metadata"]["name"]: p
                    for p in (await env.cluster.list("Pod", namespace)).items
                    if isinstance(p, dict)
                }

            await _until(
                pods,
                lambda ps: all(
                    p["spec"].get("nodeName") in nodes
                    for n, p in ps.items()
                    if n.startswith("fits-")
                ),
                timeout=60,
            )

            async def events() -> list[tuple[str, str, str]]:
                return [
                    (e["involvedObject"]["name"], e["reason"], e["message"])
                    for e in (await env.cluster.list("Event", namespace)).items
                    if isinstance(e, dict)
                ]

            ev = await _until(
                events,
                lambda ev: (
                    any(o == "big" and r == EVENT_GANG_UNSCHEDULABLE for o, r, _ in ev)
                    and sum(1 for o, r, _ in ev if o == "fits" and r == "GangScheduled") == 2
                ),
                timeout=60,
            )
            current = await pods()
            assert not any(
                p["spec"].get("nodeName") for n, p in current.items() if n.startswith("big-")
            )
            (msg,) = [m for o, r, m in ev if o == "big" and r == EVENT_GANG_UNSCHEDULABLE]
            assert "big-0" in msg
        finally:
            await sched.stop()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(runner, 30)
            for n in nodes:
                with contextlib.suppress(NotFound):
                    await env.cluster.delete("Node", n)


class _Crash(ClusterProxy):
    """Cancels (like a killed process) before the ``budget``-th write."""

    def __init__(self, inner: Any, budget: int) -> None:
        super().__init__(inner)
        self.budget = budget

    async def around(self, verb: str, info: Any, subresource: Any, call: Any) -> Any:
        if verb in ("create", "patch", "update", "delete"):
            if self.budget <= 0:
                call.close()
                raise asyncio.CancelledError("crash")
            self.budget -= 1
        return await call


@pytest.mark.parametrize("seed", [1, 2])
async def test_restarts_at_random_points_leave_no_duplicates_or_orphans(
    control_plane: ControlPlane, crds: list[str], namespace: str, seed: int
) -> None:
    rng = random.Random(seed)
    cluster = KubeCluster.from_kubeconfig(control_plane.kubeconfig)
    try:
        js = await cluster.create(
            make_jobset("js", namespace)
            .scheduling(make_scheduling().gang())
            .replicated_job(make_replicated_job("w").replicas(2))
            .replicated_job(make_replicated_job("d").depends_on("w"))
            .obj()
        )
        lws = await cluster.create(
            make_lws("l", namespace).replicas(3).size(2).scheduling(make_scheduling()).obj()
        )
        for _ in range(4):
            for kind in ("jobset", "lws"):
                crashing = _Crash(cluster, rng.randrange(0, 5))
                rec = Reconciler(crashing, integrations.integration_for(kind), watch_pods=False)
                await rec.start()
                with contextlib.suppress(asyncio.CancelledError):
                    await rec.until_idle()
                await rec.stop()
        recs = [
            Reconciler(cluster, integrations.integration_for(k), watch_pods=False)
            for k in ("jobset", "lws")
        ]
        for r in recs:
            await r.start()
        for _ in range(20):
            if sum([await r.until_idle() for r in recs]) == 0:
                break
            await asyncio.sleep(0.2)
        for r in recs:
            await r.stop()
        want = plan_for(js).objects() + plan_for(lws).objects()
        by_kind: dict[str, list[str]] = {}
        for o in want:
            by_kind.setdefault(o.kind, []).append(o.metadata.name or "")
        for kind, wanted in by_kind.items():
            live = (await cluster.list(kind, namespace)).items
            assert sorted(o.metadata.name or "" for o in live) == sorted(wanted)  # type: ignore[union-attr]
            for o in live:
                controllers = [r for r in o.metadata.owner_references if r.controller]  # type: ignore[union-attr]
                assert len(controllers) == 1 and controllers[0].uid in (
                    js["metadata"]["uid"],  # type: ignore[index]
                    lws["metadata"]["uid"],  # type: ignore[index]
                )
    finally:
        await cluster.close()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_cli_self_signed_mode_patches_the_ca_bundle_and_is_called(
    control_plane: ControlPlane, crds: list[str], namespace: str
) -> None:
    """``integrations run --self-signed``: the CA goes into the MutatingWebhookConfiguration,
    after which kube-apiserver's calls over TLS link the pods."""
    import signal
    import subprocess
    import urllib.request

    from workloadbuilder.integrations.webhook import MUTATING_WEBHOOK_CONFIGURATION

    port, metrics = _free_port(), _free_port()
    name = f"wb-cli-{namespace}"
    admin = KubeCluster.from_kubeconfig(control_plane.kubeconfig)
    config = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": "lws-pods.integrations.workloadbuilder.io",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Fail",
                "clientConfig": {"url": f"https://127.0.0.1:{port}/mutate"},
                "rules": [
                    {
                        "operations": ["CREATE"],
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "resources": ["pods"],
                    }
                ],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "objectSelector": {
                    "matchExpressions": [
                        {"key": "leaderworkerset.sigs.k8s.io/name", "operator": "Exists"}
                    ]
                },
            }
        ],
    }
    await admin.create(config)
    cli = str(Path(sys.executable).parent / "workloadbuilder")
    argv = [
        cli, "integrations", "run", "--kinds", "lws",
        "--kubeconfig", str(control_plane.kubeconfig),
        "--webhook-port", str(port), "--webhook-host", "127.0.0.1", "--self-signed",
        "--webhook-hosts", "127.0.0.1", "--webhook-configuration", name,
        "--metrics-port", str(metrics), "--bind-address", "127.0.0.1",
    ]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:

        async def ready() -> bool:
            assert proc.poll() is None, proc.communicate()

            def get() -> int:
                try:
                    url = f"http://127.0.0.1:{metrics}/readyz"
                    with urllib.request.urlopen(url, timeout=2) as r:
                        return int(r.status)
                except OSError:
                    return 0

            return await asyncio.to_thread(get) == 200

        await _until(ready, lambda ok: ok, timeout=60)
        live = await admin.get(MUTATING_WEBHOOK_CONFIGURATION, name)
        assert isinstance(live, dict)
        bundle = base64.b64decode(live["webhooks"][0]["clientConfig"]["caBundle"])
        assert b"BEGIN CERTIFICATE" in bundle
        lws = make_lws("l", namespace).replicas(1).size(2).scheduling(make_scheduling()).obj()
        await admin.create(lws)

        async def groups() -> list[str]:
            return sorted(
                p.metadata.name or ""
                for p in (await admin.list("PodGroup", namespace)).items  # type: ignore[union-attr]
            )

        await _until(groups, lambda g: g == ["l-0"])
        for pod in lws_pods(lws):
            created = await admin.create(pod)
            assert isinstance(created, dict)
            assert created["spec"]["schedulingGroup"] == {"podGroupName": "l-0"}
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, 30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        with contextlib.suppress(NotFound):
            await admin.delete(MUTATING_WEBHOOK_CONFIGURATION, name)
        await admin.close()
