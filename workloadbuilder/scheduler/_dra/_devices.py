"""Devices as the allocator sees them: parsed from the ResourceSlices of the newest
generation of each pool, indexed by how a node reaches them (its own slices, slices with a
node selector, slices for all nodes)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from workloadbuilder.resources import quantity_value
from workloadbuilder.scheduler._dra._nodeselector import node_selector_matches

__all__ = ["Device", "DeviceId", "DeviceIndex", "device_order", "index_slices", "parse_device"]

#: driver, pool, device
DeviceId = tuple[str, str, str]

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


def index_slices(
    slices: Mapping[str, Mapping[str, Any]], previous: Mapping[DeviceId, Device]
) -> tuple[DeviceIndex, set[DeviceId]]:
    """The devices of the newest generation of each pool (the first slice, by name, wins a
    duplicated id), and the ids whose CEL view changed since ``previous`` (or are gone).
    A device unchanged since ``previous`` keeps its CEL context."""
    newest: dict[tuple[str, str], int] = {}
    for s in slices.values():
        spec = s.get("spec") or {}
        pk = (str(spec.get("driver") or ""), str((spec.get("pool") or {}).get("name") or ""))
        gen = int((spec.get("pool") or {}).get("generation") or 0)
        newest[pk] = max(newest.get(pk, gen), gen)
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
            old = previous.get(d.id)
            if old is not None and old.variable == d.variable:
                d.ctx = old.ctx
            devices.setdefault(d.id, d)
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
