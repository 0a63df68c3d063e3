"""The conformance suite on the real v1.37.2 control plane, two ways on ONE plane: against the
upstream kube-scheduler (``default-scheduler``, every workload-aware gate on) and against our
scheduler running in process over ``KubeCluster`` (its own scheduler name). The rules run one
after the other, each on its own tainted fake Nodes, so the two schedulers never meet.

The plane runs kube-controller-manager's disruption controller for the PodDisruptionBudget
rules and its resourceclaim controller for the DRA rules. Every rule upstream implements must
pass on upstream (if one does not, the rule is wrong); every rule passes on ours; extension
rules are skipped on upstream with their reason.
Run with ``-s`` to see both report tables (docs/conformance.md records them).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from controlplane._conformance_rbac import (
    INTEGRATION_PROFILE_ONLY,
    granted,
    restricted_runner,
)
from workloadbuilder.cluster import KubeCluster
from workloadbuilder.conformance import (
    RUN_LABEL,
    UPSTREAM_SCHEDULER,
    ConformanceRunner,
    RuleResult,
    load_rules,
    remove_leftovers,
    render_text,
)
from workloadbuilder.errors import Forbidden
from workloadbuilder.scheduler import Scheduler, SchedulerConfig
from workloadbuilder.testing import ControlPlane

pytestmark = [pytest.mark.controlplane, pytest.mark.controllermanager]

OURS = "wb-conformance"


@pytest.fixture(scope="module")
def plane(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """A private plane with the upstream kube-scheduler (ours joins it in process) and
    kube-controller-manager's disruption controller (the PodDisruptionBudget rules read the
    budgets' status it writes) and resourceclaim controller (the DRA rules: claims from
    templates, for pods and PodGroups; ``DRAWorkloadResourceClaims`` is on in every
    component, as every workload-aware gate)."""
    with ControlPlane(
        bin_dir=control_plane.bin_dir,
        with_scheduler=True,
        with_controller_manager=True,
        controllers=("disruption-controller", "resourceclaim-controller"),
    ) as cp:
        yield cp


def _check(results: list[RuleResult], name: str) -> None:
    print("\n" + render_text(results, name))
    failed = [f"{r.rule}: {r.message}" for r in results if r.result == "fail"]
    assert not failed, "\n".join(failed)


async def test_upstream_kube_scheduler_passes_every_upstream_rule(plane: ControlPlane) -> None:
    """Run as a user that has only examples/conformance/clusterrole.yaml: nothing is
    forbidden and the scheduler profile uses every rule of the role meant for it."""
    cluster = restricted_runner(plane)
    try:
        results = await ConformanceRunner(cluster, UPSTREAM_SCHEDULER).run(load_rules())
        # nothing is left for `conformance cleanup` (namespaces stay Terminating here: no
        # namespace controller; they are skipped)
        assert await remove_leftovers(cluster) == []
    finally:
        await cluster.close()
    _check(results, UPSTREAM_SCHEDULER)
    assert cluster.forbidden == []
    assert cluster.used == granted() - INTEGRATION_PROFILE_ONLY
    # and the identity really is restricted
    with pytest.raises(Forbidden):
        other = restricted_runner(plane)
        try:
            await other.list("ConfigMap", "default")
        finally:
            await other.close()
    skipped = {r.rule for r in results if r.result == "skip"}
    assert skipped == {r.id for r in load_rules() if r.extension}
    assert all("extension" in r.message for r in results if r.result == "skip")


async def test_extension_rules_really_differ_from_upstream(plane: ControlPlane) -> None:
    """Forced to run, the extension rule fails on upstream: it checks our addition, not
    something upstream already does. And the suite leaves nothing behind."""
    cluster = KubeCluster.from_kubeconfig(plane.kubeconfig)
    try:
        runner = ConformanceRunner(cluster, UPSTREAM_SCHEDULER, run_extensions=True)
        ext = [dataclasses.replace(r, timeout=8.0) for r in load_rules() if r.extension]
        results = await runner.run(ext)
        left = await cluster.list("Node", label_selector=RUN_LABEL)
        pcs = await cluster.list("PriorityClass", label_selector=RUN_LABEL)
    finally:
        await cluster.close()
    print("\n" + render_text(results, UPSTREAM_SCHEDULER + " (extensions forced)"))
    assert [r.result for r in results] == ["fail"] * len(ext)
    assert list(left.items) == [] and list(pcs.items) == []


def test_cli_against_the_real_plane(plane: ControlPlane, tmp_path: Path) -> None:
    """``workloadbuilder conformance run`` as a user runs it: progress on stderr, JSON on
    stdout, a JUnit file, exit 0."""
    junit = tmp_path / "junit.xml"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "workloadbuilder.cli",
            "conformance",
            "run",
            "--kubeconfig",
            str(plane.kubeconfig),
            "--scheduler-name",
            UPSTREAM_SCHEDULER,
            "--features",
            "gang,topology",
            "-o",
            "json",
            "--junit",
            str(junit),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["summary"] == {"pass": 6, "fail": 0, "skip": 0}
    assert "PASS  gang/fits-binds-all" in proc.stderr
    assert 'failures="0"' in junit.read_text()


async def test_our_scheduler_passes_every_rule_on_the_real_api_server(
    plane: ControlPlane,
) -> None:
    cluster = KubeCluster.from_kubeconfig(plane.kubeconfig)
    sched = Scheduler(cluster, SchedulerConfig(scheduler_name=OURS, preemption=True))
    await sched.start()
    task = asyncio.create_task(sched.run())
    try:
        results = await ConformanceRunner(cluster, OURS).run(load_rules())
    finally:
        await sched.stop()
        await task
        await cluster.close()
    _check(results, OURS)
    assert [r.result for r in results] == ["pass"] * len(results)


def test_pytest_plugin_against_the_real_plane(plane: ControlPlane, tmp_path: Path) -> None:
    """``pytest -p workloadbuilder.conformance.pytest_plugin --wb-conformance``: one item per
    rule, passing on upstream; the extension skipped."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "workloadbuilder.conformance.pytest_plugin",
            "--wb-conformance",
            "--wb-kubeconfig",
            str(plane.kubeconfig),
            "--wb-scheduler-name",
            UPSTREAM_SCHEDULER,
            "--wb-features",
            "gang,composite",
            "-rs",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "6 passed, 1 skipped" in proc.stdout
    assert "extension, not upstream behaviour" in proc.stdout
