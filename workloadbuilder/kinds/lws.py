"""LeaderWorkerSet adapter (``leaderworkerset.x-k8s.io/v1``, KEP-666 ``spec.scheduling``).

Mirrors the LWS ``kubernetes`` scheduler provider (kubernetes-sigs/lws KEP-666 and its
implementation, ``pkg/schedulerprovider/kubernetes_provider.go``):

* one Workload named after the LWS with one PodGroupTemplate ``replica``: gang by default
  (``{}`` or an empty policy), ``minCount`` = ``leaderWorkerTemplate.size`` (an explicit
  ``minCount`` must equal the size), the leader's (or worker's) ``priorityClassName``;
* one PodGroup per replica ``<lws>-<groupIndex>-<templateRevisionHash>`` labelled with the LWS
  name, group index and revision; each pod of the replica gets
  ``spec.schedulingGroup.podGroupName`` = that name.

Rejected like upstream: gang with ``startupPolicy: LeaderReady`` (the workers do not exist until
the leader is ready, so a gang of ``size`` pods could never form), leader and worker templates
with different ``priorityClassName``, pod templates that set ``spec.schedulingGroup``, and
shared ``resourceClaims`` without an identical entry in both pod templates.

Extensions (LWS alpha rejects these combinations):

* ``leaderworkerset.sigs.k8s.io/exclusive-topology: <key>`` becomes the topology constraint of
  every replica's group (all its pods in one domain of ``<key>``); an explicit, different
  ``schedulingConstraints`` key is an error.
* ``leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology: <key>`` (with
  ``subGroupPolicy.subGroupSize``) needs a group per subgroup inside each replica, so the
  Workload becomes a hierarchy: a CompositePodGroupTemplate ``replica`` (gang ``minGroupCount`` =
  number of subgroups, topology = the exclusive-topology key if any) with a PodGroupTemplate
  ``subgroup`` (gang ``minCount`` = pods per subgroup, topology = the subgroup key). Each replica
  gets a CompositePodGroup ``<replica-name>`` and one PodGroup ``<replica-name>-<subgroupIndex>``
  per subgroup. Subgroups follow LWS's indexing: with ``LeaderWorker`` the leader joins subgroup
  0 (when ``(size-1) % subGroupSize == 0`` it is an extra pod there, and subgroup 0 uses the
  template ``subgroup-0`` with one more pod); with ``LeaderExcluded`` the leader gets its own
  PodGroup ``<replica-name>-leader`` (template ``leader``, one pod).

The revision hash is assigned by the LWS controller (a ControllerRevision of the templates) and
cannot be derived from the manifest; pass ``revision=`` to reproduce the real names. Without it
the PodGroups are named ``<lws>-<groupIndex>``.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from workloadbuilder.api import (
    CompositePodGroup,
    PodGroup,
    TopologyConstraint,
    WorkloadCompositePodGroupDisruptionMode,
    WorkloadCompositePodGroupSchedulingConstraints,
    WorkloadPodGroupDisruptionMode,
    WorkloadPodGroupResourceClaim,
    WorkloadPodGroupSchedulingConstraints,
    WorkloadPodGroupSchedulingPolicy,
)
from workloadbuilder.builder import (
    Plan,
    PodSetKeyFunc,
    PolicyName,
    SchedulingConfig,
    WorkloadInput,
    WorkloadItem,
)
from workloadbuilder.errors import BuildError, FieldError, ValidationError
from workloadbuilder.kinds._common import (
    LeafSpec,
    Owner,
    as_int,
    as_map,
    build_workload,
    check_object_count,
    compile_leaves,
    make_plan,
    min_count_default,
    namespace_of,
    parse_pod_group_blocks,
    strip_owner,
)
from workloadbuilder.kinds.job import GROUP_TEMPLATE_NAME_ANNOTATION, NotManagedError

__all__ = [
    "EXCLUSIVE_TOPOLOGY_ANNOTATION",
    "GROUP_INDEX_LABEL",
    "GROUP_KEY_LABEL",
    "LEADER_NAME_ANNOTATION",
    "LWS_API_GROUP",
    "NAME_LABEL",
    "REPLICA_TEMPLATE",
    "REVISION_LABEL",
    "SIZE_ANNOTATION",
    "SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION",
    "SUBGROUP_INDEX_LABEL",
    "WORKER_INDEX_LABEL",
    "lws_pod_group_name",
    "lws_pods",
    "plan_lws",
]

LWS_API_GROUP = "leaderworkerset.x-k8s.io"
EXCLUSIVE_TOPOLOGY_ANNOTATION = "leaderworkerset.sigs.k8s.io/exclusive-topology"
SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION = "leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology"
NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
REVISION_LABEL = "leaderworkerset.sigs.k8s.io/template-revision-hash"
SUBGROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/subgroup-index"
WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
GROUP_KEY_LABEL = "leaderworkerset.sigs.k8s.io/group-key"
SIZE_ANNOTATION = "leaderworkerset.sigs.k8s.io/size"
LEADER_NAME_ANNOTATION = "leaderworkerset.sigs.k8s.io/leader-name"
REPLICA_TEMPLATE = "replica"
_SUBGROUP_TEMPLATE = "subgroup"
_SUBGROUP0_TEMPLATE = "subgroup-0"
_LEADER_TEMPLATE = "leader"


def lws_pod_group_name(lws_name: str, group_index: int | str, revision: str | None = None) -> str:
    """The PodGroup of one replica: ``<lws>-<groupIndex>-<revision>`` (``<lws>-<groupIndex>``
    without a revision)."""
    return f"{lws_name}-{group_index}-{revision}" if revision else f"{lws_name}-{group_index}"


@attrs.frozen(kw_only=True)
class _Subgroups:
    size: int  # pods per regular subgroup
    count: int  # regular subgroups (including subgroup 0)
    first_extra: bool  # subgroup 0 holds the leader as an extra pod
    leader_excluded: bool


@attrs.frozen(kw_only=True)
class _Lws:
    name: str
    namespace: str
    replicas: int
    size: int
    gang: bool
    policy: WorkloadPodGroupSchedulingPolicy | None
    constraints: WorkloadPodGroupSchedulingConstraints | None
    disruption: WorkloadPodGroupDisruptionMode | None
    claims: tuple[WorkloadPodGroupResourceClaim, ...]
    priority_class_name: str | None
    subgroups: _Subgroups | None
    subgroup_key: str | None


def _parse(lws: Mapping[str, Any]) -> _Lws:
    """Validate a LeaderWorkerSet as the API server and the LWS webhook do, and read what
    planning needs; the checks are the functions below."""
    if not isinstance(lws, Mapping):
        raise ValidationError([FieldError(path="", type="Invalid value", detail="not an object")])
    meta = as_map(lws.get("metadata"), "metadata")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ValidationError([FieldError(path="metadata.name", type="Required value")])
    namespace = namespace_of(meta)
    ann = as_map(meta.get("annotations"), "metadata.annotations")
    spec = as_map(lws.get("spec"), "spec")
    if spec.get("scheduling") is None:
        raise NotManagedError(
            f"LeaderWorkerSet {namespace}/{name} has no spec.scheduling: the LWS controller "
            "creates no Workload or PodGroups for it",
            reason="no spec.scheduling",
        )
    if ann.get(GROUP_TEMPLATE_NAME_ANNOTATION):
        raise BuildError(
            f"LeaderWorkerSet {namespace}/{name} delegates its PodGroups to a parent Workload "
            f"({GROUP_TEMPLATE_NAME_ANNOTATION}); build the parent instead"
        )
    sched = as_map(spec.get("scheduling"), "spec.scheduling")
    path = "spec.scheduling"
    policy, constraints, disruption, claims = parse_pod_group_blocks(sched, path)
    if policy is not None and policy.basic is None and policy.gang is None:
        policy = None  # LWS: an empty policy means the default (gang)
    lwt = as_map(spec.get("leaderWorkerTemplate"), "spec.leaderWorkerTemplate")
    size = as_int(lwt.get("size"), "spec.leaderWorkerTemplate.size", default=1, minimum=1)
    replicas = as_int(spec.get("replicas"), "spec.replicas", default=1, minimum=0)
    check_object_count(replicas, "spec.replicas")
    worker = as_map(lwt.get("workerTemplate"), "spec.leaderWorkerTemplate.workerTemplate")
    worker_spec = as_map(worker.get("spec"), "spec.leaderWorkerTemplate.workerTemplate.spec")
    leader_raw = lwt.get("leaderTemplate")
    leader_path = "spec.leaderWorkerTemplate.leaderTemplate"
    leader_spec = (
        as_map(as_map(leader_raw, leader_path).get("spec"), f"{leader_path}.spec")
        if leader_raw is not None
        else worker_spec
    )

    errors: list[FieldError] = []
    gang = policy is None or policy.basic is None
    if gang:
        _check_gang(policy, size, spec, path, errors)
    leader_pcn = leader_spec.get("priorityClassName") or ""
    _check_templates(leader_spec, worker_spec, claims, path, errors)

    constraints = _exclusive_constraints(ann, constraints, path, errors)

    subgroups, sub_key = _parse_subgroups(ann, lwt, size, errors)
    if errors:
        raise ValidationError(errors)
    return _Lws(
        name=name,
        namespace=namespace,
        replicas=replicas,
        size=size,
        gang=gang,
        policy=policy,
        constraints=constraints,
        disruption=disruption,
        claims=claims,
        priority_class_name=str(leader_pcn) or None,
        subgroups=subgroups,
        subgroup_key=str(sub_key) if sub_key else None,
    )


def _check_gang(
    policy: WorkloadPodGroupSchedulingPolicy | None,
    size: int,
    spec: Mapping[str, Any],
    path: str,
    errors: list[FieldError],
) -> None:
    """A gang's minCount is the group size, and gangs do not start LeaderReady."""
    mc = policy.gang.min_count if policy is not None and policy.gang is not None else None
    if mc is not None and mc != size:
        errors.append(
            _invalid(
                f"{path}.schedulingPolicy.gang.minCount",
                mc,
                "must equal leaderWorkerTemplate.size",
            )
        )
    if spec.get("startupPolicy") == "LeaderReady":
        errors.append(
            FieldError(
                path=f"{path}.schedulingPolicy.gang",
                type="Forbidden",
                detail="gang scheduling is incompatible with startupPolicy LeaderReady",
            )
        )


