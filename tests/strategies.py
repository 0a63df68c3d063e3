"""Hypothesis strategies for the v1.37 scheduling objects.

* :func:`workloads`, :func:`pod_groups`, :func:`composite_pod_groups`: objects that
  kube-apiserver v1.37 accepts on create (all WAS gates on);
* :func:`nearly_valid_cases` / :func:`nearly_valid_objects`: a valid object plus exactly one
  mutation (bad names, too many templates or claims, mixed priorities, broken unions, deep
  trees, bad counts, ...). The result may or may not still be valid; the point is that the
  SDK's validator and the real API server must agree on the verdict and the errors.

Built for reuse by the control-plane differential tests: every object serialises with
``object_to_dict``; ints stay within int32 so the server's decoder never rejects them; all
objects live in ``namespace`` (pass the test namespace). PodGroups and CompositePodGroups carry
no ``priority`` / ``priorityClassName`` unless ``with_priority=True``: on a real server the
``Priority`` admission plugin (not API validation) resolves those fields first.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import attrs
from hypothesis import assume
from hypothesis import strategies as st

from workloadbuilder.api import (
    AllDisruptionMode,
    BasicSchedulingPolicy,
    CompositeBasicSchedulingPolicy,
    CompositeGangSchedulingPolicy,
    CompositePodGroup,
    CompositePodGroupSchedulingConstraints,
    CompositePodGroupSchedulingPolicy,
    CompositePodGroupSpec,
    CompositePodGroupTemplate,
    DisruptionMode,
    GangSchedulingPolicy,
    ObjectMeta,
    PodGroup,
    PodGroupResourceClaim,
    PodGroupSchedulingConstraints,
    PodGroupSchedulingPolicy,
    PodGroupSpec,
    PodGroupTemplate,
    SingleDisruptionMode,
    TopologyConstraint,
    TypedLocalObjectReference,
    Workload,
    WorkloadReference,
    WorkloadSpec,
)
from workloadbuilder.testing.builders import (
    make_job,
    make_jobset,
    make_lws,
    make_pod_group,
    make_pod_group_template,
    make_replicated_job,
    make_workload,
)

__all__ = [
    "BAD_LABEL_KEYS",
    "BAD_LONG_NAMES",
    "BAD_SHORT_NAMES",
    "composite_pod_groups",
    "dns_labels",
    "dns_subdomains",
    "nearly_valid_cases",
    "nearly_valid_objects",
    "pod_groups",
    "workloads",
]

SchedulingObject = Workload | PodGroup | CompositePodGroup

INT32_MAX = 2**31 - 1
_ALNUM = "abcdefghijklmnopqrstuvwxyz0123456789"

#: Names that break the DNS-1123 label format in different ways (one message each, or two).
BAD_SHORT_NAMES = ("Bad_Name", "-lead", "trail-", "has.dot", "a" * 64, "UPPER", "sp ace", "x/y")
#: Names that break the DNS-1123 subdomain format.
BAD_LONG_NAMES = ("Bad_Name", "-lead", "a..b", "a" * 254, "x/y", "trail.", "UPPER.case")
#: Label keys (topology keys) that are not valid qualified names.
BAD_LABEL_KEYS = ("bad key", "a/b/c", "/name", "example.com/", "-x", "Bad_Prefix/x", "a" * 64)
_TOPOLOGY_KEYS = (
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/rack",
    "kubernetes.io/hostname",
    "example.com/Block_1",
    "rack",
)


def dns_labels(max_size: int = 20) -> st.SearchStrategy[str]:
    """Valid DNS-1123 labels (short, so that derived names stay within limits)."""
    middle = st.text(alphabet=_ALNUM + "-", max_size=max(0, max_size - 2))
    edge = st.sampled_from(_ALNUM)
    return st.one_of(
        edge,
        st.builds(lambda a, m, b: a + m + b, edge, middle, edge),
    )


def dns_subdomains() -> st.SearchStrategy[str]:
    """Valid DNS-1123 subdomains made of 1-3 labels."""
    return st.lists(dns_labels(12), min_size=1, max_size=3).map(".".join)


def _meta(namespace: str) -> st.SearchStrategy[ObjectMeta]:
    labels = st.dictionaries(
        st.sampled_from(("app", "example.com/team", "tier")), dns_labels(10), max_size=2
    )
    return st.builds(
        lambda name, lbls: ObjectMeta(name=name, namespace=namespace, labels=lbls),
        dns_subdomains(),
        labels,
    )


@st.composite
def _pg_policy(draw: st.DrawFn) -> PodGroupSchedulingPolicy:
    if draw(st.booleans()):
        return PodGroupSchedulingPolicy(basic=BasicSchedulingPolicy())
    return PodGroupSchedulingPolicy(
        gang=GangSchedulingPolicy(min_count=draw(st.integers(1, 1000) | st.just(INT32_MAX)))
    )


def _topology(max_size: int = 1) -> st.SearchStrategy[tuple[TopologyConstraint, ...]]:
    return st.lists(
        st.sampled_from(_TOPOLOGY_KEYS).map(lambda k: TopologyConstraint(key=k)),
        min_size=1,
        max_size=max_size,
    ).map(tuple)


@st.composite
def _claims(draw: st.DrawFn) -> tuple[PodGroupResourceClaim, ...]:
    names = draw(st.lists(dns_labels(12), max_size=4, unique=True))
    out = []
    for name in names:
        source = draw(dns_subdomains())
        if draw(st.booleans()):
            out.append(PodGroupResourceClaim(name=name, resource_claim_name=source))
        else:
            out.append(PodGroupResourceClaim(name=name, resource_claim_template_name=source))
    return tuple(out)


def _disruption() -> st.SearchStrategy[DisruptionMode | None]:
    return st.sampled_from(
        (
            None,
            DisruptionMode(single=SingleDisruptionMode()),
            DisruptionMode(all=AllDisruptionMode()),
        )
    )


def _preemption() -> st.SearchStrategy[str | None]:
    return st.sampled_from((None, "Never", "PreemptLowerPriority"))


def _priority_settings() -> st.SearchStrategy[tuple[str | None, int | None]]:
    return st.tuples(
        st.none() | dns_subdomains(),
        st.none() | st.integers(-(2**31), 1_000_000_000),
    )


@st.composite
def _pod_group_template(
    draw: st.DrawFn, name: str, priority: tuple[str | None, int | None]
) -> PodGroupTemplate:
    constraints = None
    if draw(st.booleans()):
        constraints = PodGroupSchedulingConstraints(topology=draw(_topology()))
    return PodGroupTemplate(
        name=name,
        scheduling_policy=draw(_pg_policy()),
        scheduling_constraints=constraints,
        resource_claims=draw(_claims()),
        disruption_mode=draw(_disruption()),
        priority_class_name=priority[0],
        priority=priority[1],
        preemption_policy=draw(_preemption()),
    )


@st.composite
def _cpg_policy(draw: st.DrawFn) -> CompositePodGroupSchedulingPolicy:
    if draw(st.booleans()):
        return CompositePodGroupSchedulingPolicy(basic=CompositeBasicSchedulingPolicy())
    return CompositePodGroupSchedulingPolicy(
        gang=CompositeGangSchedulingPolicy(min_group_count=draw(st.integers(1, 64)))
    )


class _Names:
    """Hands out template names that are unique across one Workload tree."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.n = 0

    def next(self) -> str:
        self.n += 1
        return f"{self.prefix}-{self.n}"


