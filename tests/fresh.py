"""Run a snippet of Python in a new interpreter, for tests of what a start imports."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def run_fresh(code: str) -> Any:
    """Run ``code`` (dedented) in a new interpreter from the repository root; it prints one
    JSON value on its last line, which is returned. A non-zero exit fails with its stderr."""
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])
