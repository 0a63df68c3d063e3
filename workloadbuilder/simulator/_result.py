"""What a simulation produced: per-pod and per-group records, the JSON summary and the table."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from workloadbuilder.simulator._dra import ClaimRecord
from workloadbuilder.simulator._preemption import PreemptionRecord
from workloadbuilder.simulator._units import format_duration

__all__ = [
    "CompositeRecord",
    "GroupRecord",
    "NodeRecord",
    "PodRecord",
    "SimulationResult",
    "Violation",
    "compress_names",
    "plural",
    "render_table",
    "utilization_series",
]


@attrs.frozen(kw_only=True)
class PodRecord:
    """One pod: when it was created, bound (to ``node``) and finished (simulation seconds).

    ``ours`` is False for pods the scenario bound itself (``spec.nodeName``) or that name
    another scheduler; ``deleted`` is set when the pod disappeared from the cluster."""

    namespace: str
    name: str
    group: str | None
    owner: str
    created: float
    node: str | None = None
    bound: float | None = None
    finished: float | None = None
    deleted: float | None = None
    ours: bool = True
    requests: dict[str, float] = attrs.field(factory=dict)
    #: when the scheduler preempted it (then ``deleted`` is the same time)
    preempted: float | None = None


@attrs.frozen(kw_only=True)
class GroupRecord:
    """One PodGroup as the simulation saw it.

    ``bound_pods`` counts pods that were bound and still exist (running or succeeded);
    ``scheduled_at`` is when ``PodGroupInitiallyScheduled`` became True (when the scheduler
    writes no status: when ``minCount`` pods, 1 for basic groups, were bound); ``reason`` and
    ``message`` are that condition's latest values (or the scheduler's explanation);
    ``wait_message`` is the last Unschedulable message seen before the group was scheduled."""

    namespace: str
    name: str
    policy: str
    min_count: int | None
    owner: str
    arrival: float
    total_pods: int
    bound_pods: int
    initially_scheduled: bool
    scheduled_at: float | None
    nodes: tuple[str, ...]
    priority: int | None = None
    #: ``(pod, node)`` of each bound pod of the group, by pod name
    placements: tuple[tuple[str, str], ...] = ()
    reason: str | None = None
    message: str | None = None
    wait_message: str | None = None
    template: str | None = None
    parent: str | None = None
    key: str | None = None
    domains: dict[str, str | list[str]] = attrs.field(factory=dict)
    finished_at: float | None = None
    #: the times its pods were preempted
    preempted_at: tuple[float, ...] = ()

    @property
    def waited(self) -> float | None:
        """Seconds from arrival until the group was scheduled (None if it never was)."""
        return None if self.scheduled_at is None else max(0.0, self.scheduled_at - self.arrival)

    @property
    def short_name(self) -> str:
        """``Kind/name template`` for groups a scenario object created (the owner and the
        Workload template), ``namespace/name`` for hand-written ones."""
        if self.owner and self.template:
            return f"{self.owner} {self.template}"
        return self.owner or f"{self.namespace}/{self.name}"


@attrs.frozen(kw_only=True)
class CompositeRecord:
    """One CompositePodGroup: its policy, children (PodGroups and CompositePodGroups, by name),
    ``CompositePodGroupInitiallyScheduled`` (``scheduled_at``: when it became True or, when
    the scheduler writes no status, when ``minGroupCount`` children — one for basic — were
    scheduled), and the domains its pods landed in."""

    namespace: str
    name: str
    owner: str
    arrival: float
    policy: str
    min_group_count: int | None
    children: tuple[str, ...]
    initially_scheduled: bool
    scheduled_at: float | None
    reason: str | None = None
    message: str | None = None
    template: str | None = None
    parent: str | None = None
    key: str | None = None
    domains: dict[str, str | list[str]] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class NodeRecord:
    """A node, its allocatable resources (numbers), labels and when it joined."""

    name: str
    allocatable: dict[str, float]
    labels: dict[str, str]
    added: float


@attrs.frozen(kw_only=True)
class Violation:
    """A broken invariant. ``type`` ``gang``: a gang had between 1 and ``min_count - 1`` pods
    bound (``bound``) after the scheduler bound some; ``composite``: a CompositePodGroup had
    between 1 and ``minGroupCount - 1`` (``min_count``) children with pods bound (``bound``);
    ``topology``: a group or composite tree had pods in more than one domain of its key;
    ``preemption``: a victim's priority was not below its preemptor's, or a
    ``disruptionMode: all`` unit was preempted only in part.
    ``message`` says it in words."""

    time: float
    namespace: str
    name: str
    min_count: int
    bound: int
    type: str = "gang"
    message: str = ""

    @property
    def text(self) -> str:
        """The violation in words."""
        if self.message:
            return self.message
        return (
            f"{self.namespace}/{self.name} had {self.bound} of minCount {self.min_count} "
            f"pod{'s' if self.min_count != 1 else ''} bound"
        )


@attrs.frozen(kw_only=True)
class SimulationResult:
    """The outcome of one simulation (all times in simulation seconds from the start)."""

    source: str
    scheduler_name: str
    end: float
    rounds: int
    pods: tuple[PodRecord, ...]
    groups: tuple[GroupRecord, ...]
    nodes: tuple[NodeRecord, ...]
    violations: tuple[Violation, ...] = ()
    until: float | None = None
    last_arrival: float = 0.0
    topology_keys: tuple[str, ...] = ()
    composites: tuple[CompositeRecord, ...] = ()
    preemptions: tuple[PreemptionRecord, ...] = ()
    #: DRA ResourceClaims with the allocation the scheduler wrote (see ``._dra``)
    resource_claims: tuple[ClaimRecord, ...] = ()

    @property
    def live_pods(self) -> tuple[PodRecord, ...]:
        """Pods that still exist at the end."""
        return tuple(p for p in self.pods if p.deleted is None)

    @property
    def makespan(self) -> float | None:
        """When the last pod finished or, for pods that run to the end, was bound; None when no
        pod was ever bound."""
        times = [t for p in self.pods for t in (p.bound, p.finished) if t is not None]
        return max(times) if times else None

    @property
    def complete(self) -> bool:
        """Every pod was bound and every pod with a duration finished."""
        return all(p.bound is not None for p in self.live_pods)

    def pod_counts(self) -> dict[str, int]:
        """``total``, ``bound`` (ever bound: running + succeeded), ``running``, ``pending``
        (never bound) and ``succeeded`` over the pods that exist at the end."""
        live = self.live_pods
        bound = sum(1 for p in live if p.bound is not None)
        succeeded = sum(1 for p in live if p.finished is not None)
        return {
            "total": len(live),
            "bound": bound,
            "running": bound - succeeded,
            "pending": len(live) - bound,
            "succeeded": succeeded,
        }

    @property
    def display_end(self) -> float:
        """The right edge for pictures: the horizon, or the last thing that happened."""
        if self.until is not None:
            return self.until
        times = [self.last_arrival]
        times += [t for p in self.pods for t in (p.created, p.bound, p.finished) if t is not None]
        return max(times)

    def to_json(self) -> dict[str, Any]:
        """The JSON summary (see docs/simulator.md for the fields)."""
        util = utilization_series(self)
        end = self.display_end
        summary_util: dict[str, Any] = {}
        for res, series in util.items():
            summary_util[res] = {
                "mean": _round(_time_weighted_mean(series, end)),
                "peak": _round(max((u / c for _, u, c in series if c > 0), default=0.0)),
            }
        return {
            "scenario": self.source,
            "schedulerName": self.scheduler_name,
            "podGroups": [
                {
                    "namespace": g.namespace,
                    "name": g.name,
                    "policy": g.policy,
                    "minCount": g.min_count,
                    "priority": g.priority,
                    "owner": g.owner or None,
                    "arrival": _round(g.arrival),
                    "totalPods": g.total_pods,
                    "boundPods": g.bound_pods,
                    "initiallyScheduled": g.initially_scheduled,
                    "scheduledAt": _round(g.scheduled_at),
                    "waited": _round(g.waited),
                    "nodes": list(g.nodes),
                    "placements": dict(g.placements),
                    "reason": g.reason,
                    "message": g.message,
                    "waitReason": g.wait_message,
                    "finishedAt": _round(g.finished_at),
                    "preemptedAt": [_round(x) for x in g.preempted_at],
                    "template": g.template,
                    "parent": g.parent,
                    "topologyKey": g.key,
                    "domains": dict(g.domains),
                }
                for g in self.groups
            ],
            "compositePodGroups": [
                {
                    "namespace": c.namespace,
                    "name": c.name,
                    "policy": c.policy,
                    "minGroupCount": c.min_group_count,
                    "children": list(c.children),
                    "parent": c.parent,
                    "owner": c.owner or None,
                    "arrival": _round(c.arrival),
                    "initiallyScheduled": c.initially_scheduled,
                    "scheduledAt": _round(c.scheduled_at),
                    "reason": c.reason,
                    "message": c.message,
                    "topologyKey": c.key,
                    "domains": dict(c.domains),
                }
                for c in self.composites
            ],
            "pods": self.pod_counts(),
            "pendingPods": [
                {"namespace": p.namespace, "name": p.name, "podGroup": p.group}
                for p in self.live_pods
                if p.bound is None
            ],
            "makespan": _round(self.makespan),
            "end": _round(self.end),
            "until": _round(self.until),
            "complete": self.complete,
            "nodes": len(self.nodes),
            "utilization": summary_util,
            "preemptions": [p.to_json() for p in self.preemptions],
            "invariantViolations": [
                {
                    "time": _round(v.time),
                    "type": v.type,
                    "namespace": v.namespace,
                    "podGroup": v.name,
                    "minCount": v.min_count,
                    "boundPods": v.bound,
                    "message": v.text,
                }
                for v in self.violations
            ],
            "rounds": self.rounds,
            "resourceClaims": [c.to_json() for c in self.resource_claims],
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def _time_weighted_mean(series: Sequence[tuple[float, float, float]], end: float) -> float:
    used_area = cap_area = 0.0
    for i, (t, used, cap) in enumerate(series):
        t_next = series[i + 1][0] if i + 1 < len(series) else end
        span = max(0.0, min(t_next, end) - t)
        used_area += used * span
        cap_area += cap * span
    if cap_area <= 0:
        last = series[-1] if series else (0.0, 0.0, 0.0)
        return last[1] / last[2] if last[2] > 0 else 0.0
    return used_area / cap_area


def utilization_series(result: SimulationResult) -> dict[str, list[tuple[float, float, float]]]:
    """Per resource, a step series ``(time, used, allocatable)`` starting at 0: each entry
    holds until the next one. Resources: those the nodes offer that some pod requests
    (``cpu`` and ``memory`` always, ``pods`` never)."""
    requested = {r for p in result.pods for r in p.requests}
    offered = {r for n in result.nodes for r in n.allocatable}
    resources = sorted(
        r for r in offered if r != "pods" and (r in requested or r in ("cpu", "memory"))
    )
    events: list[tuple[float, str, float, float]] = []  # (time, resource, d_used, d_cap)
    for n in result.nodes:
        for r in resources:
            events.append((n.added, r, 0.0, n.allocatable.get(r, 0.0)))
    for p in result.pods:
        if p.bound is None:
            continue
        stop = p.finished if p.finished is not None else p.deleted
        for r in resources:
            q = p.requests.get(r, 0.0)
            if q:
                events.append((p.bound, r, q, 0.0))
                if stop is not None:
                    events.append((stop, r, -q, 0.0))
    out: dict[str, list[tuple[float, float, float]]] = {}
    for r in resources:
        evs = sorted((e for e in events if e[1] == r), key=lambda e: e[0])
        series: list[tuple[float, float, float]] = [(0.0, 0.0, 0.0)]
        used = cap = 0.0
        for t, _, du, dc in evs:
            used += du
            cap += dc
            if series[-1][0] == t:
                series[-1] = (t, used, cap)
            else:
                series.append((t, used, cap))
        out[r] = series
    return out


_NUMBERED = re.compile(r"^(.*?)(\d+)$")


def compress_names(names: Iterable[str], limit: int = 4) -> str:
    """``gpu-000, gpu-001, gpu-002, cpu-1`` -> ``cpu-1, gpu-[000-002]`` (at most ``limit``
    parts, then ``+N more``)."""
    by_prefix: dict[str, list[tuple[int, str]]] = {}
    plain: list[str] = []
    for n in sorted(set(names)):
        m = _NUMBERED.match(n)
        if m:
            by_prefix.setdefault(m.group(1), []).append((int(m.group(2)), m.group(2)))
        else:
            plain.append(n)
    parts: list[str] = list(plain)
    for prefix, nums in sorted(by_prefix.items()):
        nums.sort()
        start = prev = nums[0]
        for cur in [*nums[1:], None]:
            if cur is not None and cur[0] == prev[0] + 1:
                prev = cur
                continue
            if start == prev:
                parts.append(f"{prefix}{start[1]}")
            else:
                parts.append(f"{prefix}[{start[1]}-{prev[1]}]")
            if cur is not None:
                start = prev = cur
    if len(parts) > limit:
        return ", ".join(parts[:limit]) + f" +{len(parts) - limit} more"
    return ", ".join(parts)


def plural(n: int, word: str, words: str | None = None) -> str:
    """``1 pod``, ``2 pods`` (``words``: an irregular plural)."""
    return f"{n} {word if n == 1 else (words or word + 's')}"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(1, width - 1)] + "\u2026"


def _status_parts(g: GroupRecord) -> tuple[str, str | None]:
    """The STATUS word(s) and the explanation that goes with them (None: none)."""
    if g.initially_scheduled:
        if g.wait_message and (g.waited or 0) > 0:
            return f"{g.reason or 'Scheduled'} after waiting", g.wait_message
        return g.reason or "Scheduled", None
    if g.scheduled_at is not None:
        return "Bound (no PodGroupInitiallyScheduled condition)", None
    if g.reason == "Waiting" and g.message:
        return "Waiting: " + g.message.removeprefix("waiting: "), None
    return g.reason or "Pending", g.message or None


def _status(g: GroupRecord) -> str:
    if g.initially_scheduled:
        status = g.reason or "Scheduled"
        if g.wait_message and (g.waited or 0) > 0:
            status += f" (waited: {g.wait_message})"
        return status
    if g.scheduled_at is not None:
        return "Bound (no PodGroupInitiallyScheduled condition)"
    if g.reason == "Waiting" and g.message:
        return "Waiting: " + g.message.removeprefix("waiting: ")
    status = g.reason or "Pending"
    return status + (f": {g.message}" if g.message else "")


def _domain_text(domains: dict[str, str | list[str]], key: str | None) -> str:
    if key is None or key not in domains:
        return "-"
    value = domains[key]
    return value if isinstance(value, str) else "+".join(value)


_SHORT_NAME_WIDTH = 40


def render_table(result: SimulationResult, *, wide: bool = False, width: int | None = None) -> str:
    """The human-readable report printed by ``workloadbuilder simulate``.

    By default group names are short (the owner ``Kind/name`` and the Workload template;
    ``namespace/name`` for hand-written groups) and the scheduler's explanations are
    numbered notes below the table, wrapped to ``width`` columns (default: the terminal's,
    else 120); ``wide=True`` (``-o wide``) shows full names, the owner and the explanations
    inline, one line per group."""
    if width is None:
        import shutil

        width = shutil.get_terminal_size((120, 24)).columns
    counts = result.pod_counts()
    lines = [
        f"Simulated {result.source}: {plural(len(result.nodes), 'node')}, "
        f"{plural(len(result.groups), 'pod group')}"
        + (
            f", {plural(len(result.composites), 'composite pod group')}"
            if result.composites
            else ""
        )
        + f", {plural(counts['total'], 'pod')}; simulation ended at "
        f"{format_duration(result.end)}"
        + (f" (horizon {format_duration(result.until)})" if result.until is not None else ""),
        "",
    ]
    short = _short_names(result.groups)
    table, notes = _group_table(result, short, wide=wide)
    lines.extend(table)
    if notes:
        import textwrap

        lines.append("")
        for note in notes:
            lines.extend(
                textwrap.wrap(note, width=max(60, width), subsequent_indent="    ") or [note]
            )
    if result.composites:
        lines.append("")
        trees = _composite_trees(result, short, wide=wide)
        lines.extend(trees if wide else [_cut(line, max(60, width)) for line in trees])
    lines.append("")
    lines.extend(_summary(result, counts, wide=wide, width=width))
    return "\n".join(lines) + "\n"


def _group_table(
    result: SimulationResult, short: dict[tuple[str, str], str], *, wide: bool
) -> tuple[list[str], list[str]]:
    """The lines of the pod group table, and the numbered notes that go below it."""
    with_domain = any(g.key for g in result.groups)
    header = (
        "POD GROUP",
        *(("OWNER",) if wide else ()),
        "PRIO",
        "MIN",
        "BOUND",
        "ARRIVED",
        "SCHEDULED",
        "WAITED",
        "NODES",
        *(("DOMAIN",) if with_domain else ()),
        "STATUS",
    )
    rows: list[tuple[str, ...]] = []
    notes: list[str] = []
    for g in sorted(
        result.groups, key=lambda g: (g.arrival, g.scheduled_at is None, g.namespace, g.name)
    ):
        name = (
            f"{g.namespace}/{g.name}"
            if wide
            else _cut(short[(g.namespace, g.name)], _SHORT_NAME_WIDTH)
        )
        if wide:
            status = _status(g)
        else:  # the explanation goes below the table, where it has the whole width
            status, why = _status_parts(g)
            if why:
                notes.append(f"[{len(notes) + 1}] {short[(g.namespace, g.name)]}: {why}")
                status += f" [{len(notes)}]"
        rows.append(
            (
                name,
                *((g.owner or "-",) if wide else ()),
                "-" if g.priority is None else str(g.priority),
                str(g.min_count) if g.min_count is not None else g.policy,
                f"{g.bound_pods}/{g.total_pods}",
                format_duration(g.arrival),
                format_duration(g.scheduled_at),
                format_duration(g.waited),
                compress_names(g.nodes, limit=2) or "-",
                *((_domain_text(g.domains, g.key),) if with_domain else ()),
                status,
            )
        )
    if not rows:
        return ["(no pod groups)"], notes
    lines: list[str] = []
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    for r in [header, *rows]:
        cells = [c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)]
        lines.append("  ".join([*cells, r[-1]]).rstrip())
    return lines, notes


def _summary(
    result: SimulationResult, counts: dict[str, int], *, wide: bool, width: int
) -> list[str]:
    """The lines below the table: pods, makespan, preemptions and the invariants."""
    single = [p for p in result.live_pods if p.group is None]
    lines = [
        f"pods: {counts['total']} total, {counts['bound']} bound ({counts['running']} running, "
        f"{counts['succeeded']} succeeded), {counts['pending']} pending"
        + (
            f"; {len(single)} without a group ({sum(p.bound is not None for p in single)} bound)"
            if single
            else ""
        ),
        f"makespan: {format_duration(result.makespan)}"
        + ("" if result.complete else " (some pods never got bound)"),
    ]
    if result.preemptions:
        lines.append(f"preemptions: {len(result.preemptions)}")
        shown = {(g.namespace, g.name): g.short_name for g in result.groups}
        for pr in result.preemptions[:10]:
            line = f"  at {format_duration(pr.at)}: {pr.text(shown)}"
            lines.append(line if wide else _cut(line, max(60, width)))
        if len(result.preemptions) > 10:
            lines.append(f"  ... and {len(result.preemptions) - 10} more (-o json lists all)")
    if result.violations:
        lines.append(f"INVARIANT VIOLATED {plural(len(result.violations), 'time')}:")
        for v in result.violations[:10]:
            lines.append(f"  at {format_duration(v.time)}: [{v.type}] {v.text}")
        if len(result.violations) > 10:
            lines.append(f"  ... and {len(result.violations) - 10} more")
        return lines
    lines.append("gang invariant: held (no gang ever had between 1 and minCount-1 pods bound)")
    if result.composites:
        lines.append(
            "composite invariant: held (no tree ever had between 1 and minGroupCount-1 "
            "children bound)"
        )
    if any(g.key for g in result.groups) or any(c.key for c in result.composites):
        lines.append("topology invariant: held (no constrained group ever had pods in two domains)")
    if result.preemptions:
        lines.append(
            "preemption invariant: held (every victim of lower priority than its "
            "preemptor, disruptionMode all groups preempted whole)"
        )
    return lines


def _short_names(groups: Sequence[GroupRecord]) -> dict[tuple[str, str], str]:
    """Short names, made unique with ``#i`` (creation order) where several groups share one."""
    names = {(g.namespace, g.name): g.short_name for g in groups}
    seen: dict[str, int] = {}
    for n in names.values():
        seen[n] = seen.get(n, 0) + 1
    index: dict[str, int] = {}
    out: dict[tuple[str, str], str] = {}
    for key, n in names.items():
        if seen[n] > 1:
            out[key] = f"{n} #{index.get(n, 0)}"
            index[n] = index.get(n, 0) + 1
        else:
            out[key] = n
    return out


