"""PodTopologySpread's Score (``whenUnsatisfiable: ScheduleAnyway``) and its default
constraints, gang-aware. The arithmetic against kube-scheduler v1.37.2's unit cases
(``podtopologyspread/scoring_test.go``), then behaviour on MemoryCluster and on the real
v1.37.2 API server.

The rules, in our words:

1. the nodes that passed every filter are scored; a node lacking a constraint's key scores 0
   (unless the constraints are the system defaults: a node without a zone is still spread
   over by hostname); the others get ``100 * (max + min - raw) // max`` of their raw score,
   ``count * log(domains + 2) + maxSkew - 1`` summed over the constraints (100 everywhere
   when every raw score is 0);
2. counted: matching pods of the pod's namespace, not terminating, per domain over the nodes
   that carry the keys and pass ``nodeAffinityPolicy`` / ``nodeTaintsPolicy``; an unset
   selector counts none; ``matchLabelKeys`` narrows the selector by the pod's own values;
3. inside a gang cycle the pods placed before count: a gang with a soft zone constraint
   spreads as a whole;
4. a pod without constraints of its own gets the default ones (System: hostname maxSkew 3,
   zone maxSkew 5, ScheduleAnyway; or the profile's List), selecting the pods its Services
   and its ReplicationController / ReplicaSet / StatefulSet select; none when nothing selects
   it; ``DoNotSchedule`` defaults filter.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest
from sched_helpers import Env

from workloadbuilder.scheduler import Scheduler
from workloadbuilder.scheduler._cache import Cache
from workloadbuilder.scheduler._podspec import Selector, SpreadConstraint
from workloadbuilder.scheduler._podtopologyspread import PodTopologySpread
from workloadbuilder.scheduler._profile import ConfigError, parse_config
from workloadbuilder.scheduler._snapshot import Snapshot
from workloadbuilder.scheduler.explain import explain_report, render_explain
from workloadbuilder.testing.builders import make_node, make_pod

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
FOO = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
BAR = {"matchExpressions": [{"key": "bar", "operator": "Exists"}]}
_uid = itertools.count()


# ---- the arithmetic, on the cache (upstream's TestPodTopologySpreadScore cases) -------------


def _soft(skew: int, key: str, selector: Any = FOO, **extra: Any) -> dict[str, Any]:
    c = {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": "ScheduleAnyway", **extra}
    if selector is not None:
        c["labelSelector"] = selector
    return c


def _pod_obj(
    name: str,
    node: str | None = None,
    labels: Mapping[str, str] | None = None,
    *,
    namespace: str = "default",
    spread: Sequence[Mapping[str, Any]] = (),
    spec: Mapping[str, Any] | None = None,
    terminating: bool = False,
    owner: tuple[str, str, str] | None = None,
) -> dict[str, Any]:
    b = make_pod(name, namespace).request("cpu", "100m").uid(f"uid-{next(_uid)}")
    if node:
        b.node_name(node)
    if owner:
        b.owner_reference(*owner, uid=f"owner-{owner[2]}")
    obj = b.obj()
    obj["metadata"]["labels"] = dict(labels or {})
    if spread:
        obj["spec"]["topologySpreadConstraints"] = list(spread)
    obj["spec"].update(spec or {})
    if terminating:
        obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return obj


def _host(name: str, **labels: str) -> tuple[str, dict[str, str]]:
    return name, {HOST: name, **labels}


def _scores(
    nodes: Sequence[tuple[str, Mapping[str, str]]],
    existing: Sequence[dict[str, Any]],
    pod: dict[str, Any],
    *,
    failed: Sequence[tuple[str, Mapping[str, str]]] = (),
    taints: Mapping[str, list[dict[str, str]]] | None = None,
    plugin: PodTopologySpread | None = None,
) -> dict[str, int] | None:
    """The normalised scores of the candidate ``nodes`` (``failed`` nodes exist but did not
    pass the filters); None when the plugin has nothing to score for the pod."""
    cache = Cache("default-scheduler")
    for name, labels in [*nodes, *failed]:
        n = make_node(name).labels(dict(labels)).resources({"cpu": "64", "memory": "64Gi"})
        n.taints(*(taints or {}).get(name, ()))
        cache.upsert_node(n.obj())
    for p in existing:
        cache.upsert_pod(p, 0.0)
    _, info = cache.upsert_pod(pod, 0.0)
    assert info is not None
    snap = Snapshot(cache)
    pl = plugin or PodTopologySpread()
    if not pl.scores_pod(info, snap):
        return None
    rows = np.array([cache.nodes.index[name] for name, _ in nodes], dtype=np.intp)
    got = pl.score_pod(info, snap, rows)
    return {name: int(s) for (name, _), s in zip(nodes, got, strict=True)}


def _on(node: str, n: int, labels: Mapping[str, str] | None = None, **kw: Any) -> list[Any]:
    return [_pod_obj(f"{node}-{next(_uid)}", node, labels or {"foo": ""}, **kw) for _ in range(n)]


ABCD = [_host("node-a"), _host("node-b"), _host("node-c"), _host("node-d")]
ME = {"foo": ""}


def test_no_pods_yet_scores_every_node_100() -> None:
    pod = _pod_obj("p", labels=ME, spread=[_soft(1, HOST)])
    assert _scores(ABCD[:2], [], pod) == {"node-a": 100, "node-b": 100}


def test_a_single_candidate_scores_100() -> None:
    pod = _pod_obj("p", labels=ME, spread=[_soft(1, HOST)])
    pods = [*_on("node-a", 2), *_on("node-b", 1)]
    assert _scores(ABCD[:1], pods, pod, failed=ABCD[1:2]) == {"node-a": 100}


def test_equal_counts_score_alike() -> None:
    pod = _pod_obj("p", labels=ME, spread=[_soft(1, HOST)])
    pods = [*_on("node-a", 1), *_on("node-b", 1)]
    assert _scores(ABCD[:2], pods, pod) == {"node-a": 100, "node-b": 100}


def test_hostname_counts_2_1_0_3() -> None:
    pod = _pod_obj("p", labels=ME, spread=[_soft(1, HOST)])
    pods = [*_on("node-a", 2), *_on("node-b", 1), *_on("node-d", 3)]
    want = {"node-a": 20, "node-b": 60, "node-c": 100, "node-d": 0}
    assert _scores(ABCD, pods, pod) == want


def test_an_unset_selector_counts_no_pod() -> None:
    pod = _pod_obj("p", labels=ME, spread=[_soft(1, HOST, selector=None)])
    pods = [*_on("node-a", 2), *_on("node-b", 1), *_on("node-d", 3)]
    assert _scores(ABCD, pods, pod) == dict.fromkeys(["node-a", "node-b", "node-c", "node-d"], 100)


def test_max_skew_waters_the_differences_down() -> None:
    pods = [*_on("node-a", 2), *_on("node-b", 1), *_on("node-d", 3)]
    pod = _pod_obj("p", labels=ME, spread=[_soft(2, HOST)])
    assert _scores(ABCD, pods, pod) == {"node-a": 33, "node-b": 66, "node-c": 100, "node-d": 16}
    pods = [*_on("node-a", 4), *_on("node-b", 3), *_on("node-c", 2), *_on("node-d", 1)]
    pod = _pod_obj("p", labels=ME, spread=[_soft(3, HOST)])
    assert _scores(ABCD, pods, pod) == {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100}


def test_system_defaults_spread_the_pods_a_service_selects_over_hosts_without_zones() -> None:
    pods = [*_on("node-a", 4), *_on("node-b", 3), *_on("node-c", 2), *_on("node-d", 1)]
    pl = PodTopologySpread()
    service = {"metadata": {"name": "s", "namespace": "default"}, "spec": {"selector": ME}}
    pl.controllers.handler("Service")("ADDED", service)
    pod = _pod_obj("p", labels=ME)
    # the same scores as the one hostname constraint with maxSkew 3
    want = {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100}
    assert _scores(ABCD, pods, pod, plugin=pl) == want


def test_only_the_candidates_form_domains() -> None:
    pod = _pod_obj("p", labels=ME, spread=[_soft(1, HOST)])
    pods = [*_on("node-a", 4), *_on("node-b", 2), *_on("node-x", 1), *_on("node-y", 3)]
    nodes = [_host("node-a"), _host("node-b"), _host("node-x")]
    got = _scores(nodes, pods, pod, failed=[_host("node-y")])
    assert got == {"node-a": 33, "node-b": 83, "node-x": 100}


def test_a_candidate_without_the_key_scores_0() -> None:
    pod = _pod_obj("p", labels=ME, spread=[_soft(1, HOST)])
    pods = [*_on("node-a", 4), *_on("node-b", 2), *_on("node-x", 1), *_on("node-y", 3)]
    nodes = [_host("node-a"), ("node-b", {"n": "node-b"}), _host("node-x")]
    got = _scores(nodes, pods, pod, failed=[_host("node-y")])
    assert got == {"node-a": 16, "node-b": 0, "node-x": 100}


def test_zone_counts_include_the_nodes_that_did_not_pass() -> None:
    pod = _pod_obj("p", labels=ME, spread=[_soft(1, "zone")])
    pods = [*_on("node-a", 4), *_on("node-b", 2), *_on("node-x", 1), *_on("node-y", 3)]
    nodes = [_host("node-a", zone="z1"), _host("node-b", zone="z1"), _host("node-x", zone="z2")]
    got = _scores(nodes, pods, pod, failed=[_host("node-y", zone="z2")])
    assert got == {"node-a": 75, "node-b": 75, "node-x": 100}


def test_zone_and_hostname_together() -> None:
    pod = _pod_obj("p", labels=ME, spread=[_soft(1, "zone"), _soft(1, HOST)])
    pods = [*_on("node-a", 2), *_on("node-b", 1), *_on("node-x", 2), *_on("node-y", 4)]
    nodes = [_host("node-a", zone="z1"), _host("node-x", zone="z2")]
    failed = [_host("node-b", zone="z1"), _host("node-y", zone="z2")]
    assert _scores(nodes, pods, pod, failed=failed) == {"node-a": 100, "node-x": 63}


def test_two_zone_constraints_with_their_own_selectors() -> None:
    pod = _pod_obj(
        "p", labels={"foo": "", "bar": ""}, spread=[_soft(1, "zone"), _soft(1, "zone", BAR)]
    )
    fb = {"foo": "", "bar": ""}
    pods = [
        *_on("node-a", 1, fb),
        *_on("node-a", 1),
        *_on("node-b", 1, fb),
        *_on("node-y", 1),
        *_on("node-y", 1, fb),
        *_on("node-y", 1),
    ]
    nodes = [("node-a", {"zone": "z1"}), ("node-x", {"zone": "z2"})]
    failed = [("node-b", {"zone": "z1"}), ("node-y", {"zone": "z2"})]
    assert _scores(nodes, pods, pod, failed=failed) == {"node-a": 85, "node-x": 100}


def _zoned(*names_zones: tuple[str, str]) -> list[tuple[str, dict[str, str]]]:
    return [_host(n, zone=z) for n, z in names_zones]


FOUR = _zoned(("node-a", "z1"), ("node-b", "z1"), ("node-x", "z2"), ("node-y", "z2"))


def test_zone_and_hostname_with_different_selectors() -> None:
    pod = _pod_obj(
        "p", labels={"foo": "", "bar": ""}, spread=[_soft(1, "zone"), _soft(1, HOST, BAR)]
    )
    pods = [
        *_on("node-a", 1),
        *_on("node-b", 1, {"foo": "", "bar": ""}),
        *_on("node-y", 1),
        *_on("node-y", 1, {"bar": ""}),
    ]
    want = {"node-a": 60, "node-b": 20, "node-x": 100, "node-y": 60}
    assert _scores(FOUR, pods, pod) == want
    assert _scores(FOUR[:3], pods, pod, failed=FOUR[3:]) == {
        "node-a": 50,
        "node-b": 25,
        "node-x": 100,
    }
    pods = [
        *_on("node-b", 1, {"bar": ""}),
        *_on("node-x", 1),
        *_on("node-y", 1, {"foo": "", "bar": ""}),
    ]
    want = {"node-a": 100, "node-b": 60, "node-x": 40, "node-y": 0}
    assert _scores(FOUR, pods, pod) == want


def test_other_namespaces_and_terminating_pods_do_not_count() -> None:
    pod = _pod_obj("p", labels=ME, spread=[_soft(1, HOST)])
    pods = [*_on("node-a", 1, namespace="ns1"), *_on("node-a", 1), *_on("node-b", 2)]
    assert _scores(ABCD[:2], pods, pod) == {"node-a": 100, "node-b": 33}
    pods = [*_on("node-a", 1, terminating=True), *_on("node-b", 1)]
    assert _scores(ABCD[:2], pods, pod) == {"node-a": 100, "node-b": 0}


def test_min_domains_has_no_effect_on_the_score() -> None:
    pod = _pod_obj("p", labels=ME, spread=[_soft(2, "node", minDomains=10)])
    nodes = [
        ("node-a", {"node": "node-a"}),
        ("node-b", {"node": "node-b"}),
        ("node-c", {"node": "node-c"}),
    ]
    pods = [*_on("node-a", 2), *_on("node-b", 2), *_on("node-c", 1)]
    assert _scores(nodes, pods, pod) == {"node-a": 75, "node-b": 75, "node-c": 100}


_ABC_NODE = [
    ("node-a", {"node": "node-a", "foo": ""}),
    ("node-b", {"node": "node-b", "foo": ""}),
    ("node-c", {"node": "node-c"}),
]
_AFFINITY = {
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "foo", "operator": "In", "values": [""]}]}
                ]
            }
        }
    }
}


@pytest.mark.parametrize(
    "spec", [{"nodeSelector": {"foo": ""}}, _AFFINITY], ids=["nodeSelector", "nodeAffinity"]
)
def test_node_affinity_policy(spec: dict[str, Any]) -> None:
    """Honor (the default): the nodes the pod's node selector / affinity rejects are not
    counted (node-c, where the test puts a candidate anyway, counts 0); Ignore: they are."""
    pods = [*_on("node-a", 2), *_on("node-b", 1), *_on("node-c", 1)]
    honor = _pod_obj("p", labels=ME, spread=[_soft(1, "node")], spec=spec)
    assert _scores(_ABC_NODE, pods, honor) == {"node-a": 0, "node-b": 33, "node-c": 100}
    ignore = _pod_obj(
        "p", labels=ME, spread=[_soft(1, "node", nodeAffinityPolicy="Ignore")], spec=spec
    )
    assert _scores(_ABC_NODE, pods, ignore) == {"node-a": 66, "node-b": 100, "node-c": 100}


def test_node_taints_policy() -> None:
    """Honor: a node whose taints the pod does not tolerate is not counted; Ignore (the
    default): it is."""
    nodes = [(n, {"node": n}) for n in ("node-a", "node-b", "node-c")]
    taints = {"node-c": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}
    pods = [*_on("node-a", 2), *_on("node-b", 1), *_on("node-c", 1)]
    honor = _pod_obj("p", labels=ME, spread=[_soft(1, "node", nodeTaintsPolicy="Honor")])
    assert _scores(nodes, pods, honor, taints=taints) == {
        "node-a": 0,
        "node-b": 33,
        "node-c": 100,
    }
    ignore = _pod_obj("p", labels=ME, spread=[_soft(1, "node")])
    assert _scores(nodes, pods, ignore, taints=taints) == {
        "node-a": 66,
        "node-b": 100,
        "node-c": 100,
    }


def test_match_label_keys_narrow_the_selector() -> None:
    nodes = _zoned(("node-a", "z1"), ("node-b", "z1"), ("node-c", "z2"), ("node-d", "z2"))
    want = {"node-a": 60, "node-b": 20, "node-c": 60, "node-d": 100}
    # an empty selector with matchLabelKeys: the pod's own values select
    pod = _pod_obj(
        "p",
        labels={"foo": "", "bar": ""},
        spread=[
            _soft(1, "zone", selector={}, matchLabelKeys=["foo"]),
            _soft(1, HOST, selector={}, matchLabelKeys=["bar"]),
        ],
    )
    pods = [
        *_on("node-a", 1),
        *_on("node-b", 1, {"foo": "", "bar": ""}),
        *_on("node-c", 1),
        *_on("node-c", 1, {"bar": ""}),
    ]
    assert _scores(nodes, pods, pod) == want
    # ANDed with a selector
    pod = _pod_obj(
        "p",
        labels={"foo": "", "bar": "", "baz": ""},
        spread=[_soft(1, "zone"), _soft(1, HOST, BAR, matchLabelKeys=["baz"])],
    )
    pods = [
        *_on("node-a", 1),
        *_on("node-b", 1, {"foo": "", "bar": "", "baz": ""}),
        *_on("node-c", 1),
        *_on("node-c", 1, {"bar": ""}),
        *_on("node-c", 1, {"bar": "", "baz": ""}),
    ]
    assert _scores(nodes, pods, pod) == want


def test_an_empty_selector_counts_no_pod() -> None:
    """``labelSelector: {}`` selects every pod, yet upstream counts none (its count skips an
    empty selector): every node scores alike."""
    pod = _pod_obj("p", labels=ME, spread=[_soft(1, HOST, selector={})])
    pods = [*_on("node-a", 2), *_on("node-b", 1)]
    assert _scores(ABCD[:3], pods, pod) == dict.fromkeys(["node-a", "node-b", "node-c"], 100)


def test_an_empty_selector_holds_no_hard_constraint_either() -> None:
    """The Filter counts the same way: with ``labelSelector: {}`` no domain is ahead, so a
    node already running 3 pods still passes ``maxSkew: 1``."""
    cache = Cache("default-scheduler")
    for name, labels in ABCD[:2]:
        cache.upsert_node(make_node(name).labels(labels).resources({"cpu": "64"}).obj())
    for p in _on("node-a", 3):
        cache.upsert_pod(p, 0.0)
    hard = {**_soft(1, HOST, selector={}), "whenUnsatisfiable": "DoNotSchedule"}
    _, info = cache.upsert_pod(_pod_obj("p", labels=ME, spread=[hard]), 0.0)
    assert info is not None
    pl = PodTopologySpread()
    assert pl.applies(info)
    mask = pl.feasible_rows(info, Snapshot(cache))
    assert mask is not None
    assert [bool(mask[cache.nodes.index[n]]) for n, _ in ABCD[:2]] == [True, True]
    # a selector that matches them: node-a is 3 ahead
    hard = {**_soft(1, HOST), "whenUnsatisfiable": "DoNotSchedule"}
    _, info = cache.upsert_pod(_pod_obj("q", labels=ME, spread=[hard]), 0.0)
    assert info is not None
    mask = pl.feasible_rows(info, Snapshot(cache))
    assert mask is not None
    assert [bool(mask[cache.nodes.index[n]]) for n, _ in ABCD[:2]] == [False, True]


# ---- which constraints a pod has ---------------------------------------------------------


def test_only_hard_constraints_leave_nothing_to_score() -> None:
    hard = {**_soft(1, HOST), "whenUnsatisfiable": "DoNotSchedule"}
    assert _scores(ABCD[:2], [], _pod_obj("p", labels=ME, spread=[hard])) is None


def _rs(name: str, selector: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {"selector": selector}}


RS1 = ("apps/v1", "ReplicaSet", "rs1")


def _defaults(plugin: PodTopologySpread, pod: dict[str, Any]) -> tuple[SpreadConstraint, ...]:
    cache = Cache("default-scheduler")
    _, info = cache.upsert_pod(pod, 0.0)
    assert info is not None
    return plugin.constraints_of(info, hard=False)


def test_system_defaults_take_the_replica_sets_selector() -> None:
    pl = PodTopologySpread()
    pl.controllers.handler("ReplicaSet")("SYNC", [_rs("rs1", FOO)])
    got = _defaults(pl, _pod_obj("p", labels={"foo": "tar", "baz": "sup"}, owner=RS1))
    assert [(c.topology_key, c.max_skew, c.hard) for c in got] == [
        (HOST, 3, False),
        (ZONE, 5, False),
    ]
    assert all(c.selector == Selector.parse(FOO) for c in got)


def test_list_defaults_keep_the_soft_ones_for_the_score() -> None:
    defaults = [
        SpreadConstraint(1, HOST, Selector(), hard=False),
        SpreadConstraint(2, "rack", Selector(), hard=True),
        SpreadConstraint(2, "planet", Selector(), hard=False),
    ]
    pl = PodTopologySpread(defaulting_type="List", default_constraints=defaults)
    assert not pl.pod_scoped  # a hard default: asked for pods without constraints too
    pl.controllers.handler("ReplicaSet")("ADDED", _rs("rs1", FOO))
    pod = _pod_obj("p", labels={"foo": "tar"}, owner=RS1)
    got = _defaults(pl, pod)
    assert [(c.topology_key, c.max_skew) for c in got] == [(HOST, 1), ("planet", 2)]
    cache = Cache("default-scheduler")
    _, info = cache.upsert_pod(pod, 0.0)
    assert info is not None and pl.applies(info)
    assert [c.topology_key for c in pl.constraints_of(info, hard=True)] == ["rack"]


def test_no_default_without_a_selector() -> None:
    pl = PodTopologySpread()
    # a ReplicaSet that does not control the pod (the pod names rs2)
    pl.controllers.handler("ReplicaSet")("ADDED", _rs("rs1", {"matchLabels": {"tar": "x"}}))
    rs2 = ("apps/v1", "ReplicaSet", "rs2")
    assert _defaults(pl, _pod_obj("p", labels={"foo": "bar"}, owner=rs2)) == ()
    # no controller, no Service
    assert _defaults(pl, _pod_obj("q", labels={"foo": "bar"})) == ()
    # a Service without a selector selects nothing
    pl.controllers.handler("Service")("ADDED", {"metadata": {"name": "s"}, "spec": {}})
    assert _defaults(pl, _pod_obj("q", labels={"foo": "bar"})) == ()
    # the pod's own constraints win (even hard ones only: then nothing is scored)
    pl.controllers.handler("Service")(
        "ADDED", {"metadata": {"name": "t"}, "spec": {"selector": {"foo": "bar"}}}
    )
    own = {**_soft(1, "zone"), "whenUnsatisfiable": "DoNotSchedule"}
    assert _defaults(pl, _pod_obj("r", labels={"foo": "bar"}, spread=[own])) == ()
    assert len(_defaults(pl, _pod_obj("r", labels={"foo": "bar"}))) == 2
    # List without constraints: none
    assert (
        _defaults(PodTopologySpread(defaulting_type="List"), _pod_obj("x", labels={"foo": "bar"}))
        == ()
    )


def test_services_and_controllers_merge_into_one_selector() -> None:
    pl = PodTopologySpread()
    on = pl.controllers.handler
    on("Service")("ADDED", {"metadata": {"name": "s1"}, "spec": {"selector": {"app": "web"}}})
    on("Service")("ADDED", {"metadata": {"name": "s2"}, "spec": {"selector": {"tier": "fe"}}})
    on("Service")("ADDED", {"metadata": {"name": "other"}, "spec": {"selector": {"app": "db"}}})
    on("ReplicationController")(
        "ADDED", {"metadata": {"name": "rc"}, "spec": {"selector": {"rc": "1"}}}
    )
    on("StatefulSet")(
        "ADDED",
        {
            "metadata": {"name": "ss"},
            "spec": {"selector": {"matchExpressions": [{"key": "ord", "operator": "Exists"}]}},
        },
    )
    labels = {"app": "web", "tier": "fe", "rc": "1", "ord": "0"}
    (c, _) = _defaults(pl, _pod_obj("a", labels=labels))
    assert str(c.selector) == "app=web,tier=fe"
    (c, _) = _defaults(
        pl, _pod_obj("b", labels=labels, owner=("v1", "ReplicationController", "rc"))
    )
    assert str(c.selector) == "app=web,rc=1,tier=fe"
    (c, _) = _defaults(pl, _pod_obj("c", labels=labels, owner=("apps/v1", "StatefulSet", "ss")))
    assert str(c.selector) == "app=web,ord,tier=fe"
    on("Service")("DELETED", {"metadata": {"name": "s1"}})
    (c, _) = _defaults(pl, _pod_obj("d", labels=labels))
    assert str(c.selector) == "tier=fe"


# ---- the args ----------------------------------------------------------------------------


def _profile(args: dict[str, Any]) -> Any:
    return parse_config(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [{"pluginConfig": [{"name": "PodTopologySpread", "args": args}]}],
        }
    )


def test_list_defaults_from_the_args() -> None:
    fw = _profile(
        {
            "defaultingType": "List",
            "defaultConstraints": [
                {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"},
                {
                    "maxSkew": 2,
                    "topologyKey": HOST,
                    "whenUnsatisfiable": "ScheduleAnyway",
                    "nodeTaintsPolicy": "Honor",
                },
            ],
        }
    ).framework
    pl = next(p for p in fw.reserve if isinstance(p, PodTopologySpread))
    assert pl in fw.scores and not pl.system_defaulted and pl.needs_controllers
    assert not pl.pod_scoped
    cache = Cache("default-scheduler")
    pl.controllers.handler("Service")(
        "ADDED", {"metadata": {"name": "s"}, "spec": {"selector": ME}}
    )
    _, info = cache.upsert_pod(_pod_obj("p", labels=ME), 0.0)
    assert info is not None
    (hard,) = pl.constraints_of(info, hard=True)
    assert (hard.topology_key, hard.max_skew, hard.honor_node_taints) == (ZONE, 1, False)
    (soft,) = pl.constraints_of(info, hard=False)
    assert (soft.topology_key, soft.max_skew, soft.honor_node_taints) == (HOST, 2, True)
    # List with no constraints: no default at all, nothing to watch
    pl = next(
        p
        for p in _profile({"defaultingType": "List"}).framework.reserve
        if isinstance(p, PodTopologySpread)
    )
    assert not pl.needs_controllers and pl.pod_scoped


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            {"defaultingType": "Other"},
            'args.defaultingType: Unsupported value: "Other": supported values: "System", "List"',
        ),
        (
            {
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": "ScheduleAnyway"}
                ]
            },
            'args.defaultingType: Invalid value: "System": when .defaultConstraints are not empty',
        ),
        (
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 0, "topologyKey": HOST, "whenUnsatisfiable": "ScheduleAnyway"}
                ],
            },
            "args.defaultConstraints[0].maxSkew: Invalid value: 0: not in valid range (0, inf)",
        ),
        (
            {
                "defaultingType": "List",
                "defaultConstraints": [{"maxSkew": 1, "whenUnsatisfiable": "ScheduleAnyway"}],
            },
            "args.defaultConstraints[0].topologyKey: Required value: can not be empty",
        ),
        (
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": "-bad-", "whenUnsatisfiable": "ScheduleAnyway"}
                ],
            },
            'args.defaultConstraints[0].topologyKey: Invalid value: "-bad-": name part must',
        ),
        (
            {"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "topologyKey": HOST}]},
            "args.defaultConstraints[0].whenUnsatisfiable: Required value: can not be empty",
        ),
        (
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": "Maybe"}
                ],
            },
            'args.defaultConstraints[0].whenUnsatisfiable: Unsupported value: "Maybe": '
            'supported values: "DoNotSchedule", "ScheduleAnyway"',
        ),
        (
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {
                        "maxSkew": 1,
                        "topologyKey": HOST,
                        "whenUnsatisfiable": "ScheduleAnyway",
                        "labelSelector": {},
                    }
                ],
            },
            "args.defaultConstraints[0].labelSelector: Forbidden: constraint must not define a "
            "selector, as they deduced for each pod",
        ),
        (
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": "ScheduleAnyway"},
                    {"maxSkew": 2, "topologyKey": HOST, "whenUnsatisfiable": "ScheduleAnyway"},
                ],
            },
            "args.defaultConstraints[1]: Duplicate value: "
            '"{kubernetes.io/hostname, ScheduleAnyway}"',
        ),
        (
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {
                        "maxSkew": 1,
                        "topologyKey": HOST,
                        "whenUnsatisfiable": "ScheduleAnyway",
                        "matchLabelKeys": ["app"],
                    }
                ],
            },
            "args.defaultConstraints[0].matchLabelKeys: Forbidden: has no effect",
        ),
        (
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {
                        "maxSkew": 1,
                        "topologyKey": HOST,
                        "whenUnsatisfiable": "ScheduleAnyway",
                        "skew": 1,
                    }
                ],
            },
            "args.defaultConstraints[0].skew: unknown field",
        ),
    ],
)
def test_the_args_are_checked_as_upstream(args: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as e:
        _profile(args)
    assert f"profiles[0].pluginConfig[0].{message}" in str(e.value)


# ---- behaviour, on MemoryCluster and the real API server --------------------------------


def _zone(env: Env, z: str) -> dict[str, str]:
    return {ZONE: f"{env.prefix}{z}"}


async def _zoned_nodes(env: Env, spec: Sequence[tuple[str, str]], cpu: str = "8") -> None:
    for name, z in spec:
        await env.node(name, cpu=cpu, labels={HOST: env.node_name(name), **_zone(env, z)})


def _zone_of(env: Env, node: str) -> str:
    return node[len(env.prefix) :][0]  # node names start with their zone letter


async def _all_bound(env: Env, s: Scheduler, names: Sequence[str]) -> dict[str, str]:
    async def check() -> bool:
        bound = await env.bound()
        return all(n in bound for n in names)

    await env.until(s, check)
    return {n: node for n, node in (await env.bound()).items() if n in names}


async def test_schedule_anyway_balances_single_pods_over_zones(env: Env) -> None:
    """Zone a has two big nodes, zone b one small one: the resource score alone would fill
    zone a; the soft zone constraint sends every other pod to zone b."""
    await _zoned_nodes(env, [("a1", "a"), ("a2", "a")], cpu="16")
    await _zoned_nodes(env, [("b1", "b")], cpu="4")
    s = env.scheduler()
    spread = {"topologySpreadConstraints": [_soft(1, ZONE, {"matchLabels": {"app": "w"}})]}
    names = []
    for i in range(4):
        name = f"w{i}"
        names.append(name)
        await env.pod(name, labels={"app": "w"}, spec=spread)
        await _all_bound(env, s, names)  # one at a time: each sees the ones before
    bound = await env.bound()
    assert Counter(_zone_of(env, bound[n]) for n in names) == Counter({"a": 2, "b": 2})


async def test_a_gang_with_a_soft_zone_constraint_spreads_as_a_whole(env: Env) -> None:
    await _zoned_nodes(env, [("a1", "a"), ("a2", "a")], cpu="16")
    await _zoned_nodes(env, [("b1", "b")], cpu="4")
    spread = {"topologySpreadConstraints": [_soft(1, ZONE, {"matchLabels": {"app": "g"}})]}
    await env.gang("g", 4, labels={"app": "g"}, spec=spread)
    s = env.scheduler()
    bound = await _all_bound(env, s, [f"g-{i}" for i in range(4)])
    assert Counter(_zone_of(env, n) for n in bound.values()) == Counter({"a": 2, "b": 2})


async def _three(
    env: Env, *, a1: dict[str, str], a2: dict[str, str], b1: dict[str, str], taint: bool = False
) -> None:
    """a1: small (2 cpu), zone a; a2: big, zone a; b1: big, zone b — the resource score
    prefers b1 over a1."""
    t = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}] if taint else None
    for name, cpu, z, extra, taints in (
        ("a1", "2", "a", a1, None),
        ("a2", "16", "a", a2, t),
        ("b1", "16", "b", b1, None),
    ):
        labels = {HOST: env.node_name(name), **_zone(env, z), **extra}
        await env.node(name, cpu=cpu, labels=labels, taints=taints)
    for node, n in (("a2", 3), ("b1", 2)):  # bound by "another scheduler"
        for i in range(n):
            await env.pod(f"old-{node}-{i}", labels={"app": "w"}, node_name=env.node_name(node))


W = {"matchLabels": {"app": "w"}}


async def test_node_affinity_policy_decides_which_nodes_count(env: Env) -> None:
    """Zone a holds 3 matching pods on a2, a node the pod's node selector rejects; zone b 2.
    Honor (the default) does not count a2's: zone a is emptier, a1 wins over the bigger b1.
    Ignore counts them: zone b."""
    await _three(env, a1={"pool": "x"}, a2={}, b1={"pool": "x"})
    s = env.scheduler()
    for name, policy in (("honor", "Honor"), ("ignore", "Ignore")):
        c = _soft(1, ZONE, W, nodeAffinityPolicy=policy)
        await env.pod(
            name,
            labels={"app": "w"},
            node_selector={"pool": "x"},
            spec={"topologySpreadConstraints": [c]},
        )
        await _all_bound(env, s, [name])
    bound = await env.bound()
    assert (bound["honor"], bound["ignore"]) == (env.node_name("a1"), env.node_name("b1"))


async def test_node_taints_policy_decides_which_nodes_count(env: Env) -> None:
    """a2 is tainted: Ignore (the default) counts its 3 pods (zone b wins), Honor does not
    (zone a wins, on the smaller a1)."""
    await _three(env, a1={}, a2={}, b1={}, taint=True)
    s = env.scheduler()
    for name, policy in (("ignore", "Ignore"), ("honor", "Honor")):
        c = _soft(1, ZONE, W, nodeTaintsPolicy=policy)
        await env.pod(name, labels={"app": "w"}, spec={"topologySpreadConstraints": [c]})
        await _all_bound(env, s, [name])
    bound = await env.bound()
    assert (bound["ignore"], bound["honor"]) == (env.node_name("b1"), env.node_name("a1"))


async def _two_hosts(env: Env) -> tuple[str, str]:
    """A big and a small node, no zones: the resource score alone puts 3 of 4 pods on the
    big one; spread over hosts (maxSkew 3) alternates them."""
    big = await env.node("big", cpu="16", labels={HOST: env.node_name("big")})
    small = await env.node("small", cpu="4", labels={HOST: env.node_name("small")})
    return big, small


async def _one_by_one(env: Env, s: Scheduler, names: Sequence[str], **pod: Any) -> Counter[str]:
    done: list[str] = []
    for n in names:
        await env.pod(n, **pod)
        done.append(n)
        await _all_bound(env, s, done)
    bound = await env.bound()
    return Counter(bound[n] for n in names)


async def test_system_defaults_spread_the_pods_a_service_selects_over_hosts(env: Env) -> None:
    big, small = await _two_hosts(env)
    await env.cluster.create(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web", "namespace": env.namespace},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]},
        }
    )
    s = env.scheduler()
    got = await _one_by_one(env, s, [f"web-{i}" for i in range(4)], labels={"app": "web"})
    assert got == Counter({big: 2, small: 2})
    # a pod nothing selects gets no default: the resource score alone
    got = await _one_by_one(env, s, [f"lone-{i}" for i in range(2)], labels={"app": "lone"})
    assert got == Counter({big: 2})


async def test_system_defaults_spread_the_pods_of_a_replica_set_over_hosts(env: Env) -> None:
    big, small = await _two_hosts(env)
    rs = await env.cluster.create(
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "rs", "namespace": env.namespace},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "rs"}},
                "template": {
                    "metadata": {"labels": {"app": "rs"}},
                    "spec": {"containers": [{"name": "c", "image": "pause"}]},
                },
            },
        }
    )
    assert isinstance(rs, dict)
    ref = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": "rs",
        "uid": rs["metadata"]["uid"],
        "controller": True,
    }
    s = env.scheduler()
    done: list[str] = []
    for i in range(4):
        name = f"rs-{i}"
        obj = make_pod(name, env.namespace).scheduler_name(env.scheduler_name)
        obj.request("cpu", "1").request("memory", "1Gi")
        pod = obj.obj()
        pod["metadata"]["labels"] = {"app": "rs"}
        pod["metadata"]["ownerReferences"] = [ref]
        await env.cluster.create(pod)
        done.append(name)
        await _all_bound(env, s, done)
    bound = await env.bound()
    assert Counter(bound[n] for n in done) == Counter({big: 2, small: 2})


def _list_config(env: Env, constraints: list[dict[str, Any]]) -> Any:
    return parse_config(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {
                    "schedulerName": env.scheduler_name,
                    "pluginConfig": [
                        {
                            "name": "PodTopologySpread",
                            "args": {"defaultingType": "List", "defaultConstraints": constraints},
                        }
                    ],
                }
            ],
        }
    )


async def _with_config(env: Env, loaded: Any) -> Scheduler:
    s = Scheduler(env.cluster, loaded.scheduler, framework=loaded.framework)
    env.schedulers.append(s)
    return s


async def test_list_defaults_from_the_args_filter_and_score(env: Env) -> None:
    """A hard zone default (maxSkew 1) keeps a Service's pods balanced over two zones where
    the resource score would pile them in the bigger one: zone b's node holds one pod, so
    the fourth pod stays pending (zone a would be 2 ahead); pods nothing selects are not
    held to it."""
    await env.node("a1", cpu="16", labels={HOST: env.node_name("a1"), **_zone(env, "a")})
    await env.node("b1", cpu="1", labels={HOST: env.node_name("b1"), **_zone(env, "b")})
    await env.cluster.create(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web", "namespace": env.namespace},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]},
        }
    )
    hard = {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}
    s = await _with_config(env, _list_config(env, [hard]))
    names = [f"web-{i}" for i in range(4)]
    for n in names:
        await env.pod(n, labels={"app": "web"})
    await env.pod("lone-0", labels={"app": "lone"})
    await env.pod("lone-1", labels={"app": "lone"})

    async def settled() -> bool:
        bound = await env.bound()
        if "lone-0" not in bound or "lone-1" not in bound:
            return False
        left = [n for n in names if n not in bound]
        return len(left) == 1 and await env.pod_condition(left[0]) is not None

    await env.until(s, settled)
    bound = await env.bound()
    web = Counter(_zone_of(env, bound[n]) for n in names if n in bound)
    assert web == Counter({"a": 2, "b": 1})
    assert {bound["lone-0"], bound["lone-1"]} == {env.node_name("a1")}
    pending = next(n for n in names if n not in bound)
    cond = await env.pod_condition(pending)
    assert cond is not None and cond["status"] == "False"
    assert "didn't match pod topology spread constraints" in cond["message"]


async def test_explain_no_longer_calls_a_soft_spread_constraint_not_scored(env: Env) -> None:
    await env.node("a", labels={HOST: env.node_name("a"), **_zone(env, "a")})
    spread = {"topologySpreadConstraints": [_soft(1, ZONE, {"matchLabels": {"app": "g"}})]}
    await env.gang("g", 2, labels={"app": "g"}, spec=spread)
    s = env.scheduler()
    await _all_bound(env, s, ["g-0", "g-1"])
    report = await explain_report(env.cluster, "g", env.namespace)
    assert "notScored" not in report
    assert "Not scored" not in render_explain(report)


async def test_system_defaults_keep_a_services_pods_even_over_zones(env: Env) -> None:
    """Upstream's integration case (``TestDefaultPodTopologySpreadScoring``), smaller: with
    PodTopologySpread the only Score plugin, 30 nodes in 3 zones, the pods of a Service created
    in batches of 3, 9 and 15 land with zone skew 0 after each batch."""
    for i in range(30):
        name = f"n{i}"
        await env.node(name, labels={HOST: env.node_name(name), **_zone(env, f"z{i % 3}")})
    zone_of = {env.node_name(f"n{i}"): i % 3 for i in range(30)}
    await env.cluster.create(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "svc", "namespace": env.namespace},
            "spec": {"selector": {"service": "svc"}, "ports": [{"port": 80}]},
        }
    )
    loaded = parse_config(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {
                    "schedulerName": env.scheduler_name,
                    "plugins": {
                        "score": {
                            "disabled": [{"name": "*"}],
                            "enabled": [{"name": "PodTopologySpread"}],
                        }
                    },
                }
            ],
        }
    )
    assert [p.name for p in loaded.framework.scores] == ["PodTopologySpread"]
    s = await _with_config(env, loaded)
    names: list[str] = []
    for batch in (3, 9, 15):
        for _ in range(batch):
            names.append(f"p-{len(names)}")
            await env.pod(names[-1], labels={"service": "svc"})
        bound = await _all_bound(env, s, names)
        per_zone = Counter(zone_of[n] for n in bound.values())
        assert len(per_zone) == 3 and max(per_zone.values()) == min(per_zone.values()), per_zone
