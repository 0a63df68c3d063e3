"""A pod's own placement constraints, parsed once per pod: host ports, required and preferred
inter-pod affinity and anti-affinity, topology spread constraints, and what this scheduler does not
evaluate yet (refused or reported, never ignored silently).

kube-scheduler reads these through the NodePorts, InterPodAffinity, PodTopologySpread and
volume plugins (``pkg/scheduler/framework/plugins/{nodeports,interpodaffinity,
podtopologyspread,volumebinding}``). The parsed form follows their rules:

* a host port is a container port with ``hostPort > 0`` of a regular container or of a
  restartable init container (a sidecar); ``hostIP`` defaults to ``0.0.0.0`` and
  ``protocol`` to ``TCP``;
* an affinity term without ``namespaces`` and ``namespaceSelector`` applies to the pod's own
  namespace; ``namespaceSelector: {}`` to every namespace; one with requirements to the
  namespaces whose labels match it, and those of ``namespaces``; a ``labelSelector`` that is unset
  selects nothing, ``{}`` everything. ``matchLabelKeys`` / ``mismatchLabelKeys`` are merged
  into the selector by the API server when the pod is created, as v1.37 does;
* a spread constraint's ``matchLabelKeys`` are merged into its selector with the pod's own
  label values; ``minDomains`` defaults to 1, ``nodeAffinityPolicy`` to ``Honor`` and
  ``nodeTaintsPolicy`` to ``Ignore``.

Pods of one template share one parsed value (interned by the canonical text of the fields
read), so a gang of thousands parses its constraints once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import orjson

__all__ = [
    "AffinityTerm",
    "HostPort",
    "NamespaceLabelsView",
    "PodConstraints",
    "PodVolume",
    "Selector",
    "SpreadConstraint",
    "WeightedTerm",
    "pod_constraints",
]

HOSTNAME = "kubernetes.io/hostname"
_ALL_IPS = "0.0.0.0"

# operators of a parsed requirement
_EQ, _IN, _NOT_IN, _EXISTS, _NOT_EXISTS = "=", "in", "notin", "exists", "!"
_OPS = {"In": _IN, "NotIn": _NOT_IN, "Exists": _EXISTS, "DoesNotExist": _NOT_EXISTS}


@attrs.frozen(cache_hash=True)
class Selector:
    """A ``metav1.LabelSelector``: requirements ANDed. ``nothing`` for an unset (or invalid)
    selector, which matches no labels; no requirements match every label set."""

    reqs: tuple[tuple[str, str, frozenset[str]], ...] = ()
    nothing: bool = False

    @classmethod
    def parse(cls, sel: Any) -> Selector:
        """The selector of a LabelSelector object (``None``: selects nothing)."""
        if not isinstance(sel, Mapping):
            return _NOTHING
        reqs: list[tuple[str, str, frozenset[str]]] = [
            (str(k), _EQ, frozenset((str(v),))) for k, v in (sel.get("matchLabels") or {}).items()
        ]
        for expr in sel.get("matchExpressions") or ():
            op = _OPS.get(str(expr.get("operator"))) if isinstance(expr, Mapping) else None
            if op is None:
                return _NOTHING
            values = frozenset(str(v) for v in expr.get("values") or ())
            reqs.append((str(expr.get("key")), op, values))
        return cls(tuple(sorted(reqs, key=lambda r: (r[0], r[1], sorted(r[2])))))

    @property
    def everything(self) -> bool:
        """Whether every label set matches (``{}``)."""
        return not self.nothing and not self.reqs

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy every requirement."""
        if self.nothing:
            return False
        for key, op, values in self.reqs:
            have = labels.get(key)
            if op in (_EQ, _IN):
                if have is None or have not in values:
                    return False
            elif op == _NOT_IN:
                if have is not None and have in values:
                    return False
            elif op == _EXISTS:
                if have is None:
                    return False
            elif have is not None:  # DoesNotExist
                return False
        return True

    def with_labels(self, pairs: Sequence[tuple[str, str]]) -> Selector:
        """This selector with ``key = value`` requirements added (``matchLabelKeys``)."""
        if self.nothing or not pairs:
            return self
        extra = [(k, _EQ, frozenset((v,))) for k, v in pairs]
        reqs = tuple(sorted({*self.reqs, *extra}, key=lambda r: (r[0], r[1], sorted(r[2]))))
        return Selector(reqs)

    def __str__(self) -> str:
        if self.nothing:
            return "<none>"
        if not self.reqs:
            return "<all>"
        parts = []
        for key, op, values in self.reqs:
            vs = ",".join(sorted(values))
            if op == _EQ:
                parts.append(f"{key}={vs}")
            elif op == _IN:
                parts.append(f"{key} in ({vs})")
            elif op == _NOT_IN:
                parts.append(f"{key} notin ({vs})")
            elif op == _EXISTS:
                parts.append(key)
            else:
                parts.append(f"!{key}")
        return ",".join(parts)


