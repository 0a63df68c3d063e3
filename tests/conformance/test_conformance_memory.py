"""The conformance suite against our scheduler on MemoryCluster (stepped, fast), and the
runner's own behaviour: isolation, cleanup, skips, failure detection, reports, the CLI."""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from workloadbuilder.api import to_dict
from workloadbuilder.cli import main
from workloadbuilder.cluster import MemoryCluster
from workloadbuilder.conformance import (
    FEATURES,
    RUN_LABEL,
    SCENARIO_LABEL,
    TAINT_KEY,
    UPSTREAM_SCHEDULER,
    ConformanceRunner,
    Rule,
    RuleResult,
    load_rules,
    render_json,
    render_junit,
    render_text,
    select_rules,
)
from workloadbuilder.scheduler import Scheduler, SchedulerConfig, load_config

OURS = "wb-conformance"
RULES = load_rules()


async def count_budgets(cluster: MemoryCluster) -> None:
    """What kube-controller-manager's disruption controller does for the rules' budgets
    (``minAvailable`` as a number, ``matchLabels`` or the empty selector): write
    ``status`` from the Running and Ready pods they select. MemoryCluster has no controller
    of its own, and the PodDisruptionBudget rules need one."""
    for pdb in map(to_dict, (await cluster.list("PodDisruptionBudget")).items):
        meta, spec = pdb["metadata"], pdb.get("spec") or {}
        want = (spec.get("selector") or {}).get("matchLabels") or {}
        expected = healthy = 0
        for pod in map(to_dict, (await cluster.list("Pod", meta["namespace"])).items):
            labels = pod["metadata"].get("labels") or {}
            if pod["metadata"].get("deletionTimestamp") or any(
                labels.get(k) != v for k, v in want.items()
            ):
                continue
            expected += 1
            st = pod.get("status") or {}
            ready = any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in st.get("conditions") or ()
            )
            healthy += st.get("phase") == "Running" and ready
        desired = int(spec.get("minAvailable") or 0)
        status = {
            "observedGeneration": meta.get("generation"),
            "disruptionsAllowed": max(0, healthy - desired),
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "expectedPods": expected,
        }
        if {k: (pdb.get("status") or {}).get(k) for k in status} != status:
            await cluster.patch(
                "PodDisruptionBudget",
                meta["name"],
                {"status": status},
                meta["namespace"],
                subresource="status",
            )


@dataclasses.dataclass
class Stepped:
    cluster: MemoryCluster
    scheduler: Scheduler
    #: play kube-controller-manager's disruption controller (see count_budgets)
    budgets: bool = True

    async def step(self) -> None:
        if self.budgets:
            await count_budgets(self.cluster)
        await self.scheduler.sync()
        await self.scheduler.until_idle()

    def runner(self, name: str = OURS, **kw: Any) -> ConformanceRunner:
        return ConformanceRunner(self.cluster, name, step=self.step, poll=0.01, **kw)


@pytest.fixture
async def stepped() -> AsyncIterator[Stepped]:
    cluster = MemoryCluster()
    s = Scheduler(cluster, SchedulerConfig(scheduler_name=OURS, preemption=True))
    await s.start()
    try:
        yield Stepped(cluster, s)
    finally:
        await s.stop()
        await cluster.close()


def test_rules_are_well_formed() -> None:
    ids = [r.id for r in RULES]
    assert len(ids) == len(set(ids)) >= 19
    assert {r.feature for r in RULES} == set(FEATURES)
    for r in RULES:
        assert r.summary and r.checks, r.id
        assert all(
            s.startswith(("https://github.com/kubernetes/", "https://kep.k8s.io"))
            for s in r.sources
        )
        assert any("v1.37.2" in s or "kep.k8s.io" in s for s in r.sources), r.id
        assert r.id.split("/")[0] == r.feature
        assert any("expect" in step for step in r.steps), r.id
    assert [r.id for r in RULES if r.extension] == [
        "composite/bounded-search",
        "preemption/topology-cheapest-domain",
    ]


