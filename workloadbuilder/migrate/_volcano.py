"""Volcano ``scheduling.volcano.sh/v1beta1`` PodGroups and the pods that join them.

Followed: volcano-sh/apis ``pkg/apis/scheduling/v1beta1/types.go`` (PodGroupSpec:
``minMember``, ``minTaskMember``, ``queue``, ``priorityClassName``, ``minResources``,
``networkTopology{mode, highestTierAllowed, highestTierName}``, as of Volcano v1.12) and
the pod annotations ``scheduling.k8s.io/group-name`` / ``scheduling.volcano.sh/group-name``
(the group) and ``volcano.sh/task-spec`` (the task of a Volcano job's pod).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workloadbuilder.migrate._common import (
    annotation_map,
    check_int,
    group_docs,
    meta_key,
    report_unknown,
    slots_by_group,
)
from workloadbuilder.migrate._emit import owner_of
from workloadbuilder.migrate._model import Doc, Gang, Link, Slot
from workloadbuilder.migrate._report import MigrationError

__all__ = ["API_GROUP", "VERSIONS", "gangs", "link"]

API_GROUP = "scheduling.volcano.sh"
VERSIONS = ("v1beta1",)
GROUP_KEYS = ("scheduling.k8s.io/group-name", "scheduling.volcano.sh/group-name")
TASK_KEY = "volcano.sh/task-spec"
_KNOWN = (
    "minMember",
    "minTaskMember",
    "queue",
    "priorityClassName",
    "minResources",
    "networkTopology",
)


def link(tmpl: Mapping[str, Any], origin: str, where: str) -> Link | None:
    """The Volcano group a pod template joins (its group-name annotation), if any."""
    notes = annotation_map(tmpl)
    found = {k: notes[k] for k in GROUP_KEYS if notes.get(k)}
    if not found:
        return None
    if len(set(found.values())) > 1:
        raise MigrationError(
            origin,
            f"{where}metadata.annotations",
            f"a pod in two groups: {found}",
        )
    key, group = next(iter(found.items()))
    task = notes.get(TASK_KEY)
    return Link(
        source="volcano",
        group=group,
        path=meta_key("annotations", key),
        task=task,
        task_path=meta_key("annotations", TASK_KEY),
        drop_annotations=tuple(found),
    )


def _topology(gang: Gang, spec: Mapping[str, Any], tier_labels: Mapping[str, str]) -> None:
    nt = spec.get("networkTopology")
    if nt is None:
        return
    base = "spec.networkTopology"
    if not isinstance(nt, Mapping):
        raise gang.fail(base, f"expected an object, got {nt!r}")
    mode = nt.get("mode", "hard")
    tier = nt.get("highestTierName") or nt.get("highestTierAllowed", 1)
    tier_path = (
        f"{base}.highestTierName" if nt.get("highestTierName") else f"{base}.highestTierAllowed"
    )
    if mode == "soft":
        gang.note(
            f"{base}.mode",
            "not-expressible",
            "soft network topology is a preference; v1.37 topology constraints are required "
            "and there is no preferred form",
        )
        return
    if mode != "hard":
        raise gang.fail(f"{base}.mode", f'Unsupported value: {mode!r}: "hard", "soft"')
    key = tier_labels.get(str(tier))
    if key is None:
        gang.note(
            tier_path,
            "not-expressible",
            f"Volcano HyperNode tier {tier!r} has no node label here; pass "
            f"--tier-label {tier}=NODE_LABEL_KEY to map it to a v1.37 topology constraint",
        )
        return
    gang.topology_key = key
    gang.note(
        tier_path,
        "mapped",
        f"schedulingConstraints.topology[0].key = {key!r} (all pods on nodes sharing one value)",
    )


def _gang(doc: Doc, tier_labels: Mapping[str, str]) -> Gang:
    spec = doc.obj.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise MigrationError(doc.origin, "spec", "expected an object")
    gang = Gang(
        source="volcano",
        name=doc.name,
        namespace=doc.namespace,
        origin=doc.origin,
        min_count=None,
        min_count_path="spec.minMember",
        tasks_path="spec.minTaskMember",
        owner_ref=owner_of(doc.obj),
    )
    minimum = check_int(doc, "spec.minMember", spec.get("minMember", 0))
    tasks_raw = spec.get("minTaskMember") or {}
    if not isinstance(tasks_raw, Mapping):
        raise MigrationError(doc.origin, "spec.minTaskMember", "expected a map of task -> count")
    tasks = {
        str(k): check_int(doc, f"spec.minTaskMember[{k}]", v) for k, v in sorted(tasks_raw.items())
    }
    if tasks:
        total = sum(tasks.values())
        gang.tasks = tasks
        for task, n in tasks.items():
            gang.note(
                f"spec.minTaskMember[{task}]",
                "mapped",
                f"PodGroup {doc.name}-{task}: "
                + (f"gang minCount {n}" if n else "basic (no minimum)")
                + f", child of CompositePodGroup {doc.name}",
            )
        if minimum > total:
            gang.note(
                "spec.minMember",
                "not-expressible",
                f"minMember {minimum} exceeds the task minimums' sum {total}: v1.37 cannot "
                "require pods beyond each task's own minimum; the gang needs only "
                f"{total} pods",
            )
        else:
            gang.note(
                "spec.minMember",
                "mapped",
                f"CompositePodGroup {doc.name} gang minGroupCount {len(tasks)} (every task "
                f"group at its minimum: {total} >= minMember {minimum} pods)",
            )
    else:
        gang.min_count = minimum or None
        gang.note(
            "spec.minMember",
            "mapped",
            f"PodGroup {doc.name} schedulingPolicy.gang.minCount {minimum}"
            if minimum
            else f"PodGroup {doc.name} schedulingPolicy.basic (minMember 0: no gang)",
        )
    queue = spec.get("queue")
    if queue:
        gang.note(
            "spec.queue",
            "not-expressible",
            f"queue {queue!r}: Volcano queues (quota, weight, reclaim) are not part of v1.37 "
            "workload-aware scheduling; use Kueue (LocalQueue / ClusterQueue) for quotas",
        )
    pcn = spec.get("priorityClassName")
    if pcn:
        gang.priority_class_name = str(pcn)
        gang.priority_path = "spec.priorityClassName"
        gang.note("spec.priorityClassName", "mapped", f"PodGroup priorityClassName {pcn!r}")
    if spec.get("minResources"):
        gang.note(
            "spec.minResources",
            "not-expressible",
            "v1.37 derives what a group needs from its pods' requests; there is no "
            "minimum-resources field",
        )
    _topology(gang, spec, tier_labels)
    report_unknown(gang, spec, _KNOWN, "spec")
    return gang


def gangs(groups: list[Doc], slots: list[Slot], tier_labels: Mapping[str, str]) -> list[Gang]:
    """One gang per Volcano PodGroup, with the pod templates that join it."""
    by_key = group_docs(groups, "Volcano PodGroup")
    members = slots_by_group(slots)
    out: list[Gang] = []
    for key, doc in by_key.items():
        gang = _gang(doc, tier_labels)
        gang.slots = members.pop(key, [])
        doc.consumed = True
        out.append(gang)
    for (ns, name), orphans in members.items():
        slot = orphans[0]
        raise MigrationError(
            slot.doc.origin,
            slot.field(slot.link.path),
            f"half-linked: joins Volcano PodGroup {ns}/{name}, which is not in the input",
        )
    return out
