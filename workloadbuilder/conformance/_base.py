"""What the scheduler and integration runners share: labels, the result type, the failure."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from workloadbuilder.conformance._rules import Rule

__all__ = [
    "RUN_LABEL",
    "SCENARIO_LABEL",
    "TAINT_KEY",
    "WITNESS_TAINT_KEY",
    "Failed",
    "Progress",
    "Result",
    "RuleResult",
]

#: the taint on every fake Node (value: the run id); only the suite's pods tolerate it
TAINT_KEY = "conformance.workloadbuilder.io/run"
#: an extra taint on the witness Node: only the witness pods (``settle``) go there
WITNESS_TAINT_KEY = "conformance.workloadbuilder.io/witness"
#: the label on every object the suite creates (value: the run id)
RUN_LABEL = "conformance.workloadbuilder.io/run"
#: the label on a rule's own fake Nodes (value: the rule's namespace); its pods select it, so
#: a scheduler whose cache still holds the Nodes of the rule before cannot use them
SCENARIO_LABEL = "conformance.workloadbuilder.io/scenario"

Result = Literal["pass", "fail", "skip"]
#: ``progress(rule, None)`` when a rule starts, ``progress(rule, result)`` when it ends
Progress = Callable[["Rule", "RuleResult | None"], None]


@dataclasses.dataclass(frozen=True)
class RuleResult:
    """The result of one rule: ``pass``, ``fail`` or ``skip`` (the message says why)."""

    rule: str
    feature: str
    result: Result
    seconds: float
    message: str
    extension: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return dataclasses.asdict(self)


class Failed(Exception):
    """A rule's outcome did not hold by the deadline."""