@st.composite
def _cpg_template(
    draw: st.DrawFn, names: _Names, depth: int, priority: tuple[str | None, int | None]
) -> CompositePodGroupTemplate:
    name = names.next()
    nested: list[CompositePodGroupTemplate] = []
    if depth < 3 and draw(st.integers(0, 3)) == 0:
        for _ in range(draw(st.integers(1, 2))):
            nested.append(draw(_cpg_template(names, depth + 1, priority)))
    leaves = [
        draw(_pod_group_template(names.next(), priority))
        for _ in range(draw(st.integers(0 if nested else 1, 3)))
    ]
    constraints = None
    if draw(st.booleans()):
        constraints = CompositePodGroupSchedulingConstraints(topology=draw(_topology()))
    return CompositePodGroupTemplate(
        name=name,
        scheduling_policy=draw(_cpg_policy()),
        scheduling_constraints=constraints,
        disruption_mode=draw(_disruption()),
        priority_class_name=priority[0],
        priority=priority[1],
        preemption_policy=draw(_preemption()),
        pod_group_templates=tuple(leaves),
        composite_pod_group_templates=tuple(nested),
    )


@st.composite
def workloads(
    draw: st.DrawFn, namespace: str = "default", composite: bool | None = None
) -> Workload:
    """Valid Workloads: flat (1-8 PodGroupTemplates) or hierarchical (CompositePodGroup
    templates nested up to the maximum depth, every composite with a child), with template
    names unique across the tree and one priority setting shared by all templates."""
    priority = draw(_priority_settings())
    names = _Names(draw(dns_labels(12)))
    use_composite = draw(st.booleans()) if composite is None else composite
    controller_ref = draw(
        st.none()
        | st.builds(
            lambda g, k, n: TypedLocalObjectReference(api_group=g, kind=k, name=n),
            st.sampled_from((None, "batch", "jobset.x-k8s.io")),
            st.sampled_from(("Job", "JobSet", "Custom")),
            dns_subdomains(),
        )
    )
    if use_composite:
        spec = WorkloadSpec(
            controller_ref=controller_ref,
            composite_pod_group_templates=tuple(
                draw(_cpg_template(names, 1, priority)) for _ in range(draw(st.integers(1, 3)))
            ),
        )
    else:
        spec = WorkloadSpec(
            controller_ref=controller_ref,
            pod_group_templates=tuple(
                draw(_pod_group_template(names.next(), priority))
                for _ in range(draw(st.integers(1, 8)))
            ),
        )
    return Workload(metadata=draw(_meta(namespace)), spec=spec)


