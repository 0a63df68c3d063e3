"""The ``meta/v1`` parts the SDK needs: ObjectMeta, OwnerReference, Condition."""

from __future__ import annotations

from typing import Any

import attrs

__all__ = ["Condition", "ObjectMeta", "OwnerReference"]


@attrs.frozen(kw_only=True)
class OwnerReference:
    """``metav1.OwnerReference``."""

    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None
    unknown_fields: dict[str, Any] = attrs.field(factory=dict, repr=False)


@attrs.frozen(kw_only=True)
class ObjectMeta:
    """``metav1.ObjectMeta`` (fields the SDK reads; everything else is kept verbatim)."""

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    deletion_grace_period_seconds: int | None = None
    labels: dict[str, str] = attrs.field(factory=dict)
    annotations: dict[str, str] = attrs.field(factory=dict)
    owner_references: tuple[OwnerReference, ...] = ()
    finalizers: tuple[str, ...] = ()
    unknown_fields: dict[str, Any] = attrs.field(factory=dict, repr=False)


@attrs.frozen(kw_only=True)
class Condition:
    """``metav1.Condition``."""

    type: str
    status: str
    reason: str | None = None
    message: str | None = None
    last_transition_time: str | None = None
    observed_generation: int | None = None
    unknown_fields: dict[str, Any] = attrs.field(factory=dict, repr=False)
