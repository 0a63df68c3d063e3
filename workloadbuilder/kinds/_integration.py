"""The ``Integration`` protocol, its optional capabilities and the registry of integrations.

The shape follows Kueue's jobframework: an integration is identified by the GVK of the object
it manages and must answer one question -- "what scheduling objects does this object need,
and which PodGroup does each of its pods belong to?" (:meth:`Integration.plan`). Everything
else is an optional capability, detected at run time with ``isinstance`` on a small
``runtime_checkable`` protocol: :class:`ChildWorkloads`, :class:`DelegatedGroups`,
:class:`ElasticResize` and :class:`Suspendable` (what :func:`capabilities` names), and the
two the :class:`~workloadbuilder.runtime.Reconciler` reads from attributes,
:class:`OwnerConditions` (``conditions_path``) and :class:`OwnerlessObjects`
(``adopt_ownerless``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Protocol, runtime_checkable

import attrs

from workloadbuilder.api import Workload
from workloadbuilder.builder import MinCountPatch, Plan
from workloadbuilder.errors import BuildError, WorkloadBuilderError

__all__ = [
    "ChildWorkloads",
    "DelegatedGroups",
    "DuplicateIntegrationError",
    "ElasticResize",
    "GroupVersionKind",
    "Integration",
    "IntegrationRegistry",
    "OwnerConditions",
    "OwnerlessObjects",
    "Suspendable",
    "UnknownKindError",
    "capabilities",
]


def _as_versions(value: Iterable[str]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


@attrs.frozen(kw_only=True)
class GroupVersionKind:
    """The API group, the served versions (preferred first) and the kind of an object.

    ``group`` is ``""`` for the core group. Lookups match on group and kind; the versions say
    which ``apiVersion`` to write (:attr:`api_version`).
    """

    group: str
    versions: tuple[str, ...] = attrs.field(converter=_as_versions)
    kind: str

    @versions.validator
    def _check_versions(self, _attribute: Any, value: tuple[str, ...]) -> None:
        if not value:
            raise ValueError(f"{self.kind}: at least one version is required")

    @property
    def api_version(self) -> str:
        """The preferred ``apiVersion``: ``<group>/<version>`` (``<version>`` for core)."""
        return f"{self.group}/{self.versions[0]}" if self.group else self.versions[0]

    def __str__(self) -> str:
        return f"{self.api_version} {self.kind}"


def _group_of(api_version: str) -> str:
    return api_version.split("/")[0] if "/" in api_version else ""


@runtime_checkable
class Integration(Protocol):
    """What every kind integration provides.

    ``gvk`` names the managed kind; ``plan(obj)`` compiles one object (a JSON-like mapping,
    as stored by the API server) into a :class:`~workloadbuilder.kinds.Plan`: the Workload,
    PodGroups and CompositePodGroups to create, and ``plan.pod_group_for(pod)``, the PodGroup
    each of its pods belongs to. ``options`` are integration-specific keyword arguments (for
    example ``revision=`` for a LeaderWorkerSet); an integration rejects the ones it does not
    know with ``TypeError``. ``plan`` raises :class:`~workloadbuilder.errors.ValidationError`
    for invalid input and :class:`~workloadbuilder.errors.BuildError` when there is nothing
    to build (:class:`~workloadbuilder.kinds.NotManagedError` when the kind's controller
    manages no scheduling objects for the object).
    """

    @property
    def gvk(self) -> GroupVersionKind:
        """The kind this integration manages."""
        ...

    def plan(self, obj: Mapping[str, Any], /, **options: Any) -> Plan:
        """The scheduling objects for ``obj`` and its pod -> PodGroup mapping."""
        ...


@runtime_checkable
class ChildWorkloads(Protocol):
    """The kind's controller creates child workloads of another kind (JobSet -> Jobs)."""

    def child_workloads(self, obj: Mapping[str, Any], /) -> list[dict[str, Any]]:
        """The child objects ``obj``'s controller creates, in creation order, as it creates
        them: names, labels, the delegation annotation and, when the parent planned their
        PodGroups, ``spec.schedulingGroup`` in their pod templates."""
        ...


