"""Informer event handlers (kube-scheduler's ``eventhandlers.go``): fold every change into
the cache, keep the queue entities current, and turn changes into cluster events the queue
offers to the plugins' registered events and hints."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from workloadbuilder.api import CompositePodGroup, PodGroup
from workloadbuilder.runtime import Clock
from workloadbuilder.scheduler._cache import Cache, PodInfo
from workloadbuilder.scheduler._enqueue import Enqueuer
from workloadbuilder.scheduler._interface import ActionType, ClusterEvent
from workloadbuilder.scheduler._queue import EntityKey, SchedulingQueue
from workloadbuilder.scheduler._status import StatusWriter
from workloadbuilder.scheduler._tree import find_root

__all__ = ["EVENTS", "EventHandlers", "creation_order"]

#: the cluster events the handlers emit
NODE_ADD = ClusterEvent("Node", ActionType.ADD)
NODE_UPDATE = ClusterEvent("Node", ActionType.UPDATE_NODE)
NODE_SYNC = ClusterEvent("Node", ActionType.ADD | ActionType.UPDATE_NODE)
POD_ADD = ClusterEvent("Pod", ActionType.ADD)
POD_REQUIREMENTS = ClusterEvent("Pod", ActionType.UPDATE_POD_REQUIREMENTS)
POD_GATES_ELIMINATED = ClusterEvent("Pod", ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED)
ASSIGNED_POD_ADD = ClusterEvent("AssignedPod", ActionType.ADD)
ASSIGNED_POD_DELETE = ClusterEvent("AssignedPod", ActionType.DELETE)
POD_GROUP_ADD = ClusterEvent("PodGroup", ActionType.ADD)
POD_GROUP_UPDATE = ClusterEvent("PodGroup", ActionType.UPDATE_POD_GROUP)
COMPOSITE_POD_GROUP_ADD = ClusterEvent("CompositePodGroup", ActionType.ADD)
POD_GENERATED_CLAIM = ClusterEvent("Pod", ActionType.UPDATE_POD_GENERATED_RESOURCE_CLAIM)
EVENTS = (
    NODE_ADD,
    NODE_UPDATE,
    POD_ADD,
    POD_REQUIREMENTS,
    POD_GATES_ELIMINATED,
    ASSIGNED_POD_ADD,
    ASSIGNED_POD_DELETE,
    POD_GROUP_ADD,
    POD_GROUP_UPDATE,
    COMPOSITE_POD_GROUP_ADD,
    POD_GENERATED_CLAIM,
)

#: handler(event_type, object) of a DRA kind (the DynamicResources plugin's state)
_DraHandler = Callable[[str, Any], None]


def creation_order(obj: Any) -> tuple[str, int, str]:
    """Sort key approximating creation order for an initial list (first-seen order)."""
    if isinstance(obj, dict):
        meta = obj.get("metadata") or {}
        ts, rv, name = meta.get("creationTimestamp"), meta.get("resourceVersion"), meta.get("name")
    else:
        m = obj.metadata
        ts, rv, name = m.creation_timestamp, m.resource_version, m.name
    rv_num = int(rv) if isinstance(rv, str) and rv.isdigit() else 0
    return (str(ts or ""), rv_num, str(name or ""))


class EventHandlers:
    """One handler per watched kind; each receives ``SYNC`` (the initial list) and then
    ``ADDED`` / ``MODIFIED`` / ``DELETED``."""

    def __init__(
        self,
        cache: Cache,
        queue: SchedulingQueue,
        enqueuer: Enqueuer,
        status: StatusWriter,
        clock: Clock,
    ) -> None:
        self.cache = cache
        self.queue = queue
        self.enqueuer = enqueuer
        self.status = status
        self.clock = clock
        #: seconds a burst of Node events is collected before the entities they concern are
        #: woken (0: at once; the scheduler's run loop sets ``SchedulerConfig.node_batch``)
        self.node_batch = 0.0
        self._node_events: list[tuple[ClusterEvent, Any]] = []
        self._node_first = 0.0
        self._node_due: float | None = None
        #: called when a Node event is collected (the run loop recomputes its wakeup)
        self.on_node_pending: Callable[[], None] = lambda: None
        #: during a Pod SYNC into an empty queue: the groups whose new pods arrived, to be
        #: refreshed once each when the list is in (see :meth:`on_pod`)
        self._synced_groups: dict[tuple[str, str], None] | None = None

    def _node_event(self, event: ClusterEvent, obj: Any) -> None:
        """Offer a Node event to the queue, or collect it while a burst lasts: the waiting
        entities are woken ``node_batch`` seconds after the last Node event of a burst (at
        most 4x that after its first), so a backlog is re-attempted once with the nodes a
        burst brings (an autoscaler's step, a rack powered on), not once per node."""
        if self.node_batch <= 0:
            self.queue.on_event(event, None, obj)
            return
        now = self.clock.now()
        if not self._node_events:
            self._node_first = now
        self._node_events.append((event, obj))
        self._node_due = min(now + self.node_batch, self._node_first + 4 * self.node_batch)
        self.on_node_pending()

    def next_node_flush(self) -> float | None:
        """When the collected Node events are due to wake entities (None: none collected)."""
        return self._node_due if self._node_events else None

    def flush_node_events(self, *, force: bool = False) -> int:
        """Offer the collected Node events to the queue when due (or now, with ``force``);
        returns how many entities moved."""
        if not self._node_events or (
            not force and self._node_due is not None and self.clock.now() < self._node_due
        ):
            return 0
        events, self._node_events, self._node_due = self._node_events, [], None
        for event, obj in events:
            hints = self.queue.hints_for(event)
            if any(h is None for h in hints):
                # an event some plugin takes without a hint wakes every waiting entity, so
                # once it is offered the rest of the burst would move nothing: offer it
                # alone (one pass over the queue per burst, not one per Node event)
                return self.queue.on_event(event, None, obj)
        return sum(self.queue.on_event(event, None, obj) for event, obj in events)

    def _group_entity(self, p: PodInfo) -> EntityKey | None:
        """The entity a pod's event concerns: its group's root (a PodGroup, or the
        CompositePodGroup at the top of its tree: a pod added anywhere wakes the tree)."""
        gk = p.group_key
        return self.enqueuer.root_entity(gk) if gk is not None else None

    def dra_handler(
        self,
        resource: str,
        fold: _DraHandler,
        woken: Callable[[str, Any], list[tuple[str, str]]] | None = None,
        previous: Callable[[str, Any], Any] | None = None,
    ) -> _DraHandler:
        """A handler for a ``resource.k8s.io`` kind: ``fold`` keeps the plugin's state, then
        the change is a cluster event (``<Kind>/Add``, ``/UpdateObject`` or ``/Delete``);
        ``woken`` names pods whose PreEnqueue gate the change may lift; ``previous`` gives the
        object's version before the change (the queueing hints compare them)."""
        actions = {
            "SYNC": ActionType.ADD,
            "ADDED": ActionType.ADD,
            "MODIFIED": ActionType.UPDATE_OBJECT,
            "DELETED": ActionType.DELETE,
        }

        def handle(kind: str, obj: Any) -> None:
            old = previous(kind, obj) if previous is not None else None
            fold(kind, obj)
            for key in woken(kind, obj) if woken is not None else ():
                p = self.cache.pods.get(key)
                if p is not None:
                    self.enqueuer.refresh_for(p)
            action = actions.get(kind)
            if action is ActionType.DELETE:
                self.queue.on_event(ClusterEvent(resource, action), obj, None)
            elif action is not None:
                self.queue.on_event(ClusterEvent(resource, action), old, obj)

        return handle

    def on_priority_class(self, kind: str, obj: Any) -> None:
        """PriorityClasses (values resolve pod and group priorities)."""
        if kind == "SYNC":
            self.cache.set_priority_classes(
                {str(o["metadata"]["name"]): o for o in obj if isinstance(o, dict)}
            )
            return
        name = str(obj["metadata"]["name"])
        if kind == "DELETED":
            self.cache.remove_priority_class(name)
        else:
            self.cache.upsert_priority_class(name, obj)

    def on_pdb(self, kind: str, obj: Any) -> None:
        """PodDisruptionBudgets (preemption reads their status; no event requeues)."""
        if kind == "SYNC":
            self.cache.budgets.clear()
            for o in obj:
                if isinstance(o, dict):
                    self.cache.upsert_budget(o)
            return
        meta = obj["metadata"]
        if kind == "DELETED":
            self.cache.remove_budget(str(meta.get("namespace") or "default"), str(meta["name"]))
        else:
            self.cache.upsert_budget(obj)

    def on_node(self, kind: str, obj: Any) -> None:
        """Nodes: NodeAdd / NodeUpdate when allocatable, labels, taints or spec changed."""
        if kind == "SYNC":
            names = {str(o["metadata"]["name"]) for o in obj}
            for name in list(self.cache.node_objects):
                if name not in names:
                    self.cache.remove_node(name)
            changed = False
            for o in obj:
                changed |= self.cache.upsert_node(o)
            if changed:
                self._node_event(NODE_SYNC, None)
            return
        name = str(obj["metadata"]["name"])
        if kind == "DELETED":
            self.cache.remove_node(name)
            return
        known = name in self.cache.node_objects
        if self.cache.upsert_node(obj):
            self._node_event(NODE_UPDATE if known else NODE_ADD, obj)

    def on_composite_pod_group(self, kind: str, obj: Any) -> None:
        """CompositePodGroups: the trees of the namespace are re-evaluated; CompositePodGroup
        Add is a cluster event for the tree's root."""
        if kind == "SYNC":
            self.cache.set_composite_groups(
                {
                    (o.metadata.namespace or "default", o.metadata.name or ""): o
                    for o in obj
                    if isinstance(o, CompositePodGroup)
                }
            )
            for ns in {k[0] for k in self.cache.groups}:
                self.enqueuer.refresh_namespace_trees(ns)
            return
        if not isinstance(obj, CompositePodGroup):
            return
        key = (obj.metadata.namespace or "default", obj.metadata.name or "")
        if kind == "DELETED":
            self.cache.remove_composite_group(key)
            self.status.forget_composite(key)
        else:
            new = key not in self.cache.composite_groups
            self.cache.upsert_composite_group(key, obj)
        self.enqueuer.refresh_namespace_trees(key[0])
        if kind != "DELETED" and new:
            ref = find_root(self.cache, key[0], "CompositePodGroup", key[1])
            target: EntityKey = ("CompositePodGroup", ref.namespace, ref.name)
            self.queue.on_event(COMPOSITE_POD_GROUP_ADD, None, obj, target=target)

    def on_pod_group(self, kind: str, obj: Any) -> None:
        """PodGroups: PodGroup Add, PodGroup Update (the hint checks minCount lowered)."""
        if kind == "SYNC":
            seen = set()
            for o in obj:
                if isinstance(o, PodGroup):
                    seen.add((o.metadata.namespace or "default", o.metadata.name or ""))
                    self.on_pod_group("ADDED", o)
            for key, g in list(self.cache.groups.items()):
                if g.pod_group is not None and key not in seen:
                    self.cache.remove_pod_group(key)
                    self.enqueuer.refresh_group(key)
            return
        if not isinstance(obj, PodGroup):
            return
        key = (obj.metadata.namespace or "default", obj.metadata.name or "")
        if kind == "DELETED":
            self.cache.remove_pod_group(key)
            self.status.forget_group(key)
            self.enqueuer.refresh_group(key)
            return
        old, _ = self.cache.upsert_pod_group(obj, self.clock.now())
        self.enqueuer.refresh_group(key)
        ekey: EntityKey = self.enqueuer.root_entity(key)
        if old is None:
            self.queue.on_event(POD_GROUP_ADD, None, obj, target=ekey)
        else:
            self.queue.on_event(POD_GROUP_UPDATE, old, obj, target=ekey)

    def on_pod(self, kind: str, obj: Any) -> None:
        """Pods: the cache, their entity, and Pod / AssignedPod events."""
        now = self.clock.now()
        if kind == "SYNC":
            seen = set()
            # Into an empty queue (the first start) no entity waits or is in flight, so a
            # new pod's Pod Add moves nothing, and its group's entity ends up as one refresh
            # with all of the list's pods in would leave it: refresh each group once, in the
            # order its first pod came, instead of once per pod (O(pods x group size))
            groups: dict[tuple[str, str], None] | None = {} if not self.queue.entities else None
            self._synced_groups = groups
            try:
                for o in obj:
                    meta = o.get("metadata") or {}
                    seen.add((str(meta.get("namespace") or "default"), str(meta.get("name"))))
                    self.on_pod("ADDED", o)
            finally:
                self._synced_groups = None
            for gk in groups or ():
                self.enqueuer.refresh_group(gk)
            for key in [k for k in self.cache.pods if k not in seen]:
                self.pod_gone(key)
            return
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace") or "default"), str(meta.get("name")))
        if kind == "DELETED":
            self.pod_gone(key)
            return
        old, new = self.cache.upsert_pod(obj, now)
        if new is None:  # finished: its resources are free
            if old is not None:
                if old.counted_node is not None or old.node_name is not None:
                    self.queue.on_event(ASSIGNED_POD_DELETE, old, None)
                self.enqueuer.refresh_for(old)
            return
        if old is None:
            groups = self._synced_groups
            if groups is not None and new.group_key is not None:
                groups[new.group_key] = None  # refreshed once the SYNC is in
                return
            self.enqueuer.refresh_for(new)
            target = self._group_entity(new)
            if target is not None:  # unscheduled / assigned Pod Add in the same group
                self.queue.on_event(POD_ADD, None, new, target=target)
            return
        if old.node_name is None and new.node_name is not None and old.assumed_node is None:
            target = self._group_entity(new)  # bound by someone else
            if target is not None:
                self.queue.on_event(ASSIGNED_POD_ADD, old, new, target=target)
        if (
            old.deleting != new.deleting
            or old.gated != new.gated
            or (old.node_name is None and old.assumed_node is None and new.node_name is not None)
        ):
            self.enqueuer.refresh_for(new)
            if old.gated and not new.gated:  # scheduling gates removed
                target = self._group_entity(new) or ("Pod", new.namespace, new.name)
                self.queue.on_event(POD_GATES_ELIMINATED, old, new, target=target)
        elif new.node_name is None and new.group is None and old.req != new.req:
            self.queue.on_event(POD_REQUIREMENTS, old, new, target=("Pod", new.namespace, new.name))
        if old.claim_statuses != new.claim_statuses and not new.scheduled:
            self.enqueuer.refresh_for(new)  # PreEnqueue: the generated claim is known now
            target = self._group_entity(new) or ("Pod", new.namespace, new.name)
            self.queue.on_event(POD_GENERATED_CLAIM, old, new, target=target)

    def pod_gone(self, key: tuple[str, str]) -> None:
        """A pod was deleted (or vanished from a relist)."""
        info = self.cache.pods.get(key)
        if info is None:
            return
        counted = info.counted_node is not None
        self.cache.remove_pod(key)
        if counted:
            self.queue.on_event(ASSIGNED_POD_DELETE, info, None)  # resources freed
        self.enqueuer.refresh_for(info)
