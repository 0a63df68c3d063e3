"""The Builder: validate a WorkloadItem tree, compile it into a Workload, materialise groups.

Python rendering of upstream ``workloadbuilder.Builder`` (component-helpers v0.37.2).
Differences, all supersets of upstream behaviour:

* :meth:`Builder.new_pod_group` finds leaf templates anywhere in the Workload tree (upstream
  indexes only the top-level ``podGroupTemplates``, so it cannot materialise the leaves of a
  composite hierarchy).
* :func:`build_flat_workload` merges several single-leaf trees into one Workload, as the JobSet
  controller does for its per-ReplicatedJob mode.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TypeVar

import attrs

from workloadbuilder.api import (
    CompositePodGroup,
    CompositePodGroupSpec,
    CompositePodGroupTemplate,
    ObjectMeta,
    OwnerReference,
    PodGroup,
    PodGroupSpec,
    PodGroupTemplate,
    TypedLocalObjectReference,
    Workload,
    WorkloadReference,
    WorkloadSpec,
)
from workloadbuilder.builder._compile import check_tree, compile_leaf, compile_tree, resolve_config
from workloadbuilder.builder._types import BuildOptions, SchedulingConfig, WorkloadItem, join_path
from workloadbuilder.errors import BuildError, FieldError
from workloadbuilder.validation import building_blocks as _blocks

__all__ = [
    "Builder",
    "build_flat_workload",
    "iter_composite_templates",
    "iter_leaf_templates",
    "owner_group",
]

_Template = TypeVar("_Template", PodGroupTemplate, CompositePodGroupTemplate)


def _q(value: str) -> str:
    return json.dumps(value)


def owner_group(owner: OwnerReference) -> str:
    """The API group of an owner's ``apiVersion`` (``batch/v1`` -> ``batch``, ``v1`` -> ``""``)."""
    api_version = owner.api_version
    if api_version.count("/") > 1:
        raise BuildError(
            f"invalid owner apiVersion {_q(api_version)}: unexpected GroupVersion string"
        )
    return api_version.split("/")[0] if "/" in api_version else ""


def iter_leaf_templates(spec: WorkloadSpec) -> Iterator[PodGroupTemplate]:
    """Every PodGroupTemplate of a Workload, top-level first, then the composite tree pre-order."""
    yield from spec.pod_group_templates

    def walk(templates: Sequence[CompositePodGroupTemplate]) -> Iterator[PodGroupTemplate]:
        for t in templates:
            yield from t.pod_group_templates
            yield from walk(t.composite_pod_group_templates)

    yield from walk(spec.composite_pod_group_templates)


def iter_composite_templates(spec: WorkloadSpec) -> Iterator[CompositePodGroupTemplate]:
    """Every CompositePodGroupTemplate of a Workload, pre-order."""

    def walk(
        templates: Sequence[CompositePodGroupTemplate],
    ) -> Iterator[CompositePodGroupTemplate]:
        for t in templates:
            yield t
            yield from walk(t.composite_pod_group_templates)

    yield from walk(spec.composite_pod_group_templates)


def _workload_for(spec: WorkloadSpec, opts: BuildOptions) -> Workload:
    if opts.owner is None:
        raise BuildError("a Workload must be owned by its controller for garbage collection")
    owner = opts.owner
    group = owner_group(owner)
    return Workload(
        metadata=ObjectMeta(
            name=opts.name or None,
            namespace=opts.namespace or None,
            owner_references=(owner,),
        ),
        spec=attrs.evolve(
            spec,
            controller_ref=TypedLocalObjectReference(
                api_group=group or None, kind=owner.kind, name=owner.name
            ),
        ),
    )


