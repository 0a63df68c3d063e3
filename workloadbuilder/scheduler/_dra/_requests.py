"""A ResourceClaim's ``spec.devices`` as the allocator's input: its requests (with their
class's selectors), its ``matchAttribute`` constraints and its configuration, or why this
version cannot serve it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from workloadbuilder.scheduler._dra._cel import Cel

__all__ = ["ClaimSpec", "Request", "parse_claim_spec"]

_UNSUPPORTED_REQUEST_FIELDS = {"firstAvailable"}
_SUPPORTED_EXACT = {
    "deviceClassName",
    "selectors",
    "allocationMode",
    "count",
    "adminAccess",
}


@attrs.frozen(slots=True, cache_hash=True)
class Request:
    """One ``exactly`` request of a claim."""

    name: str
    device_class: str
    #: the class's selectors, then the request's
    expressions: tuple[str, ...]
    #: ``allocationMode: All``
    all: bool
    count: int
    admin: bool


@attrs.frozen(slots=True, cache_hash=True)
class ClaimSpec:
    """What a claim asks for."""

    requests: tuple[Request, ...]
    #: (requests it covers (empty: all), fully qualified attribute)
    match: tuple[tuple[tuple[str, ...], str], ...]
    #: the allocation's ``devices.config`` (the classes' first, then the claim's)
    config: tuple[dict[str, Any], ...]


def parse_claim_spec(
    obj: Mapping[str, Any], classes: Mapping[str, Mapping[str, Any]], cel: Cel
) -> ClaimSpec | str:
    """The claim's requests, or why they cannot be served (an unsupported field, a missing
    class, a selector that does not compile)."""
    name = (obj.get("metadata") or {}).get("name")
    devices = (obj.get("spec") or {}).get("devices") or {}
    requests: list[Request] = []
    for raw in devices.get("requests") or ():
        got = _request(name, raw, classes, cel)
        if isinstance(got, str):
            return got
        requests.append(got)
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
        for cfg in (classes[cls_req.device_class].get("spec") or {}).get("config") or ():
            entry = {"source": "FromClass", "requests": [cls_req.name], **dict(cfg)}
            config.append(entry)
    for cfg in devices.get("config") or ():
        config.append({"source": "FromClaim", **dict(cfg)})
    return ClaimSpec(requests=tuple(requests), match=tuple(match), config=tuple(config))


def _request(
    name: Any, raw: Mapping[str, Any], classes: Mapping[str, Mapping[str, Any]], cel: Cel
) -> Request | str:
    rname = str(raw.get("name") or "")
    extra = set(raw) - {"name", "exactly"}
    if extra & _UNSUPPORTED_REQUEST_FIELDS or "exactly" not in raw:
        return f"claim {name!r}: request {rname!r}: firstAvailable is unsupported"
    if extra:
        return f"claim {name!r}: request {rname!r}: unsupported fields {sorted(extra)}"
    ex = raw["exactly"] or {}
    unknown = set(ex) - _SUPPORTED_EXACT
    if unknown:
        return f"claim {name!r}: request {rname!r}: {', '.join(sorted(unknown))} unsupported"
    cls_name = str(ex.get("deviceClassName") or "")
    cls = classes.get(cls_name)
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
            cel.program(str(expr))
        except Exception as e:
            return f"claim {name!r}: request {rname!r}: CEL compile error: {e}"
        exprs.append(str(expr))
    mode = ex.get("allocationMode") or "ExactCount"
    if mode not in ("ExactCount", "All"):
        return f"claim {name!r}: request {rname!r}: allocationMode {mode} unsupported"
    return Request(
        name=rname,
        device_class=cls_name,
        expressions=tuple(exprs),
        all=mode == "All",
        count=int(ex.get("count") or 1),
        admin=bool(ex.get("adminAccess")),
    )
