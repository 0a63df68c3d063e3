"""Pods, pod templates and the ``spec.scheduling`` blocks of the workload kinds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Self

from workloadbuilder.testing.builders._base import (
    PAUSE_IMAGE,
    SCHED_BLOCK,
    Builder,
    KeyPath,
    ObjectBuilder,
    object_orders,
    plain,
    pod_spec_orders,
    pod_template_orders,
)

__all__ = [
    "PodBuilder",
    "PodTemplateBuilder",
    "SchedulingBuilder",
    "make_pod",
    "make_pod_template",
    "make_scheduling",
]


# ---- pod specs -------------------------------------------------------------------------------


class PodSpecSetters(Builder):
    """Setters of a pod spec; container setters act on the first container."""

    _POD_SPEC_AT: ClassVar[KeyPath] = ("spec",)

    def _pod_spec(self) -> dict[str, Any]:
        return self._at(self._POD_SPEC_AT)

    def _container(self) -> dict[str, Any]:
        containers = self._pod_spec().setdefault("containers", [])
        if not containers:
            containers.append({"name": "main", "image": PAUSE_IMAGE})
        first: dict[str, Any] = containers[0]
        return first

    def container_name(self, name: str) -> Self:
        """Rename the first container (default ``main``)."""
        self._container()["name"] = name
        return self

    def image(self, image: str) -> Self:
        """Set the first container's image (default :data:`PAUSE_IMAGE`)."""
        self._container()["image"] = image
        return self

    def request(self, resource: str, quantity: str | int) -> Self:
        """Set the first container's request of ``resource`` (``"cpu"``, ``"nvidia.com/gpu"``)."""
        requests = self._container().setdefault("resources", {}).setdefault("requests", {})
        requests[resource] = str(quantity)
        return self

    def limit(self, resource: str, quantity: str | int) -> Self:
        """Set the first container's limit of ``resource``."""
        limits = self._container().setdefault("resources", {}).setdefault("limits", {})
        limits[resource] = str(quantity)
        return self

    def container(self, name: str, image: str = PAUSE_IMAGE, **fields: Any) -> Self:
        """Append another container (``fields``: more of its keys, e.g. ``resources=``)."""
        self._container()  # the default one stays first
        return self._append(
            self._POD_SPEC_AT, "containers", {"name": name, "image": image, **fields}
        )

    def restart_policy(self, policy: str) -> Self:
        """Set ``restartPolicy`` (``Never``, ``OnFailure``, ``Always``)."""
        self._pod_spec()["restartPolicy"] = policy
        return self

    def scheduler_name(self, name: str) -> Self:
        """Set ``schedulerName``."""
        self._pod_spec()["schedulerName"] = name
        return self

    def pod_group(self, name: str) -> Self:
        """Set ``schedulingGroup.podGroupName``: the PodGroup the pod belongs to."""
        self._pod_spec()["schedulingGroup"] = {"podGroupName": name}
        return self

    def priority_class(self, name: str) -> Self:
        """Set ``priorityClassName``."""
        self._pod_spec()["priorityClassName"] = name
        return self

    def node_selector(self, key: str, value: str) -> Self:
        """Add one ``nodeSelector`` entry."""
        self._pod_spec().setdefault("nodeSelector", {})[key] = value
        return self

    def node_selectors(self, selector: Mapping[str, str]) -> Self:
        """Add these ``nodeSelector`` entries (none: ``nodeSelector`` stays unset)."""
        if selector:
            self._pod_spec().setdefault("nodeSelector", {}).update(selector)
        return self

    def toleration(
        self,
        key: str,
        value: str | None = None,
        *,
        effect: str | None = None,
        operator: str | None = None,
    ) -> Self:
        """Append a toleration (only the keys given are set)."""
        item = {"key": key, "operator": operator, "value": value, "effect": effect}
        return self.tolerations({k: v for k, v in item.items() if v is not None})

    def tolerations(self, *tolerations: Mapping[str, Any]) -> Self:
        """Append these tolerations (dicts, as in the API)."""
        for t in tolerations:
            self._append(self._POD_SPEC_AT, "tolerations", t)
        return self

    def node_name(self, node: str) -> Self:
        """Set ``nodeName``: the pod is created bound (as by another scheduler)."""
        self._pod_spec()["nodeName"] = node
        return self

    def pod_resource_claim(
        self, name: str, *, claim: str | None = None, template: str | None = None
    ) -> Self:
        """Append a pod ``resourceClaims`` entry naming a ResourceClaim or a template."""
        return self._append(self._POD_SPEC_AT, "resourceClaims", _claim(name, claim, template))


def _claim(name: str, claim: str | None, template: str | None) -> dict[str, Any]:
    if (claim is None) == (template is None):
        raise ValueError("give exactly one of claim= and template=")
    if claim is not None:
        return {"name": name, "resourceClaimName": claim}
    return {"name": name, "resourceClaimTemplateName": template}


