"""Dynamic Resource Allocation (kube-scheduler's ``dynamicresources`` plugin, structured
parameters of ``resource.k8s.io/v1``), including ResourceClaims shared by a PodGroup
(KEP-5729, ``DRAWorkloadResourceClaims``).

Split as upstream splits it (``pkg/scheduler/framework/plugins/dynamicresources`` and
``k8s.io/dynamic-resource-allocation/structured``):

- ``_manager``: the DRA manager (upstream's ``SharedDRAManager``): what the informers
  deliver (DeviceClasses, ResourceSlices, ResourceClaims), the claims assumed until the
  informer shows them, the devices in use, and the per-node caches. The scheduler owns one
  and feeds it; the framework hands it to the plugins.
- ``_allocator`` (with ``_requests``, ``_devices``, ``_cel``, ``_nodeselector``): the pure
  allocator: a claim's requests and constraints, the devices a node reaches, CEL selectors;
  the allocation of one claim on one node, or why there is none. Testable without a
  scheduler.
- ``_claims``: which claims a pod needs (its own, generated from templates, its PodGroup's)
  and who each is reserved for.
- ``_plugin``: the plugin (the framework hooks) and the claim status writes.

In a cycle the plugin is asked pod by pod, for the node the cycle is about to choose: can
every claim of the pod be allocated (or, when already allocated, used) there? The allocation
it then makes is tentative, on the snapshot's undo log, so later pods of the same cycle see
those devices as taken and a failed gang gives them all back. A successful cycle commits the
allocations; PreBind writes each claim's ``status.allocation`` and ``status.reservedFor``
before the pod is bound; a failed bind releases them.

A pod's claim entry exactly equal to one of its PodGroup's ``spec.resourceClaims`` is the
group's claim: reserved for the PodGroup, allocated once, and its node restriction holds for
every pod of the group.

Supported: requests ``exactly`` with ``count`` or ``allocationMode: All``, CEL selectors of
the class and the request over ``device.driver``, ``device.attributes`` and
``device.capacity`` (``quantity()``, ``compareTo``, ``isGreaterThan``, ``isLessThan``),
``matchAttribute`` constraints, ``adminAccess``; ``firstAvailable`` sub-requests (the first
that can be allocated, results named ``<request>/<subrequest>``); partitionable devices
(``sharedCounters`` / ``consumesCounters``: a device only while its pool's counters last);
device taints (``NoSchedule`` / ``NoExecute``, of the slice or of a DeviceTaintRule) and
request ``tolerations``. Refused with an explicit "unsupported" reason:
``distinctAttribute``, request ``capacity``, and any request field this version does not
know. Devices that need binding conditions or come from
slices with per-device node selection, and pools that are incomplete or name counters they
do not define, are never allocated.

The package is private (``_dra``, not ``dra``): the scheduler's public surface stays
``workloadbuilder.scheduler``'s ``__all__``; the scheduler's own modules (the profile's
plugin registry, the scheduler that owns the manager) import the names below from here, and
only this package's modules import its submodules.
"""

from workloadbuilder.scheduler._dra._manager import DRAManager, Reservation
from workloadbuilder.scheduler._dra._nodeselector import node_selector_matches, terms_match
from workloadbuilder.scheduler._dra._plugin import (
    DELETE_PROTECTION_FINALIZER,
    MAX_RESERVED_FOR,
    DynamicResources,
)

__all__ = [
    "DELETE_PROTECTION_FINALIZER",
    "MAX_RESERVED_FOR",
    "DRAManager",
    "DynamicResources",
    "Reservation",
    "node_selector_matches",
    "terms_match",
]
