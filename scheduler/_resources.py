"""Quantities, pod requirements and scheduling signatures.

A pod's *requirements* are everything the node-level filters and scores look at: resource
requests, ``nodeName``, ``nodeSelector``, required node affinity and tolerations. Pods with
equal requirements share one :class:`PodRequirements` value (the *signature*), so the
scheduler evaluates them once per node instead of once per pod.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

import attrs

__all__ = [
    "CPU",
    "MEMORY",
    "PODS",
    "PodRequirements",
    "format_quantity",
    "parse_quantity",
    "pod_requirements",
    "quantity_value",
]

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL = "ephemeral-storage"

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


def parse_quantity(value: Any, resource: str = "") -> int:
    """A Kubernetes quantity in the scheduler's integer unit: millicores for ``cpu``, the plain
    value (bytes, devices, ...) otherwise; rounded up like the API server does."""
    number = quantity_value(value)
    if resource == CPU:
        number *= 1000.0
    return math.ceil(number - 1e-9)


def format_quantity(amount: int, resource: str) -> str:
    """Render an integer amount (see :func:`parse_quantity`) the way a user would write it."""
    if resource == CPU:
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if resource in (MEMORY, EPHEMERAL) or resource.startswith("hugepages-"):
        for suffix, factor in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if amount >= factor and amount % factor == 0:
                return f"{amount // factor}{suffix}"
    return str(amount)


@attrs.frozen(kw_only=True, cache_hash=True)
class PodRequirements:
    """What a pod needs from a node. Hashable: it is the pod's scheduling signature."""

    requests: tuple[tuple[str, int], ...] = ()
    node_name: str | None = None
    node_selector: tuple[tuple[str, str], ...] = ()
    #: required node affinity: terms (ORed) of (matchExpressions, matchFields) as JSON text
    affinity: str | None = None
    #: tolerations as canonical JSON text
    tolerations: str | None = None

    @property
    def request_map(self) -> dict[str, int]:
        """``requests`` as a dict."""
        return dict(self.requests)

    def affinity_terms(self) -> list[dict[str, Any]]:
        """The required ``nodeSelectorTerms`` (empty when there is no required affinity)."""
        return list(json.loads(self.affinity)) if self.affinity else []

    def toleration_list(self) -> list[dict[str, Any]]:
        """The pod's tolerations."""
        return list(json.loads(self.tolerations)) if self.tolerations else []

    @property
    def has_node_constraints(self) -> bool:
        """Whether nodeName, nodeSelector or required affinity restrict the nodes."""
        return bool(self.node_name or self.node_selector or self.affinity)


def _container_requests(container: Mapping[str, Any]) -> dict[str, int]:
    res = container.get("resources") or {}
    requests = dict(res.get("requests") or {})
    for name, qty in (res.get("limits") or {}).items():
        requests.setdefault(name, qty)  # the API server defaults requests to limits
    out: dict[str, int] = {}
    for name, qty in requests.items():
        out[str(name)] = parse_quantity(qty, str(name))
    return out


def _add(into: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        into[k] = into.get(k, 0) + v


def pod_resource_requests(spec: Mapping[str, Any]) -> dict[str, int]:
    """Effective requests of a pod like upstream's ``resourcehelper.PodRequests``: the sum of
    the containers (plus restartable init containers), at least the largest regular init
    container, plus ``overhead``; pod-level ``resources`` win when set."""
    pod_level = spec.get("resources")
    total: dict[str, int] = {}
    for c in spec.get("containers") or ():
        _add(total, _container_requests(c))
    sidecars: dict[str, int] = {}
    init_max: dict[str, int] = {}
    for c in spec.get("initContainers") or ():
        req = _container_requests(c)
        if c.get("restartPolicy") == "Always":
            _add(sidecars, req)
            _add(total, req)
        else:
            for k, v in req.items():
                init_max[k] = max(init_max.get(k, 0), v + sidecars.get(k, 0))
    for k, v in init_max.items():
        total[k] = max(total.get(k, 0), v)
    if pod_level:
        _add_level = _container_requests({"resources": pod_level})
        for k in (CPU, MEMORY):
            if k in _add_level:
                total[k] = _add_level[k]
    for name, qty in (spec.get("overhead") or {}).items():
        total[str(name)] = total.get(str(name), 0) + parse_quantity(qty, str(name))
    return {k: v for k, v in total.items() if v > 0}


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def pod_requirements(pod: Mapping[str, Any]) -> PodRequirements:
    """The requirements (signature) of a pod dict."""
    spec = pod.get("spec") or {}
    requests = pod_resource_requests(spec)
    requests[PODS] = 1
    affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = affinity.get("nodeSelectorTerms") or []
    tolerations = spec.get("tolerations") or []
    return PodRequirements(
        requests=tuple(sorted(requests.items())),
        node_name=None,  # spec.nodeName set means already assigned; see NodeName filter
        node_selector=tuple(
            sorted((str(k), str(v)) for k, v in (spec.get("nodeSelector") or {}).items())
        ),
        affinity=_canon(terms) if terms else None,
        tolerations=_canon(tolerations) if tolerations else None,
    )
