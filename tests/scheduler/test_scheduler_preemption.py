"""Workload-aware preemption (the DefaultPreemption PodGroupPostFilter plugin), on MemoryCluster
and on the real v1.37.2 API server: victims strictly lower in priority, whole units for
``disruptionMode: all``, no preemption unless the quorum then fits, ``preemptionPolicy: Never``,
the fewest units (reprieve most important first), actuation (``DisruptionTarget``, ``Preempted``
event, deletion, ``nominatedNodeName``), waiting for terminating victims, and the freed room
kept for the preemptor."""

from __future__ import annotations

from typing import Any

import attrs
from sched_helpers import Env
from waits import priority_class_admitted

from workloadbuilder.api import PodGroup, from_dict
from workloadbuilder.runtime import ManualClock
from workloadbuilder.scheduler import Scheduler, SchedulerConfig
from workloadbuilder.scheduler._metrics import PODGROUP_PREEMPTION_ATTEMPTS
from workloadbuilder.scheduler._plugins import default_framework
from workloadbuilder.scheduler.explain import explain_report, render_explain
from workloadbuilder.testing.builders import (
    make_composite_pod_group,
    make_pod,
    make_pod_group,
    make_priority_class,
)


async def _group(
    env: Env,
    name: str,
    min_count: int,
    *,
    priority_class: str | None = None,
    mode: str | None = None,
    group_class: str | None = None,
    policy: str | None = None,
) -> None:
    pg = make_pod_group(name, env.namespace).gang(min_count)
    if group_class or priority_class:
        pg.priority_class(group_class or priority_class or "")
    if mode:
        pg.disruption_mode(mode)
    if policy:
        pg.preemption_policy(policy)
    out = await env.cluster.create(from_dict(pg.obj(), PodGroup))
    assert isinstance(out, PodGroup)


async def _pod(
    env: Env,
    name: str,
    group: str | None = None,
    *,
    cpu: str = "1",
    priority_class: str | None = None,
    node: str | None = None,
    finalizer: bool = False,
    labels: dict[str, str] | None = None,
) -> None:
    pod = make_pod(name, env.namespace).scheduler_name(env.scheduler_name)
    pod.request("cpu", cpu).request("memory", "1Gi")
    if group:
        pod.pod_group(group)
    if priority_class:
        pod.priority_class(priority_class)
    if node:
        pod.node_name(node)
    obj = pod.obj()
    if labels:
        obj["metadata"].setdefault("labels", {}).update(labels)
    # no kubelet: a victim must go at once (as in upstream's integration tests)
    obj["spec"]["terminationGracePeriodSeconds"] = 0
    if finalizer:
        obj["metadata"]["finalizers"] = ["example.com/hold"]
    await env.cluster.create(obj)


async def _gang(env: Env, name: str, size: int, min_count: int | None = None, **kw: Any) -> None:
    pods = {k: kw.pop(k) for k in ("cpu",) if k in kw}
    await _group(env, name, min_count or size, **kw)
    kw.pop("group_class", None)
    kw.pop("policy", None)
    for i in range(size):
        await _pod(env, f"{name}-{i}", name, priority_class=kw.get("priority_class"), **pods)


async def _bound(env: Env, prefix: str) -> int:
    return len(await env.bound(prefix))


async def _names(env: Env, prefix: str) -> set[str]:
    return {n for n in await env.pods() if n.startswith(prefix)}


async def _never_class(env: Env, name: str, value: int) -> str:
    """A PriorityClass with ``preemptionPolicy: Never`` (admission copies it into the pods'
    and PodGroups' ``preemptionPolicy``; it cannot be set there directly)."""
    full = f"{env.prefix}{name}"
    await env.cluster.create(make_priority_class(full, value).preemption_policy("Never").obj())
    env.priority_classes.append(full)
    await priority_class_admitted(env.cluster, env.namespace, full)
    return full


async def _attempted(env: Env, s: Scheduler, name: str) -> None:
    """Schedule until the group's cycle has written its condition."""

    async def written() -> bool:
        return await env.group_condition(name) is not None

    await env.until(s, written)


async def _prio(env: Env) -> tuple[str, str]:
    return await env.priority_class("low", 10), await env.priority_class("high", 1000)


async def _run_low(env: Env, s: Scheduler, name: str, size: int, **kw: Any) -> None:
    await _gang(env, name, size, **kw)

    async def placed() -> bool:
        return await _bound(env, f"{name}-") == size

    await env.until(s, placed)


async def test_high_priority_gang_preempts_a_lower_priority_gang(env: Env) -> None:
    low, high = await _prio(env)
    await env.node("a", cpu="4")
    s = env.scheduler(preemption=True)
    await _run_low(env, s, "low", 4, priority_class=low, mode="all")
    await _gang(env, "high", 2, priority_class=high)

    async def done() -> bool:
        return await _bound(env, "high-") == 2

    await env.until(s, done)
    # disruptionMode all: the whole gang is one unit, though 2 pods would have made room
    assert await _names(env, "low-") == set()
    cond = await env.group_condition("high")
    assert cond.status == "True"


async def test_single_mode_victims_are_the_later_started_pods(env: Env) -> None:
    low, high = await _prio(env)
    await env.node("a", cpu="4")
    s = env.scheduler(preemption=True)
    await _run_low(env, s, "low", 4, min_count=2, priority_class=low)
    await _gang(env, "high", 2, priority_class=high)

    async def done() -> bool:
        return await _bound(env, "high-") == 2

    await env.until(s, done)
    # single pods are separate units: the fewest, later-started first (older reprieved);
    # the victims may leave their gang below minCount
    assert await _names(env, "low-") == {"low-0", "low-1"}


async def test_no_preemption_when_the_quorum_still_does_not_fit(env: Env) -> None:
    low, high = await _prio(env)
    await env.node("a", cpu="4")
    s = env.scheduler(preemption=True)
    await _run_low(env, s, "low", 2, priority_class=low)
    await _gang(env, "high", 6, priority_class=high)
    await _attempted(env, s, "high")
    assert await _bound(env, "low-") == 2
    assert await _bound(env, "high-") == 0
    why = s.explanations[(env.namespace, "high")]
    assert "preemption would not help" in why


