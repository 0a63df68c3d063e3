"""Dynamic Resource Allocation (kube-scheduler's ``dynamicresources`` plugin, structured
parameters of ``resource.k8s.io/v1``), including ResourceClaims shared by a PodGroup
(KEP-5729, ``DRAWorkloadResourceClaims``).

The plugin keeps what the informers deliver (DeviceClasses, ResourceSlices, ResourceClaims),
an index of devices per node, and which devices are in use. In a cycle it is asked pod by
pod, for the node the cycle is about to choose: can every claim of the pod be allocated (or,
when already allocated, used) there? The allocation it then makes is tentative, on the
snapshot's undo log, so later pods of the same cycle see those devices as taken and a failed
gang gives them all back. A successful cycle commits the allocations; PreBind writes each
claim's ``status.allocation`` and ``status.reservedFor`` before the pod is bound; a failed
bind releases them.

A pod's claim entry exactly equal to one of its PodGroup's ``spec.resourceClaims`` is the
group's claim: reserved for the PodGroup, allocated once, and its node restriction holds for
every pod of the group.

Supported: requests ``exactly`` with ``count`` or ``allocationMode: All``, CEL selectors of
the class and the request over ``device.driver``, ``device.attributes`` and
``device.capacity`` (``quantity()``, ``compareTo``, ``isGreaterThan``, ``isLessThan``),
``matchAttribute`` constraints, ``adminAccess``. Refused with an explicit "unsupported"
reason: ``firstAvailable``, ``distinctAttribute``, request tolerations or ``capacity``,
and any request field this version does not know. Devices that are tainted, consume
counters (partitionable devices), need binding conditions or come from slices with
per-device node selection are never allocated.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import numpy.typing as npt

from workloadbuilder.api import PodGroup
from workloadbuilder.errors import ApiError, NotFound
from workloadbuilder.resources import quantity_value
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
    from workloadbuilder.scheduler._cache import Cache, PodInfo

__all__ = [
    "DELETE_PROTECTION_FINALIZER",
    "MAX_RESERVED_FOR",
    "DynamicResources",
    "Reservation",
    "node_selector_matches",
]

_log = logging.getLogger(__name__)

DeviceId = tuple[str, str, str]  # driver, pool, device
ClaimKey = tuple[str, str]

#: the finalizer the scheduler puts on a claim it allocates
DELETE_PROTECTION_FINALIZER = "resource.kubernetes.io/delete-protection"
#: ``status.reservedFor`` holds at most this many consumers
MAX_RESERVED_FOR = 256
_CANNOT = "cannot allocate all claims"
_NOT_ON_NODE = "resourceclaim not available on the node"
_GROUP_API = "scheduling.k8s.io"
_UNSUPPORTED_REQUEST_FIELDS = {"firstAvailable"}
_SUPPORTED_EXACT = {
    "deviceClassName",
    "selectors",
    "allocationMode",
    "count",
    "adminAccess",
}


def _match_expression(expr: Mapping[str, Any], value: str | None) -> bool:
    op = expr.get("operator")
    values = [str(v) for v in expr.get("values") or ()]
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and values:
        try:
            lhs, rhs = int(value), int(values[0])
        except ValueError:
            return False
        return lhs > rhs if op == "Gt" else lhs < rhs
    return False


def node_selector_matches(
    selector: Mapping[str, Any] | None, name: str, labels: Mapping[str, str]
) -> bool:
    """A core/v1 ``NodeSelector`` (terms ORed; expressions and ``metadata.name`` fields
    ANDed) against a node; None matches every node."""
    if selector is None:
        return True
    return terms_match(selector.get("nodeSelectorTerms") or (), name, labels)


def terms_match(terms: Iterable[Mapping[str, Any]], name: str, labels: Mapping[str, str]) -> bool:
    """Node selector terms (ORed; expressions and ``metadata.name`` fields ANDed; an empty term
    matches nothing) against a node: required node affinity and device node selectors."""
    for term in terms:
        exprs = term.get("matchExpressions") or ()
        fields = term.get("matchFields") or ()
        if not exprs and not fields:
            continue
        if all(_match_expression(e, labels.get(str(e.get("key")))) for e in exprs) and all(
            _match_expression(f, name if f.get("key") == "metadata.name" else None) for f in fields
        ):
            return True
    return False


def _node_name_selector(node: str) -> dict[str, Any]:
    return {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        ]
    }


# ---- CEL --------------------------------------------------------------------------------


def _quantity(text: Any) -> float:
    return quantity_value(str(text))


def _compare(a: Any, b: Any) -> int:
    return int(a > b) - int(a < b)


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": _quantity,
    "compareTo": _compare,
    "isGreaterThan": lambda a, b: a > b,
    "isLessThan": lambda a, b: a < b,
    "asInteger": lambda a: int(a),
    "asApproximateFloat": lambda a: float(a),
}


def _attr_value(raw: Any) -> Any:
    if not isinstance(raw, Mapping):
        return raw
    for kind in ("string", "int", "bool", "version"):
        if kind in raw:
            return raw[kind]
    return None


def _split(name: str, driver: str) -> tuple[str, str]:
    if "/" in name:
        domain, _, short = name.rpartition("/")
        return domain, short
    return driver, name


@attrs.define(slots=True, eq=False)
class _Device:
    id: DeviceId
    slice_name: str
    index: int
    node: str | None
    selector: dict[str, Any] | None
    all_nodes: bool
    #: empty when the device may be allocated; else why not
    unusable: str
    #: fully qualified attribute name -> value
    attributes: dict[str, Any]
    variable: dict[str, Any]
    ctx: Any = None

    def context(self) -> Any:
        if self.ctx is None:
            import cel  # on first use: the package imports its CLI (typer, rich): ~0.15 s

            ctx = cel.Context()
            for fname, fn in _FUNCTIONS.items():
                ctx.add_function(fname, fn)
            ctx.add_variable("device", self.variable)
            self.ctx = ctx
        return self.ctx


def _device(
    spec: Mapping[str, Any], slice_name: str, index: int, raw: Mapping[str, Any]
) -> _Device:
    driver = str(spec.get("driver") or "")
    pool = str((spec.get("pool") or {}).get("name") or "")
    name = str(raw.get("name") or "")
    attrs_q: dict[str, Any] = {}
    by_domain: dict[str, dict[str, Any]] = {}
    for key, value in (raw.get("attributes") or {}).items():
        domain, short = _split(str(key), driver)
        v = _attr_value(value)
        attrs_q[f"{domain}/{short}"] = v
        by_domain.setdefault(domain, {})[short] = v
    capacity: dict[str, dict[str, Any]] = {}
    for key, value in (raw.get("capacity") or {}).items():
        domain, short = _split(str(key), driver)
        qty = value.get("value") if isinstance(value, Mapping) else value
        try:
            capacity.setdefault(domain, {})[short] = quantity_value(str(qty))
        except ValueError:
            continue
    unusable = ""
    if raw.get("taints"):
        unusable = "tainted"
    elif raw.get("consumesCounters"):
        unusable = "consumes counters (partitionable devices are not supported)"
    elif raw.get("bindingConditions"):
        unusable = "needs binding conditions (not supported)"
    elif raw.get("nodeName") or raw.get("nodeSelector") or raw.get("allNodes"):
        unusable = "per-device node selection is not supported"
    return _Device(
        id=(driver, pool, name),
        slice_name=slice_name,
        index=index,
        node=spec.get("nodeName") or None,
        selector=spec.get("nodeSelector") or None,
        all_nodes=bool(spec.get("allNodes")),
        unusable=unusable,
        attributes=attrs_q,
        variable={
            "driver": driver,
            "attributes": by_domain,
            "capacity": capacity,
            "allowMultipleAllocations": bool(raw.get("allowMultipleAllocations")),
        },
    )


# ---- claims -----------------------------------------------------------------------------


@attrs.frozen(slots=True, cache_hash=True)
class _Request:
    name: str
    device_class: str
    expressions: tuple[str, ...]  # the class's selectors, then the request's
    all: bool
    count: int
    admin: bool


@attrs.frozen(slots=True, cache_hash=True)
class _ClaimSpec:
    requests: tuple[_Request, ...]
    #: (requests it covers (empty: all), fully qualified attribute)
    match: tuple[tuple[tuple[str, ...], str], ...]
    config: tuple[dict[str, Any], ...]


@attrs.frozen(slots=True)
class _PodClaim:
    key: ClaimKey
    entry: str
    consumer: tuple[tuple[str, str], ...]  # the reservedFor entry as sorted items
    group: bool


@attrs.define(slots=True, eq=False)
class Reservation:
    """One claim's tentative status for one pod of a cycle (what PreBind will write)."""

    pod: tuple[str, str]
    claim: ClaimKey
    status: dict[str, Any]
    devices: tuple[DeviceId, ...]
    allocated: bool


