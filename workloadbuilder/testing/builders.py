"""Fluent builders of test objects, in the Kueue style: ``make_job("a").parallelism(3).obj()``.

Every ``make_*`` function returns a builder whose defaults already make a minimal valid object
(a Pod with one ``pause`` container, a PodGroup with a basic policy, a Workload with one
template, ...). Each setter changes the builder and returns it, so calls chain; ``obj()`` returns
the object as a plain Kubernetes dict (camelCase JSON, as sent to the API server)::

    from workloadbuilder.testing.builders import make_job, make_node, make_pod

    node = make_node("n1").resource("cpu", "8").ready().obj()
    pod = make_pod("p", "ns").pod_group("gang").request("cpu", "1").obj()
    job = make_job("train", "ns").parallelism(4).completions(4).gang(min_count=2).obj()

Guarantees:

* ``obj()`` returns a fresh deep copy: changing it, or calling more setters afterwards, never
  affects another object. Values given to setters are copied when they are set, and so are the
  objects of nested builders (``template(make_pod_template()...)`` takes a snapshot). Use
  :meth:`clone` to fork a builder.
* Keys come out in one fixed order per kind (``apiVersion``, ``kind``, ``metadata``, ``spec``,
  ``status``, and a fixed order inside each), whatever order the setters are called in, so two
  builders that set the same fields produce byte-identical JSON. Keys set through :meth:`field`
  that the builder does not know follow the known ones, in the order they were set.
* :meth:`field` sets any field by its dotted path, for what no setter covers.

This module imports only the standard library: tests that build objects do not pull in the
control-plane harness, the HTTP client or the SDK's models.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Self

__all__ = [
    "PAUSE_IMAGE",
    "CompositePodGroupBuilder",
    "CompositePodGroupTemplateBuilder",
    "JobBuilder",
    "JobSetBuilder",
    "LeaderWorkerSetBuilder",
    "NodeBuilder",
    "ObjectBuilder",
    "PodBuilder",
    "PodGroupBuilder",
    "PodGroupTemplateBuilder",
    "PodTemplateBuilder",
    "PriorityClassBuilder",
    "ReplicatedJobBuilder",
    "SchedulingBuilder",
    "WorkloadBuilder",
    "make_composite_pod_group",
    "make_composite_pod_group_template",
    "make_job",
    "make_jobset",
    "make_lws",
    "make_node",
    "make_pod",
    "make_pod_group",
    "make_pod_group_template",
    "make_pod_template",
    "make_priority_class",
    "make_replicated_job",
    "make_scheduling",
    "make_workload",
]

#: The image of the default container (does nothing, pulls fast; the harness has no kubelet).
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"

_SCHEDULING_V1BETA1 = "scheduling.k8s.io/v1beta1"
_SCHEDULING_V1ALPHA3 = "scheduling.k8s.io/v1alpha3"

_Path = tuple[str, ...]
_Orders = Mapping[str, Sequence[str]]

# ---- key orders ------------------------------------------------------------------------------
# A path is the dotted key path from the builder's root; "[]" stands for any item of a list.

_TOP = ("apiVersion", "kind", "metadata", "spec", "value", "status")
_META = (
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
_SCHED_BLOCK = (
    "targetReplicatedJobs",
    "schedulingPolicy",
    "schedulingConstraints",
    "disruptionMode",
    "resourceClaims",
    "job",
    "replicatedJobs",
)
_TEMPLATE = ("metadata", "spec")
_RJOB = ("name", "replicas", "template", "dependsOn")
_JOBSET_SPEC = ("scheduling", "replicatedJobs")
_LWS_SPEC = ("replicas", "startupPolicy", "scheduling", "leaderWorkerTemplate")
_LWT = ("size", "leaderTemplate", "workerTemplate")
_NODE_SPEC = ("unschedulable", "taints")
_NODE_STATUS = ("capacity", "allocatable", "phase", "conditions")
_GROUP_FIELDS = (
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
_PGT = ("name", *_GROUP_FIELDS[2:])
_CPGT = (
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
_WORKLOAD_SPEC = ("controllerRef", "podGroupTemplates", "compositePodGroupTemplates")
_PRIORITY_CLASS = (*_TOP[:3], "value", "globalDefault", "preemptionPolicy", "description")


def _pod_spec_orders(prefix: str) -> dict[str, Sequence[str]]:
    return {
        prefix: _POD_SPEC,
        f"{prefix}.containers[]": _CONTAINER,
        f"{prefix}.initContainers[]": _CONTAINER,
        f"{prefix}.containers[].resources": _RESOURCES,
        f"{prefix}.initContainers[].resources": _RESOURCES,
    }


def _pod_template_orders(prefix: str) -> dict[str, Sequence[str]]:
    at = f"{prefix}." if prefix else ""
    return {prefix: _TEMPLATE, f"{at}metadata": _META, **_pod_spec_orders(f"{at}spec")}


def _job_spec_orders(prefix: str) -> dict[str, Sequence[str]]:
    return {
        prefix: _JOB_SPEC,
        f"{prefix}.scheduling": _SCHED_BLOCK,
        **_pod_template_orders(f"{prefix}.template"),
    }


def _object_orders(**rest: Sequence[str]) -> dict[str, Sequence[str]]:
    return {"": _TOP, "metadata": _META, **rest}


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


def _plain(value: Any) -> Any:
    """``value`` as data the builder may keep: a builder's object, else a deep copy."""
    if isinstance(value, _Builder):
        return value.obj()
    return copy.deepcopy(value)


