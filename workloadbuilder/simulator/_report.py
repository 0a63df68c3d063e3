"""``--report DIR``: ``summary.json``, ``timeline.png`` and ``utilization.png``."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from workloadbuilder.simulator._result import (
    GroupRecord,
    NodeRecord,
    PodRecord,
    SimulationResult,
    utilization_series,
)
from workloadbuilder.simulator._units import format_duration

__all__ = ["plot_timeline", "plot_utilization", "write_report"]

_MAX_GROUP_ROWS = 40


def write_report(result: SimulationResult, directory: str | os.PathLike[str]) -> list[Path]:
    """Write ``summary.json`` and the two pictures into ``directory`` (created if needed);
    returns the paths written."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    summary = out / "summary.json"
    summary.write_text(json.dumps(result.to_json(), indent=2) + "\n", encoding="utf-8")
    timeline = out / "timeline.png"
    plot_timeline(result, timeline)
    utilization = out / "utilization.png"
    plot_utilization(result, utilization)
    return [summary, timeline, utilization]


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


_NICE_STEPS = (
    1,
    2,
    5,
    10,
    15,
    20,
    30,
    60,
    120,
    300,
    600,
    900,
    1200,
    1800,
    3600,
    7200,
    10800,
    21600,
    43200,
    86400,
)


def _time_step(end: float) -> float:
    """A round tick step (1s, 30s, 5m, 1h, ...) giving at most about 10 ticks."""
    for step in _NICE_STEPS:
        if end / step <= 10:
            return float(step)
    return float(86400 * max(1, round(end / 86400 / 10)))


def _time_axis(ax: Any, end: float) -> None:
    from matplotlib.ticker import FuncFormatter, MultipleLocator

    ax.set_xlim(0, end)
    ax.xaxis.set_major_locator(MultipleLocator(_time_step(end)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: format_duration(max(0.0, x))))
    ax.grid(axis="x", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)


#: The colour of pods without a group; no group gets a grey.
NO_GROUP_COLOR = "#bbbbbb"


def _palette() -> list[Any]:
    """tab20 without its two greys (grey means "no group"), strong colours first, then
    tab20b's."""
    from matplotlib import colormaps

    tab20, tab20b = colormaps["tab20"], colormaps["tab20b"]
    strong = [i for i in range(0, 20, 2) if i != 14]
    light = [i for i in range(1, 20, 2) if i != 15]
    return [tab20(i) for i in strong + light] + [tab20b(i) for i in range(20)]


def _group_colors(names: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Any]:
    palette = _palette()
    return {key: palette[i % len(palette)] for i, key in enumerate(names)}


def _share(p: PodRecord, allocatable: dict[str, float]) -> float:
    """A pod's dominant share of a node: the largest request / allocatable (at least 2%)."""
    shares = [
        q / allocatable[r]
        for r, q in p.requests.items()
        if r != "pods" and allocatable.get(r, 0.0) > 0 and q > 0
    ]
    return max([0.02, *shares])


def _stack(pods: list[PodRecord], shares: list[float], end: float) -> tuple[list[float], float]:
    """First-fit vertical offsets so pods that overlap in time on one node do not overlap on
    the picture; returns the offsets and the height of the stack (1.0 = the node is full)."""
    placed: list[tuple[float, float, float, float]] = []  # (start, stop, y0, y1)
    offsets = [0.0] * len(pods)
    for i in sorted(range(len(pods)), key=lambda i: (pods[i].bound or 0.0, pods[i].name)):
        start, stop, h = pods[i].bound or 0.0, _stop(pods[i], end), shares[i]
        live = [(y0, y1) for s0, s1, y0, y1 in placed if s0 < stop - 1e-9 and start < s1 - 1e-9]
        for y in sorted({0.0, *(y1 for _, y1 in live)}):
            if all(y + h <= y0 + 1e-9 or y >= y1 - 1e-9 for y0, y1 in live):
                offsets[i] = y
                break
        placed.append((start, stop, offsets[i], offsets[i] + h))
    top = max([1.0, *(y1 for _, _, _, y1 in placed)])
    return offsets, top


def _stop(p: PodRecord, end: float) -> float:
    for t in (p.finished, p.deleted):
        if t is not None:
            return t
    return end