async def test_equal_or_higher_priority_is_never_a_victim(env: Env) -> None:
    low, high = await _prio(env)
    await env.node("a", cpu="4")
    s = env.scheduler(preemption=True)
    await _run_low(env, s, "peer", 2, priority_class=high)
    await _run_low(env, s, "cheap", 2, priority_class=low)
    await _gang(env, "high", 4, priority_class=high)
    await _attempted(env, s, "high")
    # the low gang alone would not make room for 4: nothing is preempted
    assert await _bound(env, "peer-") == 2
    assert await _bound(env, "cheap-") == 2
    assert await _bound(env, "high-") == 0


async def test_preemption_policy_never(env: Env) -> None:
    low, _ = await _prio(env)
    never = await _never_class(env, "high-never", 1000)
    await env.node("a", cpu="4")
    s = env.scheduler(preemption=True)
    await _run_low(env, s, "low", 4, priority_class=low)
    # (v1.37 defaults a PodGroup's policy to PreemptLowerPriority before the Priority
    # admission plugin compares it with the class's: Never must be given explicitly)
    await _gang(env, "high", 2, priority_class=never, policy="Never")

    async def written() -> bool:
        cond = await env.group_condition("high")
        return cond is not None and "Never" in (cond.message or "")

    await env.until(s, written)
    assert await _bound(env, "low-") == 4
    assert await _bound(env, "high-") == 0
    assert "preemptionPolicy Never" in s.explanations[(env.namespace, "high")]
    report = await explain_report(env.cluster, "high", env.namespace)
    assert "Preemption: not eligible: preemptionPolicy Never" in render_explain(report)


async def test_pod_and_group_preemption_policies_must_agree(env: Env) -> None:
    """kube-scheduler v1.37.2 does not let the PodGroup's policy override its pods': a
    mismatch is a SchedulerError (seen in the parity test)."""
    low, high = await _prio(env)
    never = await _never_class(env, "high-never", 1000)
    await env.node("a", cpu="4")
    s = env.scheduler(preemption=True)
    await _run_low(env, s, "low", 4, priority_class=low)
    await _gang(env, "high", 2, priority_class=high, group_class=never, policy="Never")

    async def written() -> bool:
        return await env.group_condition("high") is not None

    await env.until(s, written)
    cond = await env.group_condition("high")
    assert (cond.status, cond.reason) == ("False", "SchedulerError")
    assert cond.message == (
        "pod 'high-0' has preemptionPolicy PreemptLowerPriority but pod group 'high' has "
        "preemptionPolicy Never"
    )
    assert await _bound(env, "low-") == 4


async def test_explain_no_lower_priority_units(env: Env) -> None:
    _, high = await _prio(env)
    await env.node("a", cpu="2")
    s = env.scheduler(preemption=True)
    await _gang(env, "high", 3, priority_class=high)

    async def written() -> bool:
        return await env.group_condition("high") is not None

    await env.until(s, written)
    report = await explain_report(env.cluster, "high", env.namespace)
    assert report["preemption"] == "no lower-priority units"


async def test_actuation_marks_deletes_and_nominates(env: Env) -> None:
    low, high = await _prio(env)
    node = await env.node("a", cpu="2")
    s = env.scheduler(preemption=True)
    await _pod(env, "victim", cpu="2", priority_class=low, node=node, finalizer=True)
    await _gang(env, "high", 2, priority_class=high)
    await s.until_idle()
    await env.seen(
        s, lambda: bool((p := s.cache.pods.get((env.namespace, "victim"))) and p.deleting)
    )
    victim = (await env.pods())["victim"]
    assert victim["metadata"].get("deletionTimestamp")
    conds = {c["type"]: c for c in victim["status"].get("conditions") or ()}
    assert conds["DisruptionTarget"]["reason"] == "PreemptionByScheduler"
    pods = await env.pods()
    assert {pods[f"high-{i}"]["status"].get("nominatedNodeName") for i in range(2)} == {node}
    events = (await env.cluster.list("Event", env.namespace)).items
    assert any(
        e["reason"] == "Preempted" and e["involvedObject"]["name"] == "victim"
        for e in events
        if isinstance(e, dict)
    )

    # while the victim terminates the group waits (no new preemption)
    async def waiting() -> bool:
        return "waiting for 1 victim to terminate" in s.explanations[(env.namespace, "high")]

    await env.until(s, waiting)

    async def written() -> bool:
        cond = await env.group_condition("high")
        return cond is not None and "waiting for" in (cond.message or "")

    await env.until(s, written)
    report = await explain_report(env.cluster, "high", env.namespace)
    assert report["preemption"] == "waiting for 1 victim to terminate"
    assert await _bound(env, "high-") == 0
    await env.cluster.patch("Pod", "victim", {"metadata": {"finalizers": None}}, env.namespace)

    async def done() -> bool:
        return await _bound(env, "high-") == 2

    await env.until(s, done)


async def test_freed_room_is_not_taken_by_lower_priority_work(
    mem_env: tuple[Env, ManualClock],
) -> None:
    env, clock = mem_env
    low, high = await _prio(env)
    node = await env.node("a", cpu="2")
    s = env.scheduler(clock=clock, preemption=True)
    await _pod(env, "victim", cpu="2", priority_class=low, node=node)
    await _gang(env, "high", 2, priority_class=high)
    before = PODGROUP_PREEMPTION_ATTEMPTS._value.get()
    await s.until_idle()
    assert PODGROUP_PREEMPTION_ATTEMPTS._value.get() == before + 1
    assert "victim" not in await env.pods()
    # the preemptor is backing off; a low-priority pod arrives and finds the room held
    await _pod(env, "late", cpu="1", priority_class=low)
    await s.until_idle()
    assert await env.bound("late") == {}
    clock.advance(30)
    await s.until_idle()
    assert await _bound(env, "high-") == 2
    assert await env.bound("late") == {}


async def test_preemption_can_be_disabled_in_the_profile(
    mem_env: tuple[Env, ManualClock],
) -> None:
    env, clock = mem_env
    low, high = await _prio(env)
    node = await env.node("a", cpu="2")
    fw = default_framework()
    fw.pod_group_post_filter.clear()
    s = Scheduler(env.cluster, SchedulerConfig(preemption=True), clock=clock, framework=fw)
    env.schedulers.append(s)
    await _pod(env, "victim", cpu="2", priority_class=low, node=node)
    await _gang(env, "high", 2, priority_class=high)
    await s.until_idle()
    assert "victim" in await env.pods()
    assert await _bound(env, "high-") == 0