@st.composite
def pod_groups(
    draw: st.DrawFn, namespace: str = "default", with_priority: bool = False
) -> PodGroup:
    """Valid PodGroups, standalone or created from a (possibly composite) template."""
    workload_ref = draw(
        st.none()
        | st.builds(
            lambda w, t: WorkloadReference(workload_name=w, template_name=t),
            dns_subdomains(),
            dns_labels(),
        )
    )
    parent = draw(st.none() | dns_subdomains()) if workload_ref is not None else None
    constraints = None
    if draw(st.booleans()):
        constraints = PodGroupSchedulingConstraints(topology=draw(_topology()))
    priority: tuple[str | None, int | None] = (None, None)
    if with_priority:
        priority = draw(_priority_settings())
    spec = PodGroupSpec(
        scheduling_policy=draw(_pg_policy()),
        parent_composite_pod_group_name=parent,
        workload_ref=workload_ref,
        scheduling_constraints=constraints,
        resource_claims=draw(_claims()),
        disruption_mode=draw(_disruption()),
        priority_class_name=priority[0],
        priority=priority[1],
        preemption_policy=draw(_preemption()),
    )
    return PodGroup(metadata=draw(_meta(namespace)), spec=spec)


@st.composite
def composite_pod_groups(
    draw: st.DrawFn, namespace: str = "default", with_priority: bool = False
) -> CompositePodGroup:
    """Valid CompositePodGroups (``scheduling.k8s.io/v1alpha3``)."""
    constraints = None
    if draw(st.booleans()):
        constraints = CompositePodGroupSchedulingConstraints(topology=draw(_topology()))
    priority: tuple[str | None, int | None] = (None, None)
    if with_priority:
        priority = draw(_priority_settings())
    spec = CompositePodGroupSpec(
        workload_ref=WorkloadReference(
            workload_name=draw(dns_subdomains()), template_name=draw(dns_labels())
        ),
        scheduling_policy=draw(_cpg_policy()),
        parent_composite_pod_group_name=draw(st.none() | dns_subdomains()),
        scheduling_constraints=constraints,
        disruption_mode=draw(_disruption()),
        priority_class_name=priority[0],
        priority=priority[1],
        preemption_policy=draw(_preemption()),
    )
    return CompositePodGroup(metadata=draw(_meta(namespace)), spec=spec)


