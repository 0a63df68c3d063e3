"""Building blocks that mirror ``k8s.io/apimachinery/pkg/api/validate`` and ``field``.

The functions here reproduce the *generated* declarative validation of the v1.37 types
(``zz_generated.validations.go``): the same error types, details and ordering, including the
update "ratcheting" (unchanged fields are not re-validated) and short-circuiting.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from workloadbuilder.api import CodecError, to_dict
from workloadbuilder.errors import FieldError
from workloadbuilder.validation._names import (
    content_dns1123_label,
    content_dns1123_subdomain,
    is_label_key,
    is_path_segment_name,
)

__all__ = [
    "Op",
    "attr_name",
    "attr_of",
    "child",
    "codec_error",
    "duplicate",
    "eq",
    "forbidden",
    "index",
    "invalid",
    "member_union",
    "name_key",
    "not_supported",
    "optional_immutable_struct",
    "required",
    "required_string",
    "too_long",
    "too_many",
    "unchanged",
]

INVALID = "Invalid value"
REQUIRED = "Required value"
FORBIDDEN = "Forbidden"
DUPLICATE = "Duplicate value"
TOO_MANY = "Too many"
TOO_LONG = "Too long"
NOT_SUPPORTED = "Unsupported value"

#: Go string fields (not pointers): ``None`` and ``""`` are the same value.
_STRING_VALUED = frozenset({"priority_class_name", "api_group"})


@attrs.frozen
class Op:
    """The validation operation: create or update, plus the declarative options (gates)."""

    update: bool
    options: dict[str, bool]

    def enabled(self, option: str) -> bool:
        """Whether the declarative option (a feature gate) ``option`` is on."""
        return self.options.get(option, False)


def child(path: str, name: str) -> str:
    """The path of field ``name`` under ``path``."""
    return f"{path}.{name}" if path else name


def index(path: str, i: int) -> str:
    """The path of item ``i`` of the list at ``path``."""
    return f"{path}[{i}]"


def _value(value: Any) -> Any:
    if attrs.has(type(value)):
        return to_dict(value)
    if isinstance(value, (tuple, list)):
        return [_value(v) for v in value]
    return value


def invalid(path: str, value: Any, detail: str) -> FieldError:
    """``field.Invalid``."""
    return FieldError(path=path, type=INVALID, detail=detail, value=_value(value), has_value=True)


def required(path: str, detail: str = "") -> FieldError:
    """``field.Required``."""
    return FieldError(path=path, type=REQUIRED, detail=detail)


def forbidden(path: str, detail: str = "") -> FieldError:
    """``field.Forbidden``."""
    return FieldError(path=path, type=FORBIDDEN, detail=detail)


def duplicate(path: str, value: Any) -> FieldError:
    """``field.Duplicate``."""
    return FieldError(path=path, type=DUPLICATE, value=_value(value), has_value=True)


def too_many(path: str, actual: int, maximum: int) -> FieldError:
    """``field.TooMany``."""
    unit = "item" if maximum == 1 else "items"
    return FieldError(
        path=path,
        type=TOO_MANY,
        detail=f"must have at most {maximum} {unit}",
        value=actual,
        has_value=True,
    )


def too_long(path: str, maximum: int) -> FieldError:
    """``field.TooLong`` (byte lengths)."""
    unit = "byte" if maximum == 1 else "bytes"
    return FieldError(path=path, type=TOO_LONG, detail=f"may not be more than {maximum} {unit}")


def not_supported(path: str, value: Any, supported: Sequence[str]) -> FieldError:
    """``field.NotSupported``."""
    detail = "supported values: " + ", ".join(f'"{s}"' for s in supported) if supported else ""
    return FieldError(path=path, type=NOT_SUPPORTED, detail=detail, value=value, has_value=True)


def codec_error(error: CodecError, prefix: str = "") -> FieldError:
    """A :class:`CodecError` (document shape problem) as a FieldError at its JSON path."""
    path = error.path
    if prefix:
        path = f"{prefix}{path}" if path.startswith("[") or not path else f"{prefix}.{path}"
    if error.detail == REQUIRED:
        return required(path)
    return FieldError(path=path, type=INVALID, detail=error.detail)


def _key(value: Any, name: str = "") -> Any:
    if attrs.has(type(value)):
        return (
            type(value).__name__,
            tuple(
                (a.name, _key(getattr(value, a.name), a.name))
                for a in attrs.fields(type(value))
                if a.name != "unknown_fields"
            ),
        )
    if isinstance(value, (tuple, list)):
        return tuple(_key(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _key(v)) for k, v in value.items()))
    if value is None and name in _STRING_VALUED:
        return ""
    return value


def name_key(item: Any) -> Any:
    """The key of a ``+listType=map +listMapKey=name`` item."""
    return item.name


def eq(a: Any, b: Any) -> bool:
    """``equality.Semantic.DeepEqual`` on the versioned types (unknown JSON fields ignored)."""
    return bool(_key(a) == _key(b))


def unchanged(op: Op, correlated: bool, new: Any, old: Any) -> bool:
    """The generated "don't revalidate unchanged data" guard."""
    return op.update and correlated and eq(new, old)


def attr_name(json_name: str) -> str:
    """The attrs attribute of a JSON field: ``minGroupCount`` -> ``min_group_count``."""
    return re.sub("([A-Z])", lambda m: "_" + m.group(1).lower(), json_name)


def attr_of(obj: Any, name: str) -> Any:
    """``obj.name``, or ``None`` when there is no ``obj`` (no old value to correlate)."""
    return None if obj is None else getattr(obj, name)


# --- declarative validators (apimachinery/pkg/api/validate) -------------------------------


def immutable(op: Op, path: str) -> list[FieldError]:
    """``validate.Immutable``: reached only when the value changed, so any update fails."""
    return [invalid(path, None, "field is immutable")] if op.update else []


def optional_immutable_struct(
    op: Op,
    path: str,
    new: Any,
    old: Any,
    correlated: bool,
    validator: Callable[[Op, str, Any, Any], list[FieldError]],
) -> list[FieldError]:
    """``+k8s:immutable +k8s:optional`` on a struct pointer, then the type's validation."""
    if unchanged(op, correlated, new, old):
        return []
    if op.update:
        return immutable(op, path)
    if new is None:
        return []
    return validator(op, path, new, old)


