"""Several profiles in one ``KubeSchedulerConfiguration``, served by one scheduler: on
MemoryCluster and on the real v1.37.2 API server.

The rules, in our words, from kube-scheduler v1.37.2 (``pkg/scheduler/profile``,
``apis/config/validation``, ``scheduler.go``, ``schedule_one.go`` / ``frameworkForPod``,
``schedule_one_podgroup.go`` / ``validatePodGroup`` and ``frameworkForPodGroup``, and their
tests):

1. each profile serves the pods whose ``spec.schedulerName`` is its ``schedulerName``, with
   its own plugins and plugin args; pods naming none of the profiles are not touched;
2. the profiles share one cache: a node's room taken by one profile's pod is not offered to
   another's, and room freed wakes the other profile's pods;
3. a PodGroup (gang or basic) is scheduled by the profile of its pods, all-or-nothing as
   under the first profile;
4. the pods of one group (pending ones of served profiles, and bound ones) must name one
   scheduler: otherwise the group is a ``SchedulerError`` and nothing of it is bound;
5. preemption is the profile's: a profile without DefaultPreemption never evicts; the devices
   state (DRA) is one for every profile;
6. validation: with several profiles each needs a ``schedulerName`` (only a lone profile is
   defaulted), names are unique, ``plugins.queueSort`` is the same in every profile.
"""

from __future__ import annotations

from typing import Any

import pytest
from sched_helpers import Env

from workloadbuilder.scheduler import ConfigError, LoadedConfig, Scheduler, parse_config
from workloadbuilder.scheduler._framework import Framework
from workloadbuilder.scheduler._plugins import default_framework
from workloadbuilder.scheduler._preemption import DefaultPreemption
from workloadbuilder.scheduler.explain import explain_report, render_explain

API = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
TAINT = {"key": "dedicated", "value": "x", "effect": "NoSchedule"}
#: profile B: the taint filter off, single pods bin-packed
PACKER: dict[str, Any] = {
    "plugins": {"filter": {"disabled": [{"name": "TaintToleration"}]}},
    "pluginConfig": [
        {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}
    ],
}


def _names(env: Env) -> tuple[str, str]:
    return env.scheduler_name, f"{env.scheduler_name}-packer"


def _loaded(env: Env, b: dict[str, Any] | None = None) -> LoadedConfig:
    a_name, b_name = _names(env)
    doc = {**API, "profiles": [{"schedulerName": a_name}, {"schedulerName": b_name, **PACKER}]}
    if b is not None:
        doc["profiles"][1] = {"schedulerName": b_name, **b}
    return parse_config(doc)


def _scheduler(env: Env, loaded: LoadedConfig, **config: Any) -> Scheduler:
    import attrs

    s = Scheduler(
        env.cluster, attrs.evolve(loaded.scheduler, **config), frameworks=loaded.frameworks
    )
    env.schedulers.append(s)
    return s


def _where(env: Env, name: str) -> dict[str, str]:
    """A node selector pinning a pod to this test's node ``name``."""
    return {"profiles-test": env.node_name(name)}


async def _node(env: Env, name: str, *, cpu: str = "8", tainted: bool = False) -> str:
    full = env.node_name(name)
    return await env.node(
        name,
        cpu=cpu,
        labels={"profiles-test": full, "profiles-pool": env.namespace},
        taints=[TAINT] if tainted else None,
    )


async def _condition(env: Env, pod: str) -> dict[str, Any] | None:
    return await env.pod_condition(pod)


async def _reporters(env: Env, s: Scheduler, reason: str) -> dict[str, str]:
    """``{pod: reportingComponent}`` of the ``reason`` Events about this test's pods, once
    the scheduler wrote what it queued."""
    await s.until_idle()
    events = (await env.cluster.list("Event", env.namespace)).items
    return {
        str(e["involvedObject"]["name"]): str(e.get("reportingComponent"))
        for e in events
        if isinstance(e, dict) and e.get("reason") == reason
    }


async def _unschedulable(env: Env, pod: str) -> bool:
    cond = await env.pod_condition(pod)
    return cond is not None and cond["status"] == "False"


# ---- 1. each profile with its own plugins -----------------------------------------------------


