"""The ``batch/v1`` Job integration.

Where kube-controller-manager runs the native Job integration (feature gate
``WorkloadWithJob``, Jobs with ``spec.scheduling``), this integration stays out of the way:
it is not started (``workloadbuilder integrations run --job-mode native``, or ``auto`` when
the API server keeps ``spec.scheduling``).

Elsewhere a Job opts in with the annotation :data:`SCHEDULING_ANNOTATION`
(``workloadbuilder.io/scheduling``) whose value is the JSON (or YAML) of the ``spec.scheduling``
block the native API would take (``{"schedulingPolicy": {"gang": {"minCount": 4}}}``,
``{}`` for a basic group). The integration then produces exactly the objects the native
controller would for a Job with that ``spec.scheduling`` (same names, ownerReferences,
minCount defaulting to ``parallelism`` and following it). Child Jobs that delegate to a
parent's Workload (``scheduling.k8s.io/group-template-name`` and a controller owner) need no
annotation.
"""

from workloadbuilder.integrations.job.integration import (
    SCHEDULING_ANNOTATION,
    OptInJobIntegration,
    opted_in_job,
)
from workloadbuilder.integrations.job.rbac import RULES

__all__ = ["RULES", "SCHEDULING_ANNOTATION", "OptInJobIntegration", "opted_in_job"]
