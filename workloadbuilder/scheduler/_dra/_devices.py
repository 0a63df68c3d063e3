"""Devices as the allocator sees them: parsed from the ResourceSlices of the newest
generation of each pool, indexed by how a node reaches them (its own slices, slices with a
node selector, slices for all nodes), with their taints and the counters they consume of
their pool's ``sharedCounters`` (partitionable devices)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from workloadbuilder.resources import quantity_value
from workloadbuilder.scheduler._dra._nodeselector import node_selector_matches

__all__ = [
    "CounterKey",
    "Device",
    "DeviceId",
    "DeviceIndex",
    "device_order",
    "index_slices",
    "parse_device",
    "rule_taint",
    "shared_counters",
]

#: driver, pool, device
DeviceId = tuple[str, str, str]
#: counter set, counter
CounterKey = tuple[str, str]
#: the device taint effects that keep a device from being allocated (others are ignored)
_BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")

_PER_DEVICE = "per-device node selection is not supported"


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
class Device:
    """One device of a ResourceSlice."""

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
    #: the CEL ``device`` variable (driver, attributes and capacity per domain)
    variable: dict[str, Any]
    #: the CEL context over :attr:`variable`, made on first use (see ``_cel``)
    ctx: Any = None
    #: its ``NoSchedule`` / ``NoExecute`` taints: key, value, effect
    taints: tuple[tuple[str, str, str], ...] = ()
    #: the counters it consumes of its pool's counter sets: (counter set, counter), amount
    consumes: tuple[tuple[CounterKey, float], ...] = ()
    #: its pool's shared counters (None until :func:`index_slices` fills them in)
    shared: Mapping[CounterKey, float] | None = None


#: quantity text -> its value (None: unreadable); slices repeat the same few quantities
_QUANTITIES: dict[str, float | None] = {}


def _quantity(raw: Any) -> float | None:
    qty = str(raw.get("value") if isinstance(raw, Mapping) else raw)
    try:
        return _QUANTITIES[qty]
    except KeyError:
        pass
    try:
        got: float | None = quantity_value(qty)
    except ValueError:
        got = None
    if len(_QUANTITIES) < 4096:
        _QUANTITIES[qty] = got
    return got


def _counters(raw: Any) -> dict[str, float] | str:
    out: dict[str, float] = {}
    for name, value in (raw or {}).items():
        q = _quantity(value)
        if q is None:
            return f"counter {name!r} has an unreadable value"
        out[str(name)] = q
    return out


def shared_counters(spec: Mapping[str, Any]) -> dict[CounterKey, float]:
    """A slice's ``sharedCounters``: (counter set, counter) -> amount (unreadable amounts
    are left out, so nothing consuming them fits)."""
    out: dict[CounterKey, float] = {}
    for cs in spec.get("sharedCounters") or ():
        got = _counters(cs.get("counters"))
        if isinstance(got, dict):
            for name, q in got.items():
                out[(str(cs.get("name") or ""), name)] = q
    return out


def device_order(d: Device) -> tuple[str, str, str, int]:
    """The order devices are tried in: driver, pool, slice, position in the slice."""
    return (d.id[0], d.id[1], d.slice_name, d.index)


def parse_device(
    spec: Mapping[str, Any], slice_name: str, index: int, raw: Mapping[str, Any]
) -> Device:
    """The device ``raw`` of the slice ``slice_name`` (whose ``spec`` is given)."""
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
        q = _quantity(value)
        if q is not None:
            capacity.setdefault(domain, {})[short] = q
    unusable = ""
    taints = tuple(
        (str(t.get("key") or ""), str(t.get("value") or ""), str(t.get("effect") or ""))
        for t in raw.get("taints") or ()
        if t.get("effect") in _BLOCKING_EFFECTS
    )
    consumes: list[tuple[CounterKey, float]] = []
    for cc in raw.get("consumesCounters") or ():
        got = _counters(cc.get("counters"))
        if isinstance(got, str):
            unusable = f"consumesCounters: {got}"
            break
        consumes.extend(((str(cc.get("counterSet") or ""), n), q) for n, q in got.items())
    if unusable:
        pass
    elif raw.get("bindingConditions"):
        unusable = "needs binding conditions (not supported)"
    elif raw.get("nodeName") or raw.get("nodeSelector") or raw.get("allNodes"):
        unusable = _PER_DEVICE
    return Device(
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
        taints=taints,
        consumes=tuple(consumes),
    )


@attrs.frozen(slots=True)
class DeviceIndex:
    """Every device by id, and by how a node reaches it (each list in :func:`device_order`)."""

    devices: Mapping[DeviceId, Device] = attrs.field(factory=dict)
    #: node name -> the devices of its own slices
    local: Mapping[str, list[Device]] = attrs.field(factory=dict)
    #: devices of slices with a node selector
    selected: list[Device] = attrs.field(factory=list)
    #: devices of slices for all nodes
    everywhere: list[Device] = attrs.field(factory=list)

    def reachable(self, name: str, labels: Mapping[str, str]) -> list[Device]:
        """The devices the node ``name`` (with ``labels``) reaches, usable or not."""
        got = list(self.local.get(name, ()))
        got.extend(d for d in self.selected if node_selector_matches(d.selector, name, labels))
        got.extend(self.everywhere)
        got.sort(key=device_order)
        return got


def rule_taint(rule: Mapping[str, Any]) -> tuple[Mapping[str, Any], tuple[str, str, str]] | None:
    """A DeviceTaintRule's device selector and its taint (key, value, effect), or None when
    the taint's effect does not keep devices from being allocated."""
    spec = rule.get("spec") or {}
    taint = spec.get("taint") or {}
    if taint.get("effect") not in _BLOCKING_EFFECTS:
        return None
    key = (str(taint.get("key") or ""), str(taint.get("value") or ""), str(taint["effect"]))
    return spec.get("deviceSelector") or {}, key


