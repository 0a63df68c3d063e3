"""Prometheus metrics, with upstream kube-scheduler names where the meaning is the same."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = [
    "ATTEMPT_DURATION",
    "BIND_RESULTS",
    "EVENTS_DROPPED",
    "EVENTS_WRITTEN",
    "PENDING",
    "PODGROUP_ATTEMPTS",
    "PODGROUP_ATTEMPT_DURATION",
    "PODGROUP_PREEMPTION_ATTEMPTS",
    "PODGROUP_PREEMPTION_DURATION",
    "PODGROUP_PREEMPTION_VICTIMS",
    "POD_ATTEMPTS",
    "PREEMPTION_ATTEMPTS",
    "PREEMPTION_VICTIMS",
    "REGISTRY",
    "SCHEDULED_PODS",
    "WATCH_STALLS",
    "WatchStalls",
]

#: the scheduler's own registry (served by ``workloadbuilder scheduler --metrics-port``)
REGISTRY = CollectorRegistry(auto_describe=True)

PODGROUP_ATTEMPTS = Counter(
    "scheduler_podgroup_schedule_attempts",
    "Number of attempts to schedule pod groups, by result.",
    ["result"],
    registry=REGISTRY,
)
POD_ATTEMPTS = Counter(
    "scheduler_schedule_attempts",
    "Number of attempts to schedule single pods, by result.",
    ["result", "profile"],
    registry=REGISTRY,
)
PODGROUP_ATTEMPT_DURATION = Histogram(
    "scheduler_podgroup_scheduling_attempt_duration_seconds",
    "Pod-group scheduling attempt latency in seconds (algorithm only).",
    ["result"],
    buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5),
    registry=REGISTRY,
)
ATTEMPT_DURATION = Histogram(
    "scheduler_scheduling_attempt_duration_seconds",
    "Single-pod scheduling attempt latency in seconds.",
    ["result", "profile"],
    buckets=(0.0001, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.05, 0.1, 0.5, 1),
    registry=REGISTRY,
)
PENDING = Gauge(
    "scheduler_pending_entities",
    "Number of pending entities (pods and pod groups) by type and queue.",
    ["type", "queue"],
    registry=REGISTRY,
)
BIND_RESULTS = Counter(
    "scheduler_binding_results",
    "Binding calls by result.",
    ["result"],
    registry=REGISTRY,
)
SCHEDULED_PODS = Counter(
    "scheduler_pods_scheduled",
    "Pods bound by this scheduler.",
    registry=REGISTRY,
)
PODGROUP_PREEMPTION_ATTEMPTS = Counter(
    "scheduler_podgroup_preemption_attempts",
    "Pod-group preemption attempts (an eligible preemptor with lower-priority units).",
    registry=REGISTRY,
)
PODGROUP_PREEMPTION_DURATION = Histogram(
    "scheduler_podgroup_preemption_attempt_duration_seconds",
    "Pod-group preemption attempt latency in seconds (victim selection).",
    buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5),
    registry=REGISTRY,
)
PODGROUP_PREEMPTION_VICTIMS = Histogram(
    "scheduler_podgroup_preemption_victims",
    "Number of pods preempted per successful pod-group preemption.",
    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
    registry=REGISTRY,
)
#: single-pod (default) preemption, upstream's names and buckets: every PostFilter call of
#: a pod that fits nowhere counts as an attempt, eligible or not
PREEMPTION_ATTEMPTS = Counter(
    "scheduler_preemption_attempts",
    "Total preemption attempts in the cluster till now (single pods).",
    registry=REGISTRY,
)
PREEMPTION_VICTIMS = Histogram(
    "scheduler_preemption_victims",
    "Number of selected preemption victims for preemption initiated by a single pod.",
    buckets=(1, 2, 4, 8, 16, 32, 64),
    registry=REGISTRY,
)
#: events the scheduler did not write: dropped because ``max_queued_events`` were already
#: waiting (only explanations' events; a ``Scheduled`` event waits for room instead)
EVENTS_DROPPED = Counter(
    "scheduler_events_dropped",
    "Events dropped because the event queue was full, by reason.",
    ["reason"],
    registry=REGISTRY,
)
EVENTS_WRITTEN = Counter(
    "scheduler_event_writes",
    "Event create requests sent, by result (ok, error).",
    ["result"],
    registry=REGISTRY,
)
# exported at 0 from the start (a scrape tells "none" from "not exported")
EVENTS_DROPPED.labels(reason="FailedScheduling")
for _result in ("ok", "error"):
    EVENTS_WRITTEN.labels(result=_result)


class WatchStalls(Collector):
    """``scheduler_watch_stalls_total{resource}``: watches the client dropped because
    nothing (no event, no bookmark) arrived within its stall bound, read at scrape time
    from :attr:`source` (the command sets it to its ``KubeCluster.watch_stalls``, counts
    by request path; none: no samples)."""

    def __init__(self) -> None:
        #: returns the stall counts by watch path (``/api/v1/pods``, ...)
        self.source: Callable[[], Mapping[str, int]] | None = None

    def collect(self) -> Iterator[Metric]:
        """One sample per resource (the last segment of the watch path)."""
        fam = CounterMetricFamily(
            "scheduler_watch_stalls",
            "Watches dropped because nothing arrived within the stall bound, by resource.",
            labels=["resource"],
        )
        counts: dict[str, int] = {}
        for path, n in (self.source() if self.source is not None else {}).items():
            resource = path.rstrip("/").rsplit("/", 1)[-1]
            counts[resource] = counts.get(resource, 0) + n
        for resource, n in sorted(counts.items()):
            fam.add_metric([resource], n)
        yield fam


WATCH_STALLS = WatchStalls()
REGISTRY.register(WATCH_STALLS)
