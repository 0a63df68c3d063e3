"""InterPodAffinity's Score and ``namespaceSelector`` with requirements, on MemoryCluster and on
the real v1.37.2 API server, plus the arithmetic against kube-scheduler v1.37.2's unit cases.

The rules, in our words, from ``pkg/scheduler/framework/plugins/interpodaffinity/scoring.go``
and its tests:

1. per topology value, the weight of each preferred affinity term of the incoming pod is added
   once per counted pod the term matches there; its preferred anti-affinity terms subtract;
2. the counted pods' preferred terms that match the incoming pod add (affinity) or subtract
   (anti-affinity) their weights in their own domain (symmetry), unless
   ``ignorePreferredTermsOfExistingPods`` and the incoming pod has no preferences;
3. each required affinity term of a counted pod that matches the incoming pod adds
   ``hardPodAffinityWeight`` (default 1; 0 turns it off);
4. a node scores the sum over the topology keys it carries, then the scores are scaled to
   0..100 between the lowest and the highest of the nodes that passed the filters (all 0 when
   nothing contributed or all are equal), truncated; the default profile weighs it 2;
5. inside one gang cycle the pods placed before count as counted pods;
6. a term's ``namespaceSelector`` selects namespaces by their labels (together with its
   ``namespaces``), for filter and score; a Namespace label change re-evaluates pending pods.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sched_helpers import Env

from workloadbuilder.scheduler import Scheduler, SchedulerConfig
from workloadbuilder.scheduler._cache import Cache
from workloadbuilder.scheduler._plugins import default_framework
from workloadbuilder.scheduler._podconstraints import InterPodAffinity
from workloadbuilder.scheduler._snapshot import Snapshot
from workloadbuilder.testing.builders import make_node

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


# ---- builders ----------------------------------------------------------------------------------


def _term(selector: dict[str, str], key: str, **extra: Any) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": selector}, "topologyKey": key, **extra}


def _weighted(weight: int, selector: dict[str, str], key: str, **extra: Any) -> dict[str, Any]:
    return {"weight": weight, "podAffinityTerm": _term(selector, key, **extra)}


def _prefer(
    kind: str, weight: int, selector: dict[str, str], key: str = ZONE, **extra: Any
) -> dict[str, Any]:
    """``kind``: podAffinity or podAntiAffinity, one preferred term."""
    return {
        "affinity": {
            kind: {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    _weighted(weight, selector, key, **extra)
                ]
            }
        }
    }


def _require(kind: str, selector: dict[str, str], key: str = ZONE, **extra: Any) -> dict[str, Any]:
    return {
        "affinity": {
            kind: {
                "requiredDuringSchedulingIgnoredDuringExecution": [_term(selector, key, **extra)]
            }
        }
    }


async def _zoned(env: Env, *specs: tuple[str, str, str]) -> dict[str, str]:
    """Nodes ``(name, zone, cpu)``, in this order; name -> full node name."""
    out = {}
    for name, zone, cpu in specs:
        full = env.node_name(name)
        out[name] = await env.node(name, cpu=cpu, labels={HOST: full, ZONE: f"{env.prefix}{zone}"})
    return out


async def _settled(env: Env, s: Scheduler, names: list[str]) -> dict[str, str]:
    async def check() -> bool:
        bound = await env.bound()
        for n in names:
            if n not in bound and await env.pod_condition(n) is None:
                return False
        return True

    await env.until(s, check)
    return {n: node for n, node in (await env.bound()).items() if n in names}


async def _namespace(env: Env, suffix: str, labels: dict[str, str]) -> str:
    name = f"{env.namespace}-{suffix}"
    await env.cluster.create(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}
    )
    return name


def _bound_pod(namespace: str, name: str, labels: dict[str, str], node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]},
    }


# ---- on both backends ---------------------------------------------------------------------------


async def test_preferred_affinity_pulls_a_pod_to_the_zone_of_the_matching_pods(env: Env) -> None:
    # a1 is the least allocated (16 CPUs): resources alone would choose it
    n = await _zoned(env, ("a1", "a", "16"), ("b1", "b", "4"), ("b2", "b", "4"))
    await env.pod("db", labels={"app": "db"}, node_name=n["b1"])
    await env.pod("plain", labels={"app": "web"})  # nothing to prefer: the least allocated
    s = env.scheduler()
    await s.start()
    assert await _settled(env, s, ["plain"]) == {"plain": n["a1"]}
    await env.pod("web", labels={"app": "web"}, spec=_prefer("podAffinity", 50, {"app": "db"}))
    assert (await _settled(env, s, ["web"]))["web"] in (n["b1"], n["b2"])  # the db's zone


async def test_preferred_anti_affinity_pushes_a_pod_out_of_the_zone(env: Env) -> None:
    # a1 is the least allocated (16 CPUs); b1 would lose on resources alone
    n = await _zoned(env, ("a1", "a", "16"), ("b1", "b", "4"))
    await env.pod("noisy", labels={"app": "noisy"}, node_name=n["a1"])
    await env.pod("plain", labels={"app": "q"})
    s = env.scheduler()
    await s.start()
    assert await _settled(env, s, ["plain"]) == {"plain": n["a1"]}
    spec = _prefer("podAntiAffinity", 100, {"app": "noisy"})
    await env.pod("quiet", labels={"app": "q"}, spec=spec)
    assert await _settled(env, s, ["quiet"]) == {"quiet": n["b1"]}


async def test_an_existing_pods_preferred_anti_affinity_repels_the_incoming_pod(env: Env) -> None:
    n = await _zoned(env, ("a1", "a", "16"), ("b1", "b", "4"))
    spec = _prefer("podAntiAffinity", 100, {"app": "web"})
    await env.pod("loner", labels={"app": "loner"}, node_name=n["a1"], spec=spec)
    await env.pod("web", labels={"app": "web"})  # no constraints of its own
    await env.pod("other", labels={"app": "other"})
    s = env.scheduler()
    await s.start()
    bound = await _settled(env, s, ["web", "other"])
    assert bound["web"] == n["b1"]  # symmetry: the loner's preference holds against it
    assert bound["other"] == n["a1"]  # not matched: the least allocated


async def test_existing_pods_required_affinity_weighs_hard_pod_affinity_weight(env: Env) -> None:
    n = await _zoned(env, ("a1", "a", "16"), ("b1", "b", "4"))
    spec = _require("podAffinity", {"app": "cache"})
    await env.pod("client", labels={"app": "client"}, node_name=n["b1"], spec=spec)
    await env.pod("cache", labels={"app": "cache"})
    s = env.scheduler()
    await s.start()
    assert await _settled(env, s, ["cache"]) == {"cache": n["b1"]}  # pulled (weight 1)
    await s.stop()
    fw = default_framework()
    ipa = next(p for p in fw.reserve if isinstance(p, InterPodAffinity))
    ipa.hard_pod_affinity_weight = 0  # hardPodAffinityWeight: 0 turns the pull off
    off = Scheduler(env.cluster, SchedulerConfig(scheduler_name=env.scheduler_name), framework=fw)
    env.schedulers.append(off)
    await env.pod("cache2", labels={"app": "cache"})
    await off.start()
    assert await _settled(env, off, ["cache2"]) == {"cache2": n["a1"]}


async def test_a_gang_preferring_its_own_pods_zone_lands_together(env: Env) -> None:
    # each pod fills a node; without the preference the second pod takes b1 (lowest row)
    n = await _zoned(env, ("a1", "a", "4"), ("b1", "b", "4"), ("a2", "a", "4"))
    spec = _prefer("podAffinity", 100, {"app": "g"})
    await env.gang("g", 2, labels={"app": "g"}, cpu="3", spec=spec)
    s = env.scheduler()
    await s.start()
    bound = await _settled(env, s, ["g-0", "g-1"])
    assert sorted(bound.values()) == sorted([n["a1"], n["a2"]])


async def test_a_namespace_selector_scores_pods_of_the_namespaces_its_labels_select(
    env: Env,
) -> None:
    team = f"{env.prefix}ml"
    n = await _zoned(env, ("a1", "a", "8"), ("b1", "b", "8"), ("a2", "a", "8"), ("b2", "b", "8"))
    ml = await _namespace(env, "ml", {"team": team})
    other = await _namespace(env, "web", {"team": f"{env.prefix}web"})
    await env.cluster.create(_bound_pod(ml, "db-ml", {"app": "db"}, n["b1"]))
    await env.cluster.create(_bound_pod(other, "db-web", {"app": "db"}, n["a1"]))
    try:
        ns_sel = {"namespaceSelector": {"matchLabels": {"team": team}}}
        spec = _prefer("podAffinity", 100, {"app": "db"}, **ns_sel)
        await env.pod("p", labels={"app": "p"}, spec=spec)
        s = env.scheduler()
        await s.start()
        assert (await _settled(env, s, ["p"]))["p"] in (n["b1"], n["b2"])
    finally:
        for ns, pod in ((ml, "db-ml"), (other, "db-web")):
            await env.cluster.delete("Pod", pod, ns, grace_period_seconds=0)
            await env.cluster.delete("Namespace", ns)


async def test_a_namespace_label_change_re_evaluates_a_pending_pod(env: Env) -> None:
    team = f"{env.prefix}ml"
    a = await env.node("a", labels={HOST: env.node_name("a")})
    ml = await _namespace(env, "ml", {"team": team})
    await env.cluster.create(_bound_pod(ml, "z", {"app": "z"}, a))
    try:
        ns_sel = {"namespaceSelector": {"matchLabels": {"team": team}}}
        spec = _require("podAntiAffinity", {"app": "z"}, HOST, **ns_sel)
        await env.pod_group("g", 1)
        await env.pod("p", "g", labels={"app": "p"}, spec=spec)
        s = env.scheduler()
        await s.start()
        assert await _settled(env, s, ["p"]) == {}
        cond = await env.pod_condition("p")
        assert cond is not None  # the term, named
        assert f"repelled by anti-affinity app=z on {HOST} in namespaces team={team}" in str(
            cond["message"]
        )
        patch = {"metadata": {"labels": {"team": f"{env.prefix}other"}}}
        await env.cluster.patch("Namespace", ml, patch)

        async def bound() -> bool:
            return (await env.bound()).get("p") == a

        await env.until(s, bound)  # the Namespace event, not the periodic flush
    finally:
        await env.cluster.delete("Pod", "z", ml, grace_period_seconds=0)
        await env.cluster.delete("Namespace", ml)


# ---- the arithmetic, against upstream's unit cases (TestPreferredAffinity...) ------------------

_NAMESPACES = {
    "subteam1.team1": {"team": "team1"},
    "subteam2.team1": {"team": "team1"},
    "subteam1.team2": {"team": "team2"},
    "subteam2.team2": {"team": "team2"},
}
S1 = {"security": "S1"}
S2 = {"security": "S2"}
CHINA = {"region": "China"}
INDIA = {"region": "India"}
AZ1 = {"az": "az1"}
AZ2 = {"az": "az2"}


def _in(key: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": "In", "values": list(values)}


def _wterm(weight: int, exprs: list[dict[str, Any]], key: str, **extra: Any) -> dict[str, Any]:
    return {
        "weight": weight,
        "podAffinityTerm": {
            "labelSelector": {"matchExpressions": exprs},
            "topologyKey": key,
            **extra,
        },
    }


def _aff(**blocks: list[dict[str, Any]]) -> dict[str, Any]:
    """``podAffinity=[weighted...]``, ``podAntiAffinity=[...]``, ``required=[terms...]``."""
    out: dict[str, Any] = {}
    if "podAffinity" in blocks:
        out["podAffinity"] = {
            "preferredDuringSchedulingIgnoredDuringExecution": blocks["podAffinity"]
        }
    if "podAntiAffinity" in blocks:
        out["podAntiAffinity"] = {
            "preferredDuringSchedulingIgnoredDuringExecution": blocks["podAntiAffinity"]
        }
    if "required" in blocks:
        out.setdefault("podAffinity", {})["requiredDuringSchedulingIgnoredDuringExecution"] = (
            blocks["required"]
        )
    return out


STAY_S1_REGION = _aff(podAffinity=[_wterm(5, [_in("security", "S1")], "region")])
STAY_S2_REGION = _aff(podAffinity=[_wterm(6, [_in("security", "S2")], "region")])
AWAY_S1_AZ = _aff(podAntiAffinity=[_wterm(5, [_in("security", "S1")], "az")])
AWAY_S2_AZ = _aff(podAntiAffinity=[_wterm(5, [_in("security", "S2")], "az")])
STAY_S1_AWAY_S2 = _aff(
    podAffinity=[_wterm(8, [_in("security", "S1")], "region")],
    podAntiAffinity=[_wterm(5, [_in("security", "S2")], "az")],
)
AFFINITY3 = _aff(
    podAffinity=[
        _wterm(
            8,
            [{"key": "security", "operator": "NotIn", "values": ["S1"]}, _in("security", "S2")],
            "region",
        ),
        _wterm(
            2,
            [
                {"key": "security", "operator": "Exists"},
                {"key": "wrongkey", "operator": "DoesNotExist"},
            ],
            "region",
        ),
    ]
)
HARD = _aff(
    required=[
        {
            "labelSelector": {"matchExpressions": [_in("security", "S1", "value2")]},
            "topologyKey": "region",
        },
        {
            "labelSelector": {
                "matchExpressions": [
                    {"key": "security", "operator": "Exists"},
                    {"key": "wrongkey", "operator": "DoesNotExist"},
                ]
            },
            "topologyKey": "region",
        },
    ]
)
_TEAM1 = {"matchExpressions": [_in("team", "team1")]}
_NOT_TEAM1 = {"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["team1"]}]}
NS_SELECTOR_AFF = _aff(
    podAffinity=[
        _wterm(
            5,
            [_in("security", "S1")],
            "region",
            namespaces=["subteam2.team2"],
            namespaceSelector=_TEAM1,
        )
    ]
)
NS_SELECTOR_ANTI = _aff(
    podAntiAffinity=[
        _wterm(
            5,
            [_in("security", "S1")],
            "region",
            namespaces=["subteam2.team2"],
            namespaceSelector=_TEAM1,
        )
    ]
)
NEG_NS_AFF = _aff(
    podAffinity=[_wterm(5, [_in("security", "S1")], "region", namespaceSelector=_NOT_TEAM1)]
)
NEG_NS_ANTI = _aff(
    podAntiAffinity=[_wterm(5, [_in("security", "S1")], "region", namespaceSelector=_NOT_TEAM1)]
)
HARD_SYMMETRIC = _aff(
    required=[
        {
            "labelSelector": {"matchExpressions": [_in("service", "S1")]},
            "namespaces": ["", "subteam2.team2"],
            "namespaceSelector": _TEAM1,
            "topologyKey": "region",
        }
    ]
)

Pod = tuple[str, dict[str, str], dict[str, Any] | None, str]  # node, labels, affinity, ns


def _pod_dict(
    name: str, labels: dict[str, str], affinity: dict[str, Any] | None, ns: str, node: str
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x"}]}
    if node:
        spec["nodeName"] = node
    if affinity:
        spec["affinity"] = affinity
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels, "uid": name},
        "spec": spec,
    }


def _scores(
    incoming: tuple[dict[str, str], dict[str, Any] | None, str],
    pods: list[Pod],
    nodes: list[tuple[str, dict[str, str]]],
    *,
    hard: int = 1,
    ignore_existing: bool = False,
) -> list[int] | None:
    """The normalised scores of ``nodes`` in order (None: nothing to score, upstream's
    PreScore Skip)."""
    cache = Cache()
    for name, labels in nodes:
        cache.upsert_node(make_node(name).labels(labels).resources({"cpu": "8"}).obj())
    for i, (node, labels, affinity, ns) in enumerate(pods):
        cache.upsert_pod(_pod_dict(f"e{i}", labels, affinity, ns, node), 0.0)
    labels, affinity, ns = incoming
    info, _ = cache.upsert_pod(_pod_dict("incoming", labels, affinity, ns, ""), 0.0)
    new = cache.pods[(ns or "default", "incoming")] if info is None else info
    plugin = InterPodAffinity(
        hard_pod_affinity_weight=hard, ignore_preferred_terms_of_existing_pods=ignore_existing
    )
    plugin.namespaces.on_namespace(
        "SYNC", [{"metadata": {"name": k, "labels": v}} for k, v in _NAMESPACES.items()]
    )
    snap = Snapshot(cache)
    rows = np.array([cache.nodes.index[name] for name, _ in nodes], dtype=np.int64)
    if not plugin.scores_pod(new, snap) or plugin.raw_scores(new, snap, rows) is None:
        return None
    return [int(v) for v in plugin.score_pod(new, snap, rows)]


N3 = [("node1", CHINA), ("node2", INDIA), ("node3", AZ1)]


@pytest.mark.parametrize(
    ("incoming", "pods", "nodes", "want"),
    [
        pytest.param((S1, None, "default"), [], N3, None, id="no affinity: skip"),
        pytest.param(
            (S1, STAY_S1_REGION, "default"),
            [
                ("node1", S1, None, "default"),
                ("node2", S2, None, "default"),
                ("node3", S1, None, "default"),
            ],
            N3,
            [100, 0, 0],
            id="affinity: the matching pod's region",
        ),
        pytest.param(
            ({}, STAY_S1_REGION, "default"),
            [("node1", S1, None, "default")],
            [("node1", CHINA), ("node2", {**CHINA, **AZ1}), ("node3", INDIA)],
            [100, 100, 0],
            id="affinity: every node of the region scores the same",
        ),
        pytest.param(
            (S1, STAY_S2_REGION, "default"),
            [
                (node, S2, None, "default")
                for node in ("node1", "node1", "node2", "node3", "node4", "node5")
            ],
            [
                ("node1", CHINA),
                ("node2", INDIA),
                ("node3", CHINA),
                ("node4", CHINA),
                ("node5", INDIA),
            ],
            [100, 0, 100, 100, 0],
            id="affinity: the region with more matches",
        ),
        pytest.param(
            (S1, AFFINITY3, "default"),
            [
                ("node1", S1, None, "default"),
                ("node2", S2, None, "default"),
                ("node3", S1, None, "default"),
            ],
            N3,
            [20, 100, 0],
            id="affinity: operators, and terms that match only some pods",
        ),
        pytest.param(
            (S2, None, "default"),
            [("node1", S1, STAY_S1_REGION, "default"), ("node2", S2, STAY_S2_REGION, "default")],
            N3,
            [0, 100, 0],
            id="symmetry: existing pods' preferred affinity",
        ),
        pytest.param(
            (S1, None, "subteam1.team1"),
            [("node1", S1, NS_SELECTOR_AFF, "default"), ("node2", S2, STAY_S2_REGION, "default")],
            N3,
            [100, 0, 0],
            id="symmetry with a namespace selector",
        ),
        pytest.param(
            (S1, None, "subteam1.team1"),
            [("node1", S1, NS_SELECTOR_ANTI, "default"), ("node2", S2, STAY_S2_REGION, "default")],
            N3,
            [0, 100, 100],
            id="anti-affinity symmetry with a namespace selector",
        ),
        pytest.param(
            (S1, None, "default"),
            [("node1", S1, HARD, "default"), ("node2", S2, HARD, "default")],
            N3,
            [100, 100, 0],
            id="symmetry: existing pods' required affinity",
        ),
        pytest.param(
            (S1, AWAY_S1_AZ, "default"),
            [("node1", S1, None, "default"), ("node2", S2, None, "default")],
            [("node1", AZ1), ("node2", CHINA)],
            [0, 100],
            id="anti-affinity: away from the matching pod",
        ),
        pytest.param(
            (S1, AWAY_S1_AZ, "default"),
            [
                ("node1", S1, None, "default"),
                ("node1", S1, None, "default"),
                ("node2", S2, None, "default"),
            ],
            [("node1", AZ1), ("node2", INDIA)],
            [0, 100],
            id="anti-affinity: the node with more matches scores lower",
        ),
        pytest.param(
            (S2, None, "default"),
            [("node1", S1, AWAY_S2_AZ, "default"), ("node2", S2, AWAY_S1_AZ, "default")],
            [("node1", AZ1), ("node2", AZ2)],
            [0, 100],
            id="anti-affinity symmetry",
        ),
        pytest.param(
            (S1, STAY_S1_AWAY_S2, "default"),
            [("node1", S1, None, "default"), ("node2", S2, None, "default")],
            [("node1", CHINA), ("node2", AZ1)],
            [100, 0],
            id="affinity and anti-affinity",
        ),
        pytest.param(
            (S1, NS_SELECTOR_AFF, "subteam1.team1"),
            [
                ("node1", S1, None, "subteam1.team1"),
                ("node1", S1, None, "subteam1.team1"),
                ("node1", S1, None, "subteam2.team2"),
                ("node2", S1, None, "subteam2.team1"),
            ],
            [("node1", CHINA), ("node2", INDIA)],
            [100, 0],
            id="namespaceSelector and namespaces together",
        ),
        pytest.param(
            (S1, NS_SELECTOR_ANTI, "subteam1.team1"),
            [
                ("node1", S1, None, "subteam1.team1"),
                ("node1", S1, None, "subteam1.team1"),
                ("node1", S1, None, "subteam1.team2"),
                ("node2", S1, None, "subteam2.team1"),
            ],
            [("node1", CHINA), ("node2", INDIA)],
            [0, 100],
            id="anti-affinity: namespaceSelector",
        ),
        pytest.param(
            (S1, NEG_NS_AFF, "subteam1.team1"),
            [
                ("node1", S1, None, "subteam1.team1"),
                ("node1", S1, None, "subteam1.team1"),
                ("node2", S1, None, "subteam1.team2"),
            ],
            [("node1", CHINA), ("node2", INDIA)],
            [0, 100],
            id="affinity: a negative namespaceSelector",
        ),
        pytest.param(
            (S1, NEG_NS_ANTI, "subteam1.team1"),
            [
                ("node1", S1, None, "subteam1.team1"),
                ("node1", S1, None, "subteam1.team1"),
                ("node2", S1, None, "subteam1.team2"),
            ],
            [("node1", CHINA), ("node2", INDIA)],
            [100, 0],
            id="anti-affinity: a negative namespaceSelector",
        ),
        pytest.param(
            (S2, None, "default"),
            [
                ("node1", S1, STAY_S1_AWAY_S2, "default"),
                ("node2", S2, STAY_S2_REGION, "default"),
            ],
            [("node1", CHINA), ("node2", INDIA)],
            [0, 100],
            id="existing pods' preferred terms count by default",
        ),
    ],
)
def test_preferred_affinity_scores_as_upstream(
    incoming: tuple[dict[str, str], dict[str, Any] | None, str],
    pods: list[Pod],
    nodes: list[tuple[str, dict[str, str]]],
    want: list[int] | None,
) -> None:
    assert _scores(incoming, pods, nodes) == want


def test_ignore_preferred_terms_of_existing_pods_skips_a_pod_without_preferences() -> None:
    pods: list[Pod] = [
        ("node1", S1, STAY_S1_AWAY_S2, "default"),
        ("node2", S2, STAY_S2_REGION, "default"),
    ]
    nodes = [("node1", CHINA), ("node2", INDIA)]
    assert _scores((S2, None, "default"), pods, nodes, ignore_existing=True) is None
    assert _scores((S2, None, "default"), pods, nodes, ignore_existing=False) == [0, 100]


@pytest.mark.parametrize(
    ("namespace", "hard", "want"),
    [
        ("default", 1, [100, 100, 0]),
        ("default", 0, None),
        ("subteam1.team2", 1, None),  # neither in namespaces nor selected by labels
        ("subteam1.team1", 1, [100, 100, 0]),  # selected by the namespace's labels
        ("subteam2.team2", 1, [100, 100, 0]),  # listed in namespaces
    ],
)
def test_hard_pod_affinity_weight_as_upstream(
    namespace: str, hard: int, want: list[int] | None
) -> None:
    # the holders live in "default"; upstream's case has them in "", listed in namespaces
    term = dict(HARD_SYMMETRIC["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0])
    term["namespaces"] = ["default", "subteam2.team2"]
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    pods: list[Pod] = [
        ("node1", {}, affinity, "default"),
        ("node2", {}, affinity, "default"),
    ]
    assert _scores(({"service": "S1"}, None, namespace), pods, N3, hard=hard) == want


def test_a_pod_without_preferences_is_not_scored_while_no_pod_holds_score_terms() -> None:
    cache = Cache()
    cache.upsert_node(make_node("n").labels(CHINA).resources({"cpu": "8"}).obj())
    cache.upsert_pod(_pod_dict("e", S1, None, "default", "n"), 0.0)
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": S2}, "topologyKey": "region"}
            ]
        }
    }
    cache.upsert_pod(_pod_dict("r", S1, anti, "default", "n"), 0.0)  # required anti: no score
    cache.upsert_pod(_pod_dict("incoming", S2, None, "default", ""), 0.0)
    plugin = InterPodAffinity()
    snap = Snapshot(cache)
    assert not cache.index.score_terms
    assert not plugin.scores_pod(cache.pods[("default", "incoming")], snap)
    cache.upsert_pod(_pod_dict("h", S1, STAY_S2_REGION, "default", "n"), 0.0)
    assert plugin.scores_pod(cache.pods[("default", "incoming")], Snapshot(cache))
    cache.remove_pod(("default", "h"))
    assert not cache.index.score_terms


def test_a_namespace_selector_is_refused_while_namespaces_are_not_watched() -> None:
    cache = Cache()
    cache.upsert_node(make_node("n").labels(CHINA).resources({"cpu": "8"}).obj())
    cache.upsert_pod(_pod_dict("p", S1, NEG_NS_AFF, "default", ""), 0.0)
    pod = cache.pods[("default", "p")]
    plugin = InterPodAffinity()
    assert plugin.applies(pod)
    status = plugin.pre_filter_pod(pod, Snapshot(cache))
    assert not status.ok and "does not watch Namespaces" in status.message
    plugin.namespaces.on_namespace("SYNC", [])
    assert plugin.pre_filter_pod(pod, Snapshot(cache)).ok


def test_inter_pod_affinity_args_are_parsed_and_checked(tmp_path: Any) -> None:
    from workloadbuilder.scheduler import ConfigError, load_config

    def load(args: dict[str, Any]) -> InterPodAffinity:
        import yaml

        doc = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [{"pluginConfig": [{"name": "InterPodAffinity", "args": args}]}],
        }
        path = tmp_path / "c.yaml"
        path.write_text(yaml.safe_dump(doc))
        fw = load_config(path).framework
        (ipa,) = [s for s in fw.scores if isinstance(s, InterPodAffinity)]
        assert any(r is ipa for r in fw.reserve)  # one instance: filter and score
        return ipa

    ipa = load({})
    assert (ipa.hard_pod_affinity_weight, ipa.weight) == (1, 2)
    assert not ipa.ignore_preferred_terms_of_existing_pods
    ipa = load({"hardPodAffinityWeight": 0, "ignorePreferredTermsOfExistingPods": True})
    assert ipa.hard_pod_affinity_weight == 0 and ipa.ignore_preferred_terms_of_existing_pods
    with pytest.raises(ConfigError, match=r"hardPodAffinityWeight: must be in the range 0-100"):
        load({"hardPodAffinityWeight": 101})
    with pytest.raises(ConfigError, match=r"ignorePreferredTermsOfExistingPods: expected true"):
        load({"ignorePreferredTermsOfExistingPods": "yes"})
    with pytest.raises(ConfigError, match=r"args\.hardPodAffinitWeight: unknown field"):
        load({"hardPodAffinitWeight": 1})


def test_a_term_an_existing_pod_repeats_counts_as_many_times() -> None:
    twice = _aff(podAffinity=[_wterm(6, [_in("security", "S2")], "region")] * 2)
    once = _aff(podAffinity=[_wterm(10, [_in("security", "S2")], "region")])
    pods: list[Pod] = [("node1", S1, twice, "default"), ("node2", S1, once, "default")]
    nodes = [("node1", CHINA), ("node2", INDIA)]
    assert _scores((S2, None, "default"), pods, nodes) == [100, 0]  # 12 against 10


def test_a_namespace_the_scheduler_does_not_know_is_selected_as_upstream() -> None:
    nodes = [("node1", CHINA), ("node2", INDIA)]
    # the incoming pod's selector names the namespaces listed: "ghost" is not one of them
    pods: list[Pod] = [("node1", S1, None, "ghost"), ("node2", S1, None, "subteam1.team2")]
    assert _scores((S1, NEG_NS_AFF, "subteam1.team1"), pods, nodes) == [0, 100]
    # an existing pod's selector reads the incoming pod's namespace labels: none for "ghost"
    pods = [("node1", S1, NEG_NS_AFF, "default"), ("node2", S2, None, "default")]
    assert _scores((S1, None, "ghost"), pods, nodes) == [100, 0]
    assert _scores((S1, None, "subteam1.team1"), pods, nodes) is None