# --- mutations ------------------------------------------------------------------------------

Mutation = Callable[[st.DrawFn, Any], Any]


def _map_leaves(
    w: Workload, fn: Callable[[PodGroupTemplate], PodGroupTemplate], only_first: bool = True
) -> Workload:
    """Apply ``fn`` to the first (or every) PodGroupTemplate of the tree."""
    done = [False]

    def leaf(t: PodGroupTemplate) -> PodGroupTemplate:
        if only_first and done[0]:
            return t
        done[0] = True
        return fn(t)

    def cpg(c: CompositePodGroupTemplate) -> CompositePodGroupTemplate:
        # a level's own leaves first, then its nested composites: the order of _all_leaves
        leaves = tuple(leaf(x) for x in c.pod_group_templates)
        nested = tuple(cpg(x) for x in c.composite_pod_group_templates)
        return attrs.evolve(c, pod_group_templates=leaves, composite_pod_group_templates=nested)

    spec = attrs.evolve(
        w.spec,
        pod_group_templates=tuple(leaf(t) for t in w.spec.pod_group_templates),
        composite_pod_group_templates=tuple(cpg(c) for c in w.spec.composite_pod_group_templates),
    )
    return attrs.evolve(w, spec=spec)


def _all_leaves(w: Workload) -> list[PodGroupTemplate]:
    out = list(w.spec.pod_group_templates)

    def walk(c: CompositePodGroupTemplate) -> None:
        out.extend(c.pod_group_templates)
        for x in c.composite_pod_group_templates:
            walk(x)

    for c in w.spec.composite_pod_group_templates:
        walk(c)
    return out


def _w_bad_template_name(draw: st.DrawFn, w: Workload) -> Workload:
    bad = draw(st.sampled_from((*BAD_SHORT_NAMES, "")))
    return _map_leaves(w, lambda t: attrs.evolve(t, name=bad))


def _w_duplicate_name(draw: st.DrawFn, w: Workload) -> Workload:
    leaves = _all_leaves(w)
    if len(leaves) < 2:
        extra = attrs.evolve(leaves[0])
        if w.spec.pod_group_templates:
            return attrs.evolve(
                w,
                spec=attrs.evolve(w.spec, pod_group_templates=(*w.spec.pod_group_templates, extra)),
            )
        first = w.spec.composite_pod_group_templates[0]
        first = attrs.evolve(first, pod_group_templates=(*first.pod_group_templates, extra))
        return attrs.evolve(
            w,
            spec=attrs.evolve(
                w.spec,
                composite_pod_group_templates=(first, *w.spec.composite_pod_group_templates[1:]),
            ),
        )
    target = leaves[-1].name
    return _map_leaves(w, lambda t: attrs.evolve(t, name=target))


def _w_too_many_templates(draw: st.DrawFn, w: Workload) -> Workload:
    n = draw(st.integers(9, 12))
    base = _all_leaves(w)[0]
    templates = tuple(attrs.evolve(base, name=f"extra-{i}") for i in range(n))
    if w.spec.pod_group_templates:
        return attrs.evolve(w, spec=attrs.evolve(w.spec, pod_group_templates=templates))
    first = attrs.evolve(w.spec.composite_pod_group_templates[0], pod_group_templates=templates)
    return attrs.evolve(
        w,
        spec=attrs.evolve(
            w.spec, composite_pod_group_templates=(first, *w.spec.composite_pod_group_templates[1:])
        ),
    )


