"""Nodes, PriorityClasses and the scheduling objects: Workloads (with their PodGroup and
CompositePodGroup templates), PodGroups and CompositePodGroups."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Self

from workloadbuilder.testing.builders._base import (
    CPGT,
    GROUP_FIELDS,
    META,
    NODE_SPEC,
    NODE_STATUS,
    PGT,
    PRIORITY_CLASS,
    SCHEDULING_V1ALPHA3,
    SCHEDULING_V1BETA1,
    WORKLOAD_SPEC,
    Builder,
    KeyPath,
    ObjectBuilder,
    object_orders,
)
from workloadbuilder.testing.builders._pods import BlockSetters, SchedulingSetters

__all__ = [
    "CompositePodGroupBuilder",
    "CompositePodGroupTemplateBuilder",
    "NodeBuilder",
    "PodGroupBuilder",
    "PodGroupTemplateBuilder",
    "PriorityClassBuilder",
    "WorkloadBuilder",
    "make_composite_pod_group",
    "make_composite_pod_group_template",
    "make_node",
    "make_pod_group",
    "make_pod_group_template",
    "make_priority_class",
    "make_workload",
]


# ---- nodes and priority classes ----------------------------------------------------------------


class NodeBuilder(ObjectBuilder):
    """A ``v1`` Node (see :func:`make_node`)."""

    _ORDERS = object_orders(spec=NODE_SPEC, status=NODE_STATUS)

    def __init__(self, name: str) -> None:
        super().__init__("v1", "Node", name, spec={})

    def resource(self, resource: str, quantity: str | int) -> Self:
        """Set ``status.capacity`` and ``status.allocatable`` of ``resource`` (a fake node's
        allocatable equals its capacity)."""
        for key in ("capacity", "allocatable"):
            self._at(("status", key))[resource] = str(quantity)
        return self

    def resources(self, resources: Mapping[str, str | int]) -> Self:
        """:meth:`resource` for each entry."""
        for resource, quantity in resources.items():
            self.resource(resource, quantity)
        return self

    def allocatable(self, resource: str, quantity: str | int) -> Self:
        """Set ``status.allocatable`` of ``resource`` only."""
        self._at(("status", "allocatable"))[resource] = str(quantity)
        return self

    def ready(self) -> Self:
        """``phase: Running`` and the condition ``Ready=True`` (a kubelet's fake report)."""
        status = self._at(("status",))
        status["phase"] = "Running"
        status["conditions"] = [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]
        return self

    def taint(self, key: str, value: str | None = None, effect: str = "NoSchedule") -> Self:
        """Append a taint."""
        taint = {"key": key, **({"value": value} if value is not None else {}), "effect": effect}
        return self.taints(taint)

    def taints(self, *taints: Mapping[str, Any]) -> Self:
        """Append these taints (dicts, as in the API)."""
        for t in taints:
            self._append(("spec",), "taints", t)
        return self

    def unschedulable(self, unschedulable: bool = True) -> Self:
        """Set ``spec.unschedulable`` (cordoned)."""
        self._at(("spec",))["unschedulable"] = unschedulable
        return self


def make_node(name: str) -> NodeBuilder:
    """A Node with an empty spec and no status (set resources with :meth:`NodeBuilder.resource`;
    status is a subresource: on a real API server, patch it after the create)."""
    return NodeBuilder(name)


class PriorityClassBuilder(ObjectBuilder):
    """A ``scheduling.k8s.io/v1`` PriorityClass (see :func:`make_priority_class`)."""

    _ORDERS = {"": PRIORITY_CLASS, "metadata": META}

    def __init__(self, name: str, value: int = 0) -> None:
        super().__init__("scheduling.k8s.io/v1", "PriorityClass", name, value=value)

    def value(self, value: int) -> Self:
        """Set ``value``."""
        self._root["value"] = value
        return self

    def preemption_policy(self, policy: str) -> Self:
        """Set ``preemptionPolicy`` (``PreemptLowerPriority`` or ``Never``)."""
        self._root["preemptionPolicy"] = policy
        return self

    def global_default(self, default: bool = True) -> Self:
        """Set ``globalDefault``."""
        self._root["globalDefault"] = default
        return self


def make_priority_class(name: str, value: int = 0) -> PriorityClassBuilder:
    """A PriorityClass of ``value``."""
    return PriorityClassBuilder(name, value)


# ---- Workload, PodGroup, CompositePodGroup ----------------------------------------------------


class _GroupSetters(SchedulingSetters):
    """Setters shared by PodGroups and their templates (fields next to the policy)."""

    _SCHEDULING_AT: ClassVar[KeyPath] = ("spec",)

    def priority_class(self, name: str) -> Self:
        """Set ``priorityClassName``."""
        self._block()["priorityClassName"] = name
        return self

    def priority(self, priority: int) -> Self:
        """Set ``priority``."""
        self._block()["priority"] = priority
        return self

    def preemption_policy(self, policy: str) -> Self:
        """Set ``preemptionPolicy``."""
        self._block()["preemptionPolicy"] = policy
        return self


class PodGroupTemplateBuilder(_GroupSetters):
    """A Workload ``podGroupTemplates`` entry (see :func:`make_pod_group_template`)."""

    _SCHEDULING_AT = ()
    _ORDERS = {"": PGT}

    def __init__(self, name: str) -> None:
        super().__init__({"name": name, "schedulingPolicy": {"basic": {}}})


def make_pod_group_template(name: str) -> PodGroupTemplateBuilder:
    """A PodGroupTemplate ``name`` with a basic policy."""
    return PodGroupTemplateBuilder(name)


class _CompositeSetters(BlockSetters):
    """Setters shared by CompositePodGroups and their templates."""

    _BLOCK_AT: ClassVar[KeyPath] = ("spec",)

    def _block(self) -> dict[str, Any]:
        return self._at(self._BLOCK_AT)

    def gang(self, min_group_count: int) -> Self:
        """Gang policy: at least ``min_group_count`` child groups together."""
        self._block()["schedulingPolicy"] = {"gang": {"minGroupCount": min_group_count}}
        return self

    def priority_class(self, name: str) -> Self:
        """Set ``priorityClassName``."""
        self._block()["priorityClassName"] = name
        return self


class CompositePodGroupTemplateBuilder(_CompositeSetters):
    """A Workload ``compositePodGroupTemplates`` entry (see
    :func:`make_composite_pod_group_template`)."""

    _BLOCK_AT = ()
    _ORDERS = {
        "": CPGT,
        "podGroupTemplates[]": PGT,
        "compositePodGroupTemplates[]": CPGT,
        # deeper levels keep their builders' order already
    }

    def __init__(self, name: str) -> None:
        super().__init__({"name": name, "schedulingPolicy": {"basic": {}}})

    def pod_group_template(self, template: PodGroupTemplateBuilder | Mapping[str, Any]) -> Self:
        """Append a child PodGroupTemplate."""
        return self._append((), "podGroupTemplates", template)

    def composite_pod_group_template(
        self, template: CompositePodGroupTemplateBuilder | Mapping[str, Any]
    ) -> Self:
        """Append a child CompositePodGroupTemplate."""
        return self._append((), "compositePodGroupTemplates", template)


def make_composite_pod_group_template(name: str) -> CompositePodGroupTemplateBuilder:
    """A CompositePodGroupTemplate ``name`` with a basic policy and no children (a valid one
    needs at least one: add them with ``pod_group_template(...)``)."""
    return CompositePodGroupTemplateBuilder(name)


class WorkloadBuilder(ObjectBuilder):
    """A ``scheduling.k8s.io/v1beta1`` Workload (see :func:`make_workload`)."""

    _ORDERS = object_orders(
        spec=WORKLOAD_SPEC,
        **{"spec.podGroupTemplates[]": PGT, "spec.compositePodGroupTemplates[]": CPGT},
    )

    def __init__(self, name: str, namespace: str | None = None) -> None:
        main = {"name": "main", "schedulingPolicy": {"basic": {}}}
        super().__init__(SCHEDULING_V1BETA1, "Workload", name, namespace, spec={})
        self._root["spec"]["podGroupTemplates"] = [main]
        self._default_template = True

    def _add(self, key: str, template: Builder | Mapping[str, Any]) -> Self:
        if self._default_template:
            self._default_template = False
            del self._root["spec"]["podGroupTemplates"]
        return self._append(("spec",), key, template)

    def pod_group_template(self, template: PodGroupTemplateBuilder | Mapping[str, Any]) -> Self:
        """Append a PodGroupTemplate (the first one added replaces the default ``main``)."""
        return self._add("podGroupTemplates", template)

    def composite_pod_group_template(
        self, template: CompositePodGroupTemplateBuilder | Mapping[str, Any]
    ) -> Self:
        """Append a CompositePodGroupTemplate (the first template added replaces the default
        ``main``)."""
        return self._add("compositePodGroupTemplates", template)

    def controller_ref(self, kind: str, name: str, api_group: str = "") -> Self:
        """Set ``spec.controllerRef``: the object whose controller manages this Workload."""
        self._at(("spec",))["controllerRef"] = {"apiGroup": api_group, "kind": kind, "name": name}
        return self


def make_workload(name: str, namespace: str | None = None) -> WorkloadBuilder:
    """A Workload with one basic PodGroupTemplate ``main`` (replaced by the first template
    added)."""
    return WorkloadBuilder(name, namespace)


class _RuntimeGroupSetters(Builder):
    """Setters of a runtime group object (PodGroup, CompositePodGroup): where it comes from."""

    def workload_ref(self, workload: str, template: str) -> Self:
        """Set ``spec.workloadRef``: the Workload and the template this group comes from."""
        self._at(("spec",))["workloadRef"] = {"workloadName": workload, "templateName": template}
        return self

    def parent(self, composite_pod_group: str) -> Self:
        """Set ``spec.parentCompositePodGroupName`` (v1alpha3; needs :meth:`workload_ref`)."""
        self._at(("spec",))["parentCompositePodGroupName"] = composite_pod_group
        return self


class PodGroupBuilder(_RuntimeGroupSetters, _GroupSetters, ObjectBuilder):
    """A ``scheduling.k8s.io/v1beta1`` PodGroup (see :func:`make_pod_group`)."""

    _ORDERS = object_orders(spec=GROUP_FIELDS)

    def __init__(self, name: str, namespace: str | None = None) -> None:
        spec: dict[str, Any] = {"schedulingPolicy": {"basic": {}}}
        super().__init__(SCHEDULING_V1BETA1, "PodGroup", name, namespace, spec=spec)


def make_pod_group(name: str, namespace: str | None = None) -> PodGroupBuilder:
    """A PodGroup with a basic policy (``gang(min_count)`` for a gang)."""
    return PodGroupBuilder(name, namespace)


class CompositePodGroupBuilder(_RuntimeGroupSetters, _CompositeSetters, ObjectBuilder):
    """A ``scheduling.k8s.io/v1alpha3`` CompositePodGroup (see
    :func:`make_composite_pod_group`)."""

    _ORDERS = object_orders(
        spec=(
            "parentCompositePodGroupName",
            "workloadRef",
            "schedulingPolicy",
            "schedulingConstraints",
            "disruptionMode",
            "priorityClassName",
            "priority",
            "preemptionPolicy",
        )
    )

    def __init__(self, name: str, namespace: str | None = None) -> None:
        spec = {
            "workloadRef": {"workloadName": name, "templateName": name},
            "schedulingPolicy": {"basic": {}},
        }
        super().__init__(SCHEDULING_V1ALPHA3, "CompositePodGroup", name, namespace, spec=spec)


def make_composite_pod_group(name: str, namespace: str | None = None) -> CompositePodGroupBuilder:
    """A CompositePodGroup with a basic policy, from template ``name`` of Workload ``name``
    (change it with :meth:`CompositePodGroupBuilder.workload_ref`)."""
    return CompositePodGroupBuilder(name, namespace)
