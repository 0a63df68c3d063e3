"""Helpers for the simulator tests: build scenario YAML from small pieces."""

from __future__ import annotations

import textwrap
from typing import Any

import yaml


def nodes(count: int, cpu: str = "4", *, name: str = "n", **extra: Any) -> str:
    """A NodePool document."""
    spec: dict[str, Any] = {"count": count, "allocatable": {"cpu": cpu, "memory": "16Gi"}}
    spec.update(extra)
    return yaml.safe_dump(
        {
            "apiVersion": "sim.workloadbuilder.io/v1alpha1",
            "kind": "NodePool",
            "metadata": {"name": name},
            "spec": spec,
        }
    )


def gang(
    name: str,
    size: int,
    cpu: str,
    *,
    arrival: str = "0s",
    duration: str | None = None,
    min_count: int | None = None,
) -> str:
    """A hand-written gang: one PodGroup and ``size`` pods."""
    ann = {"sim.workloadbuilder.io/arrival": arrival}
    if duration is not None:
        ann["sim.workloadbuilder.io/duration"] = duration
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "annotations": dict(ann)},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count or size}}},
        }
    ]
    for i in range(size):
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"{name}-{i}", "annotations": dict(ann)},
                "spec": {
                    "schedulingGroup": {"podGroupName": name},
                    "containers": [
                        {"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}
                    ],
                },
            }
        )
    return yaml.safe_dump_all(docs)


def job(
    name: str,
    parallelism: int,
    cpu: str,
    *,
    arrival: str = "0s",
    duration: str | None = None,
    completions: int | None = None,
    gang_policy: bool = True,
) -> str:
    """A batch/v1 Job (gang with minCount = parallelism unless ``gang_policy`` is false)."""
    ann = {"sim.workloadbuilder.io/arrival": arrival}
    if duration is not None:
        ann["sim.workloadbuilder.io/duration"] = duration
    spec: dict[str, Any] = {
        "parallelism": parallelism,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}
                ],
            }
        },
    }
    if completions is not None:
        spec["completions"] = completions
    if gang_policy:
        spec["scheduling"] = {"schedulingPolicy": {"gang": {}}}
    return yaml.safe_dump(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "annotations": ann},
            "spec": spec,
        }
    )


def scenario(*parts: str) -> str:
    """Join documents into one scenario."""
    return "\n---\n".join(textwrap.dedent(p).strip() for p in parts) + "\n"