def _w_mixed_priorities(draw: st.DrawFn, w: Workload) -> Workload:
    leaves = _all_leaves(w)
    # mixing needs two templates: a one-template Workload cannot have mixed priorities
    assume(len(leaves) >= 2)
    current = leaves[-1].priority
    new = draw(st.integers(0, 1_000_000_000).filter(lambda p: p != current))
    if draw(st.booleans()):
        return _map_leaves(w, lambda t: attrs.evolve(t, priority=new))
    cls = draw(dns_labels(10).filter(lambda c: c != (leaves[0].priority_class_name or "")))
    return _map_leaves(w, lambda t: attrs.evolve(t, priority_class_name=cls))


def _bad_pg_policy(draw: st.DrawFn) -> PodGroupSchedulingPolicy:
    return draw(
        st.sampled_from(
            (
                PodGroupSchedulingPolicy(),
                PodGroupSchedulingPolicy(
                    basic=BasicSchedulingPolicy(), gang=GangSchedulingPolicy(min_count=2)
                ),
                PodGroupSchedulingPolicy(gang=GangSchedulingPolicy(min_count=0)),
                PodGroupSchedulingPolicy(gang=GangSchedulingPolicy(min_count=-3)),
                PodGroupSchedulingPolicy(gang=GangSchedulingPolicy(min_count=-(2**31))),
            )
        )
    )


def _bad_disruption(draw: st.DrawFn) -> DisruptionMode:
    return draw(
        st.sampled_from(
            (
                DisruptionMode(),
                DisruptionMode(single=SingleDisruptionMode(), all=AllDisruptionMode()),
            )
        )
    )


def _bad_claims(draw: st.DrawFn) -> tuple[PodGroupResourceClaim, ...]:
    kind = draw(
        st.sampled_from(("too-many", "no-source", "two-sources", "bad-name", "bad-source", "dup"))
    )
    if kind == "too-many":
        return tuple(
            PodGroupResourceClaim(name=f"c{i}", resource_claim_name=f"rc{i}")
            for i in range(draw(st.integers(5, 6)))
        )
    if kind == "no-source":
        return (PodGroupResourceClaim(name="c"),)
    if kind == "two-sources":
        return (
            PodGroupResourceClaim(
                name="c", resource_claim_name="a", resource_claim_template_name="b"
            ),
        )
    if kind == "bad-name":
        return (
            PodGroupResourceClaim(
                name=draw(st.sampled_from((*BAD_SHORT_NAMES, ""))), resource_claim_name="a"
            ),
        )
    if kind == "bad-source":
        return (
            PodGroupResourceClaim(
                name="c", resource_claim_template_name=draw(st.sampled_from((*BAD_LONG_NAMES, "")))
            ),
        )
    return (
        PodGroupResourceClaim(name="c", resource_claim_name="a"),
        PodGroupResourceClaim(name="c", resource_claim_name="b"),
    )


def _bad_topology(draw: st.DrawFn) -> tuple[TopologyConstraint, ...]:
    if draw(st.booleans()):
        return (TopologyConstraint(key="rack"), TopologyConstraint(key="zone"))
    return (TopologyConstraint(key=draw(st.sampled_from((*BAD_LABEL_KEYS, "")))),)


def _leaf_field_mutation(draw: st.DrawFn, obj: Any) -> Any:
    """Break one field shared by PodGroupTemplate and PodGroupSpec."""
    choice = draw(
        st.sampled_from(
            ("policy", "disruption", "claims", "topology", "class", "priority", "preemption")
        )
    )
    if choice == "policy":
        return attrs.evolve(obj, scheduling_policy=_bad_pg_policy(draw))
    if choice == "disruption":
        return attrs.evolve(obj, disruption_mode=_bad_disruption(draw))
    if choice == "claims":
        return attrs.evolve(obj, resource_claims=_bad_claims(draw))
    if choice == "topology":
        return attrs.evolve(
            obj, scheduling_constraints=PodGroupSchedulingConstraints(topology=_bad_topology(draw))
        )
    if choice == "class":
        return attrs.evolve(obj, priority_class_name=draw(st.sampled_from(BAD_LONG_NAMES)))
    if choice == "priority":
        return attrs.evolve(obj, priority=draw(st.integers(1_000_000_001, INT32_MAX)))
    return attrs.evolve(obj, preemption_policy=draw(st.sampled_from(("Always", "never", ""))))


