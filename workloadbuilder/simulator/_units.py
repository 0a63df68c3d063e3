"""Durations (``30s``, ``1h30m``) and Kubernetes quantities (``500m``, ``64Gi``)."""

from __future__ import annotations

import math
import re
from typing import Any

from workloadbuilder.resources import quantity_value

__all__ = ["format_duration", "parse_duration", "parse_quantity"]

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


def parse_duration(value: Any) -> float:
    """Seconds in a Go-style duration (``90s``, ``1m30s``, ``1.5h``, ``250ms``) or a plain
    non-negative number of seconds. Raises ``ValueError`` with a short reason."""
    if isinstance(value, bool):
        raise ValueError("expected a duration like 30s, 2m or 1h30m")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip()
        try:
            seconds = float(text)
        except ValueError:
            seconds = _parse_go_duration(text)
    else:
        raise ValueError("expected a duration like 30s, 2m or 1h30m")
    if math.isnan(seconds) or math.isinf(seconds):
        raise ValueError("must be finite")
    if seconds < 0:
        raise ValueError("must not be negative")
    return seconds


def _parse_go_duration(text: str) -> float:
    if not text:
        raise ValueError("expected a duration like 30s, 2m or 1h30m")
    total = 0.0
    pos = 0
    while pos < len(text):
        m = _DURATION_PART.match(text, pos)
        if m is None:
            raise ValueError("expected a duration like 30s, 2m or 1h30m")
        total += float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
        pos = m.end()
    return total


def format_duration(seconds: float | None) -> str:
    """A short human form: ``0s``, ``45s``, ``2m30s``, ``1h5m``, ``1.5s``; ``-`` for None."""
    if seconds is None:
        return "-"
    if seconds < 0:
        return "-" + format_duration(-seconds)
    if seconds < 60:
        text = f"{seconds:.3f}".rstrip("0").rstrip(".")
        return f"{text}s"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    out = ""
    if hours:
        out += f"{hours}h"
    if minutes:
        out += f"{minutes}m"
    if secs and not hours:
        out += f"{secs}s"
    return out or "0s"


def parse_quantity(value: Any) -> float:
    """The numeric value of a Kubernetes quantity (``500m`` -> 0.5, ``1Gi`` -> 1073741824).
    Raises ``ValueError`` for anything else."""
    if isinstance(value, (int, float, str)):
        try:
            return quantity_value(value)
        except ValueError:
            pass
    raise ValueError("expected a quantity like 4, 500m or 16Gi")
