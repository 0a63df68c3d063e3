"""docs/operator-guide.md section 7: the hand-rolled coscheduling operator (before) works,
``migrate`` turns its objects into the gang the SDK's integration plans (after), and the
guide's line counts are the files'."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from workloadbuilder.cluster import MemoryCluster
from workloadbuilder.migrate import migrate

ROOT = Path(__file__).resolve().parents[2]
BEFORE = ROOT / "examples" / "migrate" / "operator_before.py"
AFTER = ROOT / "examples" / "trainjob" / "trainjob_integration.py"
GUIDE = ROOT / "docs" / "operator-guide.md"


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"guide_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _trainjob(workers: int) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "TrainJob",
        "metadata": {"name": "llm", "namespace": "ml", "uid": "tj-1"},
        "spec": {
            "workers": workers,
            "priorityClassName": "high",
            "template": {"spec": {"containers": [{"name": "c", "image": "pause"}]}},
        },
    }


async def test_the_before_operator_creates_and_resizes_its_coscheduling_group() -> None:
    before = _load(BEFORE)
    cluster = MemoryCluster()
    await cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    high = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "value": 100}
    await cluster.create({**high, "metadata": {"name": "high"}})
    await before.reconcile(cluster, _trainjob(3))
    await before.reconcile(cluster, _trainjob(3))  # idempotent
    group = await cluster.get(before.COSCHEDULING_PODGROUP, "llm", "ml")
    assert isinstance(group, dict) and group["spec"]["minMember"] == 4
    await before.reconcile(cluster, _trainjob(5))
    group = await cluster.get(before.COSCHEDULING_PODGROUP, "llm", "ml")
    assert isinstance(group, dict) and group["spec"]["minMember"] == 6
    assert len((await cluster.list("Pod", "ml")).items) == 6


def test_migrating_its_objects_gives_the_gang_the_integration_plans() -> None:
    before, after = _load(BEFORE), _load(AFTER)
    trainjob = _trainjob(3)
    result = migrate(before.desired_objects(trainjob))
    plan = after.TrainJobIntegration().plan(trainjob)
    (planned,) = plan.pod_groups
    (migrated,) = [o for o in result.objects if o["kind"] == "PodGroup"]
    assert migrated["spec"]["schedulingPolicy"] == {"gang": {"minCount": 4}}
    assert planned.spec.scheduling_policy.gang is not None
    assert planned.spec.scheduling_policy.gang.min_count == 4
    assert migrated["spec"]["priorityClassName"] == planned.spec.priority_class_name == "high"
    owner = migrated["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"]) == ("TrainJob", "tj-1")
    pods = [o for o in result.objects if o["kind"] == "Pod"]
    assert len(pods) == 4
    assert all(p["spec"]["schedulingGroup"] == {"podGroupName": "llm"} for p in pods)
    lost = {r.path for r in result.report if r.outcome == "not-expressible"}
    assert lost == {"spec.scheduleTimeoutSeconds"}


def test_the_guide_states_the_files_line_counts() -> None:
    text = GUIDE.read_text()
    before = len(BEFORE.read_text().splitlines())
    after = len(AFTER.read_text().splitlines())
    assert f"`examples/migrate/operator_before.py` ({before} lines)" in text
    assert f"`examples/trainjob/trainjob_integration.py` ({after} lines)" in text
