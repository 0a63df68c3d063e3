"""Samples for the integration profile: the object an integration under test is given, and
what it must produce for it.

A sample is one YAML document of kind ``IntegrationSample``
(``conformance.workloadbuilder.io/v1alpha1``): the object (a Job, JobSet, LeaderWorkerSet or
an operator's own custom resource), where its pod templates are, how many Workloads,
PodGroups, CompositePodGroups and pods it leads to, the PodGroups' ``minCount`` values, and a
resize (a patch and the outcome after it). A plain object (no wrapper) is accepted for the
built-in kinds only when a built-in sample of that kind exists (its expectations are used).
:func:`load_sample` reads one; :data:`BUILTIN_SAMPLES` names the shipped ones.

:func:`standin_pods` makes the pods that the workload controllers of Job, JobSet and
LeaderWorkerSet would create for a sample (names, labels, ownerReferences; never a
``spec.schedulingGroup``: linking them is the integration's job), for clusters that run the
integration but not those controllers.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from workloadbuilder.cluster import ResourceInfo, register_resource, resource_info
from workloadbuilder.kinds.jobset import jobset_child_job_manifests
from workloadbuilder.kinds.lws import lws_pods

__all__ = [
    "BUILTIN_SAMPLES",
    "SAMPLE_API_VERSION",
    "IntegrationSample",
    "SampleOutcome",
    "load_sample",
    "standin_child_jobs",
    "standin_pods",
]

SAMPLE_API_VERSION = "conformance.workloadbuilder.io/v1alpha1"
#: the samples shipped with the package (``--integration-sample <name>``)
BUILTIN_SAMPLES: tuple[str, ...] = ("job", "job-opt-in", "jobset", "lws", "lws-subgroups")


def _count(data: Mapping[str, Any], key: str, where: str) -> int | None:
    if key not in data:
        return None
    value = data[key]
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{where}.{key}: must be a non-negative integer, got {value!r}")
    return value


@dataclasses.dataclass(frozen=True)
class SampleOutcome:
    """What the integration must have produced: counts (``None``: not checked) and the
    PodGroups' gang ``minCount`` values, sorted (``None``: not checked; ``0`` for a basic
    PodGroup)."""

    workloads: int | None = 1
    pod_groups: int | None = None
    composite_pod_groups: int | None = None
    pods: int | None = None
    min_counts: tuple[int, ...] | None = None
    #: child Jobs the sample's workload controller makes that delegate to its Workload
    #: (``scheduling.k8s.io/group-template-name``); ``None``: the sample has none
    child_jobs: int | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str) -> SampleOutcome:
        """From the sample's ``expect`` block (``workloads``, ``podGroups``,
        ``compositePodGroups``, ``pods``, ``minCounts``, ``childJobs``)."""
        if not isinstance(data, Mapping):
            raise ValueError(f"{where}: must be a mapping")
        unknown = set(data) - {
            "workloads",
            "podGroups",
            "compositePodGroups",
            "pods",
            "minCounts",
            "childJobs",
        }
        if unknown:
            raise ValueError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
        mins = data.get("minCounts")
        if mins is not None and (
            not isinstance(mins, list) or not all(isinstance(m, int) and m >= 0 for m in mins)
        ):
            raise ValueError(f"{where}.minCounts: must be a list of non-negative integers")
        workloads = _count(data, "workloads", where)
        return cls(
            workloads=1 if workloads is None else workloads,
            pod_groups=_count(data, "podGroups", where),
            composite_pod_groups=_count(data, "compositePodGroups", where),
            pods=_count(data, "pods", where),
            min_counts=None if mins is None else tuple(sorted(mins)),
            child_jobs=_count(data, "childJobs", where),
        )


@dataclasses.dataclass(frozen=True)
class IntegrationSample:
    """One sample: the object, its resource, its pod templates, the outcomes."""

    name: str
    description: str
    object: Mapping[str, Any]
    resource: ResourceInfo
    #: dotted paths of the object's pod specs (``*`` = every list item); the suite points
    #: their ``schedulerName`` at a scheduler nobody runs, so the pods stay Pending
    pod_templates: tuple[str, ...]
    expect: SampleOutcome
    resize_patch: Any = None
    resize_patch_type: str = "merge"
    resize_expect: SampleOutcome | None = None

    @property
    def kind(self) -> str:
        """The sample object's kind."""
        return str(self.object["kind"])

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "sample") -> IntegrationSample:
        """From an ``IntegrationSample`` document; ``ValueError`` (with the field) if bad."""
        if data.get("apiVersion") != SAMPLE_API_VERSION or data.get("kind") != "IntegrationSample":
            raise ValueError(
                f"{where}: not an IntegrationSample ({SAMPLE_API_VERSION}); see "
                "docs/conformance.md#the-integration-profile"
            )
        obj = data.get("object")
        if not isinstance(obj, Mapping) or not obj.get("kind") or not obj.get("apiVersion"):
            raise ValueError(f"{where}.object: an object with apiVersion and kind is required")
        meta = obj.get("metadata")
        if not isinstance(meta, Mapping) or not meta.get("name"):
            raise ValueError(f"{where}.object.metadata.name: required")
        plural = data.get("plural")
        try:
            info = resource_info(str(obj["kind"]), str(obj["apiVersion"]))
        except KeyError:
            if not plural:
                raise ValueError(
                    f"{where}.plural: required for {obj['apiVersion']} {obj['kind']} "
                    "(the resource name the API serves it under)"
                ) from None
            group, _, version = str(obj["apiVersion"]).rpartition("/")
            info = register_resource(
                ResourceInfo(group=group, version=version, kind=str(obj["kind"]), plural=plural),
                default=False,
            )
        templates = data.get("podTemplates") or []
        if not isinstance(templates, list) or not all(isinstance(t, str) for t in templates):
            raise ValueError(f"{where}.podTemplates: must be a list of dotted paths")
        resize = data.get("resize")
        patch, ptype, rexpect = None, "merge", None
        if resize is not None:
            if not isinstance(resize, Mapping) or "patch" not in resize:
                raise ValueError(f"{where}.resize: needs patch (and expect)")
            patch = resize["patch"]
            ptype = str(resize.get("patchType", "merge"))
            if ptype not in ("merge", "json"):
                raise ValueError(f"{where}.resize.patchType: merge or json, got {ptype!r}")
            rexpect = SampleOutcome.from_dict(resize.get("expect") or {}, f"{where}.resize.expect")
        return cls(
            name=str((data.get("metadata") or {}).get("name") or meta["name"]),
            description=str(data.get("description", "")),
            object=copy.deepcopy(dict(obj)),
            resource=info,
            pod_templates=tuple(templates),
            expect=SampleOutcome.from_dict(data.get("expect") or {}, f"{where}.expect"),
            resize_patch=copy.deepcopy(patch),
            resize_patch_type=ptype,
            resize_expect=rexpect,
        )

    def instance(
        self, namespace: str, labels: Mapping[str, str], scheduler_name: str
    ) -> dict[str, Any]:
        """The object to create: in ``namespace``, with ``labels``, and every pod template's
        ``schedulerName`` set to ``scheduler_name``."""
        obj = copy.deepcopy(dict(self.object))
        meta = obj.setdefault("metadata", {})
        meta["namespace"] = namespace
        meta["labels"] = {**(meta.get("labels") or {}), **labels}
        for path in self.pod_templates:
            for spec in _resolve(obj, path.split(".")):
                spec["schedulerName"] = scheduler_name
        return obj


