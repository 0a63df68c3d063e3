"""WorkQueue semantics, pod linking, restarts at random points, suspend, and the
``integrations run`` loop with leader election, on MemoryCluster."""

from __future__ import annotations

import asyncio
import contextlib
import random
from typing import Any

import pytest

from tests.controllers.conftest import names, run_until_quiet
from workloadbuilder.builder import POD_SET_ANNOTATION, PodSet, simple_workload
from workloadbuilder.cluster import ClusterProxy, MemoryCluster
from workloadbuilder.integrations.cli import detect_native_job_integration, run_integrations
from workloadbuilder.kinds import JobIntegration, JobSetIntegration, plan_for
from workloadbuilder.runtime import (
    LeaderElector,
    ManualClock,
    Reconciler,
    WorkQueue,
    link_pod,
    link_pod_template,
)
from workloadbuilder.testing import make_job, make_jobset, make_replicated_job, make_scheduling


def test_queue_dedups_and_never_hands_out_a_key_twice() -> None:
    q = WorkQueue(clock=ManualClock())
    q.add("a")
    q.add("a")
    q.add("b")
    assert len(q) == 2
    assert q.pop_ready() == "a"
    q.add("a")  # while processing: marked dirty, not handed out
    assert q.pop_ready() == "b"
    assert q.pop_ready() is None
    q.done("a")  # now it comes back
    assert q.pop_ready() == "a"


def test_queue_backoff_is_exponential_per_key_and_capped() -> None:
    clock = ManualClock()
    q = WorkQueue(base_delay=1.0, max_delay=5.0, clock=clock)
    delays = [q.when("k") for _ in range(5)]
    assert delays == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert q.when("other") == 1.0
    q.forget("k")
    assert q.when("k") == 1.0
    q.add_rate_limited("x")
    assert q.pop_ready() is None and q.next_wakeup() == clock.now() + 1.0
    clock.advance(1.0)
    assert q.pop_ready() == "x"


def test_link_pod_template_stamps_group_scheduler_and_priority() -> None:
    owner = {"apiVersion": "example.com/v1", "kind": "T", "metadata": {"name": "t", "uid": "u"}}
    plan = simple_workload(
        name="t",
        namespace="ns",
        owner=owner,
        priority_class_name="high",
        pod_sets=[PodSet(name="workers", replicas=2)],
    )
    template = {"metadata": {"labels": {"a": "b"}}, "spec": {"priority": 7, "containers": []}}
    out = link_pod_template(template, plan, "workers", scheduler_name="wb-scheduler")
    assert out["spec"]["schedulingGroup"] == {"podGroupName": plan.pod_group_names["workers"]}
    assert out["spec"]["schedulerName"] == "wb-scheduler"
    assert out["spec"]["priorityClassName"] == "high"
    assert "priority" not in out["spec"]
    assert out["metadata"]["annotations"] == {POD_SET_ANNOTATION: "workers"}
    assert template["spec"]["priority"] == 7  # the input is not changed
    pod = link_pod({"metadata": {"name": "p"}, "spec": {}}, plan, "workers")
    assert pod["metadata"]["namespace"] == "ns"
    # the plan finds the group of an annotated pod (what the webhook relies on)
    assert plan.pod_group_for({**pod, "spec": {}}) == plan.pod_group_names["workers"]
    with pytest.raises(KeyError):
        link_pod_template(template, plan, "nope")


class _Crash(ClusterProxy):
    """Raises (like a killed process) before the ``budget``-th write."""

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


