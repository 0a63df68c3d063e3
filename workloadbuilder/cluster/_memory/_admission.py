"""Admission for :class:`MemoryCluster`: defaulting, Priority admission, PodGroup protection
and the SDK's validation of Workload / PodGroup / CompositePodGroup.

Everything works on the stored JSON form (dicts) of an object; errors are raised as the API
server would (``Invalid`` with causes, ``Forbidden``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from workloadbuilder.api import (
    CodecError,
    CompositePodGroup,
    PodGroup,
    Workload,
    from_dict,
    to_dict,
)
from workloadbuilder.cluster._protocol import ResourceInfo
from workloadbuilder.errors import BadRequest, FieldError, Forbidden, Invalid
from workloadbuilder.validation import (
    FeatureGates,
    apply_defaults,
    drop_disabled_fields,
    validate_object,
)

__all__ = [
    "PODGROUP_PROTECTION_FINALIZER",
    "SYSTEM_PRIORITY_CLASSES",
    "TYPED_KINDS",
    "admit_priority",
    "default_pod",
    "forbidden",
    "invalid",
    "qualified_kind",
    "resource_name",
    "validate_conditions",
    "validate_metadata",
    "validate_typed",
]


#: The finalizer the PodGroupProtection admission plugin stamps on every new PodGroup.
PODGROUP_PROTECTION_FINALIZER = "scheduling.k8s.io/podgroup-protection"
#: PriorityClasses every API server creates at start-up: name -> value.
SYSTEM_PRIORITY_CLASSES = {
    "system-node-critical": 2000001000,
    "system-cluster-critical": 2000000000,
}

_GROUP = "scheduling.k8s.io"
_WHAT = {"Pod": "pod", "PodGroup": "pod group", "CompositePodGroup": "composite pod group"}
#: (group, plural) -> the typed model of that resource.
TYPED_KINDS: dict[tuple[str, str], type[Workload] | type[PodGroup] | type[CompositePodGroup]] = {
    (_GROUP, "workloads"): Workload,
    (_GROUP, "podgroups"): PodGroup,
    (_GROUP, "compositepodgroups"): CompositePodGroup,
}

_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)


def resource_name(info: ResourceInfo) -> str:
    """``plural`` or ``plural.group``, as in API server error messages."""
    return f"{info.plural}.{info.group}" if info.group else info.plural


def qualified_kind(info: ResourceInfo) -> str:
    """``Kind`` or ``Kind.group``, as in ``... is invalid`` messages."""
    return f"{info.kind}.{info.group}" if info.group else info.kind


def _status_body(
    info: ResourceInfo, name: str, message: str, reason: str, code: int, causes: Any = None
) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name, "kind": info.plural}
    if info.group:
        details["group"] = info.group
    if causes:
        details["causes"] = [
            {"reason": "Field" + c.type.replace(" ", ""), "message": str(c), "field": c.path}
            for c in causes
        ]
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": details,
        "code": code,
    }


def invalid(info: ResourceInfo, name: str, errors: list[FieldError]) -> Invalid:
    """The API server's 422 for ``errors`` (``Kind.group "name" is invalid: ...``)."""
    rendered = [str(e) for e in errors]
    body = rendered[0] if len(rendered) == 1 else "[" + ", ".join(rendered) + "]"
    message = f'{qualified_kind(info)} "{name}" is invalid: {body}'
    return Invalid(
        message,
        causes=errors,
        body=_status_body(info, name, message, "Invalid", 422, errors),
    )


def forbidden(info: ResourceInfo, name: str, detail: str) -> Forbidden:
    """The API server's 403 from an admission plugin."""
    message = f'{resource_name(info)} "{name}" is forbidden: {detail}'
    return Forbidden(message, body=_status_body(info, name, message, "Forbidden", 403))


def validate_metadata(info: ResourceInfo, meta: Mapping[str, Any]) -> list[FieldError]:
    """Object name rules (DNS subdomain; DNS label for Namespaces)."""
    name = meta.get("name")
    if not name:
        return [
            FieldError(
                path="metadata.name",
                type="Required value",
                detail="name or generateName is required",
            )
        ]
    if info.kind == "Namespace" and not info.group:
        ok, msg, limit = bool(_LABEL_RE.match(name)), _LABEL_MSG, 63
    else:
        ok, msg, limit = bool(_SUBDOMAIN_RE.match(name)), _SUBDOMAIN_MSG, 253
    errors: list[FieldError] = []
    if len(name) > limit:
        errors.append(
            FieldError(
                path="metadata.name",
                type="Invalid value",
                detail=f"must be no more than {limit} characters",
                value=name,
                has_value=True,
            )
        )
    if not ok:
        errors.append(
            FieldError(
                path="metadata.name", type="Invalid value", detail=msg, value=name, has_value=True
            )
        )
    return errors


