"""``workloadbuilder simulate SCENARIO.yaml [-o table|json] [--report DIR] [--until D]``."""

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

from workloadbuilder.errors import WorkloadBuilderError
from workloadbuilder.simulator._engine import ProgressInfo, Simulation
from workloadbuilder.simulator._report import write_report
from workloadbuilder.simulator._result import plural, render_table
from workloadbuilder.simulator._scenario import load_scenario
from workloadbuilder.simulator._units import format_duration, parse_duration

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
        "-f", "--filename", dest="filename", metavar="FILE", help="the scenario, kubectl-style"
    )
    p.add_argument(
        "-o",
        "--output",
        choices=["table", "wide", "json"],
        default="table",
        help="table (default; short group names, fits the terminal), wide (full names and "
        "messages) or one JSON object",
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
    if (args.scenario is None) == (getattr(args, "filename", None) is None):
        print("error: give the scenario once: SCENARIO.yaml or -f FILE", file=sys.stderr)
        return 2
    if args.report:
        problem = _report_problem(args.report)
        if problem is not None:
            print(f"error: cannot write the report to {args.report}: {problem}", file=sys.stderr)
            return 1
    scenario = load_scenario(args.scenario or args.filename)
    progress = None if getattr(args, "quiet", False) else _Progress()
    try:
        result = await Simulation(scenario, until=args.until, progress=progress).run()
    except WorkloadBuilderError:
        raise
    except Exception as e:  # a bug somewhere below: one line, the traceback only with -v
        _log.debug("simulation failed", exc_info=True)
        print(f"error: simulation failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    if args.output == "json":
        sys.stdout.write(json.dumps(result.to_json(), indent=2) + "\n")
    else:
        sys.stdout.write(render_table(result, wide=args.output == "wide"))
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
