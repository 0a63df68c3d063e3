"""The integration profile of the conformance suite on the real v1.37.2 control plane.

* Upstream: kube-controller-manager v1.37.2's Job controller (``WorkloadWithJob`` on, with the
  garbage collector and the PodGroup protection controller) and the built-in ``job`` sample
  (``spec.scheduling``): every integration rule must pass -- if one does not, the rule is
  wrong. The controller creates the pods itself; nothing stands in for it.
  ``integration/delegated-child`` makes the sample Job a delegating child of a parent the
  suite plays; ``integration/child-jobs`` does not apply to a Job sample (skipped).
* kube-controller-manager's Job controller as the *child* integration of a JobSet: our JobSet
  integration makes the JobSet's Workload and PodGroups, the suite stands in for a
  workload-aware JobSet controller and creates the child Jobs (``--stand-in-jobs``: the
  downward annotation and a linked pod template), the Job controller makes their pods (it
  must make no Workload or PodGroup of its own for them).
* Ours: the reference integrations (``integrations/``: Job in opt-in mode, JobSet, LWS) as
  Reconcilers over ``KubeCluster`` and the pod webhook, which kube-apiserver calls over
  loopback TLS for every pod created in the suite's namespaces. No workload controllers run
  here (and no garbage collector): the suite's stand-in pods are created as those
  controllers would (labels, ownerReferences, no ``spec.schedulingGroup``) and must come back
  linked by the webhook. The JobSet sample runs once more with stand-in child Jobs (their
  pods then come from the child Jobs' linked template), for ``integration/child-jobs``.

Run with ``-s`` to see the report tables (docs/conformance.md records them).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from controlplane._conformance_rbac import (
    SCHEDULER_PROFILE_ONLY,
    RecordingCluster,
    granted,
    restricted_runner,
)
from workloadbuilder import integrations
from workloadbuilder.cluster import KubeCluster
from workloadbuilder.conformance import (
    RUN_LABEL,
    ConformanceRunner,
    RuleResult,
    load_rules,
    load_sample,
    remove_leftovers,
    render_text,
)
from workloadbuilder.errors import NotFound
from workloadbuilder.integrations.webhook import (
    MUTATING_WEBHOOK_CONFIGURATION,
    PodWebhook,
    self_signed,
)
from workloadbuilder.runtime import Reconciler
from workloadbuilder.testing import ControlPlane

pytestmark = [pytest.mark.controlplane]

RULES = load_rules("integration")
#: the rules the integration profile used, over both tests (run as the restricted user)
USED: set[tuple[str, str, str]] = set()


def _record(cluster: RecordingCluster) -> None:
    assert cluster.forbidden == []
    USED.update(cluster.used)


#: our samples: the opted-in Job (no native Job controller here), JobSet, LWS (two shapes)
OUR_SAMPLES = ["job-opt-in", "jobset", "lws", "lws-subgroups"]


#: sample -> the rules that do not apply to it (skipped, with the reason)
NOT_FOR = {
    "job": {"integration/child-jobs"},
    "job-opt-in": {"integration/child-jobs"},
    "jobset": {"integration/delegated-child"},
    "lws": {"integration/delegated-child", "integration/child-jobs"},
    "lws-subgroups": {"integration/delegated-child", "integration/child-jobs"},
}


def _check(results: list[RuleResult], title: str, sample: str) -> None:
    print("\n" + render_text(results, title))
    failed = [f"{r.rule}: {r.message}" for r in results if r.result == "fail"]
    assert not failed, "\n".join(failed)
    skipped = {r.rule for r in results if r.result == "skip"}
    assert skipped == NOT_FOR[sample] & {r.rule for r in results}
    assert all(r.message for r in results if r.result == "skip")


@pytest.mark.controllermanager
async def test_upstream_job_controller_passes_every_integration_rule(
    control_plane_kcm: ControlPlane,
) -> None:
    cluster = restricted_runner(control_plane_kcm)  # examples/conformance/clusterrole.yaml
    try:
        runner = ConformanceRunner(cluster, "integration sample job", sample=load_sample("job"))
        results = await runner.run(RULES)
    finally:
        await cluster.close()
    _check(results, "integration sample job (kube-controller-manager v1.37.2)", "job")
    _record(cluster)


@pytest.mark.controllermanager
async def test_upstream_job_controller_as_the_child_integration_of_a_jobset(
    control_plane_kcm: ControlPlane, crds_kcm: list[str]
) -> None:
    """The JobSet sample with stand-in child Jobs: our JobSet integration (the parent), the
    Job controller (the children's pods, nothing else): every rule that applies passes."""
    ours = KubeCluster.from_kubeconfig(control_plane_kcm.kubeconfig)
    rec = Reconciler(ours, integrations.integration_for("jobset"))
    await rec.start()
    task = asyncio.create_task(rec.run())
    cluster = restricted_runner(control_plane_kcm)
    try:
        runner = ConformanceRunner(
            cluster,
            "integration sample jobset",
            sample=load_sample("jobset"),
            standin_jobs=True,
            run_id="kcmjs",
        )
        results = await runner.run(RULES)
        assert await remove_leftovers(cluster, "kcmjs") == []
    finally:
        await cluster.close()
        await rec.stop()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        await ours.close()
    _check(
        results,
        "integration sample jobset, stand-in child Jobs (kube-controller-manager v1.37.2's "
        "Job controller for them)",
        "jobset",
    )
    _record(cluster)


@pytest.mark.controllermanager
def test_cli_integration_profile_against_upstream(control_plane_kcm: ControlPlane) -> None:
    """As a user runs it: progress on stderr, JSON on stdout, exit 0."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "workloadbuilder.cli",
            "conformance",
            "run",
            "--kubeconfig",
            str(control_plane_kcm.kubeconfig),
            "--profile",
            "integration",
            "--integration-sample",
            "job",
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    # integration/child-jobs does not apply to a Job sample
    assert doc["summary"] == {"pass": len(RULES) - 1, "fail": 0, "skip": 1}
    assert "PASS  integration/cleanup" in proc.stderr


@pytest.mark.controllermanager
def test_pytest_plugin_integration_profile_against_upstream(
    control_plane_kcm: ControlPlane, tmp_path: Path
) -> None:
    """``pytest --wb-conformance --wb-profile integration``: one item per rule, all pass."""
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
            str(control_plane_kcm.kubeconfig),
            "--wb-profile",
            "integration",
            "--wb-integration-sample",
            "job",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{len(RULES) - 1} passed, 1 skipped" in proc.stdout  # child-jobs: not a Job's


@contextlib.asynccontextmanager
async def _our_integrations(plane: ControlPlane, run_id: str) -> AsyncIterator[KubeCluster]:
    """The reference integrations and the pod webhook, called by kube-apiserver for pods in
    the run's namespaces."""
    cluster = KubeCluster.from_kubeconfig(plane.kubeconfig)
    reconcilers = [Reconciler(cluster, integrations.integration_for(k)) for k in integrations.KINDS]
    cert, key, ca = self_signed(str(plane.run_dir / f"webhook-conf-{run_id}"), ["127.0.0.1"])
    hook = PodWebhook(reconcilers, cert_file=cert, key_file=key)
    await hook.start("127.0.0.1", 0)
    config_name = f"wb-conformance-{run_id}"
    await cluster.create(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": config_name},
            "webhooks": [
                {
                    "name": "pods.integrations.workloadbuilder.io",
                    "admissionReviewVersions": ["v1"],
                    "sideEffects": "None",
                    "failurePolicy": "Fail",  # every pod must go through it
                    "timeoutSeconds": 5,
                    "clientConfig": {
                        "url": f"https://127.0.0.1:{hook.port}/mutate",
                        "caBundle": base64.b64encode(ca).decode(),
                    },
                    "rules": [
                        {
                            "operations": ["CREATE"],
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "resources": ["pods"],
                            "scope": "Namespaced",
                        }
                    ],
                    "namespaceSelector": {"matchLabels": {RUN_LABEL: run_id}},
                }
            ],
        }
    )
    tasks: list[asyncio.Task[None]] = []
    try:
        for r in reconcilers:
            await r.start()
        tasks = [asyncio.create_task(r.run()) for r in reconcilers]
        yield cluster
    finally:
        with contextlib.suppress(NotFound):
            await cluster.delete(MUTATING_WEBHOOK_CONFIGURATION, config_name)
        for r in reconcilers:
            await r.stop()
        for t in tasks:
            t.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        await hook.stop()
        await cluster.close()


