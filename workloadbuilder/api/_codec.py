"""The project's one cattrs converter: camelCase JSON, omit-empty, unknown fields preserved.

Every model is an ``attrs`` class (frozen, slots, keyword-only). Python attribute names are
snake_case; their JSON names are derived by :func:`camel` unless a field carries
``metadata={"json": "..."}``. A field named ``unknown_fields`` collects JSON keys the model does
not know, so ``dict -> model -> dict`` is lossless for everything the server may send.

Output order: ``apiVersion, kind, metadata, spec, status``, then the remaining fields in
declaration order, except that fields with ``metadata={JSON_FIRST: True}`` come first: the
models declare required fields first, which is not always the upstream (Go struct) order.
Unknown fields come last.

Omit-empty rules (as the Go ``omitempty`` tags of the upstream types):
``None`` and empty sequences / mappings are omitted; an empty *struct* (``basic: {}``,
``single: {}``) is kept, because its presence is the value of a union member.
"""

from __future__ import annotations

import functools
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import Annotated, Any, TypeVar, get_args, get_origin

import attrs
import cattrs

__all__ = [
    "JSON_FIRST",
    "UNKNOWN",
    "Int32",
    "camel",
    "converter",
    "from_dict",
    "json_field_name",
    "to_dict",
]

T = TypeVar("T")

#: Name of the attribute that keeps JSON fields a model does not know.
UNKNOWN = "unknown_fields"

#: An ``int32`` field of the Go types: out-of-range numbers are decode errors, as on the server.
Int32 = Annotated[int, "int32"]
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1

#: Field metadata key: serialise the field ahead of the fields without it (upstream order).
JSON_FIRST = "json_first"

_CAMEL_RE = re.compile(r"_([a-z0-9])")


def camel(name: str) -> str:
    """Return the camelCase JSON name for a snake_case attribute name."""
    return _CAMEL_RE.sub(lambda m: m.group(1).upper(), name)


def json_field_name(a: attrs.Attribute[Any]) -> str:
    """The JSON key of a model attribute (``metadata={"json": ...}``, else its camelCase)."""
    explicit = a.metadata.get("json")
    return str(explicit) if explicit else camel(a.name)


converter = cattrs.Converter(forbid_extra_keys=False)


def _is_empty(value: Any) -> bool:
    if value is None:
        return True
    return isinstance(value, (tuple, list, dict)) and len(value) == 0


@functools.cache
def _field_plan(cls: type) -> tuple[tuple[str, str, Any], ...]:
    hints = typing.get_type_hints(cls, include_extras=True)
    plan = [
        (a.name, json_field_name(a), hints.get(a.name, Any))
        for a in attrs.fields(cls)
        if a.name != UNKNOWN
    ]
    # Kubernetes documents read best as apiVersion, kind, metadata, spec, status, rest.
    order = {"api_version": 0, "kind": 1, "metadata": 2, "spec": 3, "status": 4}
    plan.sort(key=lambda p: order.get(p[0], 5))
    return tuple(plan)


