"""What every long-running component (the scheduler, integrations, controllers) shares.

* :class:`Clock` (``now()``, ``async sleep()``): :class:`WallClock` for real time,
  :class:`ManualClock` for tests; simulators bring their own virtual clock.
* :class:`Component`: ``start / stop / sync / until_idle / next_wakeup``, so a component
  runs for real or is stepped by a simulator.
* :class:`Feed`: an :class:`~workloadbuilder.cluster.Informer` per kind turned into one
  synchronous handler (the informer fan-in); :func:`settle` waits until feeds are quiet;
  :func:`probe_feeds` learns together which optional kinds are served.
* :class:`LeaderElector`: ``coordination.k8s.io/v1`` Lease leader election.
* :class:`HealthServer`: ``/metrics``, ``/healthz``, ``/livez``, ``/readyz``.
* :func:`add_kube_flags` / :func:`kube_cluster`: ``--kubeconfig --context`` to a
  :class:`~workloadbuilder.cluster.KubeCluster` (in-cluster config inside a pod);
  :func:`check_access` / :func:`credential_source`: stop at start-up with one clear line
  (:class:`AccessError`) when the credentials are rejected (401) or a needed kind is
  forbidden (403).
* :func:`add_serving_flags`, :func:`check_access_or_close`, :func:`leader_elector`,
  :func:`stop_on_signals`, :func:`start_health`, :func:`lead_or_stop`, :func:`cancel_all`,
  :func:`report_lost_lease`: the start-up and shutdown of a component command (the scheduler,
  ``integrations run``), in one place.
* :class:`RateLimitedCluster` / :class:`TokenBucket`: client-side QPS and burst.
* :func:`run` / :func:`event_loop_factory` / :func:`add_event_loop_flag`: the event loop a
  component runs on (uvloop when installed, else asyncio; ``--event-loop``).
* :class:`GcPolicy` / :data:`gc_policy`: the garbage-collector policy of a process with a
  large long-lived heap (freeze what survives full collections; complete collections on a
  timer).
* :class:`WorkQueue`: a rate-limited work queue (controller-runtime semantics).
* :class:`Reconciler`: the generic integration controller (Plan -> cluster objects).
* :func:`link_pod` / :func:`link_pod_template`: link pods an operator creates to their group.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from workloadbuilder._lazy import lazy_names
from workloadbuilder.runtime._access import AccessError, check_access, credential_source
from workloadbuilder.runtime._clock import Clock, ManualClock, WallClock
from workloadbuilder.runtime._component import Component
from workloadbuilder.runtime._eventloop import (
    EVENT_LOOP_ENV,
    EventLoopChoice,
    add_event_loop_flag,
    event_loop_factory,
    resolve_event_loop,
    run,
)
from workloadbuilder.runtime._feed import Feed, Handler, probe_feeds, settle
from workloadbuilder.runtime._gc import GcPolicy, gc_policy
from workloadbuilder.runtime._health import HealthServer
from workloadbuilder.runtime._kubeflags import add_kube_flags, kube_cluster
from workloadbuilder.runtime._leader import LeaderElector
from workloadbuilder.runtime._ratelimit import RateLimitedCluster, TokenBucket
from workloadbuilder.runtime._startup import (
    LOST_LEASE,
    add_serving_flags,
    cancel_all,
    check_access_or_close,
    lead_or_stop,
    leader_elector,
    process_identity,
    report_lost_lease,
    start_health,
    stop_on_signals,
)
from workloadbuilder.runtime._workqueue import WorkQueue

if TYPE_CHECKING:
    from workloadbuilder.kinds import OwnerConditions, OwnerlessObjects
    from workloadbuilder.runtime._owned import (
        CONDITION_GANG_SCHEDULED,
        CONDITION_INITIALLY_SCHEDULED,
        EVENT_FAILED_COMPILATION,
        EVENT_FAILED_WORKLOAD_CREATE,
        EVENT_GANG_PREEMPTED,
        EVENT_GANG_SCHEDULED,
        EVENT_GANG_UNSCHEDULABLE,
        ReconcileResult,
    )
    from workloadbuilder.runtime._podlink import link_pod, link_pod_template
    from workloadbuilder.runtime._reconciler import Reconciler

__all__ = [
    "CONDITION_GANG_SCHEDULED",
    "CONDITION_INITIALLY_SCHEDULED",
    "EVENT_FAILED_COMPILATION",
    "EVENT_FAILED_WORKLOAD_CREATE",
    "EVENT_GANG_PREEMPTED",
    "EVENT_GANG_SCHEDULED",
    "EVENT_GANG_UNSCHEDULABLE",
    "EVENT_LOOP_ENV",
    "LOST_LEASE",
    "AccessError",
    "Clock",
    "Component",
    "EventLoopChoice",
    "Feed",
    "GcPolicy",
    "Handler",
    "HealthServer",
    "LeaderElector",
    "ManualClock",
    "OwnerConditions",
    "OwnerlessObjects",
    "RateLimitedCluster",
    "ReconcileResult",
    "Reconciler",
    "TokenBucket",
    "WallClock",
    "WorkQueue",
    "add_event_loop_flag",
    "add_kube_flags",
    "add_serving_flags",
    "cancel_all",
    "check_access",
    "check_access_or_close",
    "credential_source",
    "event_loop_factory",
    "gc_policy",
    "kube_cluster",
    "lead_or_stop",
    "leader_elector",
    "link_pod",
    "link_pod_template",
    "probe_feeds",
    "process_identity",
    "report_lost_lease",
    "resolve_event_loop",
    "run",
    "settle",
    "start_health",
    "stop_on_signals",
]

#: public names resolved on first access (module that defines them): the integrations' parts,
#: which the scheduler does not load
_LAZY = {
    "link_pod": "workloadbuilder.runtime._podlink",
    "link_pod_template": "workloadbuilder.runtime._podlink",
    "CONDITION_GANG_SCHEDULED": "workloadbuilder.runtime._owned",
    "CONDITION_INITIALLY_SCHEDULED": "workloadbuilder.runtime._owned",
    "EVENT_FAILED_COMPILATION": "workloadbuilder.runtime._owned",
    "EVENT_FAILED_WORKLOAD_CREATE": "workloadbuilder.runtime._owned",
    "EVENT_GANG_PREEMPTED": "workloadbuilder.runtime._owned",
    "EVENT_GANG_SCHEDULED": "workloadbuilder.runtime._owned",
    "EVENT_GANG_UNSCHEDULABLE": "workloadbuilder.runtime._owned",
    # the Integration capabilities the Reconciler reads, defined with the others in kinds
    "OwnerConditions": "workloadbuilder.kinds",
    "OwnerlessObjects": "workloadbuilder.kinds",
    "Reconciler": "workloadbuilder.runtime._reconciler",
    "ReconcileResult": "workloadbuilder.runtime._owned",
}


__getattr__, __dir__ = lazy_names(globals(), _LAZY)
