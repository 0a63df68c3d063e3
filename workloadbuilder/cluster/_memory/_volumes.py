"""The PersistentVolume controller (kube-controller-manager's ``persistentvolume-binder``
controller) with a stand-in for an external provisioner, synchronously inside the write
that changed a PersistentVolume or a PersistentVolumeClaim:

* a new PersistentVolume without a ``claimRef`` becomes ``Available``;
* a claim a volume's ``claimRef`` names (a pre-bound volume, or the scheduler's choice for a
  ``WaitForFirstConsumer`` claim) is bound to it: the claim gets ``spec.volumeName``, the
  ``pv.kubernetes.io/bind-completed`` annotation and ``Bound``, the volume ``Bound``;
* an unbound claim of an ``Immediate`` class (or of no class) is bound to the smallest
  matching ``Available`` volume (class, capacity, access modes, volume mode, selector);
* a claim with no such volume whose class has a provisioner (not
  ``kubernetes.io/no-provisioner``) is provisioned at once: a CSI volume of the class's
  provisioner, of the requested size, restricted to the selected node's hostname when the
  class is ``WaitForFirstConsumer`` (the claim's ``volume.kubernetes.io/selected-node``;
  without it such a claim waits for the scheduler), then bound;
* a volume whose claim is gone is ``Released`` (a provisioned one of reclaim policy
  ``Delete`` is deleted).

Real provisioners take time and report failures; this one always succeeds at once.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from workloadbuilder.cluster._memory._common import Key
from workloadbuilder.cluster._memory._storage import KindStore, Record, Storage
from workloadbuilder.cluster._protocol import ResourceInfo, resource_info
from workloadbuilder.resources import quantity_value

if TYPE_CHECKING:
    from workloadbuilder.cluster._memory._lifecycle import Lifecycle

__all__ = ["PVCS", "PVS", "PersistentVolumeController"]

PVS = ("", "persistentvolumes")
PVCS = ("", "persistentvolumeclaims")
_CLASSES = ("storage.k8s.io", "storageclasses")
_NODES = ("", "nodes")
_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
_SELECTED_NODE = "volume.kubernetes.io/selected-node"
_PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
_BETA_CLASS = "volume.beta.kubernetes.io/storage-class"
_NO_PROVISIONER = "kubernetes.io/no-provisioner"
_HOSTNAME = "kubernetes.io/hostname"

Create = Callable[[ResourceInfo, dict[str, Any], "str | None"], Record]


def _class_of(obj: Mapping[str, Any]) -> str:
    ann = (obj.get("metadata") or {}).get("annotations") or {}
    if _BETA_CLASS in ann:
        return str(ann[_BETA_CLASS])
    return str((obj.get("spec") or {}).get("storageClassName") or "")


def _size(q: Any) -> float:
    try:
        return quantity_value(q) if q is not None else 0.0
    except ValueError:
        return 0.0


def _labels_match(sel: Any, labels: Mapping[str, Any]) -> bool:
    if not isinstance(sel, Mapping):
        return True
    for k, v in (sel.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in sel.get("matchExpressions") or ():
        have, op, values = labels.get(e.get("key")), e.get("operator"), e.get("values") or ()
        if (
            (op == "In" and have not in values)
            or (op == "NotIn" and have in values)
            or (op == "Exists" and have is None)
            or (op == "DoesNotExist" and have is not None)
        ):
            return False
    return True


class PersistentVolumeController:
    """Binds claims to volumes and provisions volumes for claims (see the module)."""

    def __init__(self, storage: Storage, lifecycle: Lifecycle, *, enabled: bool) -> None:
        self._storage = storage
        self._lifecycle = lifecycle
        self._enabled = enabled
        #: the cluster's create verb (set once the writes exist)
        self.create: Create | None = None
        self._busy = False
        self._again = False

    def touched(self, skey: tuple[str, str]) -> None:
        """An object of kind ``skey`` was written (or removed)."""
        if not self._enabled or skey not in (PVS, PVCS, _CLASSES):
            return
        if self._busy:  # a write of this controller: sync again when it is done
            self._again = True
            return
        self._busy = True
        try:
            for _ in range(100):  # each round settles what the last one wrote
                self._again = False
                self._sync()
                if not self._again:
                    break
        finally:
            self._busy = False

    # ---- reading ---------------------------------------------------------------------

    def _store(self, key: tuple[str, str]) -> KindStore | None:
        return self._storage.existing(key)

    def _all(self, key: tuple[str, str]) -> list[tuple[Key, Record]]:
        store = self._store(key)
        if store is None:
            return []
        out: list[tuple[Key, Record]] = []
        for ns in list(store.objects):
            for name, rec in list(store.objects[ns].items()):
                out.append(((ns, name), rec))
        return out

    def _write(
        self, skey: tuple[str, str], key: Key, change: Callable[[dict[str, Any]], None]
    ) -> None:
        store = self._store(skey)
        rec = store.get(*key) if store is not None else None
        if store is None or rec is None:
            return
        new = copy.deepcopy(rec.doc)
        change(new)
        if new != rec.doc:
            self._lifecycle.commit(store, key, rec, new)

    # ---- the controller --------------------------------------------------------------

    def _sync(self) -> None:
        classes = {k[1]: r.doc for k, r in self._all(_CLASSES)}
        pvs = self._all(PVS)
        claims = {k: r.doc for k, r in self._all(PVCS)}
        for key, rec in pvs:
            pv = rec.doc
            spec = pv.get("spec") or {}
            phase = (pv.get("status") or {}).get("phase")
            ref = spec.get("claimRef")
            if not isinstance(ref, Mapping):
                if phase in (None, "Pending", "Released"):
                    self._write(PVS, key, lambda d: d.__setitem__("status", {"phase": "Available"}))
                continue
            ck = (str(ref.get("namespace") or ""), str(ref.get("name") or ""))
            claim = claims.get(ck)
            uid = ref.get("uid")
            if claim is None or (uid and claim["metadata"].get("uid") != uid):
                if phase == "Bound":
                    self._release(key, pv)
                elif phase in (None, "Pending"):  # pre-bound to a claim yet to come
                    self._write(PVS, key, lambda d: d.__setitem__("status", {"phase": "Available"}))
                continue
            cspec = claim.get("spec") or {}
            if cspec.get("volumeName") in (None, "", key[1]):
                self._bind(key[1], ck, claim)
        for ck, claim in sorted(claims.items()):
            cspec = claim.get("spec") or {}
            if cspec.get("volumeName") or claim["metadata"].get("deletionTimestamp"):
                continue
            cls_name = _class_of(claim)
            cls = classes.get(cls_name)
            wffc = cls is not None and cls.get("volumeBindingMode") == "WaitForFirstConsumer"
            selected = (claim["metadata"].get("annotations") or {}).get(_SELECTED_NODE)
            if wffc and not selected:
                continue  # the scheduler picks a volume (claimRef) or a node
            if not wffc:
                match = self._match(claim, cls_name)
                if match is not None:
                    self._bind(match, ck, claim)
                    continue
            if cls is not None and cls.get("provisioner") not in (None, "", _NO_PROVISIONER):
                self._provision(ck, claim, cls, selected if wffc else None)

    def _match(self, claim: Mapping[str, Any], cls: str) -> str | None:
        spec = claim.get("spec") or {}
        want = _size(((spec.get("resources") or {}).get("requests") or {}).get("storage"))
        modes = set(spec.get("accessModes") or ())
        mode = spec.get("volumeMode") or "Filesystem"
        best: tuple[float, str] | None = None
        for key, rec in self._all(PVS):
            pv = rec.doc
            pspec = pv.get("spec") or {}
            if (pv.get("status") or {}).get("phase") != "Available" or pspec.get("claimRef"):
                continue
            size = _size((pspec.get("capacity") or {}).get("storage"))
            if (
                _class_of(pv) != cls
                or size < want
                or not modes <= set(pspec.get("accessModes") or ())
                or (pspec.get("volumeMode") or "Filesystem") != mode
                or not _labels_match(spec.get("selector"), pv["metadata"].get("labels") or {})
                or pv["metadata"].get("deletionTimestamp")
            ):
                continue
            if best is None or size < best[0]:
                best = (size, key[1])
        return best[1] if best else None

    def _bind(self, pv_name: str, ck: Key, claim: Mapping[str, Any]) -> None:
        m = claim["metadata"]

        def bind_pv(d: dict[str, Any]) -> None:
            ref = d["spec"].get("claimRef")
            if not isinstance(ref, dict):
                ref = d["spec"]["claimRef"] = {"kind": "PersistentVolumeClaim", "apiVersion": "v1"}
                d["metadata"].setdefault("annotations", {})[_BOUND_BY_CONTROLLER] = "yes"
            ref.update(
                {"namespace": m.get("namespace"), "name": m.get("name"), "uid": m.get("uid")}
            )
            d["status"] = {"phase": "Bound"}

        self._write(PVS, ("", pv_name), bind_pv)
        store = self._store(PVS)
        pv_rec = store.get("", pv_name) if store is not None else None
        if pv_rec is None:
            return
        pspec = pv_rec.doc.get("spec") or {}

        def bind_claim(d: dict[str, Any]) -> None:
            d["spec"]["volumeName"] = pv_name
            anns = d["metadata"].setdefault("annotations", {})
            anns[_BIND_COMPLETED] = "yes"
            anns.setdefault(_BOUND_BY_CONTROLLER, "yes")
            d["status"] = {
                "phase": "Bound",
                "accessModes": list(pspec.get("accessModes") or ()),
                "capacity": dict(pspec.get("capacity") or {}),
            }

        self._write(PVCS, ck, bind_claim)

    def _provision(
        self, ck: Key, claim: Mapping[str, Any], cls: Mapping[str, Any], node: str | None
    ) -> None:
        if self.create is None:
            return
        m = claim["metadata"]
        spec = claim.get("spec") or {}
        name = f"pvc-{m.get('uid')}"
        pvs = self._store(PVS)
        if pvs is not None and pvs.get("", name) is not None:
            return
        provisioner = str(cls.get("provisioner"))
        pv_spec: dict[str, Any] = {
            "capacity": {
                "storage": ((spec.get("resources") or {}).get("requests") or {}).get(
                    "storage", "1Gi"
                )
            },
            "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
            "volumeMode": spec.get("volumeMode") or "Filesystem",
            "storageClassName": _class_of(claim),
            "persistentVolumeReclaimPolicy": cls.get("reclaimPolicy") or "Delete",
            "claimRef": {
                "kind": "PersistentVolumeClaim",
                "apiVersion": "v1",
                "namespace": m.get("namespace"),
                "name": m.get("name"),
                "uid": m.get("uid"),
            },
            "csi": {"driver": provisioner, "volumeHandle": name},
        }
        nodes = self._store(_NODES)
        node_rec = nodes.get("", node) if nodes is not None and node else None
        host = ((node_rec.doc["metadata"].get("labels") or {}).get(_HOSTNAME)) if node_rec else None
        if host:
            term = {"matchExpressions": [{"key": _HOSTNAME, "operator": "In", "values": [host]}]}
            pv_spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [term]}}
        self.create(
            resource_info("PersistentVolume"),
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": name, "annotations": {_PROVISIONED_BY: provisioner}},
                "spec": pv_spec,
            },
            None,
        )

    def _release(self, key: Key, pv: Mapping[str, Any]) -> None:
        spec = pv.get("spec") or {}
        provisioned = _PROVISIONED_BY in ((pv.get("metadata") or {}).get("annotations") or {})
        if provisioned and spec.get("persistentVolumeReclaimPolicy") == "Delete":
            store = self._store(PVS)
            rec = store.get(*key) if store is not None else None
            if store is not None and rec is not None:
                self._lifecycle.delete(store, key, rec, "Background")
            return
        self._write(PVS, key, lambda d: d.__setitem__("status", {"phase": "Released"}))
