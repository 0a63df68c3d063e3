"""The scheduler and the integrations controller (both subprocesses: ``workloadbuilder
scheduler`` and ``workloadbuilder integrations run --kinds lws``) while the API server
misbehaves, on a control plane of their own (restarting the session's would break other
tests):

* **restarts**: kube-apiserver is SIGKILLed and started again (etcd keeps its data) while
  gangs and LeaderWorkerSets arrive and are resized; every watch is cut, resourceVersions
  older than the new server's watch cache are answered 410 Gone (a relist);
* **faults under load**: both components talk to the server through the fault proxy
  (``tests/cluster/_faultproxy.py``) at 5 % of requests answered 429, 500/503, reset or
  stalled, and watches cut after a random number of events.

The workload: gangs of PodGroups + pods created directly, and LeaderWorkerSets (gang per
replica) whose Workload and PodGroups the integrations controller creates and whose pods the
test creates as the LWS controller and the webhook would (named and linked from the plan).
Mid-run one LWS grows by a replica and one shrinks. The end state must equal the fault-free
one: every gang bound all-or-nothing, nothing lost or bound twice, no overcommit, no
condition regression, and the Workloads and PodGroups exactly the plan of each LWS as it is
now (no duplicate, no orphan, one controller owner each).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from _chaos import (
    CLI,
    PODS_PATH,
    POOL_KEY,
    Api,
    Gang,
    Observer,
    SchedulerProcess,
    analyse,
    create_gangs,
    create_nodes,
    gang_sizes,
    scale,
    scheduler_argv,
    violations,
    wait_until,
    write_report,
)
from controlplane._crds import LWS_CRD

from workloadbuilder.kinds import plan_for
from workloadbuilder.kinds.lws import lws_pods
from workloadbuilder.testing import ControlPlane, make_lws, make_pod_template, make_scheduling

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cluster"))
from _faultproxy import FaultPlan, FaultProxy

pytestmark = [pytest.mark.chaos, pytest.mark.controlplane]

LWS_PATH = "/apis/leaderworkerset.x-k8s.io/v1/namespaces/{ns}/leaderworkersets"
FINISH_TIMEOUT = 180.0
SIZES = {
    "ci": {"pods": 240, "nodes": 16, "lws": 4, "restarts": 2, "arrival_s": 12},
    "full": {"pods": 2000, "nodes": 200, "lws": 20, "restarts": 5, "arrival_s": 90},
}


@pytest.fixture(scope="module")
def plane(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlane]:
    """A control plane of this module's own, with the LeaderWorkerSet CRD."""
    cp = ControlPlane(
        tmp_path_factory.mktemp("faults-plane"),
        bin_dir=request.config.getoption("--controlplane-bin-dir"),
    )
    cp.start()
    try:
        with cp.client() as api:
            r = api.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", LWS_CRD)
            assert r.ok, r.message
            name = LWS_CRD["metadata"]["name"]
            deadline = time.monotonic() + 60
            while True:
                got = api.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
                conds = {c["type"]: c["status"] for c in got.body["status"].get("conditions") or []}
                if conds.get("Established") == "True":
                    break
                assert time.monotonic() < deadline, conds
                time.sleep(0.2)
        yield cp
    finally:
        cp.stop()


class Integrations(SchedulerProcess):
    """``workloadbuilder integrations run --kinds lws`` as a subprocess (the same process
    handling as the scheduler's: metrics port, readiness, kill, terminate)."""

    def __init__(self, kubeconfig: Path, log: Path) -> None:
        argv = [
            CLI,
            "integrations",
            "run",
            f"--kubeconfig={kubeconfig}",
            "--kinds=lws",
            "--bind-address=127.0.0.1",
        ]
        super().__init__(argv, log)


def _lws(name: str, ns: str, scheduler: str, replicas: int, size: int) -> dict[str, Any]:
    template = (
        make_pod_template()
        .scheduler_name(scheduler)
        .node_selector(POOL_KEY, ns)
        .toleration(POOL_KEY, ns, effect="NoSchedule", operator="Equal")
        .request("cpu", "1")
        .request("memory", "64Mi")
    )
    return (
        make_lws(name, ns)
        .replicas(replicas)
        .size(size)
        .worker_template(template)
        .scheduling(make_scheduling().gang())
        .obj()
    )


