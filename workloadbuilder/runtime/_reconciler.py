"""The generic integration controller: for every object of a registered
:class:`~workloadbuilder.kinds.Integration`'s kind, make the cluster hold exactly the
Workload, CompositePodGroups and PodGroups of its :class:`~workloadbuilder.kinds.Plan`.

One :class:`Reconciler` serves one integration. It watches (through
:class:`~workloadbuilder.runtime.Feed`) the owner kind, Workloads, PodGroups,
CompositePodGroups and, for preemption events, Pods; every change is mapped to the key
``<namespace>/<owner name>`` of the owner it concerns (the controller ownerReference of an
owned object, the group of a pod) and queued in a :class:`WorkQueue` (dedup, per-key
exponential backoff, never two workers on one key). A reconcile of one key:

1. owner gone or being deleted: delete every object it controls (PodGroups, then
   CompositePodGroups leaves first, then the Workload) -- the garbage collector would do it
   too, but not on a cluster without kube-controller-manager, and never for objects whose
   owner never existed;
2. ``plan(owner)`` (a delegating child -- :class:`~workloadbuilder.kinds.DelegatedGroups` --
   is planned from its parent's Workload, and waits for it);
3. objects controlled by an earlier incarnation of the owner (same name, other uid) are
   deleted;
4. create-or-get, in the upstream order: the Workload (then its uid goes into the PodGroups'
   ownerReferences), CompositePodGroups root first, PodGroups. ``AlreadyExists`` re-reads the
   object; an existing object without a controller is adopted (our controller reference is
   added, with the read resourceVersion as precondition) -- unless the integration says
   ``adopt_ownerless = False`` (:class:`~workloadbuilder.kinds.OwnerlessObjects`; Job and
   JobSet, as their upstream controllers): then it is left alone, the reconcile fails and
   is retried with backoff (a ``FailedWorkloadCreate`` event for a Workload) until the name
   is free, and so is one controlled by someone else; for the other integrations that one is
   left alone with a ``Warning`` event;
5. the plan's minCount patches (elastic resize) for the objects whose live ``minCount``
   differs;
6. objects the owner controls that the plan no longer has are deleted;
7. status mirroring: ``GangScheduled`` / ``GangUnschedulable`` (with the scheduler's
   message) events on the owner from each PodGroup's ``PodGroupInitiallyScheduled``
   condition, ``GangPreempted`` from its pods' ``DisruptionTarget`` condition.

API errors are retried with the key's backoff; invalid owners get one
``FailedWorkloadCompilation`` event per distinct message and are not retried until they
change. Names are deterministic (the adapters'), so a restart at any point finds what it
created and continues.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from workloadbuilder.api import CompositePodGroup, PodGroup, Workload, to_dict
from workloadbuilder.builder import Plan
from workloadbuilder.cluster import Cluster, KubeObject, ResourceInfo, resource_info
from workloadbuilder.errors import (
    AlreadyExists,
    ApiError,
    BuildError,
    Conflict,
    Invalid,
    NotFound,
    ValidationError,
)
from workloadbuilder.kinds import (
    DelegatedGroups,
    Integration,
    NotManagedError,
    OwnerConditions,
    OwnerlessObjects,
)
from workloadbuilder.runtime._clock import Clock, WallClock
from workloadbuilder.runtime._feed import Feed, settle
from workloadbuilder.runtime._owned import (
    CONDITION_GANG_SCHEDULED,
    CONDITION_INITIALLY_SCHEDULED,
    EVENT_FAILED_COMPILATION,
    EVENT_FAILED_WORKLOAD_CREATE,
    EVENT_GANG_PREEMPTED,
    EVENT_GANG_SCHEDULED,
    EVENT_GANG_UNSCHEDULABLE,
    EVENT_NAME_CONFLICT,
    ObjKey,
    Outcome,
    OwnerRef,
    ReconcileResult,
    api_group,
    gang_min,
    kind_of,
    meta_of,
    templates_of,
)
from workloadbuilder.runtime._ownerstatus import OwnerStatusRecorder
from workloadbuilder.runtime._workqueue import WorkQueue

__all__ = [
    "CONDITION_GANG_SCHEDULED",
    "CONDITION_INITIALLY_SCHEDULED",
    "EVENT_FAILED_COMPILATION",
    "EVENT_FAILED_WORKLOAD_CREATE",
    "EVENT_GANG_PREEMPTED",
    "EVENT_GANG_SCHEDULED",
    "EVENT_GANG_UNSCHEDULABLE",
    "ReconcileResult",
    "Reconciler",
]

_log = logging.getLogger(__name__)


_OWNED_KINDS = ("Workload", "CompositePodGroup", "PodGroup")
#: how long a delegating child waits before looking for its parent's Workload again
_PARENT_RETRY = 1.0


class Reconciler(OwnerStatusRecorder):
    """Keeps the scheduling objects of every object of ``integration``'s kind in line with
    its plan (see the module docstring). A :class:`~workloadbuilder.runtime.Component`.

    * ``resource``: where the owner kind is served (default: the registered
      :class:`~workloadbuilder.cluster.ResourceInfo` of the integration's GVK; register a
      CRD's with :func:`~workloadbuilder.cluster.register_resource`).
    * ``plan_options(owner)``: extra keyword arguments for ``integration.plan``.
    * ``watch_pods``: watch Pods for ``DisruptionTarget`` (preemption events).
    * ``component``: ``reportingComponent`` of the events and the field manager of writes.
    """

    def __init__(
        self,
        cluster: Cluster,
        integration: Integration,
        *,
        resource: ResourceInfo | None = None,
        plan_options: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None,
        watch_pods: bool = True,
        component: str = "workloadbuilder-integrations",
        clock: Clock | None = None,
        base_delay: float = 0.005,
        max_delay: float = 300.0,
    ) -> None:
        self.cluster = cluster
        self.integration = integration
        gvk = integration.gvk
        self.resource = resource or resource_info(gvk.kind, gvk.api_version)
        self.conditions = isinstance(integration, OwnerConditions)
        if self.conditions and integration.conditions_path != "status.conditions":  # type: ignore[attr-defined]
            raise ValueError(
                f"{gvk}: conditions_path {integration.conditions_path!r} is not supported "  # type: ignore[attr-defined]
                "(only 'status.conditions')"
            )
        #: whether an existing object of a planned name without a controller is adopted
        self.adopt_ownerless = (
            bool(integration.adopt_ownerless) if isinstance(integration, OwnerlessObjects) else True
        )
        self.plan_options = plan_options
        self.watch_pods = watch_pods
        self.component = component
        self.clock: Clock = clock or WallClock()
        self.queue = WorkQueue(base_delay=base_delay, max_delay=max_delay, clock=self.clock)
        self.feeds: list[Feed] = []
        #: owner key -> owner object
        self.owners: dict[str, dict[str, Any]] = {}
        #: (kind, namespace, name) -> live Workload / PodGroup / CompositePodGroup
        self.objects: dict[ObjKey, KubeObject] = {}
        #: pod group key "ns/name" -> pods in it that carry a DisruptionTarget=True condition
        self.disrupted: dict[str, dict[str, str]] = {}
        #: the last plan of each owner key (the webhook reads it)
        self.plans: dict[str, Plan] = {}
        self._reported: dict[tuple[str, str], tuple[str, str, str]] = {}
        self._reported_preempted: dict[tuple[str, str], frozenset[str]] = {}
        self._compile_errors: dict[str, str] = {}
        #: owner key -> objects it was seen to control (they may lose the reference when the
        #: owner is deleted with the Orphan policy, the default of batch/v1 Jobs)
        self._known: dict[str, set[ObjKey]] = {}
        #: owner key -> keys of the objects it controls, and back
        self._by_owner: dict[str, set[ObjKey]] = {}
        self._owner_of: dict[ObjKey, str] = {}
        #: owner key -> resourceVersion at which it was found not managed (the webhook skips it)
        self._unmanaged: dict[str, str] = {}
        #: delegating children: (namespace, parent kind, parent name) -> owner keys, and back
        self._children: dict[tuple[str, str, str], set[str]] = {}
        self._parent_of: dict[str, tuple[tuple[str, str, str], ...]] = {}
        self._workers: list[asyncio.Task[None]] = []
        self.reconciles = 0
        self.errors = 0
        self.started = False

    # ---- ownership -------------------------------------------------------------------

    def _is_owner_ref(self, ref: OwnerRef) -> bool:
        gvk = self.integration.gvk
        return ref.controller and ref.kind == gvk.kind and api_group(ref.api_version) == gvk.group

    def owner_key_of(self, obj: KubeObject) -> str | None:
        """The key of the owner of our kind that controls ``obj``, or None."""
        meta = meta_of(obj)
        ns, refs = meta.namespace, meta.owner_refs
        for ref in refs:
            if self._is_owner_ref(ref):
                return f"{ns}/{ref.name}"
        return None

    def _controller_uid(self, obj: KubeObject) -> str | None:
        for ref in meta_of(obj).owner_refs:
            if self._is_owner_ref(ref):
                return ref.uid
        return None

    def _leftovers(self, key: str) -> list[KubeObject]:
        """What the gone owner ``key`` leaves behind: the objects it controls, the objects it
        was seen to control that have no controller any more (orphaned), and -- for an
        integration that adopts ownerless objects -- the Workloads whose
        ``spec.controllerRef`` names it and have no controller, and their uncontrolled
        groups."""
        ns, _, name = key.partition("/")
        gvk = self.integration.gvk
        found: dict[ObjKey, KubeObject] = {}
        for o in self.owned(key):
            found[(kind_of(o), ns, meta_of(o).name)] = o

        def uncontrolled(o: KubeObject) -> bool:
            return not any(r.controller for r in meta_of(o).owner_refs)

        for k in self._known.get(key, set()):
            seen = self.objects.get(k)
            if seen is not None and uncontrolled(seen):
                found[k] = seen
        workloads: set[str] = set()
        if not self.adopt_ownerless:
            # never-controlled objects are not ours, even when they name the owner (a
            # user's pre-created Workload): only what it controlled, or was seen to control
            return list(found.values())
        for (kind, n, wl_name), o in self.objects.items():
            if kind != "Workload" or n != ns or not isinstance(o, Workload):
                continue
            ref = o.spec.controller_ref
            if (
                ref is not None
                and ref.kind == gvk.kind
                and (ref.api_group or "") == gvk.group
                and ref.name == name
                and (uncontrolled(o) or self.owner_key_of(o) == key)
            ):
                workloads.add(wl_name)
                found[(kind, n, wl_name)] = o
        for (kind, n, obj_name), o in self.objects.items():
            if n != ns or not isinstance(o, PodGroup | CompositePodGroup) or not uncontrolled(o):
                continue
            wref = o.spec.workload_ref
            if wref is not None and wref.workload_name in workloads:
                found[(kind, n, obj_name)] = o
        return list(found.values())

    def owned(self, key: str) -> list[KubeObject]:
        """The live objects controlled by the owner ``key`` (any incarnation)."""
        return [self.objects[k] for k in sorted(self._by_owner.get(key, ())) if k in self.objects]

    def _store(self, k: ObjKey, obj: KubeObject) -> None:
        self._drop(k)
        self.objects[k] = obj
        owner = self.owner_key_of(obj)
        if owner is not None:
            self._by_owner.setdefault(owner, set()).add(k)
            self._owner_of[k] = owner

    def _drop(self, k: ObjKey) -> None:
        self.objects.pop(k, None)
        owner = self._owner_of.pop(k, None)
        if owner is not None:
            keys = self._by_owner.get(owner)
            if keys is not None:
                keys.discard(k)
                if not keys:
                    del self._by_owner[owner]

    # ---- event handlers --------------------------------------------------------------

    def _on_owner(self, event: str, obj: Any) -> None:
        items = obj if event == "SYNC" else [obj]
        for o in items:
            meta = meta_of(o)
            name, ns = meta.name, meta.namespace
            key = f"{ns}/{name}"
            for parent in self._parent_of.pop(key, ()):
                self._children.get(parent, set()).discard(key)
            if event == "DELETED":
                self.owners.pop(key, None)
                self._unmanaged.pop(key, None)
            else:
                self.owners[key] = o
                if self._delegated(o) is not None:
                    for ref in meta_of(o).owner_refs:
                        if ref.controller:
                            parent = (ns, ref.kind, ref.name)
                            self._children.setdefault(parent, set()).add(key)
                            self._parent_of[key] = (parent,)
            self.queue.add(key)

    def _on_object(self, event: str, obj: Any) -> None:
        items = obj if event == "SYNC" else [obj]
        for o in items:
            meta = meta_of(o)
            name, ns = meta.name, meta.namespace
            k = (kind_of(o), ns, name)
            if event == "DELETED":
                self._drop(k)
            else:
                self._store(k, o)
            owner = self.owner_key_of(o)
            if owner is not None:
                self._known.setdefault(owner, set()).add(k)
                self.queue.add(owner)
            elif isinstance(o, Workload) and o.spec.controller_ref is not None:
                # a parent-owned Workload: the children that delegate to it plan from it
                ref = o.spec.controller_ref
                for key in self._children.get((ns, ref.kind, ref.name), ()):
                    self.queue.add(key)

    def _on_pod(self, event: str, obj: Any) -> None:
        items = obj if event == "SYNC" else [obj]
        for pod in items:
            if not isinstance(pod, dict):
                continue
            meta = pod.get("metadata") or {}
            group = ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
            if not group:
                continue
            gkey = f"{meta.get('namespace') or ''}/{group}"
            uid = str(meta.get("uid") or meta.get("name"))
            cond = next(
                (
                    c
                    for c in (pod.get("status") or {}).get("conditions") or []
                    if isinstance(c, Mapping) and c.get("type") == "DisruptionTarget"
                ),
                None,
            )
            if event == "DELETED" or cond is None or cond.get("status") != "True":
                if event == "DELETED" and gkey in self.disrupted:
                    self.disrupted[gkey].pop(uid, None)
                    if not self.disrupted[gkey]:
                        del self.disrupted[gkey]
                continue
            pods = self.disrupted.setdefault(gkey, {})
            if uid in pods:
                continue
            pods[uid] = str(cond.get("message") or cond.get("reason") or "")
            pg = self.objects.get(("PodGroup", str(meta.get("namespace") or ""), str(group)))
            owner = self.owner_key_of(pg) if pg is not None else None
            if owner is not None:
                self.queue.add(owner)

    # ---- Component -------------------------------------------------------------------

    async def start(self) -> None:
        """Start the feeds (owner kind, Workloads, CompositePodGroups, PodGroups, Pods)."""
        feeds = [
            Feed(self.cluster, "Workload", self._on_object),
            Feed(self.cluster, "CompositePodGroup", self._on_object, optional=True),
            Feed(self.cluster, "PodGroup", self._on_object),
        ]
        if self.watch_pods:
            feeds.append(Feed(self.cluster, "Pod", self._on_pod))
        feeds.append(Feed(self.cluster, self.resource, self._on_owner))
        for feed in feeds:
            await feed.start()
        self.feeds = feeds
        self.started = True

    async def stop(self) -> None:
        """Stop the workers and the feeds."""
        self.queue.shut_down()
        for task in self._workers:
            task.cancel()
        for task in self._workers:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._workers.clear()
        for feed in self.feeds:
            await feed.stop()
        self.feeds = []
        self.started = False

    async def sync(self) -> None:
        """Let the feeds deliver everything the cluster has sent so far."""
        await settle(self.feeds)

    async def until_idle(self) -> int:
        """Reconcile every key that is due now (and what those reconciles cause); returns
        the number of reconciles."""
        done = 0
        while True:
            await self.sync()
            key = self.queue.pop_ready()
            if key is None:
                return done
            await self._process(key)
            done += 1

    def next_wakeup(self) -> float | None:
        """When the next delayed key (a backoff, a parent wait) is due."""
        return self.queue.next_wakeup()

    async def run(self, *, workers: int = 1) -> None:
        """``start()`` (unless started), then process the queue with ``workers`` workers
        until cancelled or :meth:`stop`."""
        if not self.started:
            await self.start()
        self._workers = [asyncio.create_task(self._worker()) for _ in range(max(1, workers))]
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*self._workers)

    async def _worker(self) -> None:
        while True:
            key = await self.queue.get()
            if key is None:
                return
            await self._process(key)

    async def _process(self, key: str) -> None:
        try:
            result = await self.reconcile(key)
        except (ApiError, OSError) as e:
            self.errors += 1
            _log.info("reconcile %s %s failed (retrying): %s", self.resource.kind, key, e)
            self.queue.add_rate_limited(key)
        except Exception:
            self.errors += 1
            _log.exception("reconcile %s %s failed", self.resource.kind, key)
            self.queue.add_rate_limited(key)
        else:
            self.queue.forget(key)
            if result.requeue_after is not None:
                self.queue.add_after(key, result.requeue_after)
        finally:
            self.reconciles += 1
            self.queue.done(key)

    # ---- reconcile -------------------------------------------------------------------

    def _delegated(self, owner: Mapping[str, Any]) -> str | None:
        if not isinstance(self.integration, DelegatedGroups):
            return None
        try:
            return self.integration.delegated_template(owner)
        except BuildError:
            return None

    def _plan(self, owner: Mapping[str, Any]) -> Plan | None:
        """The owner's plan; None when a delegating child's parent Workload is missing."""
        if self._delegated(owner) is not None:
            assert isinstance(self.integration, DelegatedGroups)
            ns = meta_of(dict(owner)).namespace
            workloads = [o for (k, n, _), o in self.objects.items() if k == "Workload" and n == ns]
            parent = self.integration.find_parent_workload(
                owner, [w for w in workloads if isinstance(w, Workload)]
            )
            if parent is None:
                return None
            return self.integration.plan_delegated(owner, parent)
        options = dict(self.plan_options(owner)) if self.plan_options is not None else {}
        return self.integration.plan(owner, **options)

    async def reconcile(self, key: str) -> ReconcileResult:
        """Bring the objects of the owner ``key`` (``<namespace>/<name>``) in line; raises
        ``ApiError`` for errors worth a retry."""
        out = Outcome()
        owner = self.owners.get(key)
        if owner is None or meta_of(owner).deletion_timestamp:
            await self._delete_all(self._leftovers(key), out)
            self.plans.pop(key, None)
            self._known.pop(key, None)
            self._forget_status(key)
            return out.result()
        meta = meta_of(owner)
        ns, uid = meta.namespace, meta.uid
        try:
            plan = self._plan(owner)
        except NotManagedError:
            self.plans.pop(key, None)
            return out.result()
        except (ValidationError, BuildError) as e:
            self.plans.pop(key, None)
            await self._compile_failed(key, owner, str(e), out)
            return out.result()
        if plan is None:
            out.requeue_after = _PARENT_RETRY
            return out.result()
        self._compile_errors.pop(key, None)

        # objects of an earlier incarnation of the owner (same name, other uid)
        stale = [o for o in self.owned(key) if uid and self._controller_uid(o) != uid]
        await self._delete_all(stale, out)

        if plan.owns_workload:
            live = await self._ensure(plan.workload, owner, out)
            if live is None:
                return out.result()
            wl_uid = meta_of(live).uid
            if wl_uid:
                plan = plan.with_workload_uid(wl_uid)
        groups: list[CompositePodGroup | PodGroup] = [
            *plan.composite_pod_groups,
            *plan.pod_groups,
        ]
        for obj in groups:
            await self._ensure(obj, owner, out)
        self.plans[key] = plan

        await self._apply_patches(plan, out, owner)

        wanted = {(o.kind, ns, o.metadata.name or "") for o in plan.objects()}
        extra = [
            o
            for o in self.owned(key)
            if (kind_of(o), ns, meta_of(o).name) not in wanted and self._controller_uid(o) == uid
        ]
        await self._delete_all(extra, out)
        await self._mirror_status(owner, plan, out)
        return out.result()

    async def _ensure(
        self,
        desired: Workload | PodGroup | CompositePodGroup,
        owner: Mapping[str, Any],
        out: Outcome,
    ) -> KubeObject | None:
        """Create-or-get (and adopt) one object; the live object, or None when another
        controller holds the name."""
        ns = desired.metadata.namespace or ""
        name = desired.metadata.name or ""
        k: ObjKey = (desired.kind, ns, name)
        live = self.objects.get(k)
        if live is None:
            try:
                created = await self.cluster.create(desired, ns, field_manager=self.component)
            except AlreadyExists:
                created = await self.cluster.get(desired.kind, name, ns)
            else:
                out.created.append(k)
                self._store(k, created)
                return created
            live = created
            self._store(k, live)
        return await self._adopt(live, desired, owner, out)

    async def _adopt(
        self,
        live: KubeObject,
        desired: Workload | PodGroup | CompositePodGroup,
        owner: Mapping[str, Any],
        out: Outcome,
    ) -> KubeObject | None:
        meta = meta_of(live)
        name, ns, deleting, refs = (
            meta.name,
            meta.namespace,
            meta.deletion_timestamp,
            meta.owner_refs,
        )
        owner_uid = meta_of(dict(owner)).uid
        controller = next((r for r in refs if r.controller), None)
        if controller is not None:
            if self._is_owner_ref(controller) and controller.uid in (owner_uid, ""):
                return live
            if self._is_owner_ref(controller):
                # an earlier incarnation's object under the same name: it goes, we come back
                raise Conflict(
                    f"{desired.kind} {ns}/{name} belongs to an earlier {controller.kind}"
                )
            if not self.adopt_ownerless:
                # the upstream controllers do not tell "someone else's" from "nobody's"
                await self._name_taken(desired, owner, out)
            await self._event(
                owner,
                EVENT_NAME_CONFLICT,
                f"{desired.kind} {name} is controlled by {controller.kind} {controller.name}; "
                "not touching it",
                "Warning",
                out,
            )
            return None
        if deleting:
            raise Conflict(f"{desired.kind} {ns}/{name} is being deleted")
        if not self.adopt_ownerless:
            await self._name_taken(desired, owner, out)
        # adopt: add our controller reference, guarded by the version we read
        ours = [to_dict(r) for r in desired.metadata.owner_references]
        existing = (
            list(live["metadata"].get("ownerReferences") or [])
            if isinstance(live, dict)
            else [to_dict(r) for r in live.metadata.owner_references]
        )
        keep = [r for r in existing if r.get("uid") not in {o.get("uid") for o in ours}]
        rv = (
            live["metadata"].get("resourceVersion")
            if isinstance(live, dict)
            else (live.metadata.resource_version)
        )
        patched = await self.cluster.patch(
            desired.kind,
            name,
            {"metadata": {"ownerReferences": [*keep, *ours], "resourceVersion": rv}},
            ns,
            patch_type="merge",
            field_manager=self.component,
        )
        out.adopted.append((desired.kind, ns, name))
        self._store((desired.kind, ns, name), patched)
        return patched

    async def _name_taken(
        self,
        desired: Workload | PodGroup | CompositePodGroup,
        owner: Mapping[str, Any],
        out: Outcome,
    ) -> None:
        """An object we do not control holds ``desired``'s name and is not adopted:
        report it (a Workload: the Job controller's ``FailedWorkloadCreate`` event) and fail
        the reconcile, so that it is retried with backoff until the name is free."""
        name = desired.metadata.name or ""
        resource = resource_info(desired.kind)
        message = f'{resource.plural}.{resource.group} "{name}" already exists'
        if desired.kind == "Workload":
            await self._event(
                owner,
                EVENT_FAILED_WORKLOAD_CREATE,
                f"Failed to create Workload for {self.resource.kind} "
                f"{self._owner_name(owner)}: {message}",
                "Warning",
                out,
            )
        raise AlreadyExists(f"{message} (no controller; not adopted)")

    @staticmethod
    def _owner_name(owner: Mapping[str, Any]) -> str:
        return meta_of(dict(owner)).name

    async def _apply_patches(
        self, plan: Plan, out: Outcome, owner: Mapping[str, Any] | None = None
    ) -> None:
        by_name = {(o.kind, o.metadata.name): o for o in plan.objects()}
        for patch in plan.patches():
            ns = patch.namespace or ""
            k: ObjKey = (patch.kind, ns, patch.name)
            live = self.objects.get(k)
            want = by_name.get((patch.kind, patch.name))
            if live is None or want is None:
                continue
            if patch.kind == "PodGroup":
                if gang_min(live) == gang_min(want):
                    continue
            elif templates_of(live) == templates_of(want):
                continue
            try:
                patched = await self.cluster.patch(
                    patch.kind,
                    patch.name,
                    patch.body,
                    ns,
                    patch_type="strategic",
                    field_manager=self.component,
                )
            except NotFound:
                continue
            except Invalid as e:
                # not a minCount-only change (e.g. a new template): the API refuses it
                if owner is not None:
                    await self._compile_failed(
                        f"{ns}/{self._owner_name(owner)}", owner, f"update refused: {e}", out
                    )
                continue
            self._store(k, patched)
            out.patched.append(k)

    async def _delete_all(self, objs: Iterable[KubeObject], out: Outcome) -> None:
        order = {"PodGroup": 0, "CompositePodGroup": 1, "Workload": 2}

        def depth(o: KubeObject) -> int:
            if isinstance(o, CompositePodGroup):
                d, parent = 0, o.spec.parent_composite_pod_group_name
                seen: set[str] = set()
                while parent and parent not in seen and d < 64:
                    seen.add(parent)
                    d += 1
                    p = self.objects.get(("CompositePodGroup", o.metadata.namespace or "", parent))
                    parent = (
                        p.spec.parent_composite_pod_group_name
                        if isinstance(p, CompositePodGroup)
                        else None
                    )
                return -d  # leaves first
            return 0

        for o in sorted(objs, key=lambda o: (order.get(kind_of(o), 3), depth(o))):
            meta = meta_of(o)
            name, ns, deleting = meta.name, meta.namespace, meta.deletion_timestamp
            k: ObjKey = (kind_of(o), ns, name)
            if deleting:
                continue
            with contextlib.suppress(NotFound):
                await self.cluster.delete(k[0], name, ns, propagation_policy="Background")
            self._drop(k)
            out.deleted.append(k)

    # ---- pods ------------------------------------------------------------------------

    def pod_group_for(self, pod: Mapping[str, Any]) -> str | None:
        """The PodGroup a new pod of one of our owners joins (None: not ours).

        Tries the plans computed so far in the pod's namespace, then plans the owners of that
        namespace that have none yet (a pod may arrive before its owner was reconciled).
        Names are deterministic, so the group may not exist yet: the pod then waits for it.
        """
        ns = str((pod.get("metadata") or {}).get("namespace") or "")
        prefix = f"{ns}/"
        for key, plan in list(self.plans.items()):
            if key.startswith(prefix):
                group = plan.pod_group_for(pod)
                if group is not None and not self._foreign(ns, group):
                    return group
        for key, owner in list(self.owners.items()):
            if not key.startswith(prefix) or key in self.plans:
                continue
            rv = str((owner.get("metadata") or {}).get("resourceVersion") or "")
            if self._unmanaged.get(key) == rv:
                continue
            try:
                lazy = self._plan(owner)
            except (BuildError, ValueError, TypeError):
                self._unmanaged[key] = rv
                continue
            if lazy is None:
                continue
            group = lazy.pod_group_for(pod)
            if group is not None and not self._foreign(ns, group):
                self.queue.add(key)
                return group
        return None

    def _foreign(self, ns: str, group: str) -> bool:
        """True when the PodGroup ``group`` exists without a controller and is not adopted
        (then it is not ours to link pods to)."""
        if self.adopt_ownerless:
            return False
        live = self.objects.get(("PodGroup", ns, group))
        return live is not None and not any(r.controller for r in meta_of(live).owner_refs)