# ---- bases -----------------------------------------------------------------------------------


class _Builder:
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
        self._at(tuple(parents))[last] = _plain(value)
        return self

    def _at(self, path: _Path) -> dict[str, Any]:
        """The dict at ``path`` under the root, created (empty) where missing."""
        node = self._root
        for key in path:
            child = node.get(key)
            if not isinstance(child, dict):
                child = node[key] = {}
            node = child
        return node

    def _append(self, path: _Path, key: str, item: Any) -> Self:
        self._at(path).setdefault(key, []).append(_plain(item))
        return self


class ObjectBuilder(_Builder):
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


# ---- pod specs -------------------------------------------------------------------------------


class _PodSpecSetters(_Builder):
    """Setters of a pod spec; container setters act on the first container."""

    _POD_SPEC_AT: ClassVar[_Path] = ("spec",)

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


class PodBuilder(_PodSpecSetters, ObjectBuilder):
    """A ``v1`` Pod (see :func:`make_pod`)."""

    _ORDERS = _object_orders(**_pod_spec_orders("spec"))

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


class PodTemplateBuilder(_PodSpecSetters):
    """A pod template (``{"metadata"?, "spec"}``) for Jobs, JobSets and LeaderWorkerSets."""

    _ORDERS = _pod_template_orders("")

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


def _job_template() -> dict[str, Any]:
    return {
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": PAUSE_IMAGE}]}
    }


# ---- scheduling blocks -----------------------------------------------------------------------


class _BlockSetters(_Builder):
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


class _SchedulingSetters(_BlockSetters):
    """Setters of a workload-aware scheduling block: policy, topology, disruption, claims."""

    _SCHEDULING_AT: ClassVar[_Path] = ("spec", "scheduling")

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


class SchedulingBuilder(_SchedulingSetters):
    """A ``spec.scheduling`` block (Job, LWS) or an entry of a JobSet's
    ``spec.scheduling.replicatedJobs`` (see :func:`make_scheduling`)."""

    _SCHEDULING_AT = ()
    _ORDERS = {"": _SCHED_BLOCK, "job": _SCHED_BLOCK}

    def __init__(self) -> None:
        super().__init__({})

    def targets(self, *replicated_jobs: str) -> Self:
        """``targetReplicatedJobs`` (JobSet entries): the ReplicatedJobs the entry is for."""
        self._root["targetReplicatedJobs"] = list(replicated_jobs)
        return self

    def job(self, scheduling: SchedulingBuilder | Mapping[str, Any]) -> Self:
        """``job`` (JobSet entries): one PodGroup per child Job with this block."""
        self._root["job"] = _plain(scheduling)
        return self


def make_scheduling() -> SchedulingBuilder:
    """An empty scheduling block (``{}``: the adapter's defaults); chain ``gang()``, ...."""
    return SchedulingBuilder()


