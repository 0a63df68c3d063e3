"""CompositePodGroups as multi-level gangs (the ``CompositePodGroup`` gate), on MemoryCluster
and on the real API server.

The rules, in our words, from upstream kube-scheduler v1.37 (GangScheduling's tree PreEnqueue,
the composite placement algorithm, the scheduler_library simulator's integration tests with
composite trees, and the binary — ``tests/controlplane/test_scheduler_parity.py``):

1. the root of a tree is the queued entity; PreEnqueue waits until at least
   ``minGroupCount`` children (1 for basic) are ready, recursively, writing no status;
2. a child gang that fits is not bound while its parent cannot reach ``minGroupCount``;
   a failed tree reverts completely and every level says why;
3. a basic composite lets ready children go alone;
4. top-down: the composite's constraint picks a domain, each child is placed inside it with
   its own constraint;
5. a pod (or a node) added later wakes the whole tree;
6. beyond upstream: when greedy placement of the children misses the quorum, a bounded
   search finds a combination greedy missed; ``greedy`` mode behaves as upstream.
"""

from __future__ import annotations

from typing import Any

from sched_helpers import Env

from workloadbuilder.api import CompositePodGroup, from_dict
from workloadbuilder.cluster import MemoryCluster
from workloadbuilder.scheduler import Scheduler, SchedulerConfig
from workloadbuilder.scheduler._plugins import default_framework
from workloadbuilder.testing.builders import make_composite_pod_group

RACK = "topology.kubernetes.io/rack"
BLOCK = "topology.kubernetes.io/block"
HOST = "kubernetes.io/hostname"


async def _cpg(
    env: Env,
    name: str,
    min_group_count: int | None,
    *,
    topology: str | None = None,
    parent: str | None = None,
) -> None:
    b = make_composite_pod_group(name, env.namespace)
    if min_group_count is not None:
        b.gang(min_group_count)
    if topology:
        b.topology(topology)
    if parent:
        b.parent(parent)
    await env.cluster.create(from_dict(b.obj(), CompositePodGroup))


async def _cpg_condition(env: Env, name: str) -> Any:
    cpg = await env.cluster.get("CompositePodGroup", name, env.namespace)
    assert isinstance(cpg, CompositePodGroup)
    conds = cpg.status.conditions if cpg.status else ()
    return next((c for c in conds if c.type == "CompositePodGroupInitiallyScheduled"), None)


async def _child(
    env: Env,
    name: str,
    parent: str,
    size: int,
    min_count: int | None = None,
    *,
    topology: str | None = None,
    cpu: str = "1",
) -> None:
    await env.pod_group(
        name, min_count if min_count is not None else size, parent=parent, topology=topology
    )
    for i in range(size):
        await env.pod(f"{name}-{i}", name, cpu=cpu)


async def test_tree_that_does_not_fit_binds_nothing(env: Env) -> None:
    await env.node("a", cpu="4")
    await _cpg(env, "t", 2)
    await _child(env, "t-master", "t", 1, cpu="1")
    await _child(env, "t-worker", "t", 2, cpu="3")  # 2 x 3 cpu: only one fits on a
    s = env.scheduler(composite_status=True)
    await s.start()

    async def decided() -> bool:
        return await _cpg_condition(env, "t") is not None

    await env.until(s, decided)
    assert await env.bound("t-") == {}
    cc = await _cpg_condition(env, "t")
    assert (cc.status, cc.reason) == ("False", "Unschedulable")
    assert cc.message.startswith("minGroupCount 2: 1 of 2 child groups fit; t-worker: minCount 2")
    for child in ("t-master", "t-worker"):
        cond = await env.group_condition(child)
        assert (cond.status, cond.reason) == ("False", "Unschedulable")
    pc = await env.pod_condition("t-master-0")
    assert pc is not None and (pc["status"], pc["reason"]) == ("False", "Unschedulable")
    assert 'composite pod group "t" is unschedulable' in pc["message"]
    # a node added wakes the tree: now it fits, and all of it is bound
    await env.node("b", cpu="4")

    async def all_bound() -> bool:
        return len(await env.bound("t-")) == 3

    await env.until(s, all_bound)
    cc = await _cpg_condition(env, "t")
    assert (cc.status, cc.reason) == ("True", "Scheduled")