def _where(key: str | None, domains: dict[str, str | list[str]]) -> str:
    if key is None:
        return ""
    if key not in domains:
        return f"; {key}"
    return f"; {key}={_domain_text(domains, key)}"


def _composite_trees(
    result: SimulationResult, short: dict[tuple[str, str], str], *, wide: bool
) -> list[str]:
    groups = {(g.namespace, g.name): g for g in result.groups}
    comps = {(c.namespace, c.name): c for c in result.composites}
    lines = ["COMPOSITE POD GROUPS (trees; children indented under their parent)"]

    def describe_comp(c: CompositeRecord) -> str:
        done = sum(
            1
            for child in c.children
            if ((g := groups.get((c.namespace, child))) is not None and g.scheduled_at is not None)
            or ((cc := comps.get((c.namespace, child))) is not None and cc.scheduled_at is not None)
        )
        policy = f"gang {c.min_group_count}" if c.min_group_count is not None else "basic"
        where = _where(c.key, c.domains)
        if c.initially_scheduled:
            state = f"{c.reason or 'Scheduled'} at {format_duration(c.scheduled_at)}"
        elif c.scheduled_at is not None:
            state = f"children scheduled at {format_duration(c.scheduled_at)}"
        else:
            state = (c.reason or "Pending") + (f": {c.message}" if c.message else "")
        return (
            f"CompositePodGroup {c.namespace}/{c.name} ({policy}, {done} of "
            f"{plural(len(c.children), 'child', 'children')} scheduled{where}): {state}"
        )

    def describe_group(g: GroupRecord) -> str:
        name = f"{g.namespace}/{g.name}" if wide else short[(g.namespace, g.name)]
        policy = f"gang {g.min_count}" if g.min_count is not None else g.policy
        where = _where(g.key, g.domains)
        text = f"PodGroup {name} ({policy}, {g.bound_pods}/{g.total_pods} bound{where}): "
        return text + (_status(g) if wide else _status_parts(g)[0])

    def walk(c: CompositeRecord, prefix: str, depth: int) -> None:
        for i, child in enumerate(c.children):
            last = i == len(c.children) - 1
            branch = "\u2514\u2500 " if last else "\u251c\u2500 "
            key = (c.namespace, child)
            if key in comps and depth < 8:
                lines.append(prefix + branch + describe_comp(comps[key]))
                walk(comps[key], prefix + ("   " if last else "\u2502  "), depth + 1)
            elif key in groups:
                lines.append(prefix + branch + describe_group(groups[key]))
            else:
                lines.append(prefix + branch + f"{child} (not created)")

    for c in result.composites:
        if c.parent and (c.namespace, c.parent) in comps:
            continue
        lines.append(describe_comp(c))
        walk(c, "  ", 0)
    return lines
