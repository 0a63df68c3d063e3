"""``workloadbuilder simulate SCENARIO.yaml [-o table|json] [--report DIR] [--until D]`` and
``workloadbuilder simulate --from-cluster [--kubeconfig K] [--context C] [-n NS ...]
[-f NEW.yaml ...] [--save FILE]``."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from workloadbuilder.cli import InputError, read_manifests
from workloadbuilder.errors import WorkloadBuilderError
from workloadbuilder.runtime import add_kube_flags, kube_cluster
from workloadbuilder.simulator._engine import ProgressInfo, Simulation
from workloadbuilder.simulator._report import write_report
from workloadbuilder.simulator._result import plural, render_table
from workloadbuilder.simulator._scenario import (
    DURATION_ANNOTATION,
    Scenario,
    ScenarioError,
    load_scenario,
    scenario_from_documents,
)
from workloadbuilder.simulator._snapshot import (
    WhatIfAnswer,
    dump_documents,
    snapshot_documents,
    snapshot_groups,
    whatif_answers,
)
from workloadbuilder.simulator._units import format_duration, parse_duration

if TYPE_CHECKING:
    from workloadbuilder.scheduler import SchedulerConfig

__all__ = ["main", "register", "run"]

_log = logging.getLogger(__name__)


def _duration_arg(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r}: {e}") from None


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``simulate`` command."""
    p = subparsers.add_parser(
        "simulate",
        help="replay a scenario against the gang scheduler on a virtual cluster",
        description=(
            "Run the reference scheduler and the Job/JobSet/LeaderWorkerSet adapters on an "
            "in-memory cluster with a virtual clock. SCENARIO is multi-document YAML of "
            "ordinary manifests plus sim.workloadbuilder.io annotations and NodePools "
            "(see docs/simulator.md). Exit 0 on success, 1 on invalid input or when the gang "
            "invariant was violated, 2 on usage errors."
        ),
    )
    p.add_argument(
        "scenario", metavar="SCENARIO.yaml", nargs="?", help="the scenario file (- for stdin)"
    )
    p.add_argument(
        "-f",
        "--filename",
        dest="filename",
        metavar="FILE",
        action="append",
        help="the scenario, kubectl-style; with --from-cluster: new objects to try on the "
        "snapshot (repeatable)",
    )
    p.add_argument(
        "--from-cluster",
        action="store_true",
        help="snapshot a live cluster (read-only: list only) and simulate on it; with -f, "
        "answer per new workload: when it starts, where, what it preempts, or why not",
    )
    add_kube_flags(p)
    p.add_argument(
        "-n",
        "--namespace",
        dest="namespaces",
        metavar="NS",
        action="append",
        default=[],
        help="with --from-cluster: snapshot only these namespaces (repeatable; default: all; "
        "cluster-scoped kinds are always read)",
    )
    p.add_argument(
        "--scheduler-name",
        metavar="NAME",
        help="the schedulerName the simulated scheduler runs as: pending pods with another "
        "one are not its to bind (default: the scheduler's default name; pods without one "
        "get it)",
    )
    p.add_argument(
        "--save",
        metavar="FILE",
        help="with --from-cluster: write the snapshot (and the -f objects) as a scenario file "
        "(workloadbuilder simulate FILE repeats the run)",
    )
    p.add_argument(
        "-o",
        "--output",
        choices=["table", "wide", "json", "yaml"],
        default="table",
        help="table (default; short group names, fits the terminal), wide (full names and "
        "messages), one JSON object, or (with --from-cluster) the same as YAML",
    )
    p.add_argument("--report", metavar="DIR", help="write summary.json and PNG pictures here")
    p.add_argument(
        "--until",
        metavar="DURATION",
        type=_duration_arg,
        help="stop at this simulated time (e.g. 30m); default: when nothing more can happen",
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr for long runs")
    p.set_defaults(func=run)


class _Progress:
    """Progress lines on stderr once a run has taken more than two seconds of wall time."""

    def __init__(self) -> None:
        self._start = time.monotonic()
        self._last = self._start

    def __call__(self, info: ProgressInfo) -> None:
        now = time.monotonic()
        if now - self._start < 2.0 or now - self._last < 1.0:
            return
        self._last = now
        print(
            f"simulate: t={format_duration(info.time)} round {info.rounds}: "
            f"{info.pods_bound}/{plural(info.pods_total, 'pod')} bound, "
            f"{plural(info.groups_waiting, 'group')} waiting",
            file=sys.stderr,
            flush=True,
        )


async def run(args: argparse.Namespace) -> int:
    """The ``simulate`` command."""
    files: list[str] = getattr(args, "filename", None) or []
    from_cluster = bool(getattr(args, "from_cluster", False))
    if from_cluster:
        if args.scenario is not None:
            print(
                "error: --from-cluster takes no SCENARIO.yaml (give new objects with -f)",
                file=sys.stderr,
            )
            return 2
    else:
        for flag in ("save", "kubeconfig", "context"):
            if getattr(args, flag, None):
                print(f"error: --{flag} needs --from-cluster", file=sys.stderr)
                return 2
        if args.output == "yaml":  # an invalid choice for a scenario run, as argparse says
            print(
                "error: argument -o/--output: invalid choice: 'yaml' (yaml needs "
                "--from-cluster; choose from table, wide, json)",
                file=sys.stderr,
            )
            raise SystemExit(2)
        if getattr(args, "namespaces", None):
            print("error: -n/--namespace needs --from-cluster", file=sys.stderr)
            return 2
        if (args.scenario is None) == (not files) or len(files) > 1:
            print("error: give the scenario once: SCENARIO.yaml or -f FILE", file=sys.stderr)
            return 2
    if args.report:
        problem = _report_problem(args.report)
        if problem is not None:
            print(f"error: cannot write the report to {args.report}: {problem}", file=sys.stderr)
            return 1
    existing: set[tuple[str, str]] | None = None
    if from_cluster:
        scenario, existing = await _from_cluster(args, files)
    else:
        scenario = load_scenario(args.scenario or files[0])
    progress = None if getattr(args, "quiet", False) else _Progress()
    try:
        result = await Simulation(
            scenario,
            until=args.until,
            progress=progress,
            scheduler_config=_scheduler_config(getattr(args, "scheduler_name", None), scenario),
        ).run()
    except WorkloadBuilderError:
        raise
    except Exception as e:  # a bug somewhere below: one line, the traceback only with -v
        _log.debug("simulation failed", exc_info=True)
        print(f"error: simulation failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    answers = None if existing is None else whatif_answers(result, existing)
    if args.output in ("json", "yaml"):
        out = result.to_json()
        if answers is not None:
            out["whatIf"] = [a.to_json() for a in answers]
        if args.output == "json":
            sys.stdout.write(json.dumps(out, indent=2) + "\n")
        else:
            sys.stdout.write(yaml.safe_dump(out, sort_keys=False))
    else:
        sys.stdout.write(render_table(result, wide=args.output == "wide"))
        if answers is not None:
            sys.stdout.write(_render_answers(answers, bool(files)))
    if args.report:
        try:
            paths = write_report(result, args.report)
        except OSError as e:
            print(f"error: cannot write the report: {e}", file=sys.stderr)
            return 1
        print(f"report: {', '.join(str(p) for p in paths)}", file=sys.stderr)
    if result.violations:
        print(
            f"error: the gang invariant was violated {len(result.violations)} time(s)",
            file=sys.stderr,
        )
        return 1
    return 0


async def _from_cluster(
    args: argparse.Namespace, files: Sequence[str]
) -> tuple[Scenario, set[tuple[str, str]]]:
    """Snapshot the cluster (read-only), add the ``-f`` objects, write ``--save``; the scenario
    and the snapshot's PodGroups."""
    new_docs: list[dict[str, Any]] = []
    if files:
        try:
            new_docs = [d.obj for d in read_manifests(list(files), command="simulate")]
        except InputError as e:
            raise ScenarioError(str(e)) from None
    quiet = bool(getattr(args, "quiet", False))
    start = time.monotonic()

    def progress(kind: str, count: int) -> None:
        if not quiet and (count >= 1000 or time.monotonic() - start >= 2.0):
            print(f"snapshot: {plural(count, kind)}", file=sys.stderr, flush=True)

    cluster = kube_cluster(args)
    try:
        docs = await snapshot_documents(cluster, args.namespaces, progress=progress)
    finally:
        await cluster.close()
    counts: dict[str, int] = {}
    for d in docs:
        counts[d["kind"]] = counts.get(d["kind"], 0) + 1
    if not quiet:
        summary = ", ".join(plural(n, k) for k, n in counts.items())
        print(f"snapshot: {summary or 'nothing'}", file=sys.stderr, flush=True)
    source = "cluster" + (f" (context {args.context})" if args.context else "")
    if args.save:
        header = (
            f"# A snapshot of the {source} by workloadbuilder simulate --from-cluster:\n"
            f"# {len(docs)} objects"
            + (f", then {len(new_docs)} new object(s) from -f" if new_docs else "")
            + ".\n# Bound pods run until the end unless annotated "
            f"{DURATION_ANNOTATION}.\n"
        )
        if args.scheduler_name:
            header += f"# Replay with --scheduler-name {args.scheduler_name}.\n"
        try:
            Path(args.save).write_text(dump_documents([*docs, *new_docs], header))
        except OSError as e:
            raise ScenarioError(f"cannot write {args.save}: {e}") from None
        if not quiet:
            print(f"snapshot: saved to {args.save}", file=sys.stderr)
    scenario = scenario_from_documents([*docs, *new_docs], source=source)
    return scenario, snapshot_groups(docs)


def _scheduler_config(name: str | None, scenario: Scenario) -> SchedulerConfig | None:
    """The scheduler's configuration under ``--scheduler-name`` (None: the default)."""
    if not name:
        return None
    from workloadbuilder.scheduler import SchedulerConfig  # numpy: loaded only to run

    return SchedulerConfig(scheduler_name=name, preemption=scenario.preemption)


def _render_answers(answers: Sequence[WhatIfAnswer], asked: bool) -> str:
    if not answers:
        return (
            "\nWhat-if: no new workload (give it with -f NEW.yaml)\n"
            if not asked
            else ("\nWhat-if: the -f objects made no PodGroup\n")
        )
    return "\nWhat-if:\n" + "".join(f"  {a.line()}\n" for a in answers)


def _report_problem(directory: str) -> str | None:
    """Why ``directory`` cannot take the report (checked before the run), or None."""
    path = Path(directory)
    existing = path
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if path.exists() and not path.is_dir():
        return "it exists and is not a directory"
    if not existing.is_dir():
        return f"{existing} is not a directory"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing} is not writable"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``simulate`` on its own (``python -m workloadbuilder.simulator SCENARIO.yaml``)."""
    parser = argparse.ArgumentParser(prog="workloadbuilder")
    sub = parser.add_subparsers(dest="command")
    register(sub)
    args = parser.parse_args(["simulate", *(sys.argv[1:] if argv is None else argv)])
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        return asyncio.run(run(args))
    except WorkloadBuilderError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