async def test_basic_composite_lets_ready_children_go(env: Env) -> None:
    await env.node("a", cpu="8")
    await _cpg(env, "t", None)  # basic
    await _child(env, "t-master", "t", 1)
    await env.pod_group("t-worker", 2, parent="t")  # a gang with 1 of its 2 pods: not ready
    await env.pod("t-worker-0", "t-worker")
    s = env.scheduler(composite_status=True)
    await s.start()

    async def master_bound() -> bool:
        return "t-master-0" in await env.bound("t-")

    await env.until(s, master_bound)
    assert set(await env.bound("t-")) == {"t-master-0"}
    cc = await _cpg_condition(env, "t")
    assert (cc.status, cc.reason) == ("True", "Scheduled")


async def test_top_down_block_then_racks(env: Env) -> None:
    # block b1 = racks r1, r2 (two 4-cpu nodes each); block b2 = rack r3 (one 16-cpu node).
    # The tree (2 children of 2 x 3 cpu, each rack-constrained) must share one block: b1.
    for rack, block, nodes, cpu in (
        ("r1", "b1", 2, "4"),
        ("r2", "b1", 2, "4"),
        ("r3", "b2", 1, "8"),
    ):
        for i in range(nodes):
            await env.node(
                f"{rack}n{i}",
                cpu=cpu,
                labels={RACK: f"{env.prefix}{rack}", BLOCK: f"{env.prefix}{block}"},
            )
    await _cpg(env, "t", 2, topology=BLOCK)
    await _child(env, "t-a", "t", 2, topology=RACK, cpu="3")
    await _child(env, "t-b", "t", 2, topology=RACK, cpu="3")
    s = env.scheduler(composite_status=True)
    await s.start()

    async def all_bound() -> bool:
        return len(await env.bound("t-")) == 4

    await env.until(s, all_bound)
    bound = await env.bound("t-")
    labels = {}
    for n in set(bound.values()):
        node = await env.cluster.get("Node", n)
        assert isinstance(node, dict)
        labels[n] = node["metadata"]["labels"]
    assert {labels[n][BLOCK] for n in bound.values()} == {f"{env.prefix}b1"}
    for child in ("t-a", "t-b"):
        racks = {labels[n][RACK] for p, n in bound.items() if p.startswith(f"{child}-")}
        assert len(racks) == 1


async def _search_scenario(mode: str | None) -> tuple[dict[str, str], str]:
    """Greedy places child a in the fuller rack r1 and then b (2 x 8 cpu) fits nowhere; a in
    r2 and b in r1 fit."""
    cluster = MemoryCluster()
    env = Env(cluster, "default", "memory")
    try:
        for i, n in enumerate(("r1a", "r1b", "r1c")):
            await env.node(n, cpu="8", labels={RACK: "r1"})
            if i == 0:
                await env.pod("busy", cpu="4", node_name=n)
        for i in range(5):
            await env.node(f"r2n{i}", cpu="4", labels={RACK: "r2"})
        await _cpg(env, "t", 2)
        await _child(env, "t-a", "t", 2, topology=RACK, cpu="4")
        await _child(env, "t-b", "t", 2, topology=RACK, cpu="8")
        fw = default_framework()
        if mode is not None:
            fw.composite_search = mode
        s = Scheduler(cluster, SchedulerConfig(composite_status=True), framework=fw)
        env.schedulers.append(s)
        await s.start()
        await s.until_idle()
        cc = await _cpg_condition(env, "t")
        return await env.bound("t-"), f"{cc.status}/{cc.reason}: {cc.message}"
    finally:
        await env.cleanup()
        await cluster.close()


async def test_bounded_search_places_a_tree_greedy_rejects() -> None:
    bound, cond = await _search_scenario("greedy")
    assert bound == {}
    assert cond.startswith("False/Unschedulable: minGroupCount 2: 1 of 2 child groups fit")
    bound, cond = await _search_scenario(None)  # default: bounded
    assert cond == "True/Scheduled: "
    assert {bound["t-b-0"], bound["t-b-1"]} == {"r1b", "r1c"}
    assert {bound["t-a-0"], bound["t-a-1"]} <= {f"r2n{i}" for i in range(5)}


async def test_no_composite_condition_by_default(env: Env) -> None:
    # upstream kube-scheduler v1.37.2 writes no condition on CompositePodGroups
    await env.node("a")
    await _cpg(env, "t", 1)
    await _child(env, "t-master", "t", 1)
    s = env.scheduler()
    await s.start()

    async def bound() -> bool:
        return len(await env.bound("t-")) == 1

    await env.until(s, bound)
    assert await _cpg_condition(env, "t") is None
    cond = await env.group_condition("t-master")
    assert (cond.status, cond.reason) == ("True", "Scheduled")


