"""InterPodAffinity's verdict parts shared between pods and extended as a cycle places pods
(``_AntiIn``, ``_Existing``): at every step of a cycle -- pods placed one by one, a revert, a
victim removed -- the verdict of a plugin that kept its parts equals the verdict of a fresh
plugin that builds them from the cache and the snapshot, and the verdict worked out without
shared parts (the folds over placed pods and the counted pods, for every pod)."""

from __future__ import annotations

from typing import Any

import numpy as np

from workloadbuilder.scheduler._cache import Cache, PodInfo
from workloadbuilder.scheduler._podconstraints import Domains, InterPodAffinity
from workloadbuilder.scheduler._snapshot import Snapshot
from workloadbuilder.testing.builders import make_node

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def _anti(*terms: tuple[dict[str, str], str]) -> dict[str, Any]:
    return {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": sel}, "topologyKey": key} for sel, key in terms
            ]
        }
    }


def _pod(name: str, labels: dict[str, str], affinity: Any = None, node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x"}]}
    if node:
        spec["nodeName"] = node
    if affinity:
        spec["affinity"] = affinity
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels, "uid": name},
        "spec": spec,
    }


def _cache() -> Cache:
    cache = Cache()
    for i in range(12):
        labels = {HOST: f"n{i}", ZONE: f"z{i % 3}"}
        if i == 11:
            labels = {HOST: f"n{i}"}  # no zone
        cache.upsert_node(make_node(f"n{i}").labels(labels).resources({"cpu": "8"}).obj())
    # counted pods: a db pod repelling web pods by zone, a pod of the gang's team
    cache.upsert_pod(_pod("db", {"tier": "db"}, _anti(({"tier": "web"}, ZONE)), "n0"), 0.0)
    cache.upsert_pod(_pod("other", {"team": "a"}, None, "n4"), 0.0)
    cache.upsert_pod(_pod("holder", {"x": "y"}, _anti(({"app": "g"}, HOST)), "n5"), 0.0)
    return cache


def _verdict(plugin: InterPodAffinity, pod: PodInfo, snap: Snapshot) -> tuple[Any, ...]:
    mask = plugin.feasible_rows(pod, snap)
    assert mask is not None
    rows = np.arange(snap.table.capacity, dtype=np.int64)
    return tuple(mask.tolist()), tuple(plugin.diagnose_pod(pod, snap, rows))


class _Walking(InterPodAffinity):
    """The verdict worked out from the folds and the cache for every pod, as for a pod that
    is itself counted or placed (no shared parts)."""

    def _shared_parts(self, pod: PodInfo, lister: Snapshot) -> None:
        return None


def _same(kept: InterPodAffinity, pod: PodInfo, snap: Snapshot) -> tuple[Any, ...]:
    got = _verdict(kept, pod, snap)
    assert got == _verdict(InterPodAffinity(), pod, snap)
    assert got == _verdict(_Walking(), pod, snap)
    return got


def test_kept_parts_equal_a_fresh_evaluation_through_a_cycle() -> None:
    cache = _cache()
    gang = [
        cache.upsert_pod(
            _pod(
                f"g{i}",
                {"app": "g", "tier": "web" if i % 2 else "db", "team": "a"},
                _anti(({"app": "g"}, HOST), ({"team": "b"}, ZONE)),
            ),
            0.0,
        )[1]
        for i in range(6)
    ]
    plain = cache.upsert_pod(_pod("plain", {"tier": "web"}), 0.0)[1]
    team_b = cache.upsert_pod(_pod("b", {"team": "b"}, _anti(({"tier": "db"}, HOST))), 0.0)[1]
    assert all(p is not None for p in gang) and plain is not None and team_b is not None
    snap = Snapshot(cache)
    kept = InterPodAffinity()
    marks = []
    for pod in [*gang, team_b]:
        assert pod is not None
        mask, _ = _same(kept, pod, snap)
        _same(kept, plain, snap)
        row = mask.index(True) if True in mask else -1
        if row < 0:
            continue
        marks.append(snap.mark())
        snap.assume(pod, row, snap.table.vector(pod.req.requests))
        kept.reserve_pod(pod, snap, row, True)
    assert len(snap.placed) >= 3
    # re-evaluating a placed pod (not against itself), then a revert, then a victim
    _same(kept, gang[0], snap)  # type: ignore[arg-type]
    snap.revert(marks[2])
    for pod in [*gang, plain, team_b]:
        _same(kept, pod, snap)  # type: ignore[arg-type]
    victim = cache.pods[("default", "holder")]
    assert snap.remove(victim)
    for pod in [*gang, plain]:
        _same(kept, pod, snap)  # type: ignore[arg-type]
    snap.revert()
    for pod in [*gang, plain]:
        _same(kept, pod, snap)  # type: ignore[arg-type]


def test_a_counted_pod_is_evaluated_on_its_own() -> None:
    cache = _cache()
    holder = cache.pods[("default", "holder")]
    snap = Snapshot(cache)
    kept = InterPodAffinity()
    _same(kept, holder, snap)


def test_domains_rows_of_partitions_the_rows_by_domain() -> None:
    cache = _cache()
    domains = Domains()
    ids, values = domains.of(cache.nodes, ZONE)
    rows = domains.rows_of(cache.nodes, ZONE)
    assert len(rows) == len(values) == 3
    for d, r in enumerate(rows):
        assert r.tolist() == np.flatnonzero(ids == d).tolist()
    assert domains.id_list(cache.nodes, ZONE) == ids.tolist()
    assert sum(len(r) for r in rows) == 11  # (the node without a zone is in none)
