"""Scheduler behaviour, on MemoryCluster and on the real API server with fake Nodes."""

from __future__ import annotations

from sched_helpers import Env
from sched_invariant import GangWatch

from workloadbuilder.api import CompositePodGroup, from_dict
from workloadbuilder.testing.builders import make_composite_pod_group


async def test_gang_all_or_nothing(env: Env) -> None:
    await env.node("a", gpu=4)
    await env.node("b", gpu=4)
    await env.gang("train", 3, gpu=4)
    s = env.scheduler()
    await s.start()
    await env.seen(s, lambda: env.cached_pods(s) == 3)

    async def decided() -> bool:
        return await env.group_condition("train") is not None

    await env.until(s, decided)
    assert await env.bound("train") == {}
    cond = await env.group_condition("train")
    assert (cond.status, cond.reason) == ("False", "Unschedulable")
    assert cond.message.startswith("minCount 3: at most 2 pods fit, 1 short")
    pc = await env.pod_condition("train-0")
    assert pc is not None and (pc["status"], pc["reason"]) == ("False", "Unschedulable")

    # a new node is a relevant event: the group is retried and placed as a whole
    await env.node("c", gpu=4)

    async def all_bound() -> bool:
        return len(await env.bound("train")) == 3

    await env.until(s, all_bound)
    assert len(set((await env.bound("train")).values())) == 3
    cond = await env.group_condition("train")
    assert (cond.status, cond.reason) == ("True", "Scheduled")


async def test_barrier_waits_for_group_and_min_count(env: Env) -> None:
    await env.node("a")
    s = env.scheduler()
    await s.start()
    # pods before their PodGroup: held
    await env.pod("w-0", "w")
    await env.pod("w-1", "w")
    await env.seen(s, lambda: env.cached_pods(s) == 2)
    assert await s.until_idle() == 0
    assert await env.bound() == {}
    e = s.queue.entities[("PodGroup", env.namespace, "w")]
    assert e.state == "gated" and "to appear" in e.gate_message
    # the group arrives but only 2 of minCount 3 pods exist: still held, no status written
    await env.pod_group("w", 3)
    await env.seen(s, lambda: s.cache.groups[(env.namespace, "w")].pod_group is not None)
    assert await s.until_idle() == 0
    assert s.queue.entities[("PodGroup", env.namespace, "w")].gate_message.startswith(
        "waiting for minCount pods from a gang: 2 of 3"
    )
    assert await env.group_condition("w") is None
    await env.pod("w-2", "w")

    async def all_bound() -> bool:
        return len(await env.bound("w-")) == 3

    await env.until(s, all_bound)


async def test_priority_then_first_seen(env: Env) -> None:
    await env.node("a", cpu="4")
    high = await env.priority_class("high", 1000)
    s = env.scheduler()
    await s.start()
    # two gangs of 4 x 1 cpu compete for 4 cpus; the later, higher-priority one wins
    await env.pod_group("early", 4)
    for i in range(4):
        await env.pod(f"early-{i}", "early")
    await env.pod_group("late", 4, priority_class=high)
    for i in range(4):
        await env.pod(f"late-{i}", "late", priority_class=high)
    # PodGroups and pods arrive on separate watches: wait for both groups, not only the pods,
    # or "late" may still be held at PreEnqueue (group not seen) when the queue is popped
    await env.seen(
        s,
        lambda: (
            env.cached_pods(s) == 8
            and all((env.namespace, g) in s.cache.groups for g in ("early", "late"))
        ),
    )

    async def decided() -> bool:
        return len(await env.bound()) == 4

    await env.until(s, decided)
    assert set(await env.bound()) == {f"late-{i}" for i in range(4)}


