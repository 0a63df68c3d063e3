"""Kueue plain-pod groups: pods labelled ``kueue.x-k8s.io/pod-group-name`` with the
``kueue.x-k8s.io/pod-group-total-count`` annotation.

Followed: kubernetes-sigs/kueue ``pkg/controller/jobs/pod`` constants and the "Plain Pods"
task page (Kueue v0.13): the group is admitted as a whole once all ``total-count`` pods
exist; ``kueue.x-k8s.io/podset-required-topology`` / ``podset-preferred-topology`` ask for
one topology domain (required / preferred).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workloadbuilder.migrate._common import annotation_map, label_map, meta_key, slots_by_group
from workloadbuilder.migrate._model import Gang, Link, Slot
from workloadbuilder.migrate._report import MigrationError

__all__ = ["gangs", "link"]

NAME_LABEL = "kueue.x-k8s.io/pod-group-name"
COUNT_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"


def link(tmpl: Mapping[str, Any], origin: str, where: str) -> Link | None:
    """The Kueue pod group a pod template joins, if any (its total count in ``extra``)."""
    group = label_map(tmpl).get(NAME_LABEL)
    if not group:
        return None
    notes = annotation_map(tmpl)
    queued = bool(label_map(tmpl).get(QUEUE_LABEL))
    extra = {
        "count": notes.get(COUNT_ANNOTATION),
        "queue": label_map(tmpl).get(QUEUE_LABEL),
        "required": notes.get(REQUIRED_TOPOLOGY),
        "preferred": notes.get(PREFERRED_TOPOLOGY),
    }
    return Link(
        source="kueue",
        group=group,
        path=meta_key("labels", NAME_LABEL),
        # with a queue Kueue still admits the group (quota): its labels stay
        drop_labels=() if queued else (NAME_LABEL,),
        drop_annotations=() if queued else (COUNT_ANNOTATION,),
        extra=extra,
    )


def _count(slot: Slot) -> int:
    raw = slot.link.extra.get("count")
    path = slot.field(meta_key("annotations", COUNT_ANNOTATION))
    if raw is None:
        raise MigrationError(
            slot.doc.origin,
            path,
            f"half-linked: in Kueue pod group {slot.link.group!r} without the total-count "
            "annotation",
        )
    try:
        value = int(str(raw))
    except ValueError:
        raise MigrationError(slot.doc.origin, path, f"not an integer: {raw!r}") from None
    if not 1 <= value <= 2**31 - 1:
        raise MigrationError(slot.doc.origin, path, f"must be at least 1: {raw!r}")
    return value


def gangs(groups: list[Any], slots: list[Slot], tier_labels: Mapping[str, str]) -> list[Gang]:
    """One gang per Kueue pod group (all its pods must agree on the total count)."""
    del groups, tier_labels
    out: list[Gang] = []
    for (ns, name), members in slots_by_group(slots).items():
        first = members[0]
        count = _count(first)
        for slot in members[1:]:
            other = _count(slot)
            if other != count:
                raise MigrationError(
                    slot.doc.origin,
                    slot.field(meta_key("annotations", COUNT_ANNOTATION)),
                    f"conflicting quorums: Kueue pod group {ns}/{name} has total count "
                    f"{other} here and {count} in {first.doc.origin}",
                )
        gang = Gang(
            source="kueue",
            name=name,
            namespace=ns,
            origin=first.doc.origin,
            min_count=count,
            min_count_path=first.field(meta_key("annotations", COUNT_ANNOTATION)),
            slots=members,
        )
        gang.note(
            gang.min_count_path,
            "mapped",
            f"PodGroup {name} schedulingPolicy.gang.minCount {count} (Kueue admits the group "
            "when all its pods exist; v1.37 schedules it all-or-nothing)",
        )
        queue = first.link.extra.get("queue")
        if queue:
            gang.note(
                first.field(meta_key("labels", QUEUE_LABEL)),
                "mapped",
                f"kept with the pod-group label and count: Kueue still admits the group into "
                f"queue {queue!r} (quota); the PodGroup adds the scheduling gang",
            )
        required = {s.link.extra.get("required") for s in members} - {None}
        if len(required) > 1:
            raise MigrationError(
                first.doc.origin,
                first.field(meta_key("annotations", REQUIRED_TOPOLOGY)),
                f"conflicting topology requests in pod group {name!r}: "
                f"{sorted(str(r) for r in required)}",
            )
        if required:
            gang.topology_key = str(next(iter(required)))
            gang.note(
                first.field(meta_key("annotations", REQUIRED_TOPOLOGY)),
                "mapped",
                f"schedulingConstraints.topology[0].key = {gang.topology_key!r}",
            )
        if any(s.link.extra.get("preferred") for s in members):
            gang.note(
                first.field(meta_key("annotations", PREFERRED_TOPOLOGY)),
                "not-expressible",
                "a preferred topology domain: v1.37 topology constraints are required only",
            )
        out.append(gang)
    return out
