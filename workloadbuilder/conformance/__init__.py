"""A conformance suite for workload-aware schedulers (Kubernetes v1.37).

Rules are data: one YAML file per rule under ``rules/`` (the scenario, the outcome the rule
requires, its feature and the upstream source it comes from); :func:`load_rules` reads them.
:class:`ConformanceRunner` plays them against any :class:`workloadbuilder.cluster.Cluster`
for the scheduler named by ``scheduler_name`` (pods get that ``spec.schedulerName``), each in
its own namespace on fake, tainted Nodes, and cleans up. ``workloadbuilder conformance run``
is the command line; ``docs/conformance.md`` describes every rule.

Rules marked ``extension`` check this project's additions (not upstream behaviour) and are
skipped for ``default-scheduler``. Features in :data:`PLANNED_FEATURES` have no rules yet.
"""

from __future__ import annotations

from workloadbuilder.conformance._report import (
    render_json,
    render_junit,
    render_text,
    summary,
)
from workloadbuilder.conformance._rules import (
    FEATURES,
    PLANNED_FEATURES,
    UPSTREAM_SCHEDULER,
    Rule,
    load_rules,
    select_rules,
)
from workloadbuilder.conformance._runner import (
    RUN_LABEL,
    TAINT_KEY,
    WITNESS_TAINT_KEY,
    ConformanceRunner,
    Progress,
    RuleResult,
)

__all__ = [
    "FEATURES",
    "PLANNED_FEATURES",
    "RUN_LABEL",
    "TAINT_KEY",
    "UPSTREAM_SCHEDULER",
    "WITNESS_TAINT_KEY",
    "ConformanceRunner",
    "Progress",
    "Rule",
    "RuleResult",
    "load_rules",
    "render_json",
    "render_junit",
    "render_text",
    "select_rules",
    "summary",
]