def test_malformed_rules_are_refused() -> None:
    good = {"id": "x/y", "feature": "gang", "source": "https://kep.k8s.io/4671", "steps": []}
    Rule.from_dict(good)
    with pytest.raises(ValueError, match="unknown feature"):
        Rule.from_dict({**good, "feature": "nope"})
    with pytest.raises(ValueError, match="upstream URL"):
        Rule.from_dict({**good, "source": "https://example.com/x"})
    with pytest.raises(ValueError, match="bad step"):
        Rule.from_dict({**good, "steps": [{"launch": {}}]})
    with pytest.raises(ValueError, match="extensionReason"):
        Rule.from_dict({**good, "extension": True})
    with pytest.raises(ValueError, match="unknown conformance feature"):
        select_rules(RULES, ["gang", "magic"])
    assert [r.id for r in select_rules(RULES, ["dra"])] == [
        "dra/pod-claim-on-its-node",
        "dra/gang-all-or-nothing",
        "dra/podgroup-claim-reserved-for-group",
        "dra/podgroup-claim-node-restricted",
    ]


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
async def test_every_rule_passes_on_our_scheduler(stepped: Stepped, rule: Rule) -> None:
    result = await stepped.runner().run_one(rule)
    assert (result.result, result.message) == ("pass", "")
    # everything it made is gone: no Node, no pod, no group, no PriorityClass of the run
    kinds = ("Node", "Pod", "PodGroup", "CompositePodGroup", "PriorityClass")
    dra = ("DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate")
    for kind in (*kinds, "PodDisruptionBudget", *dra):
        left = [
            o
            for o in (await stepped.cluster.list(kind)).items
            if "wbc-" in str(o["metadata"]["name"] if isinstance(o, dict) else o.metadata.name)
        ]
        assert left == [], (kind, left)


PDB_RULES = [r for r in RULES if "podDisruptionBudget" in {next(iter(s)) for s in r.steps}]


def test_the_pdb_rules() -> None:
    assert [r.id for r in PDB_RULES] == [
        "preemption/pdb-reprieved-first",
        "preemption/pdb-pod-node-choice",
        "preemption/pdb-empty-selector",
        "preemption/pdb-all-unit-violating",
    ]
    assert all("disruption controller" in r.checks for r in PDB_RULES)


async def test_pdb_rules_fail_without_a_disruption_controller(stepped: Stepped) -> None:
    """Nobody writes the budgets' status: each PodDisruptionBudget rule fails at once, and
    says what the cluster lacks (not a preemption outcome)."""
    stepped.budgets = False
    quick = [dataclasses.replace(r, timeout=0.5) for r in PDB_RULES]
    results = await stepped.runner().run(quick)
    assert [r.result for r in results] == ["fail"] * len(PDB_RULES)
    assert all("kube-controller-manager's disruption controller" in r.message for r in results)


