"""The builders' common parts: the fixed key order of every kind, the copy-on-set base
:class:`Builder` and :class:`ObjectBuilder` (``metadata`` setters, :meth:`~ObjectBuilder.obj`,
:meth:`~Builder.field`, :meth:`~Builder.clone`).

Only :data:`PAUSE_IMAGE` and :class:`ObjectBuilder` are public (re-exported by the package);
the other names without an underscore are shared with the sibling modules."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Self

__all__ = ["PAUSE_IMAGE", "ObjectBuilder"]


#: The image of the default container (does nothing, pulls fast; the harness has no kubelet).
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"

SCHEDULING_V1BETA1 = "scheduling.k8s.io/v1beta1"
SCHEDULING_V1ALPHA3 = "scheduling.k8s.io/v1alpha3"

KeyPath = tuple[str, ...]
_Orders = Mapping[str, Sequence[str]]

# ---- key orders ------------------------------------------------------------------------------
# A path is the dotted key path from the builder's root; "[]" stands for any item of a list.

_TOP = ("apiVersion", "kind", "metadata", "spec", "value", "status")
META = (
    "name",
    "generateName",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
)
_POD_SPEC = (
    "restartPolicy",
    "schedulerName",
    "initContainers",
    "containers",
    "schedulingGroup",
    "priorityClassName",
    "priority",
    "nodeSelector",
    "tolerations",
    "nodeName",
    "resourceClaims",
)
_CONTAINER = ("name", "image", "resources")
_RESOURCES = ("requests", "limits")
_JOB_SPEC = ("parallelism", "completions", "completionMode", "template", "scheduling")
SCHED_BLOCK = (
    "targetReplicatedJobs",
    "schedulingPolicy",
    "schedulingConstraints",
    "disruptionMode",
    "resourceClaims",
    "job",
    "replicatedJobs",
)
TEMPLATE = ("metadata", "spec")
RJOB = ("name", "replicas", "template", "dependsOn")
JOBSET_SPEC = ("scheduling", "replicatedJobs")
LWS_SPEC = ("replicas", "startupPolicy", "scheduling", "leaderWorkerTemplate")
LWT = ("size", "leaderTemplate", "workerTemplate")
NODE_SPEC = ("unschedulable", "taints")
NODE_STATUS = ("capacity", "allocatable", "phase", "conditions")
GROUP_FIELDS = (
    "parentCompositePodGroupName",
    "workloadRef",
    "schedulingPolicy",
    "schedulingConstraints",
    "resourceClaims",
    "disruptionMode",
    "priorityClassName",
    "priority",
    "preemptionPolicy",
)
PGT = ("name", *GROUP_FIELDS[2:])
CPGT = (
    "name",
    "schedulingPolicy",
    "schedulingConstraints",
    "disruptionMode",
    "priorityClassName",
    "priority",
    "preemptionPolicy",
    "podGroupTemplates",
    "compositePodGroupTemplates",
)
WORKLOAD_SPEC = ("controllerRef", "podGroupTemplates", "compositePodGroupTemplates")
PRIORITY_CLASS = (*_TOP[:3], "value", "globalDefault", "preemptionPolicy", "description")


def pod_spec_orders(prefix: str) -> dict[str, Sequence[str]]:
    """The key orders of a pod spec at ``prefix`` and of its containers."""
    return {
        prefix: _POD_SPEC,
        f"{prefix}.containers[]": _CONTAINER,
        f"{prefix}.initContainers[]": _CONTAINER,
        f"{prefix}.containers[].resources": _RESOURCES,
        f"{prefix}.initContainers[].resources": _RESOURCES,
    }


def pod_template_orders(prefix: str) -> dict[str, Sequence[str]]:
    """The key orders of a pod template at ``prefix`` (``""``: the root)."""
    at = f"{prefix}." if prefix else ""
    return {prefix: TEMPLATE, f"{at}metadata": META, **pod_spec_orders(f"{at}spec")}


def job_spec_orders(prefix: str) -> dict[str, Sequence[str]]:
    """The key orders of a Job spec at ``prefix``, its scheduling block and template."""
    return {
        prefix: _JOB_SPEC,
        f"{prefix}.scheduling": SCHED_BLOCK,
        **pod_template_orders(f"{prefix}.template"),
    }


def object_orders(**rest: Sequence[str]) -> dict[str, Sequence[str]]:
    """The key orders of a top-level object: ``apiVersion, kind, metadata, ...`` and ``rest``."""
    return {"": _TOP, "metadata": META, **rest}


def _render(value: Any, orders: _Orders, path: str = "") -> Any:
    """A deep copy of ``value`` with the dicts at ``orders``' paths in their fixed key order."""
    if isinstance(value, Mapping):
        order = orders.get(path, ())
        keys = [k for k in order if k in value] + [k for k in value if k not in order]
        prefix = f"{path}." if path else ""
        return {k: _render(value[k], orders, f"{prefix}{k}") for k in keys}
    if isinstance(value, list | tuple):
        return [_render(v, orders, f"{path}[]") for v in value]
    return copy.deepcopy(value)


