"""The simulator's invariants on their own (``workloadbuilder.simulator._invariants``): each
checked on hand-built recorded states, holding and broken, with the message it reports."""

from __future__ import annotations

from workloadbuilder.simulator import NodeRecord, Violation
from workloadbuilder.simulator._invariants import (
    Finding,
    ViolationLog,
    check_round,
    composite_min_group_count,
    gang_min_count,
    preemption_order,
    topology_one_domain,
)
from workloadbuilder.simulator._preemption import PreemptionRecord, Preemptor, VictimRecord
from workloadbuilder.simulator._world import CompositeState, GroupState, PodState, World

NS = "default"


def _node(world: World, name: str, **labels: str) -> None:
    world.nodes[name] = NodeRecord(name=name, allocatable={}, labels=labels, added=0.0)


def _group(
    world: World,
    name: str,
    *,
    min_count: int | None = None,
    parent: str | None = None,
    key: str | None = None,
) -> GroupState:
    g = GroupState(
        namespace=NS,
        name=name,
        owner="",
        arrival=0.0,
        policy="gang" if min_count is not None else "basic",
        min_count=min_count,
        parent=parent,
        key=key,
    )
    world.groups[(NS, name)] = g
    return g


def _pod(world: World, name: str, group: str, *, ours: bool = True) -> PodState:
    st = PodState(
        namespace=NS,
        name=name,
        group=group,
        owner="",
        created=0.0,
        duration=None,
        ours=ours,
        requests={},
    )
    world.add_pod(st, None, 0.0)
    return st


def _bind(world: World, st: PodState, node: str, *, by_scheduler: bool = True) -> None:
    if by_scheduler:
        world.bind(st, node, 1.0)
    else:
        world.prebind(st, node, 1.0)


def _texts(findings: list[Finding]) -> list[str]:
    return [f.violation.text for f in findings]


# -- gang ----------------------------------------------------------------------------------------


def test_a_gang_below_min_count_breaks_the_gang_invariant_every_round() -> None:
    world = World()
    _group(world, "g", min_count=3)
    pods = [_pod(world, f"p{i}", "g") for i in range(3)]
    assert gang_min_count(world, 1.0) == []  # nothing bound: nothing to check
    _bind(world, pods[0], "n1")
    found = gang_min_count(world, 1.0)
    assert _texts(found) == ["default/g had 1 of minCount 3 pods bound"]
    v = found[0].violation
    assert (v.type, v.min_count, v.bound, v.time) == ("gang", 3, 1, 1.0)
    assert found[0].once is None  # reported every round it is broken
    log = ViolationLog()
    log.add(found)
    log.add(gang_min_count(world, 2.0))
    assert [v.time for v in log.violations] == [1.0, 2.0]
    for st in pods[1:]:
        _bind(world, st, "n1")
    assert gang_min_count(world, 3.0) == []


def test_pods_the_scenario_bound_count_towards_min_count_but_never_break_it_alone() -> None:
    world = World()
    _group(world, "g", min_count=3)
    pods = [_pod(world, f"p{i}", "g", ours=i > 0) for i in range(3)]
    _bind(world, pods[0], "n1", by_scheduler=False)
    assert gang_min_count(world, 1.0) == []  # only the scenario bound a pod
    _bind(world, pods[1], "n1")
    assert _texts(gang_min_count(world, 1.0)) == ["default/g had 2 of minCount 3 pods bound"]
    _bind(world, pods[2], "n1")
    assert gang_min_count(world, 1.0) == []


def test_basic_groups_and_gangs_shrunk_by_preemption_are_not_checked() -> None:
    world = World()
    _group(world, "basic")
    _bind(world, _pod(world, "b", "basic"), "n1")
    _group(world, "g", min_count=2)
    a, b = _pod(world, "a", "g"), _pod(world, "b2", "g")
    _bind(world, a, "n1")
    _bind(world, b, "n1")
    b.preempted = 2.0
    world.vanished(b, 2.0)
    assert world.shrunk == {(NS, "g")}
    assert gang_min_count(world, 2.0) == []
    world.note_quorums(2.0)
    assert world.groups[(NS, "g")].quorum_at is None  # a shrunk gang reaches no quorum


