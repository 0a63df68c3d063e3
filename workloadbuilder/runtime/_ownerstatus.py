"""The events and the owner condition a :class:`~workloadbuilder.runtime.Reconciler` records
on an owner: ``GangScheduled`` / ``GangUnschedulable`` from each PodGroup's
``PodGroupInitiallyScheduled`` condition, ``GangPreempted`` from its pods' ``DisruptionTarget``,
``FailedWorkloadCompilation`` once per distinct message, and, for an
:class:`~workloadbuilder.kinds.OwnerConditions` integration, the owner's ``GangScheduled``
condition."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from workloadbuilder.api import PodGroup
from workloadbuilder.builder import Plan
from workloadbuilder.cluster import Cluster, KubeObject, ResourceInfo
from workloadbuilder.errors import ApiError, NotFound
from workloadbuilder.runtime._clock import Clock
from workloadbuilder.runtime._owned import (
    CONDITION_GANG_SCHEDULED,
    CONDITION_INITIALLY_SCHEDULED,
    EVENT_FAILED_COMPILATION,
    EVENT_GANG_PREEMPTED,
    EVENT_GANG_SCHEDULED,
    EVENT_GANG_UNSCHEDULABLE,
    ObjKey,
    Outcome,
    meta_of,
)

__all__ = ["OwnerStatusRecorder"]

_log = logging.getLogger(__name__)


class OwnerStatusRecorder:
    """The status and event part of the Reconciler (its base class; the attributes below
    are set by ``Reconciler.__init__``)."""

    cluster: Cluster
    resource: ResourceInfo
    component: str
    clock: Clock
    conditions: bool
    owners: dict[str, dict[str, Any]]
    objects: dict[ObjKey, KubeObject]
    disrupted: dict[str, dict[str, str]]
    _reported: dict[tuple[str, str], tuple[str, str, str]]
    _reported_preempted: dict[tuple[str, str], frozenset[str]]
    _compile_errors: dict[str, str]

    # ---- status and events -------------------------------------------------------------

    def _forget_status(self, key: str) -> None:
        self._compile_errors.pop(key, None)
        for d in (self._reported, self._reported_preempted):
            for k in [k for k in d if k[0] == key]:
                d.pop(k, None)

    async def _event(
        self,
        owner: Mapping[str, Any],
        reason: str,
        message: str,
        type_: Literal["Normal", "Warning"],
        out: Outcome,
    ) -> None:
        meta = meta_of(dict(owner))
        name, ns, uid = meta.name, meta.namespace, meta.uid
        involved = {
            "apiVersion": owner.get("apiVersion") or self.resource.api_version,
            "kind": owner.get("kind") or self.resource.kind,
            "name": name,
            "namespace": ns,
            "uid": uid,
        }
        try:
            await self.cluster.create_event(
                namespace=ns,
                involved_object=involved,
                reason=reason,
                message=message,
                type=type_,
                reporting_component=self.component,
            )
        except (ApiError, OSError) as e:  # events are best effort
            _log.info("event %s on %s/%s not recorded: %s", reason, ns, name, e)
            return
        out.events.append(reason)

    async def _compile_failed(
        self, key: str, owner: Mapping[str, Any], message: str, out: Outcome
    ) -> None:
        if self._compile_errors.get(key) == message:
            return
        self._compile_errors[key] = message
        await self._event(owner, EVENT_FAILED_COMPILATION, message, "Warning", out)

    async def _mirror_status(self, owner: Mapping[str, Any], plan: Plan, out: Outcome) -> None:
        meta = meta_of(dict(owner))
        name, ns = meta.name, meta.namespace
        key = f"{ns}/{name}"
        for pg in plan.pod_groups:
            pg_name = pg.metadata.name or ""
            live = self.objects.get(("PodGroup", ns, pg_name))
            if isinstance(live, PodGroup) and live.status is not None:
                cond = next(
                    (c for c in live.status.conditions if c.type == CONDITION_INITIALLY_SCHEDULED),
                    None,
                )
                if cond is not None:
                    state = (cond.status, cond.reason or "", cond.message or "")
                    if self._reported.get((key, pg_name)) != state:
                        self._reported[(key, pg_name)] = state
                        if cond.status == "True":
                            await self._event(
                                owner,
                                EVENT_GANG_SCHEDULED,
                                f"PodGroup {pg_name} scheduled"
                                + (f": {cond.message}" if cond.message else ""),
                                "Normal",
                                out,
                            )
                        elif cond.status == "False":
                            await self._event(
                                owner,
                                EVENT_GANG_UNSCHEDULABLE,
                                f"PodGroup {pg_name} is unschedulable ({cond.reason}): "
                                f"{cond.message or ''}",
                                "Warning",
                                out,
                            )
            pods = self.disrupted.get(f"{ns}/{pg_name}") or {}
            seen = self._reported_preempted.get((key, pg_name), frozenset())
            new = frozenset(pods) - seen
            if new:
                self._reported_preempted[(key, pg_name)] = seen | new
                detail = sorted({pods[u] for u in new if pods[u]})
                await self._event(
                    owner,
                    EVENT_GANG_PREEMPTED,
                    f"PodGroup {pg_name}: {len(new)} pod(s) preempted"
                    + (f": {'; '.join(detail)}" if detail else ""),
                    "Warning",
                    out,
                )
        if self.conditions:
            await self._owner_condition(owner, plan)

    def _owner_condition_value(self, owner: Mapping[str, Any], plan: Plan) -> dict[str, str]:
        ns = meta_of(dict(owner)).namespace
        states = []
        for pg in plan.pod_groups:
            live = self.objects.get(("PodGroup", ns, pg.metadata.name or ""))
            cond = None
            if isinstance(live, PodGroup) and live.status is not None:
                cond = next(
                    (c for c in live.status.conditions if c.type == CONDITION_INITIALLY_SCHEDULED),
                    None,
                )
            states.append((pg.metadata.name or "", cond))
        failed = [(n, c) for n, c in states if c is not None and c.status == "False"]
        if failed:
            n, c = failed[0]
            return {
                "status": "False",
                "reason": c.reason or "Unschedulable",
                "message": f"PodGroup {n}: {c.message or ''}",
            }
        if states and all(c is not None and c.status == "True" for _, c in states):
            return {"status": "True", "reason": "Scheduled", "message": "all gangs scheduled"}
        return {"status": "Unknown", "reason": "Pending", "message": "waiting for the scheduler"}

    async def _owner_condition(self, owner: Mapping[str, Any], plan: Plan) -> None:
        meta = meta_of(dict(owner))
        name, ns = meta.name, meta.namespace
        want = self._owner_condition_value(owner, plan)
        conds = [
            c for c in (owner.get("status") or {}).get("conditions") or [] if isinstance(c, dict)
        ]
        current = next((c for c in conds if c.get("type") == CONDITION_GANG_SCHEDULED), None)
        if current is not None and all(current.get(k) == v for k, v in want.items()):
            return
        ltt = (
            current.get("lastTransitionTime")
            if current is not None and current.get("status") == want["status"]
            else None
        ) or datetime.fromtimestamp(self.clock.now(), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        cond = {"type": CONDITION_GANG_SCHEDULED, **want, "lastTransitionTime": ltt}
        generation = (owner.get("metadata") or {}).get("generation")
        if isinstance(generation, int):
            cond["observedGeneration"] = generation
        others = [c for c in conds if c.get("type") != CONDITION_GANG_SCHEDULED]
        rv = (owner.get("metadata") or {}).get("resourceVersion")
        try:
            updated = await self.cluster.patch(
                self.resource,
                name,
                {"metadata": {"resourceVersion": rv}, "status": {"conditions": [*others, cond]}},
                ns,
                patch_type="merge",
                subresource="status",
                field_manager=self.component,
            )
        except NotFound:
            return
        if isinstance(updated, dict):
            self.owners[f"{ns}/{name}"] = updated