def validate_typed(
    info: ResourceInfo,
    doc: Mapping[str, Any],
    old: Mapping[str, Any] | None,
    gates: FeatureGates | None,
    *,
    run_validation: bool = True,
) -> dict[str, Any]:
    """Decode ``doc`` (and ``old``) into the typed model, apply the server's defaults and
    gate-dependent field dropping, and run the SDK's validation.

    Returns the JSON form of what the server would store; raises ``Invalid`` on a decoding or
    validation error.
    """
    model_cls = TYPED_KINDS[(info.group, info.plural)]
    name = str((doc.get("metadata") or {}).get("name") or "")
    try:
        model: Any = from_dict(doc, model_cls)
    except CodecError as err:
        if err.detail != "Required value":
            # the real server cannot even decode such a body: 400, not 422
            raise BadRequest(
                f'{info.kind} in version "{info.version}" cannot be handled as a {info.kind}: {err}'
            ) from None
        raise invalid(info, name, [FieldError(path=err.path, type=err.detail)]) from None
    if not run_validation:
        return dict(doc)
    old_model = None
    if old is not None:
        try:
            old_model = from_dict(old, model_cls)
        except CodecError:
            old_model = None
    errors = validate_object(model, old_model, gates=gates)
    if errors:
        raise invalid(info, name, errors)
    if old_model is not None:
        old_model = apply_defaults(old_model, gates=gates)
    stored = drop_disabled_fields(apply_defaults(model, gates=gates), old_model, gates=gates)
    if stored == model:
        return dict(doc)
    out: dict[str, Any] = to_dict(stored)
    return out


def merge_label_keys(pod: dict[str, Any]) -> None:
    """What kube-apiserver's pod strategy does at create (``MatchLabelKeysInPodAffinity``, GA;
    ``MatchLabelKeysInPodTopologySpreadSelectorMerge``, on): for every pod (anti-)affinity term
    (required and preferred) and topology spread constraint with a ``labelSelector``, each
    ``matchLabelKeys`` key the pod carries becomes ``key In [value]`` in the selector's
    ``matchExpressions``, and each ``mismatchLabelKeys`` key ``key NotIn [value]``."""
    spec = pod.get("spec") or {}
    labels = (pod.get("metadata") or {}).get("labels") or {}

    def merge(term: Any, with_mismatch: bool) -> None:
        if not isinstance(term, dict) or not isinstance(term.get("labelSelector"), dict):
            return  # a nil selector matches nothing either way
        exprs = term["labelSelector"].setdefault("matchExpressions", [])
        pairs = [("In", k) for k in term.get("matchLabelKeys") or ()]
        if with_mismatch:
            pairs += [("NotIn", k) for k in term.get("mismatchLabelKeys") or ()]
        for op, key in pairs:
            if key in labels:
                exprs.append({"key": key, "operator": op, "values": [labels[key]]})
        if not exprs:
            del term["labelSelector"]["matchExpressions"]

    affinity = spec.get("affinity") or {}
    for kind in ("podAffinity", "podAntiAffinity"):
        block = affinity.get(kind) or {}
        for term in block.get("requiredDuringSchedulingIgnoredDuringExecution") or ():
            merge(term, True)
        for weighted in block.get("preferredDuringSchedulingIgnoredDuringExecution") or ():
            merge((weighted or {}).get("podAffinityTerm"), True)
    for constraint in spec.get("topologySpreadConstraints") or ():
        merge(constraint, False)


def default_pod(spec: dict[str, Any]) -> None:
    """The pod spec defaults the scheduler and simulator rely on (a subset of upstream)."""
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")