async def test_each_profile_schedules_its_pods_with_its_own_plugins(env: Env) -> None:
    a_name, b_name = _names(env)
    tainted = await _node(env, "tainted", tainted=True)
    pin = _where(env, "tainted")
    await env.pod("by-a", node_selector=pin, scheduler_name=a_name)
    await env.pod("by-b", node_selector=pin, scheduler_name=b_name)
    await env.pod("by-nobody", node_selector=pin, scheduler_name="nobody-serves-this")
    s = _scheduler(env, _loaded(env))
    await s.start()

    async def decided() -> bool:
        return "by-b" in await env.bound() and await _unschedulable(env, "by-a")

    await env.until(s, decided)
    # B has no TaintToleration filter: its pod lands on the tainted node; A's does not
    assert await env.bound() == {"by-b": tainted}
    cond = await _condition(env, "by-a")
    assert cond is not None and cond["reason"] == "Unschedulable"
    assert "untolerated taint" in cond["message"]
    # a pod naming no profile is not ours: no condition, no node
    await s.until_idle()
    assert await _condition(env, "by-nobody") is None
    assert "by-nobody" not in await env.bound()
    # each profile reports its own events (kube-scheduler: one recorder per profile)
    assert (await _reporters(env, s, "Scheduled")) == {"by-b": b_name}
    assert (await _reporters(env, s, "FailedScheduling")) == {"by-a": a_name}


async def test_each_profile_scores_with_its_own_plugin_args(env: Env) -> None:
    a_name, b_name = _names(env)
    n1, n2 = await _node(env, "n1"), await _node(env, "n2")
    pool = {"profiles-pool": env.namespace}
    s = _scheduler(env, _loaded(env))
    await s.start()
    # A (LeastAllocated, the default for single pods) spreads
    for i in range(2):
        await env.pod(f"a-{i}", cpu="1", memory="4Gi", node_selector=pool, scheduler_name=a_name)

    async def two(prefix: str) -> bool:
        return len(await env.bound(prefix)) == 2

    await env.until(s, lambda: two("a-"))
    spread = await env.bound("a-")
    assert sorted(spread.values()) == sorted([n1, n2])
    # B (MostAllocated) packs onto one node
    for i in range(2):
        await env.pod(f"b-{i}", cpu="1", memory="4Gi", node_selector=pool, scheduler_name=b_name)
    await env.until(s, lambda: two("b-"))
    packed = await env.bound("b-")
    assert len(set(packed.values())) == 1


# ---- 2. one cache ----------------------------------------------------------------------------


async def test_profiles_never_double_book_a_node(env: Env) -> None:
    a_name, b_name = _names(env)
    node = await _node(env, "small", cpu="2")
    pin = _where(env, "small")
    grace = {"terminationGracePeriodSeconds": 0}
    await env.pod("first", cpu="2", node_selector=pin, scheduler_name=a_name, spec=grace)
    await env.pod("second", cpu="2", node_selector=pin, scheduler_name=b_name, spec=grace)
    s = _scheduler(env, _loaded(env))
    await s.start()

    async def decided() -> bool:
        bound = await env.bound()
        told = [n for n in ("first", "second") if await _unschedulable(env, n)]
        return len(bound) == 1 and len(told) == 1 and told[0] not in bound

    await env.until(s, decided)
    bound = await env.bound()
    assert list(bound.values()) == [node]
    (waiting,) = {"first", "second"} - set(bound)
    cond = await _condition(env, waiting)
    assert cond is not None and "Insufficient cpu" in cond["message"]
    # the room freed by one profile's pod goes to the other's
    await env.cluster.delete("Pod", next(iter(bound)), env.namespace, grace_period_seconds=0)

    async def moved() -> bool:
        return (await env.bound()).get(waiting) == node

    await env.until(s, moved)


# ---- 3. PodGroups under the second profile --------------------------------------------------


