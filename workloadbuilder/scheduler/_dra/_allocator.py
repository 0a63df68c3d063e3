"""The structured-parameters allocator (k8s.io/dynamic-resource-allocation/structured): the
devices for every request of a pod's claims on one node, given what that node reaches and
which devices are in use.

As upstream, the requests of a pod's claims are tried in order, depth first: a
``firstAvailable`` request tries its alternatives in order, each with every later request
(of the claim and of the pod's later claims), and the first that works is kept (results
name it ``<request>/<subrequest>``). A device is taken only when it is free, its
``NoSchedule`` / ``NoExecute`` taints are tolerated by the request, and the counters it
consumes (partitionable devices) are still left in its pool's
``sharedCounters`` after the devices in use and those already picked.

It is pure: it reads the node through :class:`NodeDevices` and returns the allocation, or
why there is none, without touching any state. The scheduler's view (with caches kept
current by the informers and the cycle) is the DRA manager's; :class:`DeviceList` is a plain
one, for tests and tools.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, Protocol

import attrs

from workloadbuilder.scheduler._dra._cel import Cel
from workloadbuilder.scheduler._dra._devices import CounterKey, Device, DeviceId
from workloadbuilder.scheduler._dra._nodeselector import node_name_selector
from workloadbuilder.scheduler._dra._requests import ClaimSpec, Request, tolerates

__all__ = [
    "Allocation",
    "DeviceList",
    "NodeDevices",
    "allocate_claim",
    "allocate_claims",
    "allocation_selector",
    "consumed",
]


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

    def counters_used(self, pool: tuple[str, str]) -> Mapping[CounterKey, float]:
        """The counters of the pool (driver, pool) consumed by the devices in use."""
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

    def counters_used(self, pool: tuple[str, str]) -> Mapping[CounterKey, float]:
        """The counters consumed by the list's devices in the in-use set."""
        return consumed(d for d in self.devices if d.id[:2] == pool and d.id in self.used)


def consumed(devices: Iterable[Device]) -> dict[CounterKey, float]:
    """The counters ``devices`` consume together."""
    out: dict[CounterKey, float] = {}
    for d in devices:
        for k, q in d.consumes:
            out[k] = out.get(k, 0.0) + q
    return out


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
    got = allocate_claims([spec], node, node_name, picked)
    return got[1] if isinstance(got, tuple) else got[0]


def allocate_claims(
    specs: Sequence[ClaimSpec],
    node: NodeDevices,
    node_name: str,
    picked: Collection[DeviceId] = (),
) -> list[Allocation] | tuple[int, str]:
    """The allocations of the claims of one pod asking ``specs``, searched together as
    upstream does (a later claim that cannot be served makes an earlier one try its next
    devices or alternative), or the index of the claim that could not be allocated and
    why."""
    search = _Search(specs, node, picked)
    got = search.run()
    if isinstance(got, str):
        return search.failed, got
    out: list[Allocation] = []
    for spec, (results, devs, used) in zip(specs, got, strict=True):
        allocation: dict[str, Any] = {"devices": {"results": results}}
        config = _config(spec, used)
        if config:
            allocation["devices"]["config"] = config
        selector = allocation_selector(devs, node_name)
        if selector is not None:
            allocation["nodeSelector"] = selector
        out.append(Allocation(allocation, tuple(d.id for d, admin in devs if not admin)))
    return out


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


def _config(spec: ClaimSpec, used: Sequence[Request]) -> list[dict[str, Any]]:
    """The allocation's ``devices.config``: each class's entries once, naming the requests
    (or chosen alternatives) of that class; then the claim's entries for all requests or
    for one that was used; an entry naming every request names none."""
    out: list[dict[str, Any]] = []
    by_class: dict[str, list[dict[str, Any]]] = {}
    for r in used:
        entries = by_class.get(r.device_class)
        if entries is not None:
            for e in entries:
                e["requests"].append(r.name)
            continue
        entries = [{"source": "FromClass", "requests": [r.name], **dict(c)} for c in r.class_config]
        by_class[r.device_class] = entries
        out.extend(entries)
    names = {r.name for r in used} | {r.parent for r in used}
    for c in spec.config:
        wanted = c.get("requests") or ()
        if not wanted or any(w in names for w in wanted):
            out.append({"source": "FromClaim", **dict(c)})
    for e in out:
        wanted = e.get("requests") or ()
        if wanted and all(r.name in wanted or r.parent in wanted for r in used):
            e.pop("requests")
    return out


