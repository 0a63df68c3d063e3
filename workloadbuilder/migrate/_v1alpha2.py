"""Kubernetes 1.36 ``scheduling.k8s.io/v1alpha2`` Workloads and PodGroups -> v1beta1.

What changed (v1.37, no conversion on the server: v1alpha2 is not served any more):
``disruptionMode`` was a string (``Pod`` / ``PodGroup``) and is a one-of struct
(``{single: {}}`` / ``{all: {}}``); a PodGroup's ``podGroupTemplateRef.workload{workloadName,
podGroupTemplateName}`` is ``workloadRef{workloadName, templateName}``; the status condition
``PodGroupScheduled`` is ``PodGroupInitiallyScheduled`` (status is the scheduler's, never
migrated). Pods already join with ``spec.schedulingGroup.podGroupName``: unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workloadbuilder.api import CodecError, object_from_dict, object_to_dict
from workloadbuilder.migrate._emit import sendable
from workloadbuilder.migrate._model import Doc
from workloadbuilder.migrate._report import FieldReport, MigrationError
from workloadbuilder.validation import FeatureGates, validate_object

__all__ = ["VERSION", "convert"]

VERSION = "scheduling.k8s.io/v1alpha2"
_MODES: dict[str, dict[str, Any]] = {"Pod": {"single": {}}, "PodGroup": {"all": {}}}
_TEMPLATE_FIELDS = (
    "name",
    "schedulingPolicy",
    "schedulingConstraints",
    "resourceClaims",
    "disruptionMode",
    "priorityClassName",
    "priority",
)
_POD_GROUP_FIELDS = (
    "podGroupTemplateRef",
    "schedulingPolicy",
    "schedulingConstraints",
    "resourceClaims",
    "disruptionMode",
    "priorityClassName",
    "priority",
)
#: metadata the server owns: never sent on create
_SERVER_META = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields")


class _Converter:
    def __init__(self, doc: Doc) -> None:
        self.doc = doc
        self.report: list[FieldReport] = []

    def note(self, path: str, outcome: Any, detail: str) -> None:
        self.report.append(
            FieldReport(origin=self.doc.origin, path=path, outcome=outcome, detail=detail)
        )

    def fail(self, path: str, message: str) -> MigrationError:
        return MigrationError(self.doc.origin, path, message)

    def fields(self, obj: Any, path: str, known: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(obj, Mapping):
            raise self.fail(path, "expected an object")
        for key in obj:
            if key not in known:
                raise self.fail(f"{path}.{key}", "not a v1alpha2 field")
        return dict(obj)

    def mode(self, spec: dict[str, Any], path: str) -> None:
        if "disruptionMode" not in spec:
            return
        value = spec["disruptionMode"]
        new = _MODES.get(value) if isinstance(value, str) else None
        if new is None:
            raise self.fail(
                f"{path}.disruptionMode", f'Unsupported value: {value!r}: "Pod", "PodGroup"'
            )
        spec["disruptionMode"] = new
        self.note(f"{path}.disruptionMode", "mapped", f"{value!r} -> {new}")

    def priority(self, spec: dict[str, Any], path: str) -> None:
        if spec.get("priorityClassName") and "priority" in spec:
            value = spec.pop("priority")
            self.note(
                f"{path}.priority",
                "approximated",
                f"{value} dropped: the Priority admission plugin sets it again from "
                f"priorityClassName {spec['priorityClassName']!r}",
            )

    def metadata(self, obj: dict[str, Any]) -> None:
        meta = dict(obj.get("metadata") or {})
        for key in _SERVER_META:
            meta.pop(key, None)
        meta.setdefault("namespace", self.doc.namespace)
        obj["metadata"] = meta

    def workload(self) -> dict[str, Any]:
        obj = dict(self.doc.obj)
        self.metadata(obj)
        spec = self.fields(obj.get("spec") or {}, "spec", ("controllerRef", "podGroupTemplates"))
        templates = []
        for i, tmpl in enumerate(spec.get("podGroupTemplates") or []):
            path = f"spec.podGroupTemplates[{i}]"
            t = self.fields(tmpl, path, _TEMPLATE_FIELDS)
            self.mode(t, path)
            self.priority(t, path)
            templates.append(t)
        spec["podGroupTemplates"] = templates
        obj["spec"] = spec
        self.note("apiVersion", "mapped", "scheduling.k8s.io/v1beta1 (same fields otherwise)")
        return obj

    def pod_group(self) -> dict[str, Any]:
        obj = dict(self.doc.obj)
        self.metadata(obj)
        spec = self.fields(obj.get("spec") or {}, "spec", _POD_GROUP_FIELDS)
        ref = spec.pop("podGroupTemplateRef", None)
        if ref is not None:
            path = "spec.podGroupTemplateRef"
            ref = self.fields(ref, path, ("workload",))
            workload = self.fields(
                ref.get("workload") or {},
                f"{path}.workload",
                ("workloadName", "podGroupTemplateName"),
            )
            spec["workloadRef"] = {
                "workloadName": workload.get("workloadName"),
                "templateName": workload.get("podGroupTemplateName"),
            }
            self.note(
                path,
                "mapped",
                "spec.workloadRef{workloadName, templateName} (podGroupTemplateName renamed)",
            )
        self.mode(spec, "spec")
        self.priority(spec, "spec")
        obj["spec"] = spec
        if obj.pop("status", None) is not None:
            self.note(
                "status",
                "approximated",
                "not migrated: the scheduler writes status (PodGroupScheduled is now "
                "PodGroupInitiallyScheduled, set by the next scheduling cycle)",
            )
        self.note("apiVersion", "mapped", "scheduling.k8s.io/v1beta1")
        return obj


def convert(doc: Doc) -> tuple[dict[str, Any], list[FieldReport]]:
    """The v1beta1 form of a v1alpha2 Workload or PodGroup, validated like the API server."""
    conv = _Converter(doc)
    if doc.kind == "Workload":
        out = conv.workload()
    elif doc.kind == "PodGroup":
        out = conv.pod_group()
    else:
        raise conv.fail("kind", f"v1alpha2 served Workload and PodGroup, not {doc.kind!r}")
    out["apiVersion"] = "scheduling.k8s.io/v1beta1"
    try:
        model = object_from_dict(out)
    except CodecError as e:
        raise conv.fail(e.path, e.detail) from None
    problems = validate_object(model, gates=FeatureGates())
    if problems:
        raise conv.fail(str(problems[0].path), str(problems[0]))
    doc.consumed = True
    return sendable(object_to_dict(model, api_version="v1beta1")), conv.report
