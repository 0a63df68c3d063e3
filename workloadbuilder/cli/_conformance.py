"""``workloadbuilder conformance run``: the conformance suite against a cluster's scheduler.

::

    workloadbuilder conformance run --kubeconfig ~/.kube/config --scheduler-name my-scheduler
    workloadbuilder conformance run --kubeconfig K --scheduler-name default-scheduler \\
        --features gang,topology -o json --junit results.xml
    workloadbuilder conformance run --scheduler-name my-scheduler --dry-run
    workloadbuilder conformance run --kubeconfig K --profile integration \\
        --integration-sample lws        # or a file: an IntegrationSample, a Job, JobSet, LWS

Progress goes to stderr while it runs; the report (text table or JSON) to stdout. Exit 0 when
no rule failed, 1 when one did (or the cluster could not be used), 2 on a usage error.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import yaml

from workloadbuilder.conformance import (
    BUILTIN_SAMPLES,
    FEATURES,
    PLANNED_FEATURES,
    PROFILES,
    ConformanceRunner,
    IntegrationSample,
    Rule,
    RuleResult,
    load_rules,
    load_sample,
    remove_leftovers,
    render_json,
    render_junit,
    render_text,
    select_rules,
)
from workloadbuilder.errors import WorkloadBuilderError
from workloadbuilder.runtime import add_kube_flags, kube_cluster

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add the ``conformance`` command (subcommand ``run``)."""
    conf = subparsers.add_parser(
        "conformance",
        help="check a scheduler against the v1.37 workload-aware scheduling rules",
        description="Conformance suite for workload-aware schedulers (docs/conformance.md).",
    )
    sub = conf.add_subparsers(dest="conformance_command", metavar="COMMAND")
    p = sub.add_parser(
        "run",
        help="run the rules against the scheduler named by --scheduler-name",
        description=(
            "Plays every rule in its own namespace on fake Nodes (no kubelet) tainted so that "
            "only the suite's pods go there, with pods for --scheduler-name, and removes "
            "everything afterwards. Rules for workloadbuilder's extensions are skipped for "
            f"default-scheduler. Features: {', '.join(FEATURES)}"
            + (
                f" (planned, no rules yet: {', '.join(PLANNED_FEATURES)})"
                if PLANNED_FEATURES
                else ""
            )
            + ". --profile integration instead checks the "
            "Workload, PodGroups, CompositePodGroups and pod links an integration creates for "
            "--integration-sample, its resize and its cleanup. Exit 0 all passed or skipped, "
            "1 a rule failed, 2 usage error."
        ),
    )
    add_kube_flags(p)
    p.add_argument(
        "--scheduler-name",
        help="the spec.schedulerName of the scheduler under test (scheduler profile: required)",
    )
    p.add_argument(
        "--profile",
        choices=PROFILES,
        default="scheduler",
        help="scheduler: a scheduler's behaviour; integration: the objects an integration "
        "(operator, controller) creates for --integration-sample",
    )
    p.add_argument(
        "--integration-sample",
        metavar="FILE",
        help="integration profile: an IntegrationSample file, a Job / JobSet / "
        f"LeaderWorkerSet file, or a built-in sample ({', '.join(BUILTIN_SAMPLES)})",
    )
    p.add_argument(
        "--stand-in-pods",
        action="store_true",
        help="integration profile: create the pods the sample's workload controllers would "
        "(for a cluster that runs the integration but not the Job/JobSet/LWS controllers)",
    )
    p.add_argument(
        "--stand-in-jobs",
        action="store_true",
        help="integration profile: create a JobSet sample's child Jobs as a workload-aware "
        "JobSet controller would (for a cluster that runs a Job controller but no JobSet "
        "controller)",
    )
    p.add_argument(
        "--features",
        help=f"comma-separated features to check (default: all of {','.join(FEATURES)})",
    )
    p.add_argument("-o", "--output", choices=["text", "json"], default="text")
    p.add_argument("--junit", metavar="FILE", help="also write a JUnit XML report to FILE")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print (YAML) what each rule would create; contact no cluster",
    )
    p.add_argument(
        "--timeout", type=float, help="seconds each rule may take (default: the rule's own)"
    )
    p.set_defaults(func=_run)
    c = sub.add_parser(
        "cleanup",
        help="delete what an interrupted run left behind",
        description=(
            "Deletes the namespaces, Nodes and PriorityClasses labelled "
            "conformance.workloadbuilder.io/run (of one run with --run). A finished run "
            "leaves nothing; this is for one that was killed."
        ),
    )
    add_kube_flags(c)
    c.add_argument("--run", metavar="ID", help="only this run (the namespaces' wbc-<ID>-n)")
    c.set_defaults(func=_cleanup)
    conf.set_defaults(func=_no_command(conf))


