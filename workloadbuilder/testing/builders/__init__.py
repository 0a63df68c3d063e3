"""Fluent builders of test objects, in the Kueue style: ``make_job("a").parallelism(3).obj()``.

Every ``make_*`` function returns a builder whose defaults already make a minimal valid object
(a Pod with one ``pause`` container, a PodGroup with a basic policy, a Workload with one
template, ...). Each setter changes the builder and returns it, so calls chain; ``obj()`` returns
the object as a plain Kubernetes dict (camelCase JSON, as sent to the API server)::

    from workloadbuilder.testing.builders import make_job, make_node, make_pod

    node = make_node("n1").resource("cpu", "8").ready().obj()
    pod = make_pod("p", "ns").pod_group("gang").request("cpu", "1").obj()
    job = make_job("train", "ns").parallelism(4).completions(4).gang(min_count=2).obj()

Guarantees:

* ``obj()`` returns a fresh deep copy: changing it, or calling more setters afterwards, never
  affects another object. Values given to setters are copied when they are set, and so are the
  objects of nested builders (``template(make_pod_template()...)`` takes a snapshot). Use
  :meth:`clone` to fork a builder.
* Keys come out in one fixed order per kind (``apiVersion``, ``kind``, ``metadata``, ``spec``,
  ``status``, and a fixed order inside each), whatever order the setters are called in, so two
  builders that set the same fields produce byte-identical JSON. Keys set through :meth:`field`
  that the builder does not know follow the known ones, in the order they were set.
* :meth:`field` sets any field by its dotted path, for what no setter covers.

This package imports only the standard library: tests that build objects do not pull in the
control-plane harness, the HTTP client or the SDK's models.

The package is split by kind: ``_base`` (key orders, :class:`ObjectBuilder`), ``_pods``
(pods, pod templates, ``spec.scheduling`` blocks), ``_workloads`` (Job, JobSet,
LeaderWorkerSet), ``_objects`` (nodes, PriorityClasses, Workloads, PodGroups,
CompositePodGroups); every public name is here.
"""

from __future__ import annotations

from workloadbuilder.testing.builders._base import PAUSE_IMAGE, ObjectBuilder
from workloadbuilder.testing.builders._objects import (
    CompositePodGroupBuilder,
    CompositePodGroupTemplateBuilder,
    NodeBuilder,
    PodGroupBuilder,
    PodGroupTemplateBuilder,
    PriorityClassBuilder,
    WorkloadBuilder,
    make_composite_pod_group,
    make_composite_pod_group_template,
    make_node,
    make_pod_group,
    make_pod_group_template,
    make_priority_class,
    make_workload,
)
from workloadbuilder.testing.builders._pods import (
    PodBuilder,
    PodTemplateBuilder,
    SchedulingBuilder,
    make_pod,
    make_pod_template,
    make_scheduling,
)
from workloadbuilder.testing.builders._workloads import (
    JobBuilder,
    JobSetBuilder,
    LeaderWorkerSetBuilder,
    ReplicatedJobBuilder,
    make_job,
    make_jobset,
    make_lws,
    make_replicated_job,
)

__all__ = [
    "PAUSE_IMAGE",
    "CompositePodGroupBuilder",
    "CompositePodGroupTemplateBuilder",
    "JobBuilder",
    "JobSetBuilder",
    "LeaderWorkerSetBuilder",
    "NodeBuilder",
    "ObjectBuilder",
    "PodBuilder",
    "PodGroupBuilder",
    "PodGroupTemplateBuilder",
    "PodTemplateBuilder",
    "PriorityClassBuilder",
    "ReplicatedJobBuilder",
    "SchedulingBuilder",
    "WorkloadBuilder",
    "make_composite_pod_group",
    "make_composite_pod_group_template",
    "make_job",
    "make_jobset",
    "make_lws",
    "make_node",
    "make_pod",
    "make_pod_group",
    "make_pod_group_template",
    "make_pod_template",
    "make_priority_class",
    "make_replicated_job",
    "make_scheduling",
    "make_workload",
]
