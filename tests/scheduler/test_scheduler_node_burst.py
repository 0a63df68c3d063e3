"""A burst of Node events is offered to the queue once it is over
(``EventHandlers.flush_node_events``). When some event of the burst is one a plugin takes
without a queueing hint, it wakes every waiting entity, so the burst is offered as that one
event: one pass over the queue per burst instead of one per Node event. The outcome (which
entities move, how many, what happens to one in flight) is the one of offering every event
in order."""

from __future__ import annotations

from typing import Any

from workloadbuilder.runtime import ManualClock
from workloadbuilder.scheduler._cache import Cache
from workloadbuilder.scheduler._eventhandlers import EventHandlers
from workloadbuilder.scheduler._interface import ActionType, ClusterEvent, QueueingHint
from workloadbuilder.scheduler._queue import EntityKey, SchedulingQueue

HINTED = ClusterEvent("Node", ActionType.ADD)
ALWAYS = ClusterEvent("Node", ActionType.UPDATE_NODE)
KEYS: list[EntityKey] = [("PodGroup", "default", f"g{i}") for i in range(4)]


def _setup(calls: list[EntityKey]) -> tuple[EventHandlers, SchedulingQueue, Any]:
    clock = ManualClock()

    def only_g0(key: EntityKey, old: Any, new: Any) -> bool:
        calls.append(key)
        return key == KEYS[0]

    def hints_for(event: ClusterEvent) -> list[QueueingHint | None]:
        return [only_g0] if event == HINTED else [None]

    queue = SchedulingQueue(clock.now, hints_for=hints_for)
    for i, key in enumerate(KEYS):
        queue.upsert(key, priority=0, first_seen=0.0, seq=i, gate=None)
    popped = [queue.pop() for _ in KEYS]
    for e in popped[:-1]:  # the last one stays in flight
        assert e is not None
        queue.done(e, "unschedulable")
    handlers = EventHandlers(Cache(), queue, None, None, clock)  # type: ignore[arg-type]
    return handlers, queue, popped[-1]


def _states(queue: SchedulingQueue) -> list[tuple[str, bool]]:
    return [(queue.entities[k].state, queue.entities[k].moved_while_inflight) for k in KEYS]


def _offer(burst: list[ClusterEvent], batched: bool) -> tuple[int, list[Any], list[EntityKey]]:
    calls: list[EntityKey] = []
    handlers, queue, _ = _setup(calls)
    handlers.node_batch = 1.0 if batched else 0.0
    moved = 0
    for event in burst:
        before = sum(1 for k in KEYS if queue.entities[k].state != "unschedulable")
        handlers._node_event(event, {"metadata": {"name": "n"}})
        if not batched:
            moved += sum(1 for k in KEYS if queue.entities[k].state != "unschedulable") - before
    if batched:
        moved = handlers.flush_node_events(force=True)
    return moved, _states(queue), calls


def test_a_burst_with_an_unhinted_event_is_offered_once_with_the_same_outcome() -> None:
    burst = [HINTED, HINTED, ALWAYS, HINTED, ALWAYS]
    moved, states, calls = _offer(burst, batched=True)
    one_by_one, want, _ = _offer(burst, batched=False)
    assert (moved, states) == (one_by_one, want) == (3, want)
    assert all(s != "unschedulable" for s, _ in states)
    assert states[3] == ("inflight", True)  # in flight: goes to backoff when done
    assert calls == []  # the hinted events were never evaluated


def test_a_burst_of_hinted_events_is_offered_event_by_event() -> None:
    burst = [HINTED, HINTED]
    moved, states, calls = _offer(burst, batched=True)
    one_by_one, want, _ = _offer(burst, batched=False)
    assert (moved, states) == (one_by_one, want)
    assert moved == 1
    assert [s for s, _ in states[1:3]] == ["unschedulable", "unschedulable"]
    assert calls  # each event asked the hint
