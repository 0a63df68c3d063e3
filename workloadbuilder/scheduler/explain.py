"""``workloadbuilder explain podgroup``: why a PodGroup is (not) scheduled, read from a live
cluster.

:func:`explain_report` gathers a PodGroup's state as data (policy and minCount, priority, its
pods, the schedulerName they name (the profile that schedules them) and their nodes, the
``PodGroupInitiallyScheduled`` condition and the scheduler's latest explanation, what
workload-aware preemption does for it and, for a member of a CompositePodGroup tree, the
tree); :func:`render_explain` is the human-readable form and :func:`explain_text` both in one
call. :func:`explain_command` is the command itself
(registered by :func:`workloadbuilder.scheduler.cli.register`)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from workloadbuilder.api import CompositePodGroup, PodGroup, to_dict
from workloadbuilder.cluster import Cluster
from workloadbuilder.errors import ApiError, NotFound, WorkloadBuilderError
from workloadbuilder.runtime import kube_cluster
from workloadbuilder.scheduler._podspec import pod_constraints
from workloadbuilder.scheduler._status import CONDITION_INITIALLY_SCHEDULED

__all__ = [
    "explain_command",
    "explain_report",
    "explain_text",
    "preemption_state",
    "render_explain",
    "render_tree",
    "tree_report",
    "waiting_state",
]


async def explain_report(cluster: Cluster, name: str, namespace: str) -> dict[str, Any]:
    """A PodGroup's state as data: policy, pods, nodes, condition and explanation (what
    ``explain podgroup -o json|yaml`` prints)."""
    try:
        pg = await cluster.get("PodGroup", name, namespace)
    except NotFound:
        pg = None
    pods = [
        p
        for p in (await cluster.list("Pod", namespace)).items
        if isinstance(p, dict)
        and ((p.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName") == name
    ]
    live = [p for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
    bound = [p for p in live if (p.get("spec") or {}).get("nodeName")]
    if pg is None:
        if not live:
            raise WorkloadBuilderError(f'podgroup "{name}" not found in namespace "{namespace}"')
        missing = _missing_group_report(name, namespace, len(live), len(bound))
        missing["schedulerNames"] = _scheduler_names(live)
        return missing
    assert isinstance(pg, PodGroup)
    gang = pg.spec.scheduling_policy.gang
    conds = pg.status.conditions if pg.status is not None else ()
    cond = next((c for c in conds if c.type == CONDITION_INITIALLY_SCHEDULED), None)
    if gang is not None and len(live) < gang.min_count and (cond is None or cond.status != "True"):
        # gated: the scheduler does not attempt the gang and writes no status (as upstream)
        state = waiting_state(len(live), gang.min_count)
    elif cond is not None:
        state = f"{cond.type}={cond.status} ({cond.reason})"
    else:
        state = "not attempted yet"
    report: dict[str, Any] = {
        "namespace": namespace,
        "name": name,
        "policy": "gang" if gang is not None else "basic",
        "minCount": gang.min_count if gang is not None else None,
        "priorityClassName": pg.spec.priority_class_name,
        "priority": pg.spec.priority,
        "pods": {"live": len(live), "bound": len(bound)},
        "nodes": sorted({str(p["spec"]["nodeName"]) for p in bound}),
        "state": state,
        "condition": to_dict(cond) if cond is not None else None,
        "explanation": (cond.message or None) if cond is not None else None,
        "tree": await tree_report(cluster, pg, pods)
        if pg.spec.parent_composite_pod_group_name
        else None,
    }
    if cond is not None and cond.status == "False":
        report["preemption"] = await preemption_state(cluster, pg, cond.message or "")
    names = _scheduler_names(live)
    if names:  # the profile that schedules the group (several: the cycle refuses it)
        report["schedulerNames"] = names
    not_scored = sorted({n for p in live for n in _not_scored(p)})
    if not_scored:  # scheduled as if absent: say so where people look
        report["notScored"] = not_scored
    return report


def _scheduler_names(pods: list[dict[str, Any]]) -> list[str]:
    """The ``spec.schedulerName`` values of ``pods`` (the API server defaults it)."""
    return sorted(
        {str((p.get("spec") or {}).get("schedulerName") or "default-scheduler") for p in pods}
    )


def _not_scored(pod: dict[str, Any]) -> tuple[str, ...]:
    """The pod's preferences this scheduler does not score yet (see ``_podspec``)."""
    c = pod_constraints(pod)
    return c.not_scored if c is not None else ()


