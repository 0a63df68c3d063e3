"""Reference integrations: Job, JobSet and LeaderWorkerSet controllers and the pod webhook,
built on the SDK's public API only (:class:`workloadbuilder.runtime.Reconciler` does the
work; each kind contributes its :class:`~workloadbuilder.kinds.Integration`).

Each kind has a folder with the same files: ``__init__.py`` (the documented behaviour),
``integration.py`` (the Integration) and ``rbac.py`` (the API access it needs beyond
:data:`.rbac.COMMON_RULES`). :data:`KINDS` maps the ``--kinds`` names to them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from workloadbuilder.integrations import job, jobset, lws
from workloadbuilder.kinds import Integration

__all__ = ["KINDS", "integration_for", "rules_for"]

#: ``--kinds`` name -> (Integration factory, RBAC rules of the owner kind)
KINDS: dict[str, tuple[Callable[[], Integration], list[dict[str, Any]]]] = {
    "job": (job.OptInJobIntegration, job.RULES),
    "jobset": (jobset.JobSetIntegration, jobset.RULES),
    "lws": (lws.LeaderWorkerSetIntegration, lws.RULES),
}


def integration_for(name: str) -> Integration:
    """A new Integration for the ``--kinds`` name ``name`` (``KeyError`` if unknown)."""
    return KINDS[name][0]()


def rules_for(names: list[str]) -> list[dict[str, Any]]:
    """The ClusterRole rules of the integrations ``names`` plus the common ones."""
    from workloadbuilder.integrations.rbac import COMMON_RULES

    return [*COMMON_RULES, *(r for n in names for r in KINDS[n][1])]
