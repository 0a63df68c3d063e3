"""``workloadbuilder build``: print the Workload / PodGroup / CompositePodGroup objects that the
controllers of the given Jobs, JobSets, LeaderWorkerSets or GenericWorkloads would create.

Input: one or more ``-f FILE`` (``-`` is stdin) with YAML (multi-document) or JSON documents;
a ``kind: List`` is expanded. Output: the objects in creation order (Workload, then
CompositePodGroups root first, then PodGroups) as multi-document YAML, or with ``-o json`` one
``{"apiVersion": "v1", "kind": "List", "items": [...]}``.

Exit codes: 0 success, 1 invalid or unreadable input (one ``error: FILE document N: Kind
namespace/name: ...`` line per failing document on stderr, nothing on stdout; input is read
by :func:`workloadbuilder.cli.read_manifests`), 2 usage error.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from workloadbuilder.api import GROUP, CompositePodGroup, object_to_dict
from workloadbuilder.cli._common import (
    InputError,
    add_filename_flag,
    add_output_flag,
    dump,
    one_line,
    read_manifests,
)
from workloadbuilder.errors import WorkloadBuilderError
from workloadbuilder.kinds import IntegrationRegistry, default_registry

__all__ = ["build_objects", "register"]

_API_VERSIONS = ("v1beta1", "v1alpha3")


def register(subparsers: Any) -> None:
    """Add the ``build`` command."""
    parser = subparsers.add_parser(
        "build",
        help="print the scheduling objects for Job, JobSet, LWS or GenericWorkload manifests",
        description=(
            "Compile Job, JobSet, LeaderWorkerSet and GenericWorkload manifests into the "
            "scheduling.k8s.io objects their controllers create, in creation order. A manifest "
            "without metadata.uid still builds: the objects then carry no ownerReferences and "
            "the namespace defaults to 'default' (see docs/sdk.md, 'Naming')."
        ),
    )
    add_filename_flag(parser)
    add_output_flag(parser)
    parser.add_argument(
        "--api-version",
        choices=_API_VERSIONS,
        default="v1beta1",
        help="version to emit Workload and PodGroup as (CompositePodGroup is always v1alpha3)",
    )
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    try:
        docs = read_manifests(args.filename, command="build")
    except InputError as e:
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 1
    objects: list[dict[str, Any]] = []
    failed = False
    for doc in docs:
        try:
            objects.extend(build_objects(doc.require_object(), api_version=args.api_version))
        except (WorkloadBuilderError, ValueError) as e:
            print(doc.error(e), file=sys.stderr)
            failed = True
        except Exception as e:  # a bug must still not print a traceback at the CLI
            print(doc.error(f"internal error: {type(e).__name__}: {one_line(e)}"), file=sys.stderr)
            failed = True
    if failed:
        return 1
    sys.stdout.write(dump(objects, args.output))
    return 0


def build_objects(
    doc: Any, *, api_version: str = "v1beta1", registry: IntegrationRegistry | None = None
) -> list[dict[str, Any]]:
    """Compile one manifest into the JSON objects to create, in creation order.

    The manifest's kind is looked up in ``registry`` (default:
    :func:`workloadbuilder.kinds.default_registry`, so a :func:`~workloadbuilder.kinds.register`-ed
    custom kind builds too). ownerReferences without a UID are left out (see
    :func:`_sendable`). Raises :class:`~workloadbuilder.errors.WorkloadBuilderError` (or
    ``ValueError`` from the codec) when the manifest is not a registered kind or is invalid.
    """
    if not isinstance(doc, dict):
        raise InputError(f"expected a Kubernetes object (a mapping), got {type(doc).__name__}")
    plan = (registry if registry is not None else default_registry()).plan(doc)
    version = f"{GROUP}/{api_version}"
    out: list[dict[str, Any]] = []
    for obj in plan.objects():
        target = None if isinstance(obj, CompositePodGroup) else version
        out.append(_sendable(object_to_dict(obj, api_version=target)))
    return out


def _sendable(obj: dict[str, Any]) -> dict[str, Any]:
    """Drop ownerReferences without a UID: the API server rejects them. They point at objects
    that do not exist yet (a source manifest without ``metadata.uid``, or the Workload, whose
    UID the server assigns on create -- see ``Plan.with_workload_uid``)."""
    meta = obj.get("metadata", {})
    kept = [r for r in meta.get("ownerReferences", ()) if r.get("uid")]
    if kept:
        meta["ownerReferences"] = kept
    else:
        meta.pop("ownerReferences", None)
    return obj
