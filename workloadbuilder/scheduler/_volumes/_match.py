"""Pure helpers over PersistentVolume, PersistentVolumeClaim and StorageClass objects (dicts
as the API server serves them): storage classes of claims and volumes, the binding
annotations, PV node affinity, and the matching of a claim to an available volume, as
``k8s.io/component-helpers/storage/volume`` defines them for kube-scheduler v1.37.2."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from workloadbuilder.resources import quantity_value
from workloadbuilder.scheduler._dra import terms_match
from workloadbuilder.scheduler._podspec import Selector

__all__ = [
    "ANN_BIND_COMPLETED",
    "ANN_BOUND_BY_CONTROLLER",
    "ANN_SELECTED_NODE",
    "IN_TREE_DRIVERS",
    "NO_PROVISIONER",
    "RWOP",
    "ZONE_LABELS",
    "access_modes_fit",
    "bound_to_claim",
    "claim_class",
    "fully_bound",
    "ga_label",
    "in_tree_source",
    "meta",
    "pv_class",
    "pv_fits_node",
    "pv_topologies",
    "storage_request",
    "volume_candidates",
]

ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
_ANN_BETA_CLASS = "volume.beta.kubernetes.io/storage-class"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
RWOP = "ReadWriteOncePod"
_BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
_BETA_REGION = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
#: the node labels VolumeZone compares with a PersistentVolume's, in its order
ZONE_LABELS = (_BETA_ZONE, _BETA_REGION, ZONE, REGION)

#: in-tree volume source -> (its CSI driver under CSI migration, the field naming the disk,
#: the in-tree plugin's name): the sources NodeVolumeLimits counts against CSI limits
IN_TREE_DRIVERS: dict[str, tuple[str, str, str]] = {
    "awsElasticBlockStore": ("ebs.csi.aws.com", "volumeID", "kubernetes.io/aws-ebs"),
    "gcePersistentDisk": ("pd.csi.storage.gke.io", "pdName", "kubernetes.io/gce-pd"),
    "azureDisk": ("disk.csi.azure.com", "diskURI", "kubernetes.io/azure-disk"),
    "cinder": ("cinder.csi.openstack.org", "volumeID", "kubernetes.io/cinder"),
    "portworxVolume": ("pxd.portworx.com", "volumeID", "kubernetes.io/portworx-volume"),
}
#: in-tree PersistentVolume sources CSI migration translates (their plugin names)
_MIGRATABLE = {
    **{k: v[2] for k, v in IN_TREE_DRIVERS.items()},
    "azureFile": "kubernetes.io/azure-file",
    "vsphereVolume": "kubernetes.io/vsphere-volume",
}


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """``metadata`` (empty when absent)."""
    m = obj.get("metadata")
    return m if isinstance(m, Mapping) else {}


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    s = obj.get("spec")
    return s if isinstance(s, Mapping) else {}


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    a = meta(obj).get("annotations")
    return a if isinstance(a, Mapping) else {}


def claim_class(pvc: Mapping[str, Any]) -> str:
    """The claim's storage class: the beta annotation, else ``spec.storageClassName``, else
    ``""``."""
    ann = _annotations(pvc).get(_ANN_BETA_CLASS)
    if ann is not None:
        return str(ann)
    return str(_spec(pvc).get("storageClassName") or "")


def pv_class(pv: Mapping[str, Any]) -> str:
    """The volume's storage class (the beta annotation, else ``spec.storageClassName``)."""
    return claim_class(pv)


def fully_bound(pvc: Mapping[str, Any]) -> bool:
    """The PV controller finished binding the claim (``volumeName`` and bind-completed)."""
    return bool(_spec(pvc).get("volumeName")) and ANN_BIND_COMPLETED in _annotations(pvc)


def storage_request(pvc: Mapping[str, Any]) -> float:
    """``spec.resources.requests.storage`` in bytes (0 when absent)."""
    got = ((_spec(pvc).get("resources") or {}).get("requests") or {}).get("storage")
    return _bytes(got)


def _bytes(q: Any) -> float:
    if q is None:
        return 0.0
    try:
        return quantity_value(q)
    except ValueError:
        return 0.0