def _w_leaf_field(draw: st.DrawFn, w: Workload) -> Workload:
    mutated = _leaf_field_mutation(draw, _all_leaves(w)[0])
    return _map_leaves(w, lambda t: mutated)


def _w_bad_unions(draw: st.DrawFn, w: Workload) -> Workload:
    leaves = _all_leaves(w)
    if draw(st.booleans()):
        return attrs.evolve(
            w, spec=attrs.evolve(w.spec, pod_group_templates=(), composite_pod_group_templates=())
        )
    if w.spec.pod_group_templates:
        cpg = CompositePodGroupTemplate(
            name="extra-composite",
            scheduling_policy=CompositePodGroupSchedulingPolicy(
                basic=CompositeBasicSchedulingPolicy()
            ),
            pod_group_templates=(attrs.evolve(leaves[0], name="extra-leaf"),),
            priority_class_name=leaves[0].priority_class_name,
            priority=leaves[0].priority,
        )
        return attrs.evolve(w, spec=attrs.evolve(w.spec, composite_pod_group_templates=(cpg,)))
    return attrs.evolve(
        w,
        spec=attrs.evolve(
            w.spec, pod_group_templates=(attrs.evolve(leaves[0], name="extra-leaf"),)
        ),
    )


def _chain(
    depth: int, leaf: PodGroupTemplate, priority: tuple[str | None, int | None]
) -> CompositePodGroupTemplate:
    node = CompositePodGroupTemplate(
        name=f"level-{depth}",
        scheduling_policy=CompositePodGroupSchedulingPolicy(basic=CompositeBasicSchedulingPolicy()),
        pod_group_templates=(leaf,),
        priority_class_name=priority[0],
        priority=priority[1],
    )
    for level in range(depth - 1, 0, -1):
        node = attrs.evolve(
            node,
            name=f"level-{level}",
            pod_group_templates=(),
            composite_pod_group_templates=(node,),
        )
    return node


def _w_deep_tree(draw: st.DrawFn, w: Workload) -> Workload:
    leaf = attrs.evolve(_all_leaves(w)[0], name="deep-leaf")
    depth = draw(st.integers(3, 6))
    tree = _chain(depth, leaf, (leaf.priority_class_name, leaf.priority))
    return attrs.evolve(
        w, spec=attrs.evolve(w.spec, pod_group_templates=(), composite_pod_group_templates=(tree,))
    )


def _w_composite_field(draw: st.DrawFn, w: Workload) -> Workload:
    if not w.spec.composite_pod_group_templates:
        return _w_deep_tree(draw, w)
    first = w.spec.composite_pod_group_templates[0]
    choice = draw(st.sampled_from(("childless", "policy", "name", "topology", "count")))
    if choice == "childless":
        first = attrs.evolve(first, pod_group_templates=(), composite_pod_group_templates=())
    elif choice == "policy":
        first = attrs.evolve(
            first,
            scheduling_policy=draw(
                st.sampled_from(
                    (
                        CompositePodGroupSchedulingPolicy(),
                        CompositePodGroupSchedulingPolicy(
                            basic=CompositeBasicSchedulingPolicy(),
                            gang=CompositeGangSchedulingPolicy(min_group_count=1),
                        ),
                    )
                )
            ),
        )
    elif choice == "name":
        first = attrs.evolve(first, name=draw(st.sampled_from((*BAD_SHORT_NAMES, ""))))
    elif choice == "topology":
        first = attrs.evolve(
            first,
            scheduling_constraints=CompositePodGroupSchedulingConstraints(
                topology=_bad_topology(draw)
            ),
        )
    else:
        first = attrs.evolve(
            first,
            scheduling_policy=CompositePodGroupSchedulingPolicy(
                gang=CompositeGangSchedulingPolicy(min_group_count=draw(st.integers(-5, 0)))
            ),
        )
    return attrs.evolve(
        w,
        spec=attrs.evolve(
            w.spec, composite_pod_group_templates=(first, *w.spec.composite_pod_group_templates[1:])
        ),
    )


