"""The garbage collector: ownerReference cascades (kube-controller-manager's
``garbagecollector``), run synchronously by :class:`~._lifecycle.Lifecycle`.

* Background: when an owner is removed, each dependent loses the reference; a dependent
  with no live owner left is deleted (Background).
* Foreground: deleting an owner deletes its dependents (Foreground) first; the owner keeps
  the ``foregroundDeletion`` finalizer while a dependent with ``blockOwnerDeletion`` exists.
* Orphan: the dependents lose their reference to the owner.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from workloadbuilder.cluster._memory._common import FOREGROUND, Key, owner_uids
from workloadbuilder.cluster._memory._storage import KindStore, Record, Storage

if TYPE_CHECKING:
    from workloadbuilder.cluster._memory._lifecycle import Lifecycle

__all__ = ["GarbageCollector"]


def _dep_sort(item: tuple[KindStore, Key]) -> tuple[tuple[str, str], Key]:
    return item[0].key, item[1]


class GarbageCollector:
    """ownerReference garbage collection over ``storage``'s owner index."""

    def __init__(self, storage: Storage, lifecycle: Lifecycle) -> None:
        self._storage = storage
        self._lifecycle = lifecycle

    def _dependents(self, uid: str) -> list[tuple[KindStore, Key]]:
        return sorted(self._storage.dependents.get(uid, ()), key=_dep_sort)

    def owner_removed(self, uid: str) -> None:
        """An owner is gone: drop the reference from dependents with other live owners and
        delete (Background) those left without one."""
        by_uid = self._storage.by_uid
        for dstore, dkey in self._dependents(uid):
            drec = dstore.get(*dkey)
            if drec is None:
                continue
            live_owners = [o for o in owner_uids(drec.doc) if o != uid and o in by_uid]
            if live_owners:
                self.remove_owner_ref(dstore, dkey, drec, {uid})
            elif not drec.doc["metadata"].get("deletionTimestamp"):
                self._lifecycle.delete(dstore, dkey, drec, "Background")

    def dependent_removed(self, doc: Mapping[str, Any]) -> None:
        """A dependent is gone: its owners in foreground deletion may now finish."""
        for owner in owner_uids(doc):
            self.check_foreground(owner)

    def delete_foreground(self, uid: str) -> None:
        """An owner entered foreground deletion: delete its dependents (Foreground), then
        release it when nothing blocks it."""
        for dstore, dkey in self._dependents(uid):
            drec = dstore.get(*dkey)
            if drec is not None and not drec.doc["metadata"].get("deletionTimestamp"):
                self._lifecycle.delete(dstore, dkey, drec, "Foreground")
        self.check_foreground(uid)

    def orphan_dependents(self, uid: str) -> None:
        """Remove the references to ``uid`` from all its dependents."""
        for dstore, dkey in self._dependents(uid):
            drec = dstore.get(*dkey)
            if drec is not None:
                self.remove_owner_ref(dstore, dkey, drec, {uid})

    def remove_owner_ref(self, store: KindStore, key: Key, rec: Record, uids: set[str]) -> None:
        """Store a version of ``rec`` without the ownerReferences to ``uids``."""
        new = dict(rec.doc)
        meta = dict(rec.doc["metadata"])
        refs = [r for r in meta.get("ownerReferences") or () if r.get("uid") not in uids]
        if refs:
            meta["ownerReferences"] = refs
        else:
            meta.pop("ownerReferences", None)
        new["metadata"] = meta
        self._storage.replace(store, key, rec, new)

    def check_foreground(self, owner_uid: str) -> None:
        """Remove ``foregroundDeletion`` from an owner being deleted once no dependent
        with ``blockOwnerDeletion`` is left."""
        where = self._storage.by_uid.get(owner_uid)
        if where is None:
            return
        store, key = where
        rec = store.get(*key)
        if rec is None:
            return
        meta = rec.doc["metadata"]
        if not meta.get("deletionTimestamp") or FOREGROUND not in (meta.get("finalizers") or ()):
            return
        for dstore, dkey in self._storage.dependents.get(owner_uid, ()):
            drec = dstore.get(*dkey)
            if drec is None:
                continue
            for ref in drec.doc["metadata"].get("ownerReferences") or ():
                if ref.get("uid") == owner_uid and ref.get("blockOwnerDeletion"):
                    return
        self._lifecycle.remove_finalizer(store, key, FOREGROUND)