class Builder:
    """Turns a WorkloadItem tree into a Workload and materialises PodGroups from it.

    ``Builder(root, opts)`` compiles ``root``; :meth:`from_existing_workload` wraps an already
    persisted (e.g. parent-owned) Workload, for which only the ``new_*`` methods work.
    """

    def __init__(self, root: WorkloadItem, opts: BuildOptions) -> None:
        self._root: WorkloadItem | None = root
        self._opts = opts
        self._workload: Workload | None = None
        self._existing: Workload | None = None

    @classmethod
    def from_existing_workload(cls, workload: Workload, opts: BuildOptions) -> Builder:
        """A builder that materialises groups from ``workload`` (using ``opts.owner``).

        :meth:`build_workload` raises and :meth:`validate` returns an internal error: the
        Workload was compiled by someone else and already passed API validation.
        """
        builder = cls.__new__(cls)
        builder._root = None
        builder._opts = opts
        builder._workload = None
        builder._existing = workload
        return builder

    @property
    def root(self) -> WorkloadItem | None:
        """The item tree (``None`` for an existing-workload builder)."""
        return self._root

    @property
    def options(self) -> BuildOptions:
        """The build options."""
        return self._opts

    # ------------------------------------------------------------------ validation

    def validate(self, old_root: WorkloadItem | None = None) -> list[FieldError]:
        """Validate the tree; pass the previous tree as ``old_root`` for an update.

        Runs (unless disabled) the building blocks' declarative validation at each item's field
        path (with update ratcheting), the allow-lists (deny by default), and the rule that
        ``all`` disruption is not allowed with the ``basic`` policy. Structural problems (empty
        or duplicate names, leaf/composite inputs mixed, mismatched old root) are reported as
        one ``Internal error``.
        """
        if self._existing is not None or self._root is None:
            return [
                FieldError(
                    path="",
                    type="Internal error",
                    detail="cannot validate a builder constructed from an existing workload",
                )
            ]
        root = self._root
        if old_root is not None and old_root.name != root.name:
            return [
                FieldError(
                    path=root.path,
                    type="Internal error",
                    detail=f"old root name {_q(old_root.name)} does not match new root name "
                    f"{_q(root.name)}",
                )
            ]
        problem = check_tree(root)
        if problem:
            return [FieldError(path=root.path, type="Internal error", detail=problem)]
        return self._validate_item(root, old_root, update=old_root is not None)

    def _validate_item(
        self, item: WorkloadItem, old: WorkloadItem | None, *, update: bool
    ) -> list[FieldError]:
        errs: list[FieldError] = []
        if not self._opts.disable_declarative_validation:
            errs += self._declarative(item, old, update=update)
        cfg = resolve_config(item)
        errs += self._allow_lists(item, cfg)
        old_children = {c.name: c for c in old.children} if old is not None else {}
        for child in item.children:
            errs += self._validate_item(child, old_children.get(child.name), update=update)
        return errs

    def _declarative(
        self, item: WorkloadItem, old: WorkloadItem | None, *, update: bool
    ) -> list[FieldError]:
        inp = item.input
        old_inp = old.input if old is not None else None
        errs: list[FieldError] = []
        policy_path = join_path(item.path, inp.policy_path)
        constraints_path = join_path(item.path, inp.constraints_path)
        mode_path = join_path(item.path, inp.disruption_mode_path)
        check: Callable[..., list[FieldError]]
        blocks: tuple[tuple[str, str, Callable[..., list[FieldError]]], ...]
        if item.is_composite:
            blocks = (
                ("composite_policy", policy_path, _blocks.validate_composite_policy),
                ("composite_constraints", constraints_path, _blocks.validate_composite_constraints),
                ("composite_disruption_mode", mode_path, _blocks.validate_disruption_mode),
            )
        else:
            blocks = (
                ("policy", policy_path, _blocks.validate_policy),
                ("constraints", constraints_path, _blocks.validate_constraints),
                ("disruption_mode", mode_path, _blocks.validate_disruption_mode),
            )
        for attr, path, check in blocks:
            value = getattr(inp, attr)
            if value is not None:
                prev = getattr(old_inp, attr) if old_inp else None
                errs += check(path, value, prev, update=update)
        if item.is_composite:
            return errs
        if inp.resource_claims:
            claims_path = join_path(item.path, inp.resource_claims_path)
            old_by_name = {c.name: c for c in old_inp.resource_claims} if old_inp else {}
            for i, claim in enumerate(inp.resource_claims):
                errs += _blocks.validate_resource_claim(
                    f"{claims_path}[{i}]", claim, old_by_name.get(claim.name), update=update
                )
        return errs

    def _allow_lists(self, item: WorkloadItem, cfg: SchedulingConfig) -> list[FieldError]:
        errs: list[FieldError] = []
        policy_path = join_path(item.path, item.input.policy_path)
        mode_path = join_path(item.path, item.input.disruption_mode_path)
        if cfg.policy is not None and cfg.policy not in self._opts.allowed_policies:
            errs.append(
                FieldError(
                    path=policy_path,
                    type="Forbidden",
                    detail=f"{cfg.policy} scheduling policy is not supported by this controller",
                )
            )
        mode = cfg.disruption_mode
        if mode is not None and mode not in self._opts.allowed_disruption_modes:
            errs.append(
                FieldError(
                    path=mode_path,
                    type="Forbidden",
                    detail=f"the disruptionMode `{mode}` is not supported by this controller",
                )
            )
        if cfg.policy == "basic" and mode == "all":
            errs.append(
                FieldError(
                    path=mode_path,
                    type="Invalid value",
                    value="",
                    has_value=True,
                    detail="the disruptionMode `all` is not supported with the Basic "
                    "scheduling policy",
                )
            )
        return errs

    # ------------------------------------------------------------------ building

    def build_workload(self) -> Workload:
        """Compile the tree into a Workload (cached): ``metadata.ownerReferences = [owner]``
        and ``spec.controllerRef = {apiGroup: owner's group, kind, name}``.

        Raises :class:`BuildError` for an existing-workload builder, a structural problem, a
        gang policy without a resolved minCount, or a missing owner.
        """
        if self._existing is not None or self._root is None:
            raise BuildError(
                "BuildWorkload is not available on a Builder created from an existing "
                "Workload: it materializes from the supplied Workload"
            )
        if self._workload is None:
            self._workload = _workload_for(compile_tree(self._root), self._opts)
        return self._workload

    @property
    def workload(self) -> Workload:
        """The Workload groups are materialised from (the existing one, or the built one)."""
        if self._existing is not None:
            return self._existing
        if self._workload is None:
            raise BuildError(
                "no Workload available: call build_workload or use from_existing_workload first"
            )
        return self._workload

    def _owners(self) -> tuple[OwnerReference, ...]:
        return (self._opts.owner,) if self._opts.owner is not None else ()

    def _template(self, what: str, templates: Iterable[_Template], template_name: str) -> _Template:
        by_name = {t.name: t for t in templates}
        tmpl = by_name.get(template_name)
        if tmpl is None:
            raise BuildError(
                f"{what} {_q(template_name)} not found in workload "
                f"{_q(self.workload.metadata.name or '')} (have [{' '.join(by_name)}])"
            )
        return tmpl

    def _instance_meta(self, name: str) -> ObjectMeta:
        """Metadata of a PodGroup / CompositePodGroup: the Workload's namespace, the owner."""
        return ObjectMeta(
            name=name, namespace=self.workload.metadata.namespace, owner_references=self._owners()
        )

    def _workload_ref(self, template_name: str) -> WorkloadReference:
        return WorkloadReference(
            workload_name=self.workload.metadata.name or "", template_name=template_name
        )

    def new_pod_group(self, name: str, template_name: str) -> PodGroup:
        """A PodGroup named ``name`` from the leaf template ``template_name``.

        Copies the template's policy, constraints, disruption mode, claims, priority class and
        priority; sets ``workloadRef``; namespace = the Workload's; ownerReferences = ``[owner]``
        when an owner is set. ``parentCompositePodGroupName`` is left to the caller.
        """
        tmpl = self._template(
            "podGroupTemplate", iter_leaf_templates(self.workload.spec), template_name
        )
        return PodGroup(
            metadata=self._instance_meta(name),
            spec=PodGroupSpec(
                workload_ref=self._workload_ref(tmpl.name),
                scheduling_policy=tmpl.scheduling_policy,
                scheduling_constraints=tmpl.scheduling_constraints,
                disruption_mode=tmpl.disruption_mode,
                resource_claims=tmpl.resource_claims,
                priority_class_name=tmpl.priority_class_name,
                priority=tmpl.priority,
            ),
        )

    def new_composite_pod_group(self, name: str, template_name: str) -> CompositePodGroup:
        """A CompositePodGroup named ``name`` from the composite template ``template_name``
        (v1alpha3). Parent linkage and the children are left to the caller."""
        tmpl = self._template(
            "compositePodGroupTemplate", iter_composite_templates(self.workload.spec), template_name
        )
        return CompositePodGroup(
            metadata=self._instance_meta(name),
            spec=CompositePodGroupSpec(
                workload_ref=self._workload_ref(tmpl.name),
                scheduling_policy=tmpl.scheduling_policy,
                scheduling_constraints=tmpl.scheduling_constraints,
                disruption_mode=tmpl.disruption_mode,
                priority_class_name=tmpl.priority_class_name,
                priority=tmpl.priority,
            ),
        )


def build_flat_workload(items: Sequence[WorkloadItem], opts: BuildOptions) -> Workload:
    """Compile several leaf items into one Workload with one PodGroupTemplate each (in order).

    The JobSet controller's way of building multi-template Workloads without a composite
    root. Template names must be unique; every item must be a leaf. Validate each item with
    ``Builder(item, opts).validate()`` first.
    """
    if not items:
        raise BuildError("at least one workload item is required")
    seen: set[str] = set()
    templates: list[PodGroupTemplate] = []
    for item in items:
        if item.is_composite:
            raise BuildError(f"workload item {_q(item.name)} is composite; expected leaf items")
        problem = check_tree(item)
        if problem:
            raise BuildError(problem)
        if item.name in seen:
            raise BuildError(
                f"duplicate workload item name {_q(item.name)}: template names must be unique "
                "across the Workload"
            )
        seen.add(item.name)
        templates.append(compile_leaf(item))
    return _workload_for(WorkloadSpec(pod_group_templates=tuple(templates)), opts)
