"""Feature gates of kube-apiserver v1.37 that change what the scheduling API accepts."""

from __future__ import annotations

import attrs

__all__ = ["FeatureGates", "is_served"]


@attrs.frozen(kw_only=True)
class FeatureGates:
    """The WAS feature gates, all enabled by default (the SDK's reference configuration).

    Upstream defaults differ (every WAS gate is off by default in v1.37); pass the cluster's
    actual gates to reproduce its behaviour. What each gate does on the API server:

    * ``generic_workload`` (``GenericWorkload``): Workload and PodGroup storage is only
      registered when on; when off the resources are not served at all (404), so the
      validation functions do not look at it (see :func:`is_served`).
    * ``composite_pod_group`` (``CompositePodGroup``): CompositePodGroup storage; when off,
      ``compositePodGroupTemplates`` (at every level) and
      ``PodGroup.spec.parentCompositePodGroupName`` are silently dropped on write unless the
      old object already used them.
    * ``topology_aware_workload_scheduling``: ``schedulingConstraints`` of PodGroupTemplate and
      PodGroup dropped unless in use (CompositePodGroup constraints are not gated).
    * ``dra_workload_resource_claims``: ``resourceClaims`` of PodGroupTemplate / PodGroup dropped
      unless in use.
    * ``pod_group_preemption_policy``: ``preemptionPolicy`` everywhere dropped unless in use; when
      on, PodGroup / CompositePodGroup ``preemptionPolicy`` defaults to ``PreemptLowerPriority``.
    * ``workload_with_job``: ``Job.spec.scheduling`` dropped unless in use.

    A field that survives dropping (because the old object used it) is validated with the
    gate's declarative ``+k8s:ifDisabled(...)=+k8s:forbidden`` rule, so changing it is rejected
    with ``Forbidden``.
    """

    generic_workload: bool = True
    topology_aware_workload_scheduling: bool = True
    composite_pod_group: bool = True
    pod_group_preemption_policy: bool = True
    dra_workload_resource_claims: bool = True
    workload_with_job: bool = True

    def options(self) -> dict[str, bool]:
        """The declarative-validation options, keyed by upstream gate name."""
        return {
            "GenericWorkload": self.generic_workload,
            "TopologyAwareWorkloadScheduling": self.topology_aware_workload_scheduling,
            "CompositePodGroup": self.composite_pod_group,
            "PodGroupPreemptionPolicy": self.pod_group_preemption_policy,
            "DRAWorkloadResourceClaims": self.dra_workload_resource_claims,
            "WorkloadWithJob": self.workload_with_job,
        }


def is_served(kind: str, gates: FeatureGates) -> bool:
    """Whether kube-apiserver registers storage for ``kind`` under these gates (the API
    versions must also be enabled with ``--runtime-config``)."""
    if kind in ("Workload", "PodGroup"):
        return gates.generic_workload
    if kind == "CompositePodGroup":
        return gates.composite_pod_group
    return True