def _mode(spec: Mapping[str, Any]) -> str:
    return str(spec.get("volumeMode") or "Filesystem")


def access_modes_fit(pvc: Mapping[str, Any], pv: Mapping[str, Any]) -> bool:
    """Every access mode the claim asks for is one of the volume's."""
    have = set(_spec(pv).get("accessModes") or ())
    return all(m in have for m in _spec(pvc).get("accessModes") or ())


def bound_to_claim(pv: Mapping[str, Any], pvc: Mapping[str, Any]) -> bool:
    """The volume's ``claimRef`` names the claim (and its uid, when it has one)."""
    ref = _spec(pv).get("claimRef")
    if not isinstance(ref, Mapping):
        return False
    m = meta(pvc)
    if ref.get("name") != m.get("name") or ref.get("namespace") != m.get("namespace"):
        return False
    uid = ref.get("uid")
    return not uid or uid == m.get("uid")


def pv_fits_node(pv: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """The volume's required node affinity holds for a node with ``labels`` (upstream checks
    the labels only: a ``metadata.name`` field term matches no node)."""
    aff = _spec(pv).get("nodeAffinity")
    if not isinstance(aff, Mapping):
        return True
    req = aff.get("required")
    if not isinstance(req, Mapping):
        return True
    return terms_match(req.get("nodeSelectorTerms") or (), "", labels)


def in_tree_source(pv: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(source field, in-tree plugin)`` of a PersistentVolume CSI migration would translate."""
    spec = _spec(pv)
    for source, plugin in _MIGRATABLE.items():
        if spec.get(source) is not None:
            return source, plugin
    return None


def volume_candidates(
    pvc: Mapping[str, Any], pvs: Iterable[Mapping[str, Any]]
) -> tuple[list[Mapping[str, Any]], bool]:
    """What of upstream's ``FindMatchingVolume`` (with a node, delayed binding) does not
    depend on the node: ``([the volume pre-bound to the claim], True)`` when there is one,
    else the available volumes the claim could be bound to (class, capacity, volume mode,
    volume attributes class, selector, access modes, not being deleted), smallest first;
    the node then takes the first whose node affinity it passes."""
    want = storage_request(pvc)
    cls = claim_class(pvc)
    spec = _spec(pvc)
    sel_obj = spec.get("selector")
    selector = Selector.parse(sel_obj) if isinstance(sel_obj, Mapping) else None
    vac = spec.get("volumeAttributesClassName") or ""
    out: list[tuple[float, Mapping[str, Any]]] = []
    for pv in pvs:
        m = meta(pv)
        pspec = _spec(pv)
        if pspec.get("claimRef") is not None and not bound_to_claim(pv, pvc):
            continue
        size = _bytes((pspec.get("capacity") or {}).get("storage"))
        if size < want or _mode(spec) != _mode(pspec):
            continue
        if (pspec.get("volumeAttributesClassName") or "") != vac or m.get("deletionTimestamp"):
            continue
        if bound_to_claim(pv, pvc):
            return [pv], True
        if (pv.get("status") or {}).get("phase") != "Available":
            continue
        if selector is not None and not selector.matches(
            {str(k): str(v) for k, v in (m.get("labels") or {}).items()}
        ):
            continue
        if pv_class(pv) != cls or not access_modes_fit(pvc, pv):
            continue
        out.append((size, pv))
    out.sort(key=lambda sp: sp[0])  # stable: equal sizes keep the informer's order
    return [pv for _, pv in out], False


def ga_label(label: str) -> str:
    """The GA name of a beta zone / region label."""
    return {_BETA_ZONE: ZONE, _BETA_REGION: REGION}.get(label, label)


def pv_topologies(pv: Mapping[str, Any]) -> list[tuple[str, frozenset[str]]]:
    """The volume's zone / region labels as ``(label, allowed values)`` (``a__b``: either)."""
    labels = meta(pv).get("labels") or {}
    out: list[tuple[str, frozenset[str]]] = []
    for key in ZONE_LABELS:
        value = labels.get(key)
        if value is None:
            continue
        values = frozenset(v.strip() for v in str(value).split("__") if v.strip())
        if values:
            out.append((key, values))
    return out
