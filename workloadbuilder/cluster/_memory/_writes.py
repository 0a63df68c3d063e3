"""The write verbs of :class:`MemoryCluster`: create, update (and the status subresource),
patch (merge, JSON, strategic, server-side apply) and delete.

Each verb does what the API server's generic registry does -- names and namespaces,
server-set metadata, resourceVersion and UID preconditions -- and leaves the per-kind work
to :class:`~._strategy.Strategy` and the deletion to :class:`~._lifecycle.Lifecycle`.
The methods return the stored :class:`~._storage.Record`; the facade turns it into what a
client receives.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from workloadbuilder.api import to_dict
from workloadbuilder.cluster._memory import _admission as adm
from workloadbuilder.cluster._memory._apply import apply_paths, merge_apply, track_update
from workloadbuilder.cluster._memory._common import (
    Now,
    conflict,
    meta_of,
    not_found,
    uid_conflict,
)
from workloadbuilder.cluster._memory._lifecycle import Lifecycle
from workloadbuilder.cluster._memory._storage import Record, Storage
from workloadbuilder.cluster._memory._strategy import NEEDS_RV_ON_UPDATE_GROUPS, Strategy
from workloadbuilder.cluster._patch import (
    PatchError,
    json_copy,
    json_merge_patch,
    json_patch,
    strategic_merge_patch,
)
from workloadbuilder.cluster._protocol import (
    KubeObject,
    PatchType,
    Preconditions,
    PropagationPolicy,
    ResourceInfo,
    resource_info,
    resource_of,
)
from workloadbuilder.cluster._selectors import bad_request
from workloadbuilder.errors import AlreadyExists, FieldError, NotFound

__all__ = ["Writes", "ingest"]

_GEN_CHARS = "bcdfghjklmnpqrstvwxz2456789"
_SERVER_FIELDS = (
    "resourceVersion",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
)
_KEPT_ON_UPDATE = (
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "namespace",
    "generation",
)


def ingest(obj: KubeObject) -> tuple[ResourceInfo, dict[str, Any]]:
    """The resource of a client's object and a private JSON copy of it."""
    try:
        info = resource_of(obj)
    except KeyError as e:
        raise NotFound(str(e.args[0]) if e.args else "unknown kind") from None
    doc = json_copy(obj) if isinstance(obj, dict) else json_copy(to_dict(obj))
    if not isinstance(doc, dict):
        raise bad_request("an object must be a JSON object")
    return info, doc


def _ns_of(info: ResourceInfo, namespace: str | None) -> str:
    if not info.namespaced:
        return ""
    return namespace or "default"


