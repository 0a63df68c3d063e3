"""The bounded placement search picks what simulating every topology domain would pick.

The cycle simulates candidate domains best score bound first and stops when no remaining
bound can beat the best feasible score found (``PlacementScore`` plugins' upper bounds). A
framework whose placement scorers hide their bounds simulates every candidate; on random
clusters (mixed pod shapes, partly used racks, gangs and basic groups) both must choose the
same domain, place the same number of pods and give the same explanation.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from workloadbuilder.api import PodGroup, from_dict
from workloadbuilder.scheduler._cache import Cache, GroupInfo
from workloadbuilder.scheduler._cycle import run_pod_group_cycle
from workloadbuilder.scheduler._framework import Framework
from workloadbuilder.scheduler._interface import Placement
from workloadbuilder.scheduler._plugins import PodGroupPodsCount, default_framework
from workloadbuilder.scheduler._snapshot import Snapshot
from workloadbuilder.testing.builders import make_node, make_pod, make_pod_group

RACK = "topology.kubernetes.io/rack"


class _NoBound:
    """A PlacementScore plugin without bounds (forces the cycle to simulate everything)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.weight = getattr(inner, "placement_weight", inner.weight)

    def score_placement(self, *args: Any) -> float:
        return float(self.inner.score_placement(*args))


def _scenario(seed: int) -> tuple[Cache, GroupInfo]:
    rng = random.Random(seed)
    cache = Cache()
    n = 0
    for r in range(rng.randint(2, 6)):
        for _ in range(rng.randint(1, 4)):
            node = make_node(f"n{n}").label(RACK, f"r{r}")
            cache.upsert_node(
                node.resources({"cpu": str(rng.choice([4, 8, 16])), "memory": "64Gi"}).obj()
            )
            if rng.random() < 0.4:
                busy = make_pod(f"busy{n}", "default").request("cpu", str(rng.randint(1, 4)))
                cache.upsert_pod(busy.node_name(f"n{n}").obj(), 0.0)
            n += 1
    size = rng.randint(1, 8)
    pg = make_pod_group("g", "default").topology(RACK)
    if rng.random() < 0.7:
        pg.gang(rng.randint(1, size))
    _, group = cache.upsert_pod_group(from_dict(pg.obj(), PodGroup), 0.0)
    shapes = [rng.choice(["500m", "1", "2", "3"]) for _ in range(rng.randint(1, 2))]
    for i in range(size):
        pod = make_pod(f"g-{i}", "default").pod_group("g").request("cpu", rng.choice(shapes))
        cache.upsert_pod(pod.obj(), 0.0)
    return cache, group


def _run(fw: Framework, cache: Cache, group: GroupInfo) -> tuple[Any, ...]:
    snap = Snapshot(cache)
    placements = fw.run_placement_generate(group, snap)
    assert isinstance(placements, list)
    pods = sorted(cache.members(group), key=lambda p: p.name)
    res = run_pod_group_cycle(
        fw,
        snap,
        pods,
        min_count=group.min_count,
        scheduled=0,
        gang=group.is_gang,
        placements=placements,
        group=group,
    )
    return (res.status.ok, res.placement, len(res.assignments), res.explanation)


@pytest.mark.parametrize("seed", range(40))
def test_bounded_search_matches_exhaustive_simulation(seed: int) -> None:
    cache, group = _scenario(seed)
    bounded = default_framework()
    exhaustive = default_framework()
    exhaustive.placement_score = [_NoBound(p) for p in exhaustive.placement_score]
    exhaustive.refresh()
    assert _run(bounded, cache, group) == _run(exhaustive, cache, group)


def test_pods_count_bound_is_an_upper_bound() -> None:
    cache, group = _scenario(3)
    snap = Snapshot(cache)
    placements = default_framework().run_placement_generate(group, snap)
    assert isinstance(placements, list) and all(isinstance(p, Placement) for p in placements)
    plugin = PodGroupPodsCount()
    assert plugin.score_placement(group, placements[0], [], snap) == 0.0
