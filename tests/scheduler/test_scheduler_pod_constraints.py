"""Pods' own constraints, gang-aware: host ports (NodePorts), required pod affinity and
anti-affinity (InterPodAffinity), ``DoNotSchedule`` topology spread (PodTopologySpread), and a
missing claim (the volume plugins). On MemoryCluster and on the real
v1.37.2 API server.

The rules, in our words, from kube-scheduler v1.37.2's plugins and their tests
(``pkg/scheduler/framework/plugins/{nodeports,interpodaffinity,podtopologyspread}/*_test.go``):

1. two pods asking for the same host port, protocol and an overlapping host IP (``0.0.0.0``
   overlaps every IP) never share a node; another protocol or another specific IP does;
   sidecars' ports count, those of init containers that finish do not;
2. a pod's anti-affinity term keeps it out of every domain of the term's topology key that
   holds a matching pod of the term's namespaces (its own by default, every one with
   ``namespaceSelector: {}``); a node without the key is not in any domain;
3. the anti-affinity of a pod already placed holds against the incoming pod too (symmetry);
4. a pod's affinity term needs a matching pod in the node's domain, or, when no pod anywhere
   matches, the pod matching its own term (the first of a self-affine group);
5. a ``DoNotSchedule`` constraint keeps each domain within ``maxSkew`` of the emptiest one
   (0 while fewer domains than ``minDomains`` exist); nodes without the key are never chosen;
   only nodes passing the pod's node affinity count as domains (``nodeAffinityPolicy: Honor``);
6. inside one gang cycle, the pods placed before count as existing pods: a gang spreads, or
   binds nothing;
7. a pod whose PersistentVolumeClaim does not exist stays pending, naming the claim (the
   volume plugins: test_scheduler_volumes.py).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from sched_helpers import Env

from workloadbuilder.scheduler import Scheduler

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
RACK = "topology.kubernetes.io/rack"


async def _node(env: Env, name: str, cpu: str = "8") -> str:
    return await env.node(name, cpu=cpu, labels={HOST: env.node_name(name)})


def _zone(env: Env, z: str) -> dict[str, str]:
    return {ZONE: f"{env.prefix}{z}"}


async def _nodes(env: Env, *specs: tuple[str, dict[str, str]], cpu: str = "8") -> None:
    for name, labels in specs:
        full = env.node_name(name)
        await env.node(name, cpu=cpu, labels={HOST: full, **labels})


def _anti(selector: dict[str, str], key: str = HOST, **term: Any) -> dict[str, Any]:
    return {
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": selector}, "topologyKey": key, **term}
                ]
            }
        }
    }


def _affinity(selector: dict[str, str], key: str) -> dict[str, Any]:
    return {
        "affinity": {
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": selector}, "topologyKey": key}
                ]
            }
        }
    }


def _spread(selector: dict[str, str], key: str = ZONE, **extra: Any) -> dict[str, Any]:
    return {
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": key,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": selector},
                **extra,
            }
        ]
    }


async def _settled(env: Env, s: Scheduler, names: list[str]) -> dict[str, str]:
    """Run until every named pod is bound or has a PodScheduled condition; the bindings."""

    async def check() -> bool:
        bound = await env.bound()
        for n in names:
            if n not in bound and await env.pod_condition(n) is None:
                return False
        return True

    await env.until(s, check)
    return {n: node for n, node in (await env.bound()).items() if n in names}


async def _group_settled(env: Env, s: Scheduler, group: str) -> None:
    async def check() -> bool:
        return await env.group_condition(group) is not None

    await env.until(s, check)


# ---- NodePorts --------------------------------------------------------------------------------


async def test_two_pods_asking_for_one_host_port_never_share_a_node(env: Env) -> None:
    a = await _node(env, "a")
    port = [{"containerPort": 80, "hostPort": 8080}]
    await env.pod("p1", ports=port)
    s = env.scheduler()
    await s.start()
    assert await _settled(env, s, ["p1"]) == {"p1": a}
    await env.pod("p2", ports=port)
    bound = await _settled(env, s, ["p2"])
    assert "p2" not in bound
    cond = await env.pod_condition("p2")
    assert cond is not None and cond["reason"] == "Unschedulable"
    assert "didn't have free ports for the requested pod ports" in cond["message"]
    b = await _node(env, "b")
    await env.until(s, lambda: _is_bound(env, "p2", b))


async def _is_bound(env: Env, pod: str, node: str) -> bool:
    return (await env.bound()).get(pod) == node


async def test_other_protocols_and_other_host_ips_share_a_node(env: Env) -> None:
    a = await _node(env, "a")
    await env.pod("tcp", ports=[{"containerPort": 53, "hostPort": 5353}])
    await env.pod("udp", ports=[{"containerPort": 53, "hostPort": 5353, "protocol": "UDP"}])
    await env.pod("ip1", ports=[{"containerPort": 9, "hostPort": 9000, "hostIP": "10.0.0.1"}])
    await env.pod("ip2", ports=[{"containerPort": 9, "hostPort": 9000, "hostIP": "10.0.0.2"}])
    # 0.0.0.0 overlaps the two specific addresses: it cannot go there
    await env.pod("all", ports=[{"containerPort": 9, "hostPort": 9000}])
    s = env.scheduler()
    await s.start()
    bound = await _settled(env, s, ["tcp", "udp", "ip1", "ip2", "all"])
    assert bound == {"tcp": a, "udp": a, "ip1": a, "ip2": a}


async def test_sidecar_ports_count_and_finished_init_containers_do_not(env: Env) -> None:
    a = await _node(env, "a")
    await env.pod("holder", ports=[{"containerPort": 1, "hostPort": 7000}])
    init = {"name": "init", "image": "busybox", "ports": [{"containerPort": 1, "hostPort": 7000}]}
    await env.pod("init-only", spec={"initContainers": [init]})
    sidecar = {**init, "name": "sidecar", "restartPolicy": "Always"}
    await env.pod("sidecar", spec={"initContainers": [sidecar]})
    s = env.scheduler()
    await s.start()
    bound = await _settled(env, s, ["holder", "init-only", "sidecar"])
    assert bound == {"holder": a, "init-only": a}


async def test_a_gang_of_host_port_pods_spreads_or_binds_nothing(env: Env) -> None:
    await _node(env, "a")
    await _node(env, "b")
    await env.pod_group("g", 3)
    for i in range(3):
        await env.pod(f"g-{i}", "g", ports=[{"containerPort": 80, "hostPort": 8080}])
    s = env.scheduler()
    await s.start()
    await _group_settled(env, s, "g")
    assert await env.bound("g-") == {}
    cond = await env.group_condition("g")
    assert cond.status == "False" and cond.reason == "Unschedulable"
    c = await _node(env, "c")

    async def three() -> bool:
        return len(await env.bound("g-")) == 3

    await env.until(s, three)
    bound = await env.bound("g-")
    assert len(set(bound.values())) == 3 and c in bound.values()


# ---- InterPodAffinity -------------------------------------------------------------------------


async def test_a_gang_with_one_worker_per_node_binds_nothing_on_too_few_nodes(env: Env) -> None:
    for n in ("a", "b", "c"):
        await _node(env, n)
    await env.pod_group("w", 4)
    for i in range(4):
        await env.pod(f"w-{i}", "w", labels={"app": "w"}, spec=_anti({"app": "w"}))
    s = env.scheduler()
    await s.start()
    await _group_settled(env, s, "w")
    assert await env.bound("w-") == {}
    cond = await env.group_condition("w")
    assert (cond.status, cond.reason) == ("False", "Unschedulable")
    assert "anti-affinity app=w on kubernetes.io/hostname: 3 nodes for 4 pods" in cond.message
    d = await _node(env, "d")

    async def four() -> bool:
        return len(await env.bound("w-")) == 4

    await env.until(s, four)
    bound = await env.bound("w-")
    assert len(set(bound.values())) == 4 and d in bound.values()


async def test_existing_pods_anti_affinity_repels_an_unconstrained_pod(env: Env) -> None:
    a = await _node(env, "a")
    b = await _node(env, "b", cpu="1")
    await env.pod("guard", labels={"app": "guard"}, spec=_anti({"app": "x"}), node_name=a)
    await env.pod("x", labels={"app": "x"}, cpu="0.5")
    await env.pod("y", labels={"app": "y"}, cpu="0.5", node_selector={HOST: a})
    s = env.scheduler()
    await s.start()
    bound = await _settled(env, s, ["x", "y"])
    assert bound == {"x": b, "y": a}


async def test_affinity_follows_the_matching_pods_domain(env: Env) -> None:
    za, zb = _zone(env, "a"), _zone(env, "b")
    await _nodes(env, ("a1", za), ("b1", zb), ("b2", zb))
    b1 = env.node_name("b1")
    await env.pod("db", labels={"app": "db"}, node_name=b1)
    await env.pod("web", labels={"app": "web"}, spec=_affinity({"app": "db"}, ZONE))
    await env.pod("lost", labels={"app": "web"}, spec=_affinity({"app": "cache"}, ZONE))
    s = env.scheduler()
    await s.start()
    bound = await _settled(env, s, ["web", "lost"])
    assert bound["web"] in {b1, env.node_name("b2")} and "lost" not in bound
    cond = await env.pod_condition("lost")
    assert cond is not None and "didn't match pod affinity rules" in cond["message"]


async def test_the_first_pod_of_a_self_affine_group_schedules_and_the_next_follow(
    env: Env,
) -> None:
    await _nodes(env, ("a1", _zone(env, "a")), ("b1", _zone(env, "b")))
    s = env.scheduler()
    await s.start()
    spec = _affinity({"app": "g"}, ZONE)
    await env.pod("g-0", labels={"app": "g"}, spec=spec)
    first = (await _settled(env, s, ["g-0"]))["g-0"]
    # single pods go to the emptier node (LeastAllocated): without the term, the other zone
    for i in (1, 2):
        await env.pod(f"g-{i}", labels={"app": "g"}, spec=spec)
        assert await _settled(env, s, [f"g-{i}"]) == {f"g-{i}": first}


async def test_anti_affinity_looks_at_the_terms_namespaces_only(env: Env) -> None:
    a = await _node(env, "a")
    b = await _node(env, "b")
    other = await _other_namespace(env)
    await env.pod("x", labels={"app": "x"}, cpu="4", node_name=a)
    # the term's own namespace by default: the pod in another namespace does not repel
    await env.cluster.create(_bound_pod(other, "elsewhere", {"app": "z"}, b))
    try:
        await env.pod("p", labels={"app": "p"}, spec=_anti({"app": "z"}))
        await env.pod("q", labels={"app": "q"}, spec=_anti({"app": "z"}, namespaceSelector={}))
        s = env.scheduler()
        await s.start()
        bound = await _settled(env, s, ["p", "q"])
        assert bound["q"] == a  # every namespace: b holds app=z
        assert bound["p"] == b  # the emptier node: app=z there is in another namespace
    finally:  # the plane is shared with the other scheduler tests: leave nothing behind
        await env.cluster.delete("Pod", "elsewhere", other, grace_period_seconds=0)
        await env.cluster.delete("Namespace", other)


async def _other_namespace(env: Env) -> str:
    name = f"{env.namespace}-o"
    await env.cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


def _bound_pod(namespace: str, name: str, labels: dict[str, str], node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]},
    }


async def test_a_namespace_selector_with_requirements_selects_namespaces_by_label(
    env: Env,
) -> None:
    # (it was refused while the scheduler did not watch Namespaces; kube-scheduler honours it)
    a = await _node(env, "a")
    b = await _node(env, "b")
    other = f"{env.namespace}-ml"
    await env.cluster.create(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": other, "labels": {"team": f"{env.prefix}ml"}},
        }
    )
    await env.cluster.create(_bound_pod(other, "ml", {"app": "z"}, b))
    try:
        term = {"namespaceSelector": {"matchLabels": {"team": f"{env.prefix}ml"}}}
        await env.pod("p", labels={"app": "p"}, cpu="4", spec=_anti({"app": "z"}, **term))
        s = env.scheduler()
        await s.start()
        assert await _settled(env, s, ["p"]) == {"p": a}  # b holds app=z in a team=ml namespace
    finally:
        await env.cluster.delete("Pod", "ml", other, grace_period_seconds=0)
        await env.cluster.delete("Namespace", other)


async def test_a_rack_gang_with_one_worker_per_node_lands_on_distinct_nodes_of_one_rack(
    env: Env,
) -> None:
    r1, r2 = {RACK: f"{env.prefix}r1"}, {RACK: f"{env.prefix}r2"}
    await _nodes(env, ("r1a", r1), ("r1b", r1), ("r2a", r2), ("r2b", r2), ("r2c", r2))
    await env.pod_group("g", 3, topology=RACK)
    for i in range(3):
        await env.pod(f"g-{i}", "g", cpu="1", labels={"app": "g"}, spec=_anti({"app": "g"}))
    s = env.scheduler()
    await s.start()
    await _group_settled(env, s, "g")
    bound = await env.bound("g-")
    assert sorted(bound.values()) == sorted(env.node_name(n) for n in ("r2a", "r2b", "r2c"))


# ---- PodTopologySpread ------------------------------------------------------------------------


async def test_a_gang_is_balanced_across_zones_as_a_whole(env: Env) -> None:
    za, zb = _zone(env, "a"), _zone(env, "b")
    await _nodes(env, ("a1", za), ("a2", za), ("b1", zb))
    await env.pod_group("g", 4)
    for i in range(4):
        await env.pod(f"g-{i}", "g", labels={"app": "g"}, spec=_spread({"app": "g"}))
    s = env.scheduler()
    await s.start()
    await _group_settled(env, s, "g")
    bound = await env.bound("g-")
    per_zone = Counter("b" if n == env.node_name("b1") else "a" for n in bound.values())
    assert per_zone == {"a": 2, "b": 2}


async def test_a_single_pod_goes_to_the_emptier_zone_and_never_to_a_node_without_the_key(
    env: Env,
) -> None:
    za, zb = _zone(env, "a"), _zone(env, "b")
    await env.node("nokey", cpu="16", labels={HOST: env.node_name("nokey")})  # the emptiest
    await _nodes(env, ("a1", za), ("b1", zb))
    a1 = env.node_name("a1")
    for i in range(2):
        await env.pod(f"old-{i}", labels={"app": "s"}, node_name=a1)
    await env.pod("new", labels={"app": "s"}, spec=_spread({"app": "s"}))
    s = env.scheduler()
    await s.start()
    assert await _settled(env, s, ["new"]) == {"new": env.node_name("b1")}


async def test_min_domains_holds_each_zone_to_max_skew_until_enough_zones_exist(env: Env) -> None:
    za, zb = _zone(env, "a"), _zone(env, "b")
    await _nodes(env, ("a1", za), ("b1", zb))
    await env.pod_group("g", 3)
    for i in range(3):
        spread = _spread({"app": "g"}, minDomains=3)
        await env.pod(f"g-{i}", "g", labels={"app": "g"}, spec=spread)
    s = env.scheduler()
    await s.start()
    await _group_settled(env, s, "g")
    assert await env.bound("g-") == {}  # 2 domains < minDomains 3: 1 pod per zone at most
    cond = await env.group_condition("g")
    assert cond.status == "False"


async def test_nodes_excluded_by_node_affinity_are_no_domains(env: Env) -> None:
    za, zb, zc = _zone(env, "a"), _zone(env, "b"), _zone(env, "c")
    await _nodes(env, ("a1", {**za, "pool": "x"}), ("b1", {**zb, "pool": "x"}), ("c1", zc))
    await env.pod_group("g", 4)
    for i in range(4):
        await env.pod(
            f"g-{i}",
            "g",
            labels={"app": "g"},
            node_selector={"pool": "x"},
            spec=_spread({"app": "g"}),
        )
    s = env.scheduler()
    await s.start()
    await _group_settled(env, s, "g")
    # zone c (no pool=x node) is not a domain with 0 pods: a and b take 2 each
    bound = await env.bound("g-")
    per_zone = Counter(n.rsplit("-", 1)[-1] for n in bound.values())
    assert per_zone == {"a1": 2, "b1": 2}


async def test_schedule_anyway_does_not_hold_a_pod_back(env: Env) -> None:
    await _nodes(env, ("a", _zone(env, "z")))
    a = env.node_name("a")
    soft = _spread({"app": "s"}, whenUnsatisfiable="ScheduleAnyway")
    await env.pod("soft", labels={"app": "s"}, spec=soft)
    s = env.scheduler()
    await s.start()
    assert await _settled(env, s, ["soft"]) == {"soft": a}


# ---- volumes --------------------------------------------------------------------------------


async def test_a_pod_whose_claim_does_not_exist_stays_pending_naming_the_claim(env: Env) -> None:
    a = await _node(env, "a")
    pvc = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    await env.pod("pvc", spec={"volumes": pvc})
    await env.pod("cm", spec={"volumes": [{"name": "cfg", "configMap": {"name": "c"}}]})
    s = env.scheduler()
    await s.start()
    assert await _settled(env, s, ["pvc", "cm"]) == {"cm": a}
    cond = await env.pod_condition("pvc")
    # upstream's VolumeBinding / VolumeRestrictions PreFilter (test_volume_parity.py)
    assert cond is not None and 'persistentvolumeclaim "data" not found' in cond["message"]


# ---- preemption -------------------------------------------------------------------------------


async def test_a_single_pod_preempts_the_lower_priority_pod_holding_its_host_port(
    env: Env,
) -> None:
    low = await env.priority_class("low", 100)
    high = await env.priority_class("high", 1000)
    a = await _node(env, "a")
    port = [{"containerPort": 80, "hostPort": 8080}]
    grace = {"terminationGracePeriodSeconds": 0}
    await env.pod("holder", priority_class=low, ports=port, spec=grace, node_name=a)
    await env.pod("hp", priority_class=high, ports=port, spec=grace)
    s = env.scheduler(preemption=True)
    await s.start()

    async def done() -> bool:
        return (await env.bound()).get("hp") == a

    await env.until(s, done)
    assert "holder" not in await env.pods()


async def test_a_single_pod_preempts_the_pod_its_anti_affinity_repels(env: Env) -> None:
    low = await env.priority_class("low", 100)
    high = await env.priority_class("high", 1000)
    a = await _node(env, "a")
    grace = {"terminationGracePeriodSeconds": 0}
    await env.pod("w", labels={"app": "w"}, priority_class=low, spec=grace, node_name=a)
    spec = {**_anti({"app": "w"}), **grace}
    await env.pod("hp", labels={"app": "hp"}, priority_class=high, spec=spec)
    s = env.scheduler(preemption=True)
    await s.start()

    async def done() -> bool:
        return (await env.bound()).get("hp") == a

    await env.until(s, done)
    assert "w" not in await env.pods()


# ---- what is not scored yet is said, not hidden ------------------------------------------------


async def test_explain_no_longer_lists_preferred_pod_affinity_as_not_scored(env: Env) -> None:
    # (InterPodAffinity scores preferred pod affinity and anti-affinity now)
    from workloadbuilder.scheduler.explain import explain_report, render_explain

    await _node(env, "a")
    await _node(env, "b")
    preferred = {
        "affinity": {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "labelSelector": {"matchLabels": {"app": "g"}},
                            "topologyKey": HOST,
                        },
                    }
                ]
            }
        }
    }
    await env.pod_group("g", 2)
    for i in range(2):
        await env.pod(f"g-{i}", "g", labels={"app": "g"}, spec=preferred)
    s = env.scheduler()
    await s.start()
    await _group_settled(env, s, "g")
    assert len(set((await env.bound("g-")).values())) == 2  # the preference is honoured
    report = await explain_report(env.cluster, "g", env.namespace)
    assert "notScored" not in report
    assert "Not scored" not in render_explain(report)