class Writes:
    """create / update / patch / delete on ``storage``.

    ``rng`` generates names (``generateName``) and uids; ``now`` stamps
    ``creationTimestamp``."""

    def __init__(
        self,
        storage: Storage,
        strategy: Strategy,
        lifecycle: Lifecycle,
        *,
        now: Now,
        rng: random.Random,
    ) -> None:
        self._storage = storage
        self._strategy = strategy
        self._lifecycle = lifecycle
        self._now = now
        self._rng = rng

    def _new_uid(self) -> str:
        return str(uuid.UUID(int=self._rng.getrandbits(128), version=4))

    # ------------------------------------------------------------------ create

    def create(
        self,
        info: ResourceInfo,
        doc: dict[str, Any],
        namespace: str | None,
        *,
        dry_run: bool = False,
    ) -> Record:
        """Store a new object from ``doc`` (a private copy, changed in place)."""
        storage = self._storage
        store = storage.kind(info)
        meta = meta_of(doc)
        doc["apiVersion"] = doc.get("apiVersion") or info.api_version
        doc["kind"] = info.kind
        if info.namespaced:
            given = meta.get("namespace")
            if namespace and given and given != namespace:
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request"
                )
            ns = namespace or given or "default"
            meta["namespace"] = ns
        else:
            ns = ""
            meta.pop("namespace", None)
        if not meta.get("name") and meta.get("generateName"):
            for _ in range(8):
                candidate = meta["generateName"] + "".join(
                    self._rng.choice(_GEN_CHARS) for _ in range(5)
                )
                if store.get(ns, candidate) is None:
                    break
            meta["name"] = candidate
        name = str(meta.get("name") or "")
        if not name:
            raise adm.invalid(
                info,
                "",
                [
                    FieldError(
                        path="metadata.name",
                        type="Required value",
                        detail="name or generateName is required",
                    )
                ],
            )
        if info.namespaced:
            ns_info = resource_info("Namespace")
            ns_rec = storage.kind(ns_info).get("", ns)
            if ns_rec is None:
                raise not_found(ns_info, ns)
            if ns_rec.doc["metadata"].get("deletionTimestamp"):
                raise adm.forbidden(
                    info,
                    name,
                    f"unable to create new content in namespace {ns} because it is being "
                    "terminated",
                )
        if store.get(ns, name) is not None:
            raise AlreadyExists(f'{adm.resource_name(info)} "{name}" already exists')
        for server_field in _SERVER_FIELDS:
            meta.pop(server_field, None)
        meta["uid"] = self._new_uid()
        meta["creationTimestamp"] = self._now()
        self._strategy.prepare_create(info, name, doc)
        meta = doc["metadata"]
        if dry_run:
            meta.pop("resourceVersion", None)
            return Record(doc, 0)
        rec = storage.insert(store, (ns, name), doc)
        self._lifecycle.claims.created(store.key, (ns, name))  # the ResourceClaim controller
        self._lifecycle.volumes.touched(store.key)  # the PersistentVolume controller
        return rec

    # ------------------------------------------------------------------ update

    def update(
        self,
        info: ResourceInfo,
        doc: dict[str, Any],
        *,
        status_only: bool,
        dry_run: bool,
        manager: str | None,
        track: bool = True,
    ) -> Record:
        """Replace an object (or, ``status_only``, its status) with ``doc``; a stale
        ``metadata.resourceVersion`` raises ``Conflict``."""
        store = self._storage.kind(info)
        meta = meta_of(doc)
        ns = _ns_of(info, meta.get("namespace"))
        name = str(meta.get("name") or "")
        old = store.get(ns, name)
        if old is None:
            raise not_found(info, name)
        old_meta = old.doc["metadata"]
        given_rv = meta.get("resourceVersion")
        if (
            not given_rv
            and not status_only
            and info.group in NEEDS_RV_ON_UPDATE_GROUPS
            and info.plural != "priorityclasses"
        ):
            raise adm.invalid(
                info,
                name,
                [
                    FieldError(
                        path="metadata.resourceVersion",
                        type="Invalid value",
                        detail="must be specified for an update",
                        value=0,
                        has_value=True,
                    )
                ],
            )
        if given_rv and given_rv != old_meta.get("resourceVersion"):
            raise conflict(
                info,
                name,
                "the object has been modified; please apply your changes to the latest version "
                "and try again",
            )
        given_uid = meta.get("uid")
        if given_uid and given_uid != old_meta.get("uid"):
            raise uid_conflict(info, name, given_uid, old_meta.get("uid"))
        if status_only:
            if not info.has_status:
                raise not_found(info, name)
            new = dict(old.doc)
            new["metadata"] = dict(old_meta)
            if "status" in doc:
                new["status"] = doc["status"]
            else:
                new.pop("status", None)
            self._strategy.validate_status(info, name, new)
        else:
            new = doc
            new["apiVersion"] = old.doc.get("apiVersion", info.api_version)
            new["kind"] = info.kind
            for f in _KEPT_ON_UPDATE:
                if f in old_meta:
                    meta[f] = old_meta[f]
                else:
                    meta.pop(f, None)
            meta.pop("managedFields", None)
            if info.has_status:
                if "status" in old.doc:
                    new["status"] = old.doc["status"]
                else:
                    new.pop("status", None)
            if old_meta.get("deletionTimestamp"):
                added = set(meta.get("finalizers") or ()) - set(old_meta.get("finalizers") or ())
                if added:
                    raise adm.invalid(
                        info,
                        name,
                        [
                            FieldError(
                                path="metadata.finalizers",
                                type="Forbidden",
                                detail="no new finalizers can be added if the object is being "
                                f"deleted, found new finalizers {sorted(added)}",
                            )
                        ],
                    )
            self._strategy.prepare_update(info, name, new, old.doc)
        meta = new["metadata"]
        meta["resourceVersion"] = old_meta.get("resourceVersion")
        if new == old.doc:
            return old
        if dry_run:
            return Record(new, old.rv)
        key = (ns, name)
        if track:
            owned = store.managed.get(key)
            if owned is not None:
                track_update(owned, old.doc, new, manager or "unknown")
        return self._lifecycle.commit(store, key, old, new)

    # ------------------------------------------------------------------ patch

    def patch(
        self,
        info: ResourceInfo,
        name: str,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        namespace: str | None,
        *,
        patch_type: PatchType,
        subresource: str | None,
        field_manager: str | None,
        force: bool,
        dry_run: bool,
    ) -> Record:
        """Patch an object or its ``status``."""
        ns = _ns_of(info, namespace)
        if subresource not in (None, "status"):
            raise not_found(info, name)
        if patch_type == "apply":
            return self._apply(
                info, ns, name, patch, subresource, field_manager, force=force, dry_run=dry_run
            )
        _, old = self._storage.require(info, ns, name)
        if subresource == "status" and patch_type != "json" and isinstance(patch, Mapping):
            # Merge and strategic patches change only the top-level fields they name, and a
            # status write keeps everything but status: copy just what the patch touches.
            doc = {k: json_copy(v) if k in patch else v for k, v in old.doc.items()}
        else:
            doc = json_copy(old.doc)
        try:
            if patch_type == "merge":
                if not isinstance(patch, Mapping):
                    raise PatchError("a merge patch must be a JSON object")
                doc = json_merge_patch(doc, patch)
            elif patch_type == "json":
                if isinstance(patch, Mapping):
                    raise PatchError("a JSON patch must be a list of operations")
                doc = json_patch(doc, patch)
            elif patch_type == "strategic":
                doc = strategic_merge_patch(doc, patch)
            else:
                raise bad_request(f"unsupported patch type {patch_type!r}")
        except PatchError as e:
            raise adm.invalid(
                info, name, [FieldError(path="", type="Invalid value", detail=str(e))]
            ) from None
        if not isinstance(doc, dict):
            raise bad_request("the patched object is not a JSON object")
        meta = meta_of(doc)
        if meta.get("name") != name or (info.namespaced and meta.get("namespace") != ns):
            raise bad_request("the name or namespace of an object cannot be changed by a patch")
        return self.update(
            info,
            doc,
            status_only=subresource == "status",
            dry_run=dry_run,
            manager=field_manager,
        )

    def _apply(
        self,
        info: ResourceInfo,
        ns: str,
        name: str,
        patch: Any,
        subresource: str | None,
        manager: str | None,
        *,
        force: bool,
        dry_run: bool,
    ) -> Record:
        if not manager:
            raise bad_request("PATCH requests with apply content type require a field manager")
        if not isinstance(patch, Mapping):
            raise bad_request("an apply configuration must be a JSON object")
        applied = json_copy(patch)
        ameta = meta_of(applied)
        if ameta.get("name") not in (None, name):
            raise bad_request("the name of the object does not match the name on the URL")
        ameta["name"] = name
        if info.namespaced:
            ameta["namespace"] = ns
        store = self._storage.kind(info)
        key = (ns, name)
        old = store.get(ns, name)
        if old is None:
            if subresource == "status":
                raise not_found(info, name)
            applied.setdefault("apiVersion", info.api_version)
            applied.setdefault("kind", info.kind)
            rec = self.create(info, json_copy(applied), ns, dry_run=dry_run)
            if not dry_run:
                store.managed[key] = {p: {manager} for p in apply_paths(applied, subresource)}
            return rec
        # work on a copy: a dry run, a conflict or a rejected write must not change ownership
        merged, owned = merge_apply(
            store.managed.get(key, {}),
            json_copy(old.doc),
            applied,
            manager,
            subresource,
            force=force,
        )
        rec = self.update(
            info,
            merged,
            status_only=subresource == "status",
            dry_run=dry_run,
            manager=None,
            track=False,
        )
        if not dry_run and store.get(ns, name) is not None:  # not finalized by this write
            store.managed[key] = owned
        return rec

    # ------------------------------------------------------------------ delete

    def delete(
        self,
        info: ResourceInfo,
        name: str,
        namespace: str | None,
        *,
        propagation_policy: PropagationPolicy | None,
        preconditions: Preconditions | None,
    ) -> None:
        """Check the preconditions and delete with the propagation policy (default
        Background; Orphan for ``batch/v1`` Jobs)."""
        ns = _ns_of(info, namespace)
        store, rec = self._storage.require(info, ns, name)
        if preconditions is not None:
            meta = rec.doc["metadata"]
            if preconditions.uid is not None and preconditions.uid != meta.get("uid"):
                raise uid_conflict(info, name, preconditions.uid, meta.get("uid"))
            if (
                preconditions.resource_version is not None
                and preconditions.resource_version != meta.get("resourceVersion")
            ):
                raise conflict(
                    info,
                    name,
                    "Precondition failed: ResourceVersion in precondition: "
                    f"{preconditions.resource_version}, ResourceVersion in object meta: "
                    f"{meta.get('resourceVersion')}",
                )
        policy = propagation_policy
        if policy is None:
            policy = "Orphan" if (info.group, info.plural) == ("batch", "jobs") else "Background"
        self._lifecycle.delete(store, (ns, name), rec, policy)
