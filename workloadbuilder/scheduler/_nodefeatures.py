"""NodeDeclaredFeatures (kube-scheduler v1.37.2, GA and always on): a pod whose spec needs a
node feature — a ``RestartAllContainers`` restart rule, ``hostNetwork`` with ``hostUsers:
false``, a volume mount with ``bindMountOptions`` — only goes to nodes that list that feature
in ``status.declaredFeatures``. A node that declares nothing is refused for such a pod (the
kubelet of an older node would not honour the field), which is what upstream does.

Upstream infers the requirements with ``k8s.io/component-helpers/nodedeclaredfeatures``; the
features whose inference can be true for scheduling are in
:func:`workloadbuilder.scheduler._resources.required_features`, and they are part of the pod's
scheduling signature, so pods of one template are checked once per node.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from workloadbuilder.scheduler._cache import NodeTable
from workloadbuilder.scheduler._interface import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Mask,
    Rows,
)
from workloadbuilder.scheduler._resources import PodRequirements

__all__ = ["NodeDeclaredFeatures"]

#: upstream's reason (UnschedulableAndUnresolvable)
REASON = "node(s) didn't match Pod's required features"


class NodeDeclaredFeatures:
    """Nodes must declare every feature the pod needs (``status.declaredFeatures``)."""

    name = "NodeDeclaredFeatures"
    uses_node_usage = False

    def events_to_register(self) -> list[ClusterEventWithHint]:
        """A node appears or changes (its declared features among what is compared); the
        pod's own spec changes."""
        return [
            ClusterEventWithHint(ClusterEvent("Node", ActionType.ADD | ActionType.UPDATE_NODE)),
            ClusterEventWithHint(
                ClusterEvent("Pod", ActionType.UPDATE_POD_REQUIREMENTS),
                lambda key, old, new: (
                    key[0] == "Pod" and (key[1], key[2]) == (new.namespace, new.name)
                ),
            ),
        ]

    def filter(
        self, req: PodRequirements, vec: npt.NDArray[np.int64], table: NodeTable, rows: Rows
    ) -> Mask:
        """Rows whose declared features include every required one (all rows when the pod
        needs none: the common case costs one check)."""
        if not req.features:
            return np.ones(rows.size, dtype=bool)
        need = frozenset(req.features)
        return np.fromiter(
            (need <= table.features[r] for r in rows.tolist()), dtype=bool, count=rows.size
        )

    def diagnose(
        self, req: PodRequirements, vec: npt.NDArray[np.int64], table: NodeTable, rows: Rows
    ) -> list[tuple[str, str, int]]:
        """Count the nodes lacking a required feature."""
        n = int((~self.filter(req, vec, table, rows)).sum())
        missing = ", ".join(req.features)
        return [(REASON, f"do not declare the node features the pod needs ({missing})", n)]
