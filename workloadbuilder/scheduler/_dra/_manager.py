"""The DRA manager (upstream's ``SharedDRAManager``): the state the informers deliver
(DeviceClasses, ResourceSlices, ResourceClaims), the claims this scheduler assumed until the
informer shows them, the devices in use, and the caches the allocator reads per node row
(devices reachable, devices matching a selector, free matching devices).

The scheduler owns one manager and feeds it (``on_device_class``, ``on_resource_slice``,
``on_resource_claim``, with ``previous_claim`` and ``woken_by_claim`` for the queue); the
framework hands it to the plugins that use it (``DynamicResources``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import numpy.typing as npt

from workloadbuilder.scheduler._dra._allocator import NodeDevices, consumed
from workloadbuilder.scheduler._dra._cel import Cel
from workloadbuilder.scheduler._dra._claims import (
    ClaimKey,
    PodClaim,
    consumer_key,
    pod_group,
    resolve_pod_claims,
)
from workloadbuilder.scheduler._dra._devices import (
    CounterKey,
    Device,
    DeviceId,
    DeviceIndex,
    index_slices,
)
from workloadbuilder.scheduler._dra._requests import ClaimSpec, Request, parse_claim_spec
from workloadbuilder.scheduler._interface import SharedLister, Status

if TYPE_CHECKING:
    from workloadbuilder.scheduler._cache import Cache, PodInfo

__all__ = ["Assumed", "DRAManager", "Reservation"]


@attrs.define(slots=True, eq=False)
class Reservation:
    """One claim's tentative status for one pod of a cycle (what PreBind will write)."""

    pod: tuple[str, str]
    claim: ClaimKey
    status: dict[str, Any]
    devices: tuple[DeviceId, ...]
    allocated: bool


@attrs.define(slots=True, eq=False)
class Assumed:
    """A claim status this scheduler decided, kept until the informer shows it."""

    status: dict[str, Any]
    devices: tuple[DeviceId, ...]
    allocated_here: bool
    written: bool = False


class _RowDevices:
    """The manager's view of one node row for the allocator (its caches)."""

    __slots__ = ("_lister", "_m", "_row")

    def __init__(self, m: DRAManager, lister: SharedLister, row: int) -> None:
        self._m = m
        self._lister = lister
        self._row = row

    def reachable(self) -> Sequence[Device]:
        return self._m.row_devices(self._lister, self._row)

    def matching(self, expressions: tuple[str, ...]) -> Sequence[Device]:
        return self._m.match(self._lister, expressions, self._row)

    def in_use(self, device: DeviceId) -> bool:
        return self._m.in_use(device)

    def selects(self, expression: str, device: Device) -> bool:
        return self._m.cel.verdict(expression, device) is True

    def counters_used(self, pool: tuple[str, str]) -> Mapping[CounterKey, float]:
        return self._m.counters_used(pool)


