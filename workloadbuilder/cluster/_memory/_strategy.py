"""Per-kind registry strategies and admission: what the API server does to an object between
decoding a write and storing it (``PrepareForCreate`` / ``PrepareForUpdate``, defaulting,
``metadata.generation``, the admission plugins and validation)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workloadbuilder.cluster._memory import _admission as adm
from workloadbuilder.cluster._memory._storage import Storage
from workloadbuilder.cluster._protocol import ResourceInfo, resource_info
from workloadbuilder.validation import FeatureGates

__all__ = ["NEEDS_RV_ON_UPDATE_GROUPS", "NO_GENERATION", "Strategy"]

#: kinds whose registry strategy does not maintain metadata.generation (checked on v1.37.2)
NO_GENERATION = frozenset(
    {
        ("", "configmaps"),
        ("", "namespaces"),
        ("", "nodes"),
        ("", "events"),
        ("", "secrets"),
        ("", "services"),
        ("", "endpoints"),
        ("coordination.k8s.io", "leases"),
        ("scheduling.k8s.io", "workloads"),
        ("scheduling.k8s.io", "podgroups"),
        ("scheduling.k8s.io", "compositepodgroups"),
    }
)
#: kinds that refuse an update without metadata.resourceVersion (no unconditional update)
NEEDS_RV_ON_UPDATE_GROUPS = ("scheduling.k8s.io", "jobset.x-k8s.io", "leaderworkerset.x-k8s.io")


def _spec_part(doc: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in ("metadata", "status", "apiVersion", "kind")}


class Strategy:
    """Defaulting, status handling, generation and (with ``admission``) the admission
    plugins and validation of every kind; ``gates`` are the validation feature gates."""

    def __init__(self, storage: Storage, *, admission: bool, gates: FeatureGates) -> None:
        self._storage = storage
        self.admission = admission
        self._gates = gates
        self._preempt_gate = gates.pod_group_preemption_policy

    def _classes(self) -> list[Mapping[str, Any]]:
        store = self._storage.kind(resource_info("PriorityClass"))
        return [rec.doc for _, rec in store.iter_sorted("")]

    # ------------------------------------------------------------------ create

    def prepare_create(self, info: ResourceInfo, name: str, doc: dict[str, Any]) -> None:
        """Generation, status and admission of a new object (``doc`` is changed in place)."""
        if (info.group, info.plural) not in NO_GENERATION:
            doc["metadata"]["generation"] = 1
        self._prepare_create_status(info, doc)
        if self.admission:
            self._admit_create(info, name, doc)
        elif (info.group, info.plural) in adm.TYPED_KINDS:
            adm.validate_typed(info, doc, None, None, run_validation=False)

    def _prepare_create_status(self, info: ResourceInfo, doc: dict[str, Any]) -> None:
        if info.group:
            if info.has_status:
                doc.pop("status", None)
            if (info.group, info.plural) == ("policy", "poddisruptionbudgets"):
                doc["status"] = {
                    "disruptionsAllowed": 0,
                    "currentHealthy": 0,
                    "desiredHealthy": 0,
                    "expectedPods": 0,
                }
            elif (info.group, info.plural) == ("storage.k8s.io", "storageclasses"):
                doc.setdefault("reclaimPolicy", "Delete")  # the API server's defaults
                doc.setdefault("volumeBindingMode", "Immediate")
            return
        if info.kind == "Pod":
            spec = doc.get("spec")
            if not isinstance(spec, dict):
                spec = doc["spec"] = {}
            adm.default_pod(spec)
            adm.merge_label_keys(doc)
            doc["status"] = {"phase": "Pending", "qosClass": adm.pod_qos_class(spec)}
        elif info.kind == "Namespace":
            spec = doc.setdefault("spec", {})
            spec.setdefault("finalizers", ["kubernetes"])
            doc["status"] = {"phase": "Active"}
            labels = doc["metadata"].setdefault("labels", {})
            labels["kubernetes.io/metadata.name"] = doc["metadata"]["name"]
        elif info.kind == "Node":
            pass  # kubelets register nodes with their status
        elif info.kind in ("PersistentVolume", "PersistentVolumeClaim"):
            spec = doc.get("spec")
            if not isinstance(spec, dict):
                spec = doc["spec"] = {}
            spec.setdefault("volumeMode", "Filesystem")  # the API server's defaults
            if info.kind == "PersistentVolume":
                spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
            doc["status"] = {"phase": "Pending"}
        elif info.has_status:
            doc.pop("status", None)

    def _admit_create(self, info: ResourceInfo, name: str, doc: dict[str, Any]) -> None:
        typed = (info.group, info.plural) in adm.TYPED_KINDS
        if typed:
            spec = doc.get("spec")
            if info.plural in ("podgroups", "compositepodgroups") and isinstance(spec, dict):
                spec.setdefault("disruptionMode", {"single": {}})
                if info.plural == "podgroups":
                    fins = doc["metadata"].setdefault("finalizers", [])
                    if adm.PODGROUP_PROTECTION_FINALIZER not in fins:
                        fins.append(adm.PODGROUP_PROTECTION_FINALIZER)
                if self._preempt_gate:
                    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
                adm.admit_priority(
                    info, name, spec, self._classes, set_preemption_policy=self._preempt_gate
                )
            stored = adm.validate_typed(info, doc, None, self._gates)
            doc.clear()
            doc.update(stored)
            return
        if info.kind == "Pod" and not info.group:
            spec = doc["spec"]
            adm.admit_priority(info, name, spec, self._classes, set_preemption_policy=True)
        if info.kind == "PriorityClass" and doc.get("globalDefault"):
            for other in self._classes():
                if other.get("globalDefault"):
                    other_name = other["metadata"]["name"]
                    raise adm.forbidden(
                        info,
                        name,
                        f"PriorityClass {other_name} is already marked as default. Only one "
                        "default can exist",
                    )
        errors = adm.validate_metadata(info, doc["metadata"])
        if errors:
            raise adm.invalid(info, name, errors)

    # ------------------------------------------------------------------ update

    def prepare_update(
        self, info: ResourceInfo, name: str, new: dict[str, Any], old: dict[str, Any]
    ) -> None:
        """Generation and admission of a replaced object (``new`` is changed in place)."""
        if (info.group, info.plural) not in NO_GENERATION and _spec_part(new) != _spec_part(old):
            new["metadata"]["generation"] = int(old["metadata"].get("generation") or 0) + 1
        if self.admission:
            self._admit_update(info, new, old)
        elif (info.group, info.plural) in adm.TYPED_KINDS:
            adm.validate_typed(info, new, None, None, run_validation=False)

    def _admit_update(self, info: ResourceInfo, new: dict[str, Any], old: dict[str, Any]) -> None:
        if (info.group, info.plural) in adm.TYPED_KINDS:
            spec = new.get("spec")
            if info.plural != "workloads" and isinstance(spec, dict):
                spec.setdefault("disruptionMode", {"single": {}})
            stored = adm.validate_typed(info, new, old, self._gates)
            new.clear()
            new.update(stored)
        elif info.kind == "Pod" and not info.group:
            spec = new.get("spec")
            old_spec = old.get("spec") or {}
            if isinstance(spec, dict) and spec.get("priority") is None and "priority" in old_spec:
                spec["priority"] = old_spec["priority"]

    def validate_status(self, info: ResourceInfo, name: str, new: dict[str, Any]) -> None:
        """Check a status write of a typed kind (conditions, and that it still decodes)."""
        if (info.group, info.plural) not in adm.TYPED_KINDS:
            return
        if self.admission:
            errors = adm.validate_conditions(
                (new.get("status") or {}).get("conditions"), "status.conditions"
            )
            if errors:
                raise adm.invalid(info, name, errors)
        adm.validate_typed(info, new, None, None, run_validation=False)