@runtime_checkable
class DelegatedGroups(Protocol):
    """The kind can be a child whose PodGroups come from its parent's Workload (a Job with the
    ``scheduling.k8s.io/group-template-name`` annotation and a controller owner)."""

    def delegated_template(self, obj: Mapping[str, Any], /) -> str | None:
        """The parent Workload's PodGroupTemplate that ``obj`` names (``""``: the first one),
        or ``None`` when ``obj`` does not delegate."""
        ...

    def find_parent_workload(
        self, obj: Mapping[str, Any], workloads: Iterable[Workload], /
    ) -> Workload | None:
        """The parent-owned Workload among ``workloads`` that ``obj`` delegates to."""
        ...

    def plan_delegated(self, obj: Mapping[str, Any], parent_workload: Workload, /) -> Plan:
        """Only the PodGroup(s) of ``obj``, from the template of ``parent_workload``."""
        ...


@runtime_checkable
class ElasticResize(Protocol):
    """The kind may change its gang sizes after creation (only ``minCount`` may change)."""

    def resize_patches(self, obj: Mapping[str, Any], /, **options: Any) -> list[MinCountPatch]:
        """The strategic-merge patches that bring the live Workload and PodGroups to the
        ``minCount`` of ``obj`` as it is now (e.g. after a ``parallelism`` change)."""
        ...


@runtime_checkable
class Suspendable(Protocol):
    """The kind can be suspended (``spec.suspend``)."""

    def is_suspended(self, obj: Mapping[str, Any], /) -> bool:
        """True if ``obj`` is suspended."""
        ...

    def suspend_patch(self, obj: Mapping[str, Any], suspended: bool, /) -> dict[str, Any]:
        """The merge patch that suspends (``True``) or resumes (``False``) ``obj``."""
        ...


@runtime_checkable
class OwnerConditions(Protocol):
    """An integration whose kind has a status subresource with a ``metav1.Condition`` list at
    ``conditions_path`` (only ``"status.conditions"`` is supported): the
    :class:`~workloadbuilder.runtime.Reconciler` then also keeps a ``GangScheduled``
    condition (:data:`~workloadbuilder.runtime.CONDITION_GANG_SCHEDULED`) there (``True``
    when every PodGroup of the plan is scheduled, ``False`` with the scheduler's reason and
    message when one is not, ``Unknown`` before the scheduler has tried)."""

    conditions_path: str


@runtime_checkable
class OwnerlessObjects(Protocol):
    """An integration that says what its Reconciler does with an existing Workload, PodGroup
    or CompositePodGroup of a planned name that has **no** controller.

    ``adopt_ownerless = True`` (also the behaviour for integrations without the attribute):
    the owner's controller reference is added and the object is used. ``False``: the object is
    left alone, as kube-controller-manager v1.37.2's Job controller and the JobSet controller
    do (a pre-created object is the user's, not theirs): nothing after it in the creation
    order is created, the reconcile fails and is retried with the key's backoff until the
    name is free, a Workload's failure is reported with a ``FailedWorkloadCreate`` event on
    the owner (the Job controller's reason and message), and the webhook links no pod to such
    a PodGroup. An object controlled by another owner is then handled the same way."""

    adopt_ownerless: bool


_CAPABILITIES: tuple[tuple[str, type], ...] = (
    ("child-workloads", ChildWorkloads),
    ("delegated-groups", DelegatedGroups),
    ("elastic-resize", ElasticResize),
    ("suspend", Suspendable),
)


def capabilities(integration: Integration) -> frozenset[str]:
    """The optional capabilities ``integration`` implements: ``child-workloads``,
    ``delegated-groups``, ``elastic-resize``, ``suspend``."""
    return frozenset(name for name, proto in _CAPABILITIES if isinstance(integration, proto))


