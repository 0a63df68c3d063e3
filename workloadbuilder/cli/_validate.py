"""``workloadbuilder validate``: check manifests the way kube-apiserver v1.37 would.

Input: one or more ``-f FILE`` (``-`` is stdin) with YAML (multi-document) or JSON documents;
a ``kind: List`` is expanded. What is checked per ``kind``:

* ``Workload`` / ``PodGroup`` / ``CompositePodGroup`` (``scheduling.k8s.io``): the full create
  validation of :mod:`workloadbuilder.validation`. Like ``kubectl``, a document without
  ``metadata.namespace`` is validated in the ``-n`` namespace (default ``default``).
* ``Job`` (``batch/v1``): the ``spec.scheduling`` rules (:func:`validate_job_scheduling`),
  then the same reader as ``build`` (counts in the int32 range and not negative, the name
  the Job controller derives its template from, every object it would create).
* ``JobSet`` / ``LeaderWorkerSet`` / ``GenericWorkload``: the controller-side checks of the
  kind adapters (:func:`workloadbuilder.kinds.plan_for`) and the API validation of every
  object the controller would create from the manifest. A manifest the controller would not manage
  (e.g. no ``spec.scheduling``) is reported on stderr and counts as valid.

Input is read by :func:`workloadbuilder.cli.read_manifests`, as in every command. Output:
``<Kind> <namespace>/<name>: valid`` on stdout for valid documents; one ``error: FILE
document N: <Kind> <namespace>/<name>: <field error>`` line per error on stderr; unknown
fields are reported as ``Warning:`` lines on stderr, as the API server does. Exit codes: 0
all valid, 1 anything invalid or unreadable, 2 usage error (bad flags, unknown feature gate).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Mapping
from typing import Any

import attrs

from workloadbuilder.api import KINDS, CodecError, json_field_name, object_from_dict
from workloadbuilder.cli._common import InputError, add_filename_flag, one_line, read_manifests
from workloadbuilder.errors import BuildError, FieldError, ValidationError, WorkloadBuilderError
from workloadbuilder.kinds import default_registry, plan_for
from workloadbuilder.validation import (
    FeatureGates,
    codec_error,
    validate_job_scheduling,
    validate_object,
)

__all__ = ["parse_feature_gates", "register", "validate_document"]

_GATE_FIELDS = {
    "GenericWorkload": "generic_workload",
    "TopologyAwareWorkloadScheduling": "topology_aware_workload_scheduling",
    "CompositePodGroup": "composite_pod_group",
    "PodGroupPreemptionPolicy": "pod_group_preemption_policy",
    "DRAWorkloadResourceClaims": "dra_workload_resource_claims",
    "WorkloadWithJob": "workload_with_job",
}


def register(subparsers: Any) -> None:
    """Add the ``validate`` command."""
    parser = subparsers.add_parser(
        "validate",
        help="validate Workload/PodGroup/CompositePodGroup manifests like kube-apiserver v1.37",
        description=(
            "Validate Workload, PodGroup and CompositePodGroup manifests (and the scheduling "
            "blocks of Job, JobSet, LeaderWorkerSet and GenericWorkload manifests) exactly "
            "like kube-apiserver v1.37 validates a create. Exit 0 if everything is valid, 1 if "
            "anything is invalid or unreadable, 2 on usage errors."
        ),
    )
    add_filename_flag(parser)
    parser.add_argument(
        "-n",
        "--namespace",
        default="default",
        help="namespace for documents without metadata.namespace (default: default)",
    )
    parser.add_argument(
        "--feature-gates",
        default="",
        metavar="GATES",
        help=(
            "kube-apiserver feature gates as Name=true|false,... (all WAS gates default to true "
            f"here); known: {', '.join(sorted(_GATE_FIELDS))}"
        ),
    )
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="do not print lines for valid documents"
    )
    parser.set_defaults(func=_run)


def parse_feature_gates(text: str) -> FeatureGates:
    """Parse ``Name=true,Other=false`` (kube-apiserver ``--feature-gates`` syntax)."""
    changes: dict[str, bool] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = item.partition("=")
        if not sep or name not in _GATE_FIELDS or value.lower() not in ("true", "false"):
            why = (
                f"unknown feature gate {name!r}"
                if sep and name not in _GATE_FIELDS
                else "expected Name=true or Name=false"
            )
            raise ValueError(
                f"invalid feature gate {item!r}: {why}; known gates: "
                f"{', '.join(sorted(_GATE_FIELDS))}"
            )
        changes[_GATE_FIELDS[name]] = value.lower() == "true"
    return FeatureGates(**changes)


def _identity(doc: Mapping[str, Any], default_namespace: str) -> tuple[str, str]:
    kind = doc.get("kind")
    meta = doc.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        generate = meta.get("generateName")
        name = f"{generate}*" if isinstance(generate, str) and generate else "<unnamed>"
    namespace = meta.get("namespace")
    if not isinstance(namespace, str) or not namespace:
        namespace = default_namespace
    return (kind if isinstance(kind, str) and kind else "<unknown kind>"), f"{namespace}/{name}"


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _unknown_fields(value: Any, path: str) -> Iterator[str]:
    if attrs.has(type(value)):
        if path == "metadata":
            return  # ObjectMeta keeps the meta/v1 fields it does not model; all are valid
        for key in getattr(value, "unknown_fields", {}):
            yield _child(path, key)
        for a in attrs.fields(type(value)):
            if a.name != "unknown_fields":
                yield from _unknown_fields(getattr(value, a.name), _child(path, json_field_name(a)))
    elif isinstance(value, tuple):
        for i, item in enumerate(value):
            yield from _unknown_fields(item, f"{path}[{i}]")


def _zero_fill(doc: dict[str, Any]) -> dict[str, Any]:
    """Give absent non-pointer structs their Go zero value (``{}``), so that e.g. a template
    without ``schedulingPolicy`` gets the server's union error instead of a decode error."""

    def policy(node: Any) -> Any:
        if node is None:
            node = {}  # null in a list of structs: the zero struct, as the server decodes it
        if isinstance(node, Mapping) and "schedulingPolicy" not in node:
            return {**node, "schedulingPolicy": {}}
        return node

    def template_lists(node: Any) -> Any:
        if not isinstance(node, Mapping):
            return node
        out = dict(node)
        for key in ("podGroupTemplates", "compositePodGroupTemplates"):
            items = out.get(key)
            if isinstance(items, list):
                out[key] = [template_lists(policy(item)) for item in items]
        return out

    kind = doc.get("kind")
    spec = doc.get("spec", {})
    if kind == "Workload":
        doc["spec"] = template_lists(spec)
    elif kind in ("PodGroup", "CompositePodGroup"):
        doc["spec"] = policy({} if spec is None else spec)
    return doc