class DRAManager:
    """DRA state shared by the scheduler's informers and the plugins."""

    def __init__(self, cache: Cache | None = None) -> None:
        #: the scheduler's cache (pods, groups, nodes)
        self.cache: Cache | None = cache
        self.classes: dict[str, dict[str, Any]] = {}
        self.slices: dict[str, dict[str, Any]] = {}
        #: DeviceTaintRules by name
        self.taint_rules: dict[str, dict[str, Any]] = {}
        self.claims: dict[ClaimKey, dict[str, Any]] = {}
        self.assumed: dict[ClaimKey, Assumed] = {}
        self.cel = Cel()
        self._tent: dict[ClaimKey, dict[str, Any]] = {}
        self._tent_use: set[DeviceId] = set()
        self._in_use: dict[DeviceId, int] = {}
        self._claim_devices: dict[ClaimKey, tuple[DeviceId, ...]] = {}
        #: claim -> pods held by PreEnqueue until it exists
        self._waiting: dict[ClaimKey, set[tuple[str, str]]] = {}
        # consumers (reservedFor uids) per claim and back; devices freed by removed victims
        self._consumers: dict[ClaimKey, tuple[str, ...]] = {}
        self._by_consumer: dict[str, set[ClaimKey]] = {}
        self._freed: set[DeviceId] = set()
        self._freed_version: tuple[int, int] | None = None
        #: (selector expressions, admin access) -> free matching devices per node row
        self._counts: dict[tuple[tuple[str, ...], bool], npt.NDArray[np.int64]] = {}
        self._dirty_rows: set[int] = set()
        self._all_dirty = True
        self._counts_capacity = -1
        # device index (rebuilt when slices change)
        self._dirty = True
        self._index = DeviceIndex()
        self._row_cache: dict[int, list[Device]] = {}
        self._row_epoch = -1
        self._cands: dict[tuple[tuple[str, ...], int], list[Device]] = {}
        self._specs: dict[tuple[ClaimKey, str], ClaimSpec | str] = {}
        #: (driver, pool) -> its devices that consume counters
        self._consumers_of: dict[tuple[str, str], list[Device]] = {}

    def bind_cache(self, cache: Cache) -> None:
        """The scheduler's cache (pods, groups, nodes)."""
        self.cache = cache

    # ---- informers -------------------------------------------------------------------

    def on_device_class(self, kind: str, obj: Any) -> None:
        """DeviceClass events."""
        if kind == "SYNC":
            self.classes = {str(o["metadata"]["name"]): o for o in obj if isinstance(o, dict)}
        elif kind == "DELETED":
            self.classes.pop(str(obj["metadata"]["name"]), None)
        else:
            self.classes[str(obj["metadata"]["name"])] = obj
        self._cands.clear()
        self._specs.clear()

    def on_resource_slice(self, kind: str, obj: Any) -> None:
        """ResourceSlice events."""
        if kind == "SYNC":
            self.slices = {str(o["metadata"]["name"]): o for o in obj if isinstance(o, dict)}
        elif kind == "DELETED":
            self.slices.pop(str(obj["metadata"]["name"]), None)
        else:
            self.slices[str(obj["metadata"]["name"])] = obj
        self._dirty = True

    def on_device_taint_rule(self, kind: str, obj: Any) -> None:
        """DeviceTaintRule events: their taints go onto the devices they select."""
        if kind == "SYNC":
            self.taint_rules = {str(o["metadata"]["name"]): o for o in obj if isinstance(o, dict)}
        elif kind == "DELETED":
            self.taint_rules.pop(str(obj["metadata"]["name"]), None)
        else:
            self.taint_rules[str(obj["metadata"]["name"])] = obj
        self._dirty = True

    def on_resource_claim(self, kind: str, obj: Any) -> None:
        """ResourceClaim events: allocations seen on the server replace ours once they
        include what we assumed."""
        if kind == "SYNC":
            for key in list(self.claims):
                self._set_claim(key, None)
            for o in obj:
                if isinstance(o, dict):
                    m = o.get("metadata") or {}
                    self._set_claim((str(m.get("namespace") or ""), str(m.get("name"))), o)
            return
        m = obj.get("metadata") or {}
        key = (str(m.get("namespace") or ""), str(m.get("name")))
        self._set_claim(key, None if kind == "DELETED" else obj)

    def previous_claim(self, kind: str, obj: Any) -> Any:
        """The version of a claim known before this event (for the queueing hint)."""
        if kind == "SYNC" or not isinstance(obj, dict):
            return None
        m = obj.get("metadata") or {}
        return self.claims.get((str(m.get("namespace") or ""), str(m.get("name"))))

    def hold(self, claim: ClaimKey, pod: tuple[str, str]) -> None:
        """PreEnqueue holds ``pod`` until ``claim`` exists (see :meth:`woken_by_claim`)."""
        self._waiting.setdefault(claim, set()).add(pod)

    def woken_by_claim(self, kind: str, obj: Any) -> list[tuple[str, str]]:
        """Pods held by PreEnqueue for a claim that now exists."""
        if kind == "SYNC":
            keys = [k for k in self._waiting if k in self.claims]
        elif kind == "ADDED":
            m = obj.get("metadata") or {}
            keys = [(str(m.get("namespace") or ""), str(m.get("name")))]
        else:
            return []
        out: list[tuple[str, str]] = []
        for k in keys:
            out.extend(sorted(self._waiting.pop(k, ())))
        return out

    def _set_claim(self, key: ClaimKey, obj: dict[str, Any] | None) -> None:
        old = self.claims.get(key)
        if obj is None:
            self.claims.pop(key, None)
            self.assumed.pop(key, None)
        else:
            if old is not None and (old.get("metadata") or {}).get("uid") != (
                obj.get("metadata") or {}
            ).get("uid"):
                self.assumed.pop(key, None)
            self.claims[key] = obj
            a = self.assumed.get(key)
            if a is not None and a.written and self.covers(obj.get("status") or {}, a.status):
                del self.assumed[key]
        self._specs.pop((key, ""), None)  # the only key of a claim's spec
        self.recount(key)

    # ---- claims ----------------------------------------------------------------------

    @staticmethod
    def covers(seen: Mapping[str, Any], ours: Mapping[str, Any]) -> bool:
        """Whether the status ``seen`` includes the status ``ours`` (the same allocation
        presence, at least our consumers)."""
        if bool(seen.get("allocation")) != bool(ours.get("allocation")):
            return False
        have = {consumer_key(r) for r in seen.get("reservedFor") or ()}
        want = {consumer_key(r) for r in ours.get("reservedFor") or ()}
        return want <= have

    def status(self, key: ClaimKey) -> Mapping[str, Any]:
        """The claim's effective status: tentative in this cycle, else assumed, else as the
        informer shows it."""
        t = self._tent.get(key)
        if t is not None:
            return t
        a = self.assumed.get(key)
        if a is not None:
            return a.status
        obj = self.claims.get(key)
        return (obj or {}).get("status") or {}

    def pod_claims(self, pod: PodInfo) -> tuple[list[PodClaim] | Status, ClaimKey | None]:
        """The claims ``pod`` needs, or why not now, and the claim it names that does not
        exist (see ``resolve_pod_claims``)."""
        return resolve_pod_claims(pod, pod_group(self.cache, pod), self.claims)

    def spec(self, claim: PodClaim) -> ClaimSpec | str:
        """The claim's requests, or why they cannot be served."""
        ck = (claim.key, "")
        got = self._specs.get(ck)
        if got is None:
            got = parse_claim_spec(self.claims[claim.key], self.classes, self.cel)
            self._specs[ck] = got
        return got

    # ---- the cycle's tentative allocations and the assumed ones ----------------------

    def reserve(self, r: Reservation) -> Callable[[], None]:
        """Take ``r`` tentatively (later pods of the cycle see it); returns its undo."""
        prev = self._tent.get(r.claim)
        self._tent[r.claim] = r.status
        self._tent_use.update(r.devices)
        self._touch(r.devices)

        def undo(r: Reservation = r, prev: dict[str, Any] | None = prev) -> None:
            if prev is None:
                self._tent.pop(r.claim, None)
            else:
                self._tent[r.claim] = prev
            self._tent_use.difference_update(r.devices)
            self._touch(r.devices)

        return undo

    def assume(self, r: Reservation) -> None:
        """Keep ``r`` (of a successful cycle) as the claim's assumed status."""
        prev = self.assumed.get(r.claim)
        allocated_here = r.allocated or (prev is not None and prev.allocated_here)
        self.assumed[r.claim] = Assumed(
            status=r.status, devices=r.devices, allocated_here=allocated_here
        )
        self.recount(r.claim)

    def drop(self, key: ClaimKey) -> None:
        """Forget the claim's assumed status."""
        self.assumed.pop(key, None)
        self.recount(key)

    def recount(self, key: ClaimKey) -> None:
        """Devices in use by ``key`` (its effective allocation, admin access excluded), and
        the claim's consumers."""
        for uid in self._consumers.pop(key, ()):
            keys = self._by_consumer.get(uid)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._by_consumer[uid]
        before = self._claim_devices.get(key, ())
        for d in self._claim_devices.pop(key, ()):
            n = self._in_use.get(d, 0) - 1
            if n > 0:
                self._in_use[d] = n
            else:
                self._in_use.pop(d, None)
        a = self.assumed.get(key)
        st = a.status if a is not None else (self.claims.get(key) or {}).get("status") or {}
        alloc = st.get("allocation") or {}
        devices = tuple(
            (str(r.get("driver")), str(r.get("pool")), str(r.get("device")))
            for r in (alloc.get("devices") or {}).get("results") or ()
            if not r.get("adminAccess")
        )
        if devices:
            self._claim_devices[key] = devices
            for d in devices:
                self._in_use[d] = self._in_use.get(d, 0) + 1
        consumers = tuple(str(r.get("uid") or "") for r in st.get("reservedFor") or ())
        if consumers:
            self._consumers[key] = consumers
            for uid in consumers:
                self._by_consumer.setdefault(uid, set()).add(key)
        if before != devices:
            self._touch((*before, *devices))

    # ---- devices in use --------------------------------------------------------------

    def in_use(self, d: DeviceId) -> bool:
        """Allocated (and not freed by a removed victim), or taken in this cycle."""
        return (d in self._in_use and d not in self._freed) or d in self._tent_use

    def counters_used(self, pool: tuple[str, str]) -> dict[CounterKey, float]:
        """The counters of ``pool`` consumed by its devices in use (allocated, assumed or
        taken in this cycle)."""
        return consumed(d for d in self._consumers_of.get(pool, ()) if self.in_use(d.id))

    def sync_freed(self, lister: SharedLister) -> None:
        """Devices of claims whose every consumer is a pod the snapshot removed (a
        preemption victim) count as free while it is removed."""
        removed: Mapping[tuple[str, str], PodInfo] = getattr(lister, "removed", None) or {}
        version = (id(lister), getattr(lister, "removed_version", 0)) if removed else None
        if version == self._freed_version:
            return
        self._freed_version = version
        freed: set[DeviceId] = set()
        if removed:
            uids = {p.uid for p in removed.values()}
            groups: dict[tuple[str, str], bool] = {}
            for p in removed.values():
                for key in self._by_consumer.get(p.uid, ()):
                    st = self.status(key)
                    if all(
                        self._consumer_gone(r, uids, groups) for r in st.get("reservedFor") or ()
                    ):
                        freed.update(self._claim_devices.get(key, ()))
            for key in self._group_claims_of(removed.values()):
                st = self.status(key)
                if all(self._consumer_gone(r, uids, groups) for r in st.get("reservedFor") or ()):
                    freed.update(self._claim_devices.get(key, ()))
        if freed != self._freed:
            self._touch(freed ^ self._freed)
            self._freed = freed

    def _group_claims_of(self, pods: Iterable[PodInfo]) -> set[ClaimKey]:
        out: set[ClaimKey] = set()
        if self.cache is None:
            return out
        for p in pods:
            g = self.cache.groups.get(p.group_key) if p.group_key is not None else None
            if g is not None and g.pod_group is not None:
                out.update(self._by_consumer.get(str(g.pod_group.metadata.uid or ""), ()))
        return out

    def _consumer_gone(
        self, ref: Mapping[str, Any], uids: set[str], groups: dict[tuple[str, str], bool]
    ) -> bool:
        """A reservedFor entry whose pod (or every pod of whose PodGroup) is removed."""
        if ref.get("resource") == "pods":
            return str(ref.get("uid")) in uids
        if ref.get("resource") == "podgroups" and self.cache is not None:
            for (ns, name), g in self.cache.groups.items():
                pg = g.pod_group
                if pg is None or str(pg.metadata.uid or "") != str(ref.get("uid")):
                    continue
                key = (ns, name)
                if key not in groups:
                    groups[key] = all(p.uid in uids for p in self.cache.members(g) if p.scheduled)
                return groups[key]
        return False

    def _touch(self, devices: Iterable[DeviceId]) -> None:
        """The usage of ``devices`` changed: their nodes' free counts are stale."""
        if self._all_dirty:
            return
        table = self.cache.nodes if self.cache is not None else None
        for d in devices:
            dev = self._index.devices.get(d)
            if dev is None:
                continue
            row = table.index.get(dev.node) if table is not None and dev.node else None
            if row is None:
                self._all_dirty = True
                return
            self._dirty_rows.add(row)

    def free_counts(self, lister: SharedLister, req: Request) -> npt.NDArray[np.int64]:
        """Per node row: free devices reachable from it that match ``req`` (kept current
        incrementally as devices are taken and given back)."""
        table = lister.table
        self._check_epoch(table.epoch)
        if self._all_dirty or self._counts_capacity != table.capacity:
            self._counts.clear()
            self._dirty_rows.clear()
            self._all_dirty = False
            self._counts_capacity = table.capacity
        if self._dirty_rows:
            rows = list(self._dirty_rows)
            self._dirty_rows.clear()
            for (exprs, admin), counts in self._counts.items():
                for row in rows:
                    counts[row] = self._free_on(lister, exprs, admin, row)
        key = (req.expressions, req.admin)  # counts do not depend on how many are asked
        got = self._counts.get(key)
        if got is None:
            got = np.zeros(table.capacity, dtype=np.int64)
            for row in table.present_rows():
                got[row] = self._free_on(lister, req.expressions, req.admin, int(row))
            self._counts[key] = got
        return got

    def _free_on(
        self, lister: SharedLister, expressions: tuple[str, ...], admin: bool, row: int
    ) -> int:
        if not lister.table.present[row]:
            return 0
        cands = self.match(lister, expressions, row)
        if admin:
            return len(cands)
        n = 0
        use: dict[tuple[str, str], dict[CounterKey, float]] = {}
        for d in cands:
            if self.in_use(d.id):
                continue
            if d.consumes:  # a partition counts while its counters last on their own
                pool = d.id[:2]
                got = use.get(pool)
                if got is None:
                    got = use[pool] = self.counters_used(pool)
                shared = d.shared or {}
                if any(k in shared and got.get(k, 0.0) + q > shared[k] for k, q in d.consumes):
                    continue
            n += 1
        return n

    # ---- the device index ------------------------------------------------------------

    def refresh_index(self) -> None:
        """Rebuild the device index if slices changed since."""
        if not self._dirty:
            return
        index, changed = index_slices(self.slices, self._index.devices, self.taint_rules.values())
        self.cel.forget(changed)
        self._index = index
        self._consumers_of = {}
        for d in index.devices.values():
            if d.consumes:
                self._consumers_of.setdefault(d.id[:2], []).append(d)
        self._row_cache.clear()
        self._cands.clear()
        self._all_dirty = True
        self._dirty = False

    def _check_epoch(self, epoch: int) -> None:
        """Nodes changed (labels, rows): what depends on them is recomputed."""
        if epoch != self._row_epoch:
            self._row_cache.clear()
            self._cands.clear()
            self._all_dirty = True
            self._row_epoch = epoch

    def row_devices(self, lister: SharedLister, row: int) -> list[Device]:
        """The devices reachable from the node of ``row``, usable or not (cached)."""
        table = lister.table
        self._check_epoch(table.epoch)
        got = self._row_cache.get(row)
        if got is None:
            got = self._index.reachable(table.names[row] or "", table.labels[row])
            self._row_cache[row] = got
        return got

    def match(self, lister: SharedLister, expressions: tuple[str, ...], row: int) -> list[Device]:
        """The usable devices reachable from ``row`` every expression selects (cached)."""
        key = (expressions, row)  # the matching depends on the selectors only
        got = self._cands.get(key)
        if got is None:
            got = [
                d
                for d in self.row_devices(lister, row)
                if not d.unusable and all(self.cel.verdict(e, d) is True for e in expressions)
            ]
            self._cands[key] = got
        return got

    def node(self, lister: SharedLister, row: int) -> NodeDevices:
        """The allocator's view of the node of ``row``."""
        return _RowDevices(self, lister, row)