def _linked_pods(lws: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """PodGroup name -> its pods, linked as the webhook would link them."""
    plan = plan_for(lws)
    out: dict[str, list[dict[str, Any]]] = {}
    for pod in lws_pods(lws):
        group = plan.pod_group_for(pod)
        assert group is not None
        pod["metadata"]["namespace"] = lws["metadata"]["namespace"]
        pod["spec"]["schedulingGroup"] = {"podGroupName": group}
        out.setdefault(group, []).append(pod)
    return out


async def _create_lws(api: Api, ns: str, lws: dict[str, Any]) -> list[Gang]:
    await api.call("POST", LWS_PATH.format(ns=ns), lws, ok=(201, 409))
    gangs = []
    for group, pods in _linked_pods(lws).items():
        for pod in pods:
            await api.call("POST", PODS_PATH.format(ns=ns), pod, ok=(201, 409))
        gangs.append(Gang(group, len(pods), members=tuple(p["metadata"]["name"] for p in pods)))
    return gangs


async def _live(api: Api, path: str) -> list[dict[str, Any]]:
    items = (await api.call("GET", path)).get("items", [])
    return [o for o in items if not o["metadata"].get("deletionTimestamp")]


async def _integration_state(api: Api, ns: str) -> dict[str, Any]:
    """Planned vs live Workloads and PodGroups owned by the LWSs (names, minCount, owners)."""
    lwss = (await api.call("GET", LWS_PATH.format(ns=ns)))["items"]
    want_wl: set[str] = set()
    want_pg: dict[str, int] = {}
    for lws in lwss:
        for o in plan_for(lws).objects():
            if o.kind == "Workload":
                want_wl.add(o.metadata.name or "")
            elif o.kind == "PodGroup":
                gang = o.spec.scheduling_policy.gang  # type: ignore[union-attr]
                want_pg[o.metadata.name or ""] = gang.min_count if gang else 0
    base = "/apis/scheduling.k8s.io/v1beta1/namespaces/{ns}/"
    wls = await _live(api, base.format(ns=ns) + "workloads")
    pgs = [
        g
        for g in await _live(api, base.format(ns=ns) + "podgroups")
        if g["metadata"].get("ownerReferences")  # the test's own gangs have no owner
    ]
    lws_uids = {x["metadata"]["uid"] for x in lwss}
    bad_owner = [
        o["metadata"]["name"]
        for o in wls
        if [r["uid"] for r in o["metadata"].get("ownerReferences", []) if r.get("controller")]
        not in ([u] for u in lws_uids)
    ]
    got_pg = {
        g["metadata"]["name"]: g["spec"]["schedulingPolicy"].get("gang", {}).get("minCount", 0)
        for g in pgs
    }
    return {
        "workloads_missing": sorted(want_wl - {w["metadata"]["name"] for w in wls}),
        "workloads_extra": sorted({w["metadata"]["name"] for w in wls} - want_wl),
        "podgroups_missing": sorted(want_pg.keys() - got_pg.keys()),
        "podgroups_extra": sorted(got_pg.keys() - want_pg.keys()),
        "podgroups_wrong_min_count": sorted(
            n for n in want_pg.keys() & got_pg.keys() if want_pg[n] != got_pg[n]
        ),
        "workloads_bad_owner": bad_owner,
    }


@contextlib.asynccontextmanager
async def _components(
    plane: ControlPlane, kubeconfig: Path, tmp_path: Path, scheduler: str
) -> AsyncIterator[tuple[SchedulerProcess, Integrations]]:
    sched = SchedulerProcess(scheduler_argv(kubeconfig, scheduler), tmp_path / "scheduler.log")
    integ = Integrations(kubeconfig, tmp_path / "integrations.log")
    try:
        yield sched, integ
    finally:
        # in threads: the fault proxy runs on this event loop and must keep serving while
        # the components shut down
        codes = tuple(
            await asyncio.gather(
                asyncio.to_thread(sched.terminate), asyncio.to_thread(integ.terminate)
            )
        )
        for p in (sched.log_path, integ.log_path):
            assert "Traceback" not in p.read_text(), p.read_text()[-3000:]
        assert codes == (0, 0), codes


async def _run(
    plane: ControlPlane,
    tmp_path: Path,
    kubeconfig: Path,
    name: str,
    disturb: Callable[[Api, Observer, Callable[[], int]], Awaitable[dict[str, Any]]],
) -> dict[str, Any]:
    size = SIZES[scale()]
    rng = random.Random(hash(name) & 0xFFFF)
    ns = plane.create_namespace("faults-")
    scheduler = f"faults-{ns}"
    direct = [Gang(f"g{i:04d}", s) for i, s in enumerate(gang_sizes(size["pods"], rng))]
    lws_specs = [(f"lws{i}", rng.randint(2, 3), rng.choice((4, 8))) for i in range(size["lws"])]
    gangs: list[Gang] = list(direct)
    async with Api(plane.kubeconfig) as api:
        nodes = await create_nodes(api, ns, size["nodes"])
        obs = Observer(api, ns)
        obs.start()
        async with _components(plane, kubeconfig, tmp_path, scheduler) as (sched, integ):
            t0 = time.monotonic()

            async def feed() -> None:
                pause = size["arrival_s"] / (len(direct) + len(lws_specs))
                items: list[Any] = [*direct, *lws_specs]
                rng.shuffle(items)
                for item in items:
                    t = time.monotonic()
                    if isinstance(item, Gang):
                        await create_gangs(api, ns, scheduler, ns, [item])
                    else:
                        lws_name, replicas, lws_size = item
                        lws = _lws(lws_name, ns, scheduler, replicas, lws_size)
                        gangs.extend(await _create_lws(api, ns, lws))
                    await asyncio.sleep(max(0.0, pause - (time.monotonic() - t)))
                # resize: the first LWS grows by a replica, the second shrinks by one
                grow_name, grow_replicas, grow_size = lws_specs[0]
                grown = _lws(grow_name, ns, scheduler, grow_replicas + 1, grow_size)
                await api.call(
                    "PATCH",
                    f"{LWS_PATH.format(ns=ns)}/{grow_name}",
                    {"spec": {"replicas": grow_replicas + 1}},
                    content_type="application/merge-patch+json",
                )
                for group, pods in _linked_pods(grown).items():
                    if any(g.name == group for g in gangs):
                        continue
                    for pod in pods:
                        await api.call("POST", PODS_PATH.format(ns=ns), pod, ok=(201, 409))
                    gangs.append(
                        Gang(group, len(pods), members=tuple(p["metadata"]["name"] for p in pods))
                    )
                shrink_name, shrink_replicas, _ = lws_specs[1]
                await api.call(
                    "PATCH",
                    f"{LWS_PATH.format(ns=ns)}/{shrink_name}",
                    {"spec": {"replicas": shrink_replicas - 1}},
                    content_type="application/merge-patch+json",
                )
                gone = f"{shrink_name}-{shrink_replicas - 1}"
                (removed,) = [g for g in gangs if g.name == gone]
                gangs.remove(removed)
                opts = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
                for pod_name in removed.pods:  # as the LWS controller deletes the replica
                    await api.call("DELETE", f"{PODS_PATH.format(ns=ns)}/{pod_name}", opts)

            feeder = asyncio.create_task(feed())

            def bound() -> int:
                if feeder.done() and feeder.exception() is not None:
                    raise AssertionError("creating the workload failed") from feeder.exception()
                return len(obs.node_of)

            disturbed = await disturb(api, obs, bound)
            await asyncio.wait_for(feeder, FINISH_TIMEOUT)

            last: dict[str, Any] = {}

            async def finished() -> bool:
                assert sched.alive() and integ.alive(), "a component exited"
                last["unbound"] = sorted(p for g in gangs for p in g.pods if p not in obs.node_of)[
                    :20
                ]
                last["integrations"] = {
                    k: v for k, v in (await _integration_state(api, ns)).items() if v
                }
                return not last["unbound"] and not last["integrations"]

            try:
                await wait_until(finished, "the end state", FINISH_TIMEOUT, 0.5)
            except AssertionError as e:
                raise AssertionError(f"{e}; last seen: {last}") from None
            seconds = time.monotonic() - t0
            report = await analyse(api, ns, obs, gangs, nodes)
            state = await _integration_state(api, ns)
        await obs.stop()
    # pods of the removed replica were deleted on purpose
    report["unexpected_pods"] = [
        p for p in report["unexpected_pods"] if not p.startswith(f"{lws_specs[1][0]}-")
    ]
    report.update(disturbed, integrations=state, seconds=round(seconds, 1), lws=len(lws_specs))
    write_report(name, report)
    return report


async def test_apiserver_restarts_mid_run(plane: ControlPlane, tmp_path: Path) -> None:
    size = SIZES[scale()]

    async def disturb(api: Api, obs: Observer, bound: Callable[[], int]) -> dict[str, Any]:
        downs: list[float] = []
        step = size["pods"] // (size["restarts"] + 1)
        for i in range(size["restarts"]):
            await wait_until(lambda i=i: bound() >= step * (i + 1) // 2 + 1, "progress", 300)
            downs.append(round(await plane.arestart_apiserver(kill=True, down_seconds=1.0), 2))
        return {"apiserver_restarts": len(downs), "apiserver_down_s": downs}

    report = await _run(plane, tmp_path, plane.kubeconfig, f"apiserver-restart-{scale()}", disturb)
    assert violations(report) == {}
    assert not any(report["integrations"].values()), report["integrations"]
    assert report["apiserver_restarts"] == size["restarts"]
    assert report["observer_relists"] > 2  # the observer's watches were cut too


def _proxy_kubeconfig(path: Path, url: str) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "proxy", "cluster": {"server": url}}],
                "users": [{"name": "anonymous", "user": {}}],
                "contexts": [
                    {"name": "proxy", "context": {"cluster": "proxy", "user": "anonymous"}}
                ],
                "current-context": "proxy",
            }
        )
    )
    return path


