"""A restarted scheduler and a gang whose binding was interrupted, on the real v1.37.2 API
server.

The state a SIGKILL in the middle of a gang's binding leaves is made directly: some members
are bound through the ``binding`` subresource (as the killed process did), the others are
pending, and the PodGroup has no condition yet (the kill came before the status write) or
already ``True`` (it came after). Then ``workloadbuilder scheduler`` starts:

* the rest fits: it binds the remaining members (the bound ones count toward ``minCount``,
  as upstream counts assigned pods) and writes ``True``;
* the rest cannot fit any more (the freed room was taken meanwhile): it says so, with
  ``PodGroupInitiallyScheduled=False`` (reason ``Unschedulable``) and ``PodScheduled=False``
  on the pending members; the bound ones are left alone;
* same, but ``True`` was already written: the condition stays ``True`` (it never regresses)
  and the pending members get ``PodScheduled=False`` with the group's explanation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _chaos import (
    PG_PATH,
    PODS_PATH,
    Api,
    Gang,
    SchedulerProcess,
    cleanup,
    create_nodes,
    gang_pod,
    scheduler_argv,
    wait_until,
)

from workloadbuilder.testing import ControlPlane
from workloadbuilder.testing.builders import make_pod_group

pytestmark = [pytest.mark.chaos, pytest.mark.controlplane]


async def _bind(api: Api, ns: str, pod: str, node: str) -> None:
    await api.call(
        "POST",
        f"{PODS_PATH.format(ns=ns)}/{pod}/binding",
        {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod, "namespace": ns},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        },
    )


def _cond(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == type_:
            return dict(c)
    return {}


async def _setup(
    api: Api, ns: str, scheduler: str, gang: Gang, bound: dict[str, str], *, initially: bool
) -> None:
    await api.call(
        "POST", PG_PATH.format(ns=ns), make_pod_group(gang.name, ns).gang(gang.size).obj()
    )
    for p in gang.pods:
        await api.call("POST", PODS_PATH.format(ns=ns), gang_pod(gang, p, ns, scheduler, ns))
    for pod, node in bound.items():
        await _bind(api, ns, pod, node)
    if initially:
        cond = {
            "type": "PodGroupInitiallyScheduled",
            "status": "True",
            "reason": "Scheduled",
            "message": "",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
        await api.call(
            "PATCH",
            f"{PG_PATH.format(ns=ns)}/{gang.name}/status",
            {"status": {"conditions": [cond]}},
            content_type="application/merge-patch+json",
        )


async def _filler(api: Api, ns: str, node: str, cpu: int) -> None:
    """A pod of another scheduler already on ``node`` (the room taken meanwhile)."""
    pod = gang_pod(Gang("filler", 1, cpu=cpu), f"filler-{node}", ns, "nobody", ns)
    del pod["spec"]["schedulingGroup"]
    pod["spec"]["nodeName"] = node
    await api.call("POST", PODS_PATH.format(ns=ns), pod)


@pytest.mark.parametrize("initially", [False, True], ids=["no-condition-yet", "already-true"])
async def test_restart_completes_an_interrupted_gang(
    control_plane: ControlPlane, tmp_path: Path, initially: bool
) -> None:
    ns = control_plane.create_namespace("interrupted-")
    scheduler = f"chaos-{ns}"
    gang = Gang("g", 4, cpu=8)
    async with Api(control_plane.kubeconfig) as api:
        nodes = await create_nodes(api, ns, 2)
        await _setup(api, ns, scheduler, gang, {gang.pods[0]: nodes[0]}, initially=initially)
        proc = SchedulerProcess(
            scheduler_argv(control_plane.kubeconfig, scheduler), tmp_path / "s.log"
        )
        try:

            async def done() -> bool:
                assert proc.alive(), proc.log_path.read_text()[-3000:]
                pods = (await api.call("GET", PODS_PATH.format(ns=ns)))["items"]
                pg = await api.call("GET", f"{PG_PATH.format(ns=ns)}/g")
                return (
                    all(p["spec"].get("nodeName") in nodes for p in pods)
                    and _cond(pg, "PodGroupInitiallyScheduled").get("status") == "True"
                )

            await wait_until(done, "the gang completed", 90)
            pods = (await api.call("GET", PODS_PATH.format(ns=ns)))["items"]
            first = next(p for p in pods if p["metadata"]["name"] == gang.pods[0])
            assert first["spec"]["nodeName"] == nodes[0]  # the bound member is kept
        finally:
            code = proc.terminate()
            await cleanup(api, ns, nodes)
    assert code == 0


@pytest.mark.parametrize("initially", [False, True], ids=["no-condition-yet", "already-true"])
async def test_restart_says_so_when_the_rest_no_longer_fits(
    control_plane: ControlPlane, tmp_path: Path, initially: bool
) -> None:
    ns = control_plane.create_namespace("interrupted-")
    scheduler = f"chaos-{ns}"
    gang = Gang("g", 4, cpu=12)
    async with Api(control_plane.kubeconfig) as api:
        nodes = await create_nodes(api, ns, 2)
        # two members bound (one per node), then the room left is taken: 32 - 12 - 12 = 8 < 12
        bound = {gang.pods[0]: nodes[0], gang.pods[1]: nodes[1]}
        await _setup(api, ns, scheduler, gang, bound, initially=initially)
        for n in nodes:
            await _filler(api, ns, n, 12)
        proc = SchedulerProcess(
            scheduler_argv(control_plane.kubeconfig, scheduler), tmp_path / "s.log"
        )
        pending = gang.pods[2:]
        try:

            async def told() -> bool:
                assert proc.alive(), proc.log_path.read_text()[-3000:]
                pods = {
                    p["metadata"]["name"]: p
                    for p in (await api.call("GET", PODS_PATH.format(ns=ns)))["items"]
                }
                pg = await api.call("GET", f"{PG_PATH.format(ns=ns)}/g")
                want = "True" if initially else "False"
                return _cond(pg, "PodGroupInitiallyScheduled").get("status") == want and all(
                    _cond(pods[p], "PodScheduled").get("status") == "False" for p in pending
                )

            await wait_until(told, "the group's and the pods' status", 90)
            pods = {
                p["metadata"]["name"]: p
                for p in (await api.call("GET", PODS_PATH.format(ns=ns)))["items"]
            }
            pg = await api.call("GET", f"{PG_PATH.format(ns=ns)}/g")
        finally:
            code = proc.terminate()
            await cleanup(api, ns, nodes)
    assert code == 0
    cond = _cond(pg, "PodGroupInitiallyScheduled")
    for p in pending:
        assert not pods[p]["spec"].get("nodeName")
        ps = _cond(pods[p], "PodScheduled")
        assert ps["reason"] == "Unschedulable"
        assert 'pod group "g" is unschedulable: minCount 4' in ps["message"], ps
        assert "(2 already scheduled)" in ps["message"], ps
    for p, node in bound.items():
        assert pods[p]["spec"]["nodeName"] == node
    if initially:
        assert cond["reason"] == "Scheduled"  # never regresses
    else:
        assert cond["reason"] == "Unschedulable", cond
        assert "minCount 4: at most 2 pods fit (2 already scheduled)" in cond["message"], cond
