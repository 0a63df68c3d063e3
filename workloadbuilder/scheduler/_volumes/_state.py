"""The volume state the volume plugins share (as the DRA manager is for DynamicResources):
what the informers deliver (PersistentVolumes, PersistentVolumeClaims, StorageClasses,
CSINodes, CSIDrivers, VolumeAttachments), the volume bindings this scheduler decided and
has not seen from the informers yet (upstream's assume caches), and the bindings the current
cycle made tentatively (on the snapshot's undo log).

The scheduler owns one and feeds it (``on_<kind>`` handlers, ``previous`` for the queueing
hints); the framework hands it to the plugins that take it (``use_volume_state``).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import secrets
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import attrs

from workloadbuilder.scheduler._volumes._match import ANN_BOUND_BY_CONTROLLER, meta

if TYPE_CHECKING:
    from workloadbuilder.scheduler._cache import Cache, PodInfo

__all__ = ["Assumed", "ClaimKey", "VolumeState"]

ClaimKey = tuple[str, str]
Handler = Callable[[str, Any], None]


@attrs.define(slots=True, eq=False)
class Assumed:
    """An object as this scheduler decided it (a PV's ``claimRef``, a claim's selected
    node), kept until the informer delivers a version other than ``base`` (the one it was
    decided from): then the server's version is the truth again."""

    obj: dict[str, Any]
    base: str


def _rv(obj: Any) -> str:
    return str(meta(obj).get("resourceVersion") or "") if isinstance(obj, dict) else ""