def plain(value: Any) -> Any:
    """``value`` as data the builder may keep: a builder's object, else a deep copy."""
    if isinstance(value, Builder):
        return value.obj()
    return copy.deepcopy(value)


# ---- bases -----------------------------------------------------------------------------------


class Builder:
    """The state (one dict) and the ``obj()`` / ``clone()`` / ``field()`` every builder has."""

    _ORDERS: ClassVar[_Orders] = {}

    def __init__(self, root: dict[str, Any]) -> None:
        self._root = root

    def obj(self) -> dict[str, Any]:
        """The object built so far: a plain dict, a fresh deep copy on every call."""
        out: dict[str, Any] = _render(self._root, self._ORDERS)
        return out

    def clone(self) -> Self:
        """An independent copy of this builder (setters on one do not affect the other)."""
        return copy.deepcopy(self)

    def field(self, path: str, value: Any) -> Self:
        """Set any field by its dotted path (``"spec.activeDeadlineSeconds"``), creating the
        dicts on the way; for what no setter covers. ``value`` is copied (a builder: its
        object)."""
        *parents, last = path.split(".")
        self._at(tuple(parents))[last] = plain(value)
        return self

    def _at(self, path: KeyPath) -> dict[str, Any]:
        """The dict at ``path`` under the root, created (empty) where missing."""
        node = self._root
        for key in path:
            child = node.get(key)
            if not isinstance(child, dict):
                child = node[key] = {}
            node = child
        return node

    def _append(self, path: KeyPath, key: str, item: Any) -> Self:
        self._at(path).setdefault(key, []).append(plain(item))
        return self


class ObjectBuilder(Builder):
    """A top-level object: ``apiVersion``, ``kind`` and the ``metadata`` setters."""

    def __init__(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        **body: Any,
    ) -> None:
        meta: dict[str, Any] = {"name": name}
        if namespace is not None:
            meta["namespace"] = namespace
        super().__init__({"apiVersion": api_version, "kind": kind, "metadata": meta, **body})

    def api_version(self, api_version: str) -> Self:
        """Set ``apiVersion`` (e.g. ``scheduling.k8s.io/v1alpha3``)."""
        self._root["apiVersion"] = api_version
        return self

    def name(self, name: str) -> Self:
        """Set ``metadata.name``."""
        self._at(("metadata",))["name"] = name
        return self

    def namespace(self, namespace: str) -> Self:
        """Set ``metadata.namespace``."""
        self._at(("metadata",))["namespace"] = namespace
        return self

    def uid(self, uid: str) -> Self:
        """Set ``metadata.uid``."""
        self._at(("metadata",))["uid"] = uid
        return self

    def label(self, key: str, value: str) -> Self:
        """Add (or replace) one label."""
        self._at(("metadata", "labels"))[key] = value
        return self

    def labels(self, labels: Mapping[str, str]) -> Self:
        """Add (or replace) these labels (none: ``metadata.labels`` stays unset)."""
        if labels:
            self._at(("metadata", "labels")).update(labels)
        return self

    def annotation(self, key: str, value: str) -> Self:
        """Add (or replace) one annotation."""
        self._at(("metadata", "annotations"))[key] = value
        return self

    def annotations(self, annotations: Mapping[str, str]) -> Self:
        """Add (or replace) these annotations (none: ``metadata.annotations`` stays unset)."""
        if annotations:
            self._at(("metadata", "annotations")).update(annotations)
        return self

    def owner_reference(
        self,
        api_version: str,
        kind: str,
        name: str,
        uid: str,
        *,
        controller: bool = True,
        block_owner_deletion: bool = True,
    ) -> Self:
        """Append an ``ownerReferences`` entry (by default the controller reference)."""
        ref = {
            "apiVersion": api_version,
            "kind": kind,
            "name": name,
            "uid": uid,
            "controller": controller,
            "blockOwnerDeletion": block_owner_deletion,
        }
        return self._append(("metadata",), "ownerReferences", ref)
