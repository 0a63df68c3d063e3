"""Acceptance: every object ``workloadbuilder build`` emits for the examples and fixtures is
accepted by the real v1.37.2 API server, and every field we set is persisted.

Gate-dependent fields are silently dropped when a gate is off, so the objects are read back
and compared, not just created.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from fixtures.manifests import built_objects, manifests, owned_manifests

from workloadbuilder.testing import ControlPlane, RestClient, collection_path, object_path

pytestmark = pytest.mark.controlplane


def _missing(sent: Any, got: Any, path: str = "") -> list[str]:
    """Paths of ``sent`` that are absent or different in ``got`` (``null`` in sent = unset)."""
    if isinstance(sent, dict):
        if not isinstance(got, dict):
            return [f"{path or '.'}: expected an object, got {got!r}"]
        out: list[str] = []
        for key, value in sent.items():
            if value is None:
                continue
            sub = f"{path}.{key}" if path else key
            if key not in got:
                out.append(f"{sub}: dropped by the server")
            else:
                out.extend(_missing(value, got[key], sub))
        return out
    if isinstance(sent, list):
        if not isinstance(got, list) or len(got) != len(sent):
            return [f"{path}: {sent!r} became {got!r}"]
        return [
            m
            for i, (s, g) in enumerate(zip(sent, got, strict=True))
            for m in _missing(s, g, f"{path}[{i}]")
        ]
    return [] if sent == got else [f"{path}: {sent!r} became {got!r}"]


def _cases() -> list[Any]:
    params = []
    for api_version in ("v1beta1", "v1alpha3"):
        for source in ("plain", "owned"):
            cases = manifests() if source == "plain" else owned_manifests()
            for name, objects in built_objects(cases, api_version=api_version):
                params.append(pytest.param(objects, id=f"{api_version}-{name}"))
    return params


@pytest.mark.parametrize("objects", _cases())
def test_built_objects_are_accepted_and_persisted(
    control_plane: ControlPlane, api: RestClient, objects: list[dict[str, Any]]
) -> None:
    assert objects, "the build produced nothing"
    ns = control_plane.create_namespace("acc-")
    for obj in objects:
        doc = copy.deepcopy(obj)
        doc["metadata"]["namespace"] = ns
        kind, name = doc["kind"], doc["metadata"]["name"]
        created = api.create(collection_path(doc), doc)
        assert created.status == 201, f"{kind} {name} rejected: {created.status} {created.message}"
        got = api.get(object_path(doc))
        assert got.status == 200
        # The server reads back in the version we wrote.
        assert got.body["apiVersion"] == doc["apiVersion"]
        for section in ("spec", "metadata"):
            problems = _missing(doc.get(section) or {}, got.body.get(section) or {}, section)
            assert not problems, f"{kind} {name}: " + "; ".join(problems)
        # The same object reads back identically through the other served version.
        other = "v1alpha3" if doc["apiVersion"].endswith("v1beta1") else "v1beta1"
        if kind != "CompositePodGroup":
            alt = api.get(object_path(dict(doc, apiVersion=f"scheduling.k8s.io/{other}")))
            assert alt.status == 200
            assert alt.body["spec"] == got.body["spec"]


def test_every_example_is_covered() -> None:
    names = {name for name, _ in manifests()}
    assert any(n.startswith("example/") for n in names)
    kinds = {doc["kind"] for _, doc in manifests()}
    assert {"Job", "JobSet", "LeaderWorkerSet"} <= kinds
    built = [o["kind"] for _, objs in built_objects() for o in objs]
    assert {"Workload", "PodGroup", "CompositePodGroup"} <= set(built)
