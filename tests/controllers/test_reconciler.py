"""The generic Reconciler on MemoryCluster: create, adopt (or not), resize, delete, 409s,
restarts."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from workloadbuilder.api import OwnerReference, PodGroup, Workload
from workloadbuilder.cluster import ClusterProxy, MemoryCluster, ResourceInfo
from workloadbuilder.errors import Conflict
from workloadbuilder.kinds import (
    JobIntegration,
    JobSetIntegration,
    LeaderWorkerSetIntegration,
    plan_for,
)
from workloadbuilder.runtime import (
    EVENT_FAILED_WORKLOAD_CREATE,
    EVENT_GANG_SCHEDULED,
    EVENT_GANG_UNSCHEDULABLE,
    ManualClock,
    Reconciler,
)
from workloadbuilder.testing import (
    make_job,
    make_jobset,
    make_lws,
    make_replicated_job,
    make_scheduling,
)


async def _names(cluster: MemoryCluster, kind: str, ns: str = "default") -> list[str]:
    return [
        o.metadata.name if not isinstance(o, dict) else o["metadata"]["name"]
        for o in (await cluster.list(kind, ns)).items
    ]


async def _run(*reconcilers: Reconciler) -> int:
    total = 0
    for _ in range(10):
        n = sum([await r.until_idle() for r in reconcilers])
        total += n
        if n == 0:
            break
    return total


async def test_job_objects_created_in_order_and_resized_and_cleaned_up() -> None:
    cluster = MemoryCluster()
    job = await cluster.create(
        make_job("train", "default").parallelism(3).scheduling(make_scheduling().gang()).obj()
    )
    assert isinstance(job, dict)
    rec = Reconciler(cluster, JobIntegration(), watch_pods=False)
    await rec.start()
    try:
        await _run(rec)
        plan = plan_for(job)
        wl_name = plan.workload.metadata.name
        pg_name = plan.pod_groups[0].metadata.name
        assert await _names(cluster, "Workload") == [wl_name]
        assert await _names(cluster, "PodGroup") == [pg_name]
        wl = await cluster.get("Workload", wl_name or "", "default")
        pg = await cluster.get("PodGroup", pg_name or "", "default")
        assert isinstance(wl, Workload) and isinstance(pg, PodGroup)
        # the PodGroup is owned by the Job (controller) and the Workload (its real uid)
        refs = {(r.kind, r.uid, r.controller) for r in pg.metadata.owner_references}
        assert refs == {("Job", job["metadata"]["uid"], True), ("Workload", wl.metadata.uid, None)}
        assert pg.spec.scheduling_policy.gang is not None
        assert pg.spec.scheduling_policy.gang.min_count == 3

        # idempotent: nothing more to do, no write
        rv = cluster.resource_version
        assert (await rec.reconcile("default/train")).created == ()
        assert cluster.resource_version == rv

        # elastic resize: parallelism 3 -> 5 moves both minCounts
        await cluster.patch("Job", "train", {"spec": {"parallelism": 5}}, "default")
        await _run(rec)
        pg = await cluster.get("PodGroup", pg_name or "", "default")
        wl = await cluster.get("Workload", wl_name or "", "default")
        assert isinstance(pg, PodGroup) and isinstance(wl, Workload)
        assert pg.spec.scheduling_policy.gang and pg.spec.scheduling_policy.gang.min_count == 5
        gang = wl.spec.pod_group_templates[0].scheduling_policy.gang
        assert gang is not None and gang.min_count == 5

        # Jobs are orphaned by default: the controller removes what the GC does not
        await cluster.delete("Job", "train", "default")
        await _run(rec)
        assert await _names(cluster, "PodGroup") == []
        assert await _names(cluster, "Workload") == []
    finally:
        await rec.stop()


async def test_restart_adopts_and_creates_no_duplicates() -> None:
    """An integration that adopts (LWS, custom kinds: no upstream controller says otherwise)
    takes over an ownerless PodGroup of a planned name; a restart then writes nothing."""
    cluster = MemoryCluster()
    lws = make_lws("l", "default").replicas(2).size(2).scheduling(make_scheduling()).obj()
    created = await cluster.create(lws)
    assert isinstance(created, dict)
    plan = plan_for(created)
    # a PodGroup left without an owner (e.g. created by hand before the controller ran)
    pre = plan.pod_groups[0]

    await cluster.create(
        attrs.evolve(pre, metadata=attrs.evolve(pre.metadata, owner_references=()))
    )
    first = Reconciler(cluster, LeaderWorkerSetIntegration(), watch_pods=False)
    assert first.adopt_ownerless
    await first.start()
    await _run(first)
    await first.stop()
    pg = await cluster.get("PodGroup", pre.metadata.name or "", "default")
    assert isinstance(pg, PodGroup)
    assert [r.uid for r in pg.metadata.owner_references if r.controller] == [
        created["metadata"]["uid"]
    ]
    rv = cluster.resource_version
    second = Reconciler(cluster, LeaderWorkerSetIntegration(), watch_pods=False)
    await second.start()
    assert await _run(second) >= 1
    await second.stop()
    assert cluster.resource_version == rv  # a restart writes nothing
    assert sorted(await _names(cluster, "PodGroup")) == sorted(
        p.metadata.name for p in plan.pod_groups
    )


async def _events(cluster: MemoryCluster, reason: str) -> list[dict[str, Any]]:
    return [
        e
        for e in (await cluster.list("Event", "default")).items
        if isinstance(e, dict) and e.get("reason") == reason
    ]


async def _drain(rec: Reconciler, clock: ManualClock, seconds: float) -> None:
    """Reconcile, letting ``seconds`` of backoff pass on the manual clock."""
    for _ in range(200):
        await rec.until_idle()
        wake = rec.next_wakeup()
        if wake is None or wake - clock.now() > seconds:
            return
        clock.advance(max(wake - clock.now(), 0.0))


async def test_job_never_adopts_a_precreated_ownerless_workload() -> None:
    """kube-controller-manager v1.37.2 (tests/controlplane/test_job_parity.py): a Workload of
    the Job's name without a controller is left alone, FailedWorkloadCreate events, nothing
    else created, retried until the name is free; then the Job's own objects are made."""
    cluster = MemoryCluster()
    job = await cluster.create(
        make_job("train", "default").parallelism(2).scheduling(make_scheduling().gang()).obj()
    )
    assert isinstance(job, dict)
    plan = plan_for(job)
    pre = plan.workload
    await cluster.create(
        attrs.evolve(pre, metadata=attrs.evolve(pre.metadata, owner_references=()))
    )
    clock = ManualClock()
    rec = Reconciler(cluster, JobIntegration(), watch_pods=False, clock=clock, base_delay=1.0)
    assert not rec.adopt_ownerless
    await rec.start()
    try:
        await _drain(rec, clock, 10.0)
        wl = await cluster.get("Workload", pre.metadata.name or "", "default")
        assert isinstance(wl, Workload) and wl.metadata.owner_references == ()
        assert await _names(cluster, "PodGroup") == []
        events = await _events(cluster, EVENT_FAILED_WORKLOAD_CREATE)
        assert len(events) >= 2  # one per attempt, as upstream
        assert events[0]["type"] == "Warning"
        assert events[0]["message"] == (
            f'Failed to create Workload for Job train: workloads.scheduling.k8s.io "'
            f'{pre.metadata.name}" already exists'
        )
        assert rec.next_wakeup() is not None  # still retrying
        # the user removes it: the next retry creates the Job's own Workload and PodGroup
        await cluster.delete("Workload", pre.metadata.name or "", "default")
        await _drain(rec, clock, 600.0)
        wl = await cluster.get("Workload", pre.metadata.name or "", "default")
        assert isinstance(wl, Workload)
        assert [r.uid for r in wl.metadata.owner_references if r.controller] == [
            job["metadata"]["uid"]
        ]
        assert await _names(cluster, "PodGroup") == [plan.pod_groups[0].metadata.name]
    finally:
        await rec.stop()


