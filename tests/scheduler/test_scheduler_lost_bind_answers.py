"""A binding whose answer is lost (the connection drops after the request went out, or the
server fails with 500/503/504) may have been carried out. The binder must not forget such a
pod -- its node would look free while the pod holds it (a chaos run overcommitted a node
that way when kube-apiserver was killed mid-run) -- but send the binding again: a Conflict
saying the pod is already assigned to the chosen node means the lost attempt bound it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sched_helpers import Env

from workloadbuilder.errors import ApiError, Forbidden
from workloadbuilder.runtime import ManualClock
from workloadbuilder.scheduler import Scheduler, SchedulerConfig
from workloadbuilder.scheduler._plugins import DefaultBinder


class LostAnswers:
    """Delegates to a cluster. For a pod in ``lost`` the first binding is carried out and
    then fails as if its answer never came (``status``); in ``unsent`` it fails the same way
    without being carried out; in ``elsewhere`` another binder puts the pod on that node
    just before the answer is lost; in ``always`` every attempt fails so; in ``final`` the
    first attempt is refused with that error. ``calls`` counts attempts per pod."""

    def __init__(self, inner: Any, *, status: int = 0) -> None:
        self._inner = inner
        self.status = status
        self.lost: set[str] = set()
        self.unsent: set[str] = set()
        self.elsewhere: dict[str, str] = {}
        self.always: set[str] = set()
        self.final: dict[str, ApiError] = {}
        self.calls: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _lost(self, pod_name: str) -> ApiError:
        what = f"POST /api/v1/namespaces/default/pods/{pod_name}/binding"
        if self.status:
            return ApiError(f"{what}: the server failed", status=self.status)
        return ApiError(
            f"{what}: ConnectionError: the server closed the connection",
            status=0,
            reason="ConnectionError",
        )

    async def bind(
        self, namespace: str, pod_name: str, node_name: str, *, pod_uid: str | None = None
    ) -> None:
        self.calls[pod_name] = self.calls.get(pod_name, 0) + 1
        await asyncio.sleep(0)
        if pod_name in self.final:
            raise self.final.pop(pod_name)
        if pod_name in self.always:
            raise self._lost(pod_name)
        if pod_name in self.unsent:
            self.unsent.discard(pod_name)
            raise self._lost(pod_name)
        if pod_name in self.elsewhere:
            other = self.elsewhere.pop(pod_name)
            await self._inner.bind(namespace, pod_name, other, pod_uid=pod_uid)
            raise self._lost(pod_name)
        await self._inner.bind(namespace, pod_name, node_name, pod_uid=pod_uid)
        if pod_name in self.lost:
            self.lost.discard(pod_name)
            raise self._lost(pod_name)


def _scheduler(env: Env, cluster: Any, clock: ManualClock) -> Scheduler:
    s = Scheduler(cluster, SchedulerConfig(bind_concurrency=8), clock=clock)
    env.schedulers.append(s)
    return s


async def _scheduled_events(env: Env) -> dict[str, int]:
    out: dict[str, int] = {}
    for e in (await env.cluster.list("Event", env.namespace)).items:
        assert isinstance(e, dict)
        if e.get("reason") == "Scheduled":
            name = e["involvedObject"]["name"]
            out[name] = out.get(name, 0) + 1
    return out


@pytest.mark.parametrize("status", [0, 500, 503, 504])
async def test_a_binding_whose_answer_was_lost_counts_as_bound(
    mem_env: tuple[Env, ManualClock], status: int
) -> None:
    env, clock = mem_env
    await env.node("a", cpu="4")
    await env.gang("g0", 4)
    rec = LostAnswers(env.cluster, status=status)
    rec.lost = {"g0-1", "g0-2"}  # the canary (g0-0) answered; two of the rest did not
    s = _scheduler(env, rec, clock)
    assert await s.until_idle() == 4  # every pod counted as bound by this scheduler
    assert await env.bound() == {f"g0-{i}": env.node_name("a") for i in range(4)}
    assert rec.calls["g0-1"] == rec.calls["g0-2"] == 2  # sent again once; a Conflict said done
    # no SchedulerError written on a pod that is bound, and its Scheduled event recorded
    for name in ("g0-1", "g0-2"):
        cond = await env.pod_condition(name)
        assert cond is None or cond.get("status") == "True", cond
    assert await _scheduled_events(env) == {f"g0-{i}": 1 for i in range(4)}
    assert s.binder.pending == 0
    # the node is full: a pod arriving now must not be given the lost answers' room
    await env.pod("late")
    clock.advance(1.0)
    await s.until_idle()
    assert "late" not in await env.bound()
    assert sum(1 for n in (await env.bound()).values() if n == env.node_name("a")) == 4


async def test_a_lost_answer_of_a_binding_that_did_not_run_is_retried(
    mem_env: tuple[Env, ManualClock],
) -> None:
    env, clock = mem_env
    await env.node("a", cpu="4")
    await env.gang("g0", 3)
    rec = LostAnswers(env.cluster)
    rec.unsent = {"g0-0", "g0-2"}  # the canary too: it is retried before the rest go out
    s = _scheduler(env, rec, clock)
    assert await s.until_idle() == 3
    assert await env.bound() == {f"g0-{i}": env.node_name("a") for i in range(3)}
    assert rec.calls == {"g0-0": 2, "g0-1": 1, "g0-2": 2}
    assert await _scheduled_events(env) == {f"g0-{i}": 1 for i in range(3)}


async def test_a_lost_answer_and_the_pod_on_another_node_is_a_failure(
    mem_env: tuple[Env, ManualClock],
) -> None:
    env, clock = mem_env
    await env.node("a", cpu="4", labels={"pick": "me"})
    await env.node("b", cpu="4")
    await env.pod("p", node_selector={"pick": "me"})
    rec = LostAnswers(env.cluster)
    rec.elsewhere = {"p": env.node_name("b")}  # another binder put it on b meanwhile
    s = _scheduler(env, rec, clock)
    assert await s.until_idle() == 0  # not counted as bound by this scheduler
    assert rec.calls == {"p": 2}
    assert await env.bound() == {"p": env.node_name("b")}
    assert await _scheduled_events(env) == {}


async def test_a_final_refusal_is_not_sent_again(mem_env: tuple[Env, ManualClock]) -> None:
    env, clock = mem_env
    await env.node("a", cpu="4")
    await env.pod("p")
    rec = LostAnswers(env.cluster)
    rec.final = {"p": Forbidden("pods/binding is forbidden", status=403)}
    s = _scheduler(env, rec, clock)
    assert await s.until_idle() == 0
    assert rec.calls == {"p": 1}
    cond = await env.pod_condition("p")
    assert cond is not None and cond["reason"] == "SchedulerError", cond


async def test_answers_lost_for_longer_than_the_retries_are_a_failure(
    mem_env: tuple[Env, ManualClock], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(DefaultBinder, "retry_backoff", 0.01)
    monkeypatch.setattr(DefaultBinder, "retry_for", 0.05)
    env, clock = mem_env
    await env.node("a", cpu="4")
    await env.pod("p")
    rec = LostAnswers(env.cluster)
    rec.always = {"p"}
    s = _scheduler(env, rec, clock)
    assert await s.until_idle() == 0
    # at once, then after 0.01, 0.02 and the 0.02 s left of the 0.05 s: at most 5
    # attempts, at least 3 (the one at once and a backed-off one, however slow the sleeps)
    assert 3 <= rec.calls["p"] <= 5, rec.calls
    cond = await env.pod_condition("p")
    assert cond is not None and cond["reason"] == "SchedulerError", cond
    assert "ConnectionError" in cond["message"]
    assert await env.bound() == {}
