"""What the topology lint reports: :class:`Finding` (of a :data:`FindingType`),
:class:`TopologyLevel`, :class:`TopologyLintResult`, and :class:`LintInputError`."""

from __future__ import annotations

from typing import Any, Literal

import attrs

from workloadbuilder.errors import WorkloadBuilderError

__all__ = [
    "FINDING_TYPES",
    "MAX_LISTED",
    "Finding",
    "FindingType",
    "LintInputError",
    "TopologyLevel",
    "TopologyLintResult",
]


FindingType = Literal["missing-key", "not-nested", "not-coarser", "never-fits", "missing-label"]
#: Every finding type, in the order they are reported.
FINDING_TYPES: tuple[FindingType, ...] = (
    "missing-key",
    "not-nested",
    "not-coarser",
    "never-fits",
    "missing-label",
)
MAX_LISTED = 8


class LintInputError(WorkloadBuilderError):
    """An input document cannot be linted (unknown kind, invalid object); ``document`` is its
    1-based position among the documents given."""

    def __init__(self, message: str, *, document: int | None = None, subject: str = "") -> None:
        super().__init__(f"{subject}: {message}" if subject else message)
        self.document = document
        self.subject = subject
        self.detail = message


@attrs.frozen(kw_only=True)
class Finding:
    """One problem. ``subject`` is the input object (``Job default/train``); ``path`` the field
    path of the constraint (for kinds planned by an integration it is prefixed with the planned
    Workload: ``Workload train-1a2b: spec.podGroupTemplates[0]...``); ``key`` the topology key;
    ``nodes`` the nodes involved and ``domains`` the domains involved."""

    type: FindingType
    subject: str
    path: str
    key: str
    message: str
    nodes: tuple[str, ...] = ()
    domains: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The finding as a JSON object."""
        return {
            "type": self.type,
            "object": self.subject,
            "path": self.path,
            "key": self.key,
            "message": self.message,
            "nodes": list(self.nodes),
            "domains": list(self.domains),
        }


@attrs.frozen(kw_only=True)
class TopologyLevel:
    """One template level that was checked: its object, field path, template name, topology
    key (None: no constraint at this level), the nearest ancestor's key and how many domains
    its key has on the nodes."""

    subject: str
    path: str
    template: str
    key: str | None
    parent_key: str | None
    domains: int

    def to_json(self) -> dict[str, Any]:
        """The level as a JSON object."""
        return {
            "object": self.subject,
            "path": self.path,
            "template": self.template,
            "key": self.key,
            "parentKey": self.parent_key,
            "domains": self.domains,
        }


@attrs.frozen(kw_only=True)
class TopologyLintResult:
    """The findings, the levels checked, notes (what could not be checked) and the node
    count."""

    findings: tuple[Finding, ...]
    levels: tuple[TopologyLevel, ...]
    notes: tuple[str, ...]
    nodes: int

    @property
    def clean(self) -> bool:
        """No findings."""
        return not self.findings

    def to_json(self) -> dict[str, Any]:
        """``{"nodes", "levels", "findings", "notes"}``."""
        return {
            "nodes": self.nodes,
            "levels": [lv.to_json() for lv in self.levels],
            "findings": [f.to_json() for f in self.findings],
            "notes": list(self.notes),
        }
