"""DRA, round 2: prioritized alternatives (``firstAvailable``), partitionable devices
(``sharedCounters`` / ``consumesCounters``) and device taints, on MemoryCluster and on the
real v1.37.2 API server (slices created by the test; no driver, no kubelet).

As kube-scheduler v1.37.2 (DRAPrioritizedList, DRAPartitionableDevices, DRADeviceTaints on
by default): a claim gets the first alternative that can be allocated, recorded as
``<request>/<subrequest>``; partitions of one GPU are handed out only while the GPU's
counters last, across the claims of one pod, the pods of one gang and the claims allocated
before; a device tainted ``NoSchedule`` / ``NoExecute`` goes only to a request that
tolerates the taint.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from dra_helpers import Dra, allocated
from sched_helpers import Env

KIND = 'device.attributes["gpu.example.com"].kind == "{}"'


@pytest.fixture
async def dra(env: Env) -> AsyncIterator[Dra]:
    d = Dra(env)
    try:
        yield d
    finally:
        await d.cleanup()


def _sub(name: str, cls: str, kind: str, count: int = 1) -> dict[str, Any]:
    return {
        "name": name,
        "deviceClassName": cls,
        "count": count,
        "selectors": [{"cel": {"expression": KIND.format(kind)}}],
    }


def _full_else_two_slices(cls: str) -> list[dict[str, Any]]:
    return [
        {
            "name": "gpu",
            "firstAvailable": [_sub("full", cls, "full"), _sub("slices", cls, "slice", 2)],
        }
    ]


async def test_first_available_falls_back_to_the_next_alternative(env: Env, dra: Dra) -> None:
    a = await env.node("a")
    gpu = await dra.device_class("gpu")
    await dra.node_slice(a, 1)
    requests = [
        {
            "name": "gpu",
            "firstAvailable": [
                {"name": "two", "deviceClassName": gpu, "count": 2},
                {"name": "one", "deviceClassName": gpu},
            ],
        }
    ]
    await dra.claim("choice", gpu, requests=requests)
    await dra.pod("p", {"gpu": "choice"})
    s = env.scheduler()
    await s.start()

    async def bound() -> bool:
        return "p" in await env.bound()

    await env.until(s, bound)
    assert allocated(await dra.get_claim("choice")) == [("gpu/one", "gpu.example.com", a, "gpu-0")]


async def test_partitions_of_one_gpu_are_never_handed_out_twice(env: Env, dra: Dra) -> None:
    # one GPU of 3 slices: the whole GPU, then nothing; three slices, then nothing
    a = await env.node("a", cpu="16")
    gpu = await dra.device_class("gpu")
    await dra.gpu_partitions(a, slices=3)
    await dra.claim("whole", gpu, selectors=(KIND.format("full"),))
    await dra.pod("whole", {"gpu": "whole"})
    for i in range(2):
        await dra.claim(f"part-{i}", gpu, selectors=(KIND.format("slice"),))
        await dra.pod(f"part-{i}", {"gpu": f"part-{i}"})
    s = env.scheduler()
    await s.start()
    await env.seen(s, lambda: env.cached_pods(s) == 3)

    async def decided() -> bool:
        conds = [await env.pod_condition(p) for p in ("whole", "part-0", "part-1")]
        return len(await env.bound()) + sum(c is not None for c in conds) >= 3

    await env.until(s, decided)
    placed = await env.bound()
    # pods are tried in creation order: the whole GPU first, no slice fits after it
    assert set(placed) == {"whole"}
    cond = await env.pod_condition("part-0")
    assert cond is not None
    assert cond["message"] == "0/1 nodes are available: 1 cannot allocate all claims."
    got = allocated(await dra.get_claim("whole"))
    assert got == [("gpu", "gpu.example.com", a, "gpu-0")]
    for i in range(2):
        assert allocated(await dra.get_claim(f"part-{i}")) == []


async def test_a_gang_shares_partitions_without_overlap(env: Env, dra: Dra) -> None:
    # 1 GPU of 7 slices on each of 2 nodes; a gang of 4 pods, each the whole GPU else two
    # slices: two pods take whole GPUs, the other two find no counters left -> not all fit
    nodes = [await env.node(n, cpu="16") for n in ("a", "b")]
    gpu = await dra.device_class("gpu")
    for n in nodes:
        await dra.gpu_partitions(n, slices=7)
    await env.pod_group("train", 4)
    for i in range(4):
        await dra.claim(f"train-{i}", gpu, requests=_full_else_two_slices(gpu))
        await dra.pod(f"train-{i}", {"gpu": f"train-{i}"}, "train")
    s = env.scheduler()
    await s.start()
    await env.seen(s, lambda: env.cached_pods(s) == 4)

    async def decided() -> bool:
        return await env.group_condition("train") is not None

    await env.until(s, decided)
    assert await env.bound() == {}
    for i in range(4):
        assert allocated(await dra.get_claim(f"train-{i}")) == []
    cond = await env.group_condition("train")
    # (the fourth pod, of the third's shape, is not tried: "at most 3")
    assert cond.message.startswith("minCount 4: at most 3 pods fit, 1 short; 2 fit on ")
    assert "no alternative can be allocated" in cond.message
    assert "lack counters (gpu-0/" in cond.message

    # a gang of 2 fits: one whole GPU per node
    await env.pod_group("pair", 2)
    for i in range(2):
        await dra.claim(f"pair-{i}", gpu, requests=_full_else_two_slices(gpu))
        await dra.pod(f"pair-{i}", {"gpu": f"pair-{i}"}, "pair")

    async def pair_bound() -> bool:
        return len(await env.bound("pair")) == 2

    await env.until(s, pair_bound)
    placed = await env.bound("pair")
    assert sorted(placed.values()) == sorted(nodes)
    for i in range(2):
        got = allocated(await dra.get_claim(f"pair-{i}"))
        assert got == [("gpu/full", "gpu.example.com", placed[f"pair-{i}"], "gpu-0")]


async def test_slices_of_one_gpu_go_to_the_pods_of_a_gang_until_counters_run_out(
    env: Env, dra: Dra
) -> None:
    # one GPU of 3 slices; a gang of 3 pods each asking for one slice: three distinct
    # slices, and the whole GPU is no longer free for a later pod
    a = await env.node("a", cpu="16")
    gpu = await dra.device_class("gpu")
    await dra.gpu_partitions(a, slices=3)
    await env.pod_group("g", 3)
    for i in range(3):
        await dra.claim(f"g-{i}", gpu, selectors=(KIND.format("slice"),))
        await dra.pod(f"g-{i}", {"gpu": f"g-{i}"}, "g")
    s = env.scheduler()
    await s.start()

    async def all_bound() -> bool:
        return len(await env.bound("g-")) == 3

    await env.until(s, all_bound)
    got = {allocated(await dra.get_claim(f"g-{i}"))[0][3] for i in range(3)}
    assert got == {"gpu-0-s0", "gpu-0-s1", "gpu-0-s2"}
    await dra.claim("late", gpu, selectors=(KIND.format("full"),))
    await dra.pod("late", {"gpu": "late"})

    async def late_decided() -> bool:
        return await env.pod_condition("late") is not None

    await env.until(s, late_decided)
    assert "late" not in await env.bound()


async def test_a_tainted_device_is_skipped_unless_tolerated(env: Env, dra: Dra) -> None:
    a = await env.node("a", cpu="16")
    gpu = await dra.device_class("gpu")
    await dra.slice(
        "a-gpus",
        {"nodeName": a},
        pool="a",
        devices=[
            {"name": "gpu-0", "taints": [{"key": "example.com/broken", "effect": "NoSchedule"}]},
            {"name": "gpu-1"},
        ],
    )
    await dra.claim("first", gpu)
    await dra.pod("first", {"gpu": "first"})
    s = env.scheduler()
    await s.start()

    async def first_bound() -> bool:
        return "first" in await env.bound()

    await env.until(s, first_bound)
    assert [g[3] for g in allocated(await dra.get_claim("first"))] == ["gpu-1"]

    await dra.claim("plain", gpu)
    await dra.pod("plain", {"gpu": "plain"})
    exactly = {
        "deviceClassName": gpu,
        "tolerations": [{"key": "example.com/broken", "operator": "Exists"}],
    }
    await dra.claim("tolerant", gpu, requests=[{"name": "gpu", "exactly": exactly}])
    await dra.pod("tolerant", {"gpu": "tolerant"})

    async def decided() -> bool:
        return "tolerant" in await env.bound() and await env.pod_condition("plain") is not None

    await env.until(s, decided)
    assert "plain" not in await env.bound()
    assert [g[3] for g in allocated(await dra.get_claim("tolerant"))] == ["gpu-0"]
    from workloadbuilder.scheduler._dra import DynamicResources

    plugin = next(p for p in s.framework.reserve if isinstance(p, DynamicResources))
    pod = s.cache.pods[(env.namespace, "plain")]
    reasons = plugin.diagnose_pod(pod, s.cache, s.cache.nodes.present_rows())
    assert reasons and "example.com/broken:NoSchedule not tolerated" in reasons[0][1]


async def test_a_device_taint_rule_taints_the_devices_it_selects(env: Env, dra: Dra) -> None:
    # DRADeviceTaintRules is GA and on in v1.37.2: a rule's taint counts as the slice's
    a = await env.node("a", cpu="16")
    gpu = await dra.device_class("gpu")
    await dra.node_slice(a, 2)
    rule = await dra.taint_rule(
        "maint",
        {"pool": a, "device": "gpu-0"},
        {"key": "example.com/maint", "effect": "NoSchedule"},
    )
    s = env.scheduler()
    await s.start()
    for i in range(2):
        await dra.claim(f"c{i}", gpu)
        await dra.pod(f"p{i}", {"gpu": f"c{i}"})

    async def decided() -> bool:
        return "p0" in await env.bound() and await env.pod_condition("p1") is not None

    await env.until(s, decided)
    assert [g[3] for g in allocated(await dra.get_claim("c0"))] == ["gpu-1"]
    assert "p1" not in await env.bound()
    # the rule goes: the device is usable again and the pending pod is retried
    await env.cluster.delete("DeviceTaintRule", rule)

    async def both_bound() -> bool:
        return len(await env.bound()) == 2

    await env.until(s, both_bound)
    assert [g[3] for g in allocated(await dra.get_claim("c1"))] == ["gpu-0"]