async def test_equal_priority_first_seen_wins(env: Env) -> None:
    await env.node("a", cpu="4")
    s = env.scheduler()
    await s.start()
    for name in ("zeta", "alpha"):  # created in this order; names sort the other way
        await env.pod_group(name, 4)
        for i in range(4):
            await env.pod(f"{name}-{i}", name)
        await env.seen(s, lambda n=name: (env.namespace, n) in s.cache.groups)  # type: ignore[misc]
    await env.seen(s, lambda: env.cached_pods(s) == 8)

    async def decided() -> bool:
        return len(await env.bound()) == 4

    await env.until(s, decided)
    assert set(await env.bound()) == {f"zeta-{i}" for i in range(4)}


async def test_basic_group_places_what_fits(env: Env) -> None:
    await env.node("a", cpu="2")
    await env.pod_group("web")  # basic policy
    for i in range(3):
        await env.pod(f"web-{i}", "web", cpu="1")
    s = env.scheduler()
    await s.start()
    await env.seen(s, lambda: env.cached_pods(s) == 3)

    async def two_bound() -> bool:
        return len(await env.bound("web")) == 2

    await env.until(s, two_bound)
    cond = await env.group_condition("web")
    assert (cond.status, cond.reason) == ("True", "Scheduled")
    pending = [n for n in ("web-0", "web-1", "web-2") if n not in await env.bound()]
    assert pending == ["web-2"]  # deterministic order: first seen first

    async def failed_condition() -> bool:
        c = await env.pod_condition("web-2")
        return c is not None and c.get("status") == "False"

    await env.until(s, failed_condition)
    c = await env.pod_condition("web-2")
    assert c is not None and c["message"] == "0/1 nodes are available: 1 Insufficient cpu."


async def test_single_pods_filters_and_spreading(env: Env) -> None:
    await env.node("a", labels={"zone": "z1"})
    await env.node("b", labels={"zone": "z2"})
    await env.node("c", labels={"zone": "z1"}, unschedulable=True)
    taint = {"key": "dedicated", "value": "x", "effect": "NoSchedule"}
    await env.node("d", labels={"zone": "z3"}, taints=[taint])
    await env.pod("s-0")
    await env.pod("s-1")
    await env.pod("sel", node_selector={"zone": "z1"})
    await env.pod(
        "tol",
        node_selector={"zone": "z3"},
        tolerations=[{**taint, "operator": "Equal"}],
    )
    await env.pod("nowhere", node_selector={"zone": "z9"})
    s = env.scheduler()
    await s.start()
    await env.seen(s, lambda: env.cached_pods(s) == 5)

    async def four_bound() -> bool:
        return len(await env.bound()) == 4

    await env.until(s, four_bound)
    bound = await env.bound()
    # least-allocated spreads the two plain pods over the two plain nodes
    assert {bound["s-0"], bound["s-1"]} == {env.node_name("a"), env.node_name("b")}
    assert bound["sel"] == env.node_name("a")  # c is cordoned
    assert bound["tol"] == env.node_name("d")
    assert "nowhere" not in bound

    async def failed() -> bool:
        c = await env.pod_condition("nowhere")
        return c is not None and c.get("status") == "False"

    await env.until(s, failed)
    c = await env.pod_condition("nowhere")
    assert c is not None
    assert c["reason"] == "Unschedulable"
    assert c["message"] == (
        "0/4 nodes are available: 1 node(s) had untolerated taint {dedicated=x:NoSchedule}, "
        "1 node(s) were unschedulable, 2 node(s) didn't match Pod's node affinity/selector."
    )