def validate_document(
    doc: Any, *, gates: FeatureGates | None = None, namespace: str = "default"
) -> tuple[list[FieldError], list[str]]:
    """Validate one manifest; returns ``(errors, notes)`` (notes: warnings / skip reasons)."""
    gates = gates or FeatureGates()
    if not isinstance(doc, Mapping):
        return [FieldError(path="", type="Invalid value", detail="document is not an object")], []
    kind = doc.get("kind")
    if kind is None:
        return [FieldError(path="kind", type="Required value")], []
    if not isinstance(kind, str):
        return [FieldError(path="kind", type="Invalid value", detail="expected a string")], []
    if kind in KINDS:
        data = dict(doc)
        meta = data.get("metadata")
        if meta is None:
            meta = {}
        if isinstance(meta, Mapping) and not meta.get("namespace"):
            data["metadata"] = {**meta, "namespace": namespace}
        data = _zero_fill(data)
        try:
            obj = object_from_dict(data)
        except CodecError as e:
            return [codec_error(e)], []
        notes = [f'unknown field "{p}"' for p in _unknown_fields(obj, "")]
        return validate_object(obj, gates=gates), notes
    if kind == "Job":
        # the API server's spec.scheduling rules, then the same reader as `build` (the Job
        # controller's view: counts, names and every object it would create)
        errors = validate_job_scheduling(doc, gates=gates)
        if errors:
            return errors, []
        return _validate_via_plan(doc, gates)
    if kind in default_registry().kinds():
        return _validate_via_plan(doc, gates)
    return [], [f"kind {kind!r} is not checked (nothing to validate)"]


def _validate_via_plan(
    doc: Mapping[str, Any], gates: FeatureGates
) -> tuple[list[FieldError], list[str]]:
    try:
        planned = plan_for(doc)
    except ValidationError as e:
        return [*e.causes, *e.errors], []
    except BuildError as e:
        return [], [f"not checked: {e}"]
    except (CodecError, TypeError, KeyError) as e:
        return [FieldError(path="spec", type="Invalid value", detail=str(e))], []
    if gates == FeatureGates():
        return [], []  # plan_for validated every planned object with these (default) gates
    errors: list[FieldError] = []
    objects: list[Any] = [planned.workload, *planned.composite_pod_groups, *planned.pod_groups]
    for obj in objects:
        for err in validate_object(obj, gates=gates):
            label = f"{obj.kind} {obj.metadata.namespace}/{obj.metadata.name}"
            errors.append(attrs.evolve(err, path=f"{label}: {err.path}"))
    return errors, []


def _run(args: argparse.Namespace) -> int:
    try:
        gates = parse_feature_gates(args.feature_gates)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        documents = read_manifests(args.filename, command="validate")
    except InputError as e:
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 1
    invalid = False
    for doc in documents:
        if not isinstance(doc.obj, Mapping):
            try:
                doc.require_object()
            except InputError as e:
                print(doc.error(e), file=sys.stderr)
            invalid = True
            continue
        try:
            errors, notes = validate_document(doc.obj, gates=gates, namespace=args.namespace)
        except WorkloadBuilderError as e:
            errors, notes = [FieldError(path="", type="Invalid value", detail=str(e))], []
        kind, ident = _identity(doc.obj, args.namespace)
        subject = f"{kind} {ident}"
        for note in notes:
            print(f"Warning: {subject}: {note}", file=sys.stderr)
        for err in errors:
            print(f"error: {doc.source} document {doc.number}: {subject}: {err}", file=sys.stderr)
        if errors:
            invalid = True
        elif not args.quiet:
            print(f"{subject}: valid")
    return 1 if invalid else 0
