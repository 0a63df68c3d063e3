"""``MemoryCluster``: the embedded, in-process implementation of the :class:`Cluster` protocol.

It is the default cluster of the SDK and the substrate of the simulator. It is composed of
small collaborators, each in the place its upstream counterpart has:

* :mod:`._storage` -- storage and watch fan-out (etcd + the watch cache): versioned records
  per kind, one resourceVersion counter, bounded per-kind history, field indexes
  (``spec.nodeName``, ``spec.schedulingGroup.podGroupName``), uid and owner indexes;
* :mod:`._reads` and :mod:`._writes` -- the verbs (get / list / watch; create / update /
  patch / delete), with :mod:`._apply` (server-side apply) and :mod:`._strategy` +
  :mod:`._admission` (registry strategies, defaulting, admission, validation);
* :mod:`._lifecycle` -- deletion and finalizers, and the controllers kube-controller-manager
  runs upstream: :mod:`._gc` (ownerReferences), :mod:`._namespaces`, :mod:`._podgroups`
  (PodGroup protection);
* :mod:`._subresources` -- ``pods/binding``, ``pods/eviction`` with PodDisruptionBudgets,
  and Events.

:class:`MemoryCluster` (:mod:`._cluster`) wires them together and is the only public name.
See docs/cluster.md for the model and the documented differences from a real API server.
"""

from workloadbuilder.cluster._memory._cluster import MemoryCluster

__all__ = ["MemoryCluster"]
