"""Units: quantities, pod requests, signatures, node affinity."""

from __future__ import annotations

import pytest

from workloadbuilder.api import PodGroup, from_dict
from workloadbuilder.cluster import MemoryCluster
from workloadbuilder.resources import format_quantity, parse_quantity
from workloadbuilder.resources import pod_requests as pod_resource_requests
from workloadbuilder.scheduler import Scheduler, SchedulerConfig
from workloadbuilder.scheduler._nodematch import node_matches_affinity
from workloadbuilder.scheduler._resources import pod_requirements
from workloadbuilder.testing.builders import make_node, make_pod, make_pod_group


@pytest.mark.parametrize(
    ("text", "resource", "value"),
    [
        ("1", "cpu", 1000),
        ("250m", "cpu", 250),
        ("0.5", "cpu", 500),
        ("1.5Gi", "memory", 1610612736),
        ("1G", "memory", 1_000_000_000),
        ("128974848", "memory", 128974848),
        ("129e6", "memory", 129_000_000),
        ("123Mi", "memory", 128974848),
        ("1k", "memory", 1000),
        (8, "nvidia.com/gpu", 8),
        ("100u", "cpu", 1),  # rounded up to a millicore
    ],
)
def test_parse_quantity(text: str, resource: str, value: int) -> None:
    assert parse_quantity(text, resource) == value


@pytest.mark.parametrize("bad", ["", "abc", "1x", "1.2.3", "Gi"])
def test_parse_quantity_rejects(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_quantity(bad, "memory")


def test_format_quantity() -> None:
    assert format_quantity(2000, "cpu") == "2"
    assert format_quantity(1500, "cpu") == "1500m"
    assert format_quantity(8 * 2**30, "memory") == "8Gi"
    assert format_quantity(1000, "memory") == "1000"
    assert format_quantity(8, "nvidia.com/gpu") == "8"


def test_pod_requests_init_sidecars_overhead_and_limits() -> None:
    spec = {
        "containers": [
            {"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
            {"resources": {"limits": {"cpu": "500m", "nvidia.com/gpu": "2"}}},
        ],
        "initContainers": [
            {"resources": {"requests": {"cpu": "4"}}},
            {"restartPolicy": "Always", "resources": {"requests": {"memory": "1Gi"}}},
        ],
        "overhead": {"cpu": "100m"},
    }
    req = pod_resource_requests(spec)
    # containers 1.5 cpu (+ sidecar 0) vs init 4 cpu -> 4, plus overhead 0.1
    assert req["cpu"] == 4100
    assert req["memory"] == 2 * 2**30  # container + sidecar
    assert req["nvidia.com/gpu"] == 2  # requests default to limits


def test_equal_pods_share_a_signature() -> None:
    def pod(name: str, cpu: str) -> dict[str, object]:
        return {
            "metadata": {"name": name},
            "spec": {
                "nodeSelector": {"pool": "a"},
                "containers": [{"resources": {"requests": {"cpu": cpu}}}],
            },
        }

    assert pod_requirements(pod("x", "1")) == pod_requirements(pod("y", "1000m"))
    assert pod_requirements(pod("x", "1")) != pod_requirements(pod("y", "2"))


def test_required_node_affinity() -> None:
    by_name = {"key": "metadata.name", "operator": "In", "values": ["n9"]}
    spec = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "zone", "operator": "In", "values": ["a", "b"]},
                                {"key": "gpus", "operator": "Gt", "values": ["3"]},
                            ]
                        },
                        {"matchFields": [by_name]},
                    ]
                }
            }
        },
        "containers": [],
    }
    req = pod_requirements({"spec": spec})
    assert node_matches_affinity(req, {"zone": "a", "gpus": "4"}, "n1")
    assert not node_matches_affinity(req, {"zone": "a", "gpus": "2"}, "n1")
    assert not node_matches_affinity(req, {"zone": "c", "gpus": "8"}, "n1")
    assert node_matches_affinity(req, {}, "n9")


async def test_explanation_grammar_for_one_pod() -> None:
    """'at most 1 pod fits', never '1 pods fit' (a regression from trying it as a user)."""
    async with MemoryCluster() as c:
        await c.create(make_node("n").allocatable("cpu", "1").allocatable("memory", "4Gi").obj())
        pg = make_pod_group("g", "default").gang(2).obj()
        await c.create(from_dict(pg, PodGroup))
        for i in range(2):
            pod = make_pod(f"g-{i}", "default").scheduler_name("workloadbuilder-scheduler")
            await c.create(pod.pod_group("g").request("cpu", "1").obj())
        s = Scheduler(c, SchedulerConfig())
        await s.until_idle()
        assert s.explanations[("default", "g")].startswith(
            "minCount 2: at most 1 pod fits, 1 short"
        )


def test_one_row_filter_and_score_equal_the_vectorised_ones() -> None:
    # The cycle re-checks the row a pod was just placed on through NodeResourcesFit's
    # ``filter_one`` / ``score_one``: they must give exactly what the vectorised ``filter`` /
    # ``score`` give for that row (bit-identical scores: ties are broken by row), for both
    # strategies, zero requests (the non-zero defaults), full and overcommitted nodes.
    import random

    import numpy as np

    from workloadbuilder.scheduler._cache import NodeTable
    from workloadbuilder.scheduler._plugins import NodeResourcesFit
    from workloadbuilder.scheduler._resources import PodRequirements

    rng = random.Random(7)
    table = NodeTable()
    for i in range(40):
        cpu, mem = rng.choice(["0", "1", "3", "32"]), rng.choice(["0", "1Gi", "7Gi", "128Gi"])
        alloc = {"cpu": cpu, "memory": mem, "pods": "110", "nvidia.com/gpu": str(i % 3)}
        node = {"metadata": {"name": f"n{i}"}, "status": {"allocatable": alloc}}
        row, _ = table.upsert(node)
        table.used[row] = [rng.randint(0, 40_000) for _ in range(table.used.shape[1])]
    rows = np.flatnonzero(table.present)
    plugins = [NodeResourcesFit(), NodeResourcesFit(gang_strategy="LeastAllocated")]
    shapes: list[tuple[tuple[str, int], ...]] = [
        (),
        (("cpu", 500),),
        (("cpu", 2000), ("memory", 1 << 30)),
        (("nvidia.com/gpu", 1), ("pods", 1)),
    ]
    for requests in shapes:
        req = PodRequirements(requests=requests)
        vec = table.vector(req.requests)
        for fit in plugins:
            mask = fit.filter(req, vec, table, rows)
            for gang in (True, False):
                scores = fit.score(req, vec, table, rows, gang)
                for i, row in enumerate(rows.tolist()):
                    assert fit.filter_one(req, vec, table, row) == bool(mask[i])
                    assert fit.score_one(req, vec, table, row, gang) == float(scores[i])
