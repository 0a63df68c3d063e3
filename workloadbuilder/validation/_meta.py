"""``metadata`` validation: ``ValidateObjectMeta`` / ``ValidateObjectMetaUpdate`` (apimachinery).

The API server fills some metadata before validating, and this module does the same:
a ``generateName`` is turned into a name (the generated suffix here is fixed, upstream it is
random); on update ``uid``, ``creationTimestamp``, ``deletionTimestamp``,
``deletionGracePeriodSeconds`` and ``generation`` are carried over from the old object when
the new one leaves them unset. ``metadata.resourceVersion`` is checked by the storage layer
(Conflict / "must be specified for an update"), not here.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from workloadbuilder.api import ObjectMeta, OwnerReference
from workloadbuilder.errors import FieldError
from workloadbuilder.validation._common import (
    child,
    forbidden,
    index,
    invalid,
    required,
    too_long,
)
from workloadbuilder.validation._names import (
    is_label_value,
    is_qualified_name,
    name_is_dns_label,
)

__all__ = ["generated_name", "validate_object_meta", "validate_object_meta_update"]

NameFn = Callable[[str, bool], list[str]]

_TOTAL_ANNOTATION_SIZE = 256 * (1 << 10)
_GENERATED_SUFFIX = "bcdfg"  # upstream: 5 random characters from "bcdfghjklmnpqrstvwxz2456789"
_ORPHAN = "orphan"
_FOREGROUND = "foregroundDeletion"


def generated_name(generate_name: str) -> str:
    """``names.SimpleNameGenerator`` with a fixed (instead of random) suffix."""
    base = generate_name[:58] if len(generate_name) > 58 else generate_name
    return base + _GENERATED_SUFFIX


def _labels(labels: dict[str, str], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for k in sorted(labels):
        errs.extend(invalid(path, k, m) for m in is_qualified_name(k))
        v = labels[k]
        errs.extend(invalid(path, v, m) for m in is_label_value(v))
    return errs


def _annotations(annotations: dict[str, str], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for k in sorted(annotations):
        errs.extend(invalid(path, k, m) for m in is_qualified_name(k.lower()))
    size = sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())
    if size > _TOTAL_ANNOTATION_SIZE:
        errs.append(too_long(path, _TOTAL_ANNOTATION_SIZE))
    return errs


def _group_version_ok(api_version: str) -> bool:
    # schema.ParseGroupVersion: "" | "v" | "g/v"; more slashes is an error; version required.
    parts = api_version.split("/")
    if len(parts) == 1:
        return bool(parts[0])
    if len(parts) == 2:
        return bool(parts[1])
    return False


def _owner_reference(ref: OwnerReference, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    if not ref.api_version:
        errs.append(required(child(path, "apiVersion"), "must not be empty"))
    elif not _group_version_ok(ref.api_version):
        errs.append(
            invalid(
                child(path, "apiVersion"), ref.api_version, "must be <group>/<version> or <version>"
            )
        )
    if not ref.kind:
        errs.append(required(child(path, "kind"), "must not be empty"))
    if not ref.name:
        errs.append(required(child(path, "name"), "must not be empty"))
    if not ref.uid:
        errs.append(required(child(path, "uid"), "must not be empty"))
    if ref.api_version == "v1" and ref.kind == "Event":
        errs.append(invalid(path, ref, "/v1, Kind=Event is disallowed from being an owner"))
    return errs


def _owner_references(refs: tuple[OwnerReference, ...], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    first = ""
    for i, ref in enumerate(refs):
        errs.extend(_owner_reference(ref, index(path, i)))
        if ref.controller:
            current = f"{ref.kind}/{ref.name}"
            if first:
                errs.append(
                    invalid(
                        path,
                        list(refs),
                        'Only one reference can have Controller set to true. Found "true" in '
                        f"references for {first} and {current}",
                    )
                )
            else:
                first = current
    return errs


def _finalizers(finalizers: tuple[str, ...], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for f in finalizers:
        errs.extend(invalid(path, f, m) for m in is_qualified_name(f))
    if _ORPHAN in finalizers and _FOREGROUND in finalizers:
        errs.append(
            invalid(
                path,
                list(finalizers),
                f"finalizer {_ORPHAN} and {_FOREGROUND} cannot be both set",
            )
        )
    return errs


def _common(meta: ObjectMeta, path: str, *, namespaced: bool = True) -> list[FieldError]:
    errs: list[FieldError] = []
    ns = meta.namespace or ""
    if namespaced:
        if not ns:
            errs.append(required(child(path, "namespace")))
        else:
            errs.extend(
                invalid(child(path, "namespace"), ns, m) for m in name_is_dns_label(ns, False)
            )
    elif ns:
        errs.append(forbidden(child(path, "namespace"), "not allowed on this type"))
    if meta.generation is not None and meta.generation < 0:
        errs.append(
            invalid(
                child(path, "generation"), meta.generation, "must be greater than or equal to 0"
            )
        )
    errs.extend(_labels(meta.labels, child(path, "labels")))
    errs.extend(_annotations(meta.annotations, child(path, "annotations")))
    errs.extend(_owner_references(meta.owner_references, child(path, "ownerReferences")))
    return errs


def validate_object_meta(
    meta: ObjectMeta, name_fn: NameFn, path: str = "metadata"
) -> list[FieldError]:
    """``ValidateObjectMeta(meta, requiresNamespace=true, nameFn)`` after name generation."""
    errs: list[FieldError] = []
    generate = meta.generate_name or ""
    name = meta.name or ""
    if generate:
        errs.extend(
            invalid(child(path, "generateName"), generate, m) for m in name_fn(generate, True)
        )
        if not name:
            name = generated_name(generate)
    if not name:
        errs.append(required(child(path, "name"), "name or generateName is required"))
    else:
        errs.extend(invalid(child(path, "name"), name, m) for m in name_fn(name, False))
    errs.extend(_common(meta, path))
    errs.extend(_finalizers(meta.finalizers, child(path, "finalizers")))
    return errs


def validate_object_meta_update(
    new: ObjectMeta, old: ObjectMeta, path: str = "metadata"
) -> list[FieldError]:
    """``ValidateObjectMetaUpdate`` after ``rest.BeforeUpdate`` copied the system fields."""
    errs: list[FieldError] = []
    if old.deletion_timestamp is not None:
        extra = sorted(set(new.finalizers) - set(old.finalizers))
        if extra:
            rendered = "[]string{" + ", ".join(json.dumps(f) for f in extra) + "}"
            errs.append(
                forbidden(
                    child(path, "finalizers"),
                    "no new finalizers can be added if the object is being deleted, "
                    f"found new finalizers {rendered}",
                )
            )
    if (new.name or "") != (old.name or ""):
        errs.append(invalid(child(path, "name"), new.name or "", "field is immutable"))
    if (new.namespace or "") != (old.namespace or ""):
        errs.append(invalid(child(path, "namespace"), new.namespace or "", "field is immutable"))
    uid = new.uid or old.uid or ""
    if uid != (old.uid or ""):
        errs.append(invalid(child(path, "uid"), uid, "field is immutable"))
    deletion = (
        old.deletion_timestamp if old.deletion_timestamp is not None else new.deletion_timestamp
    )
    if deletion != old.deletion_timestamp:
        errs.append(invalid(child(path, "deletionTimestamp"), deletion, "field is immutable"))
    grace = new.deletion_grace_period_seconds
    if grace is None:
        grace = old.deletion_grace_period_seconds
    if grace != old.deletion_grace_period_seconds:
        errs.append(invalid(child(path, "deletionGracePeriodSeconds"), grace, "field is immutable"))
    errs.extend(_labels(new.labels, child(path, "labels")))
    errs.extend(_annotations(new.annotations, child(path, "annotations")))
    errs.extend(_owner_references(new.owner_references, child(path, "ownerReferences")))
    return errs
