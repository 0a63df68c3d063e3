"""The result of a kind adapter (and of :func:`simple_workload`): the objects to create, the
pod -> PodGroup mapping, the minCount patches."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from workloadbuilder.api import (
    CompositePodGroup,
    CompositePodGroupTemplate,
    PodGroup,
    PodGroupTemplate,
    Workload,
    to_dict,
)
from workloadbuilder.errors import ValidationError
from workloadbuilder.validation import validate_object

__all__ = [
    "POD_SET_ANNOTATION",
    "WORKLOAD_ANNOTATION",
    "MinCountPatch",
    "Plan",
    "PodSetKeyFunc",
    "annotated_pod_set_key",
    "check_planned",
    "pod_group_min_count_patch",
    "workload_min_count_patch",
]

#: Maps a pod (a dict) to the key of its pod set in :attr:`Plan.pod_group_names`, or None.
PodSetKeyFunc = Callable[[Mapping[str, Any]], "str | None"]

#: Pod annotation naming the pod-set key of the pod's PodGroup (``workers``, ``slices-0/slice-1``)
#: for plans of custom workloads (:func:`simple_workload`, ``GenericWorkload``).
POD_SET_ANNOTATION = "workloadbuilder.io/pod-set"
#: Optional pod annotation naming the Workload; when present it must match.
WORKLOAD_ANNOTATION = "workloadbuilder.io/workload"


def check_planned(
    obj: Workload | PodGroup | CompositePodGroup, *, subject: str | None = None
) -> None:
    """The last safety net of every plan: ``obj`` must pass the API server's decoding and
    validation (all gates on), or :class:`ValidationError` is raised with the field paths of
    the planned object (``spec.schedulingPolicy.gang.minCount: Invalid value: expected a
    32-bit integer, ...``). ownerReferences without a UID are placeholders (the owner, or
    the Workload, does not exist yet) and are not checked."""
    refs = obj.metadata.owner_references
    if any(not r.uid for r in refs):
        kept = tuple(r for r in refs if r.uid)
        obj = attrs.evolve(obj, metadata=attrs.evolve(obj.metadata, owner_references=kept))
    errors = validate_object(obj)
    if errors:
        short = [attrs.evolve(e, value=None, has_value=False) for e in errors]
        raise ValidationError(
            short, subject=subject or f"the planned {obj.kind} {obj.metadata.name}"
        )


def annotated_pod_set_key(workload: str) -> PodSetKeyFunc:
    """A :data:`PodSetKeyFunc` that reads a pod's :data:`POD_SET_ANNOTATION` (a pod whose
    :data:`WORKLOAD_ANNOTATION` names another Workload than ``workload`` is not ours)."""

    def key(pod: Mapping[str, Any]) -> str | None:
        meta = pod.get("metadata")
        ann = meta.get("annotations") if isinstance(meta, Mapping) else None
        if not isinstance(ann, Mapping):
            return None
        owner = ann.get(WORKLOAD_ANNOTATION)
        if owner is not None and owner != workload:
            return None
        value = ann.get(POD_SET_ANNOTATION)
        return value if isinstance(value, str) else None

    return key


def _has_gang(template: PodGroupTemplate | CompositePodGroupTemplate) -> bool:
    if isinstance(template, PodGroupTemplate):
        return template.scheduling_policy.gang is not None
    return (
        template.scheduling_policy.gang is not None
        or any(_has_gang(t) for t in template.pod_group_templates)
        or any(_has_gang(t) for t in template.composite_pod_group_templates)
    )


def workload_min_count_patch(workload: Workload) -> dict[str, Any] | None:
    """The strategic-merge patch that sets a Workload's gang minCounts to ``workload``'s.

    ``podGroupTemplates`` / ``compositePodGroupTemplates`` carry no patch strategy in the
    v1beta1 types, so strategic merge treats them as atomic lists: the patch carries the whole
    list (as ``strategicpatch.CreateTwoWayMergePatch`` computes it in the Job controller).
    Only lists that contain a gang policy are included; ``None`` when there is none.
    """
    spec: dict[str, Any] = {}
    if any(_has_gang(t) for t in workload.spec.pod_group_templates):
        spec["podGroupTemplates"] = [to_dict(t) for t in workload.spec.pod_group_templates]
    if any(_has_gang(t) for t in workload.spec.composite_pod_group_templates):
        spec["compositePodGroupTemplates"] = [
            to_dict(t) for t in workload.spec.composite_pod_group_templates
        ]
    return {"spec": spec} if spec else None


def pod_group_min_count_patch(pod_group: PodGroup) -> dict[str, Any] | None:
    """``{"spec": {"schedulingPolicy": {"gang": {"minCount": N}}}}`` for a gang PodGroup."""
    gang = pod_group.spec.scheduling_policy.gang
    if gang is None:
        return None
    return {"spec": {"schedulingPolicy": {"gang": {"minCount": gang.min_count}}}}


@attrs.frozen(kw_only=True)
class MinCountPatch:
    """One strategic-merge patch of an elastic ``minCount`` change."""

    kind: str
    namespace: str | None
    name: str
    body: dict[str, Any]


@attrs.frozen(kw_only=True)
class Plan:
    """What an adapter wants to exist for one source object.

    * ``workload``: the Workload. When ``owns_workload`` is false it belongs to a parent
      controller (delegated mode) and is not to be created.
    * ``pod_groups`` / ``composite_pod_groups``: runtime groups to create (CompositePodGroups
      root first).
    * ``pod_group_names``: pod-set key (adapter-specific: the Job name, the ReplicatedJob
      name, ...) -> PodGroup name.
    * ``min_count_patch``: strategic-merge patch body that brings a live Workload to the
      planned gang minCount(s) (``None`` when there is no gang template or the Workload is not
      owned); ``pod_group_patches``: the same per PodGroup name.
    * ``pod_set_key``: how to find a pod's pod-set key (used by :meth:`pod_group_for`).
    """

    workload: Workload
    pod_groups: tuple[PodGroup, ...] = ()
    composite_pod_groups: tuple[CompositePodGroup, ...] = ()
    pod_group_names: dict[str, str] = attrs.field(factory=dict)
    min_count_patch: dict[str, Any] | None = None
    pod_group_patches: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    owns_workload: bool = True
    pod_set_key: PodSetKeyFunc | None = attrs.field(default=None, eq=False, repr=False)

    @property
    def namespace(self) -> str | None:
        """The namespace of every planned object."""
        return self.workload.metadata.namespace

    def pod_group_for(self, pod: Mapping[str, Any]) -> str | None:
        """The name of the PodGroup ``pod`` belongs to, or ``None`` if it is not one of ours.

        A pod that already sets ``spec.schedulingGroup.podGroupName`` (immutable) matches only
        if it names one of the planned PodGroups; otherwise the adapter's ``pod_set_key``
        decides. Pods in another namespace never match.
        """
        meta = pod.get("metadata") or {}
        pod_ns = meta.get("namespace")
        if pod_ns and self.namespace and pod_ns != self.namespace:
            return None
        planned = {pg.metadata.name for pg in self.pod_groups}
        spec = pod.get("spec") or {}
        group = (spec.get("schedulingGroup") or {}).get("podGroupName")
        if isinstance(group, str) and group:
            # spec.schedulingGroup is immutable: a pod linked elsewhere is not ours to link.
            return group if group in planned else None
        if self.pod_set_key is None:
            return None
        key = self.pod_set_key(pod)
        return self.pod_group_names.get(key) if key is not None else None

    def pod_group(self, pod_set: str) -> PodGroup:
        """The planned PodGroup of the pod-set key ``pod_set`` (a key of
        :attr:`pod_group_names`); raises ``KeyError`` for an unknown key."""
        name = self.pod_group_names[pod_set]
        for pg in self.pod_groups:
            if pg.metadata.name == name:
                return pg
        raise KeyError(pod_set)

    def objects(self) -> list[Workload | CompositePodGroup | PodGroup]:
        """The objects to create, in the order the API expects: the Workload (if owned), the
        CompositePodGroups (root first), then the PodGroups."""
        head: list[Workload | CompositePodGroup | PodGroup] = (
            [self.workload] if self.owns_workload else []
        )
        return [*head, *self.composite_pod_groups, *self.pod_groups]

    def patches(self) -> list[MinCountPatch]:
        """Every minCount patch: the Workload's (if owned and gang) then each PodGroup's."""
        out: list[MinCountPatch] = []
        if self.owns_workload and self.min_count_patch is not None:
            out.append(
                MinCountPatch(
                    kind="Workload",
                    namespace=self.namespace,
                    name=self.workload.metadata.name or "",
                    body=self.min_count_patch,
                )
            )
        for name, body in self.pod_group_patches.items():
            out.append(
                MinCountPatch(kind="PodGroup", namespace=self.namespace, name=name, body=body)
            )
        return out

    def with_workload_uid(self, uid: str) -> Plan:
        """Fill in the Workload's UID (known only after it was created) in the Workload and in
        every PodGroup / CompositePodGroup ownerReference that points at it."""
        wl_name = self.workload.metadata.name

        def fix(obj: Any) -> Any:
            refs = tuple(
                attrs.evolve(r, uid=uid) if r.kind == "Workload" and r.name == wl_name else r
                for r in obj.metadata.owner_references
            )
            return attrs.evolve(obj, metadata=attrs.evolve(obj.metadata, owner_references=refs))

        return attrs.evolve(
            self,
            workload=attrs.evolve(
                self.workload, metadata=attrs.evolve(self.workload.metadata, uid=uid)
            ),
            pod_groups=tuple(fix(pg) for pg in self.pod_groups),
            composite_pod_groups=tuple(fix(c) for c in self.composite_pod_groups),
        )
