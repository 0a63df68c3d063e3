"""The API access the Job integration needs (the ClusterRole rules of
``examples/deploy/integrations/``; the deploy test checks they suffice)."""

from __future__ import annotations

from typing import Any

__all__ = ["RULES"]

#: read the owner kind; nothing is written to it
RULES: list[dict[str, Any]] = [
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch"]},
]
