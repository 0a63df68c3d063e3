"""The volume plugins (kube-scheduler's VolumeRestrictions, NodeVolumeLimits, VolumeBinding
and VolumeZone, ``pkg/scheduler/framework/plugins/{volumerestrictions,nodevolumelimits,
volumebinding,volumezone}`` of v1.37.2), gang-aware.

Split as upstream splits it:

- ``_state``: the volume state (upstream's informer listers and the binder's assume caches):
  PersistentVolumes, PersistentVolumeClaims, StorageClasses, CSINodes, CSIDrivers and
  VolumeAttachments as the informers deliver them, the bindings this scheduler decided until
  the informers show them, and the current cycle's tentative ones. The scheduler owns one
  and feeds it; the plugins take it through ``use_volume_state``.
- ``_match``: pure helpers over the objects (storage classes, binding annotations, PV node
  affinity, a claim's candidate volumes, smallest first, zone labels).
- ``_plugins``: the four plugins and VolumeBinding's PreBind / Unreserve writes. A PV's node
  affinity is evaluated once per volume version and node-table epoch, as a mask over node
  rows; a pod's WaitForFirstConsumer claims then need one pass over their candidates.

Inside one PodGroup or CompositePodGroup cycle, the pods placed earlier count as pods on
their nodes (disk conflicts, ReadWriteOncePod claims in use, CSI volume counts), and a
PersistentVolume chosen for one pod's claim is not offered to another pod's claim.
"""

from workloadbuilder.scheduler._volumes._plugins import (
    NodeVolumeLimits,
    VolumeBinding,
    VolumeBindingPlan,
    VolumeRestrictions,
    VolumeZone,
)
from workloadbuilder.scheduler._volumes._state import VolumeState

__all__ = [
    "VOLUME_KINDS",
    "NodeVolumeLimits",
    "VolumeBinding",
    "VolumeBindingPlan",
    "VolumeRestrictions",
    "VolumeState",
    "VolumeZone",
]

#: the informer kinds the volume state keeps
VOLUME_KINDS = (
    "StorageClass",
    "CSIDriver",
    "CSINode",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "VolumeAttachment",
)
