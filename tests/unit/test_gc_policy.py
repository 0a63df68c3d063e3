"""The garbage-collector policy (``workloadbuilder.runtime.GcPolicy``): what it freezes, that
cycles are still collected, that frozen cycles are collected by the periodic complete
collection, that a hold pauses the older generations until install, that the scheduler
holds while its informers list and installs the policy once they synced."""

from __future__ import annotations

import asyncio
import gc
import time
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

from workloadbuilder.cluster import MemoryCluster
from workloadbuilder.runtime import GcPolicy, gc_policy
from workloadbuilder.scheduler import Scheduler, SchedulerConfig


class _Node:
    """A weak-referenceable object that can be part of a cycle."""

    def __init__(self) -> None:
        self.other: object = None


def _tracked(obj: object) -> bool:
    """Whether ``obj`` is in a collected generation (frozen objects are not)."""
    return any(o is obj for o in gc.get_objects())


def _cycle() -> weakref.ref[_Node]:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return weakref.ref(a)


@pytest.fixture
def clean_gc() -> Iterator[None]:
    """No policy active around the test (the process-wide one is restored afterwards)."""
    was = gc_policy.installed
    gc_policy.uninstall()
    gc.unfreeze()
    try:
        yield
    finally:
        gc.unfreeze()
        if was:
            gc_policy.install()


@pytest.fixture
def cpython_thresholds(clean_gc: None) -> Iterator[None]:
    """CPython's default thresholds (700, 10, 10) during the test; the ones before after."""
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        yield
    finally:
        gc.set_threshold(*saved)


def _collections() -> tuple[int, int]:
    """Young and middle collections so far."""
    young, middle, _ = (s["collections"] for s in gc.get_stats())
    return young, middle


class _Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_install_freezes_the_live_heap_and_the_survivors_of_full_collections(
    clean_gc: None,
) -> None:
    policy = GcPolicy()
    before = _Node()
    assert _tracked(before)
    policy.install()
    try:
        assert policy.installed and gc.get_freeze_count() > 0
        assert not _tracked(before)  # alive at install: frozen
        after = _Node()
        assert _tracked(after)
        gc.collect()  # a full collection: its survivors are frozen
        assert not _tracked(after)
        assert policy.full_collections >= 1
        policy.install()  # idempotent
        assert gc.callbacks.count(policy._after_collection) == 1
    finally:
        policy.uninstall()
    assert not policy.installed and gc.get_freeze_count() == 0
    assert _tracked(before) and _tracked(after)
    assert policy._after_collection not in gc.callbacks


def test_new_cycles_are_still_collected(clean_gc: None) -> None:
    policy = GcPolicy()
    policy.install()
    try:
        ref = _cycle()
        assert ref() is not None
        gc.collect()
        assert ref() is None  # unreachable before any freeze: collected as usual
    finally:
        policy.uninstall()


def test_a_frozen_cycle_is_collected_by_the_next_complete_collection(clean_gc: None) -> None:
    clock = _Clock()
    policy = GcPolicy(complete_every=300.0, clock=clock)
    policy.install()
    try:
        a, b = _Node(), _Node()
        a.other, b.other = b, a
        ref = weakref.ref(a)
        gc.collect()  # the cycle is alive: frozen with the other survivors
        del a, b
        gc.collect()
        assert ref() is not None  # frozen objects are not examined for cycles...
        clock.t += 299.0
        gc.collect()
        assert ref() is not None
        clock.t += 2.0  # ...until complete_every has passed: the heap is unfrozen
        gc.collect()
        assert gc.get_freeze_count() == 0
        gc.collect()  # this full collection walks everything
        assert ref() is None
        assert policy.complete_collections == 1
        assert gc.get_freeze_count() > 0  # and its survivors are frozen again
    finally:
        policy.uninstall()


def test_garbage_at_install_is_frozen_and_freed_by_the_next_complete_collection(
    clean_gc: None,
) -> None:
    # install runs no full collection first (it cost ~70 ms of the scheduler's start and
    # found nothing): a cycle that is already unreachable is frozen with the live heap...
    clock = _Clock()
    policy = GcPolicy(complete_every=300.0, clock=clock)
    gc.collect()
    ref = _cycle()
    policy.install()
    try:
        assert ref() is not None and not _tracked(ref())
        gc.collect()
        assert ref() is not None
        clock.t += 301.0  # ...and freed by the first complete collection
        gc.collect()
        gc.collect()
        assert ref() is None
        assert policy.complete_collections == 1
    finally:
        policy.uninstall()


def test_a_disabled_collector_is_left_alone(clean_gc: None) -> None:
    policy = GcPolicy()
    gc.disable()
    try:
        policy.install()
        assert gc.get_freeze_count() == 0
        assert policy._after_collection not in gc.callbacks
    finally:
        gc.enable()
        policy.uninstall()


def test_complete_every_young_threshold_and_hold_limit_must_be_positive() -> None:
    with pytest.raises(ValueError, match="complete_every"):
        GcPolicy(complete_every=0)
    with pytest.raises(ValueError, match="young_threshold"):
        GcPolicy(young_threshold=0)
    with pytest.raises(ValueError, match="hold_limit"):
        GcPolicy(hold_limit=0)


def _allocate(n: int) -> None:
    """Allocate ``n`` tracked objects that stay alive until the end (the collector counts
    them), then drop them."""
    keep = [[] for _ in range(n)]
    del keep