async def test_preemption_is_opt_in_in_process(mem_env: tuple[Env, ManualClock]) -> None:
    env, clock = mem_env
    low, high = await _prio(env)
    node = await env.node("a", cpu="2")
    s = env.scheduler(clock=clock)  # SchedulerConfig.preemption defaults to False
    await _pod(env, "victim", cpu="2", priority_class=low, node=node)
    await _gang(env, "high", 2, priority_class=high)
    await s.until_idle()
    assert "victim" in await env.pods()


RACK = "topology.kubernetes.io/rack"


async def _rack_scenario(env: Env, s: Scheduler) -> None:
    """r1: one 4-cpu pod of priority 500 (1 unit); r2: two 2-cpu pods of priority 10 (2
    units); a high-priority gang of 2 x 2 cpu constrained to one rack."""
    mid = await env.priority_class("mid", 500)
    low, high = await _prio(env)
    n1 = await env.node("r1-n", cpu="4", labels={RACK: "r1"})
    n2 = await env.node("r2-n", cpu="4", labels={RACK: "r2"})
    await _pod(env, "v-r1", cpu="4", priority_class=mid, node=n1)
    await _pod(env, "v-r2-0", cpu="2", priority_class=low, node=n2)
    await _pod(env, "v-r2-1", cpu="2", priority_class=low, node=n2)
    pg = make_pod_group("high", env.namespace).gang(2).priority_class(high).topology(RACK)
    await env.cluster.create(from_dict(pg.obj(), PodGroup))
    for i in range(2):
        await _pod(env, f"high-{i}", "high", cpu="2", priority_class=high)

    async def done() -> bool:
        return await _bound(env, "high-") == 2

    await env.until(s, done)


async def test_topology_aware_choice_takes_the_cheapest_domain(env: Env) -> None:
    s = env.scheduler(preemption=True)
    await _rack_scenario(env, s)
    # fewest units first: r1's one pod goes (though of higher priority), r2 stays
    assert await _names(env, "v-") == {"v-r2-0", "v-r2-1"}
    assert set((await env.bound("high-")).values()) == {env.node_name("r1-n")}


async def test_topology_choice_by_priority_when_units_tie(env: Env) -> None:
    mid = await env.priority_class("mid", 500)
    low, high = await _prio(env)
    n1 = await env.node("r1-n", cpu="4", labels={RACK: "r1"})
    n2 = await env.node("r2-n", cpu="4", labels={RACK: "r2"})
    await _pod(env, "v-r1", cpu="4", priority_class=mid, node=n1)
    await _pod(env, "v-r2", cpu="4", priority_class=low, node=n2)
    pg = make_pod_group("high", env.namespace).gang(2).priority_class(high).topology(RACK)
    await env.cluster.create(from_dict(pg.obj(), PodGroup))
    for i in range(2):
        await _pod(env, f"high-{i}", "high", cpu="2", priority_class=high)
    s = env.scheduler(preemption=True)

    async def done() -> bool:
        return await _bound(env, "high-") == 2

    await env.until(s, done)
    assert await _names(env, "v-") == {"v-r1"}
    assert set((await env.bound("high-")).values()) == {n2}


async def test_upstream_topology_mode_frees_one_rack(env: Env) -> None:
    fw = default_framework()
    for p in fw.pod_group_post_filter:
        p.topology_aware = False  # type: ignore[attr-defined]
    s = Scheduler(
        env.cluster,
        SchedulerConfig(scheduler_name=env.scheduler_name, preemption=True),
        framework=fw,
    )
    env.schedulers.append(s)
    await _rack_scenario(env, s)
    left = await _names(env, "v-")
    assert left in ({"v-r1"}, {"v-r2-0", "v-r2-1"})  # one rack freed, whichever scored best


def test_topology_aware_is_configurable(tmp_path: Any) -> None:
    from workloadbuilder.scheduler import load_config

    path = tmp_path / "sched.yaml"
    path.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "profiles:\n- pluginConfig:\n  - name: DefaultPreemption\n"
        "    args: {topologyAware: false}\n"
    )
    fw = load_config(path).framework
    assert [(p.name, getattr(p, "topology_aware", None)) for p in fw.pod_group_post_filter] == [
        ("DefaultPreemption", False)
    ]
    path.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "profiles:\n- plugins:\n    podGroupPostFilter: {disabled: [{name: DefaultPreemption}]}\n"
    )
    assert load_config(path).framework.pod_group_post_filter == []