def _unstructure_attrs(cls: type) -> Callable[[Any], dict[str, Any]]:
    first = {a.name for a in attrs.fields(cls) if a.metadata.get(JSON_FIRST)}
    plan = sorted(_field_plan(cls), key=lambda p: p[0] not in first)
    has_unknown = any(a.name == UNKNOWN for a in attrs.fields(cls))

    def unstructure(obj: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for attr_name, json_name, _ in plan:
            value = getattr(obj, attr_name)
            if _is_empty(value):
                continue
            out[json_name] = converter.unstructure(value)
        if has_unknown:
            for key, value in getattr(obj, UNKNOWN).items():
                out.setdefault(key, value)
        return out

    return unstructure


def _identity(value: Any) -> Any:
    return value


@functools.cache
def _structurer(tp: Any) -> Callable[[Any], Any]:
    """The function that checks and converts a JSON value to ``tp`` (None stays None),
    worked out once per type: the type's shape is not looked at again for every value."""
    if tp is Int32:

        def int32(value: Any) -> Any:
            if value is None:
                return None
            number = structure_int(value)
            if not _INT32_MIN <= number <= _INT32_MAX:
                raise TypeError(f"expected a 32-bit integer, got {number}")
            return number

        structure_int = _structurer(int)
        return int32
    origin = get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        members = [m for m in get_args(tp) if m is not type(None)]
        return _structurer(members[0]) if len(members) == 1 else _identity
    if origin is tuple:
        args = get_args(tp)
        item_tp = args[0] if args else Any
        item = _structurer(item_tp)
        of_structs = isinstance(item_tp, type) and attrs.has(item_tp)

        def sequence(value: Any) -> Any:
            if value is None:
                return None
            if not isinstance(value, (list, tuple)):
                raise TypeError(f"expected a list, got {type(value).__name__}")
            items = []
            for i, v in enumerate(value):
                if v is None and of_structs:
                    v = {}  # JSON null in a list of structs decodes to the zero struct (Go)
                try:
                    items.append(item(v))
                except CodecError as e:
                    sep = "" if e.path.startswith("[") or not e.path else "."
                    raise CodecError(f"[{i}]{sep}{e.path}", e.detail) from None
                except (TypeError, ValueError) as e:
                    raise CodecError(f"[{i}]", str(e)) from None
            return tuple(items)

        return sequence
    if origin in (dict, Mapping) or tp in (dict, Mapping):

        def mapping(value: Any) -> Any:
            if value is None:
                return None
            if not isinstance(value, Mapping):
                raise TypeError(f"expected an object, got {type(value).__name__}")
            return dict(value)

        return mapping
    if tp is Any:
        return _identity
    if isinstance(tp, type) and attrs.has(tp):
        hook: list[Callable[[Any, Any], Any]] = []  # the class's hook, found at first use

        def struct(value: Any) -> Any:
            if value is None:
                return None
            if not isinstance(value, Mapping):
                raise TypeError(f"expected an object, got {type(value).__name__}")
            if not hook:
                hook.append(converter.get_structure_hook(tp))
            return hook[0](value, tp)

        return struct
    if tp is bool:

        def boolean(value: Any) -> Any:
            if value is None or value is True or value is False:
                return value
            raise TypeError(f"expected a boolean, got {value!r}")

        return boolean
    if tp is int:

        def integer(value: Any) -> Any:
            if value is None:
                return None
            if value.__class__ is bool or not isinstance(value, int):
                raise TypeError(f"expected an integer, got {value!r}")
            return value

        return integer
    if tp is str:

        def string(value: Any) -> Any:
            if value is None or value.__class__ is str or isinstance(value, str):
                return value
            raise TypeError(f"expected a string, got {value!r}")

        return string

    def other(value: Any) -> Any:
        return None if value is None else converter.structure(value, tp)

    return other


class CodecError(ValueError):
    """A document does not have the shape of the model (wrong JSON type at a field path)."""

    def __init__(self, path: str, detail: str) -> None:
        super().__init__(f"{path}: {detail}" if path else detail)
        self.path = path
        self.detail = detail


def _structure_attrs(cls: type) -> Callable[[Mapping[str, Any], Any], Any]:
    plan = _field_plan(cls)
    known = {json_name for _, json_name, _ in plan}
    has_unknown = any(a.name == UNKNOWN for a in attrs.fields(cls))
    required = tuple(
        (a.name, json_field_name(a))
        for a in attrs.fields(cls)
        if a.default is attrs.NOTHING and a.name != UNKNOWN
    )

    fields: list[tuple[str, str, Callable[[Any], Any]]] = []  # filled at the first use

    def structure(data: Mapping[str, Any], _: Any) -> Any:
        if not isinstance(data, Mapping):
            raise CodecError("", f"expected an object, got {type(data).__name__}")
        if not fields:
            fields.extend((a, j, _structurer(tp)) for a, j, tp in plan)
        kwargs: dict[str, Any] = {}
        for attr_name, json_name, convert in fields:
            if json_name not in data:
                continue
            try:
                value = convert(data[json_name])
            except CodecError as e:
                sep = "" if e.path.startswith("[") or not e.path else "."
                raise CodecError(f"{json_name}{sep}{e.path}", e.detail) from None
            except (TypeError, ValueError) as e:
                raise CodecError(json_name, str(e)) from None
            if value is None:
                continue
            kwargs[attr_name] = value
        for attr_name, json_name in required:
            if attr_name not in kwargs:
                raise CodecError(json_name, "Required value")
        if has_unknown:
            extra = {k: v for k, v in data.items() if k not in known}
            if extra:
                kwargs[UNKNOWN] = extra
        return cls(**kwargs)

    return structure


converter.register_unstructure_hook_factory(attrs.has, _unstructure_attrs)
converter.register_structure_hook_factory(attrs.has, _structure_attrs)


def to_dict(obj: Any) -> dict[str, Any]:
    """Serialise a model to its JSON-compatible dict (camelCase, omit-empty)."""
    result = converter.unstructure(obj)
    if not isinstance(result, dict):
        raise TypeError(f"{type(obj).__name__} does not serialise to an object")
    return result


def from_dict(data: Mapping[str, Any], cls: type[T]) -> T:
    """Parse a JSON-compatible dict into ``cls``.

    Raises :class:`CodecError` (a ``ValueError``) naming the JSON path of the first field
    whose JSON type is wrong.
    """
    return converter.structure(data, cls)
