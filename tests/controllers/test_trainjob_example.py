"""The TrainJob operator example: a <= 30-line integration, pods linked, cleanup."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.controllers.conftest import names, run_until_quiet
from workloadbuilder.api import PodGroup
from workloadbuilder.cluster import MemoryCluster
from workloadbuilder.kinds import GroupVersionKind
from workloadbuilder.runtime import Reconciler

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "trainjob"


def _load(name: str) -> ModuleType:
    sys.path.insert(0, str(EXAMPLE))
    try:
        spec = importlib.util.spec_from_file_location(name, EXAMPLE / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(EXAMPLE))


def test_the_integration_fits_in_30_lines() -> None:
    assert len((EXAMPLE / "trainjob_integration.py").read_text().splitlines()) <= 30


async def test_trainjob_gang_pods_and_cleanup(capsys: pytest.CaptureFixture[str]) -> None:
    operator = _load("trainjob_operator")
    assert await operator.main([]) == 0
    out = capsys.readouterr().out
    assert out.count("-> llm-trainer-") == 4  # master + 3 workers in one group

    cluster = MemoryCluster()
    trainjob = await cluster.create(operator.EXAMPLE)
    rec = Reconciler(cluster, operator.TrainJobIntegration())
    await rec.start()
    try:
        await run_until_quiet(rec)
        (pg_name,) = await names(cluster, "PodGroup")
        pg = await cluster.get("PodGroup", pg_name, "default")
        assert isinstance(pg, PodGroup) and pg.spec.scheduling_policy.gang is not None
        assert pg.spec.scheduling_policy.gang.min_count == 4
        await operator.reconcile_pods(cluster, trainjob)
        pods = (await cluster.list("Pod", "default")).items
        assert {p["spec"]["schedulingGroup"]["podGroupName"] for p in pods} == {pg_name}
        # the plan maps the operator's pods back to their group (what the webhook uses)
        assert {rec.pod_group_for(p) for p in pods if isinstance(p, dict)} == {pg_name}
        await cluster.delete("TrainJob", "llm", "default")
        await run_until_quiet(rec)
        assert await names(cluster, "Workload") == []
        assert await names(cluster, "Pod") == []
    finally:
        await rec.stop()


async def test_trainjob_gets_a_gang_scheduled_condition() -> None:
    from workloadbuilder.runtime import CONDITION_GANG_SCHEDULED

    operator = _load("trainjob_operator")
    cluster = MemoryCluster()
    await cluster.create(operator.EXAMPLE)
    rec = Reconciler(cluster, operator.TrainJobIntegration())
    await rec.start()
    try:
        await run_until_quiet(rec)

        async def condition() -> dict[str, str]:
            tj = await cluster.get("TrainJob", "llm", "default")
            assert isinstance(tj, dict)
            (cond,) = [
                c for c in tj["status"]["conditions"] if c["type"] == CONDITION_GANG_SCHEDULED
            ]
            return cond

        assert (await condition())["status"] == "Unknown"
        (pg_name,) = await names(cluster, "PodGroup")
        for status, reason, message in (
            ("False", "Unschedulable", "0/2 nodes are available: 2 Insufficient cpu."),
            ("True", "Scheduled", "all 4 pods bound"),
        ):
            cond = {
                "type": "PodGroupInitiallyScheduled",
                "status": status,
                "reason": reason,
                "message": message,
                "lastTransitionTime": "2026-12-01T00:00:00Z",
            }
            await cluster.patch(
                "PodGroup",
                pg_name,
                {"status": {"conditions": [cond]}},
                "default",
                subresource="status",
            )
            await run_until_quiet(rec)
            got = await condition()
            assert got["status"] == status and got["reason"] == reason
            if status == "False":
                assert "2 Insufficient cpu" in got["message"]
        rv = cluster.resource_version
        await rec.reconcile("default/llm")
        assert cluster.resource_version == rv  # unchanged: no write
    finally:
        await rec.stop()


def test_unsupported_conditions_path_is_refused() -> None:
    class Odd:
        gvk = GroupVersionKind(group="example.com", versions=("v1",), kind="TrainJob")
        conditions_path = "status.health"

        def plan(self, obj: Any, /, **options: Any) -> Any:
            raise NotImplementedError

    with pytest.raises(ValueError, match=r"only 'status\.conditions'"):
        Reconciler(MemoryCluster(), Odd())
