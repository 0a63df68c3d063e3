"""The integration profile on MemoryCluster (fast): our reference integrations' Reconcilers,
stepped in process, with a stand-in for the pod webhook (a proxy that links each created pod
through ``Reconciler.pod_group_for``, as the webhook does). The real webhook, the real API
server and the upstream Job controller are in tests/controlplane/test_conformance_integration.py.

Also: the rules fail for an integration that gets things wrong (no owner, no links, no
cleanup), samples are checked, the CLI."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from workloadbuilder import integrations
from workloadbuilder.api import to_dict
from workloadbuilder.cli import main
from workloadbuilder.cluster import Cluster, ClusterProxy, KubeObject, MemoryCluster
from workloadbuilder.conformance import (
    BUILTIN_SAMPLES,
    UNSCHEDULED,
    ConformanceRunner,
    IntegrationSample,
    load_rules,
    load_sample,
    render_json,
    render_text,
    select_rules,
    standin_pods,
)
from workloadbuilder.runtime import Reconciler

RULES = load_rules("integration")
#: sample -> the reference integration that handles it (no native Job controller here)
OURS = {"job-opt-in": "job", "jobset": "jobset", "lws": "lws", "lws-subgroups": "lws"}


class _Linking(ClusterProxy):
    """The pod webhook's part: a created pod without a group gets the one the reconcilers
    map it to."""

    def __init__(self, inner: Cluster) -> None:
        super().__init__(inner)
        self.reconcilers: list[Reconciler] = []
        self.link = True

    async def create(
        self,
        obj: KubeObject,
        namespace: str | None = None,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
    ) -> KubeObject:
        if self.link and isinstance(obj, dict) and obj.get("kind") == "Pod":
            spec = obj.setdefault("spec", {})
            if not spec.get("schedulingGroup"):
                for r in self.reconcilers:
                    group = r.pod_group_for(obj)
                    if group:
                        spec["schedulingGroup"] = {"podGroupName": group}
                        break
        return await super().create(obj, namespace, dry_run=dry_run, field_manager=field_manager)


@dataclasses.dataclass
class Env:
    memory: MemoryCluster
    cluster: _Linking
    reconcilers: list[Reconciler]

    async def step(self) -> None:
        for r in self.reconcilers:
            await r.sync()
        for r in self.reconcilers:
            await r.until_idle()

    def runner(self, sample: IntegrationSample, **kw: Any) -> ConformanceRunner:
        return ConformanceRunner(
            self.cluster,
            f"integration sample {sample.name}",
            step=self.step,
            poll=0.01,
            sample=sample,
            standin_pods=True,
            **kw,
        )


async def _env(kinds: list[str]) -> Env:
    memory = MemoryCluster()
    cluster = _Linking(memory)
    reconcilers = [Reconciler(cluster, integrations.integration_for(k)) for k in kinds]
    cluster.reconcilers = reconcilers
    for r in reconcilers:
        await r.start()
    return Env(memory, cluster, reconcilers)


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    e = await _env(["job", "jobset", "lws"])
    try:
        yield e
    finally:
        for r in e.reconcilers:
            await r.stop()
        await e.memory.close()


def test_integration_rules_and_samples_are_well_formed() -> None:
    assert [r.id for r in RULES] == [
        "integration/workload",
        "integration/podgroups",
        "integration/composites",
        "integration/pods-linked",
        "integration/resize",
        "integration/cleanup",
        "integration/delegated-child",
        "integration/child-jobs",
    ]
    assert all(r.sources and r.checks and r.summary for r in RULES)
    # the scheduler profile is unchanged by them
    assert not [r for r in load_rules() if r.feature == "integration"]
    assert select_rules(RULES, None, profile="integration") == RULES
    for name in BUILTIN_SAMPLES:
        sample = load_sample(name)
        assert sample.resize_patch is not None and sample.resize_expect is not None, name
        obj = sample.instance("ns", {"l": "v"}, UNSCHEDULED)
        assert obj["metadata"]["namespace"] == "ns" and obj["metadata"]["labels"]["l"] == "v"
        assert UNSCHEDULED in yaml.safe_dump(obj), name  # every pod template is redirected


#: the rules that do not apply to a sample: delegated-child needs a Job sample, child-jobs a
#: sample whose controller makes child Jobs (a JobSet)
NOT_FOR = {
    "job-opt-in": {"integration/child-jobs"},
    "jobset": {"integration/delegated-child"},
    "lws": {"integration/delegated-child", "integration/child-jobs"},
    "lws-subgroups": {"integration/delegated-child", "integration/child-jobs"},
}


@pytest.mark.parametrize(
    ("sample_name", "standin_jobs"),
    [*((s, False) for s in sorted(OURS)), ("jobset", True)],
    ids=[*sorted(OURS), "jobset-stand-in-jobs"],
)
async def test_every_integration_rule_passes_on_our_integrations(
    env: Env, sample_name: str, standin_jobs: bool
) -> None:
    """Every rule that applies to the sample passes, the others are skipped with the reason.
    A JobSet's child Jobs exist only with a JobSet controller, here stood in for by the suite
    (``standin_jobs``: then every rule runs with them); without it child-jobs is not run."""
    sample = load_sample(sample_name)
    rules = RULES
    if sample_name == "jobset" and not standin_jobs:
        rules = [r for r in RULES if r.id != "integration/child-jobs"]
    results = await env.runner(sample, standin_jobs=standin_jobs).run(rules)
    skip = NOT_FOR[sample_name]
    assert [(r.rule, r.result) for r in results] == [
        (r.id, "skip" if r.id in skip else "pass") for r in rules
    ], [r.message for r in results if r.result == "fail"]
    assert all(r.message == "" for r in results if r.result == "pass")
    assert all(r.message for r in results if r.result == "skip")
    # the namespaces are gone and so is everything in them
    for kind in ("Namespace", "Pod", "Workload", "PodGroup", "CompositePodGroup"):
        left = [
            o
            for o in map(to_dict, (await env.memory.list(kind)).items)
            if "wbc-" in str(o["metadata"].get("namespace") or o["metadata"]["name"])
        ]
        assert left == [], (kind, left)


def _rule(rid: str) -> Any:
    return next(dataclasses.replace(r, timeout=0.5) for r in RULES if r.id == rid)


async def test_rules_fail_without_the_integration(env: Env) -> None:
    """The sample's kind has no integration running: every rule fails (none is vacuous)."""
    bare = await _env([])
    try:
        quick = [dataclasses.replace(r, timeout=0.3) for r in RULES]
        results = await bare.runner(load_sample("lws")).run(quick)
    finally:
        await bare.memory.close()
    assert [r.result for r in results] == [
        "skip" if r.id in NOT_FOR["lws"] else "fail" for r in RULES
    ]
    assert "0 Workloads controlled by LeaderWorkerSet serve" in results[0].message


