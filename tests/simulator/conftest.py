"""Simulator tests: make sure ``scheduler`` is the project's package.

``tests/`` is on sys.path (pytest ``pythonpath``), so ``tests/scheduler`` could shadow the
top-level ``scheduler`` package as a namespace package: put the project root first.
"""

from __future__ import annotations

import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[2])
if sys.path[:1] != [_ROOT]:
    sys.path.insert(0, _ROOT)
if getattr(sys.modules.get("scheduler"), "__file__", "") is None:
    del sys.modules["scheduler"]