class PodBuilder(PodSpecSetters, ObjectBuilder):
    """A ``v1`` Pod (see :func:`make_pod`)."""

    _ORDERS = object_orders(**pod_spec_orders("spec"))

    def __init__(self, name: str, namespace: str | None = None) -> None:
        super().__init__(
            "v1",
            "Pod",
            name,
            namespace,
            spec={"containers": [{"name": "main", "image": PAUSE_IMAGE}]},
        )


def make_pod(name: str, namespace: str | None = None) -> PodBuilder:
    """A Pod with one container ``main`` (image :data:`PAUSE_IMAGE`, no requests)."""
    return PodBuilder(name, namespace)


class PodTemplateBuilder(PodSpecSetters):
    """A pod template (``{"metadata"?, "spec"}``) for Jobs, JobSets and LeaderWorkerSets."""

    _ORDERS = pod_template_orders("")

    def __init__(self) -> None:
        super().__init__({"spec": {"containers": [{"name": "main", "image": PAUSE_IMAGE}]}})

    def label(self, key: str, value: str) -> Self:
        """Add (or replace) one label of the pods."""
        self._at(("metadata", "labels"))[key] = value
        return self

    def annotation(self, key: str, value: str) -> Self:
        """Add (or replace) one annotation of the pods."""
        self._at(("metadata", "annotations"))[key] = value
        return self


def make_pod_template() -> PodTemplateBuilder:
    """A pod template with one container ``main`` (image :data:`PAUSE_IMAGE`); no
    ``restartPolicy`` (a Job's template needs one: :func:`make_job` sets ``Never``)."""
    return PodTemplateBuilder()


def job_template() -> dict[str, Any]:
    """The default pod template of a Job: one ``pause`` container, ``restartPolicy: Never``."""
    return {
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": PAUSE_IMAGE}]}
    }


# ---- scheduling blocks -----------------------------------------------------------------------


class BlockSetters(Builder):
    """Setters every scheduling block has (a Job's ``spec.scheduling``, a PodGroup's or a
    CompositePodGroup's spec or template): basic policy, topology, disruption mode."""

    def _block(self) -> dict[str, Any]:
        raise NotImplementedError

    def basic(self) -> Self:
        """Basic policy: ``schedulingPolicy.basic``."""
        self._block()["schedulingPolicy"] = {"basic": {}}
        return self

    def topology(self, *keys: str) -> Self:
        """``schedulingConstraints.topology``: all pods in one domain of each key."""
        self._block()["schedulingConstraints"] = {"topology": [{"key": k} for k in keys]}
        return self

    def disruption_mode(self, mode: str) -> Self:
        """``disruptionMode``: ``"all"`` (the group is disrupted together) or ``"single"``."""
        self._block()["disruptionMode"] = {mode: {}}
        return self


class SchedulingSetters(BlockSetters):
    """Setters of a workload-aware scheduling block: policy, topology, disruption, claims."""

    _SCHEDULING_AT: ClassVar[KeyPath] = ("spec", "scheduling")

    def _block(self) -> dict[str, Any]:
        return self._at(self._SCHEDULING_AT)

    def gang(self, min_count: int | None = None) -> Self:
        """Gang policy: ``schedulingPolicy.gang`` (``minCount`` if given; a PodGroup needs it,
        a Job or JobSet defaults it)."""
        self._block()["schedulingPolicy"] = {
            "gang": {} if min_count is None else {"minCount": min_count}
        }
        return self

    def resource_claim(
        self, name: str, *, claim: str | None = None, template: str | None = None
    ) -> Self:
        """Append a shared ``resourceClaims`` entry (a ResourceClaim or a template name)."""
        return self._append(self._SCHEDULING_AT, "resourceClaims", _claim(name, claim, template))


class SchedulingBuilder(SchedulingSetters):
    """A ``spec.scheduling`` block (Job, LWS) or an entry of a JobSet's
    ``spec.scheduling.replicatedJobs`` (see :func:`make_scheduling`)."""

    _SCHEDULING_AT = ()
    _ORDERS = {"": SCHED_BLOCK, "job": SCHED_BLOCK}

    def __init__(self) -> None:
        super().__init__({})

    def targets(self, *replicated_jobs: str) -> Self:
        """``targetReplicatedJobs`` (JobSet entries): the ReplicatedJobs the entry is for."""
        self._root["targetReplicatedJobs"] = list(replicated_jobs)
        return self

    def job(self, scheduling: SchedulingBuilder | Mapping[str, Any]) -> Self:
        """``job`` (JobSet entries): one PodGroup per child Job with this block."""
        self._root["job"] = plain(scheduling)
        return self


def make_scheduling() -> SchedulingBuilder:
    """An empty scheduling block (``{}``: the adapter's defaults); chain ``gang()``, ...."""
    return SchedulingBuilder()
