"""The JobSet integration (``jobset.x-k8s.io/v1alpha2``, KEP-969 ``spec.scheduling``).

For JobSet controllers without workload-aware scheduling: the JobSet owns one Workload with
the upstream templates (whole JobSet / per ReplicatedJob / per child Job) and the PodGroups;
the pods of its child Jobs are linked by the pod webhook (their ``job-name`` label names the
child Job). Child Jobs created by a WAS-aware JobSet controller already carry
``scheduling.k8s.io/group-template-name`` and ``spec.schedulingGroup``; the Job integration
then leaves them alone. Changing ``replicas`` or ``parallelism`` re-plans: new PodGroups are
created, gone ones deleted, changed ``minCount`` patched.
"""

from workloadbuilder.integrations.jobset.integration import JobSetIntegration, child_jobs
from workloadbuilder.integrations.jobset.rbac import RULES

__all__ = ["RULES", "JobSetIntegration", "child_jobs"]