class _NoDelete:
    """A cluster that refuses pod deletes (a scheduler without the ``delete pods`` rule)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.refused = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def delete(self, kind: Any, name: str, *args: Any, **kw: Any) -> None:
        from workloadbuilder.errors import Forbidden

        if kind == "Pod":
            self.refused += 1
            raise Forbidden(f'pods "{name}" is forbidden')
        await self._inner.delete(kind, name, *args, **kw)


async def test_a_refused_preemption_does_not_leave_the_group_waiting(
    mem_env: tuple[Env, ManualClock],
) -> None:
    env, clock = mem_env
    low, high = await _prio(env)
    node = await env.node("a", cpu="2")
    await _pod(env, "victim", cpu="2", priority_class=low, node=node)
    await _gang(env, "high", 2, priority_class=high)
    wrapped = _NoDelete(env.cluster)
    s = Scheduler(
        wrapped,  # type: ignore[arg-type]
        SchedulerConfig(preemption=True),
        clock=clock,
    )
    env.schedulers.append(s)
    await s.until_idle()
    assert wrapped.refused == 1
    assert "victim" in await env.pods()
    assert s.cache.nominations == {}
    clock.advance(30)  # the retry preempts again (and is refused again), it does not wait
    await s.until_idle()
    assert wrapped.refused == 2
    assert "waiting for" not in s.explanations[("default", "high")]


async def test_single_pod_preempts_one_pod_of_a_single_mode_gang(env: Env) -> None:
    low, high = await _prio(env)
    await env.node("a", cpu="4")
    s = env.scheduler(preemption=True)
    await _run_low(env, s, "low", 4, min_count=2, priority_class=low)
    await _pod(env, "hp", priority_class=high)

    async def done() -> bool:
        return bool(await env.bound("hp"))

    await env.until(s, done)
    assert len(await _names(env, "low-")) == 3


async def test_single_pod_preempts_a_disruption_mode_all_gang_whole(env: Env) -> None:
    low, high = await _prio(env)
    await env.node("a", cpu="4")
    s = env.scheduler(preemption=True)
    await _run_low(env, s, "low", 4, priority_class=low, mode="all")
    await _pod(env, "hp", priority_class=high)

    async def done() -> bool:
        return bool(await env.bound("hp"))

    await env.until(s, done)
    assert await _names(env, "low-") == set()  # a pod of an `all` group goes with its group


# ---- PodDisruptionBudgets ------------------------------------------------------------------


async def _pdb(
    env: Env, s: Scheduler, name: str, match: dict[str, str], allowed: int | None = None
) -> None:
    """A PodDisruptionBudget over ``match``; ``allowed``: its ``status.disruptionsAllowed``
    as the disruption controller would write it (no status: 0). Waits until ``s`` sees it."""
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": env.namespace},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": match}},
    }
    await env.cluster.create(pdb)
    if allowed is not None:
        status = {
            "disruptionsAllowed": allowed,
            "currentHealthy": allowed + 1,
            "desiredHealthy": 1,
            "expectedPods": allowed + 1,
        }
        await env.cluster.patch(
            "PodDisruptionBudget", name, {"status": status}, env.namespace, subresource="status"
        )
    want = 0 if allowed is None else allowed

    def seen() -> bool:
        b = s.cache.budgets.get((env.namespace, name))
        return b is not None and b.allowed == want

    await env.seen(s, seen)


async def _labelled_gang(
    env: Env,
    s: Scheduler,
    name: str,
    labels: list[dict[str, str]],
    *,
    min_count: int = 1,
    priority_class: str,
    mode: str | None = None,
) -> None:
    """A running gang, pod ``i`` labelled ``labels[i]`` (created in order: older first)."""
    await _group(env, name, min_count, priority_class=priority_class, mode=mode)
    for i, lab in enumerate(labels):
        await _pod(env, f"{name}-{i}", name, priority_class=priority_class, labels=lab)
    size = len(labels)

    async def placed() -> bool:
        return await _bound(env, f"{name}-") == size

    await env.until(s, placed)


async def test_pdb_protected_pods_are_reprieved_first(env: Env) -> None:
    """Without the budget the later-started low-2 and low-3 would go (as in
    test_single_mode_victims_are_the_later_started_pods); the budget (no status: no
    disruption allowed) protects them, so the older, unprotected low-0 and low-1 go."""
    low, high = await _prio(env)
    await env.node("a", cpu="4")
    s = env.scheduler(preemption=True)
    keep = {"budget": "keep"}
    await _labelled_gang(env, s, "low", [{}, {}, keep, keep], priority_class=low)
    await _pdb(env, s, "keep", keep)
    await _gang(env, "high", 2, priority_class=high)

    async def done() -> bool:
        return await _bound(env, "high-") == 2

    await env.until(s, done)
    assert await _names(env, "low-") == {"low-2", "low-3"}


async def test_pdb_disruptions_allowed_are_spent_in_importance_order(env: Env) -> None:
    """One budget over all four pods allowing 2 disruptions: the two most important (the
    older low-0, low-1) use the allowance, low-2 and low-3 would violate it and are reprieved
    first: low-0 and low-1 are preempted."""
    low, high = await _prio(env)
    await env.node("a", cpu="4")
    s = env.scheduler(preemption=True)
    app = {"app": "low"}
    await _labelled_gang(env, s, "low", [app] * 4, priority_class=low)
    await _pdb(env, s, "app", app, allowed=2)
    await _gang(env, "high", 2, priority_class=high)

    async def done() -> bool:
        return await _bound(env, "high-") == 2

    await env.until(s, done)
    assert await _names(env, "low-") == {"low-2", "low-3"}


async def test_pdb_is_a_preference_not_a_guarantee(env: Env) -> None:
    """A gang that needs every low pod preempts the protected ones too."""
    low, high = await _prio(env)
    await env.node("a", cpu="4")
    s = env.scheduler(preemption=True)
    keep = {"budget": "keep"}
    await _labelled_gang(env, s, "low", [keep] * 4, priority_class=low)
    await _pdb(env, s, "keep", keep)
    await _gang(env, "high", 4, priority_class=high)

    async def done() -> bool:
        return await _bound(env, "high-") == 4

    await env.until(s, done)
    assert await _names(env, "low-") == set()


async def test_pdb_makes_a_whole_disruption_mode_all_unit_violating(env: Env) -> None:
    """Two equal low gangs (disruptionMode all) of 2: the older one is more important, so
    without budgets the newer one ("b") goes; one protected pod in "b" makes the whole unit
    violating, so "a" goes instead."""
    low, high = await _prio(env)
    await env.node("a", cpu="4")
    s = env.scheduler(preemption=True)
    keep = {"budget": "keep"}
    await _labelled_gang(env, s, "a", [{}, {}], min_count=2, priority_class=low, mode="all")
    await _labelled_gang(env, s, "b", [{}, keep], min_count=2, priority_class=low, mode="all")
    await _pdb(env, s, "keep", keep)
    await _gang(env, "high", 2, priority_class=high)

    async def done() -> bool:
        return await _bound(env, "high-") == 2

    await env.until(s, done)
    assert await _names(env, "a-") == set()
    assert await _names(env, "b-") == {"b-0", "b-1"}


async def test_single_pod_prefers_the_node_without_pdb_violations(env: Env) -> None:
    """Two 1-cpu nodes, each full with one low pod; the one on the first node is protected:
    a high-priority pod preempts the other (without the budget the first node would win the
    tie)."""
    low, high = await _prio(env)
    n1 = await env.node("a", cpu="1")
    n2 = await env.node("b", cpu="1")
    s = env.scheduler(preemption=True)
    keep = {"budget": "keep"}
    await _pod(env, "low-a", priority_class=low, node=n1, labels=keep)
    await _pod(env, "low-b", priority_class=low, node=n2, labels={"budget": "other"})
    await s.sync()
    await _pdb(env, s, "keep", keep)
    await _pod(env, "hp", priority_class=high)

    async def done() -> bool:
        return bool(await env.bound("hp"))

    await env.until(s, done)
    assert await _names(env, "low-") == {"low-a"}
    assert await env.bound("hp") == {"hp": n2}


def test_budget_violation_split_follows_upstream_rules() -> None:
    """The classification alone: namespaces, empty selectors, ``disruptedPods``, unlabelled
    pods, and a unit counted once per violating pod."""
    from workloadbuilder.scheduler._pdb import disruption_budget, split_by_budget_violation

    @attrs.frozen
    class P:
        namespace: str
        name: str
        labels: dict[str, str]

    @attrs.frozen
    class U:
        pods: tuple[P, ...]

    def pdb(name: str, sel: Any, allowed: int = 0, disrupted: tuple[str, ...] = ()) -> Any:
        return disruption_budget(
            {
                "metadata": {"name": name, "namespace": "ns"},
                "spec": {"selector": sel},
                "status": {
                    "disruptionsAllowed": allowed,
                    "disruptedPods": dict.fromkeys(disrupted, "t"),
                },
            }
        )

    a = {"app": "a"}
    u1 = U((P("ns", "p1", a),))
    u2 = U((P("ns", "p2", a), P("ns", "p3", a)))
    u3 = U((P("other", "p4", a),))  # another namespace
    u4 = U((P("ns", "p5", {}),))  # no labels: never violating
    budgets = [pdb("b", {"matchLabels": a}, allowed=1)]
    violating, fine = split_by_budget_violation([u1, u2, u3, u4], budgets)
    assert violating == [(u2, 2)]
    assert fine == [u1, u3, u4]
    # a pod already in disruptedPods is not counted again
    budgets = [pdb("b", {"matchLabels": a}, allowed=0, disrupted=("p1",))]
    assert split_by_budget_violation([u1], budgets) == ([], [u1])
    # empty and invalid selectors select nothing
    for sel in ({}, None, {"matchExpressions": [{"key": "app", "operator": "Bogus"}]}):
        assert split_by_budget_violation([u1], [pdb("e", sel)]) == ([], [u1])
    expr = {"matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "b"]}]}
    assert split_by_budget_violation([u1], [pdb("x", expr)]) == ([(u1, 1)], [])


# ---- CompositePodGroup trees ----------------------------------------------------------------


async def _tree(
    env: Env,
    name: str,
    children: dict[str, tuple[int, str]],
    *,
    priority_class: str,
    min_group_count: int | None = None,
    mode: str | None = None,
    topology: str | None = None,
    child_mode: str | None = None,
) -> None:
    """A CompositePodGroup ``name`` of gang children ``{child: (pods, cpu)}`` (minCount =
    pods), every level and pod of ``priority_class``."""
    cpg = make_composite_pod_group(name, env.namespace)
    cpg.gang(min_group_count or len(children)).priority_class(priority_class)
    if mode:
        cpg.disruption_mode(mode)
    if topology:
        cpg.topology(topology)
    await env.cluster.create(cpg.obj())
    for child, (size, cpu) in children.items():
        pg = make_pod_group(child, env.namespace).parent(name).workload_ref(name, child)
        pg.gang(size).priority_class(priority_class)
        if child_mode:
            pg.disruption_mode(child_mode)
        await env.cluster.create(pg.obj())
        for i in range(size):
            await _pod(env, f"{child}-{i}", child, cpu=cpu, priority_class=priority_class)


async def test_composite_tree_preempts_a_lower_priority_gang(env: Env) -> None:
    """kube-scheduler v1.37.2 preempts for a root CompositePodGroup whose cycle failed (see
    the parity test CW1): the low gang (disruptionMode all) goes, both children bind."""
    low, high = await _prio(env)
    await env.node("a", cpu="4")
    s = env.scheduler(preemption=True)
    await _run_low(env, s, "low", 4, priority_class=low, mode="all")
    await _tree(env, "t", {"t-a": (1, "1"), "t-b": (1, "1")}, priority_class=high)

    async def done() -> bool:
        return await _bound(env, "t-") == 2

    await env.until(s, done)
    assert await _names(env, "low-") == set()


async def test_composite_tree_takes_the_fewest_single_pods(env: Env) -> None:
    low, high = await _prio(env)
    await env.node("a", cpu="4")
    s = env.scheduler(preemption=True)
    await _run_low(env, s, "low", 4, min_count=1, priority_class=low)
    await _tree(env, "t", {"t-a": (1, "1"), "t-b": (1, "1")}, priority_class=high)

    async def done() -> bool:
        return await _bound(env, "t-") == 2

    await env.until(s, done)
    assert await _names(env, "low-") == {"low-0", "low-1"}  # the later-started two went


async def test_composite_tree_with_disruption_mode_all_is_one_victim_unit(env: Env) -> None:
    """A low tree whose root says ``disruptionMode: all`` (its leaves single) goes whole
    for a high gang that needs one cpu; without ``all`` on the root one pod would do."""
    low, high = await _prio(env)
    await env.node("a", cpu="4")
    s = env.scheduler(preemption=True)
    await _tree(env, "lt", {"lt-a": (2, "1"), "lt-b": (2, "1")}, priority_class=low, mode="all")

    async def placed() -> bool:
        return await _bound(env, "lt-") == 4

    await env.until(s, placed)
    await _gang(env, "high", 1, priority_class=high)

    async def done() -> bool:
        return await _bound(env, "high-") == 1

    await env.until(s, done)
    assert await _names(env, "lt-") == set()


async def test_composite_tree_leaf_all_is_the_unit_below_a_single_root(env: Env) -> None:
    """The leaves say ``all``, the root nothing: each leaf is a unit; one leaf (2 pods)
    goes for a high gang of 1."""
    low, high = await _prio(env)
    await env.node("a", cpu="4")
    s = env.scheduler(preemption=True)
    await _tree(
        env, "lt", {"lt-a": (2, "1"), "lt-b": (2, "1")}, priority_class=low, child_mode="all"
    )

    async def placed() -> bool:
        return await _bound(env, "lt-") == 4

    await env.until(s, placed)
    await _gang(env, "high", 1, priority_class=high)

    async def done() -> bool:
        return await _bound(env, "high-") == 1

    await env.until(s, done)
    left = await _names(env, "lt-")
    assert left in ({"lt-a-0", "lt-a-1"}, {"lt-b-0", "lt-b-1"})


async def test_composite_tree_with_topology_frees_one_domain(env: Env) -> None:
    """r1: one mid-priority 4-cpu pod (1 unit); r2: two low 2-cpu pods (2 units); a
    rack-constrained high tree of two children (1 x 2 cpu each) frees r1, the cheaper domain
    in units (topology-aware choice)."""
    mid = await env.priority_class("mid", 500)
    low, high = await _prio(env)
    n1 = await env.node("r1-n", cpu="4", labels={RACK: "r1"})
    n2 = await env.node("r2-n", cpu="4", labels={RACK: "r2"})
    await _pod(env, "v-r1", cpu="4", priority_class=mid, node=n1)
    await _pod(env, "v-r2-0", cpu="2", priority_class=low, node=n2)
    await _pod(env, "v-r2-1", cpu="2", priority_class=low, node=n2)
    s = env.scheduler(preemption=True)
    await _tree(env, "t", {"t-a": (1, "2"), "t-b": (1, "2")}, priority_class=high, topology=RACK)

    async def done() -> bool:
        return await _bound(env, "t-") == 2

    await env.until(s, done)
    assert await _names(env, "v-") == {"v-r2-0", "v-r2-1"}
    assert set((await env.bound("t-")).values()) == {n1}


async def test_composite_tree_preemption_policy_never(env: Env) -> None:
    low, _ = await _prio(env)
    never = await _never_class(env, "high-never", 1000)
    await env.node("a", cpu="4")
    s = env.scheduler(preemption=True)
    await _run_low(env, s, "low", 4, priority_class=low)
    cpg = make_composite_pod_group("t", env.namespace).gang(1).priority_class(never).obj()
    cpg["spec"]["preemptionPolicy"] = "Never"
    await env.cluster.create(cpg)
    pg = make_pod_group("t-a", env.namespace).parent("t").workload_ref("t", "t-a")
    await env.cluster.create(pg.gang(1).priority_class(never).preemption_policy("Never").obj())
    await _pod(env, "t-a-0", "t-a", priority_class=never)

    async def written() -> bool:
        return "preemptionPolicy Never" in s.explanations.get((env.namespace, "t"), "")

    await env.until(s, written)
    assert await _bound(env, "low-") == 4


async def test_composite_tree_and_pod_preemption_policies_must_agree(env: Env) -> None:
    """The tree's root says Never, its leaf and pod PreemptLowerPriority: SchedulerError and
    nothing preempted, as kube-scheduler v1.37.2 (CW5 in test_scheduler_parity.py), the same
    rule as for a PodGroup and its pods."""
    low, high = await _prio(env)
    never = await _never_class(env, "high-never", 1000)
    await env.node("a", cpu="4")
    s = env.scheduler(preemption=True)
    await _run_low(env, s, "low", 4, priority_class=low)
    cpg = make_composite_pod_group("t", env.namespace).gang(1).priority_class(never).obj()
    cpg["spec"]["preemptionPolicy"] = "Never"
    await env.cluster.create(cpg)
    pg = make_pod_group("t-a", env.namespace).parent("t").workload_ref("t", "t-a")
    await env.cluster.create(pg.gang(1).priority_class(high).obj())
    await _pod(env, "t-a-0", "t-a", priority_class=high)

    async def written() -> bool:
        cond = await env.group_condition("t-a")
        return cond is not None and cond.reason == "SchedulerError"

    await env.until(s, written)
    cond = await env.group_condition("t-a")
    assert "preemptionPolicy PreemptLowerPriority" in cond.message
    assert "root 't' has preemptionPolicy Never" in cond.message
    assert await _bound(env, "low-") == 4


async def test_single_pod_preemption_metrics(mem_env: tuple[Env, ManualClock]) -> None:
    """Upstream's pod-level metrics: ``scheduler_preemption_attempts_total`` counts every
    preemption attempt of a pod that fits nowhere (eligible or not),
    ``scheduler_preemption_victims`` the pods chosen per preemption."""
    from workloadbuilder.scheduler._metrics import PREEMPTION_ATTEMPTS, REGISTRY

    env, clock = mem_env
    low, high = await _prio(env)
    never = await _never_class(env, "high-never", 1000)
    node = await env.node("a", cpu="2")
    s = env.scheduler(clock=clock, preemption=True)
    await _pod(env, "v0", priority_class=low, node=node)
    await _pod(env, "v1", priority_class=low, node=node)
    attempts = PREEMPTION_ATTEMPTS._value.get()
    victims = REGISTRY.get_sample_value("scheduler_preemption_victims_sum") or 0.0
    count = REGISTRY.get_sample_value("scheduler_preemption_victims_count") or 0.0
    await _pod(env, "nope", cpu="2", priority_class=never)
    await s.until_idle()
    assert PREEMPTION_ATTEMPTS._value.get() == attempts + 1  # not eligible: still counted
    assert REGISTRY.get_sample_value("scheduler_preemption_victims_count") == count
    await _pod(env, "hp", cpu="2", priority_class=high)
    await s.until_idle()
    assert PREEMPTION_ATTEMPTS._value.get() >= attempts + 2
    assert REGISTRY.get_sample_value("scheduler_preemption_victims_count") == count + 1
    assert REGISTRY.get_sample_value("scheduler_preemption_victims_sum") == victims + 2


async def test_composite_tree_waits_for_its_victims_and_nominates(env: Env) -> None:
    """A tree's preemption marks and deletes the victim, nominates the tree's pods, and
    the tree waits (no new preemption) while the victim terminates; every level's condition
    and ``explain podgroup`` say so."""
    low, high = await _prio(env)
    node = await env.node("a", cpu="2")
    s = env.scheduler(preemption=True)
    await _pod(env, "victim", cpu="2", priority_class=low, node=node, finalizer=True)
    await _tree(env, "t", {"t-a": (1, "1"), "t-b": (1, "1")}, priority_class=high)
    await s.until_idle()
    await env.seen(
        s, lambda: bool((p := s.cache.pods.get((env.namespace, "victim"))) and p.deleting)
    )
    pods = await env.pods()
    assert {pods[n]["status"].get("nominatedNodeName") for n in ("t-a-0", "t-b-0")} == {node}

    async def waiting() -> bool:
        return "waiting for 1 victim to terminate" in s.explanations.get((env.namespace, "t"), "")

    await env.until(s, waiting)

    async def leaf_says() -> bool:
        cond = await env.group_condition("t-a")
        return cond is not None and "waiting for 1 victim" in (cond.message or "")

    await env.until(s, leaf_says)
    report = await explain_report(env.cluster, "t-a", env.namespace)
    assert report["preemption"] == "waiting for 1 victim to terminate"
    assert await _bound(env, "t-") == 0
    await env.cluster.patch("Pod", "victim", {"metadata": {"finalizers": None}}, env.namespace)

    async def done() -> bool:
        return await _bound(env, "t-") == 2

    await env.until(s, done)


async def test_single_pod_sum_of_priorities_counts_every_victim(env: Env) -> None:
    """Upstream sums victim priorities offset by 2^31 each: node a's victims (5, 0, 0) sum
    higher than node b's (5, 5), so b is chosen (a plain sum would pick a)."""
    five = await env.priority_class("five", 5)
    zero = await env.priority_class("zero", 0)
    high = await env.priority_class("high", 1000)
    a = await env.node("a", cpu="3")
    b = await env.node("b", cpu="3")
    s = env.scheduler(preemption=True)
    await _pod(env, "a-5", priority_class=five, node=a)
    await _pod(env, "a-0", priority_class=zero, node=a)
    await _pod(env, "a-0b", priority_class=zero, node=a)
    await _pod(env, "b-5", cpu="1500m", priority_class=five, node=b)
    await _pod(env, "b-5b", cpu="1500m", priority_class=five, node=b)
    await _pod(env, "hp", cpu="3", priority_class=high)

    async def done() -> bool:
        return bool(await env.bound("hp"))

    await env.until(s, done)
    assert await env.bound("hp") == {"hp": b}
    assert await _names(env, "a-") == {"a-5", "a-0", "a-0b"}