def _rule_selects(selector: Mapping[str, Any], d: Device) -> bool:
    for field, have in zip(("driver", "pool", "device"), d.id, strict=True):
        want = selector.get(field)
        if want is not None and want != have:
            return False
    return True


def index_slices(
    slices: Mapping[str, Mapping[str, Any]],
    previous: Mapping[DeviceId, Device],
    rules: Iterable[Mapping[str, Any]] = (),
) -> tuple[DeviceIndex, set[DeviceId]]:
    """The devices of the newest generation of each pool (the first slice, by name, wins a
    duplicated id), and the ids whose CEL view changed since ``previous`` (or are gone).
    A device unchanged since ``previous`` keeps its CEL context. The taints of the
    DeviceTaintRules ``rules`` are added to the devices they select."""
    newest: dict[tuple[str, str], int] = {}
    for s in slices.values():
        spec = s.get("spec") or {}
        pk = (str(spec.get("driver") or ""), str((spec.get("pool") or {}).get("name") or ""))
        gen = int((spec.get("pool") or {}).get("generation") or 0)
        newest[pk] = max(newest.get(pk, gen), gen)
    counters: dict[tuple[str, str], dict[CounterKey, float]] = {}
    #: pool -> (slices seen, resourceSliceCount), of the newest generation
    seen: dict[tuple[str, str], list[int]] = {}
    bad: dict[tuple[str, str], str] = {}
    for sname in sorted(slices):
        spec = slices[sname].get("spec") or {}
        pool = spec.get("pool") or {}
        pk = (str(spec.get("driver") or ""), str(pool.get("name") or ""))
        if int(pool.get("generation") or 0) != newest[pk]:
            continue
        got = seen.setdefault(pk, [0, int(pool.get("resourceSliceCount") or 1)])
        got[0] += 1
        have = counters.setdefault(pk, {})
        for cs in spec.get("sharedCounters") or ():
            name = str(cs.get("name") or "")
            if any(k[0] == name for k in have):
                bad.setdefault(pk, f"duplicate counter set {name!r}")
            unreadable = _counters(cs.get("counters"))
            if isinstance(unreadable, str):
                bad.setdefault(pk, f"counter set {name!r}: {unreadable}")
        for k, q in shared_counters(spec).items():
            have.setdefault(k, q)
    for pk, (n, want) in seen.items():
        if n != want:
            bad.setdefault(pk, f"is incomplete ({n} of {want} slices)")
    devices: dict[DeviceId, Device] = {}
    for sname in sorted(slices):
        spec = slices[sname].get("spec") or {}
        pool = spec.get("pool") or {}
        pk = (str(spec.get("driver") or ""), str(pool.get("name") or ""))
        if int(pool.get("generation") or 0) != newest[pk]:
            continue
        per_device = bool(spec.get("perDeviceNodeSelection"))
        for i, raw in enumerate(spec.get("devices") or ()):
            d = parse_device(spec, sname, i, raw)
            if per_device and not d.unusable:
                d.unusable = _PER_DEVICE
            if d.consumes:
                d.shared = counters.get(pk, {})
                sets = {k[0] for k in d.shared}
                for (cs, c), _ in d.consumes:
                    if cs not in sets:
                        bad.setdefault(pk, f"has no counter set {cs!r}")
                    elif (cs, c) not in d.shared:
                        bad.setdefault(pk, f"has no counter {c!r} in counter set {cs!r}")
            old = previous.get(d.id)
            if old is not None and old.variable == d.variable:
                d.ctx = old.ctx
            devices.setdefault(d.id, d)
    for rule in rules:
        ruled = rule_taint(rule)
        if ruled is None:
            continue
        selector, taint = ruled
        for d in devices.values():
            if _rule_selects(selector, d) and taint not in d.taints:
                d.taints = (*d.taints, taint)
    for d in devices.values():
        why = bad.get(d.id[:2])
        if why and not d.unusable:
            d.unusable = f"pool {d.id[1]!r} {why}"
    changed = {
        k
        for k, d in devices.items()
        if (old := previous.get(k)) is None or old.variable != d.variable
    }
    changed |= set(previous) - set(devices)
    local: dict[str, list[Device]] = {}
    selected: list[Device] = []
    everywhere: list[Device] = []
    for d in sorted(devices.values(), key=device_order):
        if d.node:
            local.setdefault(d.node, []).append(d)
        elif d.selector is not None:
            selected.append(d)
        elif d.all_nodes:
            everywhere.append(d)
    return DeviceIndex(devices, local, selected, everywhere), changed