async def test_a_gang_is_scheduled_by_its_pods_profile(env: Env) -> None:
    a_name, b_name = _names(env)
    nodes = {await _node(env, f"t{i}", cpu="2", tainted=True) for i in range(3)}
    pool = {"profiles-pool": env.namespace}
    await env.pod_group("gb", 3)
    for i in range(3):
        await env.pod(f"gb-{i}", "gb", cpu="2", node_selector=pool, scheduler_name=b_name)
    await env.pod_group("ga", 3)
    for i in range(3):
        await env.pod(f"ga-{i}", "ga", cpu="2", node_selector=pool, scheduler_name=a_name)
    s = _scheduler(env, _loaded(env))
    await s.start()

    async def decided() -> bool:
        gb, ga = await env.group_condition("gb"), await env.group_condition("ga")
        return gb is not None and gb.status == "True" and ga is not None

    await env.until(s, decided)
    bound = await env.bound()
    # B's gang (no taint filter) takes the three tainted nodes, one pod each; A's binds nothing
    assert {n for p, n in bound.items() if p.startswith("gb-")} == nodes
    assert not any(p.startswith("ga-") for p in bound)
    cond = await env.group_condition("ga")
    assert (cond.status, cond.reason) == ("False", "Unschedulable")
    assert "taint" in cond.message
    report = await explain_report(env.cluster, "gb", env.namespace)
    assert report["schedulerNames"] == [b_name]
    assert f"Scheduler: {b_name}" in render_explain(report)


async def test_a_composite_tree_is_scheduled_by_its_pods_profile(env: Env) -> None:
    """A CompositePodGroup tree (minGroupCount 2) whose pods name B: placed whole on the
    tainted nodes; the same tree naming A binds nothing."""
    from workloadbuilder.api import CompositePodGroup, from_dict
    from workloadbuilder.testing.builders import make_composite_pod_group

    a_name, b_name = _names(env)
    for i in range(2):
        await _node(env, f"t{i}", cpu="2", tainted=True)
    pool = {"profiles-pool": env.namespace}
    for tree, profile in (("tb", b_name), ("ta", a_name)):
        cpg = make_composite_pod_group(tree, env.namespace).gang(2)
        await env.cluster.create(from_dict(cpg.obj(), CompositePodGroup))
        for leaf in ("x", "y"):
            await env.pod_group(f"{tree}-{leaf}", 1, parent=tree)
            await env.pod(
                f"{tree}-{leaf}-0",
                f"{tree}-{leaf}",
                cpu="2",
                node_selector=pool,
                scheduler_name=profile,
            )
    s = _scheduler(env, _loaded(env))
    await s.start()

    async def decided() -> bool:
        done = [await env.group_condition(g) for g in ("tb-x", "tb-y", "ta-x")]
        return all(c is not None for c in done) and done[0].status == "True"

    await env.until(s, decided)
    bound = await env.bound()
    assert sorted(bound) == ["tb-x-0", "tb-y-0"]
    assert len(set(bound.values())) == 2
    cond = await env.group_condition("ta-x")
    assert (cond.status, cond.reason) == ("False", "Unschedulable")


async def test_a_group_whose_pods_name_two_profiles_is_a_scheduler_error(env: Env) -> None:
    a_name, b_name = _names(env)
    await _node(env, "n")
    await env.pod_group("mixed", 2)
    await env.pod("mixed-0", "mixed", scheduler_name=a_name)
    await env.pod("mixed-1", "mixed", scheduler_name=b_name)
    s = _scheduler(env, _loaded(env))
    await s.start()
    await env.seen(s, lambda: env.cached_pods(s) == 2)

    async def decided() -> bool:
        return await env.group_condition("mixed") is not None

    await env.until(s, decided)
    cond = await env.group_condition("mixed")
    assert (cond.status, cond.reason) == ("False", "SchedulerError")
    assert f"different scheduler names: {', '.join(sorted([a_name, b_name]))}" in cond.message
    assert await env.bound() == {}
    report = await explain_report(env.cluster, "mixed", env.namespace)
    assert report["schedulerNames"] == sorted([a_name, b_name])


