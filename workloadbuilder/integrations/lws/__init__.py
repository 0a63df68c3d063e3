"""The LeaderWorkerSet integration (``leaderworkerset.x-k8s.io/v1``, KEP-666
``spec.scheduling``).

One Workload (named after the LWS, template ``replica``) and one PodGroup per replica (gang
``minCount`` = ``size``); with ``subgroup-exclusive-topology`` each replica is a
CompositePodGroup of one PodGroup per subgroup. The LWS controller names PodGroups
``<lws>-<index>-<revision>`` from a ControllerRevision hash that the LWS object does not
carry; this integration, which stands in for LWS controllers without workload-aware
scheduling, names them ``<lws>-<index>`` (the pod webhook uses the same names, from the
pods' ``group-index`` label). Changing ``replicas`` creates / deletes replicas' groups.
"""

from workloadbuilder.integrations.lws.integration import LeaderWorkerSetIntegration
from workloadbuilder.integrations.lws.rbac import RULES

__all__ = ["RULES", "LeaderWorkerSetIntegration"]
