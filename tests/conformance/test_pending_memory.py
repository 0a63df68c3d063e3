"""A known scheduler bug found by the conformance suite (``preemption/basic-group-grows``,
tests/conformance/pending/), reproduced deterministically on MemoryCluster: pods of a basic
PodGroup that arrive while the group's first preemption is still under way are never
placed, though lower-priority pods that would make room are running. kube-scheduler v1.37.2
preempts for them (tests/controlplane/test_conformance.py::test_pending_rules_pass_on_upstream).
Strict: when the scheduler is fixed this test fails, and the rule moves to the shipped ones."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from scheduler import Scheduler, SchedulerConfig
from workloadbuilder.api import PodGroup, from_dict, to_dict
from workloadbuilder.cluster import MemoryCluster
from workloadbuilder.testing.builders import (
    make_node,
    make_pod,
    make_pod_group,
    make_priority_class,
)


def _pod(
    name: str, pc: str, *, group: str | None = None, node: str | None = None
) -> dict[str, Any]:
    b = make_pod(name, "ns").scheduler_name("x").priority_class(pc).request("cpu", "1")
    if group:
        b.pod_group(group)
    if node:
        b.node_name(node)
    obj = b.obj()
    obj["spec"]["terminationGracePeriodSeconds"] = 0
    return obj


@pytest.mark.xfail(
    reason="scheduler bug: a basic PodGroup's pods that arrive during its first preemption "
    "are not placed (no further preemption)",
    strict=True,
)
async def test_basic_group_pods_arriving_during_its_preemption_are_placed() -> None:
    cluster = MemoryCluster()
    s = Scheduler(cluster, SchedulerConfig(scheduler_name="x", preemption=True))
    await s.start()

    async def step() -> None:
        await s.sync()
        await s.until_idle()

    try:
        await cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}})
        await cluster.create(make_node("a").resources({"cpu": "3", "pods": "110"}).ready().obj())
        await cluster.create(make_priority_class("low", 10).obj())
        await cluster.create(make_priority_class("high", 100).obj())
        for i in range(3):
            await cluster.create(_pod(f"low-{i}", "low", node="a"))
        await cluster.create(
            from_dict(make_pod_group("high", "ns").priority_class("high").obj(), PodGroup)
        )
        await cluster.create(_pod("high-0", "high", group="high"))
        await step()  # high-0's cycle: one low pod is preempted, high-0 nominated
        await cluster.create(_pod("high-1", "high", group="high"))
        await cluster.create(_pod("high-2", "high", group="high"))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 4  # past its retries after 1 s and 2 s of backoff
        bound: dict[str, str] = {}
        while loop.time() < deadline:
            await step()
            pods = [to_dict(p) for p in (await cluster.list("Pod", "ns")).items]
            bound = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods}
            if all(bound.get(f"high-{i}") for i in range(3)):
                break
            await asyncio.sleep(0.1)
        assert all(bound.get(f"high-{i}") for i in range(3)), bound
        assert not any(n.startswith("low-") for n in bound), bound
    finally:
        await s.stop()
        await cluster.close()
