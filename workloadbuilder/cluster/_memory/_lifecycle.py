"""Object lifecycle: deletion, finalizers and the controllers that react to them.

Upstream, the API server marks an object for deletion (``deletionTimestamp``) and removes it
once its last finalizer is gone, while kube-controller-manager's garbage collector, namespace
controller and PodGroup protection controller act on what changed. :class:`MemoryCluster`
does the same synchronously, inside the write that caused it: :class:`Lifecycle` owns the
deletion state machine and every write that may finish a deletion (:meth:`Lifecycle.commit`),
and calls its three controllers at fixed points:

* :class:`~._gc.GarbageCollector` -- ownerReferences: Background, Foreground, Orphan;
* :class:`~._namespaces.NamespaceController` -- a deleted namespace's content;
* :class:`~._podgroups.PodGroupProtection` -- the PodGroup protection finalizer;
* :class:`~._resourceclaims.ResourceClaimController` -- claims from templates for pods and
  PodGroups, released when their consumers are done;
* :class:`~._volumes.PersistentVolumeController` -- claims bound to volumes, volumes
  provisioned for claims.

The controllers act back through :class:`Lifecycle` (delete, finalize, remove a finalizer),
so a cascade runs to completion before the triggering call returns.
"""

from __future__ import annotations

from typing import Any

from workloadbuilder.cluster._memory._common import (
    FOREGROUND,
    NAMESPACES,
    PODGROUPS,
    PODS,
    Key,
    Now,
)
from workloadbuilder.cluster._memory._gc import GarbageCollector
from workloadbuilder.cluster._memory._namespaces import NamespaceController
from workloadbuilder.cluster._memory._podgroups import PodGroupProtection
from workloadbuilder.cluster._memory._resourceclaims import ResourceClaimController
from workloadbuilder.cluster._memory._storage import KindStore, Record, Storage
from workloadbuilder.cluster._memory._volumes import PersistentVolumeController

__all__ = ["Lifecycle"]


class Lifecycle:
    """Deletion and finalizers on ``storage``, plus the lifecycle controllers.

    ``now`` stamps ``deletionTimestamp``; ``pod_group_protection`` enables the PodGroup
    protection controller (it runs with admission, which adds the finalizer)."""

    def __init__(
        self,
        storage: Storage,
        now: Now,
        *,
        pod_group_protection: bool,
        claim_controller: bool = True,
        pv_controller: bool = True,
    ) -> None:
        self._storage = storage
        self._now = now
        self.gc = GarbageCollector(storage, self)
        self.namespaces = NamespaceController(storage, self)
        self.pod_groups = PodGroupProtection(storage, self, enabled=pod_group_protection)
        self.claims = ResourceClaimController(storage, self, enabled=claim_controller)
        self.volumes = PersistentVolumeController(storage, self, enabled=pv_controller)

    def commit(self, store: KindStore, key: Key, old: Record, new: dict[str, Any]) -> Record:
        """Store a new version; finish deletion when the last finalizer went away."""
        meta = new["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            rec = self._storage.replace(store, key, old, new)
            return self.finalize(store, key, rec)
        rec = self._storage.replace(store, key, old, new)
        if store.key == PODS:
            self.pod_groups.pod_changed(key[0], old.doc, new)
        if store.key in (PODS, PODGROUPS):
            self.claims.changed(store.key, key, old.doc, new)
        self.volumes.touched(store.key)
        return rec

    def delete(self, store: KindStore, key: Key, rec: Record, policy: str) -> None:
        """Delete an object with a propagation policy: mark it (finalizers keep it) or remove
        it, and let the controllers cascade."""
        uid = rec.doc["metadata"].get("uid")
        if policy == "Orphan" and uid:
            self.gc.orphan_dependents(uid)
            rec = store.get(*key) or rec
        meta = rec.doc["metadata"]
        finalizers = list(meta.get("finalizers") or ())
        is_namespace = store.key == NAMESPACES
        if policy == "Foreground" and uid and FOREGROUND not in finalizers:
            finalizers.append(FOREGROUND)
        if not finalizers and not is_namespace:
            if store.key == PODS and not meta.get("deletionTimestamp"):
                # the API server marks a pod (grace period 0) before removing it
                marked = dict(rec.doc)
                marked["metadata"] = {
                    **meta,
                    "deletionTimestamp": self._now(),
                    "deletionGracePeriodSeconds": 0,
                }
                rec = self._storage.replace(store, key, rec, marked)
            self.finalize(store, key, rec)
            return
        if not meta.get("deletionTimestamp") or finalizers != list(meta.get("finalizers") or ()):
            new = dict(rec.doc)
            new_meta = dict(meta)
            new_meta.setdefault("deletionTimestamp", self._now())
            new_meta.setdefault("deletionGracePeriodSeconds", 0)
            if finalizers:
                new_meta["finalizers"] = finalizers
            new["metadata"] = new_meta
            if is_namespace:
                new["status"] = {**(rec.doc.get("status") or {}), "phase": "Terminating"}
            rec = self._storage.replace(store, key, rec, new)
        if is_namespace:
            self.namespaces.deleting(key[1])
            return
        if policy == "Foreground" and uid:
            self.gc.delete_foreground(uid)
        if store.key == PODGROUPS:
            self.pod_groups.check(key[0], key[1])

    def finalize(self, store: KindStore, key: Key, rec: Record) -> Record:
        """Remove an object for good, then collect its dependents and notify its owners."""
        gone = self._storage.drop(store, key, rec)
        doc = gone.doc
        uid = doc["metadata"].get("uid")
        if uid:
            self.gc.owner_removed(uid)
        self.gc.dependent_removed(doc)
        if store.key == PODS:
            self.pod_groups.pod_removed(key[0], doc)
        if store.key in (PODS, PODGROUPS):
            self.claims.removed(store.key, key, doc)
        self.volumes.touched(store.key)
        if key[0]:
            self.namespaces.content_removed(key[0])
        return gone

    def remove_finalizer(self, store: KindStore, key: Key, finalizer: str) -> None:
        """Remove one finalizer from an object (which may finish its deletion)."""
        rec = store.get(*key)
        if rec is None:
            return
        fins = list(rec.doc["metadata"].get("finalizers") or ())
        if finalizer not in fins:
            return
        fins.remove(finalizer)
        new = dict(rec.doc)
        meta = dict(rec.doc["metadata"])
        if fins:
            meta["finalizers"] = fins
        else:
            meta.pop("finalizers", None)
        new["metadata"] = meta
        self.commit(store, key, rec, new)
