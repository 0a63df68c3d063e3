"""The harness checklist: the upstream kube-scheduler gang-schedules a PodGroup on fake nodes."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from workloadbuilder.testing import ControlPlane, wait_for
from workloadbuilder.testing.builders import make_node, make_pod, make_pod_group

pytestmark = [pytest.mark.controlplane]


@pytest.fixture(scope="module")
def scheduler_plane(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """A private plane with the upstream kube-scheduler (no kube-controller-manager)."""
    with ControlPlane(bin_dir=control_plane.bin_dir, with_scheduler=True) as plane:
        yield plane


def _node(name: str) -> dict[str, Any]:
    resources = {"pods": "110", "cpu": "4", "memory": "32Gi"}
    return make_node(name).label("kubernetes.io/hostname", name).resources(resources).ready().obj()


def _pod(name: str, group: str) -> dict[str, Any]:
    return make_pod(name).pod_group(group).container_name("c").request("cpu", "100m").obj()


def test_gang_waits_for_min_count_then_binds_all(scheduler_plane: ControlPlane) -> None:
    ns = scheduler_plane.create_namespace("gang-")
    with scheduler_plane.client() as api:
        for name in ("node-a", "node-b"):
            assert api.create("/api/v1/nodes", _node(name)).status == 201
        pg = make_pod_group("gang").gang(3).obj()
        pg_path = f"/apis/scheduling.k8s.io/v1beta1/namespaces/{ns}/podgroups"
        assert api.create(pg_path, pg).status == 201
        pods = f"/api/v1/namespaces/{ns}/pods"
        for i in range(2):
            assert api.create(pods, _pod(f"p{i}", "gang")).status == 201

        # A basic PodGroup's pod is scheduled; it proves the scheduler has seen the first two
        # pods' events, after which the gang's two pods must still be unbound.
        basic = make_pod_group("solo").basic().obj()
        assert api.create(pg_path, basic).status == 201
        assert api.create(pods, _pod("solo-0", "solo")).status == 201

        def bound(name: str) -> str | None:
            node = api.get(f"{pods}/{name}").body.get("spec", {}).get("nodeName")
            return node if isinstance(node, str) and node else None

        wait_for(lambda: bound("solo-0"), what="the basic-policy pod to bind")
        assert bound("p0") is None and bound("p1") is None

        assert api.create(pods, _pod("p2", "gang")).status == 201
        for name in ("p0", "p1", "p2"):
            wait_for(partial(bound, name), what=f"gang pod {name} to bind")

        def scheduled_condition() -> dict[str, Any] | None:
            status = api.get(f"{pg_path}/gang").body.get("status", {})
            for cond in status.get("conditions", []):
                if cond["type"] == "PodGroupInitiallyScheduled" and cond["status"] == "True":
                    return dict(cond)
            return None

        cond = wait_for(scheduled_condition, what="PodGroupInitiallyScheduled=True")
        assert cond["reason"] == "Scheduled"


def test_no_watch_progress_errors_with_etcd_3_7(scheduler_plane: ControlPlane) -> None:
    text = (scheduler_plane.log_dir / "kube-apiserver.log").read_text(errors="replace")
    assert "RequestWatchProgress" not in text
    etcd = (scheduler_plane.log_dir / "etcd.log").read_text(errors="replace")
    assert '"level":"fatal"' not in etcd
