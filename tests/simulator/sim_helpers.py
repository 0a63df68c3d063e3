"""Helpers for the simulator tests: build scenario YAML from small pieces.

The Kubernetes objects come from :mod:`workloadbuilder.testing.builders`; the ``NodePool``
document is the simulator's own kind.
"""

from __future__ import annotations

import textwrap
from typing import Any

import yaml

from workloadbuilder.testing.builders import make_job, make_pod, make_pod_group

ARRIVAL = "sim.workloadbuilder.io/arrival"
DURATION = "sim.workloadbuilder.io/duration"


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


def _timing(arrival: str, duration: str | None) -> dict[str, str]:
    ann = {ARRIVAL: arrival}
    if duration is not None:
        ann[DURATION] = duration
    return ann


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
    ann = _timing(arrival, duration)
    docs = [make_pod_group(name).annotations(ann).gang(min_count or size).obj()]
    for i in range(size):
        pod = make_pod(f"{name}-{i}").annotations(ann).pod_group(name)
        docs.append(pod.container_name("c").image("x").request("cpu", cpu).obj())
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
    builder = (
        make_job(name)
        .annotations(_timing(arrival, duration))
        .parallelism(parallelism)
        .container_name("c")
        .image("x")
        .request("cpu", cpu)
    )
    if completions is not None:
        builder.completions(completions)
    if gang_policy:
        builder.gang()
    return yaml.safe_dump(builder.obj())


def scenario(*parts: str) -> str:
    """Join documents into one scenario."""
    return "\n---\n".join(textwrap.dedent(p).strip() for p in parts) + "\n"