@pytest.mark.parametrize(
    ("sample_name", "rid", "message"),
    [
        ("job-opt-in", "integration/delegated-child", "0 PodGroups controlled by the sample"),
        ("jobset", "integration/child-jobs", "0 Workloads controlled by JobSet train"),
    ],
)
async def test_the_delegation_rules_fail_without_the_integration(
    sample_name: str, rid: str, message: str
) -> None:
    bare = await _env([])
    try:
        runner = bare.runner(load_sample(sample_name), standin_jobs=True)
        result = await runner.run_one(_rule(rid))
    finally:
        await bare.memory.close()
    assert result.result == "fail"
    assert message in result.message


class _RootJobs:
    """A wrong Job integration: it plans a delegating child as if it had no parent (its own
    Workload and PodGroup)."""

    def __init__(self) -> None:
        self.inner = integrations.integration_for("job")
        self.gvk = self.inner.gvk

    def plan(self, obj: Mapping[str, Any], /, **options: Any) -> Any:
        root = copy.deepcopy(dict(obj))
        root["metadata"].pop("ownerReferences", None)
        annotations = root["metadata"].get("annotations") or {}
        annotations.pop("scheduling.k8s.io/group-template-name", None)
        return self.inner.plan(root, **options)


async def test_a_child_that_makes_its_own_workload_fails_delegated_child() -> None:
    memory = MemoryCluster()
    cluster = _Linking(memory)
    rec = Reconciler(cluster, _RootJobs())  # type: ignore[arg-type]
    cluster.reconcilers = [rec]
    await rec.start()
    env = Env(memory, cluster, [rec])
    try:
        result = await env.runner(load_sample("job-opt-in")).run_one(
            _rule("integration/delegated-child")
        )
    finally:
        await rec.stop()
        await memory.close()
    assert result.result == "fail"
    assert "the sample controls Workloads" in result.message
    assert "a delegating child makes none" in result.message