async def test_explanation_says_what_blocked_and_by_how_much(env: Env) -> None:
    for i in range(3):
        await env.node(f"gpu-{i}", gpu=8)
    await env.node("cordoned", gpu=8, unschedulable=True)
    for i in range(6):
        await env.node(f"cpu-{i}")
    await env.gang("llm", 4, gpu=8)
    s = env.scheduler()
    await s.start()
    await env.seen(s, lambda: env.cached_pods(s) == 4 and s.cache.nodes.count >= 10)

    async def decided() -> bool:
        return await env.group_condition("llm") is not None

    await env.until(s, decided)
    expected = (
        # issue 13: which pods fit where, then what blocks the rest
        "minCount 4: at most 3 pods fit, 1 short; 3 fit on "
        + ", ".join(env.node_name(f"gpu-{i}") for i in range(3))
        + "; the rest fit nowhere once those are placed: 9 of 10 nodes lack nvidia.com/gpu: 8; "
        "1 of 10 nodes are unschedulable (cordoned)"
    )
    assert s.explanations[(env.namespace, "llm")] == expected
    cond = await env.group_condition("llm")
    assert cond.message == expected

    from workloadbuilder.scheduler.explain import explain_text

    text = await explain_text(env.cluster, "llm", env.namespace)
    assert "Unschedulable" in text and expected in text and "0/4 pods bound" in text

    from workloadbuilder.scheduler.explain import explain_report

    report = await explain_report(env.cluster, "llm", env.namespace)
    assert (report["policy"], report["minCount"]) == ("gang", 4)
    assert report["pods"] == {"live": 4, "bound": 0} and report["nodes"] == []
    assert report["explanation"] == expected
    assert (report["condition"]["status"], report["condition"]["reason"]) == (
        "False",
        "Unschedulable",
    )


async def test_scheduler_error_mixed_scheduler_names(env: Env) -> None:
    """A member already bound by another scheduler: the group mixes scheduler names."""
    node = await env.node("a")
    await env.pod_group("mixed", 2)
    await env.pod("mixed-0", "mixed")
    await env.pod("mixed-1", "mixed", scheduler_name="default-scheduler", node_name=node)
    s = env.scheduler()
    await s.start()
    await env.seen(s, lambda: env.cached_pods(s) == 2)

    async def decided() -> bool:
        return await env.group_condition("mixed") is not None

    await env.until(s, decided)
    cond = await env.group_condition("mixed")
    assert (cond.status, cond.reason) == ("False", "SchedulerError")
    assert "different scheduler names" in cond.message
    assert await env.bound() == {"mixed-1": node}  # only the foreign pod, bound before


async def test_pending_pods_of_other_schedulers_are_invisible(env: Env) -> None:
    """As in kube-scheduler v1.37.2: a *pending* member with another schedulerName is not
    ours to know; it neither counts toward the quorum nor makes the group an error."""
    await env.node("a")
    await env.pod_group("web")  # basic
    await env.pod("web-0", "web", scheduler_name="default-scheduler")
    await env.pod("web-1", "web")
    await env.pod_group("gang", 2)
    await env.pod("gang-0", "gang", scheduler_name="default-scheduler")
    await env.pod("gang-1", "gang")
    s = env.scheduler()
    await s.start()
    await env.seen(s, lambda: env.cached_pods(s) == 4)

    async def decided() -> bool:
        return "web-1" in await env.bound()

    await env.until(s, decided)
    assert await env.bound() == {"web-1": env.nodes[0]}
    cond = await env.group_condition("web")
    assert (cond.status, cond.reason) == ("True", "Scheduled")
    # the gang knows one pod of its minCount 2: held at PreEnqueue, silently
    assert await env.group_condition("gang") is None
    assert s.cache.quorum_pods(s.cache.groups[(env.namespace, "gang")]) == 1


async def test_scheduler_error_priority_mismatch(env: Env) -> None:
    await env.node("a")
    high = await env.priority_class("prio", 100)
    await env.pod_group("pm", 2)
    await env.pod("pm-0", "pm")
    await env.pod("pm-1", "pm", priority_class=high)
    s = env.scheduler()
    await s.start()
    await env.seen(s, lambda: env.cached_pods(s) == 2)

    async def decided() -> bool:
        return await env.group_condition("pm") is not None

    await env.until(s, decided)
    cond = await env.group_condition("pm")
    assert (cond.status, cond.reason) == ("False", "SchedulerError")
    assert cond.message == "pod 'pm-1' has priority 100 but pod group 'pm' has priority 0"