#: how many device choices one claim's search may try
_BUDGET = 100_000


#: one claim's allocation results, devices (with admin access) and the requests used
_Result = tuple[list[dict[str, Any]], list[tuple[Device, bool]], list[Request]]


class _Search:
    """The depth-first search over the requests (and their alternatives) of one pod's
    claims, in order."""

    def __init__(
        self, specs: Sequence[ClaimSpec], node: NodeDevices, picked: Collection[DeviceId]
    ) -> None:
        self.specs = specs
        self.node = node
        #: (claim index, the request's alternatives), every claim's requests in order
        self.steps = [(k, alts) for k, spec in enumerate(specs) for alts in spec.choices]
        #: matchAttribute constraints: (claim index, requests named, attribute)
        self.match = [
            (k, names, attr) for k, spec in enumerate(specs) for names, attr in spec.match
        ]
        self.taken: set[DeviceId] = set(picked)
        self.fixed: dict[int, Any] = {}  # constraint index -> the attribute value chosen
        self.chosen: list[tuple[int, Request, list[Device]]] = []
        self.failure = "no devices"
        #: the claim the failure is about
        self.failed = 0
        #: whether the current request's devices were found (a later one failed)
        self.deeper = False
        #: whether the last request tried found its devices (a later one failed)
        self.reached = False
        #: devices tried before the search gives up (upstream bounds it by time)
        self.budget = _BUDGET
        #: pool -> counters consumed (devices in use, picked by the pod, taken here)
        self.use: dict[tuple[str, str], dict[CounterKey, float]] = {}
        self._picked = [d for d in node.reachable() if d.consumes and d.id in self.taken]

    def run(self) -> list[_Result] | str:
        if not self.step(0):
            if self.budget < 0:
                return f"gave up after trying {_BUDGET} device choices: {self.failure}"
            return self.failure
        out: list[_Result] = [([], [], []) for _ in self.specs]
        for k, r, take in self.chosen:
            results, devs, used = out[k]
            used.append(r)
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
        return out

    # ---- counters --------------------------------------------------------------------

    def _pool_use(self, pool: tuple[str, str]) -> dict[CounterKey, float]:
        got = self.use.get(pool)
        if got is None:
            got = dict(self.node.counters_used(pool))
            for k, q in consumed(d for d in self._picked if d.id[:2] == pool).items():
                got[k] = got.get(k, 0.0) + q
            self.use[pool] = got
        return got

    def short_counter(self, d: Device) -> CounterKey | None:
        """The first counter the device would overdraw, or None when it fits."""
        shared = d.shared or {}
        use = self._pool_use(d.id[:2])
        for k, q in d.consumes:
            if k in shared and use.get(k, 0.0) + q > shared[k] * (1 + 1e-12):
                return k
        return None

    def _add(self, d: Device, sign: float) -> None:
        use = self._pool_use(d.id[:2])
        for k, q in d.consumes:
            use[k] = use.get(k, 0.0) + sign * q

    # ---- the search ------------------------------------------------------------------

    def _constraints(self, k: int, r: Request) -> list[int]:
        return [
            i
            for i, (claim, names, _) in enumerate(self.match)
            if claim == k and (not names or r.parent in names or r.name in names)
        ]

    def step(self, i: int) -> bool:
        if i == len(self.steps):
            return True
        k, alts = self.steps[i]
        if len(alts) == 1:
            return self.request(i, alts[0])
        why: list[str] = []
        later: tuple[str, int] | None = None
        for r in alts:
            if self.request(i, r):
                return True
            if self.reached:  # its devices were found; a later request failed
                later = later or (self.failure, self.failed)
            else:
                why.append(self.failure)
        if not why and later is not None:
            self.failure, self.failed = later
            return False
        if later is not None:
            why.append(f"with the others' devices, {later[0]}")
        parent = alts[0].parent
        self.failure = f"request {parent!r}: no alternative can be allocated: " + "; ".join(why)
        self.failed = k
        return False

    def _usable(self, r: Request, d: Device) -> bool:
        return not d.taints or all(tolerates(r.tolerations, *t) for t in d.taints)

    def request(self, i: int, r: Request) -> bool:
        node = self.node
        cands = node.matching(r.expressions)
        free = [
            d
            for d in cands
            if (r.admin or (d.id not in self.taken and not node.in_use(d.id)))
            and (not d.taints or self._usable(r, d))
        ]
        k = self.steps[i][0]
        cons = self._constraints(k, r)
        if r.all:
            if not cands or len(free) != len(cands):
                self.failure = (
                    f"request {r.name!r} (allocationMode All, class {r.device_class}): "
                    f"{len(free)} of {len(cands)} matching devices free"
                    + self._why_not(r, cands, free)
                )
                return False
            need = len(cands)
        else:
            need = r.count
        groups: list[list[Device]] = [free]
        attempted = False
        if cons:
            by_value: dict[Any, list[Device]] = {}
            for d in free:
                vals = [d.attributes.get(self.match[c][2]) for c in cons]
                if any(v is None for v in vals):
                    continue
                if any(
                    c in self.fixed and self.fixed[c] != v for c, v in zip(cons, vals, strict=True)
                ):
                    continue
                by_value.setdefault(tuple(vals), []).append(d)
            groups = [by_value[v] for v in sorted(by_value, key=repr)]
        for g in groups:
            if len(g) < need:
                continue
            saved = dict(self.fixed)
            if cons:
                for c in cons:
                    self.fixed[c] = g[0].attributes.get(self.match[c][2])
            self.deeper = False
            if self._pick(i, r, g, need, 0, []):
                return True
            attempted = attempted or self.deeper
            self.fixed.clear()
            self.fixed.update(saved)
        self.reached = attempted and not r.all and not cons
        if r.all:
            self.failure = (
                f"request {r.name!r} (allocationMode All, class {r.device_class}): "
                f"{len(free)} of {len(cands)} matching devices free" + self._why_not(r, cands, free)
            )
            self.failed = k
        elif cons or not attempted:
            # a later request failing keeps its own reason
            self.failure = self._shortage(r, cands, free, need, bool(cons))
            self.failed = k
        return False

    def _pick(
        self, i: int, r: Request, g: list[Device], need: int, start: int, take: list[Device]
    ) -> bool:
        """Devices of ``g`` (from ``start``) for the rest of ``r``, then the later requests,
        depth first as upstream: the first devices in order, the next one tried when the
        rest fails; a device that consumes counters only while they last."""
        if len(take) == need:
            self.deeper = True
            self.chosen.append((self.steps[i][0], r, list(take)))
            if not r.admin:
                self.taken.update(d.id for d in take)
            if self.step(i + 1):
                return True
            self.chosen.pop()
            if not r.admin:
                self.taken.difference_update(d.id for d in take)
            return False
        for j in range(start, len(g) - (need - len(take)) + 1):
            self.budget -= 1
            if self.budget < 0:
                return False
            d = g[j]
            if d.consumes:
                if self.short_counter(d) is not None:
                    continue
                self._add(d, 1.0)
            take.append(d)
            ok = self._pick(i, r, g, need, j + 1, take)
            take.pop()
            if d.consumes:
                self._add(d, -1.0)
            if ok:
                return True
            if r.all:
                return False
        return False

    def _why_not(self, r: Request, cands: Sequence[Device], free: Sequence[Device]) -> str:
        """What keeps matching devices from being free beyond their use: untolerated
        taints, exhausted counters."""
        parts: list[str] = []
        tainted = [d for d in cands if d.taints and not self._usable(r, d)]
        if tainted:
            d = tainted[0]
            key, value, effect = next(t for t in d.taints if not tolerates(r.tolerations, *t))
            taint = f"{key}={value}:{effect}" if value else f"{key}:{effect}"
            parts.append(f"{len(tainted)} tainted (device {d.id[2]!r}: {taint} not tolerated)")
        short: dict[CounterKey, int] = {}
        for d in free:
            if d.consumes:
                k = self.short_counter(d)
                if k is not None:
                    short[k] = short.get(k, 0) + 1
        if short:
            named = ", ".join(f"{cs}/{c}" for cs, c in sorted(short))
            parts.append(f"{sum(short.values())} lack counters ({named} used up)")
        return "".join(f"; {p}" for p in parts)

    def _shortage(
        self,
        r: Request,
        cands: Sequence[Device],
        free: Sequence[Device],
        need: int,
        constrained: bool,
    ) -> str:
        node = self.node
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
        why = self._why_not(r, cands, free)
        if constrained and len(free) >= need and not why:
            return f"request {r.name!r}: no {need} free devices share the matched attribute"
        return (
            f"request {r.name!r} (class {r.device_class}): {len(free)} of {len(cands)} "
            f"matching devices free, {need} needed{why}"
        )
