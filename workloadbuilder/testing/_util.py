"""Small helpers for tests against a real API server: REST paths, polling with a deadline."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

__all__ = ["collection_path", "object_path", "wait_for"]

T = TypeVar("T")

# kind -> plural resource (the kinds WAS tests create)
_PLURALS = {
    "Workload": "workloads",
    "PodGroup": "podgroups",
    "CompositePodGroup": "compositepodgroups",
    "PriorityClass": "priorityclasses",
    "Job": "jobs",
    "Pod": "pods",
    "Node": "nodes",
    "Namespace": "namespaces",
    "Role": "roles",
    "RoleBinding": "rolebindings",
    "ResourceClaimTemplate": "resourceclaimtemplates",
    "ResourceClaim": "resourceclaims",
    "DeviceClass": "deviceclasses",
    "JobSet": "jobsets",
    "LeaderWorkerSet": "leaderworkersets",
}
_CLUSTER_SCOPED = {"PriorityClass", "Node", "Namespace", "DeviceClass"}


def _prefix(api_version: str) -> str:
    return f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"


def collection_path(doc: Mapping[str, Any], namespace: str | None = None) -> str:
    """The collection URL path for ``doc`` (its apiVersion/kind; ``namespace`` overrides)."""
    kind = doc["kind"]
    if kind not in _PLURALS:
        raise ValueError(f"unknown kind {kind!r}")
    ns = namespace or doc.get("metadata", {}).get("namespace")
    base = _prefix(doc["apiVersion"])
    if kind in _CLUSTER_SCOPED:
        return f"{base}/{_PLURALS[kind]}"
    if not ns:
        raise ValueError(f"{kind} needs a namespace")
    return f"{base}/namespaces/{ns}/{_PLURALS[kind]}"


def object_path(doc: Mapping[str, Any], namespace: str | None = None) -> str:
    """The object URL path for ``doc``."""
    return f"{collection_path(doc, namespace)}/{doc['metadata']['name']}"


def wait_for(fetch: Callable[[], T | None], *, timeout: float = 60.0, what: str = "condition") -> T:
    """Poll ``fetch`` until it returns something other than ``None``; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    interval = 0.05
    while True:
        value = fetch()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)
        interval = min(interval * 1.5, 0.5)