async def test_single_pod_prefers_the_node_whose_victims_started_latest(
    mem_env: tuple[Env, ManualClock],
) -> None:
    """Everything else equal, upstream takes the node whose highest-priority victims started
    latest (the least work lost): the pod on b started later, so b goes (without the rule
    the first node, a, would)."""
    env, clock = mem_env
    low, high = await _prio(env)
    a = await env.node("a", cpu="1")
    b = await env.node("b", cpu="1")
    s = env.scheduler(clock=clock, preemption=True)
    await _pod(env, "low-a", priority_class=low, node=a)
    await s.sync()
    clock.advance(60)
    await _pod(env, "low-b", priority_class=low, node=b)
    await s.sync()
    await _pod(env, "hp", priority_class=high)
    await s.until_idle()
    clock.advance(30)
    await s.until_idle()
    assert await env.bound("hp") == {"hp": b}
    assert await _names(env, "low-") == {"low-a"}


async def _basic_group_grows(env: Env, s: Scheduler, clock: ManualClock | None) -> None:
    """A 3-cpu node full of priority-10 pods; a basic PodGroup of priority 100 gets one pod,
    which preempts one low pod; two more pods arrive while it is only nominated."""
    low, high = await env.priority_class("low", 10), await env.priority_class("high", 100)
    node = await env.node("a", cpu="3")
    for i in range(3):
        await _pod(env, f"low-{i}", cpu="1", priority_class=low, node=node)
    pg = make_pod_group("high", env.namespace).priority_class(high)
    await env.cluster.create(from_dict(pg.obj(), PodGroup))
    await _pod(env, "high-0", "high", cpu="1", priority_class=high)
    await s.until_idle()  # high-0's cycle: one low pod preempted, high-0 nominated
    assert len(await _names(env, "low-")) == 2
    for i in (1, 2):
        await _pod(env, f"high-{i}", "high", cpu="1", priority_class=high)

    start = clock.now() if clock is not None else 0.0

    async def done() -> bool:
        # past the retries' backoffs, far from the unschedulable pool's 300 s flush
        if clock is not None and clock.now() < start + 30:
            clock.advance(1)
        return await _bound(env, "high-") == 3

    await env.until(s, done)
    assert await _names(env, "low-") == set()


