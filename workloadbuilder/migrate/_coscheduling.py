"""scheduler-plugins coscheduling ``scheduling.x-k8s.io/v1alpha1`` PodGroups and their pods.

Followed: kubernetes-sigs/scheduler-plugins ``apis/scheduling/v1alpha1/types.go``
(PodGroupSpec: ``minMember``, ``minResources``, ``scheduleTimeoutSeconds``; the pod label
``scheduling.x-k8s.io/pod-group``, ``PodGroupLabel``), release v0.31 and later.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workloadbuilder.migrate._common import (
    check_int,
    group_docs,
    label_map,
    meta_key,
    report_unknown,
    slots_by_group,
)
from workloadbuilder.migrate._emit import owner_of
from workloadbuilder.migrate._model import Doc, Gang, Link, Slot
from workloadbuilder.migrate._report import MigrationError

__all__ = ["API_GROUP", "VERSIONS", "gangs", "link"]

API_GROUP = "scheduling.x-k8s.io"
VERSIONS = ("v1alpha1",)
LABEL = "scheduling.x-k8s.io/pod-group"


def link(tmpl: Mapping[str, Any], origin: str, where: str) -> Link | None:
    """The coscheduling PodGroup a pod template joins (its pod-group label), if any."""
    group = label_map(tmpl).get(LABEL)
    if not group:
        return None
    return Link(
        source="coscheduling",
        group=group,
        path=meta_key("labels", LABEL),
        drop_labels=(LABEL,),
    )


def _gang(doc: Doc) -> Gang:
    spec = doc.obj.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise MigrationError(doc.origin, "spec", "expected an object")
    minimum = check_int(doc, "spec.minMember", spec.get("minMember", 0))
    gang = Gang(
        source="coscheduling",
        name=doc.name,
        namespace=doc.namespace,
        origin=doc.origin,
        min_count=minimum or None,
        min_count_path="spec.minMember",
        owner_ref=owner_of(doc.obj),
    )
    gang.note(
        "spec.minMember",
        "mapped",
        f"PodGroup {doc.name} schedulingPolicy.gang.minCount {minimum}"
        if minimum
        else f"PodGroup {doc.name} schedulingPolicy.basic (minMember 0: no gang)",
    )
    if spec.get("minResources"):
        gang.note(
            "spec.minResources",
            "not-expressible",
            "v1.37 derives what a group needs from its pods' requests; there is no "
            "minimum-resources field",
        )
    timeout = spec.get("scheduleTimeoutSeconds")
    if timeout is not None:
        gang.note(
            "spec.scheduleTimeoutSeconds",
            "not-expressible",
            f"{timeout}s: the v1.37 API has no scheduling timeout; a gang waits until its "
            "quorum fits (or is deleted by its controller)",
        )
    report_unknown(gang, spec, ("minMember", "minResources", "scheduleTimeoutSeconds"), "spec")
    return gang


def gangs(groups: list[Doc], slots: list[Slot], tier_labels: Mapping[str, str]) -> list[Gang]:
    """One gang per coscheduling PodGroup, with the pod templates that join it."""
    del tier_labels
    by_key = group_docs(groups, "coscheduling PodGroup")
    members = slots_by_group(slots)
    out: list[Gang] = []
    for key, doc in by_key.items():
        gang = _gang(doc)
        gang.slots = members.pop(key, [])
        doc.consumed = True
        out.append(gang)
    for (ns, name), orphans in members.items():
        slot = orphans[0]
        raise MigrationError(
            slot.doc.origin,
            slot.field(slot.link.path),
            f"half-linked: joins coscheduling PodGroup {ns}/{name}, which is not in the input",
        )
    return out
