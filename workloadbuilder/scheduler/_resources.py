"""Pod requirements and scheduling signatures (quantities and effective requests come from
the SDK's :mod:`workloadbuilder.resources`).

A pod's *requirements* are everything the node-level filters and scores look at: resource
requests, ``nodeName``, ``nodeSelector``, required and preferred node affinity, tolerations
and the container images (ImageLocality). Pods with equal requirements share one
:class:`PodRequirements` value (the *signature*), so the scheduler evaluates them once per
node instead of once per pod.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import orjson

from workloadbuilder.resources import PODS, pod_requests

__all__ = ["PodRequirements", "normalized_image", "pod_requirements", "required_features"]


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
    #: preferred node affinity: ``[weight, preference]`` pairs as canonical JSON text (terms
    #: of weight 0 or without expressions and fields left out: they never score)
    preferred: str | None = None
    #: normalised image names (``:latest`` added when untagged) of the init containers,
    #: containers and image volumes, sorted, one entry each (a repeated image counts twice)
    images: tuple[str, ...] = ()

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

    def preferred_terms(self) -> list[tuple[int, dict[str, Any]]]:
        """The preferred node affinity terms as ``(weight, preference)``."""
        if not self.preferred:
            return []
        return [(int(w), dict(t)) for w, t in json.loads(self.preferred)]

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


def normalized_image(name: str) -> str:
    """An image name as node ``status.images`` list it: ``:latest`` added when the name has
    no tag (no ``:`` after the last ``/``)."""
    return name if name.rfind(":") > name.rfind("/") else name + ":latest"


def _images(spec: Mapping[str, Any]) -> tuple[str, ...]:
    containers: Sequence[Any] = spec.get("containers") or ()
    if len(containers) == 1 and not spec.get("initContainers") and not spec.get("volumes"):
        only = containers[0]  # the common pod: one container, no image volumes
        if isinstance(only, Mapping):
            return (normalized_image(str(only.get("image") or "")),)
    names = [
        normalized_image(str(c.get("image") or ""))
        for key in ("initContainers", "containers")
        for c in spec.get(key) or ()
        if isinstance(c, Mapping)
    ]
    for v in spec.get("volumes") or ():
        image = v.get("image") if isinstance(v, Mapping) else None
        if isinstance(image, Mapping):
            names.append(normalized_image(str(image.get("reference") or "")))
    names.sort()
    return tuple(names)


def _weight(value: Any) -> int:
    """A term's weight (the API server admits integers 1..100 only; anything else scores
    nothing)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _preferred(node_affinity: Mapping[str, Any]) -> str | None:
    terms = [
        [_weight(t.get("weight")), t.get("preference") or {}]
        for t in node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or ()
        if isinstance(t, Mapping)
    ]
    kept = [
        (w, pref)
        for w, pref in terms
        if w
        and isinstance(pref, Mapping)
        and (pref.get("matchExpressions") or pref.get("matchFields"))
    ]
    return _canon(kept) if kept else None


def pod_requirements(pod: Mapping[str, Any]) -> PodRequirements:
    """The requirements (signature) of a pod dict."""
    spec = pod.get("spec") or {}
    requests = pod_requests(spec)
    requests[PODS] = 1
    node_affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    affinity = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
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
        preferred=_preferred(node_affinity) if node_affinity else None,
        images=_images(spec),
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
