"""A conformance suite for workload-aware schedulers (Kubernetes v1.37).

Rules are data: one YAML file per rule under ``rules/`` (the scenario, the outcome the rule
requires, its feature and the upstream source it comes from); :func:`load_rules` reads them.
:class:`ConformanceRunner` plays them against any :class:`workloadbuilder.cluster.Cluster`
for the scheduler named by ``scheduler_name`` (pods get that ``spec.schedulerName``), each in
its own namespace on fake, tainted Nodes, and cleans up. ``workloadbuilder conformance run``
is the command line; ``docs/conformance.md`` describes every rule.

Rules marked ``extension`` check this project's additions (not upstream behaviour) and are
skipped for ``default-scheduler``. Features in :data:`PLANNED_FEATURES` have no rules yet.

The integration profile (``load_rules("integration")``) checks an integration instead: given
an :class:`IntegrationSample` (:func:`load_sample`), the Workload, PodGroups and
CompositePodGroups it creates, the pods' links, a resize and the cleanup.
"""

from __future__ import annotations

from workloadbuilder.conformance._integration import UNSCHEDULED
from workloadbuilder.conformance._report import (
    render_json,
    render_junit,
    render_text,
    summary,
)
from workloadbuilder.conformance._rules import (
    FEATURES,
    INTEGRATION_CHECKS,
    PLANNED_FEATURES,
    PROFILES,
    UPSTREAM_SCHEDULER,
    Rule,
    load_rules,
    select_rules,
)
from workloadbuilder.conformance._runner import (
    RUN_LABEL,
    SCENARIO_LABEL,
    TAINT_KEY,
    WITNESS_TAINT_KEY,
    ConformanceRunner,
    Progress,
    RuleResult,
    remove_leftovers,
)
from workloadbuilder.conformance._samples import (
    BUILTIN_SAMPLES,
    SAMPLE_API_VERSION,
    IntegrationSample,
    SampleOutcome,
    load_sample,
    standin_child_jobs,
    standin_pods,
)

__all__ = [
    "BUILTIN_SAMPLES",
    "FEATURES",
    "INTEGRATION_CHECKS",
    "PLANNED_FEATURES",
    "PROFILES",
    "RUN_LABEL",
    "SAMPLE_API_VERSION",
    "SCENARIO_LABEL",
    "TAINT_KEY",
    "UNSCHEDULED",
    "UPSTREAM_SCHEDULER",
    "WITNESS_TAINT_KEY",
    "ConformanceRunner",
    "IntegrationSample",
    "Progress",
    "Rule",
    "RuleResult",
    "SampleOutcome",
    "load_rules",
    "load_sample",
    "remove_leftovers",
    "render_json",
    "render_junit",
    "render_text",
    "select_rules",
    "standin_child_jobs",
    "standin_pods",
    "summary",
]
