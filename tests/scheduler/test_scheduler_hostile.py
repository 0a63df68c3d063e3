"""Objects the API server accepts but that are hostile to a scheduler, on MemoryCluster:
thousands of pods in one group, deep, cyclic and wide CompositePodGroup trees, huge label
sets, and a PodGroup whose ``minCount`` flaps (deleted and re-created with another value).

What must hold: no crash, no partial gang, every group gets an answer (scheduled, or
``False`` with an explanation), other groups are not starved by the hostile one, and the
work per cycle is bounded: a hostile group that cannot fit is attempted a bounded number of
times while nothing changes (it waits for an event, it does not spin).
"""

from __future__ import annotations

import time
from typing import Any

from sched_helpers import Env

from workloadbuilder.api import CompositePodGroup, from_dict
from workloadbuilder.runtime import ManualClock
from workloadbuilder.scheduler._metrics import REGISTRY
from workloadbuilder.testing.builders import make_composite_pod_group


def _attempts(result: str) -> float:
    return (
        REGISTRY.get_sample_value("scheduler_podgroup_schedule_attempts_total", {"result": result})
        or 0.0
    )


async def _nodes(env: Env, count: int, cpu: str = "32") -> None:
    for i in range(count):
        await env.node(f"n{i:03d}", cpu=cpu, memory="256Gi", pods=250)


async def _partial(env: Env, groups: dict[str, int]) -> dict[str, int]:
    """groups with 1..minCount-1 pods bound."""
    bound = await env.bound()
    out = {}
    for g, min_count in groups.items():
        n = sum(1 for p in bound if p.rsplit("-", 1)[0] == g)
        if 0 < n < min_count:
            out[g] = n
    return out


async def test_thousands_of_pods_in_one_group_do_not_starve_the_others(
    mem_env: tuple[Env, ManualClock],
) -> None:
    env, _clock = mem_env
    await _nodes(env, 40)  # 1,280 cpus
    await env.gang("huge", 3000)  # cannot fit: 3,000 cpus
    await env.gang("fits", 2000, cpu="500m")  # 1,000 cpus: fits in one cycle
    await env.gang("small", 8)
    s = env.scheduler()
    t0 = time.perf_counter()
    await env.until(s, lambda: _all_bound(env, ("fits-", "small-"), 2008), timeout=120)
    first_round = time.perf_counter() - t0
    cond = await env.group_condition("huge")
    assert cond is not None and cond.status == "False" and cond.reason == "Unschedulable"
    assert "minCount 3000" in cond.message
    assert not await env.bound("huge-")
    assert await _partial(env, {"huge": 3000, "fits": 2000, "small": 8}) == {}
    # nothing changes: the hostile group waits for an event instead of being retried
    before = _attempts("unschedulable")
    for _ in range(5):
        await s.until_idle()
    assert _attempts("unschedulable") - before <= 1
    print(f"\n3,000-pod unfit group + 2,000-pod gang + 8-pod gang on 40 nodes: {first_round:.2f}s")


async def _all_bound(env: Env, prefixes: tuple[str, ...], want: int) -> bool:
    bound = await env.bound()
    return sum(1 for p in bound if p.startswith(prefixes)) >= want


async def _cpg(env: Env, name: str, parent: str | None = None, min_groups: int = 1) -> None:
    b = make_composite_pod_group(name, env.namespace).gang(min_groups)
    if parent:
        b.parent(parent)
    await env.cluster.create(from_dict(b.obj(), CompositePodGroup))


async def _cpg_condition(env: Env, name: str) -> Any:
    cpg = await env.cluster.get("CompositePodGroup", name, env.namespace)
    assert isinstance(cpg, CompositePodGroup)
    conds = cpg.status.conditions if cpg.status else ()
    return next((c for c in conds if c.type == "CompositePodGroupInitiallyScheduled"), None)


