"""Scheduler configuration."""

from __future__ import annotations

from typing import Any

import attrs

__all__ = ["DEFAULT_SCHEDULER_NAME", "SchedulerConfig"]

DEFAULT_SCHEDULER_NAME = "workloadbuilder-scheduler"

_STRATEGIES = ("MostAllocated", "LeastAllocated")


def _strategy(_: object, attribute: attrs.Attribute[str], value: str) -> None:
    if value not in _STRATEGIES:
        raise ValueError(f"{attribute.name} must be one of {', '.join(_STRATEGIES)}, not {value!r}")


def _positive(_: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if value <= 0:
        raise ValueError(f"{attribute.name} must be positive, not {value!r}")


@attrs.frozen(kw_only=True)
class SchedulerConfig:
    """How the scheduler behaves. Defaults follow kube-scheduler where one exists."""

    #: pods whose ``spec.schedulerName`` equals this are ours
    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    #: upstream ``podInitialBackoffSeconds`` / ``podMaxBackoffSeconds``
    initial_backoff: float = attrs.field(default=1.0, validator=_positive)
    max_backoff: float = attrs.field(default=10.0, validator=_positive)
    #: upstream ``podMaxInUnschedulablePodsDuration``: the periodic flush of the pool
    max_in_unschedulable: float = attrs.field(default=300.0, validator=_positive)
    #: NodeResourcesFit scoring for pod groups (bin-packing) and for single pods (spreading)
    gang_scoring: str = attrs.field(default="MostAllocated", validator=_strategy)
    single_scoring: str = attrs.field(default="LeastAllocated", validator=_strategy)
    #: resources and weights the scoring strategies look at (upstream default: cpu, memory)
    score_resources: tuple[tuple[str, int], ...] = (("cpu", 1), ("memory", 1))
    #: concurrent ``pods/binding`` calls
    bind_concurrency: int = attrs.field(default=16, validator=_positive)
    #: record ``Scheduled`` / ``FailedScheduling`` Events
    record_events: bool = True
    #: Event writes in flight while bindings are and no placed pod waits for a bind slot
    #: (queued in order; bindings are not counted; none while pods wait); more when the
    #: queue is more than half full, or holds more than ``bind_concurrency`` with no
    #: binding in flight, up to ``bind_concurrency`` (``StatusWriter.event_writers_limit``)
    event_concurrency: int = attrs.field(default=4, validator=_positive)
    #: Events waiting for a writer at most (about 100 bytes each while its pod lives, 250
    #: once it is gone): a slow API server cannot make the backlog grow without bound.
    #: When it is full a binding waits for room before its ``Scheduled`` event is queued
    #: (never dropped); an explanation's ``FailedScheduling`` event is dropped and counted
    max_queued_events: int = attrs.field(default=10000, validator=_positive)
    #: write pod ``PodScheduled=False`` conditions and PodGroup status
    update_status: bool = True
    #: seconds: in :meth:`Scheduler.run`, Node events are collected while they keep coming
    #: (a burst) and wake the waiting entities this long after the last one (at most 4x
    #: after the first), once for the whole burst. 0: every Node event wakes at once (as
    #: ``until_idle`` always does)
    node_batch: float = attrs.field(default=1.0)
    #: pod and PodGroup condition writes in flight at most (queued, PodGroups going True
    #: first; bindings are not counted)
    status_concurrency: int = attrs.field(default=4, validator=_positive)
    #: seconds: an ``Unschedulable`` explanation whose new message differs from the one
    #: written less than this long ago only in its numbers (node counts, "at most N fit")
    #: is not rewritten at once but when this much time has passed since that write (the
    #: latest message then; nothing if the pod or group was scheduled meanwhile), together
    #: with its ``FailedScheduling`` event. A change of status, reason or wording is written
    #: at once. 0: every change at once (kube-scheduler's behaviour)
    status_refresh_interval: float = attrs.field(default=30.0)

    @status_refresh_interval.validator
    @node_batch.validator
    def _non_negative(self, attribute: attrs.Attribute[float], value: float) -> None:
        if value < 0:
            raise ValueError(f"{attribute.name} must be >= 0, not {value!r}")

    #: also write ``CompositePodGroupInitiallyScheduled`` on CompositePodGroups (upstream
    #: kube-scheduler v1.37.2 writes no CompositePodGroup condition: off by default)
    composite_status: bool = False
    #: field manager / event reporting component
    component: str = "workloadbuilder-scheduler"
    #: act on the DefaultPreemption plugin's choice (delete victims). The
    #: ``workloadbuilder scheduler`` command and the simulator (scenario option, default
    #: on) turn it on; in process it is opt-in
    preemption: bool = False
    #: while the informers list, collect only the youngest generation; once they have
    #: synced, install the process's garbage-collector policy
    #: (:class:`workloadbuilder.runtime.GcPolicy`: what is alive then, and what survives each
    #: later full collection, is frozen, so full collections stop re-walking the cache; a
    #: complete collection still runs every 5 minutes). Process-wide; False leaves the
    #: collector as it is (``workloadbuilder scheduler --no-gc-freeze``)
    gc_freeze: bool = True