class VolumeState:
    """Volume objects shared by the scheduler's informers and the volume plugins."""

    def __init__(self, cache: Cache | None = None) -> None:
        #: the scheduler's cache (pods counted on nodes)
        self.cache: Cache | None = cache
        self.pvs: dict[str, dict[str, Any]] = {}
        self.pvcs: dict[ClaimKey, dict[str, Any]] = {}
        self.classes: dict[str, dict[str, Any]] = {}
        self.csi_nodes: dict[str, dict[str, Any]] = {}
        self.csi_drivers: dict[str, dict[str, Any]] = {}
        self.attachments: dict[str, dict[str, Any]] = {}
        self.assumed_pvs: dict[str, Assumed] = {}
        self.assumed_pvcs: dict[ClaimKey, Assumed] = {}
        #: the current cycle's tentative choices: PV -> claim, claim -> node (provisioning)
        self.tentative_pvs: dict[str, ClaimKey] = {}
        self.tentative_pvcs: dict[ClaimKey, str] = {}
        #: incremented on every change the plugins' verdicts may depend on
        self.version = 0
        #: the prefix of the handles NodeVolumeLimits gives volumes still to be provisioned
        self.volume_id_prefix = secrets.token_hex(16)
        self._changed: asyncio.Event | None = None
        self._rows: tuple[int, int, dict[int, list[PodInfo]]] = (-1, -1, {})

    def bind_cache(self, cache: Cache) -> None:
        """The scheduler's cache (pods counted on nodes)."""
        self.cache = cache

    # ---- informers -------------------------------------------------------------------

    def _touch(self) -> None:
        self.version += 1
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    async def wait_changed(self, timeout: float) -> None:
        """Until an informer delivers a change (or ``timeout`` seconds pass)."""
        if self._changed is None:
            self._changed = asyncio.Event()
        ev = self._changed
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(ev.wait(), timeout)

    def _fold(
        self,
        store: dict[Any, dict[str, Any]],
        key: Callable[[dict[str, Any]], Any],
        kind: str,
        obj: Any,
        assumed: dict[Any, Assumed] | None = None,
    ) -> None:
        if kind == "SYNC":
            store.clear()
            for o in obj:
                if isinstance(o, dict):
                    store[key(o)] = o
            if assumed is not None:
                for k in [k for k, a in assumed.items() if _rv(store.get(k)) != a.base]:
                    del assumed[k]
        else:
            k = key(obj)
            if kind == "DELETED":
                store.pop(k, None)
            else:
                store[k] = obj
            if assumed is not None:
                a = assumed.get(k)
                if a is not None and (kind == "DELETED" or _rv(obj) != a.base):
                    del assumed[k]
        self._touch()

    def previous(self, resource: str) -> Callable[[str, Any], Any]:
        """The version of a ``resource`` object known before an event (queueing hints)."""
        store = self._store(resource)

        def prev(kind: str, obj: Any) -> Any:
            if kind == "SYNC" or not isinstance(obj, dict):
                return None
            return store.get(self._key(resource, obj))

        return prev

    def _store(self, resource: str) -> dict[Any, dict[str, Any]]:
        return {  # type: ignore[return-value]
            "PersistentVolume": self.pvs,
            "PersistentVolumeClaim": self.pvcs,
            "StorageClass": self.classes,
            "CSINode": self.csi_nodes,
            "CSIDriver": self.csi_drivers,
            "VolumeAttachment": self.attachments,
        }[resource]

    @staticmethod
    def _key(resource: str, obj: dict[str, Any]) -> Any:
        m = meta(obj)
        if resource == "PersistentVolumeClaim":
            return (str(m.get("namespace") or "default"), str(m.get("name")))
        return str(m.get("name"))

    def handler(self, resource: str) -> Handler:
        """The informer handler of ``resource`` (one of the six kinds this state keeps)."""
        store = self._store(resource)
        assumed: dict[Any, Assumed] | None = None
        if resource == "PersistentVolume":
            assumed = self.assumed_pvs
        elif resource == "PersistentVolumeClaim":
            assumed = self.assumed_pvcs

        def handle(kind: str, obj: Any) -> None:
            self._fold(store, lambda o: self._key(resource, o), kind, obj, assumed)

        return handle

    # ---- effective objects -----------------------------------------------------------

    def pv(self, name: str) -> dict[str, Any] | None:
        """A PersistentVolume as this scheduler sees it (assumed binding included)."""
        a = self.assumed_pvs.get(name)
        return a.obj if a is not None else self.pvs.get(name)

    def pvc(self, key: ClaimKey) -> dict[str, Any] | None:
        """A PersistentVolumeClaim as this scheduler sees it (assumed selected node
        included)."""
        a = self.assumed_pvcs.get(key)
        return a.obj if a is not None else self.pvcs.get(key)

    def volumes(self) -> Iterator[dict[str, Any]]:
        """Every PersistentVolume as this scheduler sees it."""
        for name, pv in self.pvs.items():
            a = self.assumed_pvs.get(name)
            yield a.obj if a is not None else pv

    def taken(self, pv: str) -> ClaimKey | None:
        """The claim the current cycle chose ``pv`` for, if any."""
        return self.tentative_pvs.get(pv)

    # ---- the cycle's tentative bindings ----------------------------------------------

    def reserve(
        self, bindings: list[tuple[str, ClaimKey]], provisions: list[tuple[ClaimKey, str]]
    ) -> Callable[[], None]:
        """Take ``bindings`` (PV, claim) and ``provisions`` (claim, node) tentatively;
        returns their undo."""
        for pv, claim in bindings:
            self.tentative_pvs[pv] = claim
        for claim, node in provisions:
            self.tentative_pvcs[claim] = node
        self.version += 1

        def undo() -> None:
            for pv, _ in bindings:
                self.tentative_pvs.pop(pv, None)
            for claim, _ in provisions:
                self.tentative_pvcs.pop(claim, None)
            self.version += 1

        return undo

    def assume_binding(self, pv_name: str, claim: dict[str, Any]) -> None:
        """Keep ``pv_name`` bound to ``claim`` (its ``claimRef``) until the informer shows a
        newer version (upstream's ``GetBindVolumeToClaim`` + the PV assume cache)."""
        pv = self.pv(pv_name)
        if pv is None:
            return
        new = copy.deepcopy(pv)
        m = meta(claim)
        new.setdefault("spec", {})["claimRef"] = {
            "kind": "PersistentVolumeClaim",
            "apiVersion": "v1",
            "namespace": m.get("namespace"),
            "name": m.get("name"),
            "uid": m.get("uid"),
            "resourceVersion": m.get("resourceVersion"),
        }
        anns = new.setdefault("metadata", {}).setdefault("annotations", {})
        anns.setdefault(ANN_BOUND_BY_CONTROLLER, "yes")
        base = self.assumed_pvs[pv_name].base if pv_name in self.assumed_pvs else _rv(pv)
        self.assumed_pvs[pv_name] = Assumed(new, base)
        self.version += 1

    def assume_selected_node(self, key: ClaimKey, annotation: str, node: str) -> None:
        """Keep ``key`` annotated with its selected node until the informer shows a newer
        version."""
        pvc = self.pvc(key)
        if pvc is None:
            return
        new = copy.deepcopy(pvc)
        new.setdefault("metadata", {}).setdefault("annotations", {})[annotation] = node
        base = self.assumed_pvcs[key].base if key in self.assumed_pvcs else _rv(pvc)
        self.assumed_pvcs[key] = Assumed(new, base)
        self.version += 1

    def forget_pv(self, name: str) -> None:
        """Drop an assumed PV binding."""
        if self.assumed_pvs.pop(name, None) is not None:
            self.version += 1

    def forget_pvc(self, key: ClaimKey) -> None:
        """Drop an assumed selected node."""
        if self.assumed_pvcs.pop(key, None) is not None:
            self.version += 1

    # ---- pods with volumes on nodes --------------------------------------------------

    def pods_by_row(self) -> dict[int, list[PodInfo]]:
        """The counted pods (bound or assumed) that have volumes, by node row (one walk per
        change of the cache's counted pods)."""
        cache = self.cache
        if cache is None:
            return {}
        token = (id(cache), cache.version)
        if self._rows[:2] != token:
            rows: dict[int, list[PodInfo]] = {}
            for p in cache.running.values():
                c = p.constraints
                if c is not None and c.volumes and p.counted_node is not None:
                    rows.setdefault(p.counted_node, []).append(p)
            self._rows = (token[0], token[1], rows)
        return self._rows[2]