async def test_unserved_pods_of_a_group_do_not_count(env: Env) -> None:
    """A pending member naming no profile is invisible (as with one profile): the gang of
    minCount 2 with one served pod waits; it is no error."""
    _, b_name = _names(env)
    await _node(env, "n")
    await env.pod_group("g", 2)
    await env.pod("g-0", "g", scheduler_name=b_name)
    await env.pod("g-1", "g", scheduler_name="nobody-serves-this")
    s = _scheduler(env, _loaded(env))
    await s.start()
    await env.seen(s, lambda: env.cached_pods(s) == 2)
    await s.until_idle()
    assert await env.bound() == {}
    cond = await env.group_condition("g")
    assert cond is None or cond.reason != "SchedulerError"


# ---- devices: one DRA state for every profile --------------------------------------------------


async def test_profiles_share_the_devices_state(env: Env) -> None:
    """Two devices, three pods each with a claim for one (A's, B's, then A's again): both
    profiles' allocators see the devices and each other's allocations: the first two pods
    get one device each, the third none."""
    from dra_helpers import Dra, allocated

    from workloadbuilder.testing.builders import make_pod

    a_name, b_name = _names(env)
    dra = Dra(env)
    pods = (("p1-a", a_name), ("p2-b", b_name), ("p3-a", a_name))
    try:
        node = await _node(env, "gpu")
        gpu = await dra.device_class("gpu")
        await dra.node_slice(node, 2)
        for pod, profile in pods:
            await dra.claim(f"{pod}-claim", gpu)
            obj = make_pod(pod, env.namespace).scheduler_name(profile)
            obj.request("cpu", "1").request("memory", "1Gi")
            obj.pod_resource_claim("gpu", claim=f"{pod}-claim")
            await env.cluster.create(obj.obj())
        s = _scheduler(env, _loaded(env))
        await s.start()
        await env.seen(s, lambda: env.cached_pods(s) == 3)

        async def decided() -> bool:
            return len(await env.bound()) == 2 and await _unschedulable(env, "p3-a")

        await env.until(s, decided)
        assert sorted(await env.bound()) == ["p1-a", "p2-b"]
        devices = [allocated(await dra.get_claim(f"{p}-claim")) for p, _ in pods]
        assert [len(d) for d in devices] == [1, 1, 0]
        assert devices[0][0][3] != devices[1][0][3]
    finally:
        await dra.cleanup()


# ---- 5. preemption per profile ---------------------------------------------------------------


async def test_preemption_is_the_profiles(env: Env) -> None:
    a_name, b_name = _names(env)
    no_preemption = {"plugins": {"podGroupPostFilter": {"disabled": [{"name": "*"}]}}}
    loaded = _loaded(env, no_preemption)
    assert loaded.frameworks[b_name].post_filter_plugin(DefaultPreemption) is None
    low = await env.priority_class("low", 10)
    high = await env.priority_class("high", 1000)
    await _node(env, "n", cpu="2")
    pin = _where(env, "n")
    grace = {"terminationGracePeriodSeconds": 0}
    s = _scheduler(env, loaded, preemption=True)
    await s.start()
    await env.pod("low", cpu="2", node_selector=pin, priority_class=low, spec=grace)
    await env.until(s, lambda: _has(env, "low"))
    # B cannot preempt: its high-priority pod waits, the low one keeps running
    await env.pod("high-b", cpu="2", node_selector=pin, priority_class=high, scheduler_name=b_name)

    async def told() -> bool:
        return await _unschedulable(env, "high-b")

    await env.until(s, told)
    assert set(await env.bound()) == {"low"}
    # A preempts for its own
    await env.pod("high-a", cpu="2", node_selector=pin, priority_class=high, scheduler_name=a_name)
    await env.until(s, lambda: _has(env, "high-a"))
    assert "low" not in await env.pods()
    assert "high-b" not in await env.bound()
    assert (await _reporters(env, s, "Preempted")) == {"low": a_name}


async def _has(env: Env, pod: str) -> bool:
    return pod in await env.bound()


# ---- 6. configuration ------------------------------------------------------------------------


def test_frameworks_by_name_in_file_order_with_their_own_plugins() -> None:
    loaded = parse_config({**API, "profiles": [{"schedulerName": "a"}, {"schedulerName": "b"}]})
    assert list(loaded.frameworks) == ["a", "b"]
    assert loaded.scheduler.scheduler_name == "a"
    assert loaded.framework is loaded.frameworks["a"]
    a, b = loaded.frameworks.values()
    assert {id(p) for p in a.plugins()}.isdisjoint(id(p) for p in b.plugins())
    one = parse_config({**API})
    assert list(one.frameworks) == ["workloadbuilder-scheduler"]