def pod_qos_class(spec: Mapping[str, Any]) -> str:
    """``status.qosClass`` of a pod spec (BestEffort / Burstable / Guaranteed)."""
    containers = list(spec.get("containers") or ()) + list(spec.get("initContainers") or ())
    any_set = False
    guaranteed = True
    for c in containers:
        res = c.get("resources") or {}
        req = res.get("requests") or {}
        lim = res.get("limits") or {}
        if req or lim:
            any_set = True
        for r in ("cpu", "memory"):
            if r not in lim or (r in req and req[r] != lim[r]):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def admit_priority(
    info: ResourceInfo,
    name: str,
    spec: dict[str, Any],
    classes: Callable[[], list[Mapping[str, Any]]],
    *,
    set_preemption_policy: bool,
) -> None:
    """The Priority admission plugin on create: resolve ``priority`` (and ``preemptionPolicy``)
    from ``priorityClassName`` or the globalDefault class; ``Forbidden`` when the class does not
    exist or a pre-set value differs from the computed one."""
    pc_name = spec.get("priorityClassName") or ""
    policy = "PreemptLowerPriority"
    all_classes = classes()
    if not pc_name:
        default = None
        for pc in all_classes:
            if pc.get("globalDefault") and (
                default is None or int(pc.get("value", 0)) < int(default.get("value", 0))
            ):
                default = pc
        if default is not None:
            priority = int(default.get("value", 0))
            policy = str(default.get("preemptionPolicy") or policy)
            spec["priorityClassName"] = (default.get("metadata") or {}).get("name")
        else:
            priority = 0
    else:
        found = next(
            (pc for pc in all_classes if (pc.get("metadata") or {}).get("name") == pc_name), None
        )
        if found is None:
            raise forbidden(info, name, f"no PriorityClass with name {pc_name} was found")
        priority = int(found.get("value", 0))
        policy = str(found.get("preemptionPolicy") or policy)
    given = spec.get("priority")
    what = _WHAT.get(info.kind, info.kind)
    if given is not None and given != priority:
        if info.kind == "Pod":
            detail = (
                f"the integer value of priority ({given}) must not be provided in pod spec; "
                f"priority admission controller computed {priority} from the given "
                "PriorityClass name"
            )
        else:
            detail = (
                f"priority set in the {what} ({given}) must match the priority computed "
                f"({priority}) based on the priority class set in the spec"
            )
        raise forbidden(info, name, detail)
    spec["priority"] = priority
    if set_preemption_policy:
        given_policy = spec.get("preemptionPolicy")
        if given_policy is not None and given_policy != policy:
            raise forbidden(
                info,
                name,
                f"the string value of PreemptionPolicy ({given_policy}) must not be provided in "
                f"{what} spec; priority admission controller computed {policy} from the given "
                "PriorityClass name",
            )
        spec["preemptionPolicy"] = policy


_REASON_RE = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
_QNAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_REASON_MSG = (
    "a condition reason must start with alphabetic character, optionally followed by a string "
    "of alphanumeric characters or '_,:', and must end with an alphanumeric character or '_' "
    "(e.g. 'my_name',  or 'MY_NAME',  or 'MyName',  or 'ReasonA,ReasonB',  or "
    "'ReasonA:ReasonB', regex used for validation is '[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?')"
)


def _qualified_name_errors(value: str, path: str) -> list[FieldError]:
    prefix, _, name = value.rpartition("/")
    ok = bool(name) and len(name) <= 63 and bool(_QNAME_RE.match(name))
    if prefix and (len(prefix) > 253 or not _SUBDOMAIN_RE.match(prefix)):
        ok = False
    if ok:
        return []
    return [
        FieldError(
            path=path,
            type="Invalid value",
            detail="name part must consist of alphanumeric characters, '-', '_' or '.', and "
            "must start and end with an alphanumeric character",
            value=value,
            has_value=True,
        )
    ]


def validate_conditions(conditions: Any, path: str) -> list[FieldError]:
    """``metav1.Condition`` list rules (``ValidateConditions``), as applied by the API server
    to PodGroup / CompositePodGroup status writes."""
    if not isinstance(conditions, list):
        return []
    errors: list[FieldError] = []
    seen: set[str] = set()
    for i, cond in enumerate(conditions):
        at = f"{path}[{i}]"
        if not isinstance(cond, Mapping):
            continue
        ctype = str(cond.get("type") or "")
        if not ctype:
            errors.append(
                FieldError(
                    path=f"{at}.type", type="Required value", detail="name part must be non-empty"
                )
            )
        else:
            errors.extend(_qualified_name_errors(ctype, f"{at}.type"))
        status = cond.get("status")
        if status not in ("True", "False", "Unknown"):
            errors.append(
                FieldError(
                    path=f"{at}.status",
                    type="Unsupported value",
                    detail='supported values: "False", "True", "Unknown"',
                    value=status if status is not None else "",
                    has_value=True,
                )
            )
        generation = cond.get("observedGeneration")
        if isinstance(generation, int) and generation < 0:
            errors.append(
                FieldError(
                    path=f"{at}.observedGeneration",
                    type="Invalid value",
                    detail="must be greater than or equal to zero",
                    value=generation,
                    has_value=True,
                )
            )
        if not cond.get("lastTransitionTime"):
            errors.append(FieldError(path=f"{at}.lastTransitionTime", type="Required value"))
        reason = cond.get("reason")
        if not reason:
            errors.append(FieldError(path=f"{at}.reason", type="Required value"))
        else:
            if not _REASON_RE.match(str(reason)):
                errors.append(
                    FieldError(
                        path=f"{at}.reason",
                        type="Invalid value",
                        detail=_REASON_MSG,
                        value=reason,
                        has_value=True,
                    )
                )
            if len(str(reason)) > 1024:
                errors.append(
                    FieldError(
                        path=f"{at}.reason",
                        type="Too long",
                        detail="may not be more than 1024 bytes",
                    )
                )
        if len(str(cond.get("message") or "")) > 32768:
            errors.append(
                FieldError(
                    path=f"{at}.message", type="Too long", detail="may not be more than 32768 bytes"
                )
            )
        if ctype in seen:
            errors.append(FieldError(path=at, type="Duplicate value", value=ctype, has_value=True))
        seen.add(ctype)
    return errors
