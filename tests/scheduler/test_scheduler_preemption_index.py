"""The cache's index of running pods by preemption priority (``Cache.running_below``).

Preemption looks for victims among the running pods of strictly lower priority. The cache
keeps those pods filed by the priority they would be preempted at (their PodGroup's, or the
top CompositePodGroup's above it, else their own), so a failed attempt with nothing of lower
priority running visits no pod at all. These tests check that the index follows every
change that moves a pod in or out of it (bind, assume, forget, delete, node removal) or
changes its priority (a PodGroup arriving or leaving, a CompositePodGroup or PriorityClass
changing), and that ``victim_units`` over the index gives exactly what a walk over every
cached pod gives, on random histories.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from workloadbuilder.api import CompositePodGroup, PodGroup, from_dict
from workloadbuilder.scheduler._cache import Cache, GroupInfo, PodInfo
from workloadbuilder.scheduler._preemption import Victim, start_key, victim_units
from workloadbuilder.testing.builders import (
    make_composite_pod_group,
    make_node,
    make_pod,
    make_pod_group,
    make_priority_class,
)

NS = "default"


def _node(cache: Cache, name: str) -> None:
    cache.upsert_node(make_node(name).resources({"cpu": "64", "memory": "256Gi"}).obj())


def _pod(
    name: str,
    *,
    node: str | None = None,
    priority: int | None = None,
    priority_class: str | None = None,
    group: str | None = None,
    uid: str | None = None,
) -> dict[str, Any]:
    b = make_pod(name, NS).request("cpu", "1").uid(uid or f"uid-{name}")
    if node:
        b.node_name(node)
    if priority is not None:
        b.field("spec.priority", priority)
    if priority_class:
        b.priority_class(priority_class)
    if group:
        b.pod_group(group)
    return b.obj()


def _pod_group(
    name: str,
    *,
    priority: int | None = None,
    parent: str | None = None,
    disruption: str | None = None,
) -> PodGroup:
    b = make_pod_group(name, NS)
    if priority is not None:
        b.priority(priority)
    if parent:
        b.parent(parent)
    if disruption:
        b.disruption_mode(disruption)
    return from_dict(b.obj(), PodGroup)


def _cpg(
    name: str,
    *,
    priority: int | None = None,
    parent: str | None = None,
    disruption: str | None = None,
) -> CompositePodGroup:
    b = make_composite_pod_group(name, NS)
    if priority is not None:
        b.field("spec.priority", priority)
    if parent:
        b.parent(parent)
    if disruption:
        b.disruption_mode(disruption)
    return from_dict(b.obj(), CompositePodGroup)


def _names(pods: list[PodInfo]) -> list[str]:
    return [p.name for p in pods]


def test_binds_assumes_and_removals_move_pods_in_and_out() -> None:
    cache = Cache()
    _node(cache, "n1")
    _node(cache, "n2")
    cache.upsert_pod(_pod("low", node="n1", priority=1), 0.0)
    cache.upsert_pod(_pod("high", node="n1", priority=10), 0.0)
    cache.upsert_pod(_pod("pending", priority=1), 0.0)
    cache.upsert_pod(_pod("other", node="n2", priority=1), 0.0)
    assert _names(cache.running_below(5)) == ["low", "other"]
    assert _names(cache.running_below(1)) == []
    assert _names(cache.running_below(11)) == ["low", "high", "other"]

    pending = cache.pods[(NS, "pending")]
    cache.assume(pending, "n2")
    assert _names(cache.running_below(5)) == ["low", "pending", "other"]  # first seen first
    cache.forget(pending)
    assert _names(cache.running_below(5)) == ["low", "other"]

    # a terminating pod still runs (victim_units skips it, the index keeps it)
    deleting = _pod("other", node="n2", priority=1)
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    cache.upsert_pod(deleting, 0.0)
    assert _names(cache.running_below(5)) == ["low", "other"]
    assert [v.name for v in victim_units(cache, 5)] == ["low"]

    cache.remove_node("n2")  # its pods count nowhere
    assert _names(cache.running_below(5)) == ["low"]
    _node(cache, "n2")  # back: the pod bound there counts again
    assert _names(cache.running_below(5)) == ["low", "other"]

    cache.remove_pod((NS, "low"))
    finished = _pod("other", node="n2", priority=1)
    finished["status"] = {"phase": "Succeeded"}
    cache.upsert_pod(finished, 0.0)
    assert cache.running_below(11) == [cache.pods[(NS, "high")]]
    assert set(cache.running) == {(NS, "high")}


def test_a_replaced_pod_is_filed_once() -> None:
    cache = Cache()
    _node(cache, "n1")
    cache.upsert_pod(_pod("p", node="n1", priority=1, uid="a"), 0.0)
    cache.upsert_pod(_pod("p", node="n1", priority=20, uid="b"), 0.0)  # same name, new uid
    assert _names(cache.running_below(5)) == []
    assert _names(cache.running_below(21)) == ["p"]


def test_the_pod_group_decides_its_members_priority() -> None:
    cache = Cache()
    _node(cache, "n1")
    cache.upsert_pod(_pod("m", node="n1", priority=100, group="g"), 0.0)
    assert _names(cache.running_below(50)) == []  # no PodGroup object yet: its own
    cache.upsert_pod_group(_pod_group("g", priority=1), 0.0)
    assert _names(cache.running_below(50)) == ["m"]
    cache.upsert_pod_group(_pod_group("g", priority=1), 0.0)  # e.g. a status update
    assert _names(cache.running_below(50)) == ["m"]
    assert _names(cache.running_below(1)) == []
    cache.remove_pod_group((NS, "g"))
    assert _names(cache.running_below(50)) == []


def test_the_top_composite_pod_group_decides_and_changes_are_followed() -> None:
    cache = Cache()
    _node(cache, "n1")
    cache.upsert_composite_group((NS, "top"), _cpg("top", priority=1))
    cache.upsert_composite_group((NS, "mid"), _cpg("mid", priority=1, parent="top"))
    cache.upsert_pod_group(_pod_group("g", priority=1, parent="mid"), 0.0)
    cache.upsert_pod(_pod("m", node="n1", priority=1, group="g"), 0.0)
    assert _names(cache.running_below(2)) == ["m"]
    cache.upsert_composite_group((NS, "top"), _cpg("top", priority=7))
    assert _names(cache.running_below(2)) == []
    assert _names(cache.running_below(8)) == ["m"]
    cache.remove_composite_group((NS, "top"))  # the chain now ends at "mid"
    assert _names(cache.running_below(2)) == ["m"]
    cache.set_composite_groups({(NS, "mid"): _cpg("mid", priority=30)})
    assert _names(cache.running_below(8)) == []
    assert _names(cache.running_below(31)) == ["m"]


def test_priority_classes_resolve_and_changes_are_followed() -> None:
    cache = Cache()
    _node(cache, "n1")
    cache.upsert_priority_class("low", make_priority_class("low", 1).obj())
    cache.upsert_pod(_pod("by-class", node="n1", priority_class="low"), 0.0)
    cache.upsert_pod(_pod("unset", node="n1"), 0.0)  # priority 0: no class, no default
    assert _names(cache.running_below(1)) == ["unset"]
    assert _names(cache.running_below(2)) == ["by-class", "unset"]
    cache.upsert_priority_class("low", make_priority_class("low", 50).obj())
    assert _names(cache.running_below(2)) == ["unset"]
    cache.upsert_priority_class("dflt", make_priority_class("dflt", 9).global_default().obj())
    assert _names(cache.running_below(9)) == []
    assert _names(cache.running_below(10)) == ["unset"]
    cache.remove_priority_class("dflt")
    cache.set_priority_classes({})
    assert _names(cache.running_below(1)) == ["by-class", "unset"]


def test_the_cache_views_are_read_only() -> None:
    cache = Cache()
    with pytest.raises(TypeError):
        cache.priority_classes["x"] = {}  # type: ignore[index]
    with pytest.raises(TypeError):
        cache.composite_groups[(NS, "x")] = _cpg("x")  # type: ignore[index]


# ---- victim_units over the index = a walk over every cached pod -----------------------------


def _reference_units(cache: Cache, below: int, exclude: frozenset[tuple[str, str]]) -> list[Victim]:
    """What victim_units computed before the index: every cached pod, in the cache's order."""

    def hierarchy(g: GroupInfo) -> tuple[tuple[Any, str, str] | None, int] | None:
        pg = g.pod_group
        if pg is None:
            return None
        mode = pg.spec.disruption_mode
        unit = ("PodGroup", g.key[0], g.key[1]) if mode and mode.all else None
        prio = cache.group_priority(g)
        parent = pg.spec.parent_composite_pod_group_name
        seen: set[str] = set()
        while parent and parent not in seen and len(seen) < 8:
            seen.add(parent)
            cpg = cache.composite_groups.get((g.key[0], parent))
            if cpg is None:
                break
            prio = cache.resolve_priority(cpg.spec.priority, cpg.spec.priority_class_name)
            if cpg.spec.disruption_mode is not None and cpg.spec.disruption_mode.all is not None:
                unit = ("CompositePodGroup", g.key[0], parent)
            parent = cpg.spec.parent_composite_pod_group_name
        return unit, prio

    singles: list[Victim] = []
    groups: dict[tuple[Any, str, str], list[PodInfo]] = {}
    prio_of: dict[tuple[Any, str, str], int] = {}
    for p in cache.pods.values():
        if p.counted_node is None or p.deleting:
            continue
        if p.group_key is not None and p.group_key in exclude:
            continue
        g = cache.groups.get(p.group_key) if p.group_key is not None else None
        got = hierarchy(g) if g is not None else None
        prio = got[1] if got is not None else cache.pod_priority(p)
        if prio >= below:
            continue
        if got is not None and got[0] is not None:
            groups.setdefault(got[0], []).append(p)
            prio_of[got[0]] = prio
            continue
        singles.append(Victim("Pod", p.namespace, p.name, prio, (p,), start_key(p)))
    units = singles
    for key, pods in groups.items():
        pods.sort(key=lambda q: (start_key(q), q.seq))
        units.append(Victim(key[0], key[1], key[2], prio_of[key], tuple(pods), start_key(pods[0])))
    units.sort(key=lambda v: v.importance)
    return units