def _w_controller_ref(draw: st.DrawFn, w: Workload) -> Workload:
    ref = draw(
        st.sampled_from(
            (
                TypedLocalObjectReference(kind="", name="x"),
                TypedLocalObjectReference(kind="Job", name=""),
                TypedLocalObjectReference(kind="a/b", name="x%y"),
                TypedLocalObjectReference(kind="Job", name="..", api_group="Bad_Group"),
            )
        )
    )
    return attrs.evolve(w, spec=attrs.evolve(w.spec, controller_ref=ref))


def _bad_meta(draw: st.DrawFn, obj: Any) -> Any:
    choice = draw(st.sampled_from(("name", "missing", "generate", "label")))
    meta = obj.metadata
    if choice == "name":
        meta = attrs.evolve(meta, name=draw(st.sampled_from(BAD_LONG_NAMES)))
    elif choice == "missing":
        meta = attrs.evolve(meta, name=None)
    elif choice == "generate":
        meta = attrs.evolve(
            meta, name=None, generate_name=draw(st.sampled_from(("ok-", "Bad_", "x.")))
        )
    else:
        meta = attrs.evolve(meta, labels={draw(st.sampled_from(BAD_LABEL_KEYS)): "v"})
    return attrs.evolve(obj, metadata=meta)


_WORKLOAD_MUTATIONS: dict[str, Mutation] = {
    "bad-template-name": _w_bad_template_name,
    "duplicate-template-name": _w_duplicate_name,
    "too-many-templates": _w_too_many_templates,
    "mixed-priorities": _w_mixed_priorities,
    "template-field": _w_leaf_field,
    "spec-union": _w_bad_unions,
    "deep-tree": _w_deep_tree,
    "composite-field": _w_composite_field,
    "controller-ref": _w_controller_ref,
    "metadata": _bad_meta,
}


def _pg_mutation(draw: st.DrawFn, pg: PodGroup) -> PodGroup:
    choice = draw(st.sampled_from(("field", "parent", "workload-ref", "metadata")))
    if choice == "field":
        return attrs.evolve(pg, spec=_leaf_field_mutation(draw, pg.spec))
    if choice == "parent":
        return attrs.evolve(
            pg,
            spec=attrs.evolve(
                pg.spec,
                parent_composite_pod_group_name=draw(st.sampled_from(("parent", *BAD_LONG_NAMES))),
                workload_ref=draw(st.sampled_from((None, pg.spec.workload_ref))),
            ),
        )
    if choice == "workload-ref":
        ref = WorkloadReference(
            workload_name=draw(st.sampled_from(("", *BAD_LONG_NAMES, "ok"))),
            template_name=draw(st.sampled_from(("", *BAD_SHORT_NAMES, "ok"))),
        )
        return attrs.evolve(pg, spec=attrs.evolve(pg.spec, workload_ref=ref))
    result: PodGroup = _bad_meta(draw, pg)
    return result


def _cpg_mutation(draw: st.DrawFn, cpg: CompositePodGroup) -> CompositePodGroup:
    choice = draw(
        st.sampled_from(
            ("policy", "count", "topology", "parent", "workload-ref", "disruption", "metadata")
        )
    )
    spec = cpg.spec
    if choice == "policy":
        spec = attrs.evolve(spec, scheduling_policy=CompositePodGroupSchedulingPolicy())
    elif choice == "count":
        spec = attrs.evolve(
            spec,
            scheduling_policy=CompositePodGroupSchedulingPolicy(
                gang=CompositeGangSchedulingPolicy(min_group_count=draw(st.integers(-(2**31), 0)))
            ),
        )
    elif choice == "topology":
        spec = attrs.evolve(
            spec,
            scheduling_constraints=CompositePodGroupSchedulingConstraints(
                topology=_bad_topology(draw)
            ),
        )
    elif choice == "parent":
        spec = attrs.evolve(
            spec, parent_composite_pod_group_name=draw(st.sampled_from(BAD_LONG_NAMES))
        )
    elif choice == "workload-ref":
        spec = attrs.evolve(
            spec,
            workload_ref=WorkloadReference(
                workload_name=draw(st.sampled_from(("", *BAD_LONG_NAMES))),
                template_name=draw(st.sampled_from(("", *BAD_SHORT_NAMES))),
            ),
        )
    elif choice == "disruption":
        spec = attrs.evolve(spec, disruption_mode=_bad_disruption(draw))
    else:
        result: CompositePodGroup = _bad_meta(draw, cpg)
        return result
    return attrs.evolve(cpg, spec=spec)