async def test_deep_cyclic_and_wide_trees_are_refused_or_placed_without_a_crash(
    mem_env: tuple[Env, ManualClock],
) -> None:
    env, _clock = mem_env
    await _nodes(env, 20)
    # a chain of 60 CompositePodGroups with a gang at the bottom: deeper than the limit
    await _cpg(env, "deep-0")
    for i in range(1, 60):
        await _cpg(env, f"deep-{i}", parent=f"deep-{i - 1}")
    await env.pod_group("deep-leaf", 2, parent="deep-59")
    for i in range(2):
        await env.pod(f"deep-leaf-{i}", "deep-leaf")
    # a cycle: a -> b -> a, with a gang under b
    await _cpg(env, "cyc-a", parent="cyc-b")
    await _cpg(env, "cyc-b", parent="cyc-a")
    await env.pod_group("cyc-leaf", 2, parent="cyc-b")
    for i in range(2):
        await env.pod(f"cyc-leaf-{i}", "cyc-leaf")
    # wide: one root with 300 two-pod gangs, all needed
    await _cpg(env, "wide", min_groups=300)
    for g in range(300):
        await env.pod_group(f"w{g:03d}", 2, parent="wide")
        for i in range(2):
            await env.pod(f"w{g:03d}-{i}", f"w{g:03d}")
    await env.gang("bystander", 4)
    s = env.scheduler()
    await env.until(s, lambda: _all_bound(env, ("w", "bystander-"), 604), timeout=120)
    bound = await env.bound()
    assert not any(p.startswith(("deep-leaf-", "cyc-leaf-")) for p in bound)
    # CompositePodGroup conditions are off by default: the leaves and their pods say it
    for leaf, why in (
        ("deep-leaf", "deeper than 4 levels"),
        ("cyc-leaf", "hierarchy has a cycle"),
    ):
        cond = await env.group_condition(leaf)
        assert cond is not None and cond.status == "False" and why in cond.message, (leaf, cond)
        pod = await env.pod_condition(f"{leaf}-0")
        assert pod is not None and pod["status"] == "False" and why in pod["message"], pod


async def test_huge_label_sets_and_selectors(mem_env: tuple[Env, ManualClock]) -> None:
    env, _clock = mem_env
    labels = {f"label-{i:04d}.example.com/key": f"value-{i}" for i in range(2000)}
    for i in range(10):
        await env.node(f"big-{i}", cpu="32", labels=labels)
    selector = dict(list(labels.items())[:500])
    await env.pod_group("sel", 16)
    for i in range(16):
        pod = await env.pod(f"sel-{i}", "sel", node_selector=selector)
        assert pod["spec"]["nodeSelector"] == selector
    s = env.scheduler()
    await env.until(s, lambda: _all_bound(env, ("sel-",), 16), timeout=60)
    # one label no node has: the whole gang waits, with an explanation
    await env.pod_group("miss", 4)
    for i in range(4):
        await env.pod(f"miss-{i}", "miss", node_selector={**selector, "absent": "x"})
    await env.until(s, lambda: _has_condition(env, "miss"), timeout=60)
    assert not await env.bound("miss-")


async def _has_condition(env: Env, group: str) -> bool:
    cond = await env.group_condition(group)
    return cond is not None and cond.status == "False"


async def test_a_pod_group_whose_min_count_flaps(mem_env: tuple[Env, ManualClock]) -> None:
    """``minCount`` (mutable since v1.37) flaps 12, 7, 12, 2, 12, 6 while the group's 6 pods
    wait and other gangs arrive: the scheduler follows the current value (no pod bound while
    it is above 6), answers every change, schedules the others meanwhile, binds the 6 once
    the value allows it, and the True condition stays True when it flaps up again."""
    env, _clock = mem_env
    await _nodes(env, 3, cpu="8")  # 24 cpus: the group and every other gang fit
    await env.pod_group("flap", 12)
    for i in range(6):
        await env.pod(f"flap-{i}", "flap")
    s = env.scheduler()
    seen_true = False
    for round_, min_count in enumerate((12, 7, 12, 2, 12, 6)):
        if round_:
            await env.cluster.patch(
                "PodGroup",
                "flap",
                {"spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}},
                env.namespace,
            )
        await env.gang(f"other{round_}", 2)
        await env.until(s, lambda r=round_: _all_bound(env, (f"other{r}-",), 2), timeout=30)
        bound = len(await env.bound("flap-"))
        cond = await env.group_condition("flap")
        if not seen_true:
            if min_count > 6:
                assert bound == 0  # waits for more pods (PreEnqueue, as upstream): no attempt
                assert cond is None or cond.status == "False", cond
            else:
                await env.until(s, lambda: _all_bound(env, ("flap-",), 6), timeout=30)
                seen_true = True
        else:
            assert bound == 6  # bound pods stay; the condition never regresses
            assert cond is not None and cond.status == "True", cond
    assert seen_true and len(await env.bound("flap-")) == 6