#: 5 % of requests get a fault (2 % 429, 1.5 % 500/503, 1 % reset, 0.5 % stall), and every
#: watch is cut after 20-400 events. (A watch that stalls silently instead is noticed after
#: twice the bookmark interval, 2 minutes: test_watch_stall.py injects such stalls.)
FIVE_PERCENT = FaultPlan(
    p_429=0.02,
    retry_after=(0, 1),
    p_5xx=0.015,
    p_reset=0.01,
    p_stall=0.005,
    stall_seconds=3.0,
    watch_cut_after=(20, 400),
    p_watch_stall=0.0,
)


async def test_faults_under_load_same_end_state(plane: ControlPlane, tmp_path: Path) -> None:
    proxy = FaultProxy.in_front_of(plane.server, plane.kubeconfig, plan=FIVE_PERCENT, seed=16)
    url = await proxy.start()
    try:
        kubeconfig = _proxy_kubeconfig(tmp_path / "proxy.kubeconfig", url)

        async def disturb(api: Api, obs: Observer, bound: Callable[[], int]) -> dict[str, Any]:
            return {}

        report = await _run(plane, tmp_path, kubeconfig, f"faults-5pct-{scale()}", disturb)
    finally:
        await proxy.stop()
    counts = dict(proxy.counts)
    report_faults = {k: v for k, v in counts.items() if k != "requests"}
    write_report(f"faults-5pct-{scale()}-counts", counts)
    assert violations(report) == {}
    assert not any(report["integrations"].values()), report["integrations"]
    assert counts["requests"] > 500 and sum(report_faults.values()) > 10, counts