async def test_condition_never_regresses(env: Env) -> None:
    await env.node("a", cpu="4")
    await env.gang("g", 5, min_count=4)  # 4 fit, the 5th stays pending
    s = env.scheduler()
    await s.start()
    await env.seen(s, lambda: env.cached_pods(s) == 5)

    async def four() -> bool:
        return len(await env.bound("g-")) == 4

    await env.until(s, four)
    cond = await env.group_condition("g")
    assert (cond.status, cond.reason) == ("True", "Scheduled")
    # the extra pod fails on later attempts; the group's condition stays True
    await env.node("tiny", cpu="100m")
    await env.seen(s, lambda: s.cache.nodes.count == 2)
    await s.until_idle()
    cond = await env.group_condition("g")
    assert (cond.status, cond.reason) == ("True", "Scheduled")


async def test_retry_on_pod_deleted_and_min_count_lowered(env: Env) -> None:
    await env.node("a", cpu="4")
    await env.gang("first", 3)  # uses 3 of 4 cpus
    s = env.scheduler()
    await s.start()
    await env.seen(s, lambda: env.cached_pods(s) == 3)

    async def first_bound() -> bool:
        return len(await env.bound("first")) == 3

    await env.until(s, first_bound)
    await env.gang("second", 2)
    await env.seen(s, lambda: env.cached_pods(s) == 5)

    async def second_failed() -> bool:
        c = await env.group_condition("second")
        return c is not None and c.status == "False"

    await env.until(s, second_failed)
    # a bound pod goes away: resources are freed, the group is retried
    await env.cluster.delete("Pod", "first-0", env.namespace, grace_period_seconds=0)

    async def second_bound() -> bool:
        return len(await env.bound("second")) == 2

    await env.until(s, second_bound)

    # lowering minCount is a relevant event too
    await env.gang("third", 3)
    await env.seen(s, lambda: env.cached_pods(s) == 7)

    async def third_failed() -> bool:
        c = await env.group_condition("third")
        return c is not None and c.status == "False"

    await env.until(s, third_failed)
    await env.cluster.delete("Pod", "first-1", env.namespace, grace_period_seconds=0)
    await env.seen(s, lambda: env.cached_pods(s) == 6)
    # one cpu free, minCount 3: still unschedulable; lower it to 1
    await env.cluster.patch(
        "PodGroup",
        "third",
        {"spec": {"schedulingPolicy": {"gang": {"minCount": 1}}}},
        env.namespace,
    )

    async def third_one() -> bool:
        return len(await env.bound("third")) == 1

    await env.until(s, third_one)


async def test_gang_invariant_under_contention(env: Env) -> None:
    """No gang ever has between 1 and minCount-1 pods bound, checked on a pod watch at every
    point the scheduler is idle (no binding in flight)."""
    for i in range(4):
        await env.node(f"n{i}", cpu="8")
    watch = GangWatch(env.cluster, env.namespace)
    await watch.start()
    s = env.scheduler()
    await s.start()
    sizes = [5, 7, 3, 6, 8, 4, 9, 2]
    for i, size in enumerate(sizes):
        await env.gang(f"g{i}", size, cpu="2")
    await env.seen(s, lambda: env.cached_pods(s) == sum(sizes))
    total = 0
    for _round in range(3):
        total += await s.until_idle()
        await watch.settle(total)
        watch.check()
        # free one node's worth of capacity by finishing the oldest bound gang
        bound = await env.bound()
        if bound:
            victim = sorted({n.rsplit("-", 1)[0] for n in bound})[0]
            for name in [n for n in bound if n.startswith(f"{victim}-")]:
                await env.cluster.delete("Pod", name, env.namespace, grace_period_seconds=0)
            await env.seen(
                s,
                lambda v=victim: (
                    not any(  # type: ignore[misc]
                        k[1].startswith(f"{v}-") for k in s.cache.pods
                    )
                ),
            )
    total += await s.until_idle()
    await watch.settle(total)
    watch.check()
    assert watch.max_bound_seen() > 0
    await watch.stop()


