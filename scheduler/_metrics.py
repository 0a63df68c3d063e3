"""Prometheus metrics, with upstream kube-scheduler names where the meaning is the same."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = [
    "ATTEMPT_DURATION",
    "BIND_RESULTS",
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
