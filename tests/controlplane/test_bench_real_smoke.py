"""A tiny run of each ``benchmarks/bench_real.py`` mode (ours only) on the real API server:
the benchmark itself keeps working. Figures come from the full-length ``make`` targets."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from workloadbuilder.testing import ControlPlane

pytestmark = pytest.mark.controlplane

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_real.py"

MODES = {
    "backlog": ["--nodes", "4", "--pods", "40"],
    "stream": ["--nodes", "4", "--stream-rates", "20", "--stream-seconds", "2"],
    "queueing": [
        "--nodes",
        "2",
        *("--backlog-gangs", "24", "--backlog-steps", "2", "--probes", "1"),
        *("--drain-steps", "2"),
    ],
}


def _run(control_plane: ControlPlane, mode: str) -> dict[str, Any]:
    argv = [sys.executable, str(BENCH), "--mode", mode, "--only", "ours", "--json"]
    argv += ["--timeout", "90", "--bin-dir", str(control_plane.bin_dir), *MODES[mode]]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout)
    return report


@pytest.mark.parametrize("mode", sorted(MODES))
def test_bench_real_mode_runs(control_plane: ControlPlane, mode: str) -> None:
    report = _run(control_plane, mode)
    (r,) = report["results"]
    assert r["contender"] == "ours"
    if mode == "backlog":
        assert r["complete"] and r["bound"] == 40
        assert r["max_gangs_partial"] >= 0 and r["partial_p99_s"] >= 0
        # every pod's Scheduled event, and the API server's account of the run: one
        # binding and one event per pod (the benchmark's own requests left out)
        assert r["events_written"] == r["events_expected"] == 40 and r["events_complete"]
        per_pod = r["requests_per_pod"]
        assert per_pod["REQ POST pods/binding 201"] == 1.0
        assert per_pod["REQ POST events 201"] == 1.0
        assert r["scheduler_metrics"]["scheduler_event_writes_total"] >= 40
    elif mode == "stream":
        assert r["bound"] == r["pods"] == 40
        assert r["latency_p99_s"] > 0
    else:
        assert [st["backlog_gangs"] for st in r["steps"]] == [0, 12, 24]
        assert sum(d["pods_bound"] for d in r["drain"]) == r["backlog_pods"] == 48