_NOTHING = Selector(nothing=True)


#: namespace -> its labels (the Namespace informer's view; empty: none known)
NamespaceLabelsView = Mapping[str, Mapping[str, str]]
_NO_NAMESPACES: NamespaceLabelsView = {}


@attrs.frozen(cache_hash=True)
class AffinityTerm:
    """A ``PodAffinityTerm``: pods matched by ``selector`` in ``namespaces``, in every
    namespace (``namespaceSelector: {}``), or in the namespaces whose labels match
    ``namespace_selector`` (a selector with requirements: the union with ``namespaces``, as
    upstream), counted per value of the node label ``topology_key``."""

    selector: Selector
    topology_key: str
    namespaces: frozenset[str] = frozenset()
    all_namespaces: bool = False
    namespace_selector: Selector | None = None

    def matches(
        self,
        namespace: str,
        labels: Mapping[str, str],
        ns_labels: NamespaceLabelsView = _NO_NAMESPACES,
        *,
        unknown_as_empty: bool = False,
    ) -> bool:
        """Whether a pod in ``namespace`` with ``labels`` is one the term is about
        (``ns_labels``: the namespaces' labels, read by a ``namespace_selector``; see
        :meth:`in_namespace`)."""
        return self.in_namespace(
            namespace, ns_labels, unknown_as_empty=unknown_as_empty
        ) and self.selector.matches(labels)

    def in_namespace(
        self,
        namespace: str,
        ns_labels: NamespaceLabelsView = _NO_NAMESPACES,
        *,
        unknown_as_empty: bool = False,
    ) -> bool:
        """Whether the term looks at pods of ``namespace``. A namespace the view does not
        know is selected by no ``namespace_selector`` (upstream turns the incoming pod's
        selector into the names of the namespaces it lists), unless ``unknown_as_empty``
        (an existing pod's term asked about the incoming pod: upstream reads that
        namespace's labels, none when it is not found)."""
        if self.all_namespaces or namespace in self.namespaces:
            return True
        sel = self.namespace_selector
        if sel is None:
            return False
        got = ns_labels.get(namespace)
        if got is None and not unknown_as_empty:
            return False
        return sel.matches(got or {})

    def describe(self) -> str:
        """``app=w on kubernetes.io/hostname`` (``... in namespaces team=ml`` with a
        namespaceSelector)."""
        text = f"{self.selector} on {self.topology_key}"
        if self.namespace_selector is not None:
            text += f" in namespaces {self.namespace_selector}"
            if self.namespaces:
                text += f" or {','.join(sorted(self.namespaces))}"
        return text


@attrs.frozen(cache_hash=True)
class WeightedTerm:
    """A preferred term (``WeightedPodAffinityTerm``): the term and its weight (1..100)."""

    term: AffinityTerm
    weight: int


@attrs.frozen(cache_hash=True)
class SpreadConstraint:
    """A ``TopologySpreadConstraint``, with its defaults applied."""

    max_skew: int
    topology_key: str
    selector: Selector
    hard: bool  # whenUnsatisfiable: DoNotSchedule
    min_domains: int = 1
    honor_node_affinity: bool = True
    honor_node_taints: bool = False

    def describe(self) -> str:
        """``maxSkew 1 of app=w on topology.kubernetes.io/zone``."""
        return f"maxSkew {self.max_skew} of {self.selector} on {self.topology_key}"