async def test_the_pdb_rules_fail_when_preemption_ignores_budgets(
    stepped: Stepped, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scheduler that reads no budget fails the rules that a budget decides (the empty
    selector's rule passes either way: the budget protects nothing)."""
    monkeypatch.setattr(stepped.scheduler.cache, "budget_list", lambda: [])
    quick = [dataclasses.replace(r, timeout=2.0) for r in PDB_RULES]
    got = {r.rule: r.result for r in await stepped.runner().run(quick)}
    assert got == {
        "preemption/pdb-reprieved-first": "fail",
        "preemption/pdb-pod-node-choice": "fail",
        "preemption/pdb-empty-selector": "pass",
        "preemption/pdb-all-unit-violating": "fail",
    }


DRA_RULES = select_rules(RULES, ["dra"])


def test_the_dra_rules_say_what_the_cluster_needs() -> None:
    assert all("resourceclaim-controller" in r.checks for r in DRA_RULES)
    group_claims = [r for r in DRA_RULES if "podgroup-claim" in r.id]
    assert len(group_claims) == 2
    assert all("DRAWorkloadResourceClaims" in r.checks for r in group_claims)


async def test_dra_rules_fail_without_a_resourceclaim_controller() -> None:
    """Nobody makes the claims from the templates: every DRA rule that uses a template
    fails, naming the claim that does not exist (not a wrong allocation); the rule whose
    PodGroup names its ResourceClaim needs no controller and passes."""
    cluster = MemoryCluster(claim_controller=False)
    s = Scheduler(cluster, SchedulerConfig(scheduler_name=OURS))
    await s.start()
    try:
        quick = [dataclasses.replace(r, timeout=0.5) for r in DRA_RULES]
        results = await Stepped(cluster, s, budgets=False).runner().run(quick)
    finally:
        await s.stop()
        await cluster.close()
    assert [r.result for r in results] == ["fail", "fail", "fail", "pass"]
    got = {r.rule: r.message for r in results if r.result == "fail"}
    # the gang's pods wait at PreEnqueue for their claims, silently: no condition
    assert "PodScheduled None" in got.pop("dra/gang-all-or-nothing")
    assert all("no ResourceClaim (yet)" in m for m in got.values()), got


async def test_dra_rules_fail_when_the_scheduler_ignores_the_devices(tmp_path: Path) -> None:
    """With the DynamicResources plugin disabled, the pods with claims are refused (never
    bound without their devices): every DRA rule fails."""
    config = tmp_path / "nodra.yaml"
    config.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\n"
        "kind: KubeSchedulerConfiguration\n"
        "profiles:\n"
        f"- schedulerName: {OURS}\n"
        "  plugins: {reserve: {disabled: [{name: DynamicResources}]}}\n"
    )
    loaded = load_config(config)
    cluster = MemoryCluster()
    s = Scheduler(cluster, loaded.scheduler, framework=loaded.framework)
    await s.start()
    try:
        quick = [dataclasses.replace(r, timeout=0.5) for r in DRA_RULES]
        results = await Stepped(cluster, s).runner().run(quick)
    finally:
        await s.stop()
        await cluster.close()
    assert [r.result for r in results] == ["fail"] * len(DRA_RULES)


async def test_dra_rules_check_the_reservation_and_the_node(stepped: Stepped) -> None:
    """The claim checks are not vacuous: a rule expecting the pod's reservation on the
    PodGroup's claim, or a device on another pod's Node, fails with the difference."""
    by_id = {r.id: r for r in DRA_RULES}

    def with_claims(rule: Rule, claims: dict[str, Any]) -> Rule:
        steps = [*rule.steps[:-1], {"expect": {"claims": claims}}]
        return dataclasses.replace(rule, steps=tuple(steps), timeout=1.0)

    wrong_holder = with_claims(
        by_id["dra/podgroup-claim-reserved-for-group"],
        {"podGroup/g/dev": {"reservedFor": ["pods/g-0"]}},
    )
    wrong_node = with_claims(
        by_id["dra/pod-claim-on-its-node"], {"pod/pod-0/dev": {"onNodeOf": "pod-1"}}
    )
    one, two = await stepped.runner().run([wrong_holder, wrong_node])
    assert one.result == "fail" and "want ['pods/g-0']" in one.message, one.message
    assert "scheduling.k8s.io/podgroups/g" in one.message
    assert two.result == "fail" and "is not on pod-1's Node" in two.message, two.message


def test_dry_run_lists_the_dra_objects_confined_to_the_run() -> None:
    runner = ConformanceRunner(None, OURS, run_id="abc123")
    rule = next(r for r in DRA_RULES if r.id == "dra/podgroup-claim-node-restricted")
    ((_rule, objs),) = runner.plan([rule])
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for o in objs:
        by_kind.setdefault(o["kind"], []).append(o)
    (dc,) = by_kind["DeviceClass"]
    (rs,) = by_kind["ResourceSlice"]
    assert dc["metadata"]["name"] == "wbc-abc123-0-fabric"
    assert rs["metadata"]["name"] == "wbc-abc123-0-fabric-r1"
    for o in (dc, rs, *by_kind["ResourceClaim"]):
        assert o["metadata"]["labels"] == {RUN_LABEL: "abc123"}
    # no real Node reaches the devices: the run's label is required too
    (term,) = rs["spec"]["nodeSelector"]["nodeSelectorTerms"]
    assert {"key": RUN_LABEL, "operator": "In", "values": ["abc123"]} in term["matchExpressions"]
    assert {"key": SCENARIO_LABEL, "operator": "In", "values": ["wbc-abc123-0"]} in term[
        "matchExpressions"
    ]
    pods = by_kind["Pod"]
    assert pods and all(
        p["spec"]["resourceClaims"] == [{"name": "fabric", "resourceClaimName": "fabric"}]
        for p in pods
        if p["metadata"]["name"].startswith("ring-")
    )


async def test_cleanup_removes_the_dra_rules_leftovers() -> None:
    from workloadbuilder.conformance import remove_leftovers

    memory = MemoryCluster()
    try:
        runner = ConformanceRunner(memory, OURS, run_id="r9")
        ((_rule, objs),) = runner.plan([DRA_RULES[0]])
        for o in objs:
            if o["kind"] in ("DeviceClass", "ResourceSlice"):
                await memory.create(o)
        assert sorted(await remove_leftovers(memory, "r9")) == [
            "DeviceClass/wbc-r9-0-dev",
            "ResourceSlice/wbc-r9-0-a-devs",
            "ResourceSlice/wbc-r9-0-b-devs",
        ]
    finally:
        await memory.close()


async def test_the_suite_fails_when_nobody_schedules(stepped: Stepped) -> None:
    """Pods for a scheduler that does not run: every rule fails (none passes vacuously)."""
    quick = [dataclasses.replace(r, timeout=0.3) for r in RULES]
    results = await stepped.runner("nobody-runs-this").run(quick)
    assert [r.result for r in results] == ["fail"] * len(RULES)
    waits = [r for r in results if "witness" in r.message]
    assert {r.rule for r in waits} >= {"queueing/preenqueue-quorum", "composite/tree-quorum"}


async def test_the_greedy_composite_search_fails_only_the_extension_rule(tmp_path: Path) -> None:
    """Our scheduler configured with upstream's greedy composite search fails the extension
    rule, and only it among the composite rules: the rule checks what it says."""
    config = tmp_path / "greedy.yaml"
    config.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\n"
        "kind: KubeSchedulerConfiguration\n"
        "profiles:\n"
        f"- schedulerName: {OURS}\n"
        "  pluginConfig:\n"
        "  - name: TopologyPlacementGenerator\n"
        "    args: {compositeSearch: {mode: greedy}}\n"
    )
    loaded = load_config(config)
    cluster = MemoryCluster()
    s = Scheduler(cluster, loaded.scheduler, framework=loaded.framework)
    await s.start()
    try:
        runner = Stepped(cluster, s).runner()
        rules = [dataclasses.replace(r, timeout=1.0) for r in select_rules(RULES, ["composite"])]
        got = {r.rule: r.result for r in await runner.run(rules)}
    finally:
        await s.stop()
        await cluster.close()
    assert got.pop("composite/bounded-search") == "fail"
    assert set(got.values()) == {"pass"}


