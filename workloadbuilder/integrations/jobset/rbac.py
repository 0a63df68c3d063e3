"""The API access the JobSet integration needs."""

from __future__ import annotations

from typing import Any

__all__ = ["RULES"]

RULES: list[dict[str, Any]] = [
    {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": ["list", "watch"]},
]