@attrs.frozen(cache_hash=True)
class HostPort:
    """A host port a pod's container asks for."""

    ip: str
    protocol: str
    port: int

    def conflicts(self, other: HostPort) -> bool:
        """Whether two pods asking for these cannot share a node (``0.0.0.0`` is every
        address)."""
        if self.port != other.port or self.protocol != other.protocol:
            return False
        return self.ip == other.ip or _ALL_IPS in (self.ip, other.ip)

    def __str__(self) -> str:
        return f"{self.ip}:{self.port}/{self.protocol}"


@attrs.frozen(cache_hash=True)
class PodVolume:
    """A volume of the pod that a volume plugin looks at: a ``persistentVolumeClaim`` (its
    ``claim``), a generic ``ephemeral`` volume (its claim is ``<pod>-<volume>``: see
    :meth:`claim_for`), or an in-tree disk (``source`` is its field name; ``disk`` what
    identifies it: GCE ``pdName``, AWS ``volumeID``, iSCSI ``iqn``, RBD ``pool``/``image``
    with ``monitors``, Azure ``diskURI``, Cinder / Portworx ``volumeID``)."""

    name: str
    source: str
    claim: str = ""
    disk: tuple[str, ...] = ()
    monitors: frozenset[str] = frozenset()
    read_only: bool = False

    @property
    def uses_claim(self) -> bool:
        """A ``persistentVolumeClaim`` or generic ``ephemeral`` volume."""
        return self.source in (PVC_SOURCE, EPHEMERAL_SOURCE)

    def claim_for(self, pod_name: str) -> str:
        """The name of the PersistentVolumeClaim this volume uses for pod ``pod_name``."""
        if self.source == EPHEMERAL_SOURCE:
            return f"{pod_name}-{self.name}"
        return self.claim


@attrs.frozen(cache_hash=True)
class PodConstraints:
    """What a pod asks of the pods around it. ``unsupported`` lists, by plugin, what this
    scheduler does not evaluate yet and therefore refuses (the pod stays pending with the
    reason); ``not_scored`` lists preferences it does not score yet (the pod is scheduled as
    if they were absent, and the explanation says so)."""

    host_ports: tuple[HostPort, ...] = ()
    affinity: tuple[AffinityTerm, ...] = ()
    anti_affinity: tuple[AffinityTerm, ...] = ()
    #: preferred pod affinity / anti-affinity (InterPodAffinity's Score)
    preferred_affinity: tuple[WeightedTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedTerm, ...] = ()
    spread: tuple[SpreadConstraint, ...] = ()
    unsupported: tuple[str, ...] = ()
    not_scored: tuple[str, ...] = ()
    #: the volumes the volume plugins look at (claims, in-tree disks)
    volumes: tuple[PodVolume, ...] = ()

    @property
    def hard_spread(self) -> tuple[SpreadConstraint, ...]:
        """The ``DoNotSchedule`` constraints (PodTopologySpread's Filter)."""
        return tuple(c for c in self.spread if c.hard)

    @property
    def has_pod_affinity(self) -> bool:
        """Whether the pod has required pod affinity or anti-affinity terms."""
        return bool(self.affinity or self.anti_affinity)

    @property
    def has_preferred_pod_affinity(self) -> bool:
        """Whether the pod has preferred pod affinity or anti-affinity terms."""
        return bool(self.preferred_affinity or self.preferred_anti_affinity)

    @property
    def needs_namespace_labels(self) -> bool:
        """Whether a pod affinity term of the pod selects namespaces by their labels."""
        return any(
            t.namespace_selector is not None
            for t in (
                *self.affinity,
                *self.anti_affinity,
                *(w.term for w in self.preferred_affinity),
                *(w.term for w in self.preferred_anti_affinity),
            )
        )


_EMPTY = PodConstraints()
#: canonical text of the fields read -> parsed constraints (pods of one template share one)
_INTERNED: dict[bytes, PodConstraints] = {}