async def test_basic_group_preempts_for_pods_that_arrive_during_its_preemption(
    mem_env: tuple[Env, ManualClock],
) -> None:
    """conformance preemption/basic-group-grows, the case that failed every time on
    MemoryCluster: the cycle after high-0's victim went places high-0 only (a basic group
    succeeds with one pod); its leftovers are retried at once and preempt the two other low
    pods (kube-scheduler v1.37.2 binds all three, every run)."""
    env, clock = mem_env
    s = env.scheduler(clock=clock, preemption=True)
    await _basic_group_grows(env, s, clock)


async def test_basic_group_grows_by_preemption(env: Env) -> None:
    """The same on both backends with a real clock."""
    s = env.scheduler(preemption=True)
    await _basic_group_grows(env, s, None)


async def _started(env: Env, name: str, when: str) -> None:
    """What a kubelet reports once the pod runs: Running, Ready, ``status.startTime``."""
    pod = await env.cluster.get("Pod", name, env.namespace)
    assert isinstance(pod, dict)
    status = {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True"}],
        "startTime": when,
    }
    await env.cluster.patch("Pod", name, {"status": status}, env.namespace, subresource="status")


async def test_victims_are_ordered_by_status_start_time(env: Env) -> None:
    """Upstream orders victims of equal priority by ``status.startTime`` (GetPodStartTime),
    not by when the scheduler first saw them: low-0 and low-1 were created first but
    started last, so they are the later-started victims and go."""
    low, high = await _prio(env)
    node = await env.node("a", cpu="4")
    s = env.scheduler(preemption=True)
    for i in range(4):
        await _pod(env, f"low-{i}", priority_class=low, node=node)
    for i, minute in enumerate((3, 2, 1, 0)):
        await _started(env, f"low-{i}", f"2026-01-01T00:0{minute}:00Z")

    async def seen() -> bool:
        return all(
            (p := s.cache.pods.get((env.namespace, f"low-{i}"))) is not None
            and p.start_time is not None
            for i in range(4)
        )

    await env.until(s, seen)
    await _gang(env, "high", 2, priority_class=high)

    async def done() -> bool:
        return await _bound(env, "high-") == 2

    await env.until(s, done)
    assert await _names(env, "low-") == {"low-2", "low-3"}


