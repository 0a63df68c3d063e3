"""A silently stalled pod watch under load, on the real v1.37.2 API server.

The scheduler runs in this process on a ``KubeCluster`` that talks to the API server through
the fault proxy; gangs arrive and are scheduled while the proxy makes the scheduler's pod
watch stall (the TCP connection stays open, nothing more is relayed: no event, no bookmark).
The client notices the silence after ``watch_stall_factor`` x ``watch_bookmark_interval``,
drops the watch, and the pod informer resumes from its last resourceVersion (no relist):
the events of the stall are replayed, nothing is missed, and every gang ends bound
all-or-nothing.

CI: 240 pods, 2 stalls, the bookmark interval scaled down to 1 s (the server's bookmarks do
not come that often, so idle watches are reconnected every few seconds too: harmless, they
resume). ``make chaos`` (CHAOS_SCALE=full): 2,000 pods on 300 nodes, 2 stalls, the real
interval (60 s: a stall is noticed within 2 minutes); there no other watch may be taken for
stalled (the healthy idle ones get their bookmarks in time).
"""

from __future__ import annotations

import asyncio
import random
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from _chaos import (
    Api,
    Gang,
    Observer,
    analyse,
    cleanup,
    create_gangs,
    create_nodes,
    gang_sizes,
    scale,
    violations,
    wait_until,
    write_report,
)
from kubernetes_asyncio.client import Configuration

from workloadbuilder.cluster import KubeCluster
from workloadbuilder.scheduler import Scheduler, SchedulerConfig
from workloadbuilder.testing import ControlPlane

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cluster"))
from _faultproxy import FaultProxy

pytestmark = [pytest.mark.chaos, pytest.mark.controlplane]

SIZES: dict[str, dict[str, Any]] = {
    "ci": {"pods": 240, "nodes": 16, "arrival_s": 12.0, "stalls": 2, "interval": 1.0},
    "full": {"pods": 2000, "nodes": 300, "arrival_s": 150.0, "stalls": 2, "interval": 60.0},
}
FACTOR = 2.0
POD_WATCH = "/api/v1/pods"  # the scheduler watches every pod
FINISH_TIMEOUT = 600.0


async def _arrive(api: Api, ns: str, scheduler: str, gangs: list[Gang], seconds: float) -> None:
    pause = seconds / max(1, len(gangs))
    for g in gangs:
        t = time.monotonic()
        await create_gangs(api, ns, scheduler, ns, [g])
        await asyncio.sleep(max(0.0, pause - (time.monotonic() - t)))


def _pod_requests(proxy: FaultProxy, *, watch: bool, after: float = 0.0) -> list[float]:
    return [
        t
        for t, method, path, query in proxy.log
        if method == "GET"
        and path == POD_WATCH
        and (query.get("watch") in ("1", "true")) == watch
        and t > after
    ]


async def test_a_stalled_pod_watch_under_load_is_resumed_and_misses_nothing(
    control_plane: ControlPlane,
) -> None:
    size = SIZES[scale()]
    interval = float(size["interval"])
    rng = random.Random(16)
    ns = control_plane.create_namespace("stall-")
    name = f"stall-{ns}"
    gangs = [Gang(f"g{i:04d}", s) for i, s in enumerate(gang_sizes(size["pods"], rng))]
    total = sum(g.size for g in gangs)
    proxy = FaultProxy.in_front_of(control_plane.server, control_plane.kubeconfig, seed=16)
    url = await proxy.start()
    cluster = KubeCluster(
        Configuration(host=url), watch_bookmark_interval=interval, watch_stall_factor=FACTOR
    )
    sched = Scheduler(cluster, SchedulerConfig(scheduler_name=name))
    stalls: list[dict[str, Any]] = []
    async with Api(control_plane.kubeconfig) as api:
        nodes = await create_nodes(api, ns, size["nodes"])
        obs = Observer(api, ns)
        obs.start()
        runner = asyncio.create_task(sched.run())
        feeder: asyncio.Task[None] | None = None
        t_start = time.monotonic()
        try:
            await wait_until(lambda: sched.started or runner.done(), "the scheduler started", 60)
            feeder = asyncio.create_task(_arrive(api, ns, name, gangs, size["arrival_s"]))
            for k in range(size["stalls"]):
                threshold = total * (k + 1) // (size["stalls"] + 2)
                await wait_until(
                    lambda t=threshold: len(obs.node_of) >= t or runner.done(),
                    f"{threshold} pods bound",
                    300,
                )
                assert not runner.done(), runner
                t_stall = time.monotonic()
                assert proxy.stall_watches(POD_WATCH) == 1
                bound_at_stall = len(obs.node_of)
                await wait_until(
                    lambda t=t_stall: bool(_pod_requests(proxy, watch=True, after=t)),
                    "the stalled pod watch replaced",
                    FACTOR * interval + interval + 60,
                )
                t_new = _pod_requests(proxy, watch=True, after=t_stall)[0]
                stalls.append(
                    {
                        "at_s": round(t_stall - t_start, 2),
                        "bound_at_stall": bound_at_stall,
                        "noticed_after_s": round(t_new - t_stall, 2),
                        "bound_when_noticed": len(obs.node_of),
                    }
                )
            await asyncio.wait_for(feeder, FINISH_TIMEOUT)
            await wait_until(
                lambda: len(obs.node_of) >= total or runner.done(),
                "every pod bound",
                FINISH_TIMEOUT,
            )
            assert not runner.done(), runner
            t_end = time.monotonic()
            report = await analyse(api, ns, obs, gangs, nodes)
        finally:
            if feeder is not None:
                feeder.cancel()
            await sched.stop()
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
            await cluster.close()
            await proxy.stop()
            await obs.stop()
            await cleanup(api, ns, nodes)
    pod_lists = _pod_requests(proxy, watch=False)
    report.update(
        seconds=round(t_end - t_start, 1),
        bookmark_interval_s=interval,
        stall_bound_s=FACTOR * interval,
        stalls=stalls,
        watch_stalls=dict(cluster.watch_stalls),
        pod_lists=len(pod_lists),
        pod_watches=len(_pod_requests(proxy, watch=True)),
    )
    write_report(f"watch-stall-{scale()}", report)
    assert violations(report) == {}
    assert report["gangs_bound"] == len(gangs)
    # every stall was noticed within the bound (counted from the stall; the last byte came
    # before it) plus the time to open the next watch under load
    for s in stalls:
        assert s["noticed_after_s"] <= FACTOR * interval + 5.0, s
    # resumed from the resourceVersion every time: the pods were listed once, at the start
    assert len(pod_lists) == 1, pod_lists
    assert cluster.watch_stalls.get(POD_WATCH, 0) >= size["stalls"]
    if scale() == "full":  # the real cadence: no healthy watch was taken for stalled
        assert cluster.watch_stalls == {POD_WATCH: size["stalls"]}, cluster.watch_stalls
