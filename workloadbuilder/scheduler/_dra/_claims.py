"""Which ResourceClaims a pod needs (its own, generated from templates, and its PodGroup's,
KEP-5729), who each is reserved for, and whether a claim concerns a queued entity."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from workloadbuilder.api import PodGroup
from workloadbuilder.scheduler._interface import Code, Status

if TYPE_CHECKING:
    from workloadbuilder.scheduler._cache import Cache, PodInfo

__all__ = [
    "NAME",
    "ClaimKey",
    "Consumer",
    "PodClaim",
    "consumer_dict",
    "consumer_key",
    "entity_uses_claim",
    "group_claims_changed",
    "pod_group",
    "resolve_pod_claims",
    "unresolvable",
    "unschedulable",
]

#: the plugin's name (its statuses carry it)
NAME = "DynamicResources"
#: namespace, name
ClaimKey = tuple[str, str]
#: a ``reservedFor`` entry as sorted items
Consumer = tuple[tuple[str, str], ...]
_GROUP_API = "scheduling.k8s.io"


@attrs.frozen(slots=True)
class PodClaim:
    """One claim a pod needs: the claim, the pod's entry naming it, the consumer to reserve
    it for (the pod, or its PodGroup for a group claim)."""

    key: ClaimKey
    entry: str
    consumer: Consumer
    group: bool


def consumer_dict(c: Consumer) -> dict[str, str]:
    """The ``reservedFor`` entry of a consumer."""
    return dict(c)


def consumer_key(ref: Mapping[str, Any]) -> tuple[str, str, str]:
    """A ``reservedFor`` entry's identity: resource, name, uid."""
    return (str(ref.get("resource") or ""), str(ref.get("name") or ""), str(ref.get("uid") or ""))


def unschedulable(message: str) -> Status:
    """An Unschedulable status of the plugin."""
    return Status(code=Code.UNSCHEDULABLE, message=message, plugin=NAME)


def unresolvable(message: str) -> Status:
    """An UnschedulableAndUnresolvable status of the plugin."""
    return Status(code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE, message=message, plugin=NAME)


def pod_group(cache: Cache | None, pod: PodInfo) -> PodGroup | None:
    """The pod's PodGroup, when known."""
    if cache is None or pod.group_key is None:
        return None
    g = cache.groups.get(pod.group_key)
    return g.pod_group if g is not None else None


def resolve_pod_claims(
    pod: PodInfo, pg: PodGroup | None, claims: Mapping[ClaimKey, Mapping[str, Any]]
) -> tuple[list[PodClaim] | Status, ClaimKey | None]:
    """The claims the pod (of the PodGroup ``pg``) needs, among the known ``claims``, or why
    it cannot be scheduled now; and the claim it names that does not exist (if that is why).
    A pod entry exactly equal to one of the PodGroup's ``spec.resourceClaims`` is the
    group's claim."""
    if pg is not None and pg.spec.parent_composite_pod_group_name:
        return unresolvable(
            "resource claims of pods in CompositePodGroup trees are not supported"
        ), None
    group_entries: dict[tuple[str, str, str], str] = {}
    group_status: dict[str, str | None] = {}
    if pg is not None:
        for c in pg.spec.resource_claims:
            group_entries[
                (c.name, c.resource_claim_name or "", c.resource_claim_template_name or "")
            ] = c.name
        if pg.status is not None:
            for s in pg.status.resource_claim_statuses:
                group_status[s.name] = s.resource_claim_name
    pod_status = dict(pod.claim_statuses)
    out: list[PodClaim] = []
    seen: set[ClaimKey] = set()
    for entry in pod.req.claims:
        name, direct, template = entry
        group = entry in group_entries
        if group:
            assert pg is not None
            claim_name = direct or group_status.get(name) or pod_status.get(name)
            if not claim_name:
                if template and name not in group_status and name not in pod_status:
                    return unschedulable(
                        "waiting for the resource claim controller to create the "
                        f"resourceclaim of PodGroup {pg.metadata.name!r} for claim {name!r}"
                    ), None
                continue  # recorded as not needed
            consumer: Consumer = (
                ("apiGroup", _GROUP_API),
                ("name", str(pg.metadata.name or "")),
                ("resource", "podgroups"),
                ("uid", str(pg.metadata.uid or "")),
            )
            owner_uid = str(pg.metadata.uid or "")
        else:
            claim_name = direct or pod_status.get(name)
            if not claim_name:
                if template and name not in pod_status:
                    return unschedulable(
                        "waiting for the resource claim controller to create the "
                        f"resourceclaim for pod claim {name!r}"
                    ), None
                continue
            consumer = (("name", pod.name), ("resource", "pods"), ("uid", pod.uid))
            owner_uid = pod.uid
        key = (pod.namespace, claim_name)
        obj = claims.get(key)
        if obj is None:
            return unresolvable(f'resourceclaim "{claim_name}" not found'), key
        meta = obj.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            return unresolvable(f'resourceclaim "{claim_name}" is being deleted'), None
        if template:
            owners = meta.get("ownerReferences") or ()
            if not any(o.get("uid") == owner_uid and o.get("controller") for o in owners):
                what = "the pod group" if group else "the pod"
                return unresolvable(
                    f'resourceclaim "{claim_name}" was not created for {what}'
                ), None
        if key in seen:
            continue
        seen.add(key)
        out.append(PodClaim(key=key, entry=name, consumer=consumer, group=group))
    return out, None


def entity_uses_claim(cache: Cache | None, ekey: tuple[str, str, str], ns: str, name: str) -> bool:
    """Whether the queued entity ``ekey`` (kind, namespace, name) uses the claim ``ns/name``
    (unknown without a cache, and for a CompositePodGroup: yes)."""
    kind, ens, ename = ekey
    if ens != ns:
        return False
    if cache is None or kind == "CompositePodGroup":
        return True
    if kind == "Pod":
        p = cache.pods.get((ens, ename))
        pods = [p] if p is not None else []
    else:
        g = cache.groups.get((ens, ename))
        if g is None:
            return False
        pg = g.pod_group
        if pg is not None:
            if any(c.resource_claim_name == name for c in pg.spec.resource_claims):
                return True
            if pg.status is not None and any(
                st.resource_claim_name == name for st in pg.status.resource_claim_statuses
            ):
                return True
        pods = list(cache.members(g))
    return any(
        any(c[1] == name for c in p.req.claims) or any(st[1] == name for st in p.claim_statuses)
        for p in pods
    )


def group_claims_changed(_: tuple[str, str, str], old: Any, new: Any) -> bool:
    """The queueing hint of a PodGroup update: its generated claims changed."""

    def claims(pg: Any) -> Any:
        if not isinstance(pg, PodGroup) or pg.status is None:
            return ()
        return pg.status.resource_claim_statuses

    return bool(claims(old) != claims(new))