class _NotWorkloadAware(_Linking):
    """A JobSet controller that is not workload-aware: its child Jobs carry no annotation and
    no link in their pod template (the webhook stand-in then links the pods)."""

    async def create(
        self,
        obj: KubeObject,
        namespace: str | None = None,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
    ) -> KubeObject:
        if isinstance(obj, dict) and obj.get("kind") == "Job":
            obj = copy.deepcopy(obj)
            obj["metadata"].pop("annotations", None)
            obj["spec"]["template"]["spec"].pop("schedulingGroup", None)
        return await super().create(obj, namespace, dry_run=dry_run, field_manager=field_manager)


async def test_child_jobs_without_the_annotation_fail_child_jobs() -> None:
    memory = MemoryCluster()
    cluster = _NotWorkloadAware(memory)
    recs = [Reconciler(cluster, integrations.integration_for(k)) for k in ("job", "jobset")]
    cluster.reconcilers = recs
    for r in recs:
        await r.start()
    env = Env(memory, cluster, recs)
    try:
        result = await env.runner(load_sample("jobset"), standin_jobs=True).run_one(
            _rule("integration/child-jobs")
        )
    finally:
        for r in recs:
            await r.stop()
        await memory.close()
    assert result.result == "fail"
    assert "Job train-workers-0: no scheduling.k8s.io/group-template-name annotation" in (
        result.message
    )


async def test_unlinked_pods_fail_pods_linked(env: Env) -> None:
    env.cluster.link = False
    result = await env.runner(load_sample("lws")).run_one(_rule("integration/pods-linked"))
    assert result.result == "fail"
    assert "no spec.schedulingGroup" in result.message


async def test_wrong_expectations_fail(env: Env) -> None:
    """A sample that expects another shape: the podgroups rule says what differs."""
    sample = load_sample("lws")
    wrong = dataclasses.replace(
        sample, expect=dataclasses.replace(sample.expect, pod_groups=3, min_counts=(3, 3, 3))
    )
    result = await env.runner(wrong).run_one(_rule("integration/podgroups"))
    assert result.result == "fail"
    assert "2 PodGroups controlled by the sample, want 3" in result.message
    assert "minCounts [2, 2], want [3, 3, 3]" in result.message


async def test_a_workload_the_sample_does_not_control_is_not_its_own() -> None:
    """A broken "integration" that creates the Workload without an ownerReference: the rule
    fails and names the Workload it found."""
    memory = MemoryCluster()
    made: list[str] = []

    async def broken_operator() -> None:
        for lws in map(to_dict, (await memory.list("LeaderWorkerSet")).items):
            ns = lws["metadata"]["namespace"]
            if ns in made:
                continue
            made.append(ns)
            await memory.create(
                {
                    "apiVersion": "scheduling.k8s.io/v1beta1",
                    "kind": "Workload",
                    "metadata": {"name": "serve", "namespace": ns},
                    "spec": {
                        "controllerRef": {
                            "apiGroup": "leaderworkerset.x-k8s.io",
                            "kind": "LeaderWorkerSet",
                            "name": "serve",
                        },
                        "podGroupTemplates": [
                            {"name": "replica", "schedulingPolicy": {"gang": {"minCount": 2}}}
                        ],
                    },
                }
            )

    sample = load_sample("lws")
    runner = ConformanceRunner(memory, "x", step=broken_operator, poll=0.01, sample=sample)
    try:
        result = await runner.run_one(_rule("integration/workload"))
    finally:
        await memory.close()
    assert made and result.result == "fail"
    assert "0 Workloads controlled by LeaderWorkerSet serve" in result.message
    assert "others in the namespace: ['serve']" in result.message