@pytest.mark.parametrize("seed", range(6))
async def test_restart_at_random_points_leaves_no_duplicates_or_orphans(seed: int) -> None:
    rng = random.Random(seed)
    cluster = MemoryCluster()
    js = (
        make_jobset("js", "default")
        .scheduling(make_scheduling().gang())  # dependsOn: one group per ReplicatedJob
        .replicated_job(make_replicated_job("w").replicas(2))
        .replicated_job(make_replicated_job("d").replicas(1).depends_on("w"))
        .obj()
    )
    created = await cluster.create(js)
    assert isinstance(created, dict)
    for _ in range(3):  # three crashes at random points, then a clean run
        rec = Reconciler(
            _Crash(cluster, rng.randrange(0, 4)), JobSetIntegration(), watch_pods=False
        )
        await rec.start()
        with contextlib.suppress(asyncio.CancelledError):
            await rec.until_idle()
        await rec.stop()
    rec = Reconciler(cluster, JobSetIntegration(), watch_pods=False)
    await rec.start()
    await run_until_quiet(rec)
    await rec.stop()
    plan = plan_for(created)
    planned = sorted(p.metadata.name or "" for p in plan.pod_groups)
    assert len(planned) == 2
    assert await names(cluster, "PodGroup") == planned
    assert await names(cluster, "Workload") == [plan.workload.metadata.name]
    for pg in (await cluster.list("PodGroup", "default")).items:
        assert not isinstance(pg, dict)
        assert [r.uid for r in pg.metadata.owner_references if r.controller] == [
            created["metadata"]["uid"]
        ]


async def test_suspend_keeps_the_objects() -> None:
    cluster = MemoryCluster()
    job = make_job("s", "default").parallelism(2).scheduling(make_scheduling().gang()).obj()
    job["spec"]["suspend"] = True
    await cluster.create(job)
    rec = Reconciler(cluster, JobIntegration(), watch_pods=False)
    await rec.start()
    try:
        await run_until_quiet(rec)
        assert len(await names(cluster, "PodGroup")) == 1
        await cluster.patch("Job", "s", {"spec": {"suspend": False}}, "default")
        await run_until_quiet(rec)
        assert len(await names(cluster, "PodGroup")) == 1
    finally:
        await rec.stop()


async def test_run_integrations_with_leader_election() -> None:
    cluster = MemoryCluster()
    # MemoryCluster keeps Job spec.scheduling: looks like the native integration is on
    assert await detect_native_job_integration(cluster) is True
    await cluster.create(
        make_jobset("js", "default")
        .scheduling(make_scheduling().gang())
        .replicated_job(make_replicated_job("w"))
        .obj()
    )
    stop = asyncio.Event()
    elector = LeaderElector(cluster, identity="me", name="wb-int", namespace="default")
    task = asyncio.create_task(
        run_integrations(cluster, ["jobset", "lws"], stop=stop, elector=elector)
    )
    for _ in range(200):
        await asyncio.sleep(0.01)
        if await names(cluster, "PodGroup"):
            break
    assert elector.leading
    assert len(await names(cluster, "PodGroup")) == 1
    stop.set()
    assert await asyncio.wait_for(task, 10) == 0
    lease = await cluster.get("Lease", "wb-int", "default")
    assert isinstance(lease, dict) and lease["spec"]["holderIdentity"] == ""


def test_metrics_and_cli_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from prometheus_client import CollectorRegistry, generate_latest

    from workloadbuilder.integrations.cli import IntegrationsMetrics, register

    rec = Reconciler(MemoryCluster(), JobSetIntegration())
    rec.reconciles, rec.errors = 3, 1
    registry = CollectorRegistry()
    registry.register(IntegrationsMetrics([rec], None))
    text = generate_latest(registry).decode()
    assert 'workloadbuilder_integration_reconciles_total{kind="JobSet"} 3.0' in text
    assert 'workloadbuilder_integration_reconcile_errors_total{kind="JobSet"} 1.0' in text
    assert 'workloadbuilder_integration_queue_depth{kind="JobSet"} 0.0' in text

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    for argv, message in (
        (["integrations", "run", "--kinds", "job,nope"], "unknown --kinds nope"),
        (["integrations", "run", "--webhook-port", "9443"], "needs --tls-cert"),
        (["integrations", "run", "--self-signed", "--tls-cert", "c"], "cannot be combined"),
    ):
        args = parser.parse_args(argv)
        with pytest.raises(SystemExit, match=message):
            asyncio.run(args.func(args))
