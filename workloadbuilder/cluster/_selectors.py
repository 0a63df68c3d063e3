"""Label and field selectors with the API server's syntax.

Label selectors: ``a=b``, ``a==b``, ``a!=b``, ``a in (x,y)``, ``a notin (x,y)``, ``a``
(exists), ``!a`` (does not exist), ``a>1``, ``a<1``; requirements are joined by commas.
Field selectors: ``path=value``, ``path==value``, ``path!=value`` joined by commas.
Parsed selectors are cached, so matching the same selector string is cheap.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from workloadbuilder.errors import BadRequest

__all__ = [
    "FieldRequirement",
    "LabelRequirement",
    "bad_request",
    "label_selector_from_dict",
    "match_labels",
    "parse_field_selector",
    "parse_label_selector",
]

_KEY_RE = re.compile(
    r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9](/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$"
)
_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def bad_request(message: str) -> BadRequest:
    """A 400 BadRequest error."""
    return BadRequest(message)


@attrs.frozen
class LabelRequirement:
    """One label requirement: ``op`` is one of ``=``, ``!=``, ``in``, ``notin``, ``exists``,
    ``!``, ``gt``, ``lt``."""

    key: str
    op: str
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy this requirement."""
        op = self.op
        if op == "=":
            return labels.get(self.key) in self.values
        if op == "!=":
            return labels.get(self.key) not in self.values
        if op == "in":
            return self.key in labels and labels[self.key] in self.values
        if op == "notin":
            return labels.get(self.key) not in self.values
        if op == "exists":
            return self.key in labels
        if op == "!":
            return self.key not in labels
        value = labels.get(self.key)
        if value is None:
            return False
        try:
            have = int(value)
        except ValueError:
            return False
        want = int(next(iter(self.values)))
        return have > want if op == "gt" else have < want


def _check_key(key: str, selector: str) -> None:
    if not key or len(key) > 317 or not _KEY_RE.match(key):
        raise bad_request(f"unable to parse requirement: invalid label key {key!r} in {selector!r}")


def _check_value(value: str, selector: str) -> None:
    if len(value) > 63 or not _VALUE_RE.match(value):
        raise bad_request(f"unable to parse requirement: invalid label value {value!r}")


def _split_top(selector: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(selector):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(selector[start:i])
            start = i + 1
    parts.append(selector[start:])
    return parts


_SET_RE = re.compile(r"^(\S+)\s+(in|notin)\s*\((.*)\)$")


@functools.lru_cache(maxsize=1024)
def parse_label_selector(selector: str | None) -> tuple[LabelRequirement, ...]:
    """Parse a label selector string (``None``/empty selects everything)."""
    if not selector or not selector.strip():
        return ()
    reqs: list[LabelRequirement] = []
    for raw in _split_top(selector):
        part = raw.strip()
        if not part:
            raise bad_request(f"unable to parse requirement: empty requirement in {selector!r}")
        m = _SET_RE.match(part)
        if m:
            key, op, inner = m.group(1), m.group(2), m.group(3)
            values = [v.strip() for v in inner.split(",")]
            _check_key(key, selector)
            for v in values:
                _check_value(v, selector)
            reqs.append(LabelRequirement(key, op, frozenset(values)))
            continue
        if part.startswith("!"):
            key = part[1:].strip()
            _check_key(key, selector)
            reqs.append(LabelRequirement(key, "!"))
            continue
        for token, op in (("!=", "!="), ("==", "="), ("=", "="), (">", "gt"), ("<", "lt")):
            if token in part:
                key, _, value = part.partition(token)
                key, value = key.strip(), value.strip()
                _check_key(key, selector)
                if op in ("gt", "lt"):
                    try:
                        int(value)
                    except ValueError:
                        raise bad_request(
                            f"unable to parse requirement: for 'Gt', 'Lt' operators, the value "
                            f"must be an integer: {value!r}"
                        ) from None
                else:
                    _check_value(value, selector)
                reqs.append(LabelRequirement(key, op, frozenset((value,))))
                break
        else:
            _check_key(part, selector)
            reqs.append(LabelRequirement(part, "exists"))
    return tuple(reqs)


def match_labels(reqs: tuple[LabelRequirement, ...], labels: Mapping[str, str] | None) -> bool:
    """Whether ``labels`` satisfy every requirement."""
    if not reqs:
        return True
    have = labels or {}
    return all(r.matches(have) for r in reqs)


def label_selector_from_dict(sel: Mapping[str, Any] | None) -> Callable[[Mapping[str, str]], bool]:
    """A matcher for a ``metav1.LabelSelector`` object (matchLabels + matchExpressions).

    ``None`` selects nothing (as for PodDisruptionBudgets); ``{}`` selects everything.
    """
    if sel is None:
        return lambda _labels: False
    reqs: list[LabelRequirement] = [
        LabelRequirement(str(k), "=", frozenset((str(v),)))
        for k, v in (sel.get("matchLabels") or {}).items()
    ]
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    for expr in sel.get("matchExpressions") or []:
        op = ops.get(str(expr.get("operator")))
        if op is None:
            return lambda _labels: False
        reqs.append(LabelRequirement(str(expr.get("key")), op, frozenset(expr.get("values") or ())))
    frozen = tuple(reqs)
    return lambda labels: match_labels(frozen, labels)


@attrs.frozen
class FieldRequirement:
    """One field requirement: ``path`` (dotted), ``op`` ``=`` or ``!=``, ``value``."""

    path: str
    op: str
    value: str

    def matches(self, actual: str) -> bool:
        """Whether the object's field value (as a string, ``""`` when unset) matches."""
        return (actual == self.value) if self.op == "=" else (actual != self.value)


@functools.lru_cache(maxsize=1024)
def parse_field_selector(selector: str | None) -> tuple[FieldRequirement, ...]:
    """Parse a field selector string (``None``/empty selects everything)."""
    if not selector or not selector.strip():
        return ()
    reqs: list[FieldRequirement] = []
    for raw in selector.split(","):
        part = raw.strip()
        for token, op in (("!=", "!="), ("==", "="), ("=", "=")):
            if token in part:
                path, _, value = part.partition(token)
                reqs.append(FieldRequirement(path.strip(), op, value.strip()))
                break
        else:
            raise bad_request(f"invalid selector: {selector!r}; can't understand {part!r}")
    return tuple(reqs)
