"""Bindings whose answers are lost, on the real v1.37.2 API server.

The scheduler runs in this process on a ``KubeCluster`` behind the fault proxy, which
forwards a share of the ``pods/binding`` requests (they run: the pod is bound) and then
drops the connection without relaying the answer. The scheduler cannot tell such a binding
from one that never ran. Forgetting the pod would hand its node's room to other gangs while
the pod holds it: a CI chaos run overcommitted a node that way when kube-apiserver was
killed mid-run. So the demand here is larger than the nodes: four of six gangs fit, and the
lost answers must cost nothing -- no node overcommitted, no gang partial, every pod bound
counted as bound (its ``Scheduled`` event, no ``SchedulerError`` on it), the two gangs that
do not fit left whole and unbound.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
from _chaos import (
    NODE_CPU,
    PODS_PATH,
    Api,
    Gang,
    Observer,
    analyse,
    cleanup,
    create_gangs,
    create_nodes,
    violations,
    wait_until,
    write_report,
)
from kubernetes_asyncio.client import Configuration

from workloadbuilder.cluster import KubeCluster
from workloadbuilder.scheduler import Scheduler, SchedulerConfig
from workloadbuilder.testing import ControlPlane

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cluster"))
from _faultproxy import FaultPlan, FaultProxy

pytestmark = [pytest.mark.chaos, pytest.mark.controlplane]

NODES = 2
GANG = 16  # pods of 1 cpu: NODES * NODE_CPU / GANG = 4 gangs fit
GANGS = 6


async def _events(api: Api, ns: str) -> dict[str, int]:
    doc = await api.call("GET", f"/api/v1/namespaces/{ns}/events")
    out: dict[str, int] = {}
    for e in doc["items"]:
        if e.get("reason") == "Scheduled":
            name = e["involvedObject"]["name"]
            out[name] = out.get(name, 0) + 1
    return out


def _scheduled_false(pod: dict[str, Any]) -> dict[str, Any] | None:
    for c in (pod.get("status") or {}).get("conditions") or ():
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return dict(c)
    return None


async def test_lost_binding_answers_overcommit_nothing(control_plane: ControlPlane) -> None:
    ns = control_plane.create_namespace("lost-")
    name = f"lost-{ns}"
    gangs = [Gang(f"g{i}", GANG) for i in range(GANGS)]
    fits = NODES * NODE_CPU // GANG
    proxy = FaultProxy.in_front_of(control_plane.server, control_plane.kubeconfig, seed=21)
    proxy.plan = FaultPlan(p_lost_answer=0.25, lost_answer_suffix="/binding")
    url = await proxy.start()
    cluster = KubeCluster(Configuration(host=url))
    sched = Scheduler(cluster, SchedulerConfig(scheduler_name=name, bind_concurrency=16))
    async with Api(control_plane.kubeconfig) as api:
        nodes = await create_nodes(api, ns, NODES)
        obs = Observer(api, ns)
        obs.start()
        await create_gangs(api, ns, name, ns, gangs)
        runner = asyncio.create_task(sched.run())
        try:
            await wait_until(
                lambda: len(obs.node_of) >= fits * GANG or runner.done(), "4 gangs bound", 120
            )
            assert not runner.done(), runner

            def settled() -> bool:
                # every gang tried (the observer saw its PodGroup's condition) and nothing
                # in flight
                last = sorted(seq[-1] for seq in obs.conditions.values())
                return (
                    last == ["False"] * (GANGS - fits) + ["True"] * fits
                    and sched.binder.pending == 0
                    and sched.binder.in_flight == 0
                )

            await wait_until(settled, "the scheduler idle", 60)
            await asyncio.sleep(2.0)  # room for a wrong late binding to show
            report = await analyse(api, ns, obs, gangs, nodes)
            pods = {
                p["metadata"]["name"]: p
                for p in (await api.call("GET", PODS_PATH.format(ns=ns)))["items"]
            }
            events = await _events(api, ns)
        finally:
            await sched.stop()
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
            await cluster.close()
            await proxy.stop()
            await obs.stop()
            await cleanup(api, ns, nodes)
    report.update(lost_answers=proxy.counts["lost_answer"])
    write_report("lost-bind-answers", report)
    assert proxy.counts["lost_answer"] >= 4  # the fault happened, more than once
    assert violations(report) == {}
    assert report["gangs_bound"] == fits
    bound = {n for n, p in pods.items() if p["spec"].get("nodeName")}
    assert len(bound) == fits * GANG
    for n in bound:  # counted as bound: no SchedulerError written on it, its event recorded
        assert _scheduled_false(pods[n]) is None, (n, _scheduled_false(pods[n]))
    assert {n: events.get(n, 0) for n in bound} == dict.fromkeys(bound, 1)