def pod_constraints(pod: Mapping[str, Any]) -> PodConstraints | None:
    """The constraints of a pod dict, or None when it has none (the common case: checked
    with a few dict lookups)."""
    spec = pod.get("spec") or {}
    affinity = spec.get("affinity") or {}
    pod_aff = affinity.get("podAffinity")
    pod_anti = affinity.get("podAntiAffinity")
    spread = spec.get("topologySpreadConstraints")
    volumes = spec.get("volumes")
    ports = _host_ports(spec)
    if not (pod_aff or pod_anti or spread or ports or _volume_kinds(volumes)):
        return None
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    # the pod's own labels matter only through a spread constraint's matchLabelKeys
    keys = {
        str(k)
        for c in spread or ()
        if isinstance(c, Mapping)
        for k in c.get("matchLabelKeys") or ()
    }
    own = {k: v for k, v in labels.items() if k in keys}
    raw = (namespace, own, pod_aff, pod_anti, spread, volumes, ports)
    try:
        text = orjson.dumps(raw, option=orjson.OPT_SORT_KEYS, default=str)
    except TypeError:
        text = repr(raw).encode()
    parsed = _INTERNED.get(text)
    if parsed is None:
        parsed = _parse(namespace, labels, pod_aff, pod_anti, spread, volumes, ports)
        if len(_INTERNED) > 10_000:  # bound the table in long-running schedulers
            _INTERNED.clear()
        _INTERNED[text] = parsed
    return None if parsed == _EMPTY else parsed


