"""Apache YuniKorn gang scheduling: task groups declared in pod annotations.

Followed: apache/yunikorn-k8shim ``pkg/common/constants/constants.go`` (v1.6):
``yunikorn.apache.org/task-groups`` (a JSON list of ``{name, minMember, minResource,
nodeSelector, tolerations, affinity, topologySpreadConstraints, labels, annotations}``),
``yunikorn.apache.org/task-group-name`` and ``yunikorn.apache.org/schedulingPolicyParameters``
(``placeholderTimeoutInSeconds=N gangSchedulingStyle=Hard|Soft``, default style ``Soft``);
the application is named by the ``applicationId`` / ``yunikorn.apache.org/app-id`` label
or annotation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from workloadbuilder.migrate._common import annotation_map, label_map, meta_key, slots_by_group
from workloadbuilder.migrate._model import Gang, Link, Slot
from workloadbuilder.migrate._report import MigrationError

__all__ = ["gangs", "link"]

DOMAIN = "yunikorn.apache.org/"
TASK_GROUPS = DOMAIN + "task-groups"
TASK_GROUP_NAME = DOMAIN + "task-group-name"
POLICY = DOMAIN + "schedulingPolicyParameters"
APP_ID_KEYS = (DOMAIN + "app-id", "applicationId")
QUEUE_KEYS = (DOMAIN + "queue", "queue")
_TASK_GROUP_FIELDS = ("name", "minMember", "minResource")
_PLACEHOLDER_FIELDS = (
    "nodeSelector",
    "tolerations",
    "affinity",
    "topologySpreadConstraints",
    "labels",
    "annotations",
)


def link(tmpl: Mapping[str, Any], origin: str, where: str) -> Link | None:
    """The YuniKorn application (gang) a pod template joins, if it takes part in a gang."""
    notes = annotation_map(tmpl)
    if TASK_GROUP_NAME not in notes and TASK_GROUPS not in notes:
        return None
    marks = {**label_map(tmpl), **notes}
    app = next((marks[k] for k in APP_ID_KEYS if marks.get(k)), None)
    first = TASK_GROUP_NAME if TASK_GROUP_NAME in notes else TASK_GROUPS
    if app is None:
        raise MigrationError(
            origin,
            f"{where}{meta_key('annotations', first)}",
            "half-linked: a YuniKorn task-group pod without an application id "
            f"({' or '.join(APP_ID_KEYS)} label)",
        )
    queue = next(((k, marks[k]) for k in QUEUE_KEYS if marks.get(k)), None)
    return Link(
        source="yunikorn",
        group=app,
        path=meta_key("annotations", first),
        task=notes.get(TASK_GROUP_NAME),
        task_path=meta_key("annotations", TASK_GROUP_NAME),
        drop_annotations=(TASK_GROUPS, TASK_GROUP_NAME, POLICY),
        extra={"groups": notes.get(TASK_GROUPS), "policy": notes.get(POLICY), "queue": queue},
    )


def _task_groups(slot: Slot) -> list[Mapping[str, Any]]:
    raw = slot.link.extra.get("groups")
    path = slot.field(meta_key("annotations", TASK_GROUPS))
    try:
        value = json.loads(str(raw))
    except ValueError as e:
        raise MigrationError(slot.doc.origin, path, f"not valid JSON: {e}") from None
    if not isinstance(value, list) or not all(isinstance(g, Mapping) for g in value):
        raise MigrationError(slot.doc.origin, path, "expected a JSON list of task groups")
    return value


def _policy(gang: Gang, slot: Slot) -> None:
    raw = slot.link.extra.get("policy")
    path = slot.field(meta_key("annotations", POLICY))
    params: dict[str, str] = {}
    for part in str(raw or "").split():
        key, _, value = part.partition("=")
        params[key] = value
    style = params.pop("gangSchedulingStyle", "Soft")
    if style == "Hard":
        gang.note(
            f"{path} gangSchedulingStyle",
            "mapped",
            "Hard: a v1.37 gang is always all-or-nothing",
            origin=slot.doc.origin,
        )
    elif style == "Soft":
        gang.note(
            f"{path} gangSchedulingStyle",
            "approximated",
            (
                "Soft (the default)"
                if raw is None or "gangSchedulingStyle" not in str(raw)
                else "Soft"
            )
            + ": YuniKorn falls back to pod-by-pod scheduling after the placeholder timeout; "
            "a v1.37 gang never falls back (stricter: all-or-nothing until it fits)",
            origin=slot.doc.origin,
        )
    else:
        raise MigrationError(
            slot.doc.origin,
            path,
            f'gangSchedulingStyle: Unsupported value: {style!r}: "Hard", "Soft"',
        )
    timeout = params.pop("placeholderTimeoutInSeconds", None)
    if timeout is not None:
        gang.note(
            f"{path} placeholderTimeoutInSeconds",
            "not-expressible",
            f"{timeout}s: v1.37 has no placeholders and no scheduling timeout",
            origin=slot.doc.origin,
        )
    for key in params:
        gang.note(
            f"{path} {key}",
            "not-expressible",
            "unknown scheduling policy parameter; not carried over",
            origin=slot.doc.origin,
        )


def _gang(ns: str, app: str, members: list[Slot]) -> Gang:
    defining = [s for s in members if s.link.extra.get("groups") is not None]
    if not defining:
        slot = members[0]
        raise MigrationError(
            slot.doc.origin,
            slot.field(slot.link.path),
            f"half-linked: no pod of YuniKorn application {ns}/{app} declares {TASK_GROUPS}",
        )
    first = defining[0]
    groups = _task_groups(first)
    for slot in defining[1:]:
        if _task_groups(slot) != groups:
            raise MigrationError(
                slot.doc.origin,
                slot.field(meta_key("annotations", TASK_GROUPS)),
                f"conflicting quorums: application {app!r} declares other task groups in "
                f"{first.doc.origin}",
            )
    policies = {s.link.extra.get("policy") for s in defining}
    if len(policies) > 1:
        raise MigrationError(
            defining[1].doc.origin,
            defining[1].field(meta_key("annotations", POLICY)),
            f"conflicting scheduling policy parameters in application {app!r}",
        )
    base = first.field(meta_key("annotations", TASK_GROUPS))
    gang = Gang(
        source="yunikorn",
        name=app,
        namespace=ns,
        origin=first.doc.origin,
        min_count=None,
        min_count_path=base,
        tasks_path=base,
        slots=members,
    )
    tasks: dict[str, int] = {}
    for i, group in enumerate(groups):
        name = group.get("name")
        if not isinstance(name, str) or not name:
            raise MigrationError(first.doc.origin, f"{base}[{i}].name", "Required value")
        if name in tasks:
            raise MigrationError(
                first.doc.origin, f"{base}[{i}].name", f"Duplicate value: {name!r}"
            )
        minimum = group.get("minMember", 0)
        if isinstance(minimum, bool) or not isinstance(minimum, int) or minimum < 0:
            raise MigrationError(
                first.doc.origin, f"{base}[{i}].minMember", f"expected an integer >= 0: {minimum!r}"
            )
        tasks[name] = minimum
        if group.get("minResource"):
            gang.note(
                f"{base}[{i}].minResource",
                "not-expressible",
                "placeholders' resources: v1.37 derives a group's needs from its real pods",
            )
        for key in _PLACEHOLDER_FIELDS:
            if group.get(key):
                gang.note(
                    f"{base}[{i}].{key}",
                    "approximated",
                    "applied to YuniKorn's placeholder pods only; v1.37 has no placeholders: "
                    "the real pods' own specs apply",
                )
        for key in group:
            if key not in _TASK_GROUP_FIELDS and key not in _PLACEHOLDER_FIELDS:
                gang.note(f"{base}[{i}].{key}", "not-expressible", "unknown task-group field")
    if len(tasks) == 1:
        ((only, minimum),) = tasks.items()
        for slot in members:
            if slot.link.task not in (None, only):
                raise MigrationError(
                    slot.doc.origin,
                    slot.field(slot.link.task_path),
                    f"half-linked: task group {slot.link.task!r} is not declared by "
                    f"application {app!r} ({only})",
                )
        gang.min_count = minimum or None
        gang.note(
            f"{base}[0].minMember",
            "mapped",
            f"PodGroup {app} schedulingPolicy.gang.minCount {minimum}",
        )
    else:
        gang.tasks = tasks
        gang.note(
            base,
            "mapped",
            f"CompositePodGroup {app} (gang over all {len(tasks)} task groups) with one "
            "PodGroup per task group (gang minCount = its minMember)",
        )
    _policy(gang, first)
    queue = first.link.extra.get("queue")
    if queue:
        gang.note(
            first.field(meta_key("labels", queue[0])),
            "not-expressible",
            f"YuniKorn queue {queue[1]!r}: queues are not part of v1.37 workload-aware "
            "scheduling; use Kueue for quotas (label kept)",
        )
    return gang


def gangs(groups: list[Any], slots: list[Slot], tier_labels: Mapping[str, str]) -> list[Gang]:
    """One gang per YuniKorn application that declares task groups."""
    del groups, tier_labels
    return [_gang(ns, app, members) for (ns, app), members in slots_by_group(slots).items()]
