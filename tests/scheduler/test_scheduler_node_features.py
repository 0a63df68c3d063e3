"""NodeDeclaredFeatures (GA in v1.37.2, always on): a pod whose spec needs a node feature goes
only to nodes that declare it in ``status.declaredFeatures``. On MemoryCluster and on the real
v1.37.2 API server.

The rules, in our words, from kube-scheduler v1.37.2's plugin and its tests
(``pkg/scheduler/framework/plugins/nodedeclaredfeatures/nodedeclaredfeatures_test.go``) and
the inference in ``k8s.io/component-helpers/nodedeclaredfeatures/features``:

1. a container restart rule with the ``RestartAllContainers`` action needs
   ``RestartAllContainersOnContainerExits``; ``hostNetwork`` with ``hostUsers: false`` needs
   ``UserNamespacesHostNetworkSupport``; a volume mount with ``bindMountOptions`` needs
   ``VolumeBindMountOptions``; nothing else does;
2. a node that does not list a needed feature is refused (also a node that lists none), with
   "node(s) didn't match Pod's required features"; a pod that needs nothing goes anywhere;
3. a node that starts declaring the feature makes the pending pod schedulable;
4. a gang whose pods need a feature binds only where every pod finds a declaring node.
"""

from __future__ import annotations

from typing import Any

from sched_helpers import Env

from workloadbuilder.scheduler._resources import pod_requirements, required_features
from workloadbuilder.testing.builders import make_pod

FEATURE = "RestartAllContainersOnContainerExits"


def _restart_all(env: Env, name: str, group: str | None = None) -> dict[str, Any]:
    p = make_pod(name, env.namespace).scheduler_name(env.scheduler_name)
    p.request("cpu", "1").request("memory", "1Gi")
    if group:
        p.pod_group(group)
    obj = p.obj()
    c = obj["spec"]["containers"][0]
    c["restartPolicy"] = "Never"
    c["restartPolicyRules"] = [
        {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}
    ]
    return obj


async def _declare(env: Env, node: str, *features: str) -> None:
    await env.cluster.patch(
        "Node", node, {"status": {"declaredFeatures": list(features)}}, subresource="status"
    )


def test_what_a_pod_spec_needs() -> None:
    rule = {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [1]}}
    restart = {"restartPolicy": "Never", "restartPolicyRules": [rule]}
    assert required_features({"containers": [{"name": "c", **restart}]}) == (FEATURE,)
    assert required_features({"initContainers": [{"name": "i", **restart}]}) == (FEATURE,)
    other = {**restart, "restartPolicyRules": [{**rule, "action": "Restart"}]}
    assert required_features({"containers": [{"name": "c", **other}]}) == ()
    userns = {"hostNetwork": True, "hostUsers": False, "containers": [{"name": "c"}]}
    assert required_features(userns) == ("UserNamespacesHostNetworkSupport",)
    assert required_features({**userns, "hostUsers": True}) == ()
    assert required_features({**userns, "hostNetwork": False}) == ()
    mount = {"name": "c", "volumeMounts": [{"name": "v", "bindMountOptions": ["ro"]}]}
    assert required_features({"containers": [mount]}) == ("VolumeBindMountOptions",)
    assert required_features({"ephemeralContainers": [mount]}) == ("VolumeBindMountOptions",)
    both = {"containers": [{**mount, **restart}]}
    assert required_features(both) == (FEATURE, "VolumeBindMountOptions")
    plain = {"containers": [{"name": "c", "volumeMounts": [{"name": "v"}]}]}
    assert required_features(plain) == ()
    # the features are part of the scheduling signature
    pods = [{"spec": s} for s in (plain, both)]
    assert pod_requirements(pods[0]) != pod_requirements(pods[1])


async def test_a_pod_needing_a_feature_goes_only_where_it_is_declared(env: Env) -> None:
    await env.node("plain")
    other = await env.node("other")
    await _declare(env, other, "VolumeBindMountOptions")
    able = await env.node("able", cpu="2")
    await _declare(env, able, FEATURE)
    await env.cluster.create(_restart_all(env, "needs"))
    await env.pod("free", cpu="4")  # needs nothing: any node with room
    s = env.scheduler()
    await s.start()

    async def done() -> bool:
        return len(await env.bound()) == 2

    await env.until(s, done)
    bound = await env.bound()
    assert bound["needs"] == able
    assert bound["free"] != able  # the 2-cpu node has no room left for it anyway


async def test_no_declaring_node_keeps_the_pod_pending_until_one_declares(env: Env) -> None:
    a = await env.node("a")
    await env.node("b")
    await env.cluster.create(_restart_all(env, "needs"))
    s = env.scheduler()
    await s.start()

    async def decided() -> bool:
        return await env.pod_condition("needs") is not None

    await env.until(s, decided)
    cond = await env.pod_condition("needs")
    assert cond is not None and cond["status"] == "False" and cond["reason"] == "Unschedulable"
    assert "2 node(s) didn't match Pod's required features" in cond["message"]
    assert await env.bound("needs") == {}
    await _declare(env, a, FEATURE, "VolumeBindMountOptions")

    async def bound() -> bool:
        return (await env.bound()).get("needs") == a

    await env.until(s, bound)


async def test_a_gang_binds_only_when_every_pod_finds_a_declaring_node(env: Env) -> None:
    a = await env.node("a", cpu="1")
    b = await env.node("b", cpu="1")
    await _declare(env, a, FEATURE)
    await env.pod_group("g", 2)
    for i in range(2):
        await env.cluster.create(_restart_all(env, f"g-{i}", "g"))
    s = env.scheduler()
    await s.start()

    async def decided() -> bool:
        return await env.group_condition("g") is not None

    await env.until(s, decided)
    assert await env.bound("g-") == {}  # one declaring node of one cpu: not both
    await _declare(env, b, FEATURE)

    async def all_bound() -> bool:
        return len(await env.bound("g-")) == 2

    await env.until(s, all_bound)
    assert set((await env.bound("g-")).values()) == {a, b}
