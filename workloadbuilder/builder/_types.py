"""The builder's data model: the WorkloadItem tree, user input, the SchedulingConfig IR, options.

Mirrors ``k8s.io/component-helpers/scheduling/schedulingv1/workloadbuilder`` (v0.37.2):
a controller describes its workload as a tree of :class:`WorkloadItem` (a leaf compiles into a
PodGroupTemplate, an item with children into a CompositePodGroupTemplate), each carrying the
controller's defaults (:class:`SchedulingConfig`), the user's building blocks
(:class:`WorkloadInput`, with the field paths where the controller embeds them) and callbacks
that finish defaulting (e.g. "gang minCount defaults to parallelism").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Literal

import attrs

from workloadbuilder.api import (
    OwnerReference,
    PodGroupResourceClaim,
    TopologyConstraint,
    WorkloadCompositePodGroupDisruptionMode,
    WorkloadCompositePodGroupSchedulingConstraints,
    WorkloadCompositePodGroupSchedulingPolicy,
    WorkloadPodGroupDisruptionMode,
    WorkloadPodGroupResourceClaim,
    WorkloadPodGroupSchedulingConstraints,
    WorkloadPodGroupSchedulingPolicy,
)

__all__ = [
    "ALL_DISRUPTION_MODES",
    "ALL_POLICIES",
    "BuildOptions",
    "DisruptionModeName",
    "PolicyName",
    "SchedulingConfig",
    "SchedulingConfigFunc",
    "WorkloadInput",
    "WorkloadItem",
    "join_path",
]

PolicyName = Literal["basic", "gang"]
DisruptionModeName = Literal["single", "all"]

#: Every scheduling policy / disruption mode the v1.37 API knows (for allow-lists).
ALL_POLICIES: frozenset[str] = frozenset({"basic", "gang"})
ALL_DISRUPTION_MODES: frozenset[str] = frozenset({"single", "all"})


def join_path(base: str, *elements: str) -> str:
    """Join a JSON field path and relative elements (``"spec.scheduling" + "schedulingPolicy"``).

    Elements may themselves be dotted paths; empty parts are skipped.
    """
    parts = [p for p in (base, *elements) if p]
    return ".".join(parts)


@attrs.frozen(kw_only=True)
class SchedulingConfig:
    """The hierarchy-agnostic intermediate representation of one group's configuration.

    ``policy`` ``None`` resolves to ``basic``. ``min_count`` is the gang ``minCount`` for a leaf
    and the gang ``minGroupCount`` for a composite item; it is only meaningful with
    ``policy == "gang"`` and must be resolved (by input, default or callback) before build.
    ``disruption_mode`` ``None`` leaves the mode unset (the server default ``single`` applies).
    """

    policy: PolicyName | None = None
    min_count: int | None = None
    topology: tuple[TopologyConstraint, ...] = ()
    disruption_mode: DisruptionModeName | None = None
    resource_claims: tuple[PodGroupResourceClaim, ...] = ()
    priority_class_name: str | None = None


#: Post-processing after the default/input merge; returns the (changed) config.
SchedulingConfigFunc = Callable[[SchedulingConfig], SchedulingConfig]


@attrs.frozen(kw_only=True)
class WorkloadInput:
    """The user's building blocks for one item, as embedded in the controller's API.

    A leaf item reads the ``WorkloadPodGroup*`` blocks (and ``resource_claims``); a composite
    item reads the ``composite_*`` blocks. Setting a block of the other kind is an error.
    Each ``*_path`` is the JSON path of the block relative to :attr:`WorkloadItem.path`
    (e.g. ``"schedulingPolicy"``); errors about a block are reported there.
    """

    policy: WorkloadPodGroupSchedulingPolicy | None = None
    constraints: WorkloadPodGroupSchedulingConstraints | None = None
    disruption_mode: WorkloadPodGroupDisruptionMode | None = None
    resource_claims: tuple[WorkloadPodGroupResourceClaim, ...] = ()
    composite_policy: WorkloadCompositePodGroupSchedulingPolicy | None = None
    composite_constraints: WorkloadCompositePodGroupSchedulingConstraints | None = None
    composite_disruption_mode: WorkloadCompositePodGroupDisruptionMode | None = None
    policy_path: str = ""
    constraints_path: str = ""
    disruption_mode_path: str = ""
    resource_claims_path: str = ""

    @classmethod
    def at_standard_paths(
        cls,
        *,
        policy: WorkloadPodGroupSchedulingPolicy | None = None,
        constraints: WorkloadPodGroupSchedulingConstraints | None = None,
        disruption_mode: WorkloadPodGroupDisruptionMode | None = None,
        resource_claims: Iterable[WorkloadPodGroupResourceClaim] = (),
        composite_policy: WorkloadCompositePodGroupSchedulingPolicy | None = None,
        composite_constraints: WorkloadCompositePodGroupSchedulingConstraints | None = None,
        composite_disruption_mode: WorkloadCompositePodGroupDisruptionMode | None = None,
    ) -> WorkloadInput:
        """Blocks embedded under their conventional names, as Job's ``spec.scheduling`` does:
        ``schedulingPolicy``, ``schedulingConstraints``, ``disruptionMode``, ``resourceClaims``.
        """
        return cls(
            policy=policy,
            constraints=constraints,
            disruption_mode=disruption_mode,
            resource_claims=tuple(resource_claims),
            composite_policy=composite_policy,
            composite_constraints=composite_constraints,
            composite_disruption_mode=composite_disruption_mode,
            policy_path="schedulingPolicy",
            constraints_path="schedulingConstraints",
            disruption_mode_path="disruptionMode",
            resource_claims_path="resourceClaims",
        )


@attrs.define(kw_only=True, eq=False)
class WorkloadItem:
    """A node of a controller's logical workload.

    No children: compiled into one PodGroupTemplate named :attr:`name`. With children: a
    CompositePodGroupTemplate whose children are compiled recursively. :attr:`path` is the JSON
    path where this item's building blocks live in the controller's API (``spec.scheduling``
    for a Job); validation errors are reported under it.

    When used as ``old_root`` for :meth:`Builder.validate`, only ``name``, ``input`` and
    ``children`` are consulted.
    """

    name: str
    path: str = ""
    default_config: SchedulingConfig | None = None
    input: WorkloadInput = attrs.field(factory=WorkloadInput)
    callbacks: list[SchedulingConfigFunc] = attrs.field(factory=list)
    children: list[WorkloadItem] = attrs.field(factory=list)

    @property
    def is_composite(self) -> bool:
        """True when the item has children (a CompositePodGroupTemplate)."""
        return len(self.children) > 0


def _names(values: Iterable[str]) -> frozenset[str]:
    return frozenset(values)


@attrs.frozen(kw_only=True)
class BuildOptions:
    """Identity of the Workload to build and the controller's allow-lists.

    ``allowed_policies`` (subset of ``{"basic", "gang"}``) and ``allowed_disruption_modes``
    (subset of ``{"single", "all"}``) are deny-by-default: an empty set allows nothing.
    ``owner`` is required by :meth:`Builder.build_workload` and, when set, becomes the
    ownerReference of every materialised PodGroup / CompositePodGroup.
    ``disable_declarative_validation`` skips the building-block checks (in-tree Job does,
    because the API server already ran them on the Job).
    """

    name: str = ""
    namespace: str = ""
    owner: OwnerReference | None = None
    allowed_policies: frozenset[str] = attrs.field(default=frozenset(), converter=_names)
    allowed_disruption_modes: frozenset[str] = attrs.field(default=frozenset(), converter=_names)
    disable_declarative_validation: bool = False

    @allowed_policies.validator
    def _check_policies(self, _: attrs.Attribute[frozenset[str]], value: frozenset[str]) -> None:
        unknown = value - ALL_POLICIES
        if unknown:
            raise ValueError(f"unknown scheduling policies {sorted(unknown)}")

    @allowed_disruption_modes.validator
    def _check_modes(self, _: attrs.Attribute[frozenset[str]], value: frozenset[str]) -> None:
        unknown = value - ALL_DISRUPTION_MODES
        if unknown:
            raise ValueError(f"unknown disruption modes {sorted(unknown)}")
