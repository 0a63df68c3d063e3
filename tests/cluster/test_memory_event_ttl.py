"""MemoryCluster expires Events as kube-apiserver does with ``--event-ttl`` (default 1 h from
the Event's last write): on the cluster's clock, core/v1 and events.k8s.io/v1 alike, with a
DELETED event for watchers; other kinds never expire."""

from __future__ import annotations

import asyncio
from typing import Any

from workloadbuilder.cluster import MemoryCluster, resource_info
from workloadbuilder.runtime import ManualClock

CORE = resource_info("Event")
NEW = resource_info("Event", "events.k8s.io/v1")


def _pod_ref(name: str = "p") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "name": name, "namespace": "default", "uid": "u"}


def _new_event(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": "default"},
        "eventTime": "2027-01-15T08:00:00.000000Z",
        "reportingController": "test",
        "reportingInstance": "test-1",
        "action": "Scheduling",
        "reason": "Scheduled",
        "regarding": _pod_ref(),
        "type": "Normal",
        "note": "bound",
    }


async def test_core_events_expire_an_hour_after_their_last_write() -> None:
    clock = ManualClock()
    c = MemoryCluster(clock=clock.now)
    await c.create_event(
        namespace="default", involved_object=_pod_ref(), reason="Scheduled", message="m"
    )
    [ev] = (await c.list(CORE, "default")).items
    name = ev["metadata"]["name"]
    clock.advance(3000)
    # a later write (a recorder bumping the count) starts the hour again
    await c.patch(CORE, name, {"count": 2}, "default")
    clock.advance(3000)  # 6000 s after the creation, 3000 s after the last write
    assert c.count(CORE, "default") == 1
    clock.advance(601)
    assert c.count(CORE, "default") == 0
    assert (await c.list(CORE, "default")).items == ()


async def test_expiry_is_a_delete_that_watchers_see() -> None:
    clock = ManualClock()
    c = MemoryCluster(clock=clock.now)
    await c.create(_new_event("e1"))
    rv = c.resource_version
    stream = c.watch(NEW, "default", resource_version=rv)
    clock.advance(3601)
    c.count(NEW)  # any call lets the cluster notice the time
    event = await asyncio.wait_for(anext(aiter(stream)), 5)
    assert event.type == "DELETED"
    assert event.object["metadata"]["name"] == "e1"
    assert int(event.object["metadata"]["resourceVersion"]) > int(rv)
    await c.close()


async def test_events_k8s_io_events_expire_and_other_kinds_stay() -> None:
    clock = ManualClock()
    c = MemoryCluster(clock=clock.now)
    await c.create(_new_event("e1"))
    await c.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "default"},
        }
    )
    clock.advance(3599)
    assert c.count(NEW) == 1
    clock.advance(2)
    assert c.count(NEW) == 0
    assert c.count("ConfigMap", "default") == 1


async def test_the_ttl_is_an_option_and_none_keeps_events() -> None:
    clock = ManualClock()
    short = MemoryCluster(clock=clock.now, event_ttl=60)
    forever = MemoryCluster(clock=clock.now, event_ttl=None)
    for c in (short, forever):
        await c.create_event(
            namespace="default", involved_object=_pod_ref(), reason="R", message="m"
        )
    clock.advance(61)
    assert short.count(CORE) == 0
    clock.advance(10 * 24 * 3600)
    assert forever.count(CORE) == 1


async def test_many_events_expire_in_order_of_their_last_write() -> None:
    clock = ManualClock()
    c = MemoryCluster(clock=clock.now, event_ttl=100)
    for i in range(50):
        await c.create_event(
            namespace="default", involved_object=_pod_ref(f"p{i}"), reason="R", message="m"
        )
        clock.advance(1)
    # created at t0 .. t0+49; at t0+120 the first 21 (t0 .. t0+20) are past 100 s
    clock.advance(120 - 50)
    assert c.count(CORE) == 29
    left = {e["involvedObject"]["name"] for e in (await c.list(CORE)).items}
    assert left == {f"p{i}" for i in range(21, 50)}
