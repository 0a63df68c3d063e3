"""The API access the Job integration needs (the ClusterRole rules of
``examples/deploy/integrations/``; the deploy test checks they suffice)."""

from __future__ import annotations

from typing import Any

__all__ = ["RULES"]

#: watch the owner kind (never written); ``create`` only for the ``--job-mode auto`` probe,
#: a server-side dry run (drop it with ``--job-mode opt-in`` or ``native``)
RULES: list[dict[str, Any]] = [
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["list", "watch", "create"]},
]
