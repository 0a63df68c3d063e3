"""The ResourceClaim controller (kube-controller-manager's ``resourceclaim`` controller),
run synchronously by :class:`~._lifecycle.Lifecycle` where no kube-controller-manager runs.

* A pod's ``spec.resourceClaims`` entry with a ``resourceClaimTemplateName`` gets one claim of
  its own, made from the template: ``generateName`` ``<pod>-<entry>-`` (both parts cut in
  proportion when longer than 57 characters), annotated
  ``resource.kubernetes.io/pod-claim-name: <entry>``, the template's labels and annotations,
  owned (controller) by the pod; recorded in the pod's ``status.resourceClaimStatuses``.
* A PodGroup's template entry (``DRAWorkloadResourceClaims``) gets **one** claim for the
  whole group, named ``<podgroup>-<entry>-...`` and owned by the PodGroup; recorded in the
  PodGroup's ``status.resourceClaimStatuses`` and in the status of every member pod whose
  entry is exactly equal to the group's. Such a pod gets no claim of its own.
* When a pod is done (terminal) or gone, it is removed from the ``reservedFor`` of its claims;
  a claim reserved for nobody is deallocated (allocation cleared, the scheduler's
  ``resource.kubernetes.io/delete-protection`` finalizer removed), and a done pod's own
  generated claims are deleted. A PodGroup that goes away releases its claims the same way
  (the garbage collector then deletes the claims it owned).

Statuses are written sorted by entry name, as the v1.37.2 controller writes them.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from workloadbuilder.cluster._memory._common import PODGROUPS, PODS, TERMINAL, Key
from workloadbuilder.cluster._memory._storage import KindStore, Record, Storage
from workloadbuilder.cluster._protocol import ResourceInfo, resource_info

if TYPE_CHECKING:
    from workloadbuilder.cluster._memory._lifecycle import Lifecycle

__all__ = ["CLAIMS", "TEMPLATES", "ResourceClaimController", "generate_name"]

CLAIMS = ("resource.k8s.io", "resourceclaims")
TEMPLATES = ("resource.k8s.io", "resourceclaimtemplates")
POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"
DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"
_MAX_BASE = 57  # room for "-" and 5 random characters in 63

Create = Callable[[ResourceInfo, dict[str, Any], "str | None"], Record]


def generate_name(owner: str, entry: str) -> str:
    """``<owner>-<entry>-``, both parts shortened in proportion past 57 characters."""
    base = f"{owner}-{entry}-"
    if len(base) > _MAX_BASE:
        n = len(base)
        base = f"{owner[: len(owner) * _MAX_BASE // n]}-{entry[: len(entry) * _MAX_BASE // n]}-"
    return base


def _entry(c: Mapping[str, Any]) -> tuple[str, str, str]:
    return (
        str(c.get("name") or ""),
        str(c.get("resourceClaimName") or ""),
        str(c.get("resourceClaimTemplateName") or ""),
    )


def _statuses(doc: Mapping[str, Any]) -> dict[str, str | None]:
    raw = (doc.get("status") or {}).get("resourceClaimStatuses") or ()
    return {str(s.get("name")): s.get("resourceClaimName") for s in raw}


def _status_list(statuses: Mapping[str, str | None]) -> list[dict[str, Any]]:
    out = []
    for name in sorted(statuses):
        entry: dict[str, Any] = {"name": name}
        if statuses[name]:
            entry["resourceClaimName"] = statuses[name]
        out.append(entry)
    return out


class ResourceClaimController:
    """Claims from templates for pods and PodGroups; releases when consumers are done."""

    def __init__(self, storage: Storage, lifecycle: Lifecycle, *, enabled: bool) -> None:
        self._storage = storage
        self._lifecycle = lifecycle
        self._enabled = enabled
        #: the cluster's create verb (set once the writes exist)
        self.create: Create | None = None

    # ---- hooks -----------------------------------------------------------------------

    def created(self, skey: tuple[str, str], key: Key) -> None:
        """An object was created."""
        if not self._enabled:
            return
        if skey == PODS:
            self._sync_pod(key)
        elif skey == PODGROUPS:
            self._sync_group(key)
        elif skey == TEMPLATES:  # pods and groups waiting for the template
            for store_key, sync in ((PODGROUPS, self._sync_group), (PODS, self._sync_pod)):
                store = self._storage.existing(store_key)
                if store is not None:
                    for k in [k for k, _ in store.iter_sorted(key[0])]:
                        sync(k)

    def changed(
        self, skey: tuple[str, str], key: Key, old: Mapping[str, Any], new: Mapping[str, Any]
    ) -> None:
        """An object was updated."""
        if not self._enabled:
            return
        if skey == PODS:
            if not (new.get("spec") or {}).get("resourceClaims"):
                return
            phase = (new.get("status") or {}).get("phase")
            if phase in TERMINAL:
                if (old.get("status") or {}).get("phase") not in TERMINAL:
                    self._release(key[0], str(new["metadata"].get("uid") or ""), done_pod=True)
                return
            self._sync_pod(key)
        elif skey == PODGROUPS:
            self._sync_group(key)

    def removed(self, skey: tuple[str, str], key: Key, doc: Mapping[str, Any]) -> None:
        """An object is gone for good."""
        if not self._enabled:
            return
        if skey in (PODS, PODGROUPS) and (doc.get("spec") or {}).get("resourceClaims"):
            self._release(key[0], str(doc["metadata"].get("uid") or ""), done_pod=False)

    # ---- generation ------------------------------------------------------------------

    def _template(self, ns: str, name: str) -> Mapping[str, Any] | None:
        store = self._storage.existing(TEMPLATES)
        rec = store.get(ns, name) if store is not None else None
        return rec.doc if rec is not None else None

    def _make_claim(
        self, ns: str, owner: Mapping[str, Any], entry: str, template: Mapping[str, Any]
    ) -> str | None:
        if self.create is None:
            return None
        meta = owner["metadata"]
        tmeta = (template.get("spec") or {}).get("metadata") or {}
        annotations = dict(tmeta.get("annotations") or {})
        annotations[POD_CLAIM_NAME] = entry
        claim_meta: dict[str, Any] = {
            "generateName": generate_name(str(meta["name"]), entry),
            "namespace": ns,
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": owner.get("apiVersion") or "v1",
                    "kind": owner.get("kind") or "Pod",
                    "name": meta["name"],
                    "uid": meta.get("uid"),
                    "controller": True,
                }
            ],
        }
        if tmeta.get("labels"):
            claim_meta["labels"] = dict(tmeta["labels"])
        doc = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": claim_meta,
            "spec": copy.deepcopy((template.get("spec") or {}).get("spec") or {}),
        }
        rec = self.create(resource_info("ResourceClaim"), doc, ns)
        return str(rec.doc["metadata"]["name"])

    def _write_status(
        self, store: KindStore, key: Key, rec: Record, statuses: Mapping[str, str | None]
    ) -> None:
        new = dict(rec.doc)
        new["metadata"] = dict(rec.doc["metadata"])  # a new version gets its own metadata
        status = dict(new.get("status") or {})
        status["resourceClaimStatuses"] = _status_list(statuses)
        new["status"] = status
        self._lifecycle.commit(store, key, rec, new)

    def _group_of(self, ns: str, pod: Mapping[str, Any]) -> Record | bool | None:
        """The pod's PodGroup record; False when the pod has none; None when it is missing."""
        name = ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
        if not name:
            return False
        store = self._storage.existing(PODGROUPS)
        return store.get(ns, str(name)) if store is not None else None

    def _sync_pod(self, key: Key) -> None:
        store = self._storage.existing(PODS)
        rec = store.get(*key) if store is not None else None
        if store is None or rec is None:
            return
        doc = rec.doc
        claims = (doc.get("spec") or {}).get("resourceClaims") or ()
        if not any(c.get("resourceClaimTemplateName") for c in claims):
            return
        if (doc.get("status") or {}).get("phase") in TERMINAL or doc["metadata"].get(
            "deletionTimestamp"
        ):
            return
        have = _statuses(doc)
        want = dict(have)
        group = self._group_of(key[0], doc)
        group_entries: set[tuple[str, str, str]] = set()
        group_status: dict[str, str | None] = {}
        if isinstance(group, Record):
            group_entries = {
                _entry(c) for c in (group.doc.get("spec") or {}).get("resourceClaims") or ()
            }
            group_status = _statuses(group.doc)
        for c in claims:
            entry = _entry(c)
            name, _, template_name = entry
            if not template_name or name in have:
                continue
            if group is None:
                return  # the PodGroup decides which entries are its own: wait for it
            if entry in group_entries:
                if name in group_status:
                    want[name] = group_status[name]
                continue
            template = self._template(key[0], template_name)
            if template is None:
                continue  # created when the template appears
            made = self._make_claim(key[0], doc, name, template)
            if made is not None:
                want[name] = made
        if want != have:
            rec = store.get(*key) or rec
            self._write_status(store, key, rec, want)

    def _sync_group(self, key: Key) -> None:
        store = self._storage.existing(PODGROUPS)
        rec = store.get(*key) if store is not None else None
        if store is None or rec is None:
            return
        doc = rec.doc
        claims = (doc.get("spec") or {}).get("resourceClaims") or ()
        if not claims or doc["metadata"].get("deletionTimestamp"):
            return
        have = _statuses(doc)
        want = dict(have)
        for c in claims:
            name, _, template_name = _entry(c)
            if not template_name or name in have:
                continue
            template = self._template(key[0], template_name)
            if template is None:
                continue
            owner = {**doc, "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup"}
            made = self._make_claim(key[0], owner, name, template)
            if made is not None:
                want[name] = made
        if want != have:
            self._write_status(store, key, store.get(*key) or rec, want)
        pods = self._storage.existing(PODS)
        if pods is not None:
            members = pods.indexes.get("spec.schedulingGroup.podGroupName", {}).get(key[1], ())
            for pkey in sorted(members):
                if pkey[0] == key[0]:
                    self._sync_pod(pkey)

    # ---- release ---------------------------------------------------------------------

    def _release(self, ns: str, uid: str, *, done_pod: bool) -> None:
        """Take the consumer ``uid`` out of every claim of ``ns``; deallocate claims left
        without consumers; delete a done pod's own generated claims."""
        store = self._storage.existing(CLAIMS)
        if store is None or not uid:
            return
        for key, rec in list(store.iter_sorted(ns)):
            doc = rec.doc
            status = doc.get("status") or {}
            reserved = list(status.get("reservedFor") or ())
            rest = [r for r in reserved if r.get("uid") != uid]
            owned = any(
                o.get("uid") == uid and o.get("controller")
                for o in doc["metadata"].get("ownerReferences") or ()
            )
            if len(rest) != len(reserved):
                new = copy.deepcopy(doc)
                new_status = new.setdefault("status", {})
                if rest:
                    new_status["reservedFor"] = rest
                else:
                    new_status.pop("reservedFor", None)
                    new_status.pop("allocation", None)
                    fins = [
                        f for f in new["metadata"].get("finalizers") or () if f != DELETE_PROTECTION
                    ]
                    if fins:
                        new["metadata"]["finalizers"] = fins
                    else:
                        new["metadata"].pop("finalizers", None)
                rec = self._lifecycle.commit(store, key, rec, new)
                doc = rec.doc
            unused = not (doc.get("status") or {}).get("reservedFor")
            if done_pod and owned and unused and store.get(*key) is not None:
                self._lifecycle.delete(store, key, rec, "Background")