async def preemption_state(cluster: Cluster, pg: PodGroup, message: str) -> str:
    """What workload-aware preemption does for an unschedulable group, or why it cannot."""
    if pg.spec.preemption_policy == "Never":
        return "not eligible: preemptionPolicy Never"
    for marker in ("waiting for ", "preempting ", "preemption would not help"):
        at = message.rfind(marker)
        if at >= 0:
            return message[at:].split("; ")[0]
    prio = pg.spec.priority or 0
    try:
        items = (await cluster.list("Pod")).items  # the domain is the whole cluster
    except ApiError:
        items = (await cluster.list("Pod", pg.metadata.namespace)).items
    lower = sum(
        1
        for p in items
        if isinstance(p, dict)
        and (p.get("spec") or {}).get("nodeName")
        and int((p.get("spec") or {}).get("priority") or 0) < prio
    )
    if not lower:
        return "no lower-priority units"
    return f"{lower} lower-priority pods run; preempting them would not make the group fit"


def waiting_state(existing: int, min_count: int) -> str:
    """The state of a gated gang: ``waiting: 2 of 3 pods exist``."""
    return f"waiting: {existing} of {min_count} {'pod' if min_count == 1 else 'pods'} exist"


def _missing_group_report(name: str, namespace: str, live: int, bound: int) -> dict[str, Any]:
    """Pods name a PodGroup that does not exist (yet): they wait for it."""
    return {
        "namespace": namespace,
        "name": name,
        "policy": None,
        "minCount": None,
        "priorityClassName": None,
        "priority": None,
        "pods": {"live": live, "bound": bound},
        "nodes": [],
        "state": f"waiting: the PodGroup does not exist; {live} "
        f"{'pod names' if live == 1 else 'pods name'} it",
        "condition": None,
        "explanation": None,
    }


def render_explain(report: dict[str, Any]) -> str:
    """The human-readable form of :func:`explain_report`."""
    lines = [f"PodGroup:  {report['namespace']}/{report['name']}"]
    if report["policy"] == "gang":
        lines.append(f"Policy:    gang (minCount {report['minCount']})")
    elif report["policy"] == "basic":
        lines.append("Policy:    basic")
    if report["priorityClassName"] or report["priority"] is not None:
        parts = [
            report["priorityClassName"] or "",
            "" if report["priority"] is None else str(report["priority"]),
        ]
        lines.append(f"Priority:  {' '.join(p for p in parts if p)}")
    lines.append(f"Pods:      {report['pods']['bound']}/{report['pods']['live']} pods bound")
    if report.get("schedulerNames"):
        lines.append(f"Scheduler: {', '.join(report['schedulerNames'])}")
    nodes = report["nodes"]
    if nodes:
        shown = ", ".join(nodes[:8]) + (f", ... ({len(nodes)} nodes)" if len(nodes) > 8 else "")
        lines.append(f"Nodes:     {shown}")
    cond = report["condition"]
    since = (
        f" since {cond['lastTransitionTime']}" if cond and cond.get("lastTransitionTime") else ""
    )
    lines.append(f"State:     {report['state']}{since}")
    if report["explanation"]:
        lines.append(f"Why:       {report['explanation']}")
    if report.get("preemption"):
        lines.append(f"Preemption: {report['preemption']}")
    if report.get("notScored"):
        lines.append(f"Not scored: {'; '.join(report['notScored'])} (placed as if absent)")
    if report.get("tree"):
        lines.append("Tree:")
        lines.extend(render_tree(report["tree"], report["name"]))
    return "\n".join(lines) + "\n"