@attrs.define(slots=True, eq=False)
class _Assumed:
    status: dict[str, Any]
    devices: tuple[DeviceId, ...]
    allocated_here: bool
    written: bool = False


def _consumer_dict(c: tuple[tuple[str, str], ...]) -> dict[str, str]:
    return dict(c)


def _consumer_key(ref: Mapping[str, Any]) -> tuple[str, str, str]:
    return (str(ref.get("resource") or ""), str(ref.get("name") or ""), str(ref.get("uid") or ""))


class DynamicResources:
    """The DynamicResources plugin (PreFilter, Filter, Reserve, PreBind, Unreserve)."""

    name = "DynamicResources"

    def __init__(self) -> None:
        self.cache: Cache | None = None
        self.classes: dict[str, dict[str, Any]] = {}
        self.slices: dict[str, dict[str, Any]] = {}
        self.claims: dict[ClaimKey, dict[str, Any]] = {}
        self.assumed: dict[ClaimKey, _Assumed] = {}
        self._tent: dict[ClaimKey, dict[str, Any]] = {}
        self._tent_use: set[DeviceId] = set()
        self._in_use: dict[DeviceId, int] = {}
        self._claim_devices: dict[ClaimKey, tuple[DeviceId, ...]] = {}
        self._pending: dict[tuple[str, str], list[ClaimKey]] = {}
        self._locks: dict[ClaimKey, asyncio.Lock] = {}
        #: pod -> the claim it names that does not exist (set by the last lookup)
        self._missing: dict[tuple[str, str], ClaimKey] = {}
        #: claim -> pods held by PreEnqueue until it exists
        self._waiting: dict[ClaimKey, set[tuple[str, str]]] = {}
        # consumers (reservedFor uids) per claim and back; devices freed by removed victims
        self._consumers: dict[ClaimKey, tuple[str, ...]] = {}
        self._by_consumer: dict[str, set[ClaimKey]] = {}
        self._freed: set[DeviceId] = set()
        self._freed_version: tuple[int, int] | None = None
        # free matching devices per request and node row (see _free_counts)
        #: (selector expressions, admin access) -> free matching devices per node row
        self._counts: dict[tuple[tuple[str, ...], bool], npt.NDArray[np.int64]] = {}
        self._dirty_rows: set[int] = set()
        self._all_dirty = True
        self._counts_capacity = -1
        # device index (rebuilt when slices change)
        self._dirty = True
        self._devices: dict[DeviceId, _Device] = {}
        self._local: dict[str, list[_Device]] = {}
        self._selected: list[_Device] = []
        self._everywhere: list[_Device] = []
        self._row_cache: dict[int, list[_Device]] = {}
        self._row_epoch = -1
        self._programs: dict[str, Any] = {}
        self._verdicts: dict[str, dict[DeviceId, bool | str]] = {}
        self._cands: dict[tuple[tuple[str, ...], int], list[_Device]] = {}
        self._specs: dict[tuple[ClaimKey, str], _ClaimSpec | str] = {}

    # ---- informer side ---------------------------------------------------------------

    def bind_cache(self, cache: Cache) -> None:
        """The scheduler's cache (pods, groups, nodes)."""
        self.cache = cache

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
        return self._entity_uses(ekey, str(m.get("namespace") or ""), str(m.get("name")))

    def _entity_uses(self, ekey: tuple[str, str, str], ns: str, name: str) -> bool:
        kind, ens, ename = ekey
        if ens != ns:
            return False
        cache = self.cache
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
            if a is not None and a.written and self._covers(obj.get("status") or {}, a.status):
                del self.assumed[key]
        for k in [k for k in self._specs if k[0] == key]:
            del self._specs[k]
        self._recount(key)

    @staticmethod
    def _covers(seen: Mapping[str, Any], ours: Mapping[str, Any]) -> bool:
        if bool(seen.get("allocation")) != bool(ours.get("allocation")):
            return False
        have = {_consumer_key(r) for r in seen.get("reservedFor") or ()}
        want = {_consumer_key(r) for r in ours.get("reservedFor") or ()}
        return want <= have

    def _status(self, key: ClaimKey) -> Mapping[str, Any]:
        t = self._tent.get(key)
        if t is not None:
            return t
        a = self.assumed.get(key)
        if a is not None:
            return a.status
        obj = self.claims.get(key)
        return (obj or {}).get("status") or {}

    def _recount(self, key: ClaimKey) -> None:
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

    def _used(self, d: DeviceId) -> bool:
        return (d in self._in_use and d not in self._freed) or d in self._tent_use

    def _sync_freed(self, lister: SharedLister) -> None:
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
                    st = self._status(key)
                    if all(
                        self._consumer_gone(r, uids, groups) for r in st.get("reservedFor") or ()
                    ):
                        freed.update(self._claim_devices.get(key, ()))
            for key in self._group_claims_of(removed.values()):
                st = self._status(key)
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
            dev = self._devices.get(d)
            if dev is None:
                continue
            row = table.index.get(dev.node) if table is not None and dev.node else None
            if row is None:
                self._all_dirty = True
                return
            self._dirty_rows.add(row)

    def _free_counts(self, lister: SharedLister, req: _Request) -> npt.NDArray[np.int64]:
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
        cands = self._match(lister, expressions, row)
        if admin:
            return len(cands)
        return sum(1 for d in cands if not self._used(d.id))

    def feasible_rows(self, pod: PodInfo, lister: SharedLister) -> Mask | None:
        """A necessary condition per node row (vectorised): enough free matching devices
        for every request of the pod's unallocated claims. None: no opinion."""
        self._index()
        self._sync_freed(lister)
        claims = self._pod_claims(pod)
        if isinstance(claims, Status):
            return None
        need: dict[_Request, int] = {}
        for c in claims:
            if self._status(c.key).get("allocation"):
                continue
            spec = self._spec(c)
            if isinstance(spec, str):
                return None
            for r in spec.requests:
                if not r.all:
                    need[r] = need.get(r, 0) + r.count
        if not need:
            return None
        mask: Mask | None = None
        for r, n in need.items():
            ok = self._free_counts(lister, r) >= n
            mask = ok if mask is None else mask & ok
        return mask

    # ---- the device index ------------------------------------------------------------

    def _index(self) -> None:
        if not self._dirty:
            return
        newest: dict[tuple[str, str], int] = {}
        for s in self.slices.values():
            spec = s.get("spec") or {}
            pk = (str(spec.get("driver") or ""), str((spec.get("pool") or {}).get("name") or ""))
            gen = int((spec.get("pool") or {}).get("generation") or 0)
            newest[pk] = max(newest.get(pk, gen), gen)
        devices: dict[DeviceId, _Device] = {}
        for sname in sorted(self.slices):
            spec = self.slices[sname].get("spec") or {}
            pool = spec.get("pool") or {}
            pk = (str(spec.get("driver") or ""), str(pool.get("name") or ""))
            if int(pool.get("generation") or 0) != newest[pk]:
                continue
            per_device = bool(spec.get("perDeviceNodeSelection"))
            for i, raw in enumerate(spec.get("devices") or ()):
                d = _device(spec, sname, i, raw)
                if per_device and not d.unusable:
                    d.unusable = "per-device node selection is not supported"
                old = self._devices.get(d.id)
                if old is not None and old.variable == d.variable:
                    d.ctx = old.ctx
                devices.setdefault(d.id, d)
        changed = {
            k
            for k, d in devices.items()
            if (old := self._devices.get(k)) is None or old.variable != d.variable
        }
        changed |= set(self._devices) - set(devices)
        for verdicts in self._verdicts.values():
            for k in changed:
                verdicts.pop(k, None)
        self._devices = devices
        ordered = sorted(devices.values(), key=lambda d: (d.id[0], d.id[1], d.slice_name, d.index))
        self._local = {}
        self._selected = []
        self._everywhere = []
        for d in ordered:
            if d.node:
                self._local.setdefault(d.node, []).append(d)
            elif d.selector is not None:
                self._selected.append(d)
            elif d.all_nodes:
                self._everywhere.append(d)
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

    def _row_devices(self, lister: SharedLister, row: int) -> list[_Device]:
        table = lister.table
        self._check_epoch(table.epoch)
        got = self._row_cache.get(row)
        if got is None:
            name = table.names[row] or ""
            labels = table.labels[row]
            got = list(self._local.get(name, ()))
            got.extend(d for d in self._selected if node_selector_matches(d.selector, name, labels))
            got.extend(self._everywhere)
            got.sort(key=lambda d: (d.id[0], d.id[1], d.slice_name, d.index))
            self._row_cache[row] = got
        return got

    def _program(self, expression: str) -> Any:
        prog = self._programs.get(expression)
        if prog is None:
            import cel  # on first use (see _Device.context)

            prog = self._programs[expression] = cel.compile(expression)
        return prog

    def _verdict(self, expression: str, d: _Device) -> bool | str:
        """The selector on the device (cached per device until its slice changes): True,
        False, or the text of a runtime error (the device does not match)."""
        cache = self._verdicts.setdefault(expression, {})
        got = cache.get(d.id)
        if got is None:
            try:
                value = self._program(expression).execute(d.context())
            except Exception as e:  # a CEL runtime error: the device does not match
                got = f"CEL runtime error: {type(e).__name__}: {e}"
            else:
                got = value if isinstance(value, bool) else "the selector is not a boolean"
            cache[d.id] = got
        return got

    def _candidates(self, lister: SharedLister, req: _Request, row: int) -> list[_Device]:
        """Devices reachable from ``row`` that satisfy the request's class and selectors
        (in use or not)."""
        return self._match(lister, req.expressions, row)

    def _match(self, lister: SharedLister, expressions: tuple[str, ...], row: int) -> list[_Device]:
        key = (expressions, row)  # the matching depends on the selectors only
        got = self._cands.get(key)
        if got is None:
            got = [
                d
                for d in self._row_devices(lister, row)
                if not d.unusable and all(self._verdict(e, d) is True for e in expressions)
            ]
            self._cands[key] = got
        return got

    # ---- a pod's claims --------------------------------------------------------------

    def applies(self, pod: PodInfo) -> bool:
        """Pods with ``spec.resourceClaims``."""
        return bool(pod.req.claims)

    def _group(self, pod: PodInfo) -> PodGroup | None:
        if self.cache is None or pod.group_key is None:
            return None
        g = self.cache.groups.get(pod.group_key)
        return g.pod_group if g is not None else None

    def _pod_claims(self, pod: PodInfo) -> list[_PodClaim] | Status:
        pg = self._group(pod)
        if pg is not None and pg.spec.parent_composite_pod_group_name:
            return _unresolvable(
                "resource claims of pods in CompositePodGroup trees are not supported"
            )
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
        self._missing.pop(pod.key, None)
        out: list[_PodClaim] = []
        seen: set[ClaimKey] = set()
        for entry in pod.req.claims:
            name, direct, template = entry
            group = entry in group_entries
            if group:
                assert pg is not None
                claim_name = direct or group_status.get(name) or pod_status.get(name)
                if not claim_name:
                    if template and name not in group_status and name not in pod_status:
                        return _unschedulable(
                            "waiting for the resource claim controller to create the "
                            f"resourceclaim of PodGroup {pg.metadata.name!r} for claim {name!r}"
                        )
                    continue  # recorded as not needed
                consumer: tuple[tuple[str, str], ...] = (
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
                        return _unschedulable(
                            "waiting for the resource claim controller to create the "
                            f"resourceclaim for pod claim {name!r}"
                        )
                    continue
                consumer = (("name", pod.name), ("resource", "pods"), ("uid", pod.uid))
                owner_uid = pod.uid
            key = (pod.namespace, claim_name)
            obj = self.claims.get(key)
            if obj is None:
                self._missing[pod.key] = key
                return _unresolvable(f'resourceclaim "{claim_name}" not found')
            meta = obj.get("metadata") or {}
            if meta.get("deletionTimestamp"):
                return _unresolvable(f'resourceclaim "{claim_name}" is being deleted')
            if template:
                owners = meta.get("ownerReferences") or ()
                if not any(o.get("uid") == owner_uid and o.get("controller") for o in owners):
                    what = "the pod group" if group else "the pod"
                    return _unresolvable(f'resourceclaim "{claim_name}" was not created for {what}')
            if key in seen:
                continue
            seen.add(key)
            out.append(_PodClaim(key=key, entry=name, consumer=consumer, group=group))
        return out

    def _spec(self, claim: _PodClaim) -> _ClaimSpec | str:
        """The claim's requests, or why they cannot be served."""
        ck = (claim.key, "")
        got = self._specs.get(ck)
        if got is None:
            got = self._parse_spec(self.claims[claim.key])
            self._specs[ck] = got
        return got

    def _parse_spec(self, obj: Mapping[str, Any]) -> _ClaimSpec | str:
        name = (obj.get("metadata") or {}).get("name")
        devices = (obj.get("spec") or {}).get("devices") or {}
        requests: list[_Request] = []
        for raw in devices.get("requests") or ():
            rname = str(raw.get("name") or "")
            extra = set(raw) - {"name", "exactly"}
            if extra & _UNSUPPORTED_REQUEST_FIELDS or "exactly" not in raw:
                return f"claim {name!r}: request {rname!r}: firstAvailable is unsupported"
            if extra:
                return f"claim {name!r}: request {rname!r}: unsupported fields {sorted(extra)}"
            ex = raw["exactly"] or {}
            unknown = set(ex) - _SUPPORTED_EXACT
            if unknown:
                return (
                    f"claim {name!r}: request {rname!r}: {', '.join(sorted(unknown))} unsupported"
                )
            cls_name = str(ex.get("deviceClassName") or "")
            cls = self.classes.get(cls_name)
            if cls is None:
                return f'request {rname!r}: device class "{cls_name}" does not exist'
            exprs: list[str] = []
            for sel in list((cls.get("spec") or {}).get("selectors") or ()) + list(
                ex.get("selectors") or ()
            ):
                expr = (sel.get("cel") or {}).get("expression")
                if expr is None:
                    return f"claim {name!r}: request {rname!r}: a selector without cel"
                try:
                    self._program(str(expr))
                except Exception as e:
                    return f"claim {name!r}: request {rname!r}: CEL compile error: {e}"
                exprs.append(str(expr))
            mode = ex.get("allocationMode") or "ExactCount"
            if mode not in ("ExactCount", "All"):
                return f"claim {name!r}: request {rname!r}: allocationMode {mode} unsupported"
            requests.append(
                _Request(
                    name=rname,
                    device_class=cls_name,
                    expressions=tuple(exprs),
                    all=mode == "All",
                    count=int(ex.get("count") or 1),
                    admin=bool(ex.get("adminAccess")),
                )
            )
        match: list[tuple[tuple[str, ...], str]] = []
        for c in devices.get("constraints") or ():
            if c.get("distinctAttribute"):
                return f"claim {name!r}: distinctAttribute constraints are unsupported"
            attr = c.get("matchAttribute")
            if not attr:
                return f"claim {name!r}: a constraint without matchAttribute is unsupported"
            match.append((tuple(str(r) for r in c.get("requests") or ()), str(attr)))
        config: list[dict[str, Any]] = []
        for cls_req in requests:
            for cfg in (self.classes[cls_req.device_class].get("spec") or {}).get("config") or ():
                entry = {"source": "FromClass", "requests": [cls_req.name], **dict(cfg)}
                config.append(entry)
        for cfg in devices.get("config") or ():
            config.append({"source": "FromClaim", **dict(cfg)})
        return _ClaimSpec(requests=tuple(requests), match=tuple(match), config=tuple(config))

    def pre_enqueue_pod(self, pod: PodInfo, lister: SharedLister) -> Status:
        """Hold the pod (silently, as upstream's PreEnqueue) while a claim it names does not
        exist yet or its template claim has not been generated."""
        claims = self._pod_claims(pod)
        if isinstance(claims, Status) and claims.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
            missing = self._missing.get(pod.key)
            if missing is not None:
                self._waiting.setdefault(missing, set()).add(pod.key)
                return claims
            return SUCCESS  # not a missing claim: PreFilter reports it
        if isinstance(claims, Status):
            return claims
        return SUCCESS

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

    def pre_filter_pod(self, pod: PodInfo, lister: SharedLister) -> Status:
        """Every claim exists (or is being created), is usable by the pod, and asks only for
        what this plugin implements."""
        self._index()
        claims = self._pod_claims(pod)
        if isinstance(claims, Status):
            return claims
        for c in claims:
            st = self._status(c.key)
            reserved = st.get("reservedFor") or ()
            mine = _consumer_key(_consumer_dict(c.consumer))
            if len(reserved) >= MAX_RESERVED_FOR and all(
                _consumer_key(r) != mine for r in reserved
            ):
                return _unschedulable(f'resourceclaim "{c.key[1]}" is in use by too many')
            if not st.get("allocation"):
                spec = self._spec(c)
                if isinstance(spec, str):
                    return _unresolvable(spec)
        return SUCCESS

    def shape_key(self, pod: PodInfo, lister: SharedLister) -> Any:
        """Pods whose claims are all their own, unallocated and of equal spec share
        verdicts (the cycle stops trying a node such a pod did not fit on)."""
        claims = self._pod_claims(pod)
        if isinstance(claims, Status):
            return None
        key: list[Any] = []
        for c in claims:
            if c.group or self._status(c.key).get("allocation"):
                return None
            spec = self._spec(c)
            if isinstance(spec, str):
                return None
            key.append(spec)
        return (pod.req, tuple(key))

    # ---- allocation ------------------------------------------------------------------

    def _try(self, pod: PodInfo, lister: SharedLister, row: int) -> list[Reservation] | str:
        self._index()
        self._sync_freed(lister)
        claims = self._pod_claims(pod)
        if isinstance(claims, Status):
            return claims.message
        table = lister.table
        name = table.names[row] or ""
        labels = table.labels[row]
        picked: set[DeviceId] = set()
        plan: list[Reservation] = []
        for c in claims:
            st = self._status(c.key)
            alloc = st.get("allocation")
            reserved = list(st.get("reservedFor") or ())
            me = _consumer_dict(c.consumer)
            present = any(_consumer_key(r) == _consumer_key(me) for r in reserved)
            if alloc:
                if not node_selector_matches(alloc.get("nodeSelector"), name, labels):
                    return f'{_NOT_ON_NODE}: resourceclaim "{c.key[1]}" is allocated elsewhere'
                if not present:
                    status = {"allocation": alloc, "reservedFor": [*reserved, me]}
                    plan.append(Reservation(pod.key, c.key, status, (), False))
                continue
            spec = self._spec(c)
            if isinstance(spec, str):
                return spec
            got = self._allocate(lister, spec, row, picked)
            if isinstance(got, str):
                return f'cannot allocate claim "{c.entry}" ({c.key[1]}): {got}'
            results, devs = got
            allocation: dict[str, Any] = {"devices": {"results": results}}
            if spec.config:
                allocation["devices"]["config"] = [dict(x) for x in spec.config]
            selector = self._allocation_selector(devs, name)
            if selector is not None:
                allocation["nodeSelector"] = selector
            picked.update(d.id for d, admin in devs if not admin)
            status = {"allocation": allocation, "reservedFor": [*reserved, me]}
            plan.append(
                Reservation(
                    pod.key, c.key, status, tuple(d.id for d, admin in devs if not admin), True
                )
            )
        return plan

    def _allocation_selector(
        self, devs: Sequence[tuple[_Device, bool]], node: str
    ) -> dict[str, Any] | None:
        if any(d.node for d, _ in devs):
            return _node_name_selector(node)
        selectors = [d.selector for d, _ in devs if d.selector is not None]
        if not selectors:
            return None
        distinct: list[dict[str, Any]] = []
        for s in selectors:
            if s not in distinct:
                distinct.append(s)
        if len(distinct) == 1:
            return distinct[0]
        terms: list[Sequence[Mapping[str, Any]]] = [
            s.get("nodeSelectorTerms") or () for s in distinct
        ]
        if all(len(t) == 1 for t in terms):
            merged: dict[str, list[Any]] = {"matchExpressions": [], "matchFields": []}
            for t in terms:
                for part in ("matchExpressions", "matchFields"):
                    merged[part].extend(t[0].get(part) or ())
            return {"nodeSelectorTerms": [{k: v for k, v in merged.items() if v}]}
        return _node_name_selector(node)

    def _allocate(
        self, lister: SharedLister, spec: _ClaimSpec, row: int, picked: set[DeviceId]
    ) -> tuple[list[dict[str, Any]], list[tuple[_Device, bool]]] | str:
        """Devices for every request of the claim on ``row`` (depth first over the
        requests, trying each value of a ``matchAttribute`` constraint)."""
        reqs = spec.requests
        fixed: dict[int, Any] = {}  # constraint index -> the attribute value chosen
        chosen: list[list[_Device]] = []
        failure = ["no devices"]

        def constraints_of(r: _Request) -> list[int]:
            return [i for i, (names, _) in enumerate(spec.match) if not names or r.name in names]

        def step(i: int, taken: set[DeviceId]) -> bool:
            if i == len(reqs):
                return True
            r = reqs[i]
            cands = self._candidates(lister, r, row)
            free = [d for d in cands if r.admin or (d.id not in taken and not self._used(d.id))]
            cons = constraints_of(r)
            if r.all:
                if not cands or len(free) != len(cands):
                    failure[0] = (
                        f"request {r.name!r} (allocationMode All, class {r.device_class}): "
                        f"{len(free)} of {len(cands)} matching devices free"
                    )
                    return False
                need = len(cands)
            else:
                need = r.count
            groups: list[list[_Device]] = [free]
            if cons:
                groups = []
                by_value: dict[Any, list[_Device]] = {}
                for d in free:
                    vals = [d.attributes.get(spec.match[c][1]) for c in cons]
                    if any(v is None for v in vals):
                        continue
                    if any(c in fixed and fixed[c] != v for c, v in zip(cons, vals, strict=True)):
                        continue
                    by_value.setdefault(tuple(vals), []).append(d)
                groups = [by_value[v] for v in sorted(by_value, key=repr)]
            for g in groups:
                if len(g) < need:
                    continue
                take = g[:need]
                saved = dict(fixed)
                if cons:
                    for c in cons:
                        fixed[c] = take[0].attributes.get(spec.match[c][1])
                chosen.append(take)
                if step(i + 1, taken | {d.id for d in take if not r.admin}):
                    return True
                chosen.pop()
                fixed.clear()
                fixed.update(saved)
            if not r.all:
                failure[0] = self._shortage(lister, r, row, len(free), need, bool(cons))
            return False

        if not step(0, set(picked)):
            return failure[0]
        results: list[dict[str, Any]] = []
        devs: list[tuple[_Device, bool]] = []
        for r, take in zip(reqs, chosen, strict=True):
            for d in take:
                res: dict[str, Any] = {
                    "request": r.name,
                    "driver": d.id[0],
                    "pool": d.id[1],
                    "device": d.id[2],
                }
                if r.admin:
                    res["adminAccess"] = True
                results.append(res)
                devs.append((d, r.admin))
        return results, devs

    def _shortage(
        self, lister: SharedLister, r: _Request, row: int, free: int, need: int, constrained: bool
    ) -> str:
        cands = self._candidates(lister, r, row)
        if not cands:
            reachable = [d for d in self._row_devices(lister, row) if not d.unusable]
            if not reachable:
                return f"request {r.name!r}: no device reachable from the node"
            failing = next(
                (
                    e
                    for e in r.expressions
                    if not any(self._verdict(e, d) is True for d in reachable)
                ),
                None,
            )
            if failing is not None:
                return f"request {r.name!r}: no device matches `{failing}`"
            return f"request {r.name!r}: no device of class {r.device_class} matches"
        if constrained and free >= need:
            return f"request {r.name!r}: no {need} free devices share the matched attribute"
        return (
            f"request {r.name!r} (class {r.device_class}): {free} of {len(cands)} matching "
            f"devices free, {need} needed"
        )

    def filter_pod(self, pod: PodInfo, lister: SharedLister, row: int) -> Any:
        """The reservations for ``pod`` on ``row``, or None."""
        got = self._try(pod, lister, row)
        return None if isinstance(got, str) else got

    def reserve_pod(self, pod: PodInfo, lister: SharedLister, row: int, plan: Any) -> None:
        """Apply the plan tentatively on the snapshot (undone when it is reverted)."""
        record = getattr(lister, "record", None)
        for r in plan:
            assert isinstance(r, Reservation)
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
        self._index()
        total: dict[str, int] = {}
        got: dict[str, int] = {}
        single: dict[str, bool] = {}
        exprs: dict[str, list[str]] = {}
        for pod in pods:
            claims = self._pod_claims(pod)
            if isinstance(claims, Status):
                continue
            classes: set[str] = set()
            for c in claims:
                if self._status(c.key).get("allocation"):
                    continue  # allocated before this cycle: no device to get
                spec = self._spec(c)
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
                        not d.unusable and self._verdict(e, d) is True
                        for d in self._row_devices(lister, row)
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
            prev = self.assumed.get(r.claim)
            allocated_here = r.allocated or (prev is not None and prev.allocated_here)
            self.assumed[r.claim] = _Assumed(
                status=r.status, devices=r.devices, allocated_here=allocated_here
            )
            self._recount(r.claim)
            self._pending.setdefault(r.pod, []).append(r.claim)

    # ---- binding ---------------------------------------------------------------------

    async def pre_bind(self, cluster: Cluster, pod: PodInfo, node: str) -> Status:
        """Write the allocation and reservation of each of the pod's claims (once per
        claim: a group claim is written by the first of its pods)."""
        for key in list(self._pending.get(pod.key, ())):
            lock = self._locks.setdefault(key, asyncio.Lock())
            async with lock:
                a = self.assumed.get(key)
                if a is None or a.written:
                    continue
                try:
                    await self._write(cluster, key, a)
                except ApiError as e:
                    self._drop(key)
                    return Status(
                        code=Code.ERROR,
                        message=f'writing resourceclaim "{key[1]}" failed: {e}',
                        plugin=self.name,
                    )
                a.written = True
                obj = self.claims.get(key)
                if obj is not None and self._covers(obj.get("status") or {}, a.status):
                    self.assumed.pop(key, None)
                    self._recount(key)
        self._pending.pop(pod.key, None)
        return SUCCESS

    async def _write(self, cluster: Cluster, key: ClaimKey, a: _Assumed) -> None:
        ns, name = key
        obj = self.claims.get(key) or {}
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

    def _drop(self, key: ClaimKey) -> None:
        self.assumed.pop(key, None)
        self._recount(key)

    async def unreserve(self, cluster: Cluster, pod: PodInfo) -> None:
        """The pod's bind failed: take it out of ``reservedFor`` of its own claims (and
        deallocate a claim this scheduler allocated and nobody else uses). A group claim
        stays reserved for the group."""
        keys = self._pending.pop(pod.key, [])
        me = ("pods", pod.name, pod.uid)
        for key, obj in list(self.claims.items()):
            if key[0] != pod.namespace:
                continue
            a = self.assumed.get(key)
            st = a.status if a is not None else (obj.get("status") or {})
            reserved = list(st.get("reservedFor") or ())
            if all(_consumer_key(r) != me for r in reserved) and key not in keys:
                continue
            rest = [r for r in reserved if _consumer_key(r) != me]
            written = a is None or a.written
            allocated_here = a is not None and a.allocated_here
            if not written:
                self._drop(key)
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
            self._drop(key)

    # ---- events ----------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        """Claims, slices and classes added or changed; a pod's claim generated; a
        PodGroup's claim generated."""
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
            ClusterEventWithHint(
                ClusterEvent("Pod", ActionType.UPDATE_POD_GENERATED_RESOURCE_CLAIM)
            ),
            ClusterEventWithHint(
                ClusterEvent("PodGroup", ActionType.UPDATE_POD_GROUP), _group_claims_changed
            ),
        ]


def _group_claims_changed(_: tuple[str, str, str], old: Any, new: Any) -> bool:
    def claims(pg: Any) -> Any:
        if not isinstance(pg, PodGroup) or pg.status is None:
            return ()
        return pg.status.resource_claim_statuses

    return bool(claims(old) != claims(new))


def _unschedulable(message: str) -> Status:
    return Status(code=Code.UNSCHEDULABLE, message=message, plugin=DynamicResources.name)


def _unresolvable(message: str) -> Status:
    return Status(
        code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE, message=message, plugin=DynamicResources.name
    )
