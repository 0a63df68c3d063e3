"""Dynamic Resource Allocation in the simulator: the NodePool ``devices`` shorthand (one
ResourceSlice per node and driver) and the ledger of ResourceClaims behind the JSON report's
``resourceClaims``.

Shorthand, in a NodePool's ``spec``::

    devices:
    - driver: gpu.example.com        # required
      count: 8                        # required, devices per node
      name: gpu                       # device name prefix (default: the driver's first label)
      attributes: {model: H100, numa: 0, nvlink: true}
      capacity: {memory: 80Gi}
      partitions: {slices: 7, memory: 40Gi}   # optional: partitionable devices

Each node gets, per driver, a ResourceSlice ``<node>-<driver>`` with ``nodeName`` set, its
own pool (the node's name, generation 1) and ``count`` devices ``<name>-<i>``; attribute
values become ``string``/``int``/``bool`` attributes, capacities quantities.

With ``partitions``, each device is partitionable: a counter set ``<name>-<i>`` (``slices``
slices and ``memory``) in a slice of its own (``<node>-<driver>-counters``; the pool then
has two slices), the whole device ``<name>-<i>`` (attribute ``partition: whole``, consuming
every slice and all the memory) and ``slices`` partitions ``<name>-<i>-s<k>`` (attribute
``partition: slice``, one slice and ``memory / slices`` each, floored to bytes).
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, TypeVar

import attrs

from workloadbuilder.cluster import Cluster, ClusterProxy, ResourceInfo
from workloadbuilder.resources import quantity_value

__all__ = [
    "ClaimLedger",
    "ClaimRecord",
    "DeviceEntry",
    "DeviceShorthandError",
    "node_slices",
    "parse_devices",
]

T = TypeVar("T")
_MAX_DEVICES = 1024
_KNOWN = {"driver", "count", "name", "attributes", "capacity", "partitions"}
_MAX_SLICES = 64
_MAX_COUNTER_SETS = 8


class DeviceShorthandError(ValueError):
    """A bad ``devices`` entry: ``path`` (relative to the NodePool) and ``message``."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


@attrs.frozen(kw_only=True)
class DeviceEntry:
    """One ``devices`` entry of a NodePool."""

    driver: str
    count: int
    name: str
    attributes: tuple[tuple[str, Any], ...] = ()
    capacity: tuple[tuple[str, str], ...] = ()
    #: partitionable: (slices, memory) per device
    partitions: tuple[int, str] | None = None


def _partitions(raw: Any, at: str) -> tuple[int, str] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or set(raw) != {"slices", "memory"}:
        raise DeviceShorthandError(at, "Invalid value: expected {slices, memory}")
    slices = raw["slices"]
    if isinstance(slices, bool) or not isinstance(slices, int) or not 0 < slices <= _MAX_SLICES:
        raise DeviceShorthandError(
            f"{at}.slices", f"Invalid value: {slices!r}: an integer between 1 and {_MAX_SLICES}"
        )
    try:
        quantity_value(str(raw["memory"]))
    except ValueError:
        raise DeviceShorthandError(
            f"{at}.memory", f"Invalid value: {raw['memory']!r}: not a quantity"
        ) from None
    return slices, str(raw["memory"])