def _check_templates(
    leader_spec: Mapping[str, Any],
    worker_spec: Mapping[str, Any],
    claims: Sequence[WorkloadPodGroupResourceClaim],
    path: str,
    errors: list[FieldError],
) -> None:
    """The leader and worker templates: one priority class, no schedulingGroup, and a
    reference to every claim of the group."""
    leader_pcn = leader_spec.get("priorityClassName") or ""
    worker_pcn = worker_spec.get("priorityClassName") or ""
    if leader_pcn != worker_pcn:
        errors.append(
            FieldError(
                path=path,
                type="Invalid value",
                detail="leader and worker templates must use the same priorityClassName",
                value=None,
                has_value=True,
            )
        )
    if leader_spec.get("schedulingGroup") is not None or worker_spec.get("schedulingGroup"):
        errors.append(
            FieldError(
                path=path,
                type="Forbidden",
                detail="managed pod templates must not set spec.schedulingGroup",
            )
        )
    roles = [("leaderTemplate", leader_spec), ("workerTemplate", worker_spec)]
    for i, claim in enumerate(claims):
        for role, pod_spec in roles:
            if not _has_claim(pod_spec, claim):
                errors.append(
                    _invalid(
                        f"{path}.resourceClaims[{i}]",
                        claim.name,
                        f"must have a matching reference in {role}.spec.resourceClaims",
                    )
                )