@st.composite
def nearly_valid_cases(draw: st.DrawFn, namespace: str = "default") -> tuple[str, SchedulingObject]:
    """``(mutation name, object)``: a valid object with exactly one mutation applied."""
    kind = draw(st.sampled_from(("Workload", "Workload", "PodGroup", "CompositePodGroup")))
    if kind == "Workload":
        w = draw(workloads(namespace))
        name = draw(st.sampled_from(sorted(_WORKLOAD_MUTATIONS)))
        return f"Workload/{name}", _WORKLOAD_MUTATIONS[name](draw, w)
    if kind == "PodGroup":
        return "PodGroup", _pg_mutation(draw, draw(pod_groups(namespace)))
    return "CompositePodGroup", _cpg_mutation(draw, draw(composite_pod_groups(namespace)))


def nearly_valid_objects(namespace: str = "default") -> st.SearchStrategy[SchedulingObject]:
    """Objects one mutation away from valid (see :func:`nearly_valid_cases`)."""
    return nearly_valid_cases(namespace).map(lambda case: case[1])


# ---- bad input for the source kinds (issue 13) ---------------------------------------------

#: out-of-range and wrongly typed values for any field (issue 13)
BAD_VALUES = st.sampled_from(
    [
        -1,
        -3,
        2**31,
        3_000_000_000,
        10**29,
        1e29,
        -(2**31) - 1,
        "four",
        "4",
        "",
        True,
        None,
        [],
        [1],
        {},
        {"a": 1},
        1.5,
    ]
)


def source_manifests(namespace: str = "ns") -> list[dict[str, Any]]:
    """One valid manifest of each source kind (Job, JobSet, LWS, Workload, PodGroup,
    GenericWorkload) in ``namespace``."""
    return [
        make_job("j", namespace).parallelism(4).completions(4).gang().obj(),
        make_job("j", namespace).parallelism(2).obj(),
        make_jobset("js", namespace)
        .replicated_job(make_replicated_job("w").replicas(2))
        .scheduling({"schedulingPolicy": {"gang": {}}})
        .obj(),
        make_lws("l", namespace)
        .replicas(2)
        .size(3)
        .scheduling({"schedulingPolicy": {"gang": {}}})
        .obj(),
        make_workload("w", namespace)
        .pod_group_template(make_pod_group_template("a").gang(2))
        .obj(),
        make_pod_group("pg", namespace).gang(3).obj(),
        {
            "apiVersion": "workloadbuilder.io/v1alpha1",
            "kind": "GenericWorkload",
            "metadata": {"name": "g", "namespace": namespace},
            "spec": {
                "groups": [
                    {
                        "name": "slices",
                        "replicas": 2,
                        "scheduling": {"schedulingPolicy": {"gang": {}}},
                        "podSets": [{"name": "slice", "replicas": 2, "count": 4}],
                    }
                ]
            },
        },
    ]


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def one_bad_field(draw: st.DrawFn, namespace: str = "ns") -> dict[str, Any]:
    """A :func:`source_manifests` document with one ``spec``/``metadata`` value replaced by an
    out-of-range or wrongly typed value (:data:`BAD_VALUES`)."""
    doc = copy.deepcopy(draw(st.sampled_from(source_manifests(namespace))))
    paths = [p for p in _paths(doc) if p[0] in ("spec", "metadata")]
    path = draw(st.sampled_from(paths))
    target: Any = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = draw(BAD_VALUES)
    return doc