def parse_devices(value: Any, path: str = "spec.devices") -> list[DeviceEntry]:
    """Check and parse the shorthand (errors name the field path)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise DeviceShorthandError(path, "Invalid value: must be a list")
    out: list[DeviceEntry] = []
    names: set[tuple[str, str]] = set()
    counter_sets: dict[str, int] = {}
    for i, raw in enumerate(value):
        at = f"{path}[{i}]"
        if not isinstance(raw, dict):
            raise DeviceShorthandError(at, "Invalid value: expected {driver, count, ...}")
        for key in raw:
            if key not in _KNOWN:
                raise DeviceShorthandError(
                    f"{at}.{key}", f'Unsupported value: "{key}": known fields: {sorted(_KNOWN)}'
                )
        driver = raw.get("driver")
        if not isinstance(driver, str) or not driver:
            raise DeviceShorthandError(f"{at}.driver", "Required value")
        count = raw.get("count")
        if isinstance(count, bool) or not isinstance(count, int):
            raise DeviceShorthandError(f"{at}.count", "Required value: an integer")
        if not 0 < count <= _MAX_DEVICES:
            raise DeviceShorthandError(
                f"{at}.count", f"Invalid value: {count}: must be between 1 and {_MAX_DEVICES}"
            )
        name = raw.get("name", driver.split(".", 1)[0])
        if not isinstance(name, str) or not name:
            raise DeviceShorthandError(f"{at}.name", "Invalid value: must be a non-empty string")
        if (driver, name) in names:
            raise DeviceShorthandError(
                f"{at}.name", f"Duplicate value: {name!r} (give the entries of {driver} names)"
            )
        names.add((driver, name))
        attributes = raw.get("attributes") or {}
        if not isinstance(attributes, dict):
            raise DeviceShorthandError(f"{at}.attributes", "Invalid value: must be a map")
        for k, v in attributes.items():
            if not isinstance(v, (str, int, bool)):
                raise DeviceShorthandError(
                    f"{at}.attributes[{k}]", f"Invalid value: {v!r}: a string, integer or boolean"
                )
        capacity = raw.get("capacity") or {}
        if not isinstance(capacity, dict):
            raise DeviceShorthandError(f"{at}.capacity", "Invalid value: must be a map")
        for k, q in capacity.items():
            try:
                quantity_value(str(q))
            except ValueError:
                raise DeviceShorthandError(
                    f"{at}.capacity[{k}]", f"Invalid value: {q!r}: not a quantity"
                ) from None
        out.append(
            DeviceEntry(
                driver=driver,
                count=count,
                name=name,
                attributes=tuple((str(k), v) for k, v in attributes.items()),
                capacity=tuple((str(k), str(q)) for k, q in capacity.items()),
                partitions=_partitions(raw.get("partitions"), f"{at}.partitions"),
            )
        )
        if out[-1].partitions is not None:
            counter_sets[driver] = counter_sets.get(driver, 0) + count
            if counter_sets[driver] > _MAX_COUNTER_SETS:
                raise DeviceShorthandError(
                    f"{at}.count",
                    f"Invalid value: {count}: at most {_MAX_COUNTER_SETS} partitionable devices "
                    f"of {driver} per node (a slice holds at most {_MAX_COUNTER_SETS} counter "
                    "sets)",
                )
    return out


def _attribute(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    return {"string": str(value)}


def _consumes(counter_set: str, slices: int, memory: str) -> list[dict[str, Any]]:
    return [
        {
            "counterSet": counter_set,
            "counters": {"slices": {"value": str(slices)}, "memory": {"value": memory}},
        }
    ]


def _devices_of(e: DeviceEntry) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The entry's devices and counter sets."""
    devices: list[dict[str, Any]] = []
    sets: list[dict[str, Any]] = []
    for i in range(e.count):
        base: dict[str, Any] = {"name": f"{e.name}-{i}"}
        if e.attributes:
            base["attributes"] = {k: _attribute(v) for k, v in e.attributes}
        if e.capacity:
            base["capacity"] = {k: {"value": q} for k, q in e.capacity}
        if e.partitions is None:
            devices.append(base)
            continue
        slices, memory = e.partitions
        cs = f"{e.name}-{i}"
        sets.append(
            {
                "name": cs,
                "counters": {"slices": {"value": str(slices)}, "memory": {"value": memory}},
            }
        )
        share = str(int(quantity_value(memory)) // slices)
        whole = {
            **base,
            "attributes": {**base.get("attributes", {}), "partition": _attribute("whole")},
        }
        whole["consumesCounters"] = _consumes(cs, slices, memory)
        devices.append(whole)
        for k in range(slices):
            part: dict[str, Any] = {
                "name": f"{cs}-s{k}",
                "attributes": {**base.get("attributes", {}), "partition": _attribute("slice")},
                "capacity": {**base.get("capacity", {}), "memory": {"value": share}},
                "consumesCounters": _consumes(cs, 1, share),
            }
            devices.append(part)
    return devices, sets


def node_slices(node: str, entries: Sequence[DeviceEntry]) -> list[dict[str, Any]]:
    """The ResourceSlices of one node (one per driver, in first-mention order, then a slice
    of counter sets for a driver with partitionable devices)."""
    by_driver: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {}
    for e in entries:
        devices, sets = by_driver.setdefault(e.driver, ([], []))
        more, more_sets = _devices_of(e)
        devices.extend(more)
        sets.extend(more_sets)
    out: list[dict[str, Any]] = []
    for driver, (devices, sets) in by_driver.items():
        pool = {"name": node, "generation": 1, "resourceSliceCount": 2 if sets else 1}
        spec = {"driver": driver, "nodeName": node, "pool": pool}
        out.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{node}-{driver}"},
                "spec": {**spec, "devices": devices},
            }
        )
        if sets:
            out.append(
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceSlice",
                    "metadata": {"name": f"{node}-{driver}-counters"},
                    "spec": {**spec, "sharedCounters": sets},
                }
            )
    return out