def _exclusive_constraints(
    ann: Mapping[str, Any],
    constraints: WorkloadPodGroupSchedulingConstraints | None,
    path: str,
    errors: list[FieldError],
) -> WorkloadPodGroupSchedulingConstraints | None:
    """The exclusive-topology annotation: a topology constraint unless one is set (which
    must then be the annotation's key)."""
    exclusive = ann.get(EXCLUSIVE_TOPOLOGY_ANNOTATION)
    if exclusive:
        key = str(exclusive)
        if constraints is not None and any(t.key != key for t in constraints.topology):
            errors.append(
                _invalid(
                    f"{path}.schedulingConstraints.topology",
                    [t.key for t in constraints.topology],
                    f"conflicts with the {EXCLUSIVE_TOPOLOGY_ANNOTATION} annotation ({key!r})",
                )
            )
        elif constraints is None or not constraints.topology:
            constraints = WorkloadPodGroupSchedulingConstraints(
                topology=(TopologyConstraint(key=key),)
            )
    return constraints


def _parse_subgroups(
    ann: Mapping[str, Any], lwt: Mapping[str, Any], size: int, errors: list[FieldError]
) -> tuple[_Subgroups | None, Any]:
    """The subgroups of the subgroup-exclusive-topology annotation (and the annotation's
    value)."""
    subgroups = None
    sub_key = ann.get(SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION)
    sgp = as_map(lwt.get("subGroupPolicy"), "spec.leaderWorkerTemplate.subGroupPolicy")
    if sub_key:
        sgs_path = "spec.leaderWorkerTemplate.subGroupPolicy.subGroupSize"
        sgs = sgp.get("subGroupSize")
        if sgs is None:
            errors.append(
                _invalid(
                    f"metadata.annotations[{SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION}]",
                    str(sub_key),
                    "cannot have subgroup-exclusive-topology without subGroupSize set",
                )
            )
        else:
            n = as_int(sgs, sgs_path, default=1)
            excluded = sgp.get("subGroupPolicyType") == "LeaderExcluded"
            if n < 1 or size < n:
                errors.append(
                    _invalid(sgs_path, n, "must be between 1 and leaderWorkerTemplate.size")
                )
            elif size % n and (size - 1) % n:
                errors.append(
                    _invalid(sgs_path, n, "size or size - 1 must be divisible by subGroupSize")
                )
            elif excluded and (size - 1) % n:
                errors.append(
                    _invalid(
                        sgs_path,
                        n,
                        "size - 1 must be divisible by subGroupSize with LeaderExcluded",
                    )
                )
            else:
                first_extra = not excluded and (size - 1) % n == 0
                count = (size - 1) // n if (excluded or first_extra) else size // n
                subgroups = _Subgroups(
                    size=n, count=count, first_extra=first_extra, leader_excluded=excluded
                )
    return subgroups, sub_key


