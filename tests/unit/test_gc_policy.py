"""The garbage-collector policy (``workloadbuilder.runtime.GcPolicy``): what it freezes, that
cycles are still collected, that frozen cycles are collected by the periodic complete
collection, that the scheduler installs it once its informers synced."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from scheduler import Scheduler, SchedulerConfig
from workloadbuilder.cluster import MemoryCluster
from workloadbuilder.runtime import GcPolicy, gc_policy


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


def test_complete_every_and_young_threshold_must_be_positive() -> None:
    with pytest.raises(ValueError, match="complete_every"):
        GcPolicy(complete_every=0)
    with pytest.raises(ValueError, match="young_threshold"):
        GcPolicy(young_threshold=0)


def test_the_young_threshold_is_raised_only_from_cpythons_default(clean_gc: None) -> None:
    saved = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
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
    finally:
        gc.set_threshold(*saved)


@pytest.mark.parametrize("enabled", [True, False])
async def test_the_scheduler_installs_the_policy_after_its_informers_synced(
    clean_gc: None, enabled: bool
) -> None:
    cluster = MemoryCluster()
    s = Scheduler(cluster, SchedulerConfig(gc_freeze=enabled))
    assert not gc_policy.installed
    await s.start()
    try:
        assert gc_policy.installed is enabled
        assert (gc.get_freeze_count() > 0) is enabled
    finally:
        await s.stop()
        await cluster.close()
        gc_policy.uninstall()