async def _cleanup(args: argparse.Namespace) -> int:
    try:
        cluster = kube_cluster(args)
    except WorkloadBuilderError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    try:
        gone = await remove_leftovers(cluster, args.run)
    except WorkloadBuilderError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        await cluster.close()
    for name in gone:
        print(f"deleted {name}")
    print(f"{len(gone)} objects deleted")
    return 0


def _no_command(parser: argparse.ArgumentParser) -> Any:
    def run(args: argparse.Namespace) -> int:
        parser.print_usage(sys.stderr)
        print("error: name a command: run, cleanup", file=sys.stderr)
        return 2

    return run


def _progress(rule: Rule, result: RuleResult | None) -> None:
    if result is None:
        print(f"RUN   {rule.id}", file=sys.stderr, flush=True)
    else:
        tail = f": {result.message}" if result.message else ""
        print(
            f"{result.result.upper():5} {rule.id} ({result.seconds:.1f}s){tail}",
            file=sys.stderr,
            flush=True,
        )


async def _run(args: argparse.Namespace) -> int:
    features = None
    if args.features:
        features = [f.strip() for f in args.features.split(",") if f.strip()]
    sample: IntegrationSample | None = None
    try:
        if args.profile == "scheduler":
            if not args.scheduler_name:
                raise ValueError("the scheduler profile needs --scheduler-name")
            if args.integration_sample or args.stand_in_pods or args.stand_in_jobs:
                raise ValueError(
                    "--integration-sample, --stand-in-pods and --stand-in-jobs need "
                    "--profile integration"
                )
        else:
            if not args.integration_sample:
                raise ValueError("the integration profile needs --integration-sample")
            if features:
                raise ValueError("--features selects scheduler-profile rules only")
            sample = load_sample(args.integration_sample)
        rules = select_rules(load_rules(args.profile), features, profile=args.profile)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    name = args.scheduler_name or f"integration sample {sample.name if sample else ''}"
    if args.timeout is not None:
        import dataclasses

        rules = [dataclasses.replace(r, timeout=args.timeout) for r in rules]
    planned = [f for f in features or () if f in PLANNED_FEATURES]
    if planned:
        print(f"note: no rules yet for {', '.join(planned)} (planned)", file=sys.stderr)
    if args.dry_run:
        runner = ConformanceRunner(
            None,
            name,
            run_id="dryrun",
            sample=sample,
            standin_pods=args.stand_in_pods,
            standin_jobs=args.stand_in_jobs,
        )
        for rule, objs in runner.plan(rules):
            skip = runner.skip_reason(rule)
            print(f"# rule {rule.id}" + (f" (skipped: {skip})" if skip else ""))
            print(yaml.safe_dump_all(objs, sort_keys=False), end="")
            print("---")
        return 0
    try:
        cluster = kube_cluster(args)
    except WorkloadBuilderError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    try:
        runner = ConformanceRunner(
            cluster,
            name,
            progress=_progress,
            sample=sample,
            standin_pods=args.stand_in_pods,
            standin_jobs=args.stand_in_jobs,
        )
        results = await runner.run(rules)
    finally:
        await cluster.close()
    render = render_json if args.output == "json" else render_text
    sys.stdout.write(render(results, name))
    if args.junit:
        with open(args.junit, "w", encoding="utf-8") as f:
            f.write(render_junit(results, name))
    return 1 if any(r.result == "fail" for r in results) else 0