# ---- Job, JobSet, LeaderWorkerSet --------------------------------------------------------------


class _JobSpecSetters(_PodSpecSetters, _SchedulingSetters):
    """Setters of a Job spec; the pod-spec setters act on its pod template."""

    _JOB_SPEC_AT: ClassVar[_Path] = ("spec",)

    def _job_spec(self) -> dict[str, Any]:
        return self._at(self._JOB_SPEC_AT)

    def parallelism(self, parallelism: int) -> Self:
        """Set ``parallelism``."""
        self._job_spec()["parallelism"] = parallelism
        return self

    def completions(self, completions: int) -> Self:
        """Set ``completions``."""
        self._job_spec()["completions"] = completions
        return self

    def indexed(self) -> Self:
        """``completionMode: Indexed``."""
        self._job_spec()["completionMode"] = "Indexed"
        return self

    def template(self, template: PodTemplateBuilder | Mapping[str, Any]) -> Self:
        """Replace the pod template."""
        self._job_spec()["template"] = _plain(template)
        return self

    def scheduling(self, scheduling: SchedulingBuilder | Mapping[str, Any] | None = None) -> Self:
        """Replace ``spec.scheduling`` (``None``: an empty block, the adapter's defaults)."""
        self._job_spec()["scheduling"] = {} if scheduling is None else _plain(scheduling)
        return self


class JobBuilder(_JobSpecSetters, ObjectBuilder):
    """A ``batch/v1`` Job (see :func:`make_job`)."""

    _POD_SPEC_AT = ("spec", "template", "spec")
    _ORDERS = _object_orders(**_job_spec_orders("spec"))

    def __init__(self, name: str, namespace: str | None = None) -> None:
        super().__init__("batch/v1", "Job", name, namespace, spec={"template": _job_template()})


def make_job(name: str, namespace: str | None = None) -> JobBuilder:
    """A Job whose pod template has ``restartPolicy: Never`` and one container ``main``; no
    ``parallelism`` (the API's default 1) and no ``spec.scheduling``."""
    return JobBuilder(name, namespace)


class ReplicatedJobBuilder(_JobSpecSetters):
    """A JobSet ``replicatedJobs`` entry (see :func:`make_replicated_job`)."""

    _JOB_SPEC_AT = ("template", "spec")
    _POD_SPEC_AT = ("template", "spec", "template", "spec")
    _SCHEDULING_AT = ("template", "spec", "scheduling")
    _ORDERS = {
        "": _RJOB,
        "template": _TEMPLATE,
        "template.metadata": _META,
        **_job_spec_orders("template.spec"),
    }

    def __init__(self, name: str) -> None:
        super().__init__(
            {"name": name, "replicas": 1, "template": {"spec": {"template": _job_template()}}}
        )

    def replicas(self, replicas: int) -> Self:
        """Set ``replicas`` (child Jobs of this template)."""
        self._root["replicas"] = replicas
        return self

    def depends_on(self, name: str, status: str = "Complete") -> Self:
        """Append a ``dependsOn`` entry (start after ReplicatedJob ``name`` reaches ``status``)."""
        return self._append((), "dependsOn", {"name": name, "status": status})

    def job_annotation(self, key: str, value: str) -> Self:
        """Add an annotation to the Job template (e.g. the exclusive-topology one)."""
        self._at(("template", "metadata", "annotations"))[key] = value
        return self


def make_replicated_job(name: str) -> ReplicatedJobBuilder:
    """A ReplicatedJob ``name`` with one replica of a Job like :func:`make_job`'s."""
    return ReplicatedJobBuilder(name)