async def test_integrations_killed_mid_reconcile_leave_no_duplicates_or_orphans(
    plane: ControlPlane, tmp_path: Path
) -> None:
    """``integrations run`` SIGKILLed while it creates, resizes and deletes the objects of many
    LeaderWorkerSets, and restarted each time: at the end the Workloads and PodGroups are
    exactly the plans of the LWSs as they are (none missing, none extra, none with a stale
    minCount, one controller owner each)."""
    kills = {"ci": 4, "full": 12}[scale()]
    rng = random.Random(61)
    ns = plane.create_namespace("integ-kill-")
    base = "/apis/scheduling.k8s.io/v1beta1/namespaces/{ns}/"
    names = [f"l{i:03d}" for i in range({"ci": 30, "full": 100}[scale()])]
    killed: list[dict[str, Any]] = []
    spawned = 0

    def spawn() -> Integrations:
        nonlocal spawned
        spawned += 1
        return Integrations(plane.kubeconfig, tmp_path / f"integrations-{spawned}.log")

    async with Api(plane.kubeconfig) as api:

        async def count() -> int:
            return len(await _live(api, base.format(ns=ns) + "podgroups"))

        async def kill_at(proc: Integrations, what: str, threshold: int) -> Integrations:
            deadline = time.monotonic() + 60
            while await count() < threshold and time.monotonic() < deadline:
                assert proc.alive(), proc.log_path.read_text()[-3000:]
                await asyncio.sleep(0.02)
            n = await count()
            proc.kill()
            killed.append({"phase": what, "podgroups_at_kill": n})
            return spawn()

        proc = spawn()
        try:
            for name in names:  # created while the controller starts
                lws = _lws(name, ns, "nobody", rng.randint(1, 4), rng.choice((2, 3, 4)))
                await api.call("POST", LWS_PATH.format(ns=ns), lws, ok=(201, 409))
            first = await count()
            total = sum(
                len(plan_for(x).pod_groups)
                for x in (await api.call("GET", LWS_PATH.format(ns=ns)))["items"]
            )
            for k in range(kills // 2):  # during creation
                proc = await kill_at(proc, "create", first + (k + 1) * (total - first) // kills)
            # resize every LWS (some grow, some shrink) and delete a few, then kill again
            for name in names:
                await api.call(
                    "PATCH",
                    f"{LWS_PATH.format(ns=ns)}/{name}",
                    {"spec": {"replicas": rng.randint(1, 4)}},
                    content_type="application/merge-patch+json",
                )
            for name in rng.sample(names, len(names) // 10):
                await api.call("DELETE", f"{LWS_PATH.format(ns=ns)}/{name}")
            for _ in range(kills - kills // 2):
                await wait_until(proc.ready, "the controller ready", 60)
                await asyncio.sleep(rng.uniform(0.0, 0.4))  # mid-reconcile of the resize
                assert proc.alive(), proc.log_path.read_text()[-3000:]
                n = await count()
                proc.kill()
                killed.append({"phase": "resize", "podgroups_at_kill": n})
                proc = spawn()
            last: dict[str, Any] = {}
            # the last restart is up (its signal handlers too) before the end state is read:
            # the plans may already hold, and a SIGTERM during its start-up is no clean stop
            await wait_until(proc.ready, "the last controller ready", 60)

            async def converged() -> bool:
                assert proc.alive(), proc.log_path.read_text()[-3000:]
                state = await _integration_state(api, ns)
                last.update(state)
                return not any(state.values())

            try:
                await wait_until(converged, "the plans", FINISH_TIMEOUT, 0.5)
            except AssertionError as e:
                raise AssertionError(
                    f"{e}; last: { {k: v for k, v in last.items() if v} }"
                ) from None
            pgs = await _live(api, base.format(ns=ns) + "podgroups")
            owners = [
                [r for r in g["metadata"].get("ownerReferences", []) if r.get("controller")]
                for g in pgs
            ]
        finally:
            code = proc.terminate()
    assert code == 0
    assert all(len(o) == 1 for o in owners), owners
    write_report(
        f"integrations-kill-{scale()}",
        {"kills": len(killed), "kill_log": killed, "lws": len(names), "podgroups": len(pgs)},
    )
    assert len(killed) == kills
