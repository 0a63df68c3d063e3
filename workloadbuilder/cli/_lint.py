"""``workloadbuilder lint topology``: do the topology constraints of a workload match the
cluster's nodes? (:func:`workloadbuilder.lint.lint_topology`)

    workloadbuilder lint topology -f job.yaml --nodes nodes.yaml
    workloadbuilder lint topology -f workload.yaml --kubeconfig ~/.kube/config -o json

Exit codes: 0 no findings, 1 findings (or unreadable input), 2 usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from workloadbuilder.cli._common import InputError, read_manifests
from workloadbuilder.lint import FINDING_TYPES, LintInputError, TopologyLintResult, lint_topology
from workloadbuilder.runtime import add_kube_flags, kube_cluster

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add the ``lint`` command (subcommand ``topology``)."""
    lint = subparsers.add_parser(
        "lint",
        help="check workloads against the cluster (lint topology)",
        description="Check workloads against the cluster they are meant for.",
    )
    sub = lint.add_subparsers(dest="lint_command", metavar="CHECK")
    p = sub.add_parser(
        "topology",
        help="do the topology constraints of a workload match the nodes?",
        description=(
            "For every level of every template of the workloads in -f (Workload, PodGroup, "
            "CompositePodGroup, Job, JobSet, LeaderWorkerSet, GenericWorkload): the key exists "
            "on nodes, child-level domains nest inside one parent-level domain, parent levels "
            "are coarser than their children, the group's requests fit at least one domain "
            "of an empty cluster, and which nodes lack a label a constraint uses. The nodes "
            "come from --nodes (Node manifests, e.g. `kubectl get nodes -o yaml`) or from the "
            "cluster of --kubeconfig/--context. Exit 0 clean, 1 findings or invalid input, 2 "
            "usage error."
        ),
    )
    p.add_argument(
        "-f",
        "--filename",
        action="append",
        metavar="FILE",
        help="workload manifests (YAML or JSON, multi-document; '-' for stdin); repeatable",
    )
    p.add_argument("--nodes", metavar="NODES.yaml", help="Node manifests to check against")
    add_kube_flags(p)
    p.add_argument(
        "-o", "--output", choices=["text", "json"], default="text", help="text (default) or json"
    )
    p.set_defaults(func=_run)
    lint.set_defaults(func=_no_check(lint))


def _no_check(parser: argparse.ArgumentParser) -> Any:
    def run(args: argparse.Namespace) -> int:
        parser.print_usage(sys.stderr)
        print("error: name a check: topology", file=sys.stderr)
        return 2

    return run


def _usage(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


async def _cluster_nodes(args: argparse.Namespace) -> list[dict[str, Any]]:
    cluster = kube_cluster(args)
    try:
        nodes: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            page = await cluster.list("Node", limit=500, continue_token=token)
            nodes.extend(n for n in page.items if isinstance(n, dict))
            token = page.continue_token
            if not token:
                return nodes
    finally:
        await cluster.close()


async def _run(args: argparse.Namespace) -> int:
    if not args.filename:
        return _usage("give the workloads with -f FILE")
    from_cluster = args.kubeconfig is not None or args.context is not None
    if args.nodes is not None and from_cluster:
        return _usage("give the nodes once: --nodes FILE or --kubeconfig/--context")
    if args.nodes is None and not from_cluster:
        return _usage("give the nodes: --nodes FILE or --kubeconfig FILE [--context NAME]")
    try:
        documents = read_manifests(args.filename, command="lint")
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if args.nodes is not None:
        try:
            nodes = [doc.obj for doc in read_manifests([args.nodes])]
        except InputError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        if not nodes:
            print(f"error: {args.nodes}: no Node objects", file=sys.stderr)
            return 1
    else:
        nodes = await _cluster_nodes(args)
    try:
        result = lint_topology([doc.obj for doc in documents], nodes)
    except LintInputError as e:
        if e.document is not None and 1 <= e.document <= len(documents):
            print(documents[e.document - 1].error(e.detail), file=sys.stderr)
        else:
            print(f"error: {e}", file=sys.stderr)
        return 1
    if args.output == "json":
        sys.stdout.write(json.dumps(result.to_json(), indent=2) + "\n")
    else:
        sys.stdout.write(render_text(result))
    return 1 if result.findings else 0


def render_text(result: TopologyLintResult) -> str:
    """The text report: one line per finding, the notes, a summary line."""
    lines = [f"{f.subject}: {f.path}: [{f.type}] {f.message}" for f in result.findings]
    lines += [f"note: {n}" for n in result.notes]
    objects = len({lv.subject for lv in result.levels})
    constrained = sum(1 for lv in result.levels if lv.key)
    checked = (
        f"{_count(len(result.levels), 'level')} ({constrained} with a topology key) of "
        f"{_count(objects, 'object')} against {_count(result.nodes, 'node')}"
    )
    if result.findings:
        counts = {t: sum(1 for f in result.findings if f.type == t) for t in FINDING_TYPES}
        detail = ", ".join(f"{n} {t}" for t, n in counts.items() if n)
        lines.append(f"{_count(len(result.findings), 'finding')} ({detail}); checked {checked}")
    else:
        lines.append(f"no findings; checked {checked}")
    return "\n".join(lines) + "\n"


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"