@pytest.mark.parametrize(
    ("sample_name", "standin_jobs"),
    [*((s, False) for s in OUR_SAMPLES), ("jobset", True)],
    ids=[*OUR_SAMPLES, "jobset-stand-in-jobs"],
)
async def test_our_integrations_pass_every_integration_rule(
    control_plane: ControlPlane, crds: list[str], sample_name: str, standin_jobs: bool
) -> None:
    run_id = f"i{OUR_SAMPLES.index(sample_name)}" + ("j" if standin_jobs else "")
    rules = RULES
    if sample_name == "jobset" and not standin_jobs:  # no child Jobs without a JobSet controller
        rules = [r for r in RULES if r.id != "integration/child-jobs"]
    runner_cluster = restricted_runner(control_plane)  # examples/conformance/clusterrole.yaml
    async with _our_integrations(control_plane, run_id):
        runner = ConformanceRunner(
            runner_cluster,
            f"integration sample {sample_name}",
            sample=load_sample(sample_name),
            standin_pods=True,
            standin_jobs=standin_jobs,
            run_id=run_id,
        )
        try:
            results = await runner.run(rules)
            assert await remove_leftovers(runner_cluster, run_id) == []
        finally:
            await runner_cluster.close()
    title = f"integration sample {sample_name} (ours)" + (
        ", stand-in child Jobs" if standin_jobs else ""
    )
    _check(results, title, sample_name)
    _record(runner_cluster)


def test_the_integration_profile_used_every_rule_meant_for_it() -> None:
    """Over the runs above (the restricted identity): nothing outside the ClusterRole was
    asked for, and every rule of it not for the scheduler profile only was needed -- but
    perhaps the deletes of leftover Workloads and CompositePodGroups: the suite's cleanup
    makes them only for what the integration has not removed yet when the rule ends (a race
    with the integration's own cleanup, so they are used in some runs, not in others)."""
    if not USED:
        pytest.skip("needs the runs above in the same session")
    assert granted() >= USED
    assert granted() - SCHEDULER_PROFILE_ONLY - USED <= {
        ("scheduling.k8s.io", "workloads", "delete"),
        ("scheduling.k8s.io", "compositepodgroups", "delete"),
    }
