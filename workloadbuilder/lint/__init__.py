"""Topology lint: do a workload's topology constraints match the cluster's nodes?

:func:`lint_topology` takes manifests (``Workload``, ``PodGroup``, ``CompositePodGroup``,
``Pod`` and every kind of :func:`workloadbuilder.kinds.default_registry`: Job, JobSet,
LeaderWorkerSet, GenericWorkload, custom kinds) and Node manifests, and checks every level of
every template:

* ``missing-key``: no node carries the level's topology key: the group can never schedule;
* ``not-nested``: a domain of a child level lies in more than one domain of its parent's key
  (a rack that spans two blocks), reported with the nodes involved;
* ``not-coarser``: a parent level is not coarser than its child (same key, or the parent's
  domains lie inside the child's: the levels are swapped);
* ``never-fits``: the group's smallest schedulable set of pods (``minCount`` pods of a gang,
  one pod of a basic group, ``minGroupCount`` children of a composite gang) fits in no domain
  of its key even on an empty cluster, with the largest domain's capacity;
* ``missing-label``: the nodes that lack a label some constraint uses.

Requests are :func:`workloadbuilder.resources.pod_requests` of the pods the kind's controller
creates (the Job's, JobSet's and LeaderWorkerSet's pod templates; ``Pod`` documents of the same
input for hand-written PodGroups); where no pod template is known the capacity check is
skipped and a note says so. Capacity is the nodes' ``status.allocatable`` (``capacity`` when
absent), pods packed first-fit-decreasing onto the nodes of a domain; taints, affinity and
``unschedulable`` are not considered.

    result = lint_topology(manifests, nodes)
    for f in result.findings:
        print(f"{f.subject}: {f.path}: {f.message}")

The package: ``_model`` (what is reported), ``_tree`` (nodes, template levels, runtime
groups), ``_collect`` (reading the input), ``_checks`` (the checks and :func:`lint_topology`).
"""

from __future__ import annotations

from workloadbuilder.lint._checks import lint_topology
from workloadbuilder.lint._model import (
    FINDING_TYPES,
    Finding,
    FindingType,
    LintInputError,
    TopologyLevel,
    TopologyLintResult,
)

__all__ = [
    "FINDING_TYPES",
    "Finding",
    "FindingType",
    "LintInputError",
    "TopologyLevel",
    "TopologyLintResult",
    "lint_topology",
]