def _resolve(value: Any, parts: Sequence[str]) -> list[dict[str, Any]]:
    if not parts:
        return [value] if isinstance(value, dict) else []
    head, rest = parts[0], parts[1:]
    if head == "*":
        return [m for v in value for m in _resolve(v, rest)] if isinstance(value, list) else []
    if isinstance(value, dict) and head in value:
        return _resolve(value[head], rest)
    return []


def _builtin_text(name: str) -> str:
    return resources.files(__package__).joinpath("samples", f"{name}.yaml").read_text("utf-8")


def load_sample(source: str) -> IntegrationSample:
    """A sample from a file path or a built-in name (:data:`BUILTIN_SAMPLES`).

    The file holds an ``IntegrationSample`` or, for a Job / JobSet / LeaderWorkerSet, just
    the object: then the built-in sample of that kind gives the pod template paths and the
    expected outcome, which must fit the object (the suite cannot guess them otherwise).
    Raises ``ValueError`` with the reason.
    """
    if source in BUILTIN_SAMPLES and not Path(source).exists():
        return IntegrationSample.from_dict(yaml.safe_load(_builtin_text(source)), source)
    try:
        data = yaml.safe_load(Path(source).read_text(encoding="utf-8"))
    except OSError as e:
        raise ValueError(
            f"integration sample {source}: {e.strerror or e}; built-in samples: "
            f"{', '.join(BUILTIN_SAMPLES)}"
        ) from None
    except yaml.YAMLError as e:
        raise ValueError(f"integration sample {source}: not YAML: {e}") from None
    if not isinstance(data, Mapping):
        raise ValueError(f"integration sample {source}: not a YAML mapping")
    if data.get("kind") != "IntegrationSample":
        builtin = {"Job": "job", "JobSet": "jobset", "LeaderWorkerSet": "lws"}.get(
            str(data.get("kind"))
        )
        if builtin is None:
            raise ValueError(
                f"integration sample {source}: a {data.get('kind')} needs an IntegrationSample "
                "wrapper (podTemplates, expect, resize; docs/conformance.md)"
            )
        wrapper = yaml.safe_load(_builtin_text(builtin))
        wrapper["object"] = data
        wrapper["metadata"] = {"name": str((data.get("metadata") or {}).get("name", builtin))}
        data = wrapper
    return IntegrationSample.from_dict(data, source)


