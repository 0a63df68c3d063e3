"""The volume plugins this scheduler does not have yet (VolumeBinding, VolumeRestrictions,
NodeVolumeLimits): they refuse the pods that need them, with a reason, instead of binding them
as if their volumes were not there."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from workloadbuilder.scheduler._interface import (
    SUCCESS,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    Rows,
    SharedLister,
    Status,
)
from workloadbuilder.scheduler._podconstraints import Mask, ReserveBase

if TYPE_CHECKING:
    from workloadbuilder.scheduler._cache import PodInfo

__all__ = ["NodeVolumeLimits", "VolumeBinding", "VolumeRestrictions"]


class _Refusing(ReserveBase):
    """A plugin this scheduler does not implement yet: a pod that needs it stays pending with
    a reason naming it (UnschedulableAndUnresolvable), instead of being bound as if its
    volumes were not there."""

    #: nothing to check for a pod without constraints
    pod_scoped = True

    def applies(self, pod: PodInfo) -> bool:
        """Pods with something this plugin would have to evaluate."""
        c = pod.constraints
        if c is None or not c.unsupported:
            return False
        return any(u.startswith(self.name + ":") for u in c.unsupported)

    def events_to_register(self) -> list[ClusterEventWithHint]:
        """Only the pod's own change can help (its volumes are immutable: in practice none)."""
        return [
            ClusterEventWithHint(
                ClusterEvent("Pod", ActionType.UPDATE_POD_REQUIREMENTS),
                lambda key, old, new: (
                    key[0] == "Pod" and (key[1], key[2]) == (new.namespace, new.name)
                ),
            )
        ]

    def pre_filter_pod(self, pod: PodInfo, lister: SharedLister) -> Status:
        """Refused, naming the volume and the missing plugin."""
        c = pod.constraints
        reasons = [u for u in (c.unsupported if c is not None else ()) if u.startswith(self.name)]
        if not reasons:
            return SUCCESS
        text = "; ".join(u.split(": ", 1)[1] for u in reasons)
        return Status(code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE, message=text, plugin=self.name)

    def feasible_rows(self, pod: PodInfo, lister: SharedLister) -> Mask | None:
        """No opinion per node (the PreFilter verdict decides)."""
        return None

    def filter_pod(self, pod: PodInfo, lister: SharedLister, row: int) -> Any:
        """Never reached for a refused pod; passes otherwise."""
        return None if self.pre_filter_pod(pod, lister).code is not Code.SUCCESS else True

    def diagnose_pod(
        self, pod: PodInfo, lister: SharedLister, rows: Rows
    ) -> list[tuple[str, str, int]]:
        """The PreFilter verdict says it all."""
        return []


class VolumeBinding(_Refusing):
    """PersistentVolumeClaims and generic ephemeral volumes: not implemented yet, refused."""

    name = "VolumeBinding"


class VolumeRestrictions(_Refusing):
    """In-tree disks that cannot be shared between nodes: not implemented yet, refused."""

    name = "VolumeRestrictions"


class NodeVolumeLimits(_Refusing):
    """Inline CSI and attachable volumes counted against node limits: not implemented yet,
    refused."""

    name = "NodeVolumeLimits"
