"""Server-side apply, simplified: field ownership per manager and the apply merge.

Ownership lives in :attr:`KindStore.managed <._storage.KindStore.managed>` (object key ->
field path -> managers) for objects created or changed by an apply; later updates of such an
object move the fields they change to their manager (:func:`track_update`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from workloadbuilder.cluster._patch import (
    FieldPath,
    field_paths,
    get_path,
    remove_path,
    strategic_merge_patch,
)
from workloadbuilder.errors import Conflict

__all__ = ["Owned", "apply_paths", "merge_apply", "track_update"]

#: field path -> the managers that own it
Owned = dict[FieldPath, set[str]]

_APPLY_META = ("labels", "annotations", "finalizers", "ownerReferences")


def apply_paths(applied: Mapping[str, Any], subresource: str | None) -> Iterator[FieldPath]:
    """The field paths an apply configuration (or a write of ``subresource``) sets."""
    for p in field_paths(applied):
        if not p or p[0] in ("apiVersion", "kind"):
            continue
        if p[0] == "metadata" and (len(p) < 2 or p[1] not in _APPLY_META):
            continue
        if (p[0] == "status") != (subresource == "status"):
            continue
        yield p


def merge_apply(
    owned: Owned,
    current: dict[str, Any],
    applied: dict[str, Any],
    manager: str,
    subresource: str | None,
    *,
    force: bool,
) -> tuple[dict[str, Any], Owned]:
    """Apply ``applied`` by ``manager`` to ``current`` (which becomes the merged object: pass
    a copy): the merged object and the new ownership (``owned`` is not changed).
    ``Conflict`` when another manager owns a field the configuration changes, unless
    ``force``."""
    owned = {p: set(o) for p, o in owned.items()}
    new_paths = set(apply_paths(applied, subresource))
    conflicts: list[tuple[str, FieldPath]] = []
    for p in sorted(new_paths, key=repr):
        others = owned.get(p, set()) - {manager}
        if others and get_path(current, p) != get_path(applied, p):
            conflicts.extend((o, p) for o in sorted(others))
    if conflicts and not force:
        listed = "\n".join(
            f'- conflict with "{o}": .{".".join(_render_elem(e) for e in p)}' for o, p in conflicts
        )
        raise Conflict(
            f"Apply failed with {len(conflicts)} conflict"
            f"{'s' if len(conflicts) != 1 else ''}: {listed}"
        )
    merged = strategic_merge_patch(current, applied)
    previously = {p for p, owners in owned.items() if manager in owners}
    for p in previously - new_paths:
        owners = owned.get(p, set())
        owners.discard(manager)
        if not owners:
            owned.pop(p, None)
            remove_path(merged, p)
    conflicted = {p for _, p in conflicts}
    for p in new_paths:
        if p in conflicted:
            owned[p] = {manager}
        else:
            owned.setdefault(p, set()).add(manager)
    return merged, owned


def track_update(
    owned: Owned, old: Mapping[str, Any] | None, new: Mapping[str, Any], manager: str
) -> None:
    """An update by ``manager``: it owns the fields it changed; fields it removed are no
    longer owned (``owned`` is changed in place)."""
    new_paths = set(apply_paths(new, None)) | set(apply_paths(new, "status"))
    for p in new_paths:
        if old is None or get_path(old, p) != get_path(new, p):
            owned[p] = {manager}
    for p in list(owned):
        if p not in new_paths:
            del owned[p]


def _render_elem(elem: Any) -> str:
    if isinstance(elem, tuple):
        key, ident = elem
        return f"[{key}={ident}]" if key != "=" else f"[{ident}]"
    return str(elem)
