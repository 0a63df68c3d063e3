"""The LeaderWorkerSet integration (see the package docstring)."""

from __future__ import annotations

from workloadbuilder.kinds import LeaderWorkerSetIntegration

__all__ = ["LeaderWorkerSetIntegration"]
