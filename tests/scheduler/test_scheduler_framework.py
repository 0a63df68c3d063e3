"""The framework runtime: PodGroupPostFilter's status is used; plugins' registered events
decide what leaves the unschedulable pool."""

from __future__ import annotations

from typing import Any

from sched_helpers import Env

from workloadbuilder.runtime import ManualClock
from workloadbuilder.scheduler import Scheduler, SchedulerConfig
from workloadbuilder.scheduler._interface import SUCCESS, ActionType, ClusterEvent, Code, Status
from workloadbuilder.scheduler._plugins import default_framework


def _state(s: Scheduler, name: str) -> str:
    return str(s.queue.entities[("PodGroup", "default", name)].state)


class _PostFilter:
    name = "FakePreemption"

    def __init__(self, status: Status) -> None:
        self.status = status
        self.calls: list[str] = []

    def post_filter(self, group: Any, lister: Any, message: str) -> Status:
        self.calls.append(group.name)
        assert lister.quorum_pods(group) == 3
        return self.status


async def test_post_filter_unschedulable_message_joins_the_explanation(
    mem_env: tuple[Env, ManualClock],
) -> None:
    env, clock = mem_env
    await env.node("a", cpu="2")
    await env.gang("g", 3)
    fw = default_framework()
    post = _PostFilter(Status(code=Code.UNSCHEDULABLE, message="no victims found"))
    fw.pod_group_post_filter.append(post)
    s = Scheduler(env.cluster, SchedulerConfig(), clock=clock, framework=fw)
    env.schedulers.append(s)
    assert await s.until_idle() == 0
    assert post.calls == ["g"]
    assert s.explanations[("default", "g")].endswith("; FakePreemption: no victims found")
    assert _state(s, "g") == "unschedulable"


async def test_post_filter_success_retries_after_backoff(
    mem_env: tuple[Env, ManualClock],
) -> None:
    env, clock = mem_env
    await env.node("a", cpu="2")
    await env.gang("g", 3)
    fw = default_framework()
    fw.pod_group_post_filter.append(_PostFilter(SUCCESS))
    s = Scheduler(env.cluster, SchedulerConfig(), clock=clock, framework=fw)
    env.schedulers.append(s)
    await s.until_idle()
    assert _state(s, "g") == "backoff"  # nominated: retried without waiting for an event


async def test_only_registered_events_requeue(mem_env: tuple[Env, ManualClock]) -> None:
    env, clock = mem_env
    await env.node("a", cpu="2")
    await env.gang("g", 3)
    fw = default_framework()
    assert fw.hints_for(ClusterEvent("Node", ActionType.ADD))
    assert fw.hints_for(ClusterEvent("Lease", ActionType.ADD)) == []
    # without the node filters', NodeResourcesFit's and the pod-constraint plugins' events
    # (NodePorts, InterPodAffinity, PodTopologySpread also wait for nodes), a new node moves
    # nothing
    for p in [*fw.filters, *fw.reserve]:
        p.events_to_register = lambda: []  # type: ignore[method-assign]
    fw.refresh()
    s = Scheduler(env.cluster, SchedulerConfig(), clock=clock, framework=fw)
    env.schedulers.append(s)
    await s.until_idle()
    assert _state(s, "g") == "unschedulable"
    await env.node("b", cpu="8")
    await s.sync()
    assert _state(s, "g") == "unschedulable"
    # the default set registers Node/Add: the same change moves the group
    s2 = Scheduler(env.cluster, SchedulerConfig(), clock=clock)
    env.schedulers.append(s2)
    await env.cluster.delete("Node", "b")
    await s2.until_idle()
    assert _state(s2, "g") == "unschedulable"
    await env.node("c", cpu="8")
    await s2.sync()
    assert _state(s2, "g") in ("backoff", "active")