def _has_claim(pod_spec: Mapping[str, Any], claim: WorkloadPodGroupResourceClaim) -> bool:
    for raw in pod_spec.get("resourceClaims") or ():
        if not isinstance(raw, Mapping):
            continue
        if (
            raw.get("name") == claim.name
            and raw.get("resourceClaimName") == claim.resource_claim_name
            and raw.get("resourceClaimTemplateName") == claim.resource_claim_template_name
        ):
            return True
    return False


def _invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError(path=path, type="Invalid value", detail=detail, value=value, has_value=True)


def _owner(lws: Mapping[str, Any], name: str) -> Owner:
    meta = as_map(lws.get("metadata"), "metadata")
    uid = meta.get("uid")
    return Owner(
        api_version=str(lws.get("apiVersion") or f"{LWS_API_GROUP}/v1"),
        kind="LeaderWorkerSet",
        name=name,
        uid=str(uid) if uid else None,
    )


def _labels(lws: str, index: int, revision: str | None) -> dict[str, str]:
    labels = {NAME_LABEL: lws, GROUP_INDEX_LABEL: str(index)}
    if revision:
        labels[REVISION_LABEL] = revision
    return labels


def plan_lws(lws: Mapping[str, Any], *, revision: str | None = None) -> Plan:
    """Compile a LeaderWorkerSet with ``spec.scheduling`` into its Workload and PodGroups.

    ``plan.pod_group_names`` maps the group index (``"0"``, ``"1"``, ...; with subgroups
    ``"<index>/<subgroupIndex>"`` and ``"<index>/leader"``) to the PodGroup name;
    ``plan.pod_group_for(pod)`` reads the pod's LWS labels. ``revision`` is the LWS template
    revision hash (``leaderworkerset.sigs.k8s.io/template-revision-hash``).

    Raises :class:`~workloadbuilder.errors.ValidationError` (paths into the LWS) and
    :class:`~workloadbuilder.errors.BuildError` when there is nothing to build
    (:class:`~workloadbuilder.kinds.NotManagedError` without ``spec.scheduling``).
    """
    cfg = _parse(lws)
    owner = _owner(lws, cfg.name)
    if cfg.subgroups is not None:
        return _plan_subgroups(cfg, owner, revision)
    names = {str(i): lws_pod_group_name(cfg.name, i, revision) for i in range(cfg.replicas)}
    leaf = LeafSpec(
        name=REPLICA_TEMPLATE,
        path="spec.scheduling",
        policy=cfg.policy,
        constraints=cfg.constraints,
        disruption=cfg.disruption,
        claims=cfg.claims,
        priority_class_name=cfg.priority_class_name,
        default_min_count=cfg.size,
        default_gang=True,
    )
    index_of = {v: int(k) for k, v in names.items()}
    return compile_leaves(
        workload_name=cfg.name,
        namespace=cfg.namespace,
        owner=owner,
        leaves=[leaf],
        pod_groups=[(pg, REPLICA_TEMPLATE) for pg in names.values()],
        pod_group_names=names,
        pod_key=_pod_key(cfg.name, subgroups=None),
        labels=lambda pg: _labels(cfg.name, index_of[pg], revision),
    )