async def test_a_pod_without_start_time_counts_as_started_now(env: Env) -> None:
    """A pod with no ``status.startTime`` (bound, not started) is the latest started, as
    upstream's GetPodStartTime takes the current time for it: it goes before pods that
    report a start, though the scheduler saw it first."""
    low, high = await _prio(env)
    node = await env.node("a", cpu="2")
    s = env.scheduler(preemption=True)
    await _pod(env, "low-new", priority_class=low, node=node)
    await _pod(env, "low-old", priority_class=low, node=node)
    await _started(env, "low-old", "2026-01-01T00:00:00Z")

    async def seen() -> bool:
        p = s.cache.pods.get((env.namespace, "low-old"))
        return p is not None and p.start_time is not None

    await env.until(s, seen)
    await _pod(env, "hp", priority_class=high)

    async def done() -> bool:
        return bool(await env.bound("hp"))

    await env.until(s, done)
    assert await _names(env, "low-") == {"low-old"}


# ---- CompositePodGroup trees whose cycle succeeds with pods left behind ---------------------


async def _tree_leaves(
    env: Env,
    name: str,
    leaves: dict[str, tuple[int, int | None]],
    *,
    min_group_count: int | None,
    priority_class: str,
) -> None:
    """A CompositePodGroup ``name`` (gang of ``min_group_count`` children, basic for None)
    of leaves ``{leaf: (pods, minCount)}`` (minCount None: a basic leaf), 1 cpu per pod,
    every level and pod of ``priority_class``."""
    cpg = make_composite_pod_group(name, env.namespace).priority_class(priority_class)
    if min_group_count is not None:
        cpg.gang(min_group_count)
    await env.cluster.create(cpg.obj())
    for leaf, (size, min_count) in leaves.items():
        pg = make_pod_group(leaf, env.namespace).parent(name).workload_ref(name, leaf)
        pg.priority_class(priority_class)
        if min_count is not None:
            pg.gang(min_count)
        await env.cluster.create(pg.obj())
        for i in range(size):
            await _pod(env, f"{leaf}-{i}", leaf, priority_class=priority_class)


