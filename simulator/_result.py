"""What a simulation produced: per-pod and per-group records, the JSON summary and the table."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from simulator._units import format_duration

__all__ = [
    "GroupRecord",
    "NodeRecord",
    "PodRecord",
    "SimulationResult",
    "Violation",
    "compress_names",
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
    reason: str | None = None
    message: str | None = None
    wait_message: str | None = None

    @property
    def waited(self) -> float | None:
        """Seconds from arrival until the group was scheduled (None if it never was)."""
        return None if self.scheduled_at is None else max(0.0, self.scheduled_at - self.arrival)


@attrs.frozen(kw_only=True)
class NodeRecord:
    """A node, its allocatable resources (numbers), labels and when it joined."""

    name: str
    allocatable: dict[str, float]
    labels: dict[str, str]
    added: float


@attrs.frozen(kw_only=True)
class Violation:
    """A moment when a gang had between 1 and ``min_count - 1`` pods bound by the scheduler."""

    time: float
    namespace: str
    name: str
    min_count: int
    bound: int


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
                    "reason": g.reason,
                    "message": g.message,
                    "waitReason": g.wait_message,
                }
                for g in self.groups
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
            "invariantViolations": [
                {
                    "time": _round(v.time),
                    "namespace": v.namespace,
                    "podGroup": v.name,
                    "minCount": v.min_count,
                    "boundPods": v.bound,
                }
                for v in self.violations
            ],
            "rounds": self.rounds,
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


def render_table(result: SimulationResult) -> str:
    """The human-readable report printed by ``workloadbuilder simulate``."""
    counts = result.pod_counts()
    lines = [
        f"Simulated {result.source}: {len(result.nodes)} nodes, {len(result.groups)} pod groups, "
        f"{counts['total']} pods; simulation ended at {format_duration(result.end)}"
        + (f" (horizon {format_duration(result.until)})" if result.until is not None else ""),
        "",
    ]
    header = (
        "POD GROUP",
        "OWNER",
        "PRIO",
        "MIN",
        "BOUND",
        "ARRIVED",
        "SCHEDULED",
        "WAITED",
        "NODES",
        "STATUS",
    )
    rows: list[tuple[str, ...]] = []
    for g in sorted(
        result.groups, key=lambda g: (g.arrival, g.scheduled_at is None, g.namespace, g.name)
    ):
        if g.initially_scheduled:
            status = g.reason or "Scheduled"
            if g.wait_message and (g.waited or 0) > 0:
                status += f" (waited: {g.wait_message})"
        elif g.scheduled_at is not None:
            status = "Bound (no PodGroupInitiallyScheduled condition)"
        else:
            status = g.reason or "Pending"
            if g.message:
                status += f": {g.message}"
        rows.append(
            (
                f"{g.namespace}/{g.name}",
                g.owner or "-",
                "-" if g.priority is None else str(g.priority),
                str(g.min_count) if g.min_count is not None else "basic",
                f"{g.bound_pods}/{g.total_pods}",
                format_duration(g.arrival),
                format_duration(g.scheduled_at),
                format_duration(g.waited),
                compress_names(g.nodes, limit=2) or "-",
                status,
            )
        )
    if rows:
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
        for r in [header, *rows]:
            cells = [c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)]
            lines.append("  ".join([*cells, r[-1]]).rstrip())
    else:
        lines.append("(no pod groups)")
    single = [p for p in result.live_pods if p.group is None]
    lines.append("")
    lines.append(
        f"pods: {counts['total']} total, {counts['bound']} bound ({counts['running']} running, "
        f"{counts['succeeded']} succeeded), {counts['pending']} pending"
        + (
            f"; {len(single)} without a group ({sum(p.bound is not None for p in single)} bound)"
            if single
            else ""
        )
    )
    lines.append(
        f"makespan: {format_duration(result.makespan)}"
        + ("" if result.complete else " (some pods never got bound)")
    )
    if result.violations:
        lines.append(f"INVARIANT VIOLATED {len(result.violations)} time(s):")
        for v in result.violations[:10]:
            lines.append(
                f"  at {format_duration(v.time)}: {v.namespace}/{v.name} had {v.bound} of "
                f"minCount {v.min_count} pods bound"
            )
    else:
        lines.append("gang invariant: held (no gang ever had between 1 and minCount-1 pods bound)")
    return "\n".join(lines) + "\n"
