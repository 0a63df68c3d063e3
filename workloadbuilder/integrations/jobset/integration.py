"""The JobSet integration (see the package docstring)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workloadbuilder.kinds import JobSetIntegration

__all__ = ["JobSetIntegration", "child_jobs"]


def child_jobs(jobset: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The child Jobs a JobSet controller creates for ``jobset`` (names, labels, owner
    reference and, with ``spec.scheduling``, the delegation annotation and the pod template's
    ``spec.schedulingGroup``)."""
    return JobSetIntegration().child_workloads(jobset)
