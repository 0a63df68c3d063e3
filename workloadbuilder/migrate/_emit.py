"""A gang -> v1.37 objects, built with the SDK's builder and checked with its validation
(the rules of kube-apiserver v1.37), and the pod templates that carried the old link
rewritten to join the new groups."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Literal

import attrs

from workloadbuilder.api import (
    CompositePodGroup,
    OwnerReference,
    PodGroup,
    TopologyConstraint,
    Workload,
    object_to_dict,
)
from workloadbuilder.builder import (
    ALL_DISRUPTION_MODES,
    ALL_POLICIES,
    Builder,
    BuildOptions,
    SchedulingConfig,
    WorkloadItem,
    controller_ref,
)
from workloadbuilder.errors import BuildError
from workloadbuilder.migrate._model import CONTROLLER_KINDS, Gang, Slot
from workloadbuilder.validation import (
    FeatureGates,
    is_dns1123_label,
    validate_job_scheduling,
    validate_object,
)

__all__ = ["OLD_SCHEDULERS", "JobMode", "emit_gang", "owner_of", "sendable"]

#: how a gang whose only member is one Job is migrated: the Job's own ``spec.scheduling``
#: (the Job controller creates the Workload and PodGroup) or explicit objects
JobMode = Literal["native", "podgroup"]

#: scheduler names of the old gang schedulers: their pods go to the default scheduler
OLD_SCHEDULERS = frozenset({"volcano", "yunikorn", "scheduler-plugins-scheduler"})

_SYNTHETIC_UID = "migrate-no-owner"


def sendable(obj: dict[str, Any]) -> dict[str, Any]:
    """Drop ownerReferences without a UID (the API server refuses them)."""
    meta = obj.get("metadata", {})
    kept = [r for r in meta.get("ownerReferences", ()) if r.get("uid")]
    if kept:
        meta["ownerReferences"] = kept
    else:
        meta.pop("ownerReferences", None)
    return obj


def _label(name: str, what: str, gang: Gang) -> str:
    """``name`` as a DNS label (template names must be), reported when it had to change."""
    if not is_dns1123_label(name):
        return name
    fixed = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:63].strip("-") or "group"
    gang.note(what, "approximated", f"{name!r} is not a DNS label; template named {fixed!r}")
    return fixed


def _owner(gang: Gang) -> tuple[OwnerReference, bool]:
    """The owner of the new objects and whether it is real: the source group's controller,
    else the one controller object whose pods join the gang, else none (a placeholder that
    is stripped again: bare pods)."""
    ref = gang.owner_ref
    if ref is not None:
        return (
            OwnerReference(
                api_version=str(ref.get("apiVersion", "")),
                kind=str(ref.get("kind", "")),
                name=str(ref.get("name", "")),
                uid=str(ref.get("uid", "")),
                controller=True,
                block_owner_deletion=True,
            ),
            True,
        )
    docs = {id(s.doc): s.doc for s in gang.slots}
    if len(docs) == 1:
        (doc,) = docs.values()
        if doc.kind in CONTROLLER_KINDS:
            return controller_ref(doc.obj), True
    placeholder = OwnerReference(api_version="v1", kind="Pod", name=gang.name, uid=_SYNTHETIC_UID)
    return placeholder, False


def _config(min_count: int | None, gang: Gang, *, topology: bool) -> SchedulingConfig:
    return SchedulingConfig(
        policy="gang" if min_count else "basic",
        min_count=min_count or None,
        topology=(TopologyConstraint(key=gang.topology_key),)
        if topology and gang.topology_key
        else (),
        priority_class_name=gang.priority_class_name,
    )


def _pod_priorities(gang: Gang) -> None:
    """One priority for the group and its pods (v1.37 refuses a group whose pods' priority
    differs from the group's)."""
    seen: dict[str, Slot] = {}
    for slot in gang.slots:
        spec = slot.template().get("spec") or {}
        pcn = spec.get("priorityClassName")
        if isinstance(pcn, str) and pcn:
            seen.setdefault(pcn, slot)
    if gang.priority_class_name is None and len(seen) == 1:
        ((pcn, slot),) = seen.items()
        gang.priority_class_name = pcn
        gang.note(
            slot.field("spec.priorityClassName"),
            "mapped",
            f"group priorityClassName {pcn!r} (v1.37: one priority per group)",
            origin=slot.doc.origin,
        )
    names = set(seen) | ({gang.priority_class_name} if gang.priority_class_name else set())
    if len(names) > 1:
        slot = next(iter(seen.values()))
        raise gang.fail(
            slot.field("spec.priorityClassName"),
            f"conflicting priorities: the pods of group {gang.name!r} use "
            f"{sorted(names)}; v1.37 schedules a group only when its pods and the group "
            "have one priority",
            origin=slot.doc.origin,
        )


def _task_of(slot: Slot, gang: Gang) -> str | None:
    task = slot.link.task
    if gang.tasks and task is None:
        raise gang.fail(
            slot.field(slot.link.path),
            f"half-linked: joins group {gang.name!r}, which has task groups "
            f"({', '.join(gang.tasks)}), but names no task",
            origin=slot.doc.origin,
        )
    if gang.tasks and task not in gang.tasks:
        raise gang.fail(
            slot.field(slot.link.task_path or slot.link.path),
            f"half-linked: task {task!r} is not one of group {gang.name!r}'s tasks "
            f"({', '.join(gang.tasks)})",
            origin=slot.doc.origin,
        )
    return task if gang.tasks else None


def _native_job(gang: Gang, job_mode: JobMode) -> Slot | None:
    """The slot of a gang that a Job's own ``spec.scheduling`` expresses, if any."""
    if job_mode != "native" or gang.tasks or len(gang.slots) != 1:
        return None
    slot = gang.slots[0]
    if slot.doc.kind != "Job" or gang.owner_ref is not None:
        return None
    return slot


def _drop_link(slot: Slot) -> None:
    """Remove the old link's labels and annotations (and the maps they leave empty)."""
    tmpl = slot.template()
    meta = tmpl.get("metadata")
    if not isinstance(meta, dict):
        return
    for kind, keys in (
        ("labels", slot.link.drop_labels),
        ("annotations", slot.link.drop_annotations),
    ):
        values = meta.get(kind)
        if isinstance(values, dict):
            for key in keys:
                values.pop(key, None)
            if not values:
                del meta[kind]
    if not meta and slot.path:
        del tmpl["metadata"]


def _rewrite(slot: Slot, pod_group: str, gang: Gang, scheduler_name: str | None) -> None:
    tmpl = slot.template()
    _drop_link(slot)
    spec = tmpl.setdefault("spec", {})
    link = slot.link
    existing = (spec.get("schedulingGroup") or {}).get("podGroupName")
    if existing and existing != pod_group:
        raise gang.fail(
            slot.field("spec.schedulingGroup.podGroupName"),
            f"a pod in two groups: already joins PodGroup {existing!r} and, through "
            f"{link.path}, {gang.source} group {gang.name!r}",
            origin=slot.doc.origin,
        )
    spec["schedulingGroup"] = {"podGroupName": pod_group}
    gang.note(
        slot.field(link.path),
        "mapped",
        f"{slot.field('spec.schedulingGroup.podGroupName')} = {pod_group!r}",
        origin=slot.doc.origin,
    )
    old = spec.get("schedulerName")
    if scheduler_name is not None and old != scheduler_name:
        spec["schedulerName"] = scheduler_name
        gang.note(
            slot.field("spec.schedulerName"),
            "mapped",
            f"{old!r} -> {scheduler_name!r} (--scheduler-name)",
            origin=slot.doc.origin,
        )
    elif scheduler_name is None and old in OLD_SCHEDULERS:
        del spec["schedulerName"]
        gang.note(
            slot.field("spec.schedulerName"),
            "approximated",
            f"{old!r} removed: the default scheduler (kube-scheduler v1.37) gang-schedules "
            "PodGroups; pass --scheduler-name to name another",
            origin=slot.doc.origin,
        )
    pcn = gang.priority_class_name
    if pcn and spec.get("priorityClassName") != pcn:
        spec["priorityClassName"] = pcn
        spec.pop("priority", None)
        gang.note(
            slot.field("spec.priorityClassName"),
            "mapped",
            f"set to the group's {pcn!r} (v1.37: pods and group share one priority)",
            origin=slot.doc.origin,
        )
    slot.doc.rewritten = True


def _job_scheduling(slot: Slot, gang: Gang, scheduler_name: str | None) -> None:
    job = slot.doc.obj
    spec = job.setdefault("spec", {})
    if gang.min_count and gang.min_count > int(spec.get("parallelism", 1) or 1):
        raise gang.fail(
            gang.min_count_path,
            f"conflicting quorums: the group needs {gang.min_count} pods, but Job "
            f"{slot.doc.name!r} runs at most parallelism={spec.get('parallelism', 1)} at once, "
            "so the gang could never be scheduled",
        )
    scheduling: dict[str, Any] = {
        "schedulingPolicy": {"gang": {"minCount": gang.min_count}}
        if gang.min_count
        else {"basic": {}}
    }
    if gang.topology_key:
        scheduling["schedulingConstraints"] = {"topology": [{"key": gang.topology_key}]}
    spec["scheduling"] = scheduling
    tmpl = slot.template()
    _drop_link(slot)
    tspec = tmpl.setdefault("spec", {})
    if scheduler_name is not None:
        tspec["schedulerName"] = scheduler_name
    elif tspec.get("schedulerName") in OLD_SCHEDULERS:
        old = tspec.pop("schedulerName")
        gang.note(
            slot.field("spec.schedulerName"),
            "approximated",
            f"{old!r} removed: the default scheduler gang-schedules the Job's PodGroup",
            origin=slot.doc.origin,
        )
    if gang.priority_class_name:
        tspec["priorityClassName"] = gang.priority_class_name
    errors = validate_job_scheduling(job, gates=FeatureGates())
    if errors:
        raise gang.fail(str(errors[0].path), str(errors[0]), origin=slot.doc.origin)
    gang.note(
        slot.field(slot.link.path),
        "mapped",
        f"Job spec.scheduling = {json.dumps(scheduling)} (the Job controller creates the "
        "Workload and PodGroup; needs the WorkloadWithJob gate; spec.scheduling can only be "
        "set when the Job is created: recreate it)",
        origin=slot.doc.origin,
    )
    slot.doc.rewritten = True


def emit_gang(
    gang: Gang, *, job_mode: JobMode = "native", scheduler_name: str | None = None
) -> list[dict[str, Any]]:
    """The Workload / CompositePodGroup / PodGroups of ``gang`` in creation order (JSON
    dicts, checked with the API server's validation), rewriting the pod templates of its
    members in place. Raises :class:`MigrationError` for input that cannot be migrated."""
    if not gang.slots:
        gang.note(
            "metadata.name",
            "approximated",
            f"no pod or pod template in the input joins group {gang.name!r}: its pods need "
            "spec.schedulingGroup.podGroupName set to the new PodGroup",
        )
    _pod_priorities(gang)
    tasks = {slot_id: _task_of(s, gang) for slot_id, s in enumerate(gang.slots)}
    job_slot = _native_job(gang, job_mode)
    if job_slot is not None:
        _job_scheduling(job_slot, gang, scheduler_name)
        return []
    owner, real_owner = _owner(gang)
    opts = BuildOptions(
        name=gang.name,
        namespace=gang.namespace,
        owner=owner,
        allowed_policies=ALL_POLICIES,
        allowed_disruption_modes=ALL_DISRUPTION_MODES,
    )
    group_names: dict[str | None, str] = {}
    if gang.tasks:
        children = []
        template_of: dict[str, str] = {}
        for task, minimum in gang.tasks.items():
            tname = _label(task, f"{gang.tasks_path}[{task}]", gang)
            if tname in template_of.values():
                raise gang.fail("", f"two task names map to the template name {tname!r}")
            template_of[task] = tname
            if not minimum:
                gang.note(
                    f"{gang.tasks_path}[{task}]",
                    "approximated",
                    "no minimum: a basic child PodGroup, but it counts toward the "
                    "CompositePodGroup's minGroupCount (every child), so the tree waits "
                    "until this task's pods can be placed too",
                )
            children.append(
                WorkloadItem(name=tname, default_config=_config(minimum, gang, topology=False))
            )
        root_name = _label(gang.name, "metadata.name", gang)
        if root_name in template_of.values():
            root_name = f"{root_name[:57]}-group"
        root = WorkloadItem(
            name=root_name,
            path="spec",
            default_config=_config(len(children), gang, topology=True),
            children=children,
        )
    else:
        root = WorkloadItem(
            name=_label(gang.name, "metadata.name", gang),
            path="spec",
            default_config=_config(gang.min_count, gang, topology=True),
        )
    builder = Builder(root, opts)
    errors = builder.validate()
    if errors:
        raise gang.fail(str(errors[0].path), str(errors[0]))
    try:
        workload = builder.build_workload()
    except BuildError as e:
        raise gang.fail("", str(e)) from None
    objects: list[Workload | CompositePodGroup | PodGroup] = [workload]
    if gang.tasks:
        cpg = builder.new_composite_pod_group(gang.name, root.name)
        objects.append(cpg)
        for task, tname in template_of.items():
            pg_name = f"{gang.name}-{tname}"
            pg = builder.new_pod_group(pg_name, tname)
            pg = attrs.evolve(
                pg, spec=attrs.evolve(pg.spec, parent_composite_pod_group_name=gang.name)
            )
            objects.append(pg)
            group_names[task] = pg_name
    else:
        objects.append(builder.new_pod_group(gang.name, root.name))
        group_names[None] = gang.name
    objects = [_ownerless(o) if not real_owner else _with_uids(o) for o in objects]
    out: list[dict[str, Any]] = []
    gates = FeatureGates()
    for obj in objects:
        problems = validate_object(obj, gates=gates)
        if problems:
            raise gang.fail(str(problems[0].path), f"{obj.kind} {problems[0]}")
        version = None if isinstance(obj, CompositePodGroup) else "v1beta1"
        out.append(sendable(object_to_dict(obj, api_version=version)))
    for slot_id, slot in enumerate(gang.slots):
        _rewrite(slot, group_names[tasks[slot_id]], gang, scheduler_name)
    return out


def _with_uids(obj: Any) -> Any:
    """Only ownerReferences with a UID: the API server refuses the others (an owner that
    was never created, e.g. a manifest without metadata.uid)."""
    refs = tuple(r for r in obj.metadata.owner_references if r.uid)
    return attrs.evolve(obj, metadata=attrs.evolve(obj.metadata, owner_references=refs))


def _ownerless(obj: Any) -> Any:
    """Without a controller (bare pods) the objects are owned by nobody."""
    meta = attrs.evolve(obj.metadata, owner_references=())
    if isinstance(obj, Workload):
        return attrs.evolve(obj, metadata=meta, spec=attrs.evolve(obj.spec, controller_ref=None))
    return attrs.evolve(obj, metadata=meta)


def owner_of(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The controller ownerReference of ``obj`` (``metadata.ownerReferences``), if any."""
    meta = obj.get("metadata")
    refs = meta.get("ownerReferences") if isinstance(meta, Mapping) else None
    for ref in refs if isinstance(refs, list) else []:
        if isinstance(ref, Mapping) and ref.get("controller"):
            return ref
    return None