async def test_job_treats_a_workload_of_another_owner_as_taken() -> None:
    """As kube-controller-manager (it only looks for objects the Job controls): a Workload of
    the planned name controlled by someone else is a taken name, reported and retried."""
    cluster = MemoryCluster()
    job = await cluster.create(
        make_job("train", "default").parallelism(2).scheduling(make_scheduling().gang()).obj()
    )
    assert isinstance(job, dict)
    pre = plan_for(job).workload
    other = OwnerReference(
        api_version="v1", kind="ConfigMap", name="someone", uid="u-1", controller=True
    )
    await cluster.create(
        attrs.evolve(pre, metadata=attrs.evolve(pre.metadata, owner_references=(other,)))
    )
    clock = ManualClock()
    rec = Reconciler(cluster, JobIntegration(), watch_pods=False, clock=clock, base_delay=1.0)
    await rec.start()
    try:
        await _drain(rec, clock, 10.0)
        assert len(await _events(cluster, EVENT_FAILED_WORKLOAD_CREATE)) >= 2
        assert await _events(cluster, "SchedulingObjectConflict") == []
        assert await _names(cluster, "PodGroup") == []
    finally:
        await rec.stop()


@pytest.mark.parametrize("kind", ["Job", "JobSet"])
async def test_ownerless_pod_group_is_not_adopted_and_gets_no_pods(kind: str) -> None:
    """A PodGroup of the planned name without a controller: Job (as kube-controller-manager)
    and JobSet (as the JobSet controller) leave it alone, create their Workload but no
    PodGroup, record no event for it, and the webhook links no pod to it; deleting the owner
    does not delete it (it was never theirs)."""
    cluster = MemoryCluster()
    if kind == "Job":
        obj = make_job("train", "default").parallelism(2).scheduling(make_scheduling().gang())
        integration: Any = JobIntegration()
    else:
        obj = make_jobset("train", "default").scheduling(make_scheduling().gang())
        obj = obj.replicated_job(make_replicated_job("w").replicas(1))
        integration = JobSetIntegration()
    created = await cluster.create(obj.obj())
    assert isinstance(created, dict)
    plan = plan_for(created)
    pre = plan.pod_groups[0]
    await cluster.create(
        attrs.evolve(pre, metadata=attrs.evolve(pre.metadata, owner_references=()))
    )
    clock = ManualClock()
    rec = Reconciler(cluster, integration, watch_pods=False, clock=clock, base_delay=1.0)
    await rec.start()
    try:
        await _drain(rec, clock, 10.0)
        assert await _names(cluster, "Workload") == [plan.workload.metadata.name]
        pg = await cluster.get("PodGroup", pre.metadata.name or "", "default")
        assert isinstance(pg, PodGroup) and pg.metadata.owner_references == ()
        assert await _events(cluster, EVENT_FAILED_WORKLOAD_CREATE) == []
        pod_name = f"{created['metadata']['name']}-0" if kind == "Job" else "train-w-0-0"
        job_name = "train" if kind == "Job" else "train-w-0"
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": pod_name,
                "namespace": "default",
                "labels": {"batch.kubernetes.io/job-name": job_name},
            },
            "spec": {"containers": [{"name": "c", "image": "i"}]},
        }
        assert plan.pod_group_for(pod) == pre.metadata.name
        assert rec.pod_group_for(pod) is None
        await cluster.delete(kind, "train", "default")
        await _drain(rec, clock, 10.0)
        assert await _names(cluster, "PodGroup") == [pre.metadata.name]
    finally:
        await rec.stop()