async def _low_pods(env: Env, node: str, n: int, low: str) -> None:
    for i in range(n):
        await _pod(env, f"low-{i}", priority_class=low, node=node)


async def _tree_done(env: Env, s: Scheduler, clock: ManualClock, prefix: str, n: int) -> None:
    """Schedule (the clock past every retry's backoff, far from the unschedulable pool's
    300 s flush) until ``n`` pods of ``prefix`` are bound."""
    start = clock.now()

    async def done() -> bool:
        if clock.now() < start + 30:
            clock.advance(1)
        return await _bound(env, prefix) == n

    await env.until(s, done)


async def test_tree_leaf_left_behind_by_a_successful_cycle_preempts(
    mem_env: tuple[Env, ManualClock],
) -> None:
    """A tree of minGroupCount 1: t-a (1 pod) fits in the free cpu and makes the quorum, the
    gang t-b (2 pods) does not. The cycle succeeds without t-b; t-b is retried at once, that
    cycle places nothing new, fails and preempts two low pods for t-b (parity CW6)."""
    env, clock = mem_env
    low, high = await _prio(env)
    node = await env.node("a", cpu="4")
    s = env.scheduler(clock=clock, preemption=True)
    await _low_pods(env, node, 3, low)
    await _tree_leaves(
        env, "t", {"t-a": (1, 1), "t-b": (2, 2)}, min_group_count=1, priority_class=high
    )
    await _tree_done(env, s, clock, "t-", 3)
    assert len(await _names(env, "low-")) == 1


async def test_tree_leaf_above_its_min_count_preempts_for_the_rest(
    mem_env: tuple[Env, ManualClock],
) -> None:
    """A leaf of 3 pods with minCount 1 in a tree: one pod fits, the cycle succeeds; the two
    left behind preempt (as a flat gang above its quorum does; kube-scheduler v1.37.2
    nominates them and leaves them unbound: parity CW7, a recorded difference)."""
    env, clock = mem_env
    low, high = await _prio(env)
    node = await env.node("a", cpu="4")
    s = env.scheduler(clock=clock, preemption=True)
    await _low_pods(env, node, 3, low)
    await _tree_leaves(env, "t", {"t-a": (3, 1)}, min_group_count=1, priority_class=high)
    await _tree_done(env, s, clock, "t-a-", 3)
    assert len(await _names(env, "low-")) == 1


async def test_tree_basic_leaf_grows_during_its_preemption(
    mem_env: tuple[Env, ManualClock],
) -> None:
    """The tree form of basic-group-grows: a basic leaf's first pod preempts one low pod;
    two more pods arrive while it is nominated; the cycle after the victim went places the
    first only; the two others preempt the remaining low pods (kube-scheduler v1.37.2
    nominates them and leaves them unbound: parity CW8, a recorded difference)."""
    env, clock = mem_env
    low, high = await _prio(env)
    node = await env.node("a", cpu="3")
    s = env.scheduler(clock=clock, preemption=True)
    await _low_pods(env, node, 3, low)
    await _tree_leaves(env, "t", {"t-a": (1, None)}, min_group_count=None, priority_class=high)
    await s.until_idle()  # t-a-0's cycle: one low pod preempted, t-a-0 nominated
    assert len(await _names(env, "low-")) == 2
    for i in (1, 2):
        await _pod(env, f"t-a-{i}", "t-a", priority_class=high)
    await _tree_done(env, s, clock, "t-a-", 3)
    assert await _names(env, "low-") == set()