@pytest.mark.parametrize(
    ("profiles", "message"),
    [
        ([{"schedulerName": "a"}, {}], "profiles[1].schedulerName: Required value"),
        ([{"schedulerName": ""}], "profiles[0].schedulerName: Required value"),
        (
            [{"schedulerName": "a"}, {"schedulerName": "b"}, {"schedulerName": "a"}],
            "profiles[2].schedulerName: Duplicate value: 'a'",
        ),
        (
            [
                {"schedulerName": "a", "plugins": {"queueSort": {"enabled": [{"name": "X"}]}}},
            ],
            "profiles[0].plugins.queueSort.enabled[0].name: queue sort plugin 'X' is not supported",
        ),
        (
            [{"schedulerName": "a", "plugins": {"queueSort": {"disabled": [{"name": "*"}]}}}],
            "profiles[0].plugins.queueSort: a queue sort plugin is required",
        ),
        (
            [
                {
                    "schedulerName": "a",
                    "plugins": {"queueSort": {"enabled": [{"name": "PrioritySort"}]}},
                },
                {"schedulerName": "b"},
            ],
            "profiles[1].plugins.queueSort: Invalid value: {}: must be the same for all profiles",
        ),
        (
            [
                {"schedulerName": "a"},
                {
                    "schedulerName": "b",
                    "plugins": {"filter": {"enabled": [{"name": "Nope"}]}},
                },
            ],
            "profiles[1].plugins.filter.enabled[0].name: unknown plugin 'Nope'",
        ),
    ],
)
def test_profile_errors_name_the_field(profiles: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({**API, "profiles": profiles})
    assert f"config: {message}" in str(info.value)


def test_the_same_queue_sort_everywhere_is_accepted() -> None:
    sort = {"queueSort": {"enabled": [{"name": "PrioritySort"}]}}
    loaded = parse_config(
        {
            **API,
            "profiles": [
                {"schedulerName": "a", "plugins": sort},
                {"schedulerName": "b", "plugins": sort},
            ],
        }
    )
    assert list(loaded.frameworks) == ["a", "b"]


def test_the_command_reads_every_profile_and_names_the_bad_field(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse

    import yaml

    from workloadbuilder.cli import main
    from workloadbuilder.scheduler.cli import register

    two = tmp_path / "two.yaml"
    two.write_text(yaml.safe_dump({**API, "profiles": PROFILES_AB}))
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    from workloadbuilder.scheduler.cli import _settings  # the file, without a cluster

    loaded = _settings(parser.parse_args(["scheduler", "--config", str(two)]))
    assert list(loaded.frameworks) == ["a", "b"]
    assert loaded.scheduler.scheduler_name == "a" and loaded.scheduler.preemption
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**API, "profiles": [{"schedulerName": "a"}] * 2}))
    assert main(["scheduler", "--config", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {bad}: profiles[1].schedulerName: Duplicate value: 'a'")
    assert "Traceback" not in err


PROFILES_AB = [{"schedulerName": "a"}, {"schedulerName": "b", **PACKER}]


def test_scheduler_takes_the_frameworks_of_its_profiles() -> None:
    from workloadbuilder.cluster import MemoryCluster

    cluster = MemoryCluster()
    a, b = default_framework(), default_framework()
    s = Scheduler(cluster, frameworks={"a": a, "b": b})
    assert s.config.scheduler_name == "a" and s.framework is a
    assert s.cache.scheduler_names == frozenset({"a", "b"})
    with pytest.raises(ValueError, match="not both"):
        Scheduler(cluster, framework=a, frameworks={"a": a})
    with pytest.raises(ValueError, match="its own Framework"):
        Scheduler(cluster, frameworks={"a": a, "b": a})
    with pytest.raises(ValueError, match="not one of the profiles"):
        from workloadbuilder.scheduler import SchedulerConfig

        Scheduler(cluster, SchedulerConfig(scheduler_name="c"), frameworks={"a": a})
    with pytest.raises(ValueError, match="at least one"):
        Scheduler(cluster, frameworks={})
    one = Scheduler(cluster, framework=Framework())
    assert list(one.frameworks) == ["workloadbuilder-scheduler"]


# ---- the command ---------------------------------------------------------------------------


@pytest.mark.controlplane
async def test_the_scheduler_command_serves_every_profile_of_its_file(
    control_plane: Any, tmp_path: Any
) -> None:
    """``workloadbuilder scheduler --config FILE`` with two profiles: one process binds the
    pods of both (B's on the tainted node only B may use)."""
    import asyncio
    import contextlib
    import signal
    import subprocess
    import sys
    from pathlib import Path

    import yaml

    from workloadbuilder.cluster import KubeCluster
    from workloadbuilder.errors import NotFound

    ns = control_plane.create_namespace("profcli-")
    a_name, b_name = f"wb-{ns}", f"wb-{ns}-packer"
    doc = {**API, "profiles": [{"schedulerName": a_name}, {"schedulerName": b_name, **PACKER}]}
    config = tmp_path / "sched.yaml"
    config.write_text(yaml.safe_dump(doc))
    kube = KubeCluster.from_kubeconfig(control_plane.kubeconfig)
    nodes = {"plain": f"{ns}-plain", "tainted": f"{ns}-tainted"}
    cli = str(Path(sys.executable).parent / "workloadbuilder")
    proc = subprocess.Popen(
        [
            cli,
            "scheduler",
            "--config",
            str(config),
            "--metrics-port",
            "0",
            "--kubeconfig",
            str(control_plane.kubeconfig),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for kind, node in nodes.items():
            spec = {"taints": [TAINT]} if kind == "tainted" else {}
            meta = {"name": node, "labels": {"profiles-test": node}}
            await kube.create({"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec})
            alloc = {"cpu": "4", "memory": "8Gi", "pods": "110"}
            status = {"allocatable": alloc, "capacity": alloc}
            await kube.patch("Node", node, {"status": status}, subresource="status")
        for pod, profile, node in (("a", a_name, "plain"), ("b", b_name, "tainted")):
            spec = {
                "schedulerName": profile,
                "nodeSelector": {"profiles-test": nodes[node]},
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
            }
            meta = {"name": pod, "namespace": ns}
            await kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while True:
            assert proc.poll() is None, proc.communicate()
            got = {}
            for pod in ("a", "b"):
                obj = await kube.get("Pod", pod, ns)
                assert isinstance(obj, dict)
                got[pod] = obj["spec"].get("nodeName")
            if got == {"a": nodes["plain"], "b": nodes["tainted"]}:
                break
            assert loop.time() < deadline, got
            await asyncio.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(proc.wait, 30)
        _, err = proc.communicate()
        assert code == 0, err
        assert f"in {a_name}, {b_name} (one profile each)" in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pod in ("a", "b"):
            with contextlib.suppress(NotFound):
                await kube.delete("Pod", pod, ns, grace_period_seconds=0)
        for node in nodes.values():
            with contextlib.suppress(NotFound):
                await kube.delete("Node", node)
        await kube.close()


async def test_profiles_share_the_namespace_and_controller_views(env: Env) -> None:
    """Each profile's InterPodAffinity and PodTopologySpread (default constraints) read the
    one Namespace view and the one Service / controller store the scheduler feeds: a label
    a Namespace informer brings is seen by both profiles, a Service by both."""
    from workloadbuilder.scheduler._podconstraints import InterPodAffinity
    from workloadbuilder.scheduler._podtopologyspread import PodTopologySpread

    s = _scheduler(env, _loaded(env))
    await s.start()
    affinities = [
        p for fw in s.frameworks.values() for p in fw.reserve if isinstance(p, InterPodAffinity)
    ]
    spreads = [
        p for fw in s.frameworks.values() for p in fw.reserve if isinstance(p, PodTopologySpread)
    ]
    assert len(affinities) == len(spreads) == 2
    assert affinities[0] is not affinities[1]  # one plugin per profile...
    assert affinities[0].namespaces is affinities[1].namespaces  # ...one Namespace view
    assert spreads[0] is not spreads[1]
    assert spreads[0].controllers is spreads[1].controllers