def _host_ports(spec: Mapping[str, Any]) -> tuple[HostPort, ...]:
    out: list[HostPort] = []
    sidecars = [c for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"]
    for c in [*sidecars, *(spec.get("containers") or ())]:
        for p in c.get("ports") or ():
            port = p.get("hostPort")
            if isinstance(port, int) and port > 0:
                out.append(
                    HostPort(
                        ip=str(p.get("hostIP") or _ALL_IPS),
                        protocol=str(p.get("protocol") or "TCP"),
                        port=port,
                    )
                )
    return tuple(out)


PVC_SOURCE = "persistentVolumeClaim"
EPHEMERAL_SOURCE = "ephemeral"
#: volume sources a volume plugin looks at (VolumeBinding, VolumeRestrictions, VolumeZone,
#: NodeVolumeLimits): claims, the in-tree disks that cannot be shared between nodes, and the
#: in-tree disks counted against CSI volume limits through CSI migration. Inline ``csi``
#: volumes are evaluated by none of kube-scheduler's Filters (only its queueing hints).
_VOLUME_SOURCES: dict[str, tuple[str, ...]] = {
    PVC_SOURCE: (),
    EPHEMERAL_SOURCE: (),
    "gcePersistentDisk": ("pdName",),
    "awsElasticBlockStore": ("volumeID",),
    "iscsi": ("iqn",),
    "rbd": ("pool", "image"),
    "azureDisk": ("diskURI",),
    "cinder": ("volumeID",),
    "portworxVolume": ("volumeID",),
}


def _volume_kinds(volumes: Any) -> list[tuple[str, str]]:
    """``(volume name, source)`` of the volumes a scheduling plugin would look at."""
    out: list[tuple[str, str]] = []
    for v in volumes or ():
        if not isinstance(v, Mapping):
            continue
        for source in _VOLUME_SOURCES:
            if v.get(source) is not None:
                out.append((str(v.get("name") or ""), source))
    return out


def _pod_volumes(volumes: Any) -> tuple[PodVolume, ...]:
    out: list[PodVolume] = []
    for v in volumes or ():
        if not isinstance(v, Mapping):
            continue
        name = str(v.get("name") or "")
        for source, fields in _VOLUME_SOURCES.items():
            src = v.get(source)
            if not isinstance(src, Mapping):
                continue
            if source == "rbd":
                pool = str(src.get("pool") or "rbd")  # the API server's default
                disk: tuple[str, ...] = (pool, str(src.get("image") or ""))
            else:
                disk = tuple(str(src.get(f) or "") for f in fields)
            out.append(
                PodVolume(
                    name=name,
                    source=source,
                    claim=str(src.get("claimName") or "") if source == PVC_SOURCE else "",
                    disk=disk,
                    monitors=frozenset(str(m) for m in src.get("monitors") or ()),
                    read_only=bool(src.get("readOnly")),
                )
            )
    return tuple(out)


def _parse(
    namespace: str,
    labels: Mapping[str, str],
    pod_aff: Any,
    pod_anti: Any,
    spread: Any,
    volumes: Any,
    ports: tuple[HostPort, ...],
) -> PodConstraints:
    unsupported: list[str] = []
    not_scored: list[str] = []
    affinity = _terms(namespace, pod_aff)
    anti = _terms(namespace, pod_anti)
    preferred = _preferred(namespace, pod_aff)
    preferred_anti = _preferred(namespace, pod_anti)
    constraints: list[SpreadConstraint] = []
    for c in spread or ():
        if not isinstance(c, Mapping):
            continue
        selector = Selector.parse(c.get("labelSelector"))
        keys = [str(k) for k in c.get("matchLabelKeys") or ()]
        selector = selector.with_labels([(k, labels[k]) for k in keys if k in labels])
        hard = c.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule"
        constraints.append(
            SpreadConstraint(
                max_skew=int(c.get("maxSkew") or 1),
                topology_key=str(c.get("topologyKey") or ""),
                selector=selector,
                hard=hard,
                min_domains=int(c.get("minDomains") or 1),
                honor_node_affinity=c.get("nodeAffinityPolicy", "Honor") != "Ignore",
                honor_node_taints=c.get("nodeTaintsPolicy", "Ignore") == "Honor",
            )
        )
    pod_volumes = _pod_volumes(volumes)
    if any(v.uses_claim for v in pod_volumes):
        not_scored.append(
            "VolumeBinding scoring (utilization of the PersistentVolumes a claim could bind)"
        )
    return PodConstraints(
        host_ports=ports,
        affinity=affinity,
        anti_affinity=anti,
        preferred_affinity=preferred,
        preferred_anti_affinity=preferred_anti,
        spread=tuple(constraints),
        unsupported=tuple(unsupported),
        not_scored=tuple(not_scored),
        volumes=pod_volumes,
    )


def _terms(namespace: str, block: Any) -> tuple[AffinityTerm, ...]:
    """The required terms of a ``podAffinity`` / ``podAntiAffinity`` block."""
    if not isinstance(block, Mapping):
        return ()
    out: list[AffinityTerm] = []
    for t in block.get("requiredDuringSchedulingIgnoredDuringExecution") or ():
        if isinstance(t, Mapping):
            out.append(_term(namespace, t))
    return tuple(out)


def _preferred(namespace: str, block: Any) -> tuple[WeightedTerm, ...]:
    """The preferred (weighted) terms of a ``podAffinity`` / ``podAntiAffinity`` block."""
    if not isinstance(block, Mapping):
        return ()
    out: list[WeightedTerm] = []
    for w in block.get("preferredDuringSchedulingIgnoredDuringExecution") or ():
        if not isinstance(w, Mapping):
            continue
        t = w.get("podAffinityTerm")
        weight = w.get("weight")
        if isinstance(t, Mapping) and isinstance(weight, int) and not isinstance(weight, bool):
            out.append(WeightedTerm(term=_term(namespace, t), weight=weight))
    return tuple(out)


def _term(namespace: str, t: Mapping[str, Any]) -> AffinityTerm:
    """One ``PodAffinityTerm``: no ``namespaces`` and no ``namespaceSelector`` is the pod's own
    namespace; ``namespaceSelector: {}`` every namespace; one with requirements the namespaces
    whose labels match, with ``namespaces`` (an unset or invalid one: ``namespaces`` only)."""
    names = frozenset(str(n) for n in t.get("namespaces") or ())
    ns_sel = t.get("namespaceSelector")
    all_ns = False
    by_labels: Selector | None = None
    if isinstance(ns_sel, Mapping):
        parsed = Selector.parse(ns_sel)
        if parsed.everything:
            all_ns = True
        elif not parsed.nothing:
            by_labels = parsed
    elif not names:
        names = frozenset((namespace,))
    return AffinityTerm(
        selector=Selector.parse(t.get("labelSelector")),
        topology_key=str(t.get("topologyKey") or ""),
        namespaces=names,
        all_namespaces=all_ns,
        namespace_selector=by_labels,
    )