def _gang_or_basic(gang: bool) -> PolicyName:
    return "gang" if gang else "basic"


def _plan_subgroups(cfg: _Lws, owner: Owner, revision: str | None) -> Plan:
    sg = cfg.subgroups
    assert sg is not None
    sub_topology = (TopologyConstraint(key=cfg.subgroup_key),) if cfg.subgroup_key else ()
    policy = _gang_or_basic(cfg.gang)

    def leaf(name: str, pods: int) -> WorkloadItem:
        return WorkloadItem(
            name=name,
            path="spec.scheduling",
            default_config=SchedulingConfig(
                policy=policy,
                min_count=pods if cfg.gang else None,
                topology=sub_topology,
                priority_class_name=cfg.priority_class_name,
            ),
            input=WorkloadInput(
                disruption_mode=cfg.disruption,
                resource_claims=cfg.claims,
                disruption_mode_path="disruptionMode",
                resource_claims_path="resourceClaims",
            ),
        )

    children: list[WorkloadItem] = []
    child_groups = sg.count
    if sg.first_extra:
        children.append(leaf(_SUBGROUP0_TEMPLATE, sg.size + 1))
        if sg.count > 1:
            children.append(leaf(_SUBGROUP_TEMPLATE, sg.size))
    else:
        children.append(leaf(_SUBGROUP_TEMPLATE, sg.size))
    if sg.leader_excluded:
        children.append(leaf(_LEADER_TEMPLATE, 1))
        child_groups += 1
    composite_constraints = (
        WorkloadCompositePodGroupSchedulingConstraints(topology=cfg.constraints.topology)
        if cfg.constraints is not None and cfg.constraints.topology
        else None
    )
    composite_mode: WorkloadCompositePodGroupDisruptionMode | None = cfg.disruption
    root = WorkloadItem(
        name=REPLICA_TEMPLATE,
        path="spec.scheduling",
        default_config=SchedulingConfig(policy=policy, priority_class_name=cfg.priority_class_name),
        input=WorkloadInput(
            composite_constraints=composite_constraints,
            composite_disruption_mode=composite_mode,
            constraints_path="schedulingConstraints",
            disruption_mode_path="disruptionMode",
        ),
        callbacks=[min_count_default(child_groups)],
        children=children,
    )
    workload, materializer = build_workload(
        [root], name=cfg.name, namespace=cfg.namespace, owner=owner
    )
    cpgs: list[CompositePodGroup] = []
    groups: list[PodGroup] = []
    names: dict[str, str] = {}
    for i in range(cfg.replicas):
        replica = lws_pod_group_name(cfg.name, i, revision)
        labels = _labels(cfg.name, i, revision)
        cpg = strip_owner(
            materializer.new_composite_pod_group(replica, REPLICA_TEMPLATE),
            owner,
            keep_controller_ref=False,
        )
        cpgs.append(attrs.evolve(cpg, metadata=attrs.evolve(cpg.metadata, labels=labels)))
        members: list[tuple[str, str]] = []
        for j in range(sg.count):
            template = _SUBGROUP0_TEMPLATE if (j == 0 and sg.first_extra) else _SUBGROUP_TEMPLATE
            members.append((str(j), template))
        if sg.leader_excluded:
            members.append((_LEADER_TEMPLATE, _LEADER_TEMPLATE))
        for suffix, template in members:
            name = f"{replica}-{suffix}"
            pg = strip_owner(
                materializer.new_pod_group(name, template), owner, keep_controller_ref=False
            )
            pg = attrs.evolve(
                pg,
                metadata=attrs.evolve(
                    pg.metadata,
                    labels={**labels, SUBGROUP_INDEX_LABEL: suffix}
                    if suffix != _LEADER_TEMPLATE
                    else labels,
                ),
                spec=attrs.evolve(pg.spec, parent_composite_pod_group_name=replica),
            )
            groups.append(pg)
            names[f"{i}/{suffix}"] = name
    return make_plan(workload, groups, cpgs, names, _pod_key(cfg.name, subgroups=sg))