class _ConflictOnce(ClusterProxy):
    """Fails the first create of each Workload with a 409."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.failed: set[str] = set()

    async def create(self, obj: Any, namespace: str | None = None, **kw: Any) -> Any:
        if isinstance(obj, Workload) and obj.metadata.name not in self.failed:
            self.failed.add(obj.metadata.name or "")
            raise Conflict("the object has been modified; please apply your changes")
        return await super().create(obj, namespace, **kw)


async def test_409_is_retried_with_backoff() -> None:
    inner = MemoryCluster()
    clock = ManualClock()
    cluster = _ConflictOnce(inner)
    await inner.create(make_job("j", "default").parallelism(2).obj())
    rec = Reconciler(cluster, JobIntegration(), watch_pods=False, clock=clock, base_delay=1.0)
    await rec.start()
    try:
        await rec.until_idle()
        assert await _names(inner, "PodGroup") == []
        wake = rec.next_wakeup()
        assert wake is not None and wake == clock.now() + 1.0
        assert rec.queue.failures("default/j") == 1
        clock.advance(1.0)
        await rec.until_idle()
        assert len(await _names(inner, "PodGroup")) == 1
        assert rec.queue.failures("default/j") == 0
    finally:
        await rec.stop()


async def test_status_events_mirror_the_pod_group_condition() -> None:
    cluster = MemoryCluster()
    job = await cluster.create(
        make_job("g", "default").parallelism(2).scheduling(make_scheduling().gang()).obj()
    )
    assert isinstance(job, dict)
    rec = Reconciler(cluster, JobIntegration())
    await rec.start()
    try:
        await _run(rec)
        pg_name = plan_for(job).pod_groups[0].metadata.name or ""

        async def condition(status: str, reason: str, message: str) -> None:
            cond = {
                "type": "PodGroupInitiallyScheduled",
                "status": status,
                "reason": reason,
                "message": message,
                "lastTransitionTime": "2026-12-01T00:00:00Z",
            }
            await cluster.patch(
                "PodGroup",
                pg_name,
                {"status": {"conditions": [cond]}},
                "default",
                subresource="status",
            )
            await _run(rec)

        await condition("False", "Unschedulable", "0/3 nodes are available: 3 Insufficient cpu.")
        await condition("True", "Scheduled", "all 2 pods scheduled")
        events = (await cluster.list("Event", "default")).items
        got = [(e["reason"], e["type"]) for e in events if isinstance(e, dict)]
        assert (EVENT_GANG_UNSCHEDULABLE, "Warning") in got
        assert (EVENT_GANG_SCHEDULED, "Normal") in got
        msgs = [e["message"] for e in events if isinstance(e, dict)]
        assert any("3 Insufficient cpu" in m for m in msgs)
        # a resync does not repeat them
        await rec.reconcile("default/g")
        assert len((await cluster.list("Event", "default")).items) == len(events)
    finally:
        await rec.stop()


def test_resource_info_unused() -> None:
    assert ResourceInfo  # imported for custom kinds in other tests


async def test_preemption_of_a_member_is_reported_once() -> None:
    from workloadbuilder.runtime import EVENT_GANG_PREEMPTED
    from workloadbuilder.testing import make_pod

    cluster = MemoryCluster()
    job = await cluster.create(
        make_job("p", "default").parallelism(2).scheduling(make_scheduling().gang()).obj()
    )
    assert isinstance(job, dict)
    rec = Reconciler(cluster, JobIntegration())
    await rec.start()
    try:
        await _run(rec)
        group = plan_for(job).pod_groups[0].metadata.name or ""
        await cluster.create(make_pod("p-0", "default").pod_group(group).obj())
        cond = {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "PreemptionByScheduler",
            "message": "preempted by default/high",
            "lastTransitionTime": "2026-12-01T00:00:00Z",
        }
        await cluster.patch(
            "Pod", "p-0", {"status": {"conditions": [cond]}}, "default", subresource="status"
        )
        await _run(rec)
        await rec.reconcile("default/p")
        events = [e for e in (await cluster.list("Event", "default")).items if isinstance(e, dict)]
        preempted = [e for e in events if e["reason"] == EVENT_GANG_PREEMPTED]
        assert len(preempted) == 1
        assert "1 pod(s) preempted: preempted by default/high" in preempted[0]["message"]
        assert preempted[0]["involvedObject"]["name"] == "p"
        await cluster.delete("Pod", "p-0", "default")
        await _run(rec)
        assert rec.disrupted == {}
    finally:
        await rec.stop()


async def test_delegated_child_job_waits_for_its_parents_workload_and_plans_from_it() -> None:
    from workloadbuilder.builder import PodSet, simple_workload

    clock = ManualClock()
    cluster = MemoryCluster()
    parent = {
        "apiVersion": "example.com/v1",
        "kind": "Parent",
        "metadata": {"name": "p", "uid": "u"},
    }
    child = make_job("p-workers-0", "default").parallelism(2).obj()
    child["metadata"]["annotations"] = {"scheduling.k8s.io/group-template-name": "workers"}
    child["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "example.com/v1",
            "kind": "Parent",
            "name": "p",
            "uid": "u",
            "controller": True,
        }
    ]
    await cluster.create(child)
    rec = Reconciler(cluster, JobIntegration(), watch_pods=False, clock=clock)
    await rec.start()
    try:
        await _run(rec)
        assert await _names(cluster, "PodGroup") == []  # no parent Workload yet: it waits
        wake = rec.next_wakeup()
        assert wake is not None and wake > clock.now()

        parent_plan = simple_workload(
            name="p",
            namespace="default",
            owner=parent,
            pod_sets=[PodSet(name="workers", replicas=2)],
        )
        await cluster.create(parent_plan.workload)
        await _run(rec)  # the parent's Workload re-queues the child at once
        (pg_name,) = await _names(cluster, "PodGroup")
        pg = await cluster.get("PodGroup", pg_name, "default")
        assert isinstance(pg, PodGroup) and pg.spec.workload_ref is not None
        assert (pg.spec.workload_ref.workload_name, pg.spec.workload_ref.template_name) == (
            "p",
            "workers",
        )
        assert [r.kind for r in pg.metadata.owner_references] == ["Job"]
        assert await _names(cluster, "Workload") == ["p"]  # the child creates no Workload
    finally:
        await rec.stop()
