"""Simulator tests: make sure ``scheduler`` is the project's package.

``tests/`` is on sys.path (pytest ``pythonpath``), so ``tests/scheduler`` could shadow the
top-level ``scheduler`` package as a namespace package: put the project root first.
"""

from __future__ import annotations