class UnknownKindError(BuildError):
    """No integration is registered for the object's kind (or for its API group)."""


class DuplicateIntegrationError(WorkloadBuilderError):
    """An integration for the same group and kind is already registered."""


class IntegrationRegistry:
    """The integrations known to ``build``, the simulator and the controllers, by GVK.

    ``IntegrationRegistry()`` is empty; :func:`default_registry` holds the built-in Job,
    JobSet, LeaderWorkerSet and GenericWorkload integrations plus whatever :func:`register`
    added. Group and kind identify an integration; a kind may exist in several groups.
    """

    def __init__(self, integrations: Iterable[Integration] = ()) -> None:
        self._by_key: dict[tuple[str, str], Integration] = {}
        for integration in integrations:
            self.register(integration)

    def register(self, integration: Integration) -> Integration:
        """Add ``integration``; returns it. Raises :class:`DuplicateIntegrationError` when its
        group and kind are taken and ``TypeError`` when it is not an :class:`Integration`."""
        if not isinstance(integration, Integration):
            raise TypeError(f"{integration!r} is not an Integration (it needs a gvk and plan(obj))")
        gvk = integration.gvk
        key = (gvk.group, gvk.kind)
        existing = self._by_key.get(key)
        if existing is not None:
            raise DuplicateIntegrationError(
                f"an integration for {gvk.kind} in group {gvk.group!r} is already registered: "
                f"{existing!r}"
            )
        self._by_key[key] = integration
        return integration

    def get(self, group: str, kind: str) -> Integration:
        """The integration for ``kind`` in API group ``group``; raises
        :class:`UnknownKindError`."""
        integration = self._by_key.get((group, kind))
        if integration is None:
            raise UnknownKindError(
                f"no integration for {kind} in group {group!r}: expected one of {self._expected()}"
            )
        return integration

    def lookup(self, gvk: GroupVersionKind) -> Integration:
        """The integration for ``gvk`` (matched on group and kind); see :meth:`get`."""
        return self.get(gvk.group, gvk.kind)

    def for_object(self, obj: Mapping[str, Any]) -> Integration:
        """The integration for a document's ``apiVersion`` and ``kind``.

        Raises :class:`UnknownKindError` when the kind is missing or unknown, or when it is
        known only in another API group."""
        kind = obj.get("kind")
        api_version = obj.get("apiVersion")
        if not isinstance(kind, str) or not kind:
            raise UnknownKindError(f"object has no kind; expected one of {self._expected()}")
        if isinstance(api_version, str):
            found = self._by_key.get((_group_of(api_version), kind))
            if found is not None:
                return found
        groups = sorted(g for g, k in self._by_key if k == kind)
        if not groups:
            what = f"{api_version}/{kind}" if isinstance(api_version, str) else repr(kind)
            raise UnknownKindError(f"unsupported kind {what}: expected one of {self._expected()}")
        wanted = " or ".join(f"{g}/..." if g else "<version>" for g in groups)
        raise UnknownKindError(f"{kind} must have apiVersion {wanted}, not {api_version!r}")

    def plan(self, obj: Mapping[str, Any], /, **options: Any) -> Plan:
        """``for_object(obj).plan(obj, **options)``."""
        return self.for_object(obj).plan(obj, **options)

    def kinds(self) -> frozenset[str]:
        """Every registered kind name."""
        return frozenset(k for _, k in self._by_key)

    def __contains__(self, gvk: object) -> bool:
        return isinstance(gvk, GroupVersionKind) and (gvk.group, gvk.kind) in self._by_key

    def __iter__(self) -> Iterator[Integration]:
        return iter(list(self._by_key.values()))

    def __len__(self) -> int:
        return len(self._by_key)

    def _expected(self) -> str:
        gvks = sorted((i.gvk for i in self._by_key.values()), key=lambda g: (g.kind, g.group))
        return ", ".join(str(g) for g in gvks) or "(none registered)"