def plot_timeline(result: SimulationResult, path: str | os.PathLike[str]) -> None:
    """Two panels sharing the time axis: pod groups (waiting hatched grey from arrival to
    scheduling, then coloured while their pods run) and nodes (each pod a bar on its node,
    coloured by group; node rows split into lanes when pods overlap)."""
    plt = _pyplot()
    end = max(result.display_end, 1e-9)
    span = end * 1.04 if end > 0 else 1.0
    groups = sorted(result.groups, key=lambda g: (g.arrival, g.namespace, g.name))
    multi_ns = len({g.namespace for g in groups}) > 1
    colors = _group_colors([(g.namespace, g.name) for g in groups])
    shown = groups[:_MAX_GROUP_ROWS]
    nodes = sorted(result.nodes, key=lambda n: (n.added, n.name))
    group_h = max(1.2, min(8.0, 0.22 * len(shown) + 0.8))
    node_h = max(1.8, min(9.0, 0.16 * len(nodes) + 1.0))
    fig, (ax_g, ax_n) = plt.subplots(
        2,
        1,
        sharex=True,
        figsize=(12, group_h + node_h + 1.2),
        gridspec_kw={"height_ratios": [group_h, node_h]},
        layout="constrained",
    )
    _groups_panel(ax_g, result, groups, shown, colors, end, multi_ns)
    _nodes_panel(ax_n, result, nodes, colors, end)
    _node_axis(ax_n, result, nodes)
    _node_legend(fig, result, groups, colors, multi_ns)
    _time_axis(ax_n, span)
    ax_n.set_xlabel("simulated time")
    ax_n.set_title(
        "Nodes: one bar per pod in its group's colour (key below); height = the pod's share of "
        "the node (largest request / allocatable); white = free",
        fontsize=9,
        loc="left",
    )
    if result.violations:
        for v in result.violations:
            ax_g.axvline(v.time, color="red", linewidth=1)
        ax_g.text(
            0.01,
            0.98,
            "gang invariant violated (red lines)",
            transform=ax_g.transAxes,
            color="red",
            va="top",
            fontsize=8,
        )
    fig.suptitle(f"Timeline — {result.source}", fontsize=11)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _groups_panel(
    ax_g: Any,
    result: SimulationResult,
    groups: Sequence[GroupRecord],
    shown: Sequence[GroupRecord],
    colors: dict[tuple[str, str], Any],
    end: float,
    multi_ns: bool,
) -> None:
    """The timeline's upper panel: one row per shown group, waiting then running."""
    by_group: dict[tuple[str, str], list[PodRecord]] = {}
    for p in result.pods:
        if p.group is not None:
            by_group.setdefault((p.namespace, p.group), []).append(p)
    for row, g in enumerate(shown):
        y = len(shown) - 1 - row
        members = by_group.get((g.namespace, g.name), [])
        color = colors[(g.namespace, g.name)]
        sched = g.scheduled_at
        wait_end = sched if sched is not None else end
        if wait_end > g.arrival:
            ax_g.barh(
                y,
                wait_end - g.arrival,
                left=g.arrival,
                height=0.55,
                color="#eeeeee",
                edgecolor="#999999",
                hatch="///",
                linewidth=0.6,
            )
        if sched is not None:
            run_end = max([_stop(p, end) for p in members if p.bound is not None] or [sched])
            ax_g.barh(y, max(run_end - sched, end * 0.002), left=sched, height=0.55, color=color)
            domain = _domain_mark(g)
            if domain:
                ax_g.text(
                    sched + end * 0.004,
                    y,
                    domain,
                    va="center",
                    ha="left",
                    fontsize=6,
                    color="black",
                    clip_on=True,
                    bbox={"boxstyle": "square,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.7},
                )
        ax_g.plot([g.arrival], [y], marker="v", color="#444444", markersize=4)
        for at in g.preempted_at:  # pods preempted (x)
            ax_g.plot([at], [y], marker="x", color="#aa0000", markersize=5)
        if sched is None:
            ax_g.text(
                end * 0.995,
                y,
                "never scheduled",
                va="center",
                ha="right",
                fontsize=7,
                color="#aa0000",
            )
    labels = [_group_label(g, multi_ns) for g in shown]
    ax_g.set_yticks(range(len(shown)))
    ax_g.set_yticklabels(list(reversed(labels)), fontsize=7)
    ax_g.set_ylim(-0.7, max(len(shown) - 0.3, 0.3))
    title = "Pod groups: waiting (hatched) from arrival (▼), then running"
    if result.preemptions:
        title += "; pods preempted (red x)"
    if len(groups) > len(shown):
        title += f" — first {len(shown)} of {len(groups)} groups"
    ax_g.set_title(title, fontsize=9, loc="left")


def _nodes_panel(
    ax_n: Any,
    result: SimulationResult,
    nodes: Sequence[NodeRecord],
    colors: dict[tuple[str, str], Any],
    end: float,
) -> None:
    """The timeline's lower panel's bars: each pod on its node, its height its share."""
    node_index = {n.name: i for i, n in enumerate(nodes)}
    by_node: dict[str, list[PodRecord]] = {}
    for p in result.pods:
        if p.node is not None and p.bound is not None and p.node in node_index:
            by_node.setdefault(p.node, []).append(p)
    alloc_of = {n.name: n.allocatable for n in nodes}
    for node, pods in by_node.items():
        shares = [_share(p, alloc_of[node]) for p in pods]
        offsets, top = _stack(pods, shares, end)
        scale = 0.86 / top
        base = len(nodes) - 1 - node_index[node] - 0.43
        for i, p in enumerate(pods):
            color = colors.get((p.namespace, p.group or ""), NO_GROUP_COLOR)
            ax_n.barh(
                base + (offsets[i] + shares[i] / 2) * scale,
                max(_stop(p, end) - (p.bound or 0.0), end * 0.002),
                left=p.bound,
                height=shares[i] * scale,
                color=color,
                edgecolor="white",
                linewidth=0.4 if len(nodes) <= 64 else 0.0,
            )


def _group_label(g: GroupRecord, multi_ns: bool) -> str:
    """``Job train-a · gang 4 · 4 pods · prio 100`` (short name, policy, size, priority and,
    for a member of a CompositePodGroup, ``· in <parent>``)."""
    name = g.short_name.replace("/", " ", 1) if g.owner else g.name
    name = f"{g.namespace}/{name}" if multi_ns and g.owner else name
    policy = f"gang {g.min_count}" if g.min_count is not None else g.policy
    prio = f" · prio {g.priority}" if g.priority is not None else ""
    pods = f"{g.total_pods} pod{'s' if g.total_pods != 1 else ''}"
    tree = f" · in {g.parent}" if g.parent else ""
    return f"{name} · {policy} · {pods}{prio}{tree}"


def _domain_mark(g: GroupRecord) -> str:
    """The domain of the group's own topology key (``rack=gpu-rack-3``), or ``""``."""
    if g.key is None or g.key not in g.domains:
        return ""
    value = g.domains[g.key]
    text = value if isinstance(value, str) else "+".join(value)
    return f"{g.key.rsplit('/', 1)[-1]}={text}"


_MAX_LEGEND = 16


def _node_legend(
    fig: Any,
    result: SimulationResult,
    groups: Sequence[GroupRecord],
    colors: dict[tuple[str, str], Any],
    multi_ns: bool,
) -> None:
    """The colour key of the node panel: one patch per group that ran, and grey for pods
    without a group."""
    from matplotlib.patches import Patch

    ran = {(p.namespace, p.group) for p in result.pods if p.bound is not None}
    shown = [g for g in groups if (g.namespace, g.name) in ran]
    handles = [
        Patch(color=colors[(g.namespace, g.name)], label=_group_label(g, multi_ns))
        for g in shown[:_MAX_LEGEND]
    ]
    if len(shown) > _MAX_LEGEND:
        handles.append(Patch(color="white", label=f"... {len(shown) - _MAX_LEGEND} more groups"))
    if any(p.group is None and p.bound is not None for p in result.pods):
        handles.append(Patch(color=NO_GROUP_COLOR, label="no pod group"))
    if not handles:
        return
    fig.legend(
        handles=handles,
        loc="outside lower center",
        ncol=min(4, len(handles)),
        fontsize=7,
        frameon=False,
        title="pod colours (node panel)",
        title_fontsize=7,
    )


def _node_axis(ax: Any, result: SimulationResult, nodes: Sequence[Any]) -> None:
    n = len(nodes)
    ax.set_ylim(-0.6, max(n - 0.4, 0.4))
    keys = [k for k in result.topology_keys if any(k in nd.labels for nd in nodes)]
    # the innermost key with at most 40 domains names the rows
    inner = next((k for k in reversed(keys) if len({nd.labels.get(k) for nd in nodes}) <= 40), None)
    # domain separators: thin for the innermost key, thick for outer keys
    for depth, key in enumerate(keys):
        prev: str | None = None
        for i, nd in enumerate(nodes):
            value = nd.labels.get(key)
            if i > 0 and value != prev:
                y = n - i - 0.5
                outer = depth < len(keys) - 1
                ax.axhline(
                    y, color="#555555" if outer else "#aaaaaa", linewidth=1.4 if outer else 0.6
                )
            prev = value
    if n <= 40 and inner is not None:  # domain names on the right
        from matplotlib.transforms import blended_transform_factory

        trans = blended_transform_factory(ax.transAxes, ax.transData)
        start = 0
        for i in range(1, n + 1):
            if i == n or nodes[i].labels.get(inner) != nodes[start].labels.get(inner):
                value = nodes[start].labels.get(inner)
                if value is not None:
                    mid = n - 1 - (start + i - 1) / 2
                    ax.text(1.005, mid, value, transform=trans, fontsize=6, va="center")
                start = i
    if n <= 40:
        ax.set_yticks(range(n))
        ax.set_yticklabels([nd.name for nd in reversed(nodes)], fontsize=6 if n > 20 else 7)
    elif inner is not None:
        ticks: list[float] = []
        names: list[str] = []
        start = 0
        for i in range(1, n + 1):
            if i == n or nodes[i].labels.get(inner) != nodes[start].labels.get(inner):
                mid = (start + i - 1) / 2
                ticks.append(n - 1 - mid)
                names.append(str(nodes[start].labels.get(inner, "")))
                start = i
        ax.set_yticks(ticks)
        ax.set_yticklabels(names, fontsize=6)
    else:
        ax.set_yticks([])
        ax.set_ylabel(f"{n} nodes")


def plot_utilization(result: SimulationResult, path: str | os.PathLike[str]) -> None:
    """Top: the share of allocatable cpu, memory and requested extended resources in use over
    time. Bottom: pods running and pending over time."""
    plt = _pyplot()
    end = max(result.display_end, 1e-9)
    span = end * 1.04 if end > 0 else 1.0
    fig, (ax_u, ax_p) = plt.subplots(
        2,
        1,
        sharex=True,
        figsize=(12, 6.5),
        gridspec_kw={"height_ratios": [3, 2]},
        layout="constrained",
    )
    styles = ["-", "--", ":", "-."]
    for i, (res, series) in enumerate(utilization_series(result).items()):
        xs = [t for t, _, _ in series] + [span]
        ys = [100.0 * u / c if c > 0 else 0.0 for _, u, c in series]
        ys.append(ys[-1])
        # equal lines stay visible: each resource has its own dash pattern, wider ones below
        ax_u.step(
            xs,
            ys,
            where="post",
            label=res,
            linewidth=max(1.2, 3.2 - 0.7 * i),
            linestyle=styles[i % len(styles)],
            zorder=2 + i,
        )
    ax_u.set_ylim(0, 105)
    ax_u.set_ylabel("% of allocatable in use")
    if ax_u.get_legend_handles_labels()[0]:
        ax_u.legend(loc="upper right", fontsize=8)
    else:
        ax_u.text(0.5, 0.5, "no nodes", transform=ax_u.transAxes, ha="center", color="#888888")
    ax_u.set_title(
        "Cluster utilization (requests of bound pods / allocatable)", fontsize=9, loc="left"
    )
    ax_u.grid(axis="y", color="#dddddd", linewidth=0.6)
    events: list[tuple[float, int, int]] = []  # (time, d_running, d_pending)
    for p in result.pods:
        events.append((p.created, 0, 1))
        if p.bound is not None:
            events.append((p.bound, 1, -1))
            stop = p.finished if p.finished is not None else p.deleted
            if stop is not None:
                events.append((stop, -1, 0))
        elif p.deleted is not None:
            events.append((p.deleted, 0, -1))
    events.sort()
    xs, running, pending = [0.0], [0], [0]
    r = q = 0
    for t, dr, dq in events:
        r += dr
        q += dq
        if xs[-1] == t:
            running[-1], pending[-1] = r, q
        else:
            xs.append(t)
            running.append(r)
            pending.append(q)
    xs.append(span)
    running.append(running[-1])
    pending.append(pending[-1])
    ax_p.step(xs, running, where="post", label="running", color="#2a7ab9", linewidth=1.6)
    ax_p.step(xs, pending, where="post", label="pending", color="#d9822b", linewidth=1.6)
    ax_p.set_ylabel("pods")
    ax_p.set_ylim(bottom=0)
    ax_p.legend(loc="upper right", fontsize=8)
    ax_p.grid(axis="y", color="#dddddd", linewidth=0.6)
    _time_axis(ax_p, span)
    ax_p.set_xlabel("simulated time")
    fig.suptitle(f"Utilization — {result.source}", fontsize=11)
    fig.savefig(path, dpi=110)
    plt.close(fig)