async def test_pods_tolerate_only_the_run_taint_and_nodes_carry_it(stepped: Stepped) -> None:
    runner = stepped.runner(run_id="abc123")
    ((_rule, objs),) = runner.plan([r for r in RULES if r.id == "gang/fits-binds-all"])
    nodes = [o for o in objs if o["kind"] == "Node"]
    pods = [o for o in objs if o["kind"] == "Pod"]
    assert len(nodes) == 3 and len(pods) == 3  # a, b and the witness Node
    for n in nodes:
        assert {"key": TAINT_KEY, "value": "abc123", "effect": "NoSchedule"} in n["spec"]["taints"]
        assert n["metadata"]["labels"][SCENARIO_LABEL] == "wbc-abc123-0"
    for p in pods:
        assert p["metadata"]["namespace"] == "wbc-abc123-0"
        assert p["spec"]["schedulerName"] == OURS
        # the run's Nodes, and of them only this rule's (never a Node of the rule before)
        assert p["spec"]["nodeSelector"] == {RUN_LABEL: "abc123", SCENARIO_LABEL: "wbc-abc123-0"}
        assert p["spec"]["tolerations"] == [
            {"key": TAINT_KEY, "operator": "Equal", "value": "abc123", "effect": "NoSchedule"}
        ]


async def test_real_workloads_are_untouched(stepped: Stepped) -> None:
    """A real Node (no taint) with room is never used by the suite's pods, and a real pod
    outside the suite's namespace survives the run."""
    await stepped.cluster.create(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "real"},
            "status": {
                "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"},
                "capacity": {"cpu": "64", "memory": "256Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
    )
    rule = next(r for r in RULES if r.id == "gang/all-or-nothing")
    result = await stepped.runner().run_one(rule)
    assert result.result == "pass", result.message  # the 4th pod did not go to "real"
    assert [
        n.get("metadata", {}).get("name") for n in (await stepped.cluster.list("Node")).items
    ] == ["real"]


