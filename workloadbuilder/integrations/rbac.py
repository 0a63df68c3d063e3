"""The API access every integration needs (the owner kinds' rules are in each kind's
``rbac.py``)."""

from __future__ import annotations

from typing import Any

__all__ = ["COMMON_RULES", "LEADER_ELECTION_RULES", "SELF_SIGNED_RULES"]

COMMON_RULES: list[dict[str, Any]] = [
    {
        "apiGroups": ["scheduling.k8s.io"],
        "resources": ["workloads", "podgroups", "compositepodgroups"],
        "verbs": ["get", "list", "watch", "create", "patch", "delete"],
    },
    # pods: read only (DisruptionTarget conditions; the webhook mutates through admission)
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
]

#: ``--leader-elect`` (a Role in the lease namespace would do; the manifests use one)
LEADER_ELECTION_RULES: list[dict[str, Any]] = [
    {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "verbs": ["get", "create", "update"],
    },
]

#: ``--self-signed`` (patches the caBundle of its own MutatingWebhookConfiguration)
SELF_SIGNED_RULES: list[dict[str, Any]] = [
    {
        "apiGroups": ["admissionregistration.k8s.io"],
        "resources": ["mutatingwebhookconfigurations"],
        "verbs": ["get", "patch"],
    },
]