@attrs.frozen(kw_only=True)
class ClaimRecord:
    """A ResourceClaim as the report shows it: its allocation as last written (claims of
    finished pods are released and deleted by then)."""

    namespace: str
    name: str
    owner: str | None
    allocated: bool
    devices: tuple[tuple[str, str, str], ...] = ()
    reserved_for: tuple[tuple[str, str], ...] = ()
    node_selector: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """``{namespace, name, owner, allocated, devices, reservedFor, nodeSelector}``."""
        return {
            "namespace": self.namespace,
            "name": self.name,
            "owner": self.owner,
            "allocated": self.allocated,
            "devices": [{"driver": d, "pool": p, "device": n} for d, p, n in self.devices],
            "reservedFor": [{"resource": r, "name": n} for r, n in self.reserved_for],
            "nodeSelector": self.node_selector,
        }


def _record(claim: Mapping[str, Any]) -> ClaimRecord:
    meta = claim.get("metadata") or {}
    owner = next(
        (o for o in meta.get("ownerReferences") or () if o.get("controller")),
        None,
    )
    status = claim.get("status") or {}
    alloc = status.get("allocation") or {}
    results = (alloc.get("devices") or {}).get("results") or ()
    return ClaimRecord(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        owner=f"{owner['kind']}/{owner['name']}" if owner else None,
        allocated=bool(alloc),
        devices=tuple((str(r["driver"]), str(r["pool"]), str(r["device"])) for r in results),
        reserved_for=tuple(
            (str(r.get("resource")), str(r.get("name"))) for r in status.get("reservedFor") or ()
        ),
        node_selector=alloc.get("nodeSelector"),
    )


class ClaimLedger(ClusterProxy):
    """Sits between the scheduler and the cluster and keeps every claim status the scheduler
    writes; :meth:`collect` adds the claims that exist at the end (never allocated ones)."""

    def __init__(self, inner: Cluster) -> None:
        super().__init__(inner)
        self._claims: dict[tuple[str, str], ClaimRecord] = {}

    async def around(
        self, verb: str, info: ResourceInfo, subresource: str | None, call: Awaitable[T]
    ) -> T:
        """Record a ResourceClaim status the scheduler wrote (an allocation)."""
        result = await call
        if (
            info.kind == "ResourceClaim"
            and verb == "patch"
            and subresource == "status"
            and isinstance(result, dict)
        ):
            rec = _record(result)
            self._claims[(rec.namespace, rec.name)] = rec
        return result

    async def collect(self, cluster: Cluster) -> None:
        """Add the claims present now that the scheduler never allocated."""
        try:
            items = (await cluster.list("ResourceClaim")).items
        except Exception:  # the kind is not served: nothing to add
            return
        for c in items:
            if isinstance(c, dict):
                rec = _record(c)
                key = (rec.namespace, rec.name)
                if key not in self._claims or rec.allocated:
                    self._claims[key] = rec

    def records(self) -> tuple[ClaimRecord, ...]:
        """Every claim seen, by namespace and name."""
        return tuple(self._claims[k] for k in sorted(self._claims))