def test_the_quorum_time_is_when_min_count_pods_were_first_bound() -> None:
    world = World()
    _group(world, "g", min_count=2)
    a, b = _pod(world, "a", "g"), _pod(world, "b", "g")
    _bind(world, a, "n1")
    world.note_quorums(1.0)
    assert world.groups[(NS, "g")].quorum_at is None
    _bind(world, b, "n1")
    world.note_quorums(2.0)
    world.note_quorums(3.0)
    assert world.groups[(NS, "g")].quorum_at == 2.0


# -- composite -----------------------------------------------------------------------------------


def _composite(world: World, min_group_count: int = 2) -> None:
    world.composites[(NS, "c")] = CompositeState(
        namespace=NS,
        name="c",
        owner="",
        arrival=0.0,
        policy="gang",
        min_group_count=min_group_count,
    )


def test_a_composite_gang_with_too_few_children_started_breaks_once() -> None:
    world = World()
    _composite(world)
    _group(world, "a", parent="c")
    _group(world, "b", parent="c")
    pa, pb = _pod(world, "pa", "a"), _pod(world, "pb", "b")
    assert composite_min_group_count(world, 1.0) == []
    _bind(world, pa, "n1")
    found = composite_min_group_count(world, 1.0)
    assert _texts(found) == [
        "CompositePodGroup default/c had 1 of minGroupCount 2 children with pods bound (a)"
    ]
    v = found[0].violation
    assert (v.type, v.min_count, v.bound) == ("composite", 2, 1)
    log = ViolationLog()
    log.add(found)
    log.add(composite_min_group_count(world, 2.0))
    assert len(log.violations) == 1  # once per CompositePodGroup
    _bind(world, pb, "n1")
    assert composite_min_group_count(world, 3.0) == []


def test_a_nested_composite_child_counts_when_anything_under_it_was_bound() -> None:
    world = World()
    _composite(world)
    world.composites[(NS, "inner")] = CompositeState(
        namespace=NS, name="inner", owner="", arrival=0.0, parent="c"
    )
    _group(world, "deep", parent="inner")
    _group(world, "b", parent="c")
    _bind(world, _pod(world, "pd", "deep"), "n1")
    assert _texts(composite_min_group_count(world, 1.0)) == [
        "CompositePodGroup default/c had 1 of minGroupCount 2 children with pods bound (inner)"
    ]


# -- topology ------------------------------------------------------------------------------------


def test_a_group_spread_over_two_domains_breaks_the_topology_invariant() -> None:
    world = World()
    _node(world, "n1", rack="r1")
    _node(world, "n2", rack="r2")
    _node(world, "bare")
    _group(world, "g", min_count=2, key="rack")
    a, b = _pod(world, "a", "g"), _pod(world, "b", "g")
    _bind(world, a, "n1")
    _bind(world, b, "n1")
    assert topology_one_domain(world, 1.0) == []
    b.node = "n2"
    found = topology_one_domain(world, 1.0)
    assert _texts(found) == ["PodGroup default/g has pods in 2 domains of rack (r1: 1, r2: 1)"]
    assert (found[0].violation.type, found[0].once) == ("topology", "topology")
    assert topology_one_domain(world, 1.0, skip=lambda key: key == (NS, "g")) == []
    b.node = "bare"  # a node without the label breaks it too, even alone
    a.node = "bare"
    assert _texts(topology_one_domain(world, 1.0)) == [
        "PodGroup default/g has pods in 1 domains of rack ((no label): 2)"
    ]


