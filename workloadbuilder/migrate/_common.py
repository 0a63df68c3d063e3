"""Helpers the source modules share: reading fields with paths for errors, grouping slots."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from workloadbuilder.migrate._model import Doc, Gang, Slot
from workloadbuilder.migrate._report import MigrationError

__all__ = [
    "annotation_map",
    "check_int",
    "group_docs",
    "label_map",
    "meta_key",
    "report_unknown",
    "slots_by_group",
]


def meta_key(kind: str, key: str) -> str:
    """``metadata.labels[KEY]`` / ``metadata.annotations[KEY]``."""
    return f"metadata.{kind}[{key}]"


def _strings(tmpl: Mapping[str, Any], kind: str) -> dict[str, str]:
    meta = tmpl.get("metadata")
    values = meta.get(kind) if isinstance(meta, Mapping) else None
    if not isinstance(values, Mapping):
        return {}
    return {k: v for k, v in values.items() if isinstance(k, str) and isinstance(v, str)}


def label_map(tmpl: Mapping[str, Any]) -> dict[str, str]:
    """A pod template's (or pod's) string labels."""
    return _strings(tmpl, "labels")


def annotation_map(tmpl: Mapping[str, Any]) -> dict[str, str]:
    """A pod template's (or pod's) string annotations."""
    return _strings(tmpl, "annotations")


def check_int(doc: Doc, path: str, value: Any, *, minimum: int = 0) -> int:
    """``value`` as a 32-bit integer >= ``minimum``, else a MigrationError at ``path``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise MigrationError(doc.origin, path, f"expected an integer, got {value!r}")
    if not minimum <= value <= 2**31 - 1:
        raise MigrationError(doc.origin, path, f"must be between {minimum} and 2147483647")
    return value


def report_unknown(gang: Gang, spec: Mapping[str, Any], known: Iterable[str], base: str) -> None:
    """Every field of ``spec`` the migration does not know: reported, never dropped silently."""
    known = set(known)
    for key in spec:
        if key not in known:
            gang.note(
                f"{base}.{key}",
                "not-expressible",
                "not a field this migration knows for this source; not carried over",
            )


def group_docs(docs: Iterable[Doc], what: str) -> dict[tuple[str, str], Doc]:
    """Group objects by ``(namespace, name)``; two with the same key conflict."""
    out: dict[tuple[str, str], Doc] = {}
    for doc in docs:
        key = (doc.namespace, doc.name)
        if not doc.name:
            raise MigrationError(doc.origin, "metadata.name", f"Required value: a {what} needs one")
        if key in out:
            raise MigrationError(
                doc.origin,
                "metadata.name",
                f"conflicting quorums: {what} {key[0]}/{key[1]} is also defined in "
                f"{out[key].origin}",
            )
        out[key] = doc
    return out


def slots_by_group(slots: Iterable[Slot]) -> dict[tuple[str, str], list[Slot]]:
    """Slots grouped by ``(namespace, group name)`` in input order."""
    out: dict[tuple[str, str], list[Slot]] = {}
    for slot in slots:
        out.setdefault((slot.doc.namespace, slot.link.group), []).append(slot)
    return out
