"""A few-lines facade over the Builder for custom operators.

::

    plan = simple_workload(
        name="trainer",
        namespace="ml",
        owner=my_custom_resource,  # a dict with apiVersion/kind/metadata, or an OwnerReference
        pod_sets=[PodSet(name="workers", replicas=8, topology_key="topology.kubernetes.io/rack")],
        priority_class_name="high",
    )
    plan.objects()                       # [Workload, PodGroup...] in creation order
    plan.pod_group_names["workers"]      # -> put into pod.spec.schedulingGroup.podGroupName
    plan.pod_group_for(pod)              # the same, for a pod annotated workloadbuilder.io/pod-set

The result is a :class:`Plan`, like every kind adapter's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from workloadbuilder.api import (
    OwnerReference,
    PodGroupResourceClaim,
    TopologyConstraint,
    WorkloadPodGroupAllDisruptionMode,
    WorkloadPodGroupBasicSchedulingPolicy,
    WorkloadPodGroupDisruptionMode,
    WorkloadPodGroupGangSchedulingPolicy,
    WorkloadPodGroupResourceClaim,
    WorkloadPodGroupSchedulingConstraints,
    WorkloadPodGroupSchedulingPolicy,
    WorkloadPodGroupSingleDisruptionMode,
)
from workloadbuilder.builder._builder import Builder, build_flat_workload
from workloadbuilder.builder._plan import (
    Plan,
    annotated_pod_set_key,
    check_planned,
    pod_group_min_count_patch,
    workload_min_count_patch,
)
from workloadbuilder.builder._types import (
    ALL_DISRUPTION_MODES,
    ALL_POLICIES,
    BuildOptions,
    DisruptionModeName,
    SchedulingConfig,
    SchedulingConfigFunc,
    WorkloadInput,
    WorkloadItem,
)
from workloadbuilder.errors import BuildError, FieldError, ValidationError
from workloadbuilder.naming import pod_group_name
from workloadbuilder.validation import content_dns1123_label

__all__ = ["PodSet", "controller_ref", "simple_workload"]

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


def controller_ref(obj: Mapping[str, Any] | OwnerReference) -> OwnerReference:
    """A controller ownerReference to ``obj`` (as ``metav1.NewControllerRef``).

    ``obj`` is a Kubernetes object dict (``apiVersion``, ``kind``, ``metadata.name``,
    ``metadata.uid``) or an OwnerReference, returned with ``controller`` and
    ``blockOwnerDeletion`` set to true. A missing UID becomes ``""`` (fill it in before
    creating objects on a real cluster).
    """
    if isinstance(obj, OwnerReference):
        return attrs.evolve(obj, controller=True, block_owner_deletion=True)
    meta = obj.get("metadata") or {}
    api_version, kind, name = obj.get("apiVersion"), obj.get("kind"), meta.get("name")
    if not (isinstance(api_version, str) and isinstance(kind, str) and isinstance(name, str)):
        raise BuildError("the owner needs apiVersion, kind and metadata.name")
    uid = meta.get("uid")
    return OwnerReference(
        api_version=api_version,
        kind=kind,
        name=name,
        uid=uid if isinstance(uid, str) else "",
        controller=True,
        block_owner_deletion=True,
    )


def _claims(value: Iterable[PodGroupResourceClaim]) -> tuple[PodGroupResourceClaim, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class PodSet:
    """A named set of identical pods that is scheduled as one group.

    ``gang=True``: all-or-nothing with ``min_count`` (default ``replicas``, at least 1);
    ``gang=False``: pod-by-pod (``basic``). ``topology_key`` confines the group to one value of
    that node label. ``disruption_mode`` / ``topology_key`` fall back to the workload-wide values
    given to :func:`simple_workload`.
    """

    name: str
    replicas: int
    gang: bool = True
    min_count: int | None = None
    topology_key: str | None = None
    disruption_mode: DisruptionModeName | None = None
    resource_claims: tuple[PodGroupResourceClaim, ...] = attrs.field(default=(), converter=_claims)


def _input_for(ps: PodSet, topology_key: str | None, mode: str | None) -> WorkloadInput:
    policy = (
        WorkloadPodGroupSchedulingPolicy(
            gang=WorkloadPodGroupGangSchedulingPolicy(min_count=ps.min_count)
        )
        if ps.gang
        else WorkloadPodGroupSchedulingPolicy(basic=WorkloadPodGroupBasicSchedulingPolicy())
    )
    key = ps.topology_key or topology_key
    constraints = (
        WorkloadPodGroupSchedulingConstraints(topology=(TopologyConstraint(key=key),))
        if key
        else None
    )
    chosen = ps.disruption_mode or mode
    disruption = None
    if chosen == "all":
        disruption = WorkloadPodGroupDisruptionMode(all=WorkloadPodGroupAllDisruptionMode())
    elif chosen == "single":
        disruption = WorkloadPodGroupDisruptionMode(single=WorkloadPodGroupSingleDisruptionMode())
    claims = tuple(
        WorkloadPodGroupResourceClaim(
            name=c.name,
            resource_claim_name=c.resource_claim_name,
            resource_claim_template_name=c.resource_claim_template_name,
        )
        for c in ps.resource_claims
    )
    return WorkloadInput.at_standard_paths(
        policy=policy, constraints=constraints, disruption_mode=disruption, resource_claims=claims
    )


def _default_min_count(replicas: int) -> SchedulingConfigFunc:
    def callback(cfg: SchedulingConfig) -> SchedulingConfig:
        if cfg.policy == "gang" and cfg.min_count is None:
            return attrs.evolve(cfg, min_count=max(1, replicas))
        return cfg

    return callback


def _owner_ref(owner: Mapping[str, Any] | OwnerReference) -> OwnerReference:
    """The controller reference to ``owner``; an owner without a UID cannot own objects on
    the API server (``ownerReferences[0].uid: Required value``), so it is refused here."""
    if not isinstance(owner, (Mapping, OwnerReference)):
        raise ValidationError(
            [FieldError(path="owner", type="Invalid value", detail="expected an object")]
        )
    try:
        ref = controller_ref(owner)
    except BuildError as e:
        raise ValidationError(
            [FieldError(path="owner", type="Invalid value", detail=str(e))]
        ) from None
    if not ref.uid:
        path = "owner.uid" if isinstance(owner, OwnerReference) else "owner.metadata.uid"
        raise ValidationError(
            [
                FieldError(
                    path=path,
                    type="Required value",
                    detail="the owner must exist (have a UID) before objects can be owned by it",
                )
            ]
        )
    return ref


def _int_error(path: str, value: Any, detail: str) -> FieldError:
    return FieldError(path=path, type="Invalid value", value=value, has_value=True, detail=detail)


def _check_pod_set_types(pod_sets: Sequence[PodSet]) -> None:
    """Wrong Python types in a PodSet become field errors, not a TypeError further down."""
    errors: list[FieldError] = []
    for i, ps in enumerate(pod_sets):
        path = f"podSets[{i}]"
        if not isinstance(ps, PodSet):
            errors.append(FieldError(path=path, type="Invalid value", detail="expected a PodSet"))
            continue
        if not isinstance(ps.name, str):
            errors.append(_int_error(f"{path}.name", ps.name, "expected a string"))
        for attr, json_name in (
            ("replicas", "replicas"),
            ("min_count", "schedulingPolicy.gang.minCount"),
        ):
            value = getattr(ps, attr)
            if value is None and attr == "min_count":
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                errors.append(_int_error(f"{path}.{json_name}", value, "expected an integer"))
            elif not _INT32_MIN <= value <= _INT32_MAX:
                errors.append(_int_error(f"{path}.{json_name}", value, "expected a 32-bit integer"))
        for attr in ("topology_key", "disruption_mode"):
            value = getattr(ps, attr)
            if value is not None and not isinstance(value, str):
                errors.append(_int_error(f"{path}.{attr}", value, "expected a string"))
        if ps.disruption_mode not in (None, "single", "all"):
            errors.append(
                FieldError(
                    path=f"{path}.disruptionMode",
                    type="Unsupported value",
                    value=ps.disruption_mode,
                    has_value=True,
                    detail='supported values: "single", "all"',
                )
            )
    if errors:
        raise ValidationError(errors)


def simple_workload(
    *,
    name: str,
    namespace: str,
    owner: Mapping[str, Any] | OwnerReference,
    pod_sets: Sequence[PodSet],
    priority_class_name: str | None = None,
    disruption_mode: DisruptionModeName | None = None,
    topology_key: str | None = None,
) -> Plan:
    """Plan a Workload with one PodGroupTemplate and one PodGroup per pod set.

    Pod-set names become template names (DNS labels, unique); PodGroups are named like the
    Job controller names them (:func:`workloadbuilder.naming.pod_group_name`). Every object is
    owned by ``owner`` (a controller reference). ``plan.pod_group_names`` maps each pod-set
    name to its PodGroup; ``plan.pod_group_for(pod)`` reads the pod's
    ``workloadbuilder.io/pod-set`` annotation (:data:`POD_SET_ANNOTATION`). Raises
    :class:`ValidationError` with paths such as ``podSets[0].schedulingPolicy.gang.minCount``
    when the input is invalid.
    """
    if not pod_sets:
        raise ValidationError([FieldError(path="podSets", type="Required value")])
    ref = _owner_ref(owner)
    _check_pod_set_types(pod_sets)
    opts = BuildOptions(
        name=name,
        namespace=namespace,
        owner=ref,
        allowed_policies=ALL_POLICIES,
        allowed_disruption_modes=ALL_DISRUPTION_MODES,
    )
    errors: list[FieldError] = []
    items: list[WorkloadItem] = []
    seen: set[str] = set()
    for i, ps in enumerate(pod_sets):
        path = f"podSets[{i}]"
        if ps.name in seen:
            errors.append(
                FieldError(
                    path=f"{path}.name", type="Duplicate value", value=ps.name, has_value=True
                )
            )
        seen.add(ps.name)
        name_errors = [
            FieldError(
                path=f"{path}.name", type="Invalid value", value=ps.name, has_value=True, detail=m
            )
            for m in content_dns1123_label(ps.name)
        ]
        errors += name_errors
        if ps.replicas < 0:
            errors.append(
                FieldError(
                    path=f"{path}.replicas",
                    type="Invalid value",
                    value=ps.replicas,
                    has_value=True,
                    detail="must be greater than or equal to 0",
                )
            )
        if ps.gang and ps.min_count is not None and ps.min_count > max(ps.replicas, 1):
            errors.append(
                FieldError(
                    path=f"{path}.schedulingPolicy.gang.minCount",
                    type="Invalid value",
                    value=ps.min_count,
                    has_value=True,
                    detail=f"must not be greater than replicas ({ps.replicas})",
                )
            )
        item = WorkloadItem(
            name=ps.name,
            path=path,
            default_config=SchedulingConfig(
                policy="basic", priority_class_name=priority_class_name
            ),
            input=_input_for(ps, topology_key, disruption_mode),
            callbacks=[_default_min_count(ps.replicas)],
        )
        items.append(item)
        if not name_errors:
            errors += Builder(item, opts).validate()
    if errors:
        raise ValidationError(errors, subject=f"workload {name}")
    workload = (
        Builder(items[0], opts).build_workload()
        if len(items) == 1
        else build_flat_workload(items, opts)
    )
    materializer = Builder.from_existing_workload(workload, opts)
    names = {ps.name: pod_group_name(name, ps.name) for ps in pod_sets}
    groups = tuple(materializer.new_pod_group(names[ps.name], ps.name) for ps in pod_sets)
    check_planned(workload)
    for pg in groups:
        check_planned(pg)
    patches = {
        pg.metadata.name or "": body
        for pg in groups
        if (body := pod_group_min_count_patch(pg)) is not None
    }
    return Plan(
        workload=workload,
        pod_groups=groups,
        pod_group_names=names,
        min_count_patch=workload_min_count_patch(workload),
        pod_group_patches=patches,
        pod_set_key=annotated_pod_set_key(name),
    )