def _controller_ref(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _pod(
    name: str,
    namespace: str,
    template: Mapping[str, Any],
    labels: Mapping[str, str],
    *,
    keep_group: bool = False,
) -> dict[str, Any]:
    tmeta = dict(template.get("metadata") or {})
    spec = copy.deepcopy(dict(template.get("spec") or {}))
    if not keep_group:
        spec.pop("schedulingGroup", None)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {**(tmeta.get("labels") or {}), **labels},
            "annotations": dict(tmeta.get("annotations") or {}),
        },
        "spec": spec,
    }


def standin_pods(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The pods a Job, JobSet or LeaderWorkerSet controller would create for ``obj`` (as read
    back from the server), without ``spec.schedulingGroup`` of their own. ``ValueError`` for
    other kinds.

    Job: ``parallelism`` pods ``<job>-<i>`` with the ``batch.kubernetes.io/job-name`` label
    and a controller ownerReference to the Job, from its pod template as the Job controller
    copies it (a ``schedulingGroup`` there -- a bring-your-own or a parent-linked template --
    is kept; a Job controller that is not workload-aware sets none). JobSet: each child Job's
    ``parallelism`` pods ``<child job>-<i>`` with its labels (no ownerReference: the child
    Jobs are not created; no ``schedulingGroup``: a JobSet controller that is not
    workload-aware sets none, see :func:`standin_child_jobs` for one that is).
    LeaderWorkerSet: the leader and workers of every replica as its StatefulSets name them.
    """
    kind = obj.get("kind")
    meta = obj["metadata"]
    ns = str(meta.get("namespace") or "default")
    if kind == "Job":
        spec = obj.get("spec") or {}
        template = spec.get("template") or {}
        name = str(meta["name"])
        labels = {"batch.kubernetes.io/job-name": name, "job-name": name}
        if meta.get("uid"):
            labels["batch.kubernetes.io/controller-uid"] = str(meta["uid"])
        out = []
        for i in range(int(spec.get("parallelism", 1))):
            pod = _pod(f"{name}-{i}", ns, template, labels, keep_group=True)
            if meta.get("uid"):
                pod["metadata"]["ownerReferences"] = [_controller_ref(obj)]
            out.append(pod)
        return out
    if kind == "JobSet":
        out = []
        for job in jobset_child_job_manifests(obj):
            jspec = job.get("spec") or {}
            jname = str(job["metadata"]["name"])
            labels = {
                **(job["metadata"].get("labels") or {}),
                "batch.kubernetes.io/job-name": jname,
                "job-name": jname,
            }
            for i in range(int(jspec.get("parallelism", 1))):
                out.append(_pod(f"{jname}-{i}", ns, jspec.get("template") or {}, labels))
        return out
    if kind == "LeaderWorkerSet":
        pods = lws_pods(obj)
        for p in pods:
            p["spec"].pop("schedulingGroup", None)
        return pods
    raise ValueError(f"no stand-in pods for kind {kind!r} (Job, JobSet, LeaderWorkerSet only)")


def standin_child_jobs(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The child Jobs a workload-aware JobSet controller (KEP-969, centralized management)
    makes for the JobSet ``obj`` (as read back from the server): ``<jobset>-<replicatedJob>-<i>``
    with the JobSet labels, a controller ownerReference to the JobSet, the annotation
    ``scheduling.k8s.io/group-template-name`` (the PodGroupTemplate of the JobSet's Workload
    the Job's pods belong to) and the pod template's ``spec.schedulingGroup`` naming that
    template's PodGroup. ``[]`` for other kinds (they have no child Jobs)."""
    if obj.get("kind") != "JobSet":
        return []
    return jobset_child_job_manifests(obj)