class JobSetBuilder(_SchedulingSetters, ObjectBuilder):
    """A ``jobset.x-k8s.io/v1alpha2`` JobSet (see :func:`make_jobset`)."""

    _ORDERS = _object_orders(
        spec=_JOBSET_SPEC,
        **{"spec.scheduling": _SCHED_BLOCK, "spec.scheduling.replicatedJobs[]": _SCHED_BLOCK},
        **{"spec.scheduling.replicatedJobs[].job": _SCHED_BLOCK},
        **{"spec.replicatedJobs[]": _RJOB, "spec.replicatedJobs[].template": _TEMPLATE},
        **_job_spec_orders("spec.replicatedJobs[].template.spec"),
    )

    def __init__(self, name: str, namespace: str | None = None) -> None:
        super().__init__("jobset.x-k8s.io/v1alpha2", "JobSet", name, namespace, spec={})

    def replicated_job(self, rjob: ReplicatedJobBuilder | Mapping[str, Any]) -> Self:
        """Append a ReplicatedJob."""
        return self._append(("spec",), "replicatedJobs", rjob)

    def scheduling(self, scheduling: SchedulingBuilder | Mapping[str, Any] | None = None) -> Self:
        """Replace ``spec.scheduling`` (``None``: an empty block, the adapter's defaults)."""
        self._at(("spec",))["scheduling"] = {} if scheduling is None else _plain(scheduling)
        return self

    def scheduling_entry(self, entry: SchedulingBuilder | Mapping[str, Any]) -> Self:
        """Append a ``spec.scheduling.replicatedJobs`` entry (a :func:`make_scheduling` block
        with ``targets(...)``)."""
        return self._append(self._SCHEDULING_AT, "replicatedJobs", entry)

    def startup_policy_order(self, order: str) -> Self:
        """``startupPolicy.startupPolicyOrder`` (``AnyOrder`` or ``InOrder``)."""
        self._at(("spec",))["startupPolicy"] = {"startupPolicyOrder": order}
        return self


def make_jobset(name: str, namespace: str | None = None) -> JobSetBuilder:
    """A JobSet without ReplicatedJobs (add them with :meth:`JobSetBuilder.replicated_job`) and
    without ``spec.scheduling``."""
    return JobSetBuilder(name, namespace)


class LeaderWorkerSetBuilder(_PodSpecSetters, _SchedulingSetters, ObjectBuilder):
    """A ``leaderworkerset.x-k8s.io/v1`` LeaderWorkerSet; pod-spec setters act on the worker
    template (see :func:`make_lws`)."""

    _POD_SPEC_AT = ("spec", "leaderWorkerTemplate", "workerTemplate", "spec")
    _ORDERS = _object_orders(
        spec=_LWS_SPEC,
        **{"spec.scheduling": _SCHED_BLOCK, "spec.leaderWorkerTemplate": _LWT},
        **_pod_template_orders("spec.leaderWorkerTemplate.workerTemplate"),
        **_pod_template_orders("spec.leaderWorkerTemplate.leaderTemplate"),
    )

    def __init__(self, name: str, namespace: str | None = None) -> None:
        worker = {"spec": {"containers": [{"name": "main", "image": PAUSE_IMAGE}]}}
        super().__init__(
            "leaderworkerset.x-k8s.io/v1",
            "LeaderWorkerSet",
            name,
            namespace,
            spec={"replicas": 1, "leaderWorkerTemplate": {"size": 1, "workerTemplate": worker}},
        )

    def replicas(self, replicas: int) -> Self:
        """Set ``replicas`` (leader+workers groups)."""
        self._at(("spec",))["replicas"] = replicas
        return self

    def size(self, size: int) -> Self:
        """Set ``leaderWorkerTemplate.size`` (pods per group, the leader included)."""
        self._at(("spec", "leaderWorkerTemplate"))["size"] = size
        return self

    def startup_policy(self, policy: str) -> Self:
        """Set ``startupPolicy`` (``LeaderCreated`` or ``LeaderReady``)."""
        self._at(("spec",))["startupPolicy"] = policy
        return self

    def scheduling(self, scheduling: SchedulingBuilder | Mapping[str, Any] | None = None) -> Self:
        """Replace ``spec.scheduling`` (``None``: an empty block, the adapter's defaults)."""
        self._at(("spec",))["scheduling"] = {} if scheduling is None else _plain(scheduling)
        return self

    def worker_template(self, template: PodTemplateBuilder | Mapping[str, Any]) -> Self:
        """Replace ``leaderWorkerTemplate.workerTemplate``."""
        self._at(("spec", "leaderWorkerTemplate"))["workerTemplate"] = _plain(template)
        return self

    def leader_template(self, template: PodTemplateBuilder | Mapping[str, Any]) -> Self:
        """Set ``leaderWorkerTemplate.leaderTemplate`` (default: none, the leader uses the
        worker template)."""
        self._at(("spec", "leaderWorkerTemplate"))["leaderTemplate"] = _plain(template)
        return self

    def sub_group_size(self, size: int, policy_type: str | None = None) -> Self:
        """``leaderWorkerTemplate.subGroupPolicy`` (``policy_type``: ``LeaderWorker`` or
        ``LeaderExcluded``)."""
        policy: dict[str, Any] = {"subGroupSize": size}
        if policy_type is not None:
            policy["subGroupPolicyType"] = policy_type
        self._at(("spec", "leaderWorkerTemplate"))["subGroupPolicy"] = policy
        return self


