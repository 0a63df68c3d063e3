"""Kubernetes resource quantities and a pod's effective resource requests, computed as
kube-scheduler does (``k8s.io/component-helpers/resource.PodRequests``).

Amounts are integers in each resource's canonical unit: **millicores** for ``cpu`` (what
upstream's ``MilliValue()`` gives), the plain value for everything else (bytes, pods,
devices), rounded up like the API server rounds a quantity it stores.

```python
from workloadbuilder.resources import parse_quantity, pod_requests

parse_quantity("500m", "cpu")      # 500
parse_quantity("1Gi", "memory")    # 1073741824
pod_requests(pod)                  # {"cpu": 1500, "memory": 2147483648, ...}
```
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "CPU",
    "EPHEMERAL_STORAGE",
    "MEMORY",
    "PODS",
    "format_quantity",
    "is_pod_level_resource",
    "parse_quantity",
    "pod_requests",
    "quantity_value",
]

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL_STORAGE = "ephemeral-storage"
_HUGEPAGES = "hugepages-"

_SUFFIX: dict[str, float] = {
    "n": 1e-9,
    "u": 1e-6,
    "m": 1e-3,
    "": 1.0,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
    "Ki": 2.0**10,
    "Mi": 2.0**20,
    "Gi": 2.0**30,
    "Ti": 2.0**40,
    "Pi": 2.0**50,
    "Ei": 2.0**60,
}
_QTY = re.compile(
    r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$"
)


def quantity_value(value: Any) -> float:
    """The numeric value of a Kubernetes quantity (``500m`` -> 0.5, ``1Gi`` -> 1073741824,
    ``1e3`` -> 1000.0); ints and floats pass through. Raises ``ValueError`` for anything else."""
    if isinstance(value, bool):
        raise ValueError(f"invalid quantity {value!r}")
    if isinstance(value, int | float):
        return float(value)
    m = _QTY.match(str(value).strip())
    if m is None:
        raise ValueError(f"invalid quantity {value!r}")
    number = float(m.group(1))
    if m.group(2):
        return number * 10.0 ** int(m.group(2)[1:])
    return number * _SUFFIX[m.group(3) or ""]


#: parsed quantity strings: (text, is cpu) -> amount (pods repeat a handful of quantities)
_PARSED: dict[tuple[str, bool], int] = {}
_PARSED_MAX = 4096


def parse_quantity(value: Any, resource: str = "") -> int:
    """A quantity as an integer amount of ``resource``: millicores for ``cpu``, the plain
    value otherwise; rounded up. Raises ``ValueError`` for an invalid quantity."""
    cpu = resource == CPU
    if type(value) is str:
        key = (value, cpu)
        amount = _PARSED.get(key)
        if amount is not None:
            return amount
    number = quantity_value(value)
    if cpu:
        number *= 1000.0
    amount = math.ceil(number - 1e-9)
    if type(value) is str and len(_PARSED) < _PARSED_MAX:
        _PARSED[(value, cpu)] = amount
    return amount


def format_quantity(amount: int, resource: str) -> str:
    """Render an integer amount (see :func:`parse_quantity`) the way a user would write it:
    ``2``/``1500m`` for cpu, binary suffixes for memory-like resources."""
    if resource == CPU:
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if resource in (MEMORY, EPHEMERAL_STORAGE) or resource.startswith(_HUGEPAGES):
        for suffix, factor in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if amount >= factor and amount % factor == 0:
                return f"{amount // factor}{suffix}"
    return str(amount)


def is_pod_level_resource(name: str) -> bool:
    """Whether pod-level ``spec.resources`` may set ``name`` (cpu, memory, hugepages-*)."""
    return name in (CPU, MEMORY) or name.startswith(_HUGEPAGES)


def _requests(resources: Mapping[str, Any] | None, strict: bool) -> dict[str, int]:
    """``requests``, defaulted from ``limits`` where missing (the API server's defaulting,
    which objects that never went through an API server lack)."""
    res = resources or {}
    values = dict(res.get("limits") or {})
    values.update(res.get("requests") or {})
    out: dict[str, int] = {}
    for name, qty in values.items():
        try:
            out[str(name)] = parse_quantity(qty, str(name))
        except ValueError:
            if strict:
                raise
    return out


def _add(into: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        into[k] = into.get(k, 0) + v


def _max(into: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        if v > into.get(k, 0) or k not in into:
            into[k] = v


def pod_requests(pod_or_spec: Mapping[str, Any], *, strict: bool = True) -> dict[str, int]:
    """A pod's effective resource requests (``pod`` dict or its ``spec``), as kube-scheduler
    counts them:

    * the sum of the regular containers, plus every restartable init container (a sidecar,
      ``restartPolicy: Always``), which keeps running;
    * at least each regular init container plus the sidecars started before it;
    * pod-level ``spec.resources`` replaces the container sum for the resources it sets
      (cpu, memory, hugepages);
    * plus ``spec.overhead`` (RuntimeClass overhead).

    Missing requests default to limits. Resources that come out as zero are omitted.
    ``strict=False`` skips invalid quantities instead of raising ``ValueError``."""
    spec: Mapping[str, Any] = pod_or_spec
    if "spec" in pod_or_spec and "containers" not in pod_or_spec:
        spec = pod_or_spec.get("spec") or {}
    total: dict[str, int] = {}
    for c in spec.get("containers") or ():
        _add(total, _requests(c.get("resources"), strict))
    sidecars: dict[str, int] = {}
    init_max: dict[str, int] = {}
    for c in spec.get("initContainers") or ():
        req = _requests(c.get("resources"), strict)
        if c.get("restartPolicy") == "Always":
            _add(total, req)
            _add(sidecars, req)
            _max(init_max, sidecars)
        else:
            during = dict(sidecars)
            _add(during, req)
            _max(init_max, during)
    _max(total, init_max)
    pod_level = _requests(spec.get("resources"), strict)
    for name, amount in pod_level.items():
        if is_pod_level_resource(name):
            total[name] = amount
    for name, qty in (spec.get("overhead") or {}).items():
        try:
            amount = parse_quantity(qty, str(name))
        except ValueError:
            if strict:
                raise
            continue
        total[str(name)] = total.get(str(name), 0) + amount
    return {k: v for k, v in total.items() if v > 0}