def _check_accounting(cache: Cache) -> None:
    """Node usage and each pod's counted row, recomputed from scratch, equal the cache's
    incremental bookkeeping (nodes removed and re-added, pods bound to unknown nodes)."""
    table = cache.nodes
    used = np.zeros_like(table.used)
    running = {}
    for key, p in cache.pods.items():
        target = p.node_name or p.assumed_node
        row = table.index.get(target) if target else None
        assert p.counted_node == row, (key, p.counted_node, row)
        if row is not None:
            used[row] += table.vector(p.req.requests)
            running[key] = p
    assert np.array_equal(used, table.used)
    assert cache.running == running


def _random_history(cache: Cache, rng: random.Random, steps: int) -> list[list[Victim]]:
    """Apply ``steps`` random changes; after each, compare victim_units with the reference
    for a few preemptor priorities (returns the units found, to show the run was not
    trivial)."""
    nodes = [f"n{i}" for i in range(5)]
    for n in nodes[:3]:
        _node(cache, n)
    groups = [f"g{i}" for i in range(5)]
    cpgs = [f"c{i}" for i in range(3)]
    classes = ["pc-a", "pc-b"]
    prios = [0, 1, 2, 5]
    uid = 0
    found: list[list[Victim]] = []
    for _ in range(steps):
        op = rng.random()
        names = list(cache.pods)
        if op < 0.30 or not names:
            uid += 1
            cache.upsert_pod(
                _pod(
                    f"p{rng.randrange(40)}",
                    node=rng.choice([*nodes, None, None]),
                    priority=rng.choice([*prios, None]),
                    priority_class=rng.choice([*classes, None]),
                    group=rng.choice([*groups, None]),
                    uid=f"u{uid}",
                ),
                float(uid),
            )
        elif op < 0.45:  # bind, assume, forget or mark deleting an existing pod
            p = cache.pods[rng.choice(names)]
            what = rng.randrange(4)
            if what == 0 and not p.scheduled:
                cache.assume(p, rng.choice(nodes))
            elif what == 1:
                cache.forget(p)
            else:
                obj = _pod(
                    p.name,
                    node=p.node_name or rng.choice(nodes),
                    priority=p.priority,
                    priority_class=p.priority_class_name,
                    group=p.group,
                    uid=p.uid,
                )
                if what == 3:
                    obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
                cache.upsert_pod(obj, 0.0)
        elif op < 0.55:
            cache.remove_pod(rng.choice(names))
        elif op < 0.67:
            cache.upsert_pod_group(
                _pod_group(
                    rng.choice(groups),
                    priority=rng.choice(prios),
                    parent=rng.choice([*cpgs, None, None]),
                    disruption=rng.choice(["all", None]),
                ),
                0.0,
            )
        elif op < 0.72:
            cache.remove_pod_group((NS, rng.choice(groups)))
        elif op < 0.82:
            name = rng.choice(cpgs)
            cache.upsert_composite_group(
                (NS, name),
                _cpg(
                    name,
                    priority=rng.choice(prios),
                    parent=rng.choice([c for c in cpgs if c != name] + [None]),
                    disruption=rng.choice(["all", None]),
                ),
            )
        elif op < 0.85:
            cache.remove_composite_group((NS, rng.choice(cpgs)))
        elif op < 0.93:
            name = rng.choice(classes)
            pc = make_priority_class(name, rng.choice(prios)).global_default(rng.random() < 0.3)
            cache.upsert_priority_class(name, pc.obj())
        elif op < 0.95:
            cache.remove_priority_class(rng.choice(classes))
        elif op < 0.98:
            cache.remove_node(rng.choice(nodes))
        else:
            _node(cache, rng.choice(nodes))
        _check_accounting(cache)
        for below in (1, 3, 6):
            exclude = frozenset({(NS, rng.choice(groups))})
            got = victim_units(cache, below, exclude)
            assert got == _reference_units(cache, below, exclude)
            found.append(got)
    return found


@pytest.mark.parametrize("seed", range(12))
def test_victim_units_equal_a_walk_over_every_pod(seed: int) -> None:
    found = _random_history(Cache(), random.Random(seed), 250)
    assert any(found), "the history never had a lower-priority unit running"
    assert any(len(units) > 1 for units in found)
