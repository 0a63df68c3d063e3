"""The DynamicResources plugin: the framework hooks (PreEnqueue, PreFilter, Filter, Reserve,
PreBind, Unreserve, the queueing hints) over the shared DRA manager, and the claim status
writes of PreBind and Unreserve."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from workloadbuilder.errors import ApiError, NotFound
from workloadbuilder.scheduler._dra._allocator import allocate_claims
from workloadbuilder.scheduler._dra._claims import (
    NAME,
    ClaimKey,
    PodClaim,
    consumer_dict,
    consumer_key,
    entity_uses_claim,
    group_claims_changed,
    unresolvable,
    unschedulable,
)
from workloadbuilder.scheduler._dra._manager import Assumed, DRAManager, Reservation
from workloadbuilder.scheduler._dra._nodeselector import node_selector_matches
from workloadbuilder.scheduler._dra._requests import ClaimSpec, Request
from workloadbuilder.scheduler._interface import (
    SUCCESS,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    Mask,
    Rows,
    SharedLister,
    Status,
)

if TYPE_CHECKING:
    from workloadbuilder.cluster import Cluster
    from workloadbuilder.scheduler._cache import PodInfo

__all__ = ["DELETE_PROTECTION_FINALIZER", "MAX_RESERVED_FOR", "DynamicResources"]

_log = logging.getLogger(__name__)

#: the finalizer the scheduler puts on a claim it allocates
DELETE_PROTECTION_FINALIZER = "resource.kubernetes.io/delete-protection"
#: ``status.reservedFor`` holds at most this many consumers
MAX_RESERVED_FOR = 256
_CANNOT = "cannot allocate all claims"
_NOT_ON_NODE = "resourceclaim not available on the node"


class DynamicResources:
    """The DynamicResources plugin (PreFilter, Filter, Reserve, PreBind, Unreserve).

    Its state is the DRA manager the framework hands it (:meth:`use_shared_dra_manager`);
    until then, a manager of its own (without informers)."""

    name = NAME

    def __init__(self, manager: DRAManager | None = None) -> None:
        self._manager = manager or DRAManager()
        #: pod -> the claims whose assumed status its PreBind writes
        self._pending: dict[tuple[str, str], list[ClaimKey]] = {}
        self._locks: dict[ClaimKey, asyncio.Lock] = {}

    def use_shared_dra_manager(self, manager: DRAManager) -> None:
        """Use the scheduler's DRA manager (upstream: ``Handle.SharedDRAManager()``)."""
        self._manager = manager

    @property
    def manager(self) -> DRAManager:
        """The DRA manager the plugin reads."""
        return self._manager

    @property
    def assumed(self) -> dict[ClaimKey, Assumed]:
        """Claim statuses decided here and not yet seen from the informer."""
        return self._manager.assumed

    # ---- queueing --------------------------------------------------------------------

    #: nothing to check for a pod without resource claims
    pod_scoped = True

    def applies(self, pod: PodInfo) -> bool:
        """Pods with ``spec.resourceClaims``."""
        return bool(pod.req.claims)

    def pre_enqueue_pod(self, pod: PodInfo, lister: SharedLister) -> Status:
        """Hold the pod (silently, as upstream's PreEnqueue) while a claim it names does not
        exist yet or its template claim has not been generated."""
        claims, missing = self._manager.pod_claims(pod)
        if isinstance(claims, Status) and claims.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
            if missing is not None:
                self._manager.hold(missing, pod.key)
                return claims
            return SUCCESS  # not a missing claim: PreFilter reports it
        if isinstance(claims, Status):
            return claims
        return SUCCESS

    def _claim_hint(self, ekey: tuple[str, str, str], old: Any, new: Any) -> bool:
        """A claim change matters to an entity that uses the claim, and to everyone when
        devices were given back (deallocated, or deleted while allocated)."""
        if not isinstance(new, (dict, type(None))) or (old is None and new is None):
            return True  # a relist
        was = isinstance(old, dict) and bool((old.get("status") or {}).get("allocation"))
        now = isinstance(new, dict) and bool((new.get("status") or {}).get("allocation"))
        if was and not now:
            return True
        obj = new if isinstance(new, dict) else old
        m = obj.get("metadata") or {}
        return entity_uses_claim(
            self._manager.cache, ekey, str(m.get("namespace") or ""), str(m.get("name"))
        )

    def events_to_register(self) -> list[ClusterEventWithHint]:
        """Claims, slices and classes added or changed; DeviceTaintRules added, changed or
        deleted; a pod's claim generated; a PodGroup's claim generated."""
        return [
            ClusterEventWithHint(
                ClusterEvent(
                    "ResourceClaim", ActionType.ADD | ActionType.UPDATE_OBJECT | ActionType.DELETE
                ),
                self._claim_hint,
            ),
            ClusterEventWithHint(
                ClusterEvent("ResourceSlice", ActionType.ADD | ActionType.UPDATE_OBJECT)
            ),
            ClusterEventWithHint(
                ClusterEvent("DeviceClass", ActionType.ADD | ActionType.UPDATE_OBJECT)
            ),
            ClusterEventWithHint(  # a taint changed or went: devices may be usable again
                ClusterEvent(
                    "DeviceTaintRule",
                    ActionType.ADD | ActionType.UPDATE_OBJECT | ActionType.DELETE,
                )
            ),
            ClusterEventWithHint(
                ClusterEvent("Pod", ActionType.UPDATE_POD_GENERATED_RESOURCE_CLAIM)
            ),
            ClusterEventWithHint(
                ClusterEvent("PodGroup", ActionType.UPDATE_POD_GROUP), group_claims_changed
            ),
        ]

    # ---- the cycle -------------------------------------------------------------------

    def pre_filter_pod(self, pod: PodInfo, lister: SharedLister) -> Status:
        """Every claim exists (or is being created), is usable by the pod, and asks only for
        what this plugin implements."""
        m = self._manager
        m.refresh_index()
        claims, _ = m.pod_claims(pod)
        if isinstance(claims, Status):
            return claims
        for c in claims:
            st = m.status(c.key)
            reserved = st.get("reservedFor") or ()
            mine = consumer_key(consumer_dict(c.consumer))
            if len(reserved) >= MAX_RESERVED_FOR and all(consumer_key(r) != mine for r in reserved):
                return unschedulable(f'resourceclaim "{c.key[1]}" is in use by too many')
            if not st.get("allocation"):
                spec = m.spec(c)
                if isinstance(spec, str):
                    return unresolvable(spec)
        return SUCCESS

    def feasible_rows(self, pod: PodInfo, lister: SharedLister) -> Mask | None:
        """A necessary condition per node row (vectorised): enough free matching devices
        for every request of the pod's unallocated claims. None: no opinion."""
        m = self._manager
        m.refresh_index()
        m.sync_freed(lister)
        claims, _ = m.pod_claims(pod)
        if isinstance(claims, Status):
            return None
        need: dict[Request, int] = {}
        either: list[tuple[Request, ...]] = []
        for c in claims:
            if m.status(c.key).get("allocation"):
                continue
            spec = m.spec(c)
            if isinstance(spec, str):
                return None
            for alts in spec.choices:
                if len(alts) > 1:
                    either.append(alts)
                elif not alts[0].all:
                    need[alts[0]] = need.get(alts[0], 0) + alts[0].count
        mask: Mask | None = None
        for r, n in need.items():
            ok = m.free_counts(lister, r) >= n
            mask = ok if mask is None else mask & ok
        for alts in either:  # one of the alternatives, on its own
            one: Mask | None = None
            for r in alts:
                if r.all:
                    one = None
                    break
                ok = m.free_counts(lister, r) >= r.count
                one = ok if one is None else one | ok
            if one is not None:
                mask = one if mask is None else mask & one
        return mask

    def shape_key(self, pod: PodInfo, lister: SharedLister) -> Any:
        """Pods whose claims are all their own, unallocated and of equal spec share
        verdicts (the cycle stops trying a node such a pod did not fit on)."""
        m = self._manager
        claims, _ = m.pod_claims(pod)
        if isinstance(claims, Status):
            return None
        key: list[Any] = []
        for c in claims:
            if c.group or m.status(c.key).get("allocation"):
                return None
            spec = m.spec(c)
            if isinstance(spec, str):
                return None
            key.append(spec)
        return (pod.req, tuple(key))

    def _try(self, pod: PodInfo, lister: SharedLister, row: int) -> list[Reservation] | str:
        m = self._manager
        m.refresh_index()
        m.sync_freed(lister)
        claims, _ = m.pod_claims(pod)
        if isinstance(claims, Status):
            return claims.message
        table = lister.table
        name = table.names[row] or ""
        labels = table.labels[row]
        plan: list[Reservation] = []
        todo: list[tuple[PodClaim, ClaimSpec, list[dict[str, Any]]]] = []
        for c in claims:
            st = m.status(c.key)
            alloc = st.get("allocation")
            reserved = list(st.get("reservedFor") or ())
            me = consumer_dict(c.consumer)
            present = any(consumer_key(r) == consumer_key(me) for r in reserved)
            if alloc:
                if not node_selector_matches(alloc.get("nodeSelector"), name, labels):
                    return f'{_NOT_ON_NODE}: resourceclaim "{c.key[1]}" is allocated elsewhere'
                if not present:
                    status = {"allocation": alloc, "reservedFor": [*reserved, me]}
                    plan.append(Reservation(pod.key, c.key, status, (), False))
                continue
            spec = m.spec(c)
            if isinstance(spec, str):
                return spec
            todo.append((c, spec, [*reserved, me]))
        if todo:  # the claims to allocate, searched together
            got = allocate_claims([t[1] for t in todo], m.node(lister, row), name)
            if isinstance(got, tuple):
                c = todo[got[0]][0]
                return f'cannot allocate claim "{c.entry}" ({c.key[1]}): {got[1]}'
            for (c, _, consumers), a in zip(todo, got, strict=True):
                status = {"allocation": a.allocation, "reservedFor": consumers}
                plan.append(Reservation(pod.key, c.key, status, a.devices, True))
        return plan

    def filter_pod(self, pod: PodInfo, lister: SharedLister, row: int) -> Any:
        """The reservations for ``pod`` on ``row``, or None."""
        got = self._try(pod, lister, row)
        return None if isinstance(got, str) else got

    def reserve_pod(self, pod: PodInfo, lister: SharedLister, row: int, plan: Any) -> None:
        """Apply the plan tentatively on the snapshot (undone when it is reverted)."""
        record = getattr(lister, "record", None)
        for r in plan:
            assert isinstance(r, Reservation)
            undo = self._manager.reserve(r)
            if callable(record):
                record(r, undo)

    def diagnose_pod(
        self, pod: PodInfo, lister: SharedLister, rows: Rows
    ) -> list[tuple[str, str, int]]:
        """Per reason, the nodes of ``rows`` where the pod's claims cannot be served."""
        counts: dict[tuple[str, str], int] = {}
        for row in rows:
            got = self._try(pod, lister, int(row))
            if isinstance(got, str):
                short = _NOT_ON_NODE if got.startswith(_NOT_ON_NODE) else _CANNOT
                counts[(short, got)] = counts.get((short, got), 0) + 1
        return [(s, long_, n) for (s, long_), n in counts.items()]

    def explain_group(
        self, pods: Sequence[PodInfo], placed: set[tuple[str, str]], lister: SharedLister
    ) -> list[str]:
        """Per device class the gang's pods ask for: ``gpu class: 12 of 16 pods can get a
        device``, then for each selector of that class's requests that no device matches on
        some nodes: ``no device matches `<selector>` on 28 of 32 nodes``. ``placed`` holds
        the pods that got a node (and so their devices) in the attempt."""
        m = self._manager
        m.refresh_index()
        total: dict[str, int] = {}
        got: dict[str, int] = {}
        single: dict[str, bool] = {}
        exprs: dict[str, list[str]] = {}
        for pod in pods:
            claims, _ = m.pod_claims(pod)
            if isinstance(claims, Status):
                continue
            classes: set[str] = set()
            for c in claims:
                if m.status(c.key).get("allocation"):
                    continue  # allocated before this cycle: no device to get
                spec = m.spec(c)
                if isinstance(spec, str):
                    continue
                for r in spec.requests:
                    classes.add(r.device_class)
                    single[r.device_class] = single.get(r.device_class, True) and (
                        not r.all and r.count == 1
                    )
                    seen = exprs.setdefault(r.device_class, [])
                    seen.extend(e for e in r.expressions if e not in seen)
            for cls in classes:
                total[cls] = total.get(cls, 0) + 1
                got[cls] = got.get(cls, 0) + (pod.key in placed)
        table = lister.table
        rows = [int(r) for r in table.present_rows()]
        parts: list[str] = []
        for cls in sorted(total):
            what = "a device" if single[cls] else "their devices"
            line = f"{cls} class: {got[cls]} of {total[cls]} pods can get {what}"
            for e in exprs[cls]:
                missing = sum(
                    1
                    for row in rows
                    if not any(
                        not d.unusable and m.cel.verdict(e, d) is True
                        for d in m.row_devices(lister, row)
                    )
                )
                if missing:
                    line += f"; no device matches `{e}` on {missing} of {len(rows)} nodes"
            parts.append(line)
        return parts

    def commit(self, reservations: Sequence[Any]) -> None:
        """Keep the cycle's reservations as assumed claim statuses until PreBind writes
        them and the informer shows them."""
        for r in reservations:
            if not isinstance(r, Reservation):
                continue
            self._manager.assume(r)
            self._pending.setdefault(r.pod, []).append(r.claim)

    # ---- binding: the status writes --------------------------------------------------

    async def pre_bind(self, cluster: Cluster, pod: PodInfo, node: str) -> Status:
        """Write the allocation and reservation of each of the pod's claims (once per
        claim: a group claim is written by the first of its pods)."""
        m = self._manager
        for key in list(self._pending.get(pod.key, ())):
            lock = self._locks.setdefault(key, asyncio.Lock())
            async with lock:
                a = m.assumed.get(key)
                if a is None or a.written:
                    continue
                try:
                    await self._write(cluster, key, a)
                except ApiError as e:
                    m.drop(key)
                    return Status(
                        code=Code.ERROR,
                        message=f'writing resourceclaim "{key[1]}" failed: {e}',
                        plugin=self.name,
                    )
                a.written = True
                obj = m.claims.get(key)
                if obj is not None and m.covers(obj.get("status") or {}, a.status):
                    m.assumed.pop(key, None)
                    m.recount(key)
        self._pending.pop(pod.key, None)
        return SUCCESS

    async def _write(self, cluster: Cluster, key: ClaimKey, a: Assumed) -> None:
        ns, name = key
        obj = self._manager.claims.get(key) or {}
        finalizers = list((obj.get("metadata") or {}).get("finalizers") or ())
        if a.status.get("allocation") and DELETE_PROTECTION_FINALIZER not in finalizers:
            await cluster.patch(
                "ResourceClaim",
                name,
                {"metadata": {"finalizers": [*finalizers, DELETE_PROTECTION_FINALIZER]}},
                ns,
            )
        await cluster.patch(
            "ResourceClaim",
            name,
            {
                "status": {
                    "allocation": a.status.get("allocation"),
                    "reservedFor": a.status.get("reservedFor") or [],
                }
            },
            ns,
            subresource="status",
        )

    async def unreserve(self, cluster: Cluster, pod: PodInfo) -> None:
        """The pod's bind failed: take it out of ``reservedFor`` of its own claims (and
        deallocate a claim this scheduler allocated and nobody else uses). A group claim
        stays reserved for the group."""
        m = self._manager
        keys = self._pending.pop(pod.key, [])
        me = ("pods", pod.name, pod.uid)
        for key, obj in list(m.claims.items()):
            if key[0] != pod.namespace:
                continue
            a = m.assumed.get(key)
            st = a.status if a is not None else (obj.get("status") or {})
            reserved = list(st.get("reservedFor") or ())
            if all(consumer_key(r) != me for r in reserved) and key not in keys:
                continue
            rest = [r for r in reserved if consumer_key(r) != me]
            written = a is None or a.written
            allocated_here = a is not None and a.allocated_here
            if not written:
                m.drop(key)
                continue
            status: dict[str, Any] = {"reservedFor": rest or None}
            if not rest and (allocated_here or a is None):
                status["allocation"] = None
            try:
                await cluster.patch(
                    "ResourceClaim", key[1], {"status": status}, key[0], subresource="status"
                )
            except NotFound:
                pass
            except ApiError as e:
                _log.warning("releasing resourceclaim %s/%s failed: %s", *key, e)
            m.drop(key)