def _pod_key(lws_name: str, *, subgroups: _Subgroups | None) -> PodSetKeyFunc:
    def key(pod: Mapping[str, Any]) -> str | None:
        meta = pod.get("metadata")
        labels = meta.get("labels") if isinstance(meta, Mapping) else None
        if not isinstance(labels, Mapping):
            return None
        index = labels.get(GROUP_INDEX_LABEL)
        owner = labels.get(NAME_LABEL)
        if not isinstance(index, str) or (owner is not None and owner != lws_name):
            return None
        if subgroups is None:
            return index
        sub = labels.get(SUBGROUP_INDEX_LABEL)
        if isinstance(sub, str):
            return f"{index}/{sub}"
        if subgroups.leader_excluded:
            return f"{index}/{_LEADER_TEMPLATE}"
        return f"{index}/0"

    return key


def _subgroup_index(worker: int, size: int, policy: Mapping[str, Any]) -> str | None:
    """The ``subgroup-index`` label the LWS controller gives worker index ``worker`` (0 is the
    leader), or None without a ``subGroupPolicy.subGroupSize``."""
    sgs = policy.get("subGroupSize")
    if isinstance(sgs, bool) or not isinstance(sgs, int) or sgs < 1:
        return None
    if policy.get("subGroupPolicyType") == "LeaderExcluded":
        return None if worker == 0 else str((worker - 1) // sgs)
    if (size - 1) % sgs == 0:  # the leader is an extra pod in subgroup 0
        return "0" if worker == 0 else str((worker - 1) // sgs)
    return str(worker // sgs)


def lws_pods(lws: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The pods of every replica, as the LWS controller (through its StatefulSets) names and
    labels them, in creation order.

    Replica ``g`` has the leader ``<lws>-<g>`` (from ``leaderTemplate``, else
    ``workerTemplate``) and the workers ``<lws>-<g>-<w>``; each carries the template's labels
    and annotations plus the LWS name, group index, worker index, group key and (with a
    ``subGroupPolicy``) subgroup index labels, the ``size`` annotation and, on workers, the
    ``leader-name`` annotation. No ownerReferences, no ``spec.schedulingGroup`` (see
    ``plan_lws(lws).pod_group_for(pod)``). Raises
    :class:`~workloadbuilder.errors.ValidationError` for an invalid LWS.
    """
    meta = as_map(lws.get("metadata"), "metadata")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ValidationError([FieldError(path="metadata.name", type="Required value")])
    ns = namespace_of(meta)
    spec = as_map(lws.get("spec"), "spec")
    lwt = as_map(spec.get("leaderWorkerTemplate"), "spec.leaderWorkerTemplate")
    size = max(1, as_int(lwt.get("size"), "spec.leaderWorkerTemplate.size", default=1, minimum=1))
    replicas = as_int(spec.get("replicas"), "spec.replicas", default=1, minimum=0)
    check_object_count(replicas, "spec.replicas")
    worker = as_map(lwt.get("workerTemplate"), "spec.leaderWorkerTemplate.workerTemplate")
    leader = as_map(lwt.get("leaderTemplate"), "spec.leaderWorkerTemplate.leaderTemplate")
    leader = leader or worker
    sgp = as_map(lwt.get("subGroupPolicy"), "spec.leaderWorkerTemplate.subGroupPolicy")
    pods: list[dict[str, Any]] = []
    for g in range(replicas):
        group_key = hashlib.sha1(f"{ns}/{name}-{g}".encode()).hexdigest()
        for w in range(size):
            tmpl = leader if w == 0 else worker
            tmeta = as_map(tmpl.get("metadata"), "metadata")
            labels = {
                **dict(tmeta.get("labels") or {}),
                NAME_LABEL: name,
                GROUP_INDEX_LABEL: str(g),
                WORKER_INDEX_LABEL: str(w),
                GROUP_KEY_LABEL: group_key,
            }
            sub = _subgroup_index(w, size, sgp)
            if sub is not None:
                labels[SUBGROUP_INDEX_LABEL] = sub
            annotations = {**dict(tmeta.get("annotations") or {}), SIZE_ANNOTATION: str(size)}
            if w > 0:
                annotations[LEADER_NAME_ANNOTATION] = f"{name}-{g}"
            pod_meta = {
                "name": f"{name}-{g}" if w == 0 else f"{name}-{g}-{w}",
                "namespace": ns,
                "labels": labels,
                "annotations": annotations,
            }
            pod_spec = copy.deepcopy(dict(tmpl.get("spec") or {}))
            pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": pod_spec})
    return pods