def test_standin_pods_carry_no_link() -> None:
    for name, count in (("job", 2), ("jobset", 4), ("lws", 4), ("lws-subgroups", 8)):
        obj = load_sample(name).instance("ns", {}, UNSCHEDULED)
        obj["metadata"]["uid"] = "u-1"
        pods = standin_pods(obj)
        assert len(pods) == count, name
        assert all("schedulingGroup" not in p["spec"] for p in pods)
        assert all(p["spec"]["schedulerName"] == UNSCHEDULED for p in pods), name
    job = load_sample("job").instance("ns", {}, UNSCHEDULED)
    job["metadata"]["uid"] = "u-1"
    (ref,) = standin_pods(job)[0]["metadata"]["ownerReferences"]
    assert (ref["kind"], ref["uid"], ref["controller"]) == ("Job", "u-1", True)
    with pytest.raises(ValueError, match="no stand-in pods"):
        standin_pods({"kind": "TrainJob", "metadata": {"name": "x"}})


def _write(tmp_path: Path, doc: Mapping[str, Any]) -> str:
    path = tmp_path / "sample.yaml"
    path.write_text(yaml.safe_dump(dict(doc)))
    return str(path)


def test_samples_from_files(tmp_path: Path) -> None:
    # a plain LWS: the built-in lws sample's expectations
    lws = copy.deepcopy(dict(load_sample("lws").object))
    lws["metadata"]["name"] = "mine"
    got = load_sample(_write(tmp_path, lws))
    assert got.object["metadata"]["name"] == "mine" and got.expect.pod_groups == 2
    # a custom kind needs the wrapper, and its plural
    with pytest.raises(ValueError, match="IntegrationSample wrapper"):
        load_sample(_write(tmp_path, {"apiVersion": "x.io/v1", "kind": "Thing"}))
    doc = {
        "apiVersion": "conformance.workloadbuilder.io/v1alpha1",
        "kind": "IntegrationSample",
        "object": {"apiVersion": "x.io/v1", "kind": "Thing", "metadata": {"name": "t"}},
    }
    with pytest.raises(ValueError, match="plural: required"):
        load_sample(_write(tmp_path, doc))
    custom = load_sample(_write(tmp_path, {**doc, "plural": "things", "expect": {"podGroups": 2}}))
    assert custom.resource.plural == "things" and custom.expect.pod_groups == 2
    with pytest.raises(ValueError, match="expect: unknown field"):
        load_sample(_write(tmp_path, {**doc, "plural": "things", "expect": {"groups": 2}}))
    with pytest.raises(ValueError, match=r"(?i)no such file"):
        load_sample(str(tmp_path / "missing.yaml"))