def test_a_hold_runs_young_collections_only_until_install(cpython_thresholds: None) -> None:
    policy = GcPolicy(young_threshold=5000)
    policy.hold()
    assert policy.holding and not policy.installed
    young0, middle0 = _collections()
    _allocate(100_000)  # ~140 young collections: 14 middle ones without the hold
    young1, middle1 = _collections()
    assert young1 - young0 >= 100
    assert middle1 == middle0
    ref = _cycle()
    gc.collect(0)  # a young cycle is still freed
    assert ref() is None
    policy.install()  # ends the hold: the older generations are collected again
    assert not policy.holding and policy.installed
    assert gc.get_threshold() == (5000, 10, 10)
    assert policy._after_young_collection not in gc.callbacks
    _, middle2 = _collections()
    _allocate(200_000)  # 40 young collections at 5,000: 4 middle ones
    _, middle3 = _collections()
    assert middle3 > middle2
    policy.uninstall()
    assert gc.get_threshold() == (700, 10, 10)


def test_a_hold_ends_by_itself_after_its_limit(cpython_thresholds: None) -> None:
    clock = _Clock()
    policy = GcPolicy(hold_limit=60.0, clock=clock)
    policy.hold()
    clock.t += 59.0
    gc.collect(0)
    assert policy.holding
    clock.t += 1.0
    gc.collect(0)  # the first young collection past the limit ends it
    assert not policy.holding and not policy.installed
    assert gc.get_threshold() == (700, 10, 10)
    _, middle0 = _collections()
    _allocate(50_000)
    _, middle1 = _collections()
    assert middle1 > middle0
    policy.install()
    assert policy._after_young_collection not in gc.callbacks
    policy.uninstall()


def test_uninstall_ends_a_hold_and_a_hold_after_install_or_with_the_collector_off_is_a_no_op(
    cpython_thresholds: None,
) -> None:
    policy = GcPolicy()
    policy.hold()
    policy.hold()  # idempotent
    assert gc.callbacks.count(policy._after_young_collection) == 1
    policy.uninstall()
    assert not policy.holding and gc.get_threshold() == (700, 10, 10)
    assert policy._after_young_collection not in gc.callbacks
    policy.install()
    policy.hold()
    assert not policy.holding
    policy.uninstall()
    gc.disable()
    try:
        policy.hold()
        assert not policy.holding and gc.get_threshold() == (700, 10, 10)
    finally:
        gc.enable()
    policy.hold()
    gc.set_threshold(700, 20, 10)  # changed by someone else during the hold: kept
    policy.uninstall()
    assert gc.get_threshold() == (700, 20, 10)


def test_the_young_threshold_is_raised_only_from_cpythons_default(
    cpython_thresholds: None,
) -> None:
    policy = GcPolicy(young_threshold=5000)
    policy.install()
    assert gc.get_threshold() == (5000, 10, 10)
    policy.uninstall()
    assert gc.get_threshold() == (700, 10, 10)
    gc.set_threshold(2000, 10, 10)  # chosen by someone else: kept
    policy.install()
    assert gc.get_threshold() == (2000, 10, 10)
    policy.uninstall()
    assert gc.get_threshold() == (2000, 10, 10)


class _ListSpy(MemoryCluster):
    """Records whether the process-wide policy held the collector at each list; fails the
    lists of ``fail_kind``."""

    def __init__(self, fail_kind: str | None = None) -> None:
        super().__init__()
        self.holding: list[bool] = []
        self.failed = 0
        self.fail_kind = fail_kind

    async def list(self, kind: Any, *args: Any, **kwargs: Any) -> Any:
        self.holding.append(gc_policy.holding)
        if getattr(kind, "kind", kind) == self.fail_kind:
            self.failed += 1
            raise RuntimeError("list refused")
        return await super().list(kind, *args, **kwargs)


@pytest.mark.parametrize("enabled", [True, False])
async def test_the_scheduler_installs_the_policy_after_its_informers_synced(
    clean_gc: None, enabled: bool
) -> None:
    cluster = _ListSpy()
    s = Scheduler(cluster, SchedulerConfig(gc_freeze=enabled))
    assert not gc_policy.installed
    await s.start()
    try:
        assert gc_policy.installed is enabled
        assert (gc.get_freeze_count() > 0) is enabled
        # the informers' lists ran under a hold (older generations paused), ended by install
        assert cluster.holding and all(h is enabled for h in cluster.holding)
        assert not gc_policy.holding
    finally:
        await s.stop()
        await cluster.close()
        gc_policy.uninstall()


async def test_a_start_cancelled_while_listing_ends_the_hold(cpython_thresholds: None) -> None:
    # the Pod list fails (the informer retries it): start is stopped while it waits
    cluster = _ListSpy(fail_kind="Pod")
    s = Scheduler(cluster, SchedulerConfig())
    try:
        task = asyncio.create_task(s.start())
        deadline = time.monotonic() + 10.0
        while cluster.failed < 2 and time.monotonic() < deadline:  # the Pod list retried
            await asyncio.sleep(0.01)
        assert not task.done() and cluster.failed >= 2
        assert gc_policy.holding
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not gc_policy.holding and not gc_policy.installed
        assert gc.get_threshold() == (700, 10, 10)
    finally:
        await s.stop()
        await cluster.close()
