"""Reports of a conformance run: a text table, JSON and JUnit XML."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Sequence

from workloadbuilder.conformance._rules import PLANNED_FEATURES
from workloadbuilder.conformance._runner import RuleResult

__all__ = ["render_json", "render_junit", "render_text", "summary"]


def summary(results: Sequence[RuleResult]) -> dict[str, int]:
    """Counts per result: ``{"pass": n, "fail": n, "skip": n}``."""
    out = {"pass": 0, "fail": 0, "skip": 0}
    for r in results:
        out[r.result] += 1
    return out


def _planned(results: Sequence[RuleResult]) -> list[str]:
    if results and all(r.feature == "integration" for r in results):
        return []
    return list(PLANNED_FEATURES)


def render_text(results: Sequence[RuleResult], scheduler_name: str) -> str:
    """The report table: rule, result, time, message; then the totals. ``scheduler_name``
    names what was checked (for the integration profile: ``integration sample <name>``)."""
    rows = [("RULE", "RESULT", "TIME", "MESSAGE")]
    for r in results:
        name = r.rule + (" (extension)" if r.extension else "")
        rows.append((name, r.result.upper(), f"{r.seconds:.1f}s", r.message))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = [
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:3])) + "  " + row[3]
        for row in rows
    ]
    counts = summary(results)
    lines.append("")
    planned = _planned(results)
    subject = (
        scheduler_name
        if scheduler_name.startswith("integration")
        else (f"scheduler {scheduler_name}")
    )
    lines.append(
        f"{subject}: {counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped"
        + (f"; planned, no rules yet: {', '.join(planned)}" if planned else "")
    )
    return "\n".join(line.rstrip() for line in lines) + "\n"


def render_json(results: Sequence[RuleResult], scheduler_name: str) -> str:
    """``{"profile", "schedulerName", "summary", "planned", "results": [...]}`` as JSON
    (for the integration profile ``schedulerName`` names the sample)."""
    doc = {
        "profile": "integration"
        if results and all(r.feature == "integration" for r in results)
        else "scheduler",
        "schedulerName": scheduler_name,
        "summary": summary(results),
        "planned": _planned(results),
        "results": [r.to_dict() for r in results],
    }
    return json.dumps(doc, indent=2) + "\n"


def render_junit(results: Sequence[RuleResult], scheduler_name: str) -> str:
    """JUnit XML: one ``testcase`` per rule (classname = feature)."""
    counts = summary(results)
    suite = ET.Element(
        "testsuite",
        name=f"workloadbuilder-conformance[{scheduler_name}]",
        tests=str(len(results)),
        failures=str(counts["fail"]),
        skipped=str(counts["skip"]),
        time=f"{sum(r.seconds for r in results):.3f}",
    )
    for r in results:
        case = ET.SubElement(
            suite, "testcase", classname=r.feature, name=r.rule, time=f"{r.seconds:.3f}"
        )
        if r.result == "fail":
            ET.SubElement(case, "failure", message=r.message).text = r.message
        elif r.result == "skip":
            ET.SubElement(case, "skipped", message=r.message)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"
