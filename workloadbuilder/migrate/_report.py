"""What a migration produced and what it could not carry over."""

from __future__ import annotations

from typing import Any, Literal

import attrs

from workloadbuilder.errors import WorkloadBuilderError

__all__ = ["FieldReport", "MigrationError", "MigrationResult", "Outcome"]

#: how one source field was carried over
Outcome = Literal["mapped", "approximated", "not-expressible"]


@attrs.frozen(kw_only=True)
class FieldReport:
    """One source field and what became of it.

    ``origin`` names the source document (``FILE document N: Kind ns/name``), ``path`` the
    field in it (``spec.minMember``, ``metadata.annotations[...]``); ``outcome`` is
    ``mapped`` (``detail`` says to what), ``approximated`` (how) or ``not-expressible`` in
    v1.37 (why).
    """

    origin: str
    path: str
    outcome: Outcome
    detail: str

    def __str__(self) -> str:
        return f"{self.outcome}: {self.origin}: {self.path}: {self.detail}"


@attrs.frozen(kw_only=True)
class MigrationResult:
    """The v1.37 objects (JSON dicts, in creation order) and the per-field report."""

    objects: tuple[dict[str, Any], ...]
    report: tuple[FieldReport, ...]

    @property
    def lossy(self) -> bool:
        """True when some source field is not expressible in v1.37."""
        return any(r.outcome == "not-expressible" for r in self.report)


class MigrationError(WorkloadBuilderError):
    """The input cannot be migrated: ``origin`` (file and document), ``path`` (the field) and
    what is wrong, in one line (``FILE document N: Kind ns/name: path: message``)."""

    def __init__(self, origin: str, path: str, message: str) -> None:
        self.origin = origin
        self.path = path
        self.message = message
        where = f"{origin}: {path}" if path else origin
        super().__init__(f"{where}: {message}")
