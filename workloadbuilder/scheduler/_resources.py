"""Pod requirements and scheduling signatures (quantities and effective requests come from
the SDK's :mod:`workloadbuilder.resources`).

A pod's *requirements* are everything the node-level filters and scores look at: resource
requests, ``nodeName``, ``nodeSelector``, required node affinity and tolerations. Pods with
equal requirements share one :class:`PodRequirements` value (the *signature*), so the
scheduler evaluates them once per node instead of once per pod.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs
import orjson

from workloadbuilder.resources import PODS, pod_requests

__all__ = ["PodRequirements", "pod_requirements", "required_features"]


@attrs.frozen(kw_only=True, cache_hash=True)
class PodRequirements:
    """What a pod needs from a node. Hashable: it is the pod's scheduling signature."""

    requests: tuple[tuple[str, int], ...] = ()
    node_name: str | None = None
    node_selector: tuple[tuple[str, str], ...] = ()
    #: required node affinity: terms (ORed) of (matchExpressions, matchFields) as JSON text
    affinity: str | None = None
    #: tolerations as canonical JSON text
    tolerations: str | None = None
    #: ``spec.resourceClaims`` as ``(name, resourceClaimName, resourceClaimTemplateName)``
    #: ("" when unset): pods with equal entries ask for equal devices
    claims: tuple[tuple[str, str, str], ...] = ()
    #: the node features the pod needs (NodeDeclaredFeatures: names a node lists in
    #: ``status.declaredFeatures``), sorted
    features: tuple[str, ...] = ()

    @property
    def request_map(self) -> dict[str, int]:
        """``requests`` as a dict."""
        return dict(self.requests)

    def affinity_terms(self) -> list[dict[str, Any]]:
        """The required ``nodeSelectorTerms`` (empty when there is no required affinity)."""
        return list(json.loads(self.affinity)) if self.affinity else []

    def toleration_list(self) -> list[dict[str, Any]]:
        """The pod's tolerations."""
        return list(json.loads(self.tolerations)) if self.tolerations else []

    @property
    def has_node_constraints(self) -> bool:
        """Whether nodeName, nodeSelector or required affinity restrict the nodes."""
        return bool(self.node_name or self.node_selector or self.affinity)


def _canon(value: Any) -> str:
    """``value`` as JSON text with sorted keys: equal values give equal text. orjson
    (~13x faster than ``json`` on a pod's tolerations); ``json`` for what orjson refuses
    (integers beyond 64 bits, keys that are not strings) or would write differently (it
    writes NaN and infinities as ``null``, so any ``null`` goes to ``json``)."""
    try:
        text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        text = b"null"
    if b"null" not in text:
        return text.decode()
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def pod_requirements(pod: Mapping[str, Any]) -> PodRequirements:
    """The requirements (signature) of a pod dict."""
    spec = pod.get("spec") or {}
    requests = pod_requests(spec)
    requests[PODS] = 1
    affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = affinity.get("nodeSelectorTerms") or []
    tolerations = spec.get("tolerations") or []
    return PodRequirements(
        requests=tuple(sorted(requests.items())),
        node_name=None,  # spec.nodeName set means already assigned; see NodeName filter
        node_selector=tuple(
            sorted((str(k), str(v)) for k, v in (spec.get("nodeSelector") or {}).items())
        ),
        affinity=_canon(terms) if terms else None,
        tolerations=_canon(tolerations) if tolerations else None,
        claims=tuple(
            (
                str(c.get("name") or ""),
                str(c.get("resourceClaimName") or ""),
                str(c.get("resourceClaimTemplateName") or ""),
            )
            for c in spec.get("resourceClaims") or ()
            if isinstance(c, Mapping)
        ),
        features=required_features(spec),
    )


#: node features (``status.declaredFeatures``) a pod's spec can require, as kube-scheduler
#: v1.37.2's NodeDeclaredFeatures plugin infers them (k8s.io/component-helpers
#: nodedeclaredfeatures: the features whose InferForScheduling can be true)
RESTART_ALL_CONTAINERS = "RestartAllContainersOnContainerExits"
USER_NAMESPACES_HOST_NETWORK = "UserNamespacesHostNetworkSupport"
VOLUME_BIND_MOUNT_OPTIONS = "VolumeBindMountOptions"


def required_features(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """The node features a pod spec needs: a container (or init container) restart rule
    with the ``RestartAllContainers`` action; ``hostNetwork`` with ``hostUsers: false``; a
    volume mount (of any container kind) with ``bindMountOptions``."""
    out: list[str] = []
    containers = [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]
    if any(
        isinstance(rule, Mapping) and rule.get("action") == "RestartAllContainers"
        for c in containers
        if isinstance(c, Mapping)
        for rule in c.get("restartPolicyRules") or ()
    ):
        out.append(RESTART_ALL_CONTAINERS)
    if spec.get("hostNetwork") is True and spec.get("hostUsers") is False:
        out.append(USER_NAMESPACES_HOST_NETWORK)
    if any(
        isinstance(m, Mapping) and m.get("bindMountOptions")
        for c in [*containers, *(spec.get("ephemeralContainers") or ())]
        if isinstance(c, Mapping)
        for m in c.get("volumeMounts") or ()
    ):
        out.append(VOLUME_BIND_MOUNT_OPTIONS)
    return tuple(sorted(out))