def test_pods_the_scenario_prebound_across_domains_are_not_the_schedulers_doing() -> None:
    world = World()
    _node(world, "n1", rack="r1")
    _node(world, "n2", rack="r2")
    _group(world, "g", min_count=3, key="rack")
    pre = [_pod(world, f"pre{i}", "g", ours=False) for i in range(2)]
    _bind(world, pre[0], "n1", by_scheduler=False)
    _bind(world, pre[1], "n2", by_scheduler=False)
    _bind(world, _pod(world, "ours", "g"), "n1")
    assert topology_one_domain(world, 1.0) == []


# -- preemption ----------------------------------------------------------------------------------


def _record(priority: int | None, *victims: VictimRecord) -> PreemptionRecord:
    return PreemptionRecord(
        at=5.0,
        preemptor=Preemptor(kind="PodGroup", namespace=NS, name="high"),
        priority=priority,
        victims=victims,
    )


def test_a_victim_of_equal_priority_breaks_the_preemption_invariant() -> None:
    world = World()
    lower = VictimRecord(kind="Pod", namespace=NS, name="low", pods=1, priority=5)
    equal = VictimRecord(kind="Pod", namespace=NS, name="peer", pods=1, priority=10)
    assert preemption_order(world, _record(10, lower), 5.0) == []
    assert preemption_order(world, _record(None, equal), 5.0) == []  # no priority: no order
    found = preemption_order(world, _record(10, lower, equal), 5.0)
    assert _texts(found) == [
        "PodGroup default/high (priority 10) preempted Pod default/peer of priority 10"
    ]
    assert (found[0].violation.type, found[0].violation.name) == ("preemption", "peer")


def test_an_all_unit_preempted_in_part_breaks_the_preemption_invariant() -> None:
    world = World()
    _group(world, "victim", min_count=2)
    a, b = _pod(world, "a", "victim"), _pod(world, "b", "victim")
    _bind(world, a, "n1")
    _bind(world, b, "n1")
    a.preempted = 5.0
    world.vanished(a, 5.0)
    unit = VictimRecord(kind="PodGroup", namespace=NS, name="victim", pods=1, priority=1)
    found = preemption_order(world, _record(10, unit), 5.0)
    assert _texts(found) == [
        "PodGroup default/high preempted PodGroup default/victim (disruptionMode all) only in "
        "part: b still running"
    ]
    assert found[0].once == "preemption-partial"
    b.preempted = 5.0
    world.vanished(b, 5.0)
    assert preemption_order(world, _record(10, unit), 5.0) == []


# -- the log -------------------------------------------------------------------------------------


def test_the_log_keeps_once_findings_once_per_object_and_key() -> None:
    def finding(name: str, once: str | None, t: float = 1.0) -> Finding:
        v = Violation(time=t, namespace=NS, name=name, min_count=0, bound=0, type="preemption")
        return Finding(violation=v, once=once)

    log = ViolationLog()
    log.add([finding("u", "preemption"), finding("u", "preemption-partial")])
    log.add([finding("u", "preemption", 2.0), finding("w", "preemption"), finding("u", None)])
    assert [(v.name, v.time) for v in log.violations] == [
        ("u", 1.0),
        ("u", 1.0),
        ("w", 1.0),
        ("u", 1.0),
    ]
    assert log.reported("preemption", (NS, "u")) and not log.reported("topology", (NS, "u"))


def test_a_round_checks_gang_composite_and_topology_in_that_order() -> None:
    world = World()
    _node(world, "n1", rack="r1")
    _node(world, "n2", rack="r2")
    _composite(world)
    _group(world, "a", min_count=2, parent="c", key="rack")
    _group(world, "b", parent="c")
    a1, a2 = _pod(world, "a1", "a"), _pod(world, "a2", "a")
    _pod(world, "b1", "b")
    _bind(world, a1, "n1")
    log = ViolationLog()
    check_round(world, log, 1.0)
    assert [v.type for v in log.violations] == ["gang", "composite"]
    _bind(world, a2, "n2")
    check_round(world, log, 2.0)
    assert [v.type for v in log.violations] == ["gang", "composite", "topology"]
    check_round(world, log, 3.0)  # the topology and composite breaks are not repeated
    assert [v.type for v in log.violations] == ["gang", "composite", "topology"]
