"""PodGroup protection (kube-controller-manager's ``podgroup-protection`` controller): the
``scheduling.k8s.io/podgroup-protection`` finalizer, stamped by admission, is removed from a
PodGroup being deleted once none of its pods is still running (every pod is gone or
terminal)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from workloadbuilder.cluster._memory import _admission as adm
from workloadbuilder.cluster._memory._common import PODGROUPS, PODS, TERMINAL
from workloadbuilder.cluster._memory._storage import Storage

if TYPE_CHECKING:
    from workloadbuilder.cluster._memory._lifecycle import Lifecycle

__all__ = ["PodGroupProtection"]


def _group_of(doc: Mapping[str, Any]) -> Any:
    return ((doc.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")


class PodGroupProtection:
    """Releases the protection finalizer of deleted PodGroups (only when ``enabled``)."""

    def __init__(self, storage: Storage, lifecycle: Lifecycle, *, enabled: bool) -> None:
        self._storage = storage
        self._lifecycle = lifecycle
        self._enabled = enabled

    def pod_changed(self, ns: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        """A pod changed: when it just became terminal, its group may be released."""
        old_phase = (old.get("status") or {}).get("phase")
        new_phase = (new.get("status") or {}).get("phase")
        if new_phase != old_phase and new_phase in TERMINAL:
            group = _group_of(new)
            if group:
                self.check(ns, group)

    def pod_removed(self, ns: str, doc: Mapping[str, Any]) -> None:
        """A pod went away: its group may be released."""
        group = _group_of(doc)
        if group:
            self.check(ns, group)

    def check(self, ns: str, group: str) -> None:
        """Remove the finalizer of PodGroup ``ns/group`` if it is being deleted and none of
        its pods is still running."""
        if not self._enabled:
            return
        store = self._storage.existing(PODGROUPS)
        if store is None:
            return
        rec = store.get(ns, group)
        if rec is None:
            return
        meta = rec.doc["metadata"]
        if not meta.get("deletionTimestamp") or adm.PODGROUP_PROTECTION_FINALIZER not in (
            meta.get("finalizers") or ()
        ):
            return
        pods = self._storage.existing(PODS)
        if pods is not None:
            for pkey in pods.indexes["spec.schedulingGroup.podGroupName"].get(group, ()):
                if pkey[0] != ns:
                    continue
                prec = pods.get(*pkey)
                if prec is not None and (prec.doc.get("status") or {}).get("phase") not in TERMINAL:
                    return
        self._lifecycle.remove_finalizer(store, (ns, group), adm.PODGROUP_PROTECTION_FINALIZER)