async def test_events_recorded(env: Env) -> None:
    await env.node("a")
    await env.pod("ev-0")
    await env.pod("ev-1", node_selector={"missing": "label"})
    s = env.scheduler()
    await s.start()
    await env.seen(s, lambda: env.cached_pods(s) == 2)

    async def done() -> bool:
        evs = (await env.cluster.list("Event", env.namespace)).items
        reasons = {(e["involvedObject"]["name"], e["reason"]) for e in evs}  # type: ignore[index]
        return {("ev-0", "Scheduled"), ("ev-1", "FailedScheduling")} <= reasons

    await env.until(s, done)


async def test_topology_constrained_group_is_placed_in_one_domain_not_across(env: Env) -> None:
    # (Formerly refused with SchedulerError while topology was not implemented.) A
    # rack-constrained gang that would fit only across two racks is not bound across them:
    # it stays pending, Unschedulable, and the explanation names the constraint.
    rack = "topology.kubernetes.io/rack"
    await env.node("a", cpu="8", labels={rack: f"{env.prefix}r1"})
    await env.node("b", cpu="8", labels={rack: f"{env.prefix}r2"})
    await env.pod_group("racked", 2, topology=rack)
    for i in range(2):
        await env.pod(f"racked-{i}", "racked", cpu="6")
    await env.gang("plain", 2, cpu="1")
    s = env.scheduler()
    await s.start()

    async def decided() -> bool:
        return await env.group_condition("racked") is not None

    await env.until(s, decided)
    assert await env.bound("racked") == {}
    cond = await env.group_condition("racked")
    assert (cond.status, cond.reason) == ("False", "Unschedulable")
    assert cond.message.startswith(f"{rack}: no rack fits 2 pods x cpu 6; best is ")
    assert " with 1; minCount 2: at most 1 pod fits, 1 short" in cond.message
    # other groups are not held up by it
    assert len(await env.bound("plain")) == 2

    # a third node in rack r1 makes room in one rack: the gang lands there, whole
    await env.node("c", cpu="8", labels={rack: f"{env.prefix}r1"})

    async def placed() -> bool:
        return len(await env.bound("racked")) == 2

    await env.until(s, placed)
    assert set((await env.bound("racked")).values()) == {env.node_name("a"), env.node_name("c")}
    cond = await env.group_condition("racked")
    assert (cond.status, cond.reason) == ("True", "Scheduled")


async def test_composite_child_is_not_placed_alone(env: Env) -> None:
    # (Formerly refused with SchedulerError while CompositePodGroups were not implemented.)
    # A composite gang of 2 children: the master child alone is never bound; the tree waits
    # (silently, as upstream's PreEnqueue) until the worker child is ready, then all of it
    # is placed together.
    await env.node("a")
    parent = make_composite_pod_group("tree", env.namespace).gang(2).obj()
    await env.cluster.create(from_dict(parent, CompositePodGroup))
    await env.pod_group("tree-master", 1, parent="tree")
    await env.pod("tree-master-0", "tree-master")
    await env.pod_group("tree-worker", 2, parent="tree")
    await env.pod("tree-worker-0", "tree-worker")
    s = env.scheduler(composite_status=True)
    await s.start()
    await env.seen(s, lambda: env.cached_pods(s) == 2)
    await s.until_idle()
    assert await env.bound("tree-") == {}
    assert await env.group_condition("tree-master") is None  # gated: no status written
    assert await env.pod_condition("tree-master-0") is None
    await env.pod("tree-worker-1", "tree-worker")  # the worker child reaches its minCount

    async def all_bound() -> bool:
        return len(await env.bound("tree-")) == 3

    await env.until(s, all_bound)
    for child in ("tree-master", "tree-worker"):
        cond = await env.group_condition(child)
        assert (cond.status, cond.reason) == ("True", "Scheduled")
    cpg = await env.cluster.get("CompositePodGroup", "tree", env.namespace)
    assert isinstance(cpg, CompositePodGroup) and cpg.status is not None
    cc = next(c for c in cpg.status.conditions if c.type == "CompositePodGroupInitiallyScheduled")
    assert (cc.status, cc.reason) == ("True", "Scheduled")