def test_cli_integration_profile_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["conformance", "run", "--profile", "integration"]) == 2
    assert "needs --integration-sample" in capsys.readouterr().err
    assert (
        main(["conformance", "run", "--profile", "integration", "--integration-sample", "x.yaml"])
        == 2
    )
    assert "integration sample x.yaml" in capsys.readouterr().err
    assert main(["conformance", "run", "--scheduler-name", "s", "--integration-sample", "lws"]) == 2
    assert "need --profile integration" in capsys.readouterr().err
    assert main(["conformance", "run"]) == 2
    assert "needs --scheduler-name" in capsys.readouterr().err
    rc = main(
        [
            "conformance",
            "run",
            "--profile",
            "integration",
            "--integration-sample",
            "lws",
            "--dry-run",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0 and "# rule integration/cleanup" in out and "kind: LeaderWorkerSet" in out
    assert "kind: Pod\n" not in out  # no stand-in pods unless asked
    rc = main(
        [
            "conformance",
            "run",
            "--profile",
            "integration",
            "--integration-sample",
            "lws",
            "--stand-in-pods",
            "--dry-run",
        ]
    )
    out = capsys.readouterr().out
    resize = out.split("# rule integration/resize")[1].split("# rule")[0]
    docs = [d for d in yaml.safe_load_all(resize) if d]
    assert [d["kind"] for d in docs].count("Pod") == 6  # 4, then 2 after the resize
    (patch,) = [d for d in docs if d["kind"] == "Patch"]
    assert patch["patch"] == {"spec": {"replicas": 3}} and patch["target"]["kind"] == (
        "LeaderWorkerSet"
    )
    rc = main(
        [
            "conformance",
            "run",
            "--profile",
            "integration",
            "--integration-sample",
            "jobset",
            "--stand-in-jobs",
            "--dry-run",
        ]
    )
    out = capsys.readouterr().out
    block = out.split("# rule integration/child-jobs")[1].split("# rule")[0]
    jobs = [d for d in yaml.safe_load_all(block) if d and d["kind"] == "Job"]
    assert [j["metadata"]["name"] for j in jobs] == ["train-workers-0", "train-workers-1"]
    assert all(j["metadata"]["annotations"]["scheduling.k8s.io/group-template-name"] for j in jobs)
    assert "kind: Pod\n" not in block  # --stand-in-jobs alone: the Job controller makes pods
    delegated = out.split("# rule integration/delegated-child")[1].split("# rule")[0]
    assert "(skipped: the sample is a JobSet" in out.split("# rule integration/delegated-child")[1]
    assert "kind: ConfigMap" in delegated


def test_cli_integration_profile_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Against a cluster where no integration runs: every rule fails, exit 1, the report."""
    import workloadbuilder.cli._conformance as cli

    monkeypatch.setattr(cli, "kube_cluster", lambda args: MemoryCluster())
    rc = main(
        [
            "conformance",
            "run",
            "--profile",
            "integration",
            "--integration-sample",
            "job-opt-in",
            "--stand-in-pods",
            "--timeout",
            "0.3",
        ]
    )
    captured = capsys.readouterr()
    assert rc == 1
    assert "FAIL  integration/workload" in captured.err
    # child-jobs does not apply to a Job sample
    assert "integration sample job-opt-in: 0 passed, 7 failed, 1 skipped" in captured.out
    assert "planned" not in captured.out


def test_reports_for_the_integration_profile() -> None:
    from workloadbuilder.conformance import RuleResult

    results = [RuleResult("integration/workload", "integration", "pass", 0.5, "")]
    assert "planned" not in render_text(results, "integration sample lws")
    doc = json.loads(render_json(results, "integration sample lws"))
    assert doc["planned"] == [] and doc["profile"] == "integration"


def test_docs_describe_every_rule_and_sample() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "conformance.md").read_text()
    for rule in [*load_rules(), *RULES]:
        assert f"| `{rule.id}`" in docs, rule.id
    for name in BUILTIN_SAMPLES:
        assert f"| `{name}` |" in docs, name


def test_pytest_plugin_integration_profile_usage(tmp_path: Path) -> None:
    import subprocess
    import sys

    base = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "workloadbuilder.conformance.pytest_plugin",
        "--wb-conformance",
        "--wb-profile",
        "integration",
        str(tmp_path),
    ]
    missing = subprocess.run(base, capture_output=True, text=True, cwd=tmp_path, check=False)
    assert missing.returncode == 4 and "--wb-integration-sample" in missing.stderr
    bad = subprocess.run(
        [*base, "--wb-integration-sample", "nope.yaml"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert bad.returncode == 4 and "integration sample nope.yaml" in bad.stderr


async def test_remove_leftovers_takes_only_the_suites_objects(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from workloadbuilder.conformance import RUN_LABEL, remove_leftovers

    memory = MemoryCluster()
    try:
        for run in ("r1", "r2", None):
            labels = {RUN_LABEL: run} if run else {}
            suffix = run or "real"
            await memory.create(
                {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {"name": f"ns-{suffix}", "labels": labels},
                }
            )
            await memory.create(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": f"n-{suffix}", "labels": labels},
                }
            )
            await memory.create(
                {
                    "apiVersion": "scheduling.k8s.io/v1",
                    "kind": "PriorityClass",
                    "metadata": {"name": f"pc-{suffix}", "labels": labels},
                    "value": 1,
                }
            )
        assert await remove_leftovers(memory, "r1") == [
            "Namespace/ns-r1",
            "Node/n-r1",
            "PriorityClass/pc-r1",
        ]
        assert sorted(await remove_leftovers(memory)) == [
            "Namespace/ns-r2",
            "Node/n-r2",
            "PriorityClass/pc-r2",
        ]
        names = {
            to_dict(o)["metadata"]["name"]
            for kind in ("Namespace", "Node", "PriorityClass")
            for o in (await memory.list(kind)).items
        }
        assert {"ns-real", "n-real", "pc-real"} <= names
        assert not names & {"ns-r1", "n-r1", "pc-r1", "ns-r2", "n-r2", "pc-r2"}
    finally:
        await memory.close()


def test_cli_cleanup(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import workloadbuilder.cli._conformance as cli

    monkeypatch.setattr(cli, "kube_cluster", lambda args: MemoryCluster())
    assert main(["conformance", "cleanup", "--run", "abc"]) == 0
    assert "0 objects deleted" in capsys.readouterr().out
