"""Jobs, JobSets (with their replicated Jobs) and LeaderWorkerSets."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Self

from workloadbuilder.testing.builders._base import (
    JOBSET_SPEC,
    LWS_SPEC,
    LWT,
    META,
    PAUSE_IMAGE,
    RJOB,
    SCHED_BLOCK,
    TEMPLATE,
    KeyPath,
    ObjectBuilder,
    job_spec_orders,
    object_orders,
    plain,
    pod_template_orders,
)
from workloadbuilder.testing.builders._pods import (
    PodSpecSetters,
    PodTemplateBuilder,
    SchedulingBuilder,
    SchedulingSetters,
    job_template,
)

__all__ = [
    "JobBuilder",
    "JobSetBuilder",
    "LeaderWorkerSetBuilder",
    "ReplicatedJobBuilder",
    "make_job",
    "make_jobset",
    "make_lws",
    "make_replicated_job",
]


# ---- Job, JobSet, LeaderWorkerSet --------------------------------------------------------------


class _JobSpecSetters(PodSpecSetters, SchedulingSetters):
    """Setters of a Job spec; the pod-spec setters act on its pod template."""

    _JOB_SPEC_AT: ClassVar[KeyPath] = ("spec",)

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
        self._job_spec()["template"] = plain(template)
        return self

    def scheduling(self, scheduling: SchedulingBuilder | Mapping[str, Any] | None = None) -> Self:
        """Replace ``spec.scheduling`` (``None``: an empty block, the adapter's defaults)."""
        self._job_spec()["scheduling"] = {} if scheduling is None else plain(scheduling)
        return self


class JobBuilder(_JobSpecSetters, ObjectBuilder):
    """A ``batch/v1`` Job (see :func:`make_job`)."""

    _POD_SPEC_AT = ("spec", "template", "spec")
    _ORDERS = object_orders(**job_spec_orders("spec"))

    def __init__(self, name: str, namespace: str | None = None) -> None:
        super().__init__("batch/v1", "Job", name, namespace, spec={"template": job_template()})


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
        "": RJOB,
        "template": TEMPLATE,
        "template.metadata": META,
        **job_spec_orders("template.spec"),
    }

    def __init__(self, name: str) -> None:
        super().__init__(
            {"name": name, "replicas": 1, "template": {"spec": {"template": job_template()}}}
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


class JobSetBuilder(SchedulingSetters, ObjectBuilder):
    """A ``jobset.x-k8s.io/v1alpha2`` JobSet (see :func:`make_jobset`)."""

    _ORDERS = object_orders(
        spec=JOBSET_SPEC,
        **{"spec.scheduling": SCHED_BLOCK, "spec.scheduling.replicatedJobs[]": SCHED_BLOCK},
        **{"spec.scheduling.replicatedJobs[].job": SCHED_BLOCK},
        **{"spec.replicatedJobs[]": RJOB, "spec.replicatedJobs[].template": TEMPLATE},
        **job_spec_orders("spec.replicatedJobs[].template.spec"),
    )

    def __init__(self, name: str, namespace: str | None = None) -> None:
        super().__init__("jobset.x-k8s.io/v1alpha2", "JobSet", name, namespace, spec={})

    def replicated_job(self, rjob: ReplicatedJobBuilder | Mapping[str, Any]) -> Self:
        """Append a ReplicatedJob."""
        return self._append(("spec",), "replicatedJobs", rjob)

    def scheduling(self, scheduling: SchedulingBuilder | Mapping[str, Any] | None = None) -> Self:
        """Replace ``spec.scheduling`` (``None``: an empty block, the adapter's defaults)."""
        self._at(("spec",))["scheduling"] = {} if scheduling is None else plain(scheduling)
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


class LeaderWorkerSetBuilder(PodSpecSetters, SchedulingSetters, ObjectBuilder):
    """A ``leaderworkerset.x-k8s.io/v1`` LeaderWorkerSet; pod-spec setters act on the worker
    template (see :func:`make_lws`)."""

    _POD_SPEC_AT = ("spec", "leaderWorkerTemplate", "workerTemplate", "spec")
    _ORDERS = object_orders(
        spec=LWS_SPEC,
        **{"spec.scheduling": SCHED_BLOCK, "spec.leaderWorkerTemplate": LWT},
        **pod_template_orders("spec.leaderWorkerTemplate.workerTemplate"),
        **pod_template_orders("spec.leaderWorkerTemplate.leaderTemplate"),
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
        self._at(("spec",))["scheduling"] = {} if scheduling is None else plain(scheduling)
        return self

    def worker_template(self, template: PodTemplateBuilder | Mapping[str, Any]) -> Self:
        """Replace ``leaderWorkerTemplate.workerTemplate``."""
        self._at(("spec", "leaderWorkerTemplate"))["workerTemplate"] = plain(template)
        return self

    def leader_template(self, template: PodTemplateBuilder | Mapping[str, Any]) -> Self:
        """Set ``leaderWorkerTemplate.leaderTemplate`` (default: none, the leader uses the
        worker template)."""
        self._at(("spec", "leaderWorkerTemplate"))["leaderTemplate"] = plain(template)
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