async def test_explain_shows_the_tree_with_each_level(env: Env) -> None:
    from workloadbuilder.scheduler.explain import explain_report, explain_text

    await env.node("a", cpu="4")
    await _cpg(env, "t", 2)
    await _child(env, "t-master", "t", 1, cpu="1")
    await _child(env, "t-worker", "t", 2, cpu="3")
    s = env.scheduler()
    await s.start()

    async def decided() -> bool:
        return await env.group_condition("t-worker") is not None

    await env.until(s, decided)
    text = await explain_text(env.cluster, "t-worker", env.namespace)
    lines = text.splitlines()
    tree_at = lines.index("Tree:")
    assert lines[tree_at + 1] == (
        "  CompositePodGroup t: gang (minGroupCount 2); 0 of 2 child groups scheduled (needs 2)"
    )
    assert lines[tree_at + 2].startswith(
        "    PodGroup t-master: gang (minCount 1), 0/1 pods bound; "
        "PodGroupInitiallyScheduled=False (Unschedulable)"
    )
    assert lines[tree_at + 3].startswith("      why: minGroupCount 2: 1 of 2 child groups fit")
    assert lines[tree_at + 4].startswith("    PodGroup t-worker: gang (minCount 2), 0/2 pods bound")
    assert lines[tree_at + 4].endswith("<-")
    report = await explain_report(env.cluster, "t-worker", env.namespace)
    assert report["tree"]["name"] == "t"
    assert [c["name"] for c in report["tree"]["children"]] == ["t-master", "t-worker"]


async def test_lws_subgroups_are_scheduled_as_trees_end_to_end() -> None:
    # the LWS adapter's composite shape: per replica a CompositePodGroup (rack-exclusive) of
    # one PodGroup per subgroup (host-exclusive), pods named and labelled as the LWS
    # controller does; the scheduler places every replica as a tree
    from workloadbuilder.kinds import default_registry
    from workloadbuilder.kinds.lws import lws_pods
    from workloadbuilder.testing.builders import make_lws

    cluster = MemoryCluster()
    env = Env(cluster, "default", "memory")
    try:
        for r in range(2):
            for h in range(2):
                await env.node(f"r{r}h{h}", cpu="4", labels={RACK: f"r{r}", HOST: f"r{r}h{h}"})
        lws = (
            make_lws("llm", "default")
            .replicas(2)
            .size(4)
            .sub_group_size(2)
            .scheduler_name(env.scheduler_name)
            .request("cpu", "2")
            .obj()
        )
        lws["metadata"].setdefault("annotations", {}).update(
            {
                "leaderworkerset.sigs.k8s.io/exclusive-topology": RACK,
                "leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology": HOST,
            }
        )
        lws["spec"]["scheduling"] = {}
        plan = default_registry().for_object(lws).plan(lws)
        assert len(plan.composite_pod_groups) == 2
        for obj in plan.objects():
            await cluster.create(obj)
        for pod in lws_pods(lws):
            group = plan.pod_group_for(pod)
            assert group is not None
            pod["spec"]["schedulingGroup"] = {"podGroupName": group}
            await cluster.create(pod)
        s = env.scheduler()
        await s.start()
        await s.until_idle()
        bound = await env.bound("llm-")
        assert len(bound) == 8
        labels = {n: (await cluster.get("Node", n))["metadata"]["labels"] for n in env.nodes}
        for g in range(2):
            replica = [n for p, n in bound.items() if p == f"llm-{g}" or p.startswith(f"llm-{g}-")]
            assert len(replica) == 4
            assert len({labels[n][RACK] for n in replica}) == 1  # the replica in one rack
        for pg in plan.pod_groups:
            name = pg.metadata.name
            members = [
                n
                for p, n in bound.items()
                if (await cluster.get("Pod", p, "default"))["spec"]["schedulingGroup"][
                    "podGroupName"
                ]
                == name
            ]
            assert len({labels[n][HOST] for n in members}) == 1  # each subgroup on one host
    finally:
        await env.cleanup()
        await cluster.close()


async def test_a_pod_group_added_under_the_root_wakes_the_tree(env: Env) -> None:
    await env.node("a", cpu="8")
    await _cpg(env, "t", 2)
    await _child(env, "t-master", "t", 1)
    s = env.scheduler()
    await s.start()
    await env.seen(s, lambda: env.cached_pods(s) == 1)
    await s.until_idle()
    assert await env.bound("t-") == {}  # one child of two: the tree waits
    await _child(env, "t-worker", "t", 2)  # a new PodGroup (and its pods) under the root

    async def all_bound() -> bool:
        return len(await env.bound("t-")) == 3

    await env.until(s, all_bound)


