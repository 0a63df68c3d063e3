"""The conformance suite composes the SDK's runner with the reference scheduler: put the
project root first so ``scheduler`` is the top-level package, not ``tests/scheduler``."""

from __future__ import annotations

import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[2])
if sys.path[:1] != [_ROOT]:
    sys.path.insert(0, _ROOT)
if getattr(sys.modules.get("scheduler"), "__file__", "") is None:
    del sys.modules["scheduler"]
