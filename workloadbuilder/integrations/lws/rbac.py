"""The API access the LeaderWorkerSet integration needs."""

from __future__ import annotations

from typing import Any

__all__ = ["RULES"]

RULES: list[dict[str, Any]] = [
    {
        "apiGroups": ["leaderworkerset.x-k8s.io"],
        "resources": ["leaderworkersets"],
        "verbs": ["list", "watch"],
    },
]