def test_extensions_are_skipped_for_upstream() -> None:
    runner = ConformanceRunner(MemoryCluster(), UPSTREAM_SCHEDULER)
    ext = next(r for r in RULES if r.extension)
    assert "greedily" in (runner.skip_reason(ext) or "")
    assert all(runner.skip_reason(r) is None for r in RULES if not r.extension)
    assert ConformanceRunner(MemoryCluster(), OURS).skip_reason(ext) is None


def test_reports() -> None:
    results = [
        RuleResult("gang/a", "gang", "pass", 1.25, ""),
        RuleResult("gang/b", "gang", "fail", 2.0, "PodGroup g: 1 pods bound, want 0"),
        RuleResult("composite/c", "composite", "skip", 0.0, "extension", True),
    ]
    text = render_text(results, "x")
    assert "gang/b" in text and "FAIL" in text and "1 pods bound" in text
    assert "composite/c (extension)" in text
    # every feature of the v1.37 scheduler profile has rules now (dra was the last)
    assert "1 passed, 1 failed, 1 skipped" in text and "planned" not in text
    doc = json.loads(render_json(results, "x"))
    assert doc["summary"] == {"pass": 1, "fail": 1, "skip": 1}
    assert doc["profile"] == "scheduler" and doc["planned"] == []
    assert doc["results"][1]["message"] == "PodGroup g: 1 pods bound, want 0"
    suite = ET.fromstring(render_junit(results, "x").split("?>", 1)[1])
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("3", "1", "1")
    assert suite.find("testcase[@name='gang/b']/failure") is not None


def test_cli_dry_run_and_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["conformance", "run", "--scheduler-name", "s", "--dry-run", "--features", "gang"])
        == 0
    )
    out = capsys.readouterr().out
    assert "# rule gang/fits-binds-all" in out and "# rule topology/" not in out
    # the settle witnesses are listed too
    assert "name: wbc-witness-1-0" in out
    assert main(["conformance", "run", "--scheduler-name", "s", "--features", "magic"]) == 2
    assert "unknown conformance feature" in capsys.readouterr().err


def test_cli_runs_reports_and_exits_1_on_failure(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Against a cluster where no scheduler runs: progress on stderr, the table, JUnit, 1."""
    import workloadbuilder.cli._conformance as cli

    monkeypatch.setattr(cli, "kube_cluster", lambda args: MemoryCluster())
    junit = tmp_path / "r.xml"
    rc = main(
        [
            "conformance",
            "run",
            "--scheduler-name",
            "nobody",
            "--features",
            "gang",
            "--timeout",
            "0.3",
            "--junit",
            str(junit),
            "-o",
            "json",
        ]
    )
    captured = capsys.readouterr()
    assert rc == 1
    assert (
        "RUN   gang/fits-binds-all" in captured.err and "FAIL  gang/all-or-nothing" in captured.err
    )
    doc = json.loads(captured.out)
    assert doc["summary"]["fail"] == 2
    assert ET.parse(junit).getroot().get("failures") == "2"


def test_pytest_plugin_adds_nothing_unless_asked_and_needs_a_scheduler_name(
    tmp_path: Path,
) -> None:
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
        str(tmp_path),
    ]
    quiet = subprocess.run(base, capture_output=True, text=True, cwd=tmp_path, check=False)
    assert quiet.returncode == 5  # nothing collected: the plugin adds no item by itself
    bad = subprocess.run(
        [*base, "--wb-conformance"], capture_output=True, text=True, cwd=tmp_path, check=False
    )
    assert bad.returncode == 4 and "--wb-scheduler-name" in bad.stderr