async def tree_report(cluster: Cluster, pg: PodGroup, pods: list[dict[str, Any]]) -> dict[str, Any]:
    """The CompositePodGroup tree a PodGroup belongs to, from its root, each level with its
    state (``explain podgroup`` shows it). Pods of the other leaves are listed in the
    namespace."""
    namespace = pg.metadata.namespace or "default"
    cpgs = {
        str(o.metadata.name): o
        for o in (await cluster.list("CompositePodGroup", namespace)).items
        if isinstance(o, CompositePodGroup)
    }
    groups = {
        str(o.metadata.name): o
        for o in (await cluster.list("PodGroup", namespace)).items
        if isinstance(o, PodGroup)
    }
    all_pods = [p for p in (await cluster.list("Pod", namespace)).items if isinstance(p, dict)]
    root = pg.spec.parent_composite_pod_group_name or ""
    seen: set[str] = set()
    while root in cpgs and cpgs[root].spec.parent_composite_pod_group_name and root not in seen:
        seen.add(root)
        root = cpgs[root].spec.parent_composite_pod_group_name or root

    def leaf(g: PodGroup) -> dict[str, Any]:
        name = str(g.metadata.name)
        mine = [
            p
            for p in all_pods
            if ((p.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName") == name
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        ]
        gang = g.spec.scheduling_policy.gang
        conds = g.status.conditions if g.status is not None else ()
        c = next((c for c in conds if c.type == CONDITION_INITIALLY_SCHEDULED), None)
        topo = g.spec.scheduling_constraints.topology if g.spec.scheduling_constraints else ()
        return {
            "kind": "PodGroup",
            "name": name,
            "policy": f"gang (minCount {gang.min_count})" if gang is not None else "basic",
            "topology": topo[0].key if topo else None,
            "pods": {"live": len(mine), "bound": sum(1 for p in mine if p["spec"].get("nodeName"))},
            "state": f"{c.type}={c.status} ({c.reason})" if c is not None else "not attempted yet",
            "explanation": (c.message or None) if c is not None else None,
            "scheduled": c is not None and c.status == "True",
            "children": [],
        }

    def composite(name: str, depth: int) -> dict[str, Any]:
        cpg = cpgs.get(name)
        if cpg is None or depth > 4:
            return {
                "kind": "CompositePodGroup",
                "name": name,
                "state": "does not exist",
                "children": [],
                "scheduled": False,
            }
        kids = [
            composite(n, depth + 1)
            for n, c in sorted(cpgs.items())
            if c.spec.parent_composite_pod_group_name == name
        ]
        kids += [
            leaf(g)
            for n, g in sorted(groups.items())
            if g.spec.parent_composite_pod_group_name == name
        ]
        gang = cpg.spec.scheduling_policy.gang
        need = gang.min_group_count if gang is not None else 1
        done = sum(1 for k in kids if k["scheduled"])
        topo = cpg.spec.scheduling_constraints.topology if cpg.spec.scheduling_constraints else ()
        return {
            "kind": "CompositePodGroup",
            "name": name,
            "policy": f"gang (minGroupCount {need})" if gang is not None else "basic",
            "topology": topo[0].key if topo else None,
            "state": f"{done} of {len(kids)} child groups scheduled (needs {need})",
            "scheduled": done >= need and done > 0,
            "children": kids,
        }

    return composite(root, 1)


def render_tree(node: dict[str, Any], mark: str, depth: int = 1) -> list[str]:
    """Indented lines of a :func:`tree_report` (``<-`` marks the PodGroup asked about)."""
    pad = "  " * depth
    where = f", {node['topology']}" if node.get("topology") else ""
    pods = f", {node['pods']['bound']}/{node['pods']['live']} pods bound" if "pods" in node else ""
    here = "  <-" if node["kind"] == "PodGroup" and node["name"] == mark else ""
    lines = [
        f"{pad}{node['kind']} {node['name']}: {node.get('policy', '')}{where}{pods}; "
        f"{node['state']}{here}"
    ]
    if node.get("explanation") and node["kind"] == "PodGroup" and node["name"] != mark:
        lines.append(f"{pad}  why: {node['explanation']}")
    for child in node["children"]:
        lines.extend(render_tree(child, mark, depth + 1))
    return lines


async def explain_text(cluster: Cluster, name: str, namespace: str) -> str:
    """A human-readable account of a PodGroup: policy, pods, condition and explanation."""
    return render_explain(await explain_report(cluster, name, namespace))


#: explain is interactive: a few quick attempts, each reported, instead of minutes of retries
_EXPLAIN_RETRY_ATTEMPTS = 3


async def _report_and_sleep(delay: float) -> None:
    print(f"cannot reach the API server; retrying in {delay:.1f}s", file=sys.stderr, flush=True)
    await asyncio.sleep(delay)


async def explain_command(args: argparse.Namespace) -> int:
    """``explain podgroup NAME``: print the report of :func:`explain_report` in
    ``args.output`` (text, json or yaml); a few quick attempts when the API server cannot
    be reached."""
    from workloadbuilder.cluster import RetryPolicy

    policy = RetryPolicy(
        max_attempts=_EXPLAIN_RETRY_ATTEMPTS,
        initial_backoff=0.5,
        max_backoff=2.0,
        max_elapsed=10.0,
        sleep=_report_and_sleep,
    )
    cluster = kube_cluster(args, retry=policy, connect_timeout=3.0, request_timeout=10.0)
    try:
        report = await explain_report(cluster, args.name, args.namespace)
    except ApiError as e:
        if e.status != 0:  # an answer from the server (403, ...): report it as it is
            raise
        raise WorkloadBuilderError(
            f"cannot reach the API server after {_EXPLAIN_RETRY_ATTEMPTS} attempts: {e}"
        ) from None
    finally:
        await cluster.close()
    if args.output == "json":
        print(json.dumps(report, indent=2))
    elif args.output == "yaml":
        import yaml

        print(yaml.safe_dump(report, sort_keys=False), end="")
    else:
        print(render_explain(report), end="")
    return 0
