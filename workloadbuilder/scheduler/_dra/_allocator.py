"""The structured-parameters allocator (k8s.io/dynamic-resource-allocation/structured): the
devices for every request of one claim on one node, given what that node reaches and which
devices are in use.

It is pure: it reads the node through :class:`NodeDevices` and returns the allocation, or
why there is none, without touching any state. The scheduler's view (with caches kept
current by the informers and the cycle) is the DRA manager's; :class:`DeviceList` is a plain
one, for tests and tools.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Protocol

import attrs

from workloadbuilder.scheduler._dra._cel import Cel
from workloadbuilder.scheduler._dra._devices import Device, DeviceId
from workloadbuilder.scheduler._dra._nodeselector import node_name_selector
from workloadbuilder.scheduler._dra._requests import ClaimSpec, Request

__all__ = ["Allocation", "DeviceList", "NodeDevices", "allocate_claim", "allocation_selector"]


class NodeDevices(Protocol):
    """What the allocator sees of one node."""

    def reachable(self) -> Sequence[Device]:
        """The devices the node reaches, usable or not, in the order they are tried."""
        ...

    def matching(self, expressions: tuple[str, ...]) -> Sequence[Device]:
        """The usable reachable devices every expression selects (in use or not)."""
        ...

    def in_use(self, device: DeviceId) -> bool:
        """Whether the device is allocated (to a claim, or tentatively in this cycle)."""
        ...

    def selects(self, expression: str, device: Device) -> bool:
        """Whether the selector is true on the device."""
        ...


class DeviceList:
    """A node's devices as a plain list (no caching beyond the CEL verdicts)."""

    def __init__(
        self,
        devices: Sequence[Device],
        in_use: Collection[DeviceId] = (),
        cel: Cel | None = None,
    ) -> None:
        self.devices = list(devices)
        self.used = set(in_use)
        self.cel = cel or Cel()

    def reachable(self) -> Sequence[Device]:
        """Every device of the list."""
        return self.devices

    def matching(self, expressions: tuple[str, ...]) -> Sequence[Device]:
        """The usable devices every expression selects."""
        return [
            d
            for d in self.devices
            if not d.unusable and all(self.cel.verdict(e, d) is True for e in expressions)
        ]

    def in_use(self, device: DeviceId) -> bool:
        """Whether the device is in the in-use set."""
        return device in self.used

    def selects(self, expression: str, device: Device) -> bool:
        """Whether the selector is true on the device."""
        return self.cel.verdict(expression, device) is True


@attrs.frozen(slots=True, eq=False)
class Allocation:
    """A claim's ``status.allocation`` and the devices it takes (admin access excluded)."""

    allocation: dict[str, Any]
    devices: tuple[DeviceId, ...]


def allocate_claim(
    spec: ClaimSpec, node: NodeDevices, node_name: str, picked: Collection[DeviceId] = ()
) -> Allocation | str:
    """The allocation of a claim asking ``spec`` on the node ``node_name``, not taking the
    devices ``picked`` (by other claims of the same pod), or why it cannot be allocated."""
    got = _allocate(spec, node, picked)
    if isinstance(got, str):
        return got
    results, devs = got
    allocation: dict[str, Any] = {"devices": {"results": results}}
    if spec.config:
        allocation["devices"]["config"] = [dict(x) for x in spec.config]
    selector = allocation_selector(devs, node_name)
    if selector is not None:
        allocation["nodeSelector"] = selector
    return Allocation(allocation, tuple(d.id for d, admin in devs if not admin))


def allocation_selector(devs: Sequence[tuple[Device, bool]], node: str) -> dict[str, Any] | None:
    """The node selector of an allocation of ``devs`` made on ``node``: the node itself when
    a device is local to it, else the devices' slice selectors (merged when they are single
    terms), else None (reachable from every node)."""
    if any(d.node for d, _ in devs):
        return node_name_selector(node)
    selectors = [d.selector for d, _ in devs if d.selector is not None]
    if not selectors:
        return None
    distinct: list[dict[str, Any]] = []
    for s in selectors:
        if s not in distinct:
            distinct.append(s)
    if len(distinct) == 1:
        return distinct[0]
    terms: list[Sequence[Mapping[str, Any]]] = [s.get("nodeSelectorTerms") or () for s in distinct]
    if all(len(t) == 1 for t in terms):
        merged: dict[str, list[Any]] = {"matchExpressions": [], "matchFields": []}
        for t in terms:
            for part in ("matchExpressions", "matchFields"):
                merged[part].extend(t[0].get(part) or ())
        return {"nodeSelectorTerms": [{k: v for k, v in merged.items() if v}]}
    return node_name_selector(node)


def _allocate(
    spec: ClaimSpec, node: NodeDevices, picked: Collection[DeviceId]
) -> tuple[list[dict[str, Any]], list[tuple[Device, bool]]] | str:
    """Devices for every request of the claim (depth first over the requests, trying each
    value of a ``matchAttribute`` constraint)."""
    reqs = spec.requests
    fixed: dict[int, Any] = {}  # constraint index -> the attribute value chosen
    chosen: list[list[Device]] = []
    failure = ["no devices"]

    def constraints_of(r: Request) -> list[int]:
        return [i for i, (names, _) in enumerate(spec.match) if not names or r.name in names]

    def step(i: int, taken: set[DeviceId]) -> bool:
        if i == len(reqs):
            return True
        r = reqs[i]
        cands = node.matching(r.expressions)
        free = [d for d in cands if r.admin or (d.id not in taken and not node.in_use(d.id))]
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
        groups: list[list[Device]] = [free]
        if cons:
            groups = []
            by_value: dict[Any, list[Device]] = {}
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
            failure[0] = _shortage(node, r, len(free), need, bool(cons))
        return False

    if not step(0, set(picked)):
        return failure[0]
    results: list[dict[str, Any]] = []
    devs: list[tuple[Device, bool]] = []
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


def _shortage(node: NodeDevices, r: Request, free: int, need: int, constrained: bool) -> str:
    cands = node.matching(r.expressions)
    if not cands:
        reachable = [d for d in node.reachable() if not d.unusable]
        if not reachable:
            return f"request {r.name!r}: no device reachable from the node"
        failing = next(
            (e for e in r.expressions if not any(node.selects(e, d) for d in reachable)),
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
