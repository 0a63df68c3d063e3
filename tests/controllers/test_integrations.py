"""The reference integrations on MemoryCluster: Job opt-in, JobSet and LWS resize."""

from __future__ import annotations

import copy
import json

from tests.controllers.conftest import names, run_until_quiet
from workloadbuilder.api import PodGroup, object_to_dict
from workloadbuilder.cluster import MemoryCluster
from workloadbuilder.integrations.job import (
    SCHEDULING_ANNOTATION,
    OptInJobIntegration,
    opted_in_job,
)
from workloadbuilder.integrations.jobset import JobSetIntegration
from workloadbuilder.integrations.lws import LeaderWorkerSetIntegration
from workloadbuilder.kinds import plan_job
from workloadbuilder.kinds.lws import lws_pods
from workloadbuilder.runtime import EVENT_FAILED_COMPILATION, Reconciler
from workloadbuilder.testing import (
    make_job,
    make_jobset,
    make_lws,
    make_replicated_job,
    make_scheduling,
)


def _strip(obj: dict) -> dict:
    out = copy.deepcopy(obj)
    meta = out["metadata"]
    for k in ("uid", "resourceVersion", "creationTimestamp", "generation", "finalizers"):
        meta.pop(k, None)
    out.pop("status", None)
    spec = out.get("spec", {})
    for k in ("priority", "disruptionMode", "preemptionPolicy"):
        spec.pop(k, None)
    return out


async def test_opted_in_job_gets_exactly_the_native_objects() -> None:
    cluster = MemoryCluster()
    sched = {"schedulingPolicy": {"gang": {"minCount": 2}}}
    job = make_job("opt", "default").parallelism(3).obj()
    job["metadata"]["annotations"] = {SCHEDULING_ANNOTATION: json.dumps(sched)}
    created = await cluster.create(job)
    await cluster.create(make_job("plain", "default").parallelism(2).obj())
    assert isinstance(created, dict)
    rec = Reconciler(cluster, OptInJobIntegration(), watch_pods=False)
    await rec.start()
    try:
        await run_until_quiet(rec)
        native = opted_in_job(created)
        assert native is not None and native["spec"]["scheduling"] == sched
        plan = plan_job(native)
        wl = await cluster.get("Workload", plan.workload.metadata.name or "", "default")
        plan = plan.with_workload_uid(wl.metadata.uid or "")
        live = [
            _strip(object_to_dict(await cluster.get(o.kind, o.metadata.name or "", "default")))
            for o in plan.objects()
        ]
        assert live == [_strip(object_to_dict(o)) for o in plan.objects()]
        # the Job without the annotation is left alone (1 Workload in the namespace)
        assert len(await names(cluster, "Workload")) == 1
    finally:
        await rec.stop()


async def test_invalid_opt_in_annotation_is_reported_once() -> None:
    cluster = MemoryCluster()
    job = make_job("bad", "default").parallelism(1).obj()
    job["metadata"]["annotations"] = {SCHEDULING_ANNOTATION: "[1, 2]"}
    await cluster.create(job)
    rec = Reconciler(cluster, OptInJobIntegration(), watch_pods=False)
    await rec.start()
    try:
        await run_until_quiet(rec)
        await rec.reconcile("default/bad")
        events = [e for e in (await cluster.list("Event", "default")).items if isinstance(e, dict)]
        assert [e["reason"] for e in events] == [EVENT_FAILED_COMPILATION]
        assert SCHEDULING_ANNOTATION in events[0]["message"]
        assert await names(cluster, "Workload") == []
    finally:
        await rec.stop()


async def test_jobset_resize_patches_min_count() -> None:
    cluster = MemoryCluster()
    js = (
        make_jobset("js", "default")
        .scheduling(make_scheduling().gang())
        .replicated_job(make_replicated_job("w").replicas(2))
        .obj()
    )
    await cluster.create(js)
    rec = Reconciler(cluster, JobSetIntegration(), watch_pods=False)
    await rec.start()
    try:
        await run_until_quiet(rec)
        pgs = await names(cluster, "PodGroup")
        assert len(pgs) == 1
        pg = await cluster.get("PodGroup", pgs[0], "default")
        assert isinstance(pg, PodGroup) and pg.spec.scheduling_policy.gang is not None
        assert pg.spec.scheduling_policy.gang.min_count == 2
        live = await cluster.get("JobSet", "js", "default")
        assert isinstance(live, dict)
        live["spec"]["replicatedJobs"][0]["replicas"] = 3
        await cluster.update(live)
        await run_until_quiet(rec)
        pg = await cluster.get("PodGroup", pgs[0], "default")
        assert isinstance(pg, PodGroup) and pg.spec.scheduling_policy.gang is not None
        assert pg.spec.scheduling_policy.gang.min_count == 3
    finally:
        await rec.stop()


async def test_lws_replicas_scale_groups_and_pods_map_to_them() -> None:
    cluster = MemoryCluster()
    lws = make_lws("l", "default").replicas(2).size(3).scheduling(make_scheduling()).obj()
    await cluster.create(lws)
    rec = Reconciler(cluster, LeaderWorkerSetIntegration(), watch_pods=False)
    await rec.start()
    try:
        await run_until_quiet(rec)
        assert await names(cluster, "PodGroup") == ["l-0", "l-1"]
        pods = lws_pods(lws)
        assert {rec.pod_group_for(p) for p in pods} == {"l-0", "l-1"}
        live = await cluster.get("LeaderWorkerSet", "l", "default")
        assert isinstance(live, dict)
        live["spec"]["replicas"] = 3
        live = await cluster.update(live)
        await run_until_quiet(rec)
        assert await names(cluster, "PodGroup") == ["l-0", "l-1", "l-2"]
        assert isinstance(live, dict)
        live["spec"]["replicas"] = 1
        await cluster.update(live)
        await run_until_quiet(rec)
        assert await names(cluster, "PodGroup") == ["l-0"]
        await cluster.delete("LeaderWorkerSet", "l", "default")
        await run_until_quiet(rec)
        assert await names(cluster, "PodGroup") == []
        assert await names(cluster, "Workload") == []
    finally:
        await rec.stop()