def make_lws(name: str, namespace: str | None = None) -> LeaderWorkerSetBuilder:
    """A LeaderWorkerSet of one replica of size 1, the worker template one container ``main``;
    no ``spec.scheduling``."""
    return LeaderWorkerSetBuilder(name, namespace)


# ---- nodes and priority classes ----------------------------------------------------------------


class NodeBuilder(ObjectBuilder):
    """A ``v1`` Node (see :func:`make_node`)."""

    _ORDERS = _object_orders(spec=_NODE_SPEC, status=_NODE_STATUS)

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

    _ORDERS = {"": _PRIORITY_CLASS, "metadata": _META}

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


class _GroupSetters(_SchedulingSetters):
    """Setters shared by PodGroups and their templates (fields next to the policy)."""

    _SCHEDULING_AT: ClassVar[_Path] = ("spec",)

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
    _ORDERS = {"": _PGT}

    def __init__(self, name: str) -> None:
        super().__init__({"name": name, "schedulingPolicy": {"basic": {}}})


def make_pod_group_template(name: str) -> PodGroupTemplateBuilder:
    """A PodGroupTemplate ``name`` with a basic policy."""
    return PodGroupTemplateBuilder(name)


class _CompositeSetters(_BlockSetters):
    """Setters shared by CompositePodGroups and their templates."""

    _BLOCK_AT: ClassVar[_Path] = ("spec",)

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
        "": _CPGT,
        "podGroupTemplates[]": _PGT,
        "compositePodGroupTemplates[]": _CPGT,
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

    _ORDERS = _object_orders(
        spec=_WORKLOAD_SPEC,
        **{"spec.podGroupTemplates[]": _PGT, "spec.compositePodGroupTemplates[]": _CPGT},
    )

    def __init__(self, name: str, namespace: str | None = None) -> None:
        main = {"name": "main", "schedulingPolicy": {"basic": {}}}
        super().__init__(_SCHEDULING_V1BETA1, "Workload", name, namespace, spec={})
        self._root["spec"]["podGroupTemplates"] = [main]
        self._default_template = True

    def _add(self, key: str, template: _Builder | Mapping[str, Any]) -> Self:
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


class _RuntimeGroupSetters(_Builder):
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

    _ORDERS = _object_orders(spec=_GROUP_FIELDS)

    def __init__(self, name: str, namespace: str | None = None) -> None:
        spec: dict[str, Any] = {"schedulingPolicy": {"basic": {}}}
        super().__init__(_SCHEDULING_V1BETA1, "PodGroup", name, namespace, spec=spec)


def make_pod_group(name: str, namespace: str | None = None) -> PodGroupBuilder:
    """A PodGroup with a basic policy (``gang(min_count)`` for a gang)."""
    return PodGroupBuilder(name, namespace)


class CompositePodGroupBuilder(_RuntimeGroupSetters, _CompositeSetters, ObjectBuilder):
    """A ``scheduling.k8s.io/v1alpha3`` CompositePodGroup (see
    :func:`make_composite_pod_group`)."""

    _ORDERS = _object_orders(
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
        super().__init__(_SCHEDULING_V1ALPHA3, "CompositePodGroup", name, namespace, spec=spec)


def make_composite_pod_group(name: str, namespace: str | None = None) -> CompositePodGroupBuilder:
    """A CompositePodGroup with a basic policy, from template ``name`` of Workload ``name``
    (change it with :meth:`CompositePodGroupBuilder.workload_ref`)."""
    return CompositePodGroupBuilder(name, namespace)
