"""Properties over random clusters and workloads (MemoryCluster, modest example counts):
capacity is never exceeded, gangs are all-or-nothing, every failed gang is explained, and the
outcome is deterministic."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workloadbuilder.api import (
    BasicSchedulingPolicy,
    GangSchedulingPolicy,
    ObjectMeta,
    PodGroup,
    PodGroupSchedulingPolicy,
    PodGroupSpec,
)
from workloadbuilder.cluster import MemoryCluster
from workloadbuilder.resources import parse_quantity
from workloadbuilder.scheduler import Scheduler, SchedulerConfig
from workloadbuilder.testing.builders import make_node, make_pod

NAME = "workloadbuilder-scheduler"

nodes_st = st.lists(
    st.tuples(st.integers(1, 8), st.integers(0, 4), st.booleans()),  # cpus, gpus, cordoned
    min_size=1,
    max_size=6,
)
gangs_st = st.lists(
    st.tuples(
        st.integers(1, 6),  # size
        st.integers(0, 5),  # minCount - size offset (0 = basic group)
        st.sampled_from(["500m", "1", "2"]),
        st.integers(0, 2),  # gpus
    ),
    min_size=1,
    max_size=6,
)


async def _simulate(nodes: list[tuple[int, int, bool]], gangs: list[Any]) -> dict[str, Any]:
    c = MemoryCluster()
    for i, (cpu, gpu, cordoned) in enumerate(nodes):
        alloc = {"cpu": cpu, "memory": "64Gi", "pods": 110, "nvidia.com/gpu": gpu}
        await c.create(make_node(f"n{i}").unschedulable(cordoned).resources(alloc).obj())
    mins: dict[str, int] = {}
    for g, (size, offset, cpu, gpu) in enumerate(gangs):
        name = f"g{g}"
        min_count = max(1, size - offset + 1) if offset else 0
        policy = (
            PodGroupSchedulingPolicy(gang=GangSchedulingPolicy(min_count=min_count))
            if min_count
            else PodGroupSchedulingPolicy(basic=BasicSchedulingPolicy())
        )
        mins[name] = min_count
        await c.create(
            PodGroup(
                metadata=ObjectMeta(name=name, namespace="default"),
                spec=PodGroupSpec(scheduling_policy=policy),
            )
        )
        for j in range(size):
            pod = make_pod(f"{name}-{j}", "default").scheduler_name(NAME).pod_group(name)
            pod.container_name("c").image("x").request("cpu", cpu).request("memory", "1Gi")
            if gpu:
                pod.request("nvidia.com/gpu", gpu)
            await c.create(pod.obj())
    s = Scheduler(c, SchedulerConfig())
    await s.until_idle()
    pods = [p for p in (await c.list("Pod")).items if isinstance(p, dict)]
    items = (await c.list("PodGroup")).items
    groups = {pg.metadata.name: pg for pg in items if isinstance(pg, PodGroup)}
    explanations = dict(s.explanations)
    await s.stop()
    await c.close()
    return {"pods": pods, "groups": groups, "mins": mins, "explanations": explanations}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=nodes_st, gangs=gangs_st)
def test_capacity_all_or_nothing_and_explained(
    nodes: list[tuple[int, int, bool]], gangs: list[Any]
) -> None:
    out = asyncio.run(_simulate(nodes, gangs))
    used: dict[str, dict[str, int]] = {}
    bound: dict[str, int] = {}
    for p in out["pods"]:
        node = p["spec"].get("nodeName")
        group = p["spec"]["schedulingGroup"]["podGroupName"]
        bound.setdefault(group, 0)
        if not node:
            continue
        bound[group] += 1
        idx = int(node[1:])
        assert not nodes[idx][2], "bound to a cordoned node"
        for res, qty in p["spec"]["containers"][0]["resources"]["requests"].items():
            u = used.setdefault(node, {})
            u[res] = u.get(res, 0) + parse_quantity(qty, res)
    for node, u in used.items():
        cpu, gpu, _ = nodes[int(node[1:])]
        assert u.get("cpu", 0) <= cpu * 1000
        assert u.get("nvidia.com/gpu", 0) <= gpu
    for group, n in bound.items():
        m = out["mins"][group]
        if m:
            assert n == 0 or n >= m, f"{group}: {n} bound, minCount {m}"
        pg = out["groups"][group]
        conds = {c.type: c for c in (pg.status.conditions if pg.status else ())}
        cond = conds.get("PodGroupInitiallyScheduled")
        assert cond is not None
        if n:
            assert (cond.status, cond.reason) == ("True", "Scheduled")
        else:
            assert (cond.status, cond.reason) == ("False", "Unschedulable")
            assert cond.message == out["explanations"][("default", group)]
            assert cond.message


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=nodes_st, gangs=gangs_st)
def test_deterministic(nodes: list[tuple[int, int, bool]], gangs: list[Any]) -> None:
    def placement(out: dict[str, Any]) -> dict[str, str | None]:
        return {p["metadata"]["name"]: p["spec"].get("nodeName") for p in out["pods"]}

    first = asyncio.run(_simulate(nodes, gangs))
    second = asyncio.run(_simulate(nodes, gangs))
    assert placement(first) == placement(second)
    assert first["explanations"] == second["explanations"]
