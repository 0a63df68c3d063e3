"""``workloadbuilder migrate``: rewrite v1alpha2 objects and bespoke gang APIs (Volcano,
coscheduling, YuniKorn, Kueue pod groups) as v1.37 Workloads, PodGroups and
CompositePodGroups, with the pod templates rewritten to join them
(:func:`workloadbuilder.migrate.migrate`).

    workloadbuilder migrate -f volcano/ -o yaml
    kubectl get podgroups.scheduling.volcano.sh,jobs -o yaml | workloadbuilder migrate -f -
    workloadbuilder migrate --context prod -n ml            # read the sources live
    workloadbuilder migrate --context prod -n ml --apply    # ... and create the new groups

The objects go to stdout (multi-document YAML, or one JSON ``List`` with ``-o json``); the
report (one line per source field: mapped / approximated / not-expressible) to stderr.

With ``--kubeconfig``/``--context`` (and ``-n``) and no ``-f`` the sources are read from
the cluster; nothing is written unless ``--apply``: then every new object is first sent as
a server-side dry run, and only if all pass are they created. Objects read from the
cluster that already exist (running pods, their controllers) are reported, not touched.
``-f`` with ``--apply`` creates every printed object.

Exit codes: 0 migrated; 1 something is not expressible in v1.37 (nothing printed; pass
``--allow-lossy`` to migrate anyway) or the input is invalid (one ``error: FILE document N:
Kind ns/name: field.path: ...`` line; the CLI's convention for invalid input); 2 usage error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from workloadbuilder.cli._common import InputError, add_output_flag, dump, one_line, read_manifests
from workloadbuilder.runtime import add_kube_flags, kube_cluster

__all__ = ["register"]

_SOURCES = ("auto", "v1alpha2", "volcano", "coscheduling", "yunikorn", "kueue")
_SUFFIXES = (".yaml", ".yml", ".json")


def register(subparsers: Any) -> None:
    """Add the ``migrate`` command."""
    parser = subparsers.add_parser(
        "migrate",
        help="rewrite v1alpha2 / Volcano / coscheduling / YuniKorn / Kueue gangs for v1.37",
        description=(
            "Print the v1.37 Workload, PodGroup and CompositePodGroup objects for the old "
            "gang objects and links in -f (scheduling.k8s.io/v1alpha2, Volcano PodGroups, "
            "coscheduling PodGroups, YuniKorn task groups, Kueue pod groups), with the pod "
            "templates that carried the old links rewritten to join them, and report every "
            "source field as mapped, approximated or not expressible. Exit 0 migrated, 1 "
            "something is not expressible (unless --allow-lossy) or the input is invalid, 2 "
            "usage error."
        ),
    )
    parser.add_argument(
        "-f",
        "--filename",
        action="append",
        metavar="FILE|DIR|-",
        help="manifests (YAML or JSON, multi-document; a directory's *.yaml, *.yml, *.json; "
        "'-' for stdin); repeatable",
    )
    parser.add_argument(
        "--from",
        dest="source",
        choices=_SOURCES,
        default="auto",
        help="what the input is (default: auto, each object says)",
    )
    add_output_flag(parser)
    parser.add_argument(
        "--allow-lossy",
        action="store_true",
        help="migrate even when some source field is not expressible in v1.37",
    )
    parser.add_argument(
        "--job-integration",
        choices=("native", "podgroup"),
        default="native",
        help="a gang that is exactly one Job: its own spec.scheduling (native, the Job "
        "controller creates the objects; needs WorkloadWithJob) or explicit Workload and "
        "PodGroup objects (podgroup)",
    )
    parser.add_argument(
        "--scheduler-name",
        metavar="NAME",
        help="schedulerName for the migrated pods (default: an old gang scheduler's name "
        "is removed, so the default scheduler takes them)",
    )
    parser.add_argument(
        "--tier-label",
        action="append",
        default=[],
        metavar="TIER=KEY",
        help="map a Volcano HyperNode tier (number or name) to a node label key for the "
        "topology constraint; repeatable",
    )
    add_kube_flags(parser, namespace=True)
    parser.add_argument(
        "--apply",
        action="store_true",
        help="create the migrated objects in the cluster of --kubeconfig/--context "
        "(server-side dry run first)",
    )
    parser.set_defaults(func=_run)


def _paths(names: list[str]) -> list[str]:
    out: list[str] = []
    for name in names:
        path = Path(name)
        if name != "-" and path.is_dir():
            found = sorted(p for p in path.iterdir() if p.suffix in _SUFFIXES and p.is_file())
            if not found:
                raise InputError(f"{name}: no *.yaml, *.yml or *.json files")
            out += [str(p) for p in found]
        else:
            out.append(name)
    return out


def _tiers(values: list[str]) -> dict[str, str]:
    tiers: dict[str, str] = {}
    for value in values:
        tier, sep, key = value.partition("=")
        if not sep or not tier or not key:
            raise InputError(f"--tier-label {value!r}: expected TIER=NODE_LABEL_KEY")
        tiers[tier] = key
    return tiers


async def _run(args: argparse.Namespace) -> int:
    from workloadbuilder.migrate import MigrationError, apply_objects, migrate, read_cluster

    live = args.kubeconfig is not None or args.context is not None
    if not args.filename and not live:
        return _usage("give the input: -f FILE|DIR|- or --kubeconfig/--context [-n NS]")
    if args.apply and not live:
        return _usage("--apply needs the cluster: --kubeconfig FILE and/or --context NAME")
    try:
        tiers = _tiers(args.tier_label)
        if args.filename:
            docs = read_manifests(_paths(args.filename), command="migrate")
            for doc in docs:
                doc.require_object()
            objects = [doc.obj for doc in docs]
            origins = [doc.where() for doc in docs]
    except InputError as e:
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 1
    cluster = kube_cluster(args) if live else None
    try:
        if not args.filename and cluster is not None:
            namespace = args.namespace or "default"
            objects = await read_cluster(cluster, namespace)
            origins = [_live_origin(o) for o in objects]
            if not objects:
                print(f"error: nothing to migrate in namespace {namespace}", file=sys.stderr)
                return 1
        try:
            result = migrate(
                objects,
                source=args.source,
                origins=origins,
                job_mode=args.job_integration,
                scheduler_name=args.scheduler_name,
                tier_labels=tiers,
            )
        except MigrationError as e:
            print(f"error: {one_line(e)}", file=sys.stderr)
            return 1
        for line in result.report:
            print(line, file=sys.stderr)
        if result.lossy and not args.allow_lossy:
            lost = sum(r.outcome == "not-expressible" for r in result.report)
            print(
                f"error: {lost} source field(s) cannot be expressed in v1.37 (not-expressible "
                "above); nothing was printed: pass --allow-lossy to migrate anyway",
                file=sys.stderr,
            )
            return 1
        out: list[dict[str, Any]] = list(result.objects)
        sys.stdout.write(dump(out, args.output))
        if args.apply and cluster is not None:
            try:
                applied = await apply_objects(cluster, out, only_new=not args.filename)
            except MigrationError as e:
                print(f"error: {one_line(e)}", file=sys.stderr)
                return 1
            for name in applied.created:
                print(f"created: {name}", file=sys.stderr)
            for note in applied.untouched:
                print(f"not touched: {note}", file=sys.stderr)
        return 0
    finally:
        if cluster is not None:
            await cluster.close()


def _live_origin(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"cluster: {obj.get('kind')} {meta.get('namespace', '')}/{meta.get('name', '')}"


def _usage(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2
