"""The node-level Score plugins, as kube-scheduler v1.37.2 scores: NodeAffinity (preferred
terms, the profile's ``addedAffinity``), TaintToleration (``PreferNoSchedule``),
NodeResourcesBalancedAllocation and ImageLocality.

The arithmetic is checked against the cases of upstream's unit tests
(``pkg/scheduler/framework/plugins/{nodeaffinity,tainttoleration,imagelocality}/*_test.go``
and ``noderesources/balanced_allocation_test.go``), in our words: the same nodes, pods and
expected scores. Then the plugins decide where pods land, on MemoryCluster and on the real
v1.37.2 API server:

1. a pod goes to the node matching more of its preferred node affinity weight;
2. a pod avoids a node with a ``PreferNoSchedule`` taint it does not tolerate, and does not
   avoid it when it tolerates the taint;
3. a pod goes where its requests leave the node's cpu and memory fractions balanced;
4. a pod goes to the node that already has its (large) image;
5. in a gang cycle the pods placed earlier count in BalancedAllocation's node usage.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sched_helpers import Env

from workloadbuilder.scheduler import ConfigError
from workloadbuilder.scheduler._cache import NodeTable
from workloadbuilder.scheduler._nodescores import (
    ImageLocality,
    NodeResourcesBalancedAllocation,
    balanced_score,
)
from workloadbuilder.scheduler._plugins import DEFAULT_PLUGINS, NodeAffinity, TaintToleration
from workloadbuilder.scheduler._profile import parse_config
from workloadbuilder.scheduler._resources import normalized_image, pod_requirements
from workloadbuilder.scheduler._scheduler import Scheduler

MB = 1024 * 1024


def _table(*nodes: dict[str, Any]) -> tuple[NodeTable, np.ndarray]:
    table = NodeTable()
    rows = [table.upsert(n)[0] for n in nodes]
    return table, np.array(rows, dtype=np.intp)


def _node(
    name: str,
    *,
    cpu_m: int = 0,
    memory: int = 0,
    extra: dict[str, int] | None = None,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    images: list[tuple[list[str], int]] | None = None,
) -> dict[str, Any]:
    alloc: dict[str, Any] = {"cpu": f"{cpu_m}m", "memory": str(memory)}
    alloc.update({k: str(v) for k, v in (extra or {}).items()})
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"taints": taints or []},
        "status": {
            "allocatable": alloc,
            "images": [{"names": n, "sizeBytes": s} for n, s in images or ()],
        },
    }


def _pod(*containers: dict[str, str], **spec: Any) -> dict[str, Any]:
    """A pod whose containers request what each mapping says (``image`` sets the image)."""
    out = []
    for i, c in enumerate(containers):
        req = {k: v for k, v in c.items() if k != "image"}
        out.append(
            {
                "name": f"c{i}",
                "image": c.get("image", "pause"),
                "resources": {"requests": req} if req else {},
            }
        )
    return {"metadata": {"name": "p"}, "spec": {"containers": out, **spec}}


def _use(table: NodeTable, row: int, pod: dict[str, Any]) -> None:
    table.used[row] += table.vector(pod_requirements(pod).requests)


def _scores(plugin: Any, pod: dict[str, Any], table: NodeTable, rows: np.ndarray) -> list[int]:
    req = pod_requirements(pod)
    vec = table.vector(req.requests)
    got = plugin.score(req, vec, table, rows, False)
    one = [plugin.score_one(req, vec, table, int(r), False) for r in rows]
    assert list(got) == one  # the one-row form gives the evaluation's value
    return [int(v) for v in got]


# ---- NodeResourcesBalancedAllocation (balanced_allocation_test.go) -----------------------------


def test_balanced_allocation_skips_a_pod_requesting_nothing() -> None:
    table, rows = _table(
        _node("n1", cpu_m=4000, memory=10000), _node("n2", cpu_m=4000, memory=10000)
    )
    assert _scores(NodeResourcesBalancedAllocation(), _pod({}), table, rows) == [0, 0]


def test_balanced_allocation_differently_sized_nodes_nothing_scheduled() -> None:
    table, rows = _table(
        _node("n1", cpu_m=4000, memory=10000), _node("n2", cpu_m=6000, memory=10000)
    )
    pod = _pod({"cpu": "1000m", "memory": "2000"}, {"cpu": "2000m", "memory": "3000"})
    assert _scores(NodeResourcesBalancedAllocation(), pod, table, rows) == [68, 75]


@pytest.mark.parametrize(("memory2", "expected"), [(20000, [73, 74]), (50000, [73, 70])])
def test_balanced_allocation_counts_the_pods_on_the_node(memory2: int, expected: list[int]) -> None:
    table, rows = _table(
        _node("n1", cpu_m=10000, memory=20000), _node("n2", cpu_m=10000, memory=memory2)
    )
    _use(table, int(rows[0]), _pod({"cpu": "1000m"}, {"cpu": "2000m"}))
    both = _pod({"cpu": "1000m", "memory": "2000"}, {"cpu": "2000m", "memory": "3000"})
    _use(table, int(rows[1]), both)
    assert _scores(NodeResourcesBalancedAllocation(), both, table, rows) == expected


def test_balanced_allocation_reaches_its_minimum_and_maximum() -> None:
    table, rows = _table(_node("n1", cpu_m=3000, memory=5000), _node("n2", cpu_m=3000, memory=5000))
    _use(table, int(rows[0]), _pod({"cpu": "1000m"}, {"cpu": "2000m"}))
    pod = _pod({"memory": "2000"}, {"memory": "3000"})
    assert _scores(NodeResourcesBalancedAllocation(), pod, table, rows) == [100, 50]


def test_balanced_allocation_caps_fractions_at_capacity() -> None:
    table, rows = _table(
        _node("n1", cpu_m=6000, memory=10000), _node("n2", cpu_m=6000, memory=10000)
    )
    _use(table, int(rows[0]), _pod({"cpu": "1000m"}, {"cpu": "2000m"}))
    _use(
        table,
        int(rows[1]),
        _pod({"cpu": "1000m", "memory": "2000"}, {"cpu": "2000m", "memory": "3000"}),
    )
    pod = _pod({"cpu": "1000m"}, {"cpu": "2000m"})
    assert _scores(NodeResourcesBalancedAllocation(), pod, table, rows) == [62, 62]


def test_balanced_allocation_counts_an_extended_resource_only_when_requested() -> None:
    gpu = "nvidia.com/gpu"
    three = NodeResourcesBalancedAllocation(resources=(("cpu", 1), ("memory", 1), (gpu, 1)))
    table, rows = _table(
        _node("n1", cpu_m=3500, memory=40000, extra={gpu: 8}),
        _node("n2", cpu_m=3500, memory=40000, extra={gpu: 8}),
    )
    _use(
        table,
        int(rows[0]),
        _pod({"cpu": "1000m", "memory": "2000"}, {"cpu": "2000m", "memory": "3000", gpu: "3"}),
    )
    _use(
        table,
        int(rows[1]),
        _pod({"cpu": "1000m", "memory": "2000"}, {"cpu": "2000m", "memory": "3000"}),
    )
    assert _scores(three, _pod({gpu: "1"}), table, rows) == [75, 76]
    table, rows = _table(
        _node("n1", cpu_m=3500, memory=40000, extra={gpu: 8}),
        _node("n2", cpu_m=3500, memory=40000),
    )
    pod = _pod({"cpu": "1000m", "memory": "2000"}, {"cpu": "2000m", "memory": "3000"})
    assert _scores(three, pod, table, rows) == [56, 56]


def test_balanced_score_with_more_than_two_resources_uses_the_standard_deviation() -> None:
    # fractions 0.5, 0.25, 0.75 with the pod (std 0.2041 -> 79), 0, 0, 0 without it (100)
    assert balanced_score([2, 1, 3], [0, 0, 0], [4, 4, 4]) == 50 + (50 + 79 - 100) // 2
    # a resource the node does not have is left out: two fractions remain
    assert balanced_score([2, 5, 1], [0, 0, 0], [4, 0, 4]) == 50 + (50 + 87 - 100) // 2


# ---- ImageLocality (image_locality_test.go) ----------------------------------------------------

N403002000 = [
    (["gcr.io/40:latest", "gcr.io/40:v1", "gcr.io/40:v1"], 40 * MB),
    (["gcr.io/300:latest", "gcr.io/300:v1"], 300 * MB),
    (["gcr.io/2000:latest"], 2000 * MB),
]
N25010 = [(["gcr.io/250:latest"], 250 * MB), (["gcr.io/10:latest", "gcr.io/10:v1"], 10 * MB)]
N60040900 = [
    (["gcr.io/600:latest"], 600 * MB),
    (["gcr.io/40:latest"], 40 * MB),
    (["gcr.io/900:latest"], 900 * MB),
]
N300600900 = [
    (["gcr.io/300:latest"], 300 * MB),
    (["gcr.io/600:latest"], 600 * MB),
    (["gcr.io/900:latest"], 900 * MB),
]
N400030 = [(["gcr.io/4000:latest"], 4000 * MB), (["gcr.io/30:latest"], 30 * MB)]
N203040 = [
    (["gcr.io/20:latest"], 20 * MB),
    (["gcr.io/30:latest"], 30 * MB),
    (["gcr.io/40:latest"], 40 * MB),
]


def _images(*names: str, init: tuple[str, ...] = (), volumes: tuple[str, ...] = ()) -> Any:
    spec: dict[str, Any] = {}
    if init:
        spec["initContainers"] = [{"name": f"i{i}", "image": n} for i, n in enumerate(init)]
    if volumes:
        spec["volumes"] = [
            {"name": f"v{i}", "image": {"reference": n}} for i, n in enumerate(volumes)
        ]
    return _pod(*({"image": n} for n in names), **spec)


@pytest.mark.parametrize(
    ("pod", "nodes", "expected"),
    [
        (_images("gcr.io/40", "gcr.io/250"), [N403002000, N25010], [0, 5]),
        (_images("gcr.io/40", "gcr.io/300"), [N403002000, N25010], [7, 0]),
        (_images("gcr.io/10", "gcr.io/4000"), [N400030, N25010], [100, 0]),
        (_images("gcr.io/10", "gcr.io/4000"), [N400030, N25010, []], [66, 0, 0]),
        (
            _images("gcr.io/300", "gcr.io/600", "gcr.io/900"),
            [N60040900, N300600900, []],
            [32, 36, 0],
        ),
        (_images("gcr.io/30", "gcr.io/40"), [N203040, N400030], [1, 0]),
        (_images("gcr.io/30", volumes=("gcr.io/300",)), [N300600900, N400030], [6, 0]),
        (_images("gcr.io/30", "gcr.io/300"), [N300600900, N400030], [6, 0]),
        (_images("gcr.io/30", init=("gcr.io/300",)), [N403002000, N203040], [6, 0]),
    ],
    ids=[
        "the larger image's node",
        "both images on one node",
        "above the ceiling",
        "above the ceiling, a node without images",
        "several large images",
        "several small images",
        "an image volume",
        "the same images as containers",
        "an init container",
    ],
)
def test_image_locality(pod: Any, nodes: list[Any], expected: list[int]) -> None:
    table, rows = _table(*(_node(f"n{i}", images=imgs) for i, imgs in enumerate(nodes)))
    assert _scores(ImageLocality(), pod, table, rows) == expected


def test_image_names_are_normalised_and_part_of_the_signature() -> None:
    assert normalized_image("myimage") == "myimage:latest"
    assert normalized_image("registry:5000/myimage") == "registry:5000/myimage:latest"
    assert normalized_image("myimage:v1") == "myimage:v1"
    req = pod_requirements(_images("zmyimage", "myimage"))
    assert req.images == ("myimage:latest", "zmyimage:latest")
    assert req != pod_requirements(_images("myimage"))


def test_image_locality_follows_the_nodes_and_their_images() -> None:
    plugin = ImageLocality()  # one instance: what it caches must follow the table
    table, rows = _table(_node("a", images=N300600900), _node("b", images=N300600900))
    pod = _images("gcr.io/600")
    # 600 MiB on every node: 100 * (600 - 23) // (1000 - 23)
    assert _scores(plugin, pod, table, rows) == [59, 59]
    table.remove("b")
    assert _scores(plugin, pod, table, rows[:1]) == [59]
    assert table.image_rows["gcr.io/600:latest"] == {int(rows[0]): 600 * MB}
    c = table.upsert(_node("c"))[0]  # a node without it halves the spread: 300 MiB
    both = np.array([rows[0], c], dtype=np.intp)
    assert _scores(plugin, pod, table, both) == [28, 0]
    # c lists it later (its status changed): the spread is whole again
    table.upsert(_node("c", images=[(["gcr.io/600:latest"], 100 * MB)]))
    assert _scores(plugin, pod, table, both) == [59, 7]


# ---- NodeAffinity (node_affinity_test.go) -----------------------------------------------------


def _in(labels: dict[str, str]) -> list[dict[str, Any]]:
    return [{"key": k, "operator": "In", "values": [v]} for k, v in labels.items()]


def _prefer(*terms: tuple[int, dict[str, str]]) -> dict[str, Any]:
    return {
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": w,
                        "preference": {"matchExpressions": _in(labels)},
                    }
                    for w, labels in terms
                ]
            }
        }
    }


L1 = {"foo": "bar"}
L2 = {"key": "value"}
L3 = {"az": "az1"}
L4 = {"abc": "az11", "def": "az22"}
L5 = {"foo": "bar", "key": "value", "az": "az1"}
AFFINITY1 = _prefer((2, L1))
AFFINITY2 = _prefer((2, L1), (4, L2), (5, L5))


@pytest.mark.parametrize(
    ("spec", "labels", "expected"),
    [
        ({}, [L1, L2, L3], [0, 0, 0]),
        (AFFINITY1, [L4, L2, L3], [0, 0, 0]),
        (AFFINITY1, [L1, L2, L3], [100, 0, 0]),
        (AFFINITY2, [L1, L5, L2], [18, 100, 36]),
    ],
    ids=["no affinity", "no node matches", "only the first matches", "weights add up"],
)
def test_node_affinity_priority(spec: Any, labels: list[Any], expected: list[int]) -> None:
    table, rows = _table(*(_node(f"n{i}", labels=lb) for i, lb in enumerate(labels)))
    assert _scores(NodeAffinity(), _pod({}, **spec), table, rows) == expected


def test_node_affinity_scores_the_profiles_added_preferred_terms() -> None:
    pref = AFFINITY1["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    added = NodeAffinity(added_preferred=[(t["weight"], t["preference"]) for t in pref])
    table, rows = _table(_node("n1", labels=L1), _node("n2", labels=L2))
    assert _scores(added, _pod({}), table, rows) == [100, 0]
    pref3 = _prefer((3, L2))["affinity"]["nodeAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    added = NodeAffinity(added_preferred=[(t["weight"], t["preference"]) for t in pref3])
    table, rows = _table(_node("n1", labels=L1), _node("n2", labels=L2), _node("n3", labels=L5))
    assert _scores(added, _pod({}, **AFFINITY1), table, rows) == [40, 60, 100]


def test_node_affinity_matches_fields_and_ignores_empty_or_weightless_terms() -> None:
    spec = {
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 7,
                        "preference": {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["n2"]}
                            ]
                        },
                    },
                    {"weight": 50, "preference": {}},
                ]
            }
        }
    }
    table, rows = _table(_node("n1"), _node("n2"))
    assert _scores(NodeAffinity(), _pod({}, **spec), table, rows) == [0, 100]
    req = pod_requirements(_pod({}, **spec))
    assert req.preferred_terms() == [
        (7, {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]})
    ]


def test_normalisation_is_over_the_rows_scored_and_score_one_keeps_the_factor() -> None:
    table, rows = _table(_node("n1", labels=L1), _node("n2", labels=L5), _node("n3", labels=L2))
    plugin = NodeAffinity()
    req = pod_requirements(_pod({}, **AFFINITY2))
    vec = table.vector(req.requests)
    # over all three nodes: n2 (11) is the maximum; over the first only, n1 (2) is
    assert list(plugin.score(req, vec, table, rows, False)) == [18, 100, 36]
    assert plugin.score_one(req, vec, table, int(rows[0]), False) == 18
    assert list(plugin.score(req, vec, table, rows[:1], False)) == [100]


# ---- TaintToleration (taint_toleration_test.go) -------------------------------------------------


def _soft(key: str, value: str, effect: str = "PreferNoSchedule") -> dict[str, str]:
    return {"key": key, "value": value, "effect": effect}


def _tol(key: str, value: str, effect: str = "PreferNoSchedule") -> dict[str, str]:
    return {"key": key, "operator": "Equal", "value": value, "effect": effect}


ARM = _soft("cpu-type", "arm64")
SSD = _soft("disk-type", "ssd")


@pytest.mark.parametrize(
    ("tolerations", "taints", "expected"),
    [
        ([_tol("foo", "bar")], [[_soft("foo", "bar")], [_soft("foo", "blah")]], [100, 0]),
        ([_tol("cpu-type", "arm64"), _tol("disk-type", "ssd")], [[], [ARM], [ARM, SSD]], [100] * 3),
        ([_tol("foo", "bar")], [[], [ARM], [ARM, SSD]], [100, 50, 0]),
        (
            [_tol("cpu-type", "arm64", "NoSchedule"), _tol("disk-type", "ssd", "NoSchedule")],
            [[], [_soft("cpu-type", "arm64", "NoSchedule")], [ARM, SSD]],
            [100, 100, 0],
        ),
        ([], [[], [ARM]], [100, 0]),
        ([{"key": "cpu-type", "operator": "Exists"}], [[], [ARM]], [100, 100]),
    ],
    ids=[
        "tolerated beats untolerated",
        "tolerated taints do not count",
        "more untolerated taints, lower score",
        "only PreferNoSchedule counts",
        "no tolerations",
        "a toleration without effect tolerates PreferNoSchedule",
    ],
)
def test_taint_toleration_score(
    tolerations: list[Any], taints: list[Any], expected: list[int]
) -> None:
    table, rows = _table(*(_node(f"n{i}", taints=t) for i, t in enumerate(taints)))
    pod = _pod({}, tolerations=tolerations)
    assert _scores(TaintToleration(), pod, table, rows) == expected


def test_prefer_no_schedule_taints_do_not_filter() -> None:
    table, rows = _table(_node("n1", taints=[ARM]))
    req = pod_requirements(_pod({}))
    assert list(TaintToleration().filter(req, table.vector(req.requests), table, rows)) == [True]
    assert table.taints[int(rows[0])] == ()


# ---- registration and configuration -----------------------------------------------------------


def _config(**profile: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [profile],
    }


def test_default_score_plugins_in_upstream_order_and_weights() -> None:
    assert DEFAULT_PLUGINS["score"] == (
        "TaintToleration",
        "NodeAffinity",
        "NodeResourcesFit",
        "PodTopologySpread",
        "InterPodAffinity",
        "NodeResourcesBalancedAllocation",
        "ImageLocality",
    )
    fw = parse_config(_config()).framework
    assert [(s.name, s.weight) for s in fw.scores] == [
        ("TaintToleration", 3),
        ("NodeAffinity", 2),
        ("NodeResourcesFit", 1),
        ("PodTopologySpread", 2),
        ("InterPodAffinity", 2),
        ("NodeResourcesBalancedAllocation", 1),
        ("ImageLocality", 1),
    ]


def test_plugin_args_of_the_node_scores() -> None:
    term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
    fw = parse_config(
        _config(
            pluginConfig=[
                {
                    "name": "NodeAffinity",
                    "args": {
                        "addedAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [term]
                            },
                            "preferredDuringSchedulingIgnoredDuringExecution": [
                                {"weight": 5, "preference": term}
                            ],
                        }
                    },
                },
                {
                    "name": "NodeResourcesBalancedAllocation",
                    "args": {"resources": [{"name": "cpu"}, {"name": "nvidia.com/gpu"}]},
                },
            ]
        )
    ).framework
    affinity = next(s for s in fw.scores if s.name == "NodeAffinity")
    assert affinity.added_preferred == [(5, {**term})]
    assert affinity.added_required == [{**term}]
    balanced = next(s for s in fw.scores if s.name == "NodeResourcesBalancedAllocation")
    assert balanced.resources == (("cpu", 1), ("nvidia.com/gpu", 1))


@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        ("NodeAffinity", {"nope": 1}, "profiles[0].pluginConfig[0].args.nope: unknown field"),
        (
            "NodeAffinity",
            {"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"x": 1}]}},
            "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].x: unknown field",
        ),
        (
            "NodeAffinity",
            {
                "addedAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "k", "operator": "Near"}]}
                        ]
                    }
                }
            },
            "nodeSelectorTerms[0].matchExpressions[0].operator: must be one of",
        ),
        (
            "NodeResourcesBalancedAllocation",
            {"resources": [{"name": "cpu", "weight": 2}]},
            "args.resources[0].weight: must be 1",
        ),
        (
            "NodeResourcesBalancedAllocation",
            {"resources": [{"name": "cpu"}, {"name": "cpu"}]},
            "args.resources[1].name: 'cpu' is listed twice",
        ),
        ("ImageLocality", {"threshold": 1}, "args.threshold: unknown field"),
        ("TaintToleration", {"x": 1}, "args.x: unknown field"),
    ],
)
def test_bad_node_score_args_name_the_field(name: str, args: Any, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_config(_config(pluginConfig=[{"name": name, "args": args}]))
    assert message in str(e.value)


def test_added_required_affinity_filters_every_pod() -> None:
    plugin = NodeAffinity(
        added_required=[{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]
    )
    table, rows = _table(_node("n1", labels={"zone": "a"}), _node("n2", labels={"zone": "b"}))
    req = pod_requirements(_pod({}))
    vec = table.vector(req.requests)
    assert list(plugin.filter(req, vec, table, rows)) == [True, False]
    assert plugin.diagnose(req, vec, table, rows)[0] == (
        "node(s) didn't match scheduler-enforced node affinity",
        "don't match the scheduler's added node affinity",
        1,
    )
    assert list(NodeAffinity(added_required=[]).filter(req, vec, table, rows)) == [False, False]


# ---- where pods land (MemoryCluster and the real API server) -----------------------------------


async def _settled(env: Env, s: Scheduler, names: list[str]) -> dict[str, str]:
    async def check() -> bool:
        bound = await env.bound()
        return all(n in bound for n in names)

    await env.until(s, check)
    return {n: node for n, node in (await env.bound()).items() if n in names}


async def test_a_pod_goes_to_the_node_matching_more_preferred_weight(env: Env) -> None:
    await env.node("a", labels={"tier": "slow"})
    b = await env.node("b", labels={"tier": "fast", "disk": "ssd"})
    await env.node("c", labels={"tier": "fast"})
    spec = _prefer((10, {"tier": "fast"}), (20, {"disk": "ssd"}))
    await env.pod("p", spec=spec)
    s = env.scheduler()
    await s.start()
    assert await _settled(env, s, ["p"]) == {"p": b}
    pod = (await env.pods())["p"]
    assert pod["spec"]["nodeName"] == b


async def test_a_pod_avoids_an_untolerated_prefer_no_schedule_taint(env: Env) -> None:
    # a's lower usage would win for NodeResourcesFit (LeastAllocated) and the balance alone
    a = await env.node("a", cpu="16", taints=[_soft("dedicated", "batch")])
    b = await env.node("b", cpu="8")
    await env.pod("plain")
    await env.pod("tolerating", tolerations=[_tol("dedicated", "batch")])
    s = env.scheduler()
    await s.start()
    bound = await _settled(env, s, ["plain", "tolerating"])
    assert bound == {"plain": b, "tolerating": a}


async def test_a_pod_goes_where_its_requests_keep_the_node_balanced(env: Env) -> None:
    # equal free shares for LeastAllocated (a: half its cpu used; b: half its memory), so
    # without the balance the first node would win the tie; a cpu-heavy pod balances b
    # (memory-heavy) and unbalances a (cpu-heavy)
    a = await env.node("a", cpu="8", memory="32Gi")
    b = await env.node("b", cpu="8", memory="32Gi")
    await env.pod("cpu-hog", cpu="4", memory="0", node_name=a)
    await env.pod("mem-hog", cpu="0", memory="16Gi", node_name=b)
    await env.pod("p", cpu="2", memory="1Mi")
    s = env.scheduler()
    await s.start()
    assert (await _settled(env, s, ["p"]))["p"] == b


async def test_a_pod_goes_to_the_node_that_has_its_image(env: Env) -> None:
    await env.node("a")
    b = await env.node("b")
    await env.node("c")
    status = {"images": [{"names": ["example.com/big:v1"], "sizeBytes": 2000 * MB}]}
    await env.cluster.patch("Node", b, {"status": status}, subresource="status")
    await env.pod("p", spec={"containers": [_container("example.com/big:v1")]})
    s = env.scheduler()
    await s.start()
    assert await _settled(env, s, ["p"]) == {"p": b}


def _container(image: str) -> dict[str, Any]:
    return {
        "name": "main",
        "image": image,
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
    }


def test_in_a_cycle_the_pods_placed_earlier_count_for_the_balance() -> None:
    # the cycle assumes a placed pod by adding its requests to the row's usage and then
    # refreshes the row with score_one: the balance is the one with that pod counted
    table, rows = _table(_node("a", cpu_m=8000, memory=8 * 1024 * MB))
    plugin = NodeResourcesBalancedAllocation()
    cpu_pod = _pod({"cpu": "4", "memory": "1Mi"})
    mem_pod = _pod({"cpu": "1m", "memory": "4Gi"})
    req = pod_requirements(mem_pod)
    vec = table.vector(req.requests)
    before = plugin.score(req, vec, table, rows, True)[0]
    _use(table, int(rows[0]), cpu_pod)  # the first pod of the gang, placed on a
    after = plugin.score_one(req, vec, table, int(rows[0]), True)
    assert (before, after) == (62, 87)  # now the memory pod balances the node
    assert after == plugin.score(req, vec, table, rows, True)[0]


def test_balanced_allocation_fast_paths_equal_the_general_arithmetic() -> None:
    # cpu and memory on every node take a shorter path (vectorised and one-row): on random
    # usage (over capacity too) they give balanced_score's value exactly
    rng = np.random.default_rng(7)
    table, rows = _table(*(_node(f"n{i}", cpu_m=8000, memory=32 * 1024 * MB) for i in range(300)))
    table.used[rows, table.columns["cpu"]] = rng.integers(0, 9000, rows.size)
    table.used[rows, table.columns["memory"]] = rng.integers(0, 36 * 1024 * MB, rows.size)
    pod = _pod({"cpu": "1500m", "memory": "3Gi"})
    got = _scores(NodeResourcesBalancedAllocation(), pod, table, rows)
    cpu, mem = table.columns["cpu"], table.columns["memory"]
    want = []
    for r in rows.tolist():
        used = [int(table.used[r, cpu]), int(table.used[r, mem])]
        alloc = [int(table.alloc[r, cpu]), int(table.alloc[r, mem])]
        want.append(balanced_score([used[0] + 1500, used[1] + 3 * 1024 * MB], used, alloc))
    assert got == want
