"""Small helpers every part of :class:`MemoryCluster` shares: keys, JSON digging, the API
server's error messages and timestamps."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from workloadbuilder.cluster._memory import _admission as adm
from workloadbuilder.cluster._protocol import ResourceInfo, resource_info
from workloadbuilder.errors import Conflict, NotFound

__all__ = [
    "FOREGROUND",
    "NAMESPACES",
    "PODGROUPS",
    "PODS",
    "TERMINAL",
    "Key",
    "Now",
    "conflict",
    "dig",
    "field_str",
    "info_of",
    "meta_of",
    "not_found",
    "owner_uids",
    "split",
    "timestamp_clock",
    "uid_conflict",
]

#: (namespace or "", name) of a stored object
Key = tuple[str, str]
#: returns the current time as an RFC 3339 timestamp (seconds)
Now = Callable[[], str]

FOREGROUND = "foregroundDeletion"
TERMINAL = ("Succeeded", "Failed")
PODS = ("", "pods")
NAMESPACES = ("", "namespaces")
PODGROUPS = ("scheduling.k8s.io", "podgroups")


def timestamp_clock(clock: Callable[[], float]) -> Now:
    """A :data:`Now` reading ``clock`` (seconds since the epoch)."""

    last: list[Any] = [None, ""]  # the second last formatted, and its text

    def now() -> str:
        second = int(clock() // 1)
        if second != last[0]:  # one strftime per second, not per write
            last[0], last[1] = second, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second))
        return str(last[1])

    return now


def info_of(kind: str | ResourceInfo) -> ResourceInfo:
    """The resource of a kind name; ``NotFound`` for a kind the cluster does not serve."""
    try:
        return resource_info(kind)
    except KeyError as e:
        raise NotFound(str(e.args[0]) if e.args else "unknown kind") from None


def split(path: str) -> tuple[str, ...]:
    """A dotted field path as its parts."""
    return tuple(path.split("."))


def dig(doc: Mapping[str, Any], parts: tuple[str, ...]) -> Any:
    """The value at ``parts`` in ``doc`` (``None`` when any step is missing)."""
    node: Any = doc
    for p in parts:
        if not isinstance(node, dict):
            return None
        node = node.get(p)
        if node is None:
            return None
    return node


def field_str(value: Any) -> str:
    """A field's value as a field selector compares it."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def meta_of(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc["metadata"]``, created when missing or not an object."""
    meta = doc.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
        doc["metadata"] = meta
    return meta


def owner_uids(doc: Mapping[str, Any]) -> list[str]:
    """The uids of an object's ownerReferences."""
    refs = (doc.get("metadata") or {}).get("ownerReferences") or ()
    return [str(r.get("uid")) for r in refs if isinstance(r, dict) and r.get("uid")]


def not_found(info: ResourceInfo, name: str) -> NotFound:
    """The API server's ``NotFound`` (with its Status body)."""
    message = f'{adm.resource_name(info)} "{name}" not found'
    return NotFound(
        message,
        body={
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "message": message,
            "reason": "NotFound",
            "details": {"name": name, "group": info.group, "kind": info.plural},
            "code": 404,
        },
    )


def conflict(info: ResourceInfo, name: str, detail: str) -> Conflict:
    """``Operation cannot be fulfilled on <resource> "<name>": <detail>``."""
    return Conflict(
        f'Operation cannot be fulfilled on {adm.resource_name(info)} "{name}": {detail}'
    )


def uid_conflict(info: ResourceInfo, name: str, given: str, actual: Any) -> Conflict:
    """The conflict of a UID precondition that does not hold."""
    return conflict(
        info,
        name,
        f"Precondition failed: UID in precondition: {given}, UID in object meta: {actual}",
    )
