"""The explanation of a pod shape that fits nowhere (``Framework.run_filter_diagnosis``)
keeps its node-only part per signature and node epoch: a backlog of equal pods failing
after a node burst is explained without re-running the node filters for every attempt. The
explanation must be the one computed from scratch, whatever changed in between (nodes
added, relabelled, tainted, cordoned or removed; node usage)."""

from __future__ import annotations

import random

from workloadbuilder.scheduler._cache import Cache
from workloadbuilder.scheduler._framework import Framework
from workloadbuilder.scheduler._interface import Placement
from workloadbuilder.scheduler._plugins import default_framework
from workloadbuilder.testing.builders import make_node, make_pod

POOL = "example.com/pool"


def _fresh(fw: Framework) -> Framework:
    """A framework with the same plugins and empty caches."""
    return Framework(filters=list(fw.filters), scores=list(fw.scores))


def test_diagnosis_equals_one_from_scratch_as_nodes_and_usage_change() -> None:
    rng = random.Random(7)
    cache = Cache()
    fw = default_framework()
    shapes = [
        cache.upsert_pod(make_pod(f"p{i}").request("cpu", cpu).node_selectors(sel).obj(), 0.0)[1]
        for i, (cpu, sel) in enumerate(
            [("1", {POOL: "a"}), ("4", {}), ("1", {POOL: "b"}), ("16", {POOL: "a"})]
        )
    ]
    seen_reasons = set()
    for step in range(120):
        name = f"n{rng.randrange(8)}"
        op = rng.random()
        if op < 0.45:
            node = make_node(name).resources({"cpu": str(rng.choice([2, 8])), "memory": "8Gi"})
            if rng.random() < 0.6:
                node.label(POOL, rng.choice(["a", "b"]))
            if rng.random() < 0.2:
                node.taint("example.com/dedicated", "x")
            if rng.random() < 0.1:
                node.unschedulable()
            cache.upsert_node(node.obj())
        elif op < 0.6:
            cache.remove_node(name)
        elif name in cache.nodes.index:  # usage: a pod bound there
            pod = make_pod(f"busy{step}").request("cpu", "1").node_name(name)
            cache.upsert_pod(pod.obj(), 0.0)
        for p in shapes:
            assert p is not None
            got = fw.run_filter_diagnosis(p.req, cache.nodes, Placement())
            want = _fresh(fw).run_filter_diagnosis(p.req, cache.nodes, Placement())
            assert got == want
            assert got.pod_message() == want.pod_message()
            seen_reasons.update(r[0] for r in got.reasons)
    assert len(seen_reasons) >= 3, seen_reasons  # the history was not trivial


def test_a_placement_mask_is_never_served_from_the_cache() -> None:
    cache = Cache()
    fw = default_framework()
    for i in range(4):
        cache.upsert_node(make_node(f"n{i}").resources({"cpu": "2", "memory": "8Gi"}).obj())
    p = cache.upsert_pod(make_pod("p").request("cpu", "4").obj(), 0.0)[1]
    assert p is not None
    whole = fw.run_filter_diagnosis(p.req, cache.nodes, Placement())
    mask = cache.nodes.present.copy()
    mask[cache.nodes.index["n0"]] = False
    part = fw.run_filter_diagnosis(p.req, cache.nodes, Placement(name="some", mask=mask))
    assert (whole.total, part.total) == (4, 3)
    assert fw.run_filter_diagnosis(p.req, cache.nodes, Placement()) == whole
