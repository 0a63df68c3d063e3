"""Top-level objects by ``apiVersion``/``kind`` and version-aware (de)serialisation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from workloadbuilder.api._codec import CodecError, from_dict, to_dict
from workloadbuilder.api._scheduling import (
    GROUP,
    V1ALPHA3,
    V1BETA1,
    CompositePodGroup,
    PodGroup,
    Workload,
)

__all__ = ["KINDS", "SchedulingObject", "object_from_dict", "object_to_dict"]

SchedulingObject = Workload | PodGroup | CompositePodGroup

#: kind -> (model, the apiVersions that serve it, plural resource name)
KINDS: dict[str, tuple[type[SchedulingObject], tuple[str, ...], str]] = {
    "Workload": (Workload, (V1BETA1, V1ALPHA3), "workloads"),
    "PodGroup": (PodGroup, (V1BETA1, V1ALPHA3), "podgroups"),
    "CompositePodGroup": (CompositePodGroup, (V1ALPHA3,), "compositepodgroups"),
}


def object_from_dict(data: Mapping[str, Any]) -> SchedulingObject:
    """Parse a Workload, PodGroup or CompositePodGroup document by its ``apiVersion``/``kind``.

    Raises :class:`CodecError` for an unknown kind, an apiVersion that does not serve it, or a
    field of the wrong JSON type.
    """
    kind = data.get("kind")
    api_version = data.get("apiVersion")
    if not isinstance(kind, str) or kind not in KINDS:
        raise CodecError("kind", f"unsupported kind {kind!r}; expected one of {sorted(KINDS)}")
    model, versions, _ = KINDS[kind]
    if api_version not in versions:
        raise CodecError(
            "apiVersion",
            f"{kind} is served as {', '.join(versions)}, not {api_version!r}",
        )
    return from_dict(data, model)


def object_to_dict(obj: SchedulingObject, *, api_version: str | None = None) -> dict[str, Any]:
    """Serialise ``obj``; ``api_version`` (``v1beta1``/``v1alpha3`` or a full group/version)
    re-labels Workload and PodGroup, whose schemas are identical in both versions."""
    if api_version is not None:
        full = api_version if "/" in api_version else f"{GROUP}/{api_version}"
        _, versions, _ = KINDS[obj.kind]
        if full not in versions:
            raise ValueError(f"{obj.kind} is not served as {full}")
        obj = attrs.evolve(obj, api_version=full)
    return to_dict(obj)
