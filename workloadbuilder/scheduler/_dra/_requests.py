"""A ResourceClaim's ``spec.devices`` as the allocator's input: its requests (with their
class's selectors; a ``firstAvailable`` request as its ordered alternatives), its
``matchAttribute`` constraints and its configuration, or why this version cannot serve it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from workloadbuilder.scheduler._dra._cel import Cel

__all__ = ["ClaimSpec", "Request", "Toleration", "parse_claim_spec", "tolerates"]

_EXACT_FIELDS = {
    "deviceClassName",
    "selectors",
    "allocationMode",
    "count",
    "adminAccess",
    "tolerations",
}
_SUB_FIELDS = {"name", "deviceClassName", "selectors", "allocationMode", "count", "tolerations"}
_TOLERATION_FIELDS = {"key", "operator", "value", "effect", "tolerationSeconds"}

#: a request's toleration of device taints: key, operator, value, effect
Toleration = tuple[str, str, str, str]


def tolerates(tolerations: tuple[Toleration, ...], key: str, value: str, effect: str) -> bool:
    """Whether one of ``tolerations`` tolerates the device taint ``key=value:effect`` (an
    empty effect or key matches any; operator ``Exists`` ignores the value)."""
    for t_key, op, t_value, t_effect in tolerations:
        if t_effect and t_effect != effect:
            continue
        if t_key and t_key != key:
            continue
        if op == "Exists" or (op in ("", "Equal") and t_value == value):
            return True
    return False


@attrs.frozen(slots=True, cache_hash=True)
class Request:
    """One request of a claim that names devices: an ``exactly`` request, or one
    alternative (sub-request) of a ``firstAvailable`` request."""

    #: the name results are recorded under: ``<request>`` or ``<request>/<subrequest>``
    name: str
    device_class: str
    #: the class's selectors, then the request's
    expressions: tuple[str, ...]
    #: ``allocationMode: All``
    all: bool
    count: int
    admin: bool
    #: the name of the claim's request this is (or is an alternative of)
    parent: str = ""
    tolerations: tuple[Toleration, ...] = ()
    #: the class's ``spec.config`` entries
    class_config: tuple[Mapping[str, Any], ...] = attrs.field(default=(), eq=False)


@attrs.frozen(slots=True, cache_hash=True)
class ClaimSpec:
    """What a claim asks for."""

    #: per request of the claim, its alternatives in the order they are tried (one for an
    #: ``exactly`` request)
    choices: tuple[tuple[Request, ...], ...]
    #: (requests it covers (empty: all), fully qualified attribute)
    match: tuple[tuple[tuple[str, ...], str], ...]
    #: the claim's own ``devices.config`` entries
    config: tuple[Mapping[str, Any], ...] = attrs.field(default=(), eq=False)

    @property
    def requests(self) -> tuple[Request, ...]:
        """Every request and alternative, in order."""
        return tuple(r for alts in self.choices for r in alts)


def parse_claim_spec(
    obj: Mapping[str, Any], classes: Mapping[str, Mapping[str, Any]], cel: Cel
) -> ClaimSpec | str:
    """The claim's requests, or why they cannot be served (an unsupported field, a missing
    class, a selector that does not compile)."""
    name = (obj.get("metadata") or {}).get("name")
    devices = (obj.get("spec") or {}).get("devices") or {}
    choices: list[tuple[Request, ...]] = []
    for raw in devices.get("requests") or ():
        rname = str(raw.get("name") or "")
        extra = set(raw) - {"name", "exactly", "firstAvailable"}
        if extra:
            return f"claim {name!r}: request {rname!r}: unsupported fields {sorted(extra)}"
        if "exactly" in raw and "firstAvailable" not in raw:
            got = _request(name, rname, rname, raw["exactly"] or {}, classes, cel, _EXACT_FIELDS)
            if isinstance(got, str):
                return got
            choices.append((got,))
            continue
        subs = raw.get("firstAvailable")
        if "exactly" in raw or not subs:
            return f"claim {name!r}: request {rname!r}: needs exactly or firstAvailable"
        alts: list[Request] = []
        for sub in subs:
            full = f"{rname}/{sub.get('name') or ''}"
            got = _request(name, full, rname, sub, classes, cel, _SUB_FIELDS)
            if isinstance(got, str):
                return got
            alts.append(got)
        choices.append(tuple(alts))
    match: list[tuple[tuple[str, ...], str]] = []
    for c in devices.get("constraints") or ():
        if c.get("distinctAttribute"):
            return f"claim {name!r}: distinctAttribute constraints are unsupported"
        attr = c.get("matchAttribute")
        if not attr:
            return f"claim {name!r}: a constraint without matchAttribute is unsupported"
        match.append((tuple(str(r) for r in c.get("requests") or ()), str(attr)))
    config = tuple(dict(cfg) for cfg in devices.get("config") or ())
    return ClaimSpec(choices=tuple(choices), match=tuple(match), config=config)


def _request(
    claim: Any,
    rname: str,
    parent: str,
    ex: Mapping[str, Any],
    classes: Mapping[str, Mapping[str, Any]],
    cel: Cel,
    known: set[str],
) -> Request | str:
    unknown = set(ex) - known
    if unknown:
        return f"claim {claim!r}: request {rname!r}: {', '.join(sorted(unknown))} unsupported"
    cls_name = str(ex.get("deviceClassName") or "")
    cls = classes.get(cls_name)
    if cls is None:
        return f'request {rname!r}: device class "{cls_name}" does not exist'
    cls_spec = cls.get("spec") or {}
    exprs: list[str] = []
    for sel in list(cls_spec.get("selectors") or ()) + list(ex.get("selectors") or ()):
        expr = (sel.get("cel") or {}).get("expression")
        if expr is None:
            return f"claim {claim!r}: request {rname!r}: a selector without cel"
        try:
            cel.program(str(expr))
        except Exception as e:
            return f"claim {claim!r}: request {rname!r}: CEL compile error: {e}"
        exprs.append(str(expr))
    mode = ex.get("allocationMode") or "ExactCount"
    if mode not in ("ExactCount", "All"):
        return f"claim {claim!r}: request {rname!r}: allocationMode {mode} unsupported"
    tolerations: list[Toleration] = []
    for t in ex.get("tolerations") or ():
        extra = set(t) - _TOLERATION_FIELDS
        if extra:
            return (
                f"claim {claim!r}: request {rname!r}: toleration fields {sorted(extra)} unsupported"
            )
        op = str(t.get("operator") or "Equal")
        if op not in ("Equal", "Exists"):
            return f"claim {claim!r}: request {rname!r}: toleration operator {op} unsupported"
        tolerations.append(
            (str(t.get("key") or ""), op, str(t.get("value") or ""), str(t.get("effect") or ""))
        )
    return Request(
        name=rname,
        device_class=cls_name,
        expressions=tuple(exprs),
        all=mode == "All",
        count=int(ex.get("count") or 1),
        admin=bool(ex.get("adminAccess")),
        parent=parent,
        tolerations=tuple(tolerations),
        class_config=tuple(dict(c) for c in cls_spec.get("config") or ()),
    )
