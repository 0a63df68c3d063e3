"""The namespace controller (kube-controller-manager's ``namespace`` controller): a
namespace being deleted loses its content, and goes away once it is empty and has no
finalizers left."""

from __future__ import annotations

from typing import TYPE_CHECKING

from workloadbuilder.cluster._memory._common import NAMESPACES
from workloadbuilder.cluster._memory._storage import Storage

if TYPE_CHECKING:
    from workloadbuilder.cluster._memory._lifecycle import Lifecycle

__all__ = ["NamespaceController"]


class NamespaceController:
    """Deletes a terminating namespace's objects and finalizes it when empty."""

    def __init__(self, storage: Storage, lifecycle: Lifecycle) -> None:
        self._storage = storage
        self._lifecycle = lifecycle

    def deleting(self, ns: str) -> None:
        """Namespace ``ns`` was marked for deletion: delete everything in it (Background)."""
        for store in self._storage.kinds():
            if not store.info.namespaced:
                continue
            bucket = store.objects.get(ns)
            if not bucket:
                continue
            for name in sorted(bucket):
                rec = store.get(ns, name)
                if rec is not None and not rec.doc["metadata"].get("deletionTimestamp"):
                    self._lifecycle.delete(store, (ns, name), rec, "Background")
        self.content_removed(ns)

    def content_removed(self, ns: str) -> None:
        """An object of ``ns`` went away: remove the namespace if it is terminating, empty
        and without finalizers."""
        nstore = self._storage.existing(NAMESPACES)
        if nstore is None:
            return
        rec = nstore.get("", ns)
        if rec is None or not rec.doc["metadata"].get("deletionTimestamp"):
            return
        for store in self._storage.kinds():
            if store.info.namespaced and store.objects.get(ns):
                return
        if not rec.doc["metadata"].get("finalizers"):
            self._lifecycle.finalize(nstore, ("", ns), rec)