def update_pointer(op: Op, path: str, new: Any, old: Any) -> list[FieldError]:
    """``validate.UpdatePointer(NoSet, NoUnset)``."""
    if not op.update:
        return []
    errs: list[FieldError] = []
    if old is None and new is not None:
        errs.append(invalid(path, None, "field cannot be set once created"))
    if old is not None and new is None:
        errs.append(invalid(path, None, "field cannot be cleared once set"))
    return errs


def union(
    op: Op,
    path: str,
    members: Sequence[str],
    new_set: Sequence[bool],
    old_set: Sequence[bool] | None,
) -> list[FieldError]:
    """``validate.Union``: exactly one member; on update only when membership changed."""
    if op.update and old_set is not None and list(new_set) == list(old_set):
        return []
    specified = [m for m, s in zip(members, new_set, strict=True) if s]
    every = ", ".join(f"`{m}`" for m in members)
    if len(specified) > 1:
        return [
            invalid(path, "{" + ", ".join(specified) + "}", f"must specify exactly one of: {every}")
        ]
    if not specified:
        return [invalid(path, "", f"must specify one of: {every}")]
    return []


def member_union(
    op: Op,
    path: str,
    new: Any,
    old: Any,
    members: Sequence[str],
    is_set: Callable[[Any], bool] = lambda value: value is not None,
) -> list[FieldError]:
    """:func:`union` over the fields ``members`` (JSON names) of ``new`` and ``old``; a member
    is specified when ``is_set`` says so (default: not ``None``)."""
    attrs_ = [attr_name(m) for m in members]
    return union(
        op,
        path,
        members,
        [is_set(getattr(new, a)) for a in attrs_],
        None if old is None else [is_set(getattr(old, a)) for a in attrs_],
    )


def short_name(path: str, value: str) -> list[FieldError]:
    return [invalid(path, value, m) for m in content_dns1123_label(value)]


def long_name(path: str, value: str) -> list[FieldError]:
    return [invalid(path, value, m) for m in content_dns1123_subdomain(value)]


def label_key(path: str, value: str) -> list[FieldError]:
    return [invalid(path, value, m) for m in is_label_key(value)]


def path_segment_name(path: str, value: str) -> list[FieldError]:
    return [invalid(path, value, m) for m in is_path_segment_name(value)]


def minimum(path: str, value: int, low: int) -> list[FieldError]:
    return [invalid(path, value, f"must be greater than or equal to {low}")] if value < low else []


def maximum(path: str, value: int, high: int) -> list[FieldError]:
    return [invalid(path, value, f"must be less than or equal to {high}")] if value > high else []


def required_string(
    op: Op,
    path: str,
    new: str,
    old: Any,
    correlated: bool,
    fmt: Callable[[str, str], list[FieldError]],
) -> list[FieldError]:
    """A ``+k8s:required`` string with a format: ratchet, then Required or the format errors."""
    if unchanged(op, correlated, new, old):
        return []
    if not new:
        return [required(path)]
    return fmt(path, new)


def max_items(path: str, items: Sequence[Any], limit: int) -> list[FieldError]:
    return [too_many(path, len(items), limit)] if len(items) > limit else []


def val_slice_update_no_add_remove(
    op: Op,
    path: str,
    new: Sequence[Any],
    old: Sequence[Any],
    key: Callable[[Any], Any],
) -> list[FieldError]:
    """``validate.ValSliceUpdate(NoAddItem, NoRemoveItem)``."""
    if not op.update:
        return []
    errs: list[FieldError] = []
    old_keys = [key(o) for o in old]
    new_keys = [key(n) for n in new]
    for i, k in enumerate(new_keys):
        if k not in old_keys:
            errs.append(forbidden(index(path, i), "item may not be added"))
    for k in old_keys:
        if k not in new_keys:
            errs.append(forbidden(path, "item may not be removed"))
    return errs


def val_slice_unique(
    path: str, items: Sequence[Any], key: Callable[[Any], Any]
) -> list[FieldError]:
    """``validate.ValSliceUnique``: one Duplicate per later item that repeats a key."""
    dups: list[int] = []
    for i in range(len(items)):
        for j in range(i + 1, len(items)):
            if key(items[i]) == key(items[j]) and j not in dups:
                dups.append(j)
    return [duplicate(index(path, j), items[j]) for j in sorted(dups)]


def each_val(
    op: Op,
    path: str,
    new: Sequence[Any],
    old: Sequence[Any] | None,
    key: Callable[[Any], Any] | None,
    validator: Callable[[Op, str, Any, Any], list[FieldError]],
) -> list[FieldError]:
    """``validate.EachValSliceVal``: correlate by ``key``; skip unchanged items on update."""
    errs: list[FieldError] = []
    for i, item in enumerate(new):
        prev = None
        if key is not None and old:
            prev = next((o for o in old if key(o) == key(item)), None)
        if op.update and prev is not None and eq(item, prev):
            continue
        errs.extend(validator(op, index(path, i), item, prev))
    return errs
