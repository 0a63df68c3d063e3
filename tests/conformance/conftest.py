"""The conformance suite composes the SDK's runner with the reference scheduler: put the
project root first so ``scheduler`` is the top-level package, not ``tests/scheduler``."""

from __future__ import annotations
