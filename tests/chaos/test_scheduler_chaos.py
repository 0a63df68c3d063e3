"""Scheduler chaos on the real v1.37.2 API server: ``workloadbuilder scheduler`` (a
subprocess) is SIGKILLed at random moments and restarted; two replicas with leader election
lose their leader again and again.

Moments of a kill, in turn: *start-up* (0.2-2 s after the spawn: imports, informer lists,
first cycles), *mid-binding* (the moment the observed bound count crosses a random
threshold: binds are in flight) and *mid-status-write* (right after a PodGroup condition
change is seen, past a threshold: more status patches are in flight). At the end: every gang
that fits is bound all-or-nothing, none is partially bound, no pod is lost or bound twice, no
node is overcommitted, ``PodGroupInitiallyScheduled`` never went from True to anything else,
and the gangs that cannot fit have 0 pods bound and ``False``.

CI sizes: 300 pods, 4 kills, 2 leader kills (about a minute). ``make chaos`` (CHAOS_SCALE=full):
2,000 pods in gangs of 8-64 on 300 nodes, 20 kills, 5 leader kills. The figures (time to
recover, partial windows) are printed and, with ``CHAOS_REPORT_DIR``, written as JSON.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from _chaos import (
    NODE_CPU,
    Api,
    Gang,
    Observer,
    SchedulerProcess,
    analyse,
    cleanup,
    create_gangs,
    create_nodes,
    gang_sizes,
    percentile,
    scale,
    scheduler_argv,
    violations,
    wait_until,
    write_report,
)

from workloadbuilder.testing import ControlPlane

pytestmark = [pytest.mark.chaos, pytest.mark.controlplane]

SIZES: dict[str, dict[str, int]] = {
    "ci": {
        "pods": 300,
        "nodes": 20,
        "kills": 4,
        "arrival_s": 20,
        "leader_pods": 200,
        "leader_kills": 2,
    },
    "full": {
        "pods": 2000,
        "nodes": 300,
        "kills": 20,
        "arrival_s": 150,
        "leader_pods": 1000,
        "leader_kills": 5,
    },
}
KINDS = ("binding", "startup", "status")
FINISH_TIMEOUT = 600.0


def _workload(rng: random.Random, pods: int) -> tuple[list[Gang], list[Gang]]:
    """Gangs of 8-64 that fit (cpu 1 per pod), and two that never fit (a pod needs more cpu
    than a node has)."""
    fits = [Gang(f"g{i:04d}", s) for i, s in enumerate(gang_sizes(pods, rng))]
    unfit = [Gang(f"unfit-{i}", 8, cpu=NODE_CPU + 1) for i in range(2)]
    return fits, unfit


async def _arrive(api: Api, ns: str, scheduler: str, gangs: list[Gang], seconds: float) -> None:
    """Create the gangs one after the other, spread over about ``seconds`` (the unfit ones
    first), so that kills land while work is arriving, placed and bound."""
    order = sorted(gangs, key=lambda g: g.cpu <= NODE_CPU)
    pause = seconds / max(1, len(order))
    for g in order:
        t = time.monotonic()
        await create_gangs(api, ns, scheduler, ns, [g])
        await asyncio.sleep(max(0.0, pause - (time.monotonic() - t)))


def _partial(obs: Observer, gangs: list[Gang]) -> set[str]:
    out: set[str] = set()
    for g in gangs:
        n = sum(1 for p in g.pods if p in obs.node_of)
        if 0 < n < g.size:
            out.add(g.name)
    return out


def _complete_at(obs: Observer, g: Gang) -> float | None:
    times = [obs.bound_at.get(p) for p in g.pods]
    if any(t is None for t in times):
        return None
    return max(t for t in times if t is not None)


async def _finish(
    api: Api, ns: str, obs: Observer, fits: list[Gang], unfit: list[Gang], alive: Any
) -> None:
    total = sum(g.size for g in fits)

    def done() -> bool:
        assert alive(), "the scheduler exited"
        bound = sum(1 for g in fits for p in g.pods if p in obs.node_of)
        told = all(obs.conditions.get(g.name, ["-"])[-1] == "False" for g in unfit)
        return bound >= total and told

    await wait_until(done, "every fitting pod bound and the unfit gangs told", FINISH_TIMEOUT)


def _kill_stats(kills: list[dict[str, Any]]) -> dict[str, Any]:
    rec = [k["recover_s"] for k in kills if k.get("recover_s") is not None]
    first = [k["first_bind_s"] for k in kills if k.get("first_bind_s") is not None]
    ready = [k["ready_s"] for k in kills if k.get("ready_s") is not None]
    by_kind: dict[str, int] = {}
    for k in kills:
        by_kind[k["kind"]] = by_kind.get(k["kind"], 0) + 1
    return {
        "kills": len(kills),
        "kills_by_moment": by_kind,
        "kills_with_partial_gangs": sum(1 for k in kills if k["partial_at_kill"]),
        "partial_at_kill_max": max((k["partial_at_kill"] for k in kills), default=0),
        "ready_after_kill_p50_s": round(percentile(ready, 0.5), 2),
        "ready_after_kill_max_s": round(max(ready, default=0.0), 2),
        "first_bind_after_restart_p50_s": round(percentile(first, 0.5), 2),
        "first_bind_after_restart_max_s": round(max(first, default=0.0), 2),
        "interrupted_gangs_completed_p50_s": round(percentile(rec, 0.5), 2),
        "interrupted_gangs_completed_max_s": round(max(rec, default=0.0), 2),
    }


async def _track_recovery(
    obs: Observer,
    fits: list[Gang],
    kill: dict[str, Any],
    t_kill: float,
    partial: set[str],
    proc: SchedulerProcess,
) -> None:
    """Fill in ``ready_s`` (kill -> the restarted process's ``/readyz``), ``first_bind_s``
    (kill -> the first bind seen after it is ready; binds seen earlier are requests the killed
    process had in flight) and ``recover_s`` (kill -> every gang partial at the kill is
    complete), bounded; a process killed before it was ready leaves ``ready_s`` unset."""
    deadline = t_kill + FINISH_TIMEOUT
    by_name = {g.name: g for g in fits}
    before = -1
    while time.monotonic() < deadline:
        if before < 0 and proc.alive() and await proc.ready():
            kill["ready_s"] = round(time.monotonic() - t_kill, 3)
            before = len(obs.node_of)
        if not proc.alive() and before < 0:
            kill["killed_before_ready"] = True
            before = len(obs.node_of) + 10**9  # no first bind of its own
        if kill.get("first_bind_s") is None and 0 <= before < len(obs.node_of):
            kill["first_bind_s"] = round(time.monotonic() - t_kill, 3)
        done = [_complete_at(obs, by_name[n]) for n in partial]
        if all(t is not None for t in done):
            if partial:
                kill["recover_s"] = round(max(t for t in done if t is not None) - t_kill, 3)
            if (
                kill.get("first_bind_s") is not None
                or kill.get("killed_before_ready")
                or len(obs.node_of) >= sum(g.size for g in fits)
            ):
                return
        await asyncio.sleep(0.02)


async def test_sigkill_at_random_moments_loses_nothing(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    size = SIZES[scale()]
    rng = random.Random(16)
    ns = control_plane.create_namespace("chaos-")
    scheduler = f"chaos-{ns}"
    fits, unfit = _workload(rng, size["pods"])
    total = sum(g.size for g in fits)
    argv = scheduler_argv(control_plane.kubeconfig, scheduler)
    kills: list[dict[str, Any]] = []
    trackers: list[asyncio.Task[None]] = []
    async with Api(control_plane.kubeconfig) as api:
        nodes = await create_nodes(api, ns, size["nodes"])
        obs = Observer(api, ns)
        obs.start()
        feeder = asyncio.create_task(_arrive(api, ns, scheduler, fits + unfit, size["arrival_s"]))
        n_progress = sum(1 for i in range(size["kills"]) if KINDS[i % 3] != "startup")
        thresholds = sorted(rng.sample(range(total // 20, total * 17 // 20), n_progress))
        proc = SchedulerProcess(argv, tmp_path / "scheduler-0.log")
        t_start = time.monotonic()
        try:
            for i in range(size["kills"]):
                kind = KINDS[i % 3]
                if kind == "startup":
                    await asyncio.sleep(rng.uniform(0.2, 2.0))
                else:
                    threshold = thresholds.pop(0)
                    # past the threshold, and this process has bound pods itself
                    await wait_until(proc.ready, "the scheduler ready", 120)
                    mark = len(obs.node_of)
                    await wait_until(
                        lambda t=threshold, m=mark: len(obs.node_of) >= max(t, m + 1),
                        f"{threshold} pods bound",
                        300,
                    )
                    if kind == "status":
                        seen = obs.condition_events
                        with contextlib.suppress(AssertionError):  # none came: kill anyway
                            await wait_until(
                                lambda s=seen: obs.condition_events > s, "a status write", 10, 0.005
                            )
                assert proc.alive(), proc.log_path.read_text()[-3000:]
                partial = _partial(obs, fits)
                t_kill = time.monotonic()
                proc.kill()
                kill = {
                    "i": i,
                    "kind": kind,
                    "bound_at_kill": len(obs.node_of),
                    "partial_at_kill": len(partial),
                    "at_s": round(t_kill - t_start, 2),
                }
                kills.append(kill)
                proc = SchedulerProcess(argv, tmp_path / f"scheduler-{i + 1}.log")
                trackers.append(
                    asyncio.create_task(_track_recovery(obs, fits, kill, t_kill, partial, proc))
                )
            await asyncio.wait_for(feeder, FINISH_TIMEOUT)
            await _finish(api, ns, obs, fits, unfit, proc.alive)
            await asyncio.wait_for(asyncio.gather(*trackers), 60)
            t_end = time.monotonic()
            report = await analyse(api, ns, obs, fits + unfit, nodes)
        finally:
            feeder.cancel()
            code = proc.terminate()
            await obs.stop()
            await cleanup(api, ns, nodes)
        log = proc.log_path.read_text()
    assert code == 0, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    report.update(_kill_stats(kills), seconds=round(t_end - t_start, 1), kill_log=kills)
    write_report(f"scheduler-sigkill-{scale()}", report)
    assert violations(report) == {}
    assert report["gangs_bound"] == len(fits)
    for g in fits:
        assert report["final_conditions"][g.name] == "True", g
    for g in unfit:
        assert report["final_conditions"][g.name] == "False", g
    assert len(kills) == size["kills"]


def _leader_config(path: Path, kubeconfig: Path, scheduler: str, lease_ns: str) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "clientConnection": {"kubeconfig": str(kubeconfig)},
                "leaderElection": {
                    "leaderElect": True,
                    "resourceNamespace": lease_ns,
                    "resourceName": scheduler,
                    "leaseDuration": "4s",
                    "renewDeadline": "3s",
                    "retryPeriod": "500ms",
                },
                "profiles": [{"schedulerName": scheduler}],
            }
        )
    )
    return path


async def _holder(api: Api, ns: str, name: str) -> str:
    lease = await api.call(
        "GET", f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{name}", ok=(200, 404)
    )
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


async def test_two_replicas_with_leader_election_survive_leader_kills(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    size = SIZES[scale()]
    rng = random.Random(1616)
    ns = control_plane.create_namespace("chaos-le-")
    scheduler = f"chaos-{ns}"
    fits, unfit = _workload(rng, size["leader_pods"])
    total = sum(g.size for g in fits)
    config = _leader_config(tmp_path / "config.yaml", control_plane.kubeconfig, scheduler, ns)
    argv = [*scheduler_argv(control_plane.kubeconfig, scheduler, f"--config={config}")]
    argv = [a for a in argv if not a.startswith("--scheduler-name")]
    kills: list[dict[str, Any]] = []
    spawned = 0

    def spawn() -> SchedulerProcess:
        nonlocal spawned
        spawned += 1
        return SchedulerProcess(argv, tmp_path / f"replica-{spawned}.log")

    async with Api(control_plane.kubeconfig) as api:
        nodes = await create_nodes(api, ns, size["nodes"])
        obs = Observer(api, ns)
        obs.start()
        feeder = asyncio.create_task(_arrive(api, ns, scheduler, fits + unfit, size["arrival_s"]))
        replicas = [spawn(), spawn()]
        t_start = time.monotonic()
        thresholds = sorted(rng.sample(range(total // 10, total * 8 // 10), size["leader_kills"]))
        try:
            for i, threshold in enumerate(thresholds):
                await wait_until(
                    lambda t=threshold: len(obs.node_of) >= t, f"{threshold} pods bound", 300
                )
                holder = await _holder(api, ns, scheduler)
                (leader,) = [r for r in replicas if holder.endswith(f"_{r.pid}")]
                before = len(obs.node_of)
                t_kill = time.monotonic()
                leader.kill()
                replicas.remove(leader)
                (standby,) = replicas

                async def took_over(s: SchedulerProcess = standby) -> bool:
                    return (await _holder(api, ns, scheduler)).endswith(f"_{s.pid}")

                await wait_until(took_over, "the standby holds the lease", 60)
                t_lease = time.monotonic()
                await wait_until(
                    lambda b=before: len(obs.node_of) > b or len(obs.node_of) >= total,
                    "a bind by the new leader",
                    60,
                )
                kills.append(
                    {
                        "i": i,
                        "bound_at_kill": before,
                        "lease_taken_s": round(t_lease - t_kill, 2),
                        "first_bind_s": round(time.monotonic() - t_kill, 2),
                    }
                )
                replicas.append(spawn())  # the supervisor restarts the killed replica
            await asyncio.wait_for(feeder, FINISH_TIMEOUT)
            await _finish(api, ns, obs, fits, unfit, lambda: any(r.alive() for r in replicas))
            t_end = time.monotonic()
            report = await analyse(api, ns, obs, fits + unfit, nodes)
        finally:
            feeder.cancel()
            codes = [r.terminate() for r in replicas]
            await obs.stop()
            await cleanup(api, ns, nodes)
    assert codes == [0, 0]
    taken = [k["lease_taken_s"] for k in kills]
    report.update(
        leader_kills=len(kills),
        lease_duration_s=4,
        lease_taken_max_s=max(taken),
        first_bind_after_kill_max_s=max(k["first_bind_s"] for k in kills),
        seconds=round(t_end - t_start, 1),
        kill_log=kills,
    )
    write_report(f"scheduler-leader-kill-{scale()}", report)
    assert violations(report) == {}
    assert report["gangs_bound"] == len(fits)
    assert len(kills) == size["leader_kills"]
