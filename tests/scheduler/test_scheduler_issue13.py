"""Issue 13 on the scheduler side: ``explain`` says what is happening (gated gangs wait, text
and JSON agree) and the scheduler logs what it does."""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sched_helpers import Env

from workloadbuilder.scheduler.explain import explain_report, render_explain


async def test_a_gated_gang_is_waiting_with_its_pod_count(env: Env) -> None:
    await env.node("a")
    await env.pod_group("g", 3)
    await env.pod("g-0", "g")
    await env.pod("g-1", "g")
    s = env.scheduler()
    await s.start()
    await env.seen(s, lambda: env.cached_pods(s) == 2)
    report = await explain_report(env.cluster, "g", env.namespace)
    assert report["state"] == "waiting: 2 of 3 pods exist"
    assert report["condition"] is None  # the scheduler writes no status for gated groups
    assert "State:     waiting: 2 of 3 pods exist" in render_explain(report)


async def test_pods_of_a_missing_pod_group_are_waiting(env: Env) -> None:
    await env.pod("m-0", "missing")
    await env.pod("m-1", "missing")
    report = await explain_report(env.cluster, "missing", env.namespace)
    assert report["state"] == "waiting: the PodGroup does not exist; 2 pods name it"
    assert "Policy" not in render_explain(report)


async def test_priority_zero_is_shown_as_in_json(env: Env) -> None:
    pc = await env.priority_class("zero", 0)
    await env.pod_group("z", 1, priority_class=pc)
    report = await explain_report(env.cluster, "z", env.namespace)
    text = render_explain(report)
    if report["priority"] is not None:  # the API server resolves it; MemoryCluster too
        assert report["priority"] == 0
        assert f"Priority:  {pc} 0\n" in text
    else:
        assert f"Priority:  {pc}\n" in text


async def test_the_scheduler_logs_each_group_at_info(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="workloadbuilder.scheduler")
    await env.node("a", gpu=4)
    await env.gang("fits", 1, gpu=4)
    await env.gang("big", 2, gpu=4)
    s = env.scheduler()
    await s.start()
    await env.seen(s, lambda: env.cached_pods(s) == 3)

    async def decided() -> bool:
        return await env.group_condition("big") is not None and bool(await env.bound("fits"))

    await env.until(s, decided)
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert any(m.startswith(f"pod group {env.namespace}/fits scheduled: 1 pods") for m in messages)
    assert any(
        m.startswith(f"pod group {env.namespace}/big unschedulable: minCount 2") for m in messages
    ), messages


def test_explain_against_an_unreachable_server_fails_soon_and_says_so(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    t0 = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "workloadbuilder.cli",
            "explain",
            "podgroup",
            "x",
            "--kubeconfig",
            str(kubeconfig),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    elapsed = time.monotonic() - t0
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[-1].startswith("error: cannot reach the API server after 3 attempts: ")
    assert sum("retrying in" in line for line in lines) == 2
    assert elapsed < 20, elapsed


def test_explain_without_kind_is_a_usage_error() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "workloadbuilder.cli", "explain"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "error: explain needs a KIND (known: podgroup)" in proc.stderr
    helped = subprocess.run(
        [sys.executable, "-m", "workloadbuilder.cli", "explain", "-h"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "Explain a PodGroup on a live cluster" in helped.stdout


def test_render_explain_shows_priority_zero() -> None:
    report = {
        "namespace": "ns",
        "name": "g",
        "policy": "basic",
        "minCount": None,
        "priorityClassName": None,
        "priority": 0,
        "pods": {"live": 0, "bound": 0},
        "nodes": [],
        "state": "not attempted yet",
        "condition": None,
        "explanation": None,
    }
    assert "Priority:  0\n" in render_explain(report)