async def test_priority_must_be_the_roots_everywhere_in_the_tree(env: Env) -> None:
    high = await env.priority_class("high", 1000)
    await env.node("a", cpu="8")
    await _cpg(env, "t", 2)
    await _child(env, "t-master", "t", 1)
    await env.pod_group("t-worker", 1, parent="t", priority_class=high)
    await env.pod("t-worker-0", "t-worker", priority_class=high)
    s = env.scheduler()
    await s.start()

    async def decided() -> bool:
        return await env.group_condition("t-worker") is not None

    await env.until(s, decided)
    assert await env.bound("t-") == {}
    cond = await env.group_condition("t-worker")
    assert (cond.status, cond.reason) == ("False", "SchedulerError")
    assert "has priority 1000 but the tree's root 't' has priority 0" in cond.message


async def test_a_bound_member_holds_the_whole_tree_in_its_domain(env: Env) -> None:
    # child a already has its pod bound in block b2 (a restart): child b goes to b2 as well
    # (or stays pending), although b1 is larger and emptier
    for name, block, cpu in (("b1n0", "b1", "32"), ("b1n1", "b1", "32"), ("b2n0", "b2", "4")):
        await env.node(name, cpu=cpu, labels={BLOCK: f"{env.prefix}{block}"})
    await _cpg(env, "t", 2, topology=BLOCK)
    await env.pod_group("t-a", 1, parent="t")
    await env.pod("t-a-0", "t-a", node_name=env.node_name("b2n0"))
    await _child(env, "t-b", "t", 2, cpu="1")
    s = env.scheduler()
    await s.start()

    async def placed() -> bool:
        return len(await env.bound("t-b")) == 2

    await env.until(s, placed)
    assert set((await env.bound("t-b")).values()) == {env.node_name("b2n0")}


async def test_mixed_scheduler_names_in_a_tree_are_an_error(env: Env) -> None:
    await env.node("a", cpu="8")
    await _cpg(env, "t", 2)
    await _child(env, "t-master", "t", 1)
    await env.pod_group("t-worker", 1, parent="t")
    await env.pod("t-worker-0", "t-worker", node_name=env.node_name("a"), scheduler_name="other")
    s = env.scheduler()
    await s.start()

    async def decided() -> bool:
        return await env.group_condition("t-master") is not None

    await env.until(s, decided)
    assert set(await env.bound("t-")) == {"t-worker-0"}
    cond = await env.group_condition("t-master")
    assert (cond.status, cond.reason) == ("False", "SchedulerError")
    assert "pods of composite pod group 't' have different scheduler names" in cond.message


async def test_pods_left_behind_by_a_successful_tree_cycle_are_told_and_requeued(
    env: Env,
) -> None:
    """Without preemption: a tree of minGroupCount 1 succeeds with t-a's quorum; t-a's third
    pod (above its minCount 1) and the gang t-b find no node. Each of them says why
    (``PodScheduled=False/Unschedulable``, a FailedScheduling message), t-b's PodGroup is
    ``False/Unschedulable``, the tree stays queued (never dropped), and a node added later
    binds them."""
    await env.node("a", cpu="4")
    await _cpg(env, "t", 1)
    await _child(env, "t-a", "t", 3, 1, cpu="2")  # 3 x 2 cpu, minCount 1: two fit on a
    await _child(env, "t-b", "t", 1, cpu="1")  # a gang of 1: nothing left for it
    s = env.scheduler()
    await s.start()

    async def told() -> bool:
        conds = [await env.pod_condition(n) for n in ("t-a-2", "t-b-0")]
        return all(c is not None and c["status"] == "False" for c in conds)

    await env.until(s, told)
    assert set(await env.bound("t-")) == {"t-a-0", "t-a-1"}
    for name, says in (("t-a-2", "Insufficient cpu"), ("t-b-0", 'pod group "t-b"')):
        pc = await env.pod_condition(name)
        assert pc is not None and pc["reason"] == "Unschedulable", (name, pc)
        assert says in pc["message"], (name, pc["message"])
    ca, cb = await env.group_condition("t-a"), await env.group_condition("t-b")
    assert (ca.status, ca.reason) == ("True", "Scheduled")
    assert (cb.status, cb.reason) == ("False", "Unschedulable")
    states = {e.key: e.state for e in s.queue}
    assert states.get(("CompositePodGroup", env.namespace, "t")) == "unschedulable"
    await env.node("b", cpu="4")

    async def all_bound() -> bool:
        return len(await env.bound("t-")) == 4

    await env.until(s, all_bound)
