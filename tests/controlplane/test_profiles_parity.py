"""Upstream is the oracle for several profiles in one ``KubeSchedulerConfiguration``: the same
two-profile configuration given to kube-scheduler v1.37.2 (one process, started here on a
plane of its own) and to ours (``parse_config`` -> ``Scheduler(frameworks=...)``), the same
objects on both planes, and what is observable compared: which pods bind and how they share
nodes, each pod's ``PodScheduled`` status and reason, the PodGroup's
``PodGroupInitiallyScheduled`` status and reason. Then the validation of several profiles:
the binary and ``parse_config`` reject the same files at the same field.

Profile A is the default plugin set; profile B disables the TaintToleration filter and scores
single pods ``MostAllocated``.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import subprocess
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from controlplane._parity import ParitySide, both, parity_sides, until
from workloadbuilder.scheduler import ConfigError, Scheduler, parse_config
from workloadbuilder.testing import ControlPlane
from workloadbuilder.testing.builders import make_node, make_pod, make_pod_group

pytestmark = [pytest.mark.controlplane]

A, B = "parity-a", "parity-b"
API = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
PROFILES: list[dict[str, Any]] = [
    {"schedulerName": A},
    {
        "schedulerName": B,
        "plugins": {"filter": {"disabled": [{"name": "TaintToleration"}]}},
        "pluginConfig": [
            {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}
        ],
    },
]
HOST = "kubernetes.io/hostname"
TAINT = {"key": "dedicated", "value": "x", "effect": "NoSchedule"}
TIMEOUT = 40.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ready(port: int) -> bool:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/readyz", context=ctx, timeout=2):
            return True
    except OSError:
        return False


def _kube_scheduler(plane: ControlPlane) -> Path:
    return Path(plane.bin_dir) / "kube-scheduler"


@pytest.fixture(scope="module")
def upstream_plane(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlane]:
    """A plane whose one kube-scheduler v1.37.2 process serves both profiles."""
    run = tmp_path_factory.mktemp("profiles-upstream")
    with ControlPlane(bin_dir=control_plane.bin_dir) as plane:
        config = run / "kube-scheduler.yaml"
        doc = {
            **API,
            "clientConnection": {"kubeconfig": str(plane.kubeconfig)},
            "leaderElection": {"leaderElect": False},
            "profiles": PROFILES,
        }
        config.write_text(yaml.safe_dump(doc, sort_keys=False))
        gates = ",".join(f"{k}={'true' if v else 'false'}" for k, v in plane.feature_gates.items())
        port = _free_port()
        log = (run / "kube-scheduler.log").open("wb")
        proc = subprocess.Popen(
            [
                str(_kube_scheduler(plane)),
                f"--config={config}",
                f"--feature-gates={gates}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={run / 'certs'}",
                f"--authentication-kubeconfig={plane.kubeconfig}",
                f"--authorization-kubeconfig={plane.kubeconfig}",
                "--v=2",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 60
            while not _ready(port):
                assert proc.poll() is None, (run / "kube-scheduler.log").read_text()[-2000:]
                assert time.monotonic() < deadline, "kube-scheduler not ready"
                time.sleep(0.2)
            yield plane
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()


class Side(ParitySide):
    """One scheduler process serving profiles A and B."""

    def __init__(self, name: str, plane: ControlPlane) -> None:
        super().__init__(name, plane, A, "profiles")

    async def start_ours(self) -> None:
        """Ours with the very profiles given to kube-scheduler (preemption on, as the
        ``workloadbuilder scheduler`` command)."""
        import attrs

        loaded = parse_config({**API, "profiles": PROFILES})
        config = attrs.evolve(loaded.scheduler, preemption=True)
        self.scheduler = Scheduler(self.cluster, config, frameworks=loaded.frameworks)
        await self.scheduler.start()
        self._task = asyncio.create_task(self.scheduler.run())

    async def tainted_node(self, name: str, cpu: str = "4") -> str:
        full = self.full(name)
        node = make_node(full).label(HOST, full).taints(TAINT)
        obj = node.resources({"cpu": cpu, "memory": "16Gi", "pods": "110"}).ready().obj()
        status = obj.pop("status")
        await self.cluster.create(obj)
        self.track("Node", full)
        await self.cluster.patch("Node", full, {"status": status}, subresource="status")
        return full

    async def pod(
        self,
        name: str,
        profile: str,
        group: str | None = None,
        *,
        on: str | None = None,
        cpu: str = "1",
    ) -> None:
        p = make_pod(name, self.namespace).scheduler_name(profile)
        if group is not None:
            p.pod_group(group)
        obj = p.request("cpu", cpu).request("memory", "4Gi").obj()
        if on is not None:
            obj["spec"]["nodeSelector"] = {HOST: self.full(on)}
        obj["spec"]["terminationGracePeriodSeconds"] = 0
        await self.cluster.create(obj)

    async def scheduled(self, pod: str) -> tuple[str, str] | None:
        obj = (await self.pods())[pod]
        for c in (obj.get("status") or {}).get("conditions") or ():
            if c.get("type") == "PodScheduled":
                return str(c["status"]), str(c.get("reason", ""))
        return None

    async def settled(self, bound: list[str], pending: list[str] = ()) -> dict[str, str]:
        """Wait until ``bound`` are bound and ``pending`` are ``PodScheduled=False``."""

        async def probe() -> dict[str, str] | None:
            placed = await self.placement()
            if any(p not in placed for p in bound):
                return None
            for p in pending:
                cond = await self.scheduled(p)
                if p in placed or cond is None or cond[0] != "False":
                    return None
            return placed

        return await until(
            probe,
            f"{self.name}: {bound} bound, {list(pending)} pending",
            timeout=TIMEOUT,
            interval=0.2,
        )

    async def group_settled(self, group: str, status: str) -> tuple[str, str]:
        async def probe() -> tuple[str, str] | None:
            c = await self.group_condition(group)
            return c if c is not None and c[0] == status else None

        return await until(probe, f"{self.name}: {group} {status}", timeout=TIMEOUT, interval=0.2)


@pytest.fixture
async def sides(
    upstream_plane: ControlPlane, our_plane: ControlPlane
) -> AsyncIterator[tuple[Side, Side]]:
    async with parity_sides(Side("upstream", upstream_plane), Side("ours", our_plane)) as pair:
        yield pair


async def test_each_profile_filters_with_its_own_plugins(sides: tuple[Side, Side]) -> None:
    """A tainted node: B's pod (no TaintToleration filter) binds there, A's stays pending;
    a pod naming neither profile is not touched."""

    async def scenario(s: Side) -> tuple[dict[str, str], Any, Any, dict[str, str]]:
        await s.tainted_node("t")
        await s.pod("by-a", A, on="t")
        await s.pod("by-b", B, on="t")
        await s.pod("by-nobody", "nobody-serves-this", on="t")
        placed = await s.settled(["by-b"], ["by-a"])

        async def reported() -> dict[str, str] | None:
            got = {
                f"{e['involvedObject']['name']}/{e.get('reason')}": str(e.get("reportingComponent"))
                for e in (await s.cluster.list("Event", s.namespace)).items
                if isinstance(e, dict)
            }
            wanted = ("by-a/FailedScheduling", "by-b/Scheduled")
            return {k: got[k] for k in wanted} if all(k in got for k in wanted) else None

        # each profile reports its own events (kube-scheduler: a recorder per profile)
        reporters = await until(reported, f"{s.name}: events", timeout=TIMEOUT, interval=0.2)
        return placed, await s.scheduled("by-a"), await s.scheduled("by-nobody"), reporters

    upstream, ours = await both(sides, scenario)
    print("upstream", upstream, "ours", ours)
    reporters = {"by-a/FailedScheduling": A, "by-b/Scheduled": B}
    assert upstream == ours == ({"by-b": "t"}, ("False", "Unschedulable"), None, reporters)


async def test_each_profile_scores_with_its_own_args(sides: tuple[Side, Side]) -> None:
    """Two nodes: A's two pods spread (LeastAllocated), then B's two pack (MostAllocated)."""

    async def scenario(s: Side) -> tuple[int, int]:
        await s.node("n1")
        await s.node("n2")
        pool = ["n1", "n2"]
        for i in range(2):
            await s.pod(f"a-{i}", A)
            await s.settled([f"a-{j}" for j in range(i + 1)])
        for i in range(2):
            await s.pod(f"b-{i}", B)
            await s.settled([f"b-{j}" for j in range(i + 1)])
        placed = await s.placement()
        assert set(placed.values()) <= set(pool)
        a_nodes = {n for p, n in placed.items() if p.startswith("a-")}
        b_nodes = {n for p, n in placed.items() if p.startswith("b-")}
        return len(a_nodes), len(b_nodes)

    upstream, ours = await both(sides, scenario)
    print("upstream", upstream, "ours", ours)
    assert upstream == ours == (2, 1)


async def test_one_cache_for_both_profiles(sides: tuple[Side, Side]) -> None:
    """One node with room for one pod: A's and B's pods are not both bound; the other is
    Unschedulable, and binds once the first is deleted."""

    async def scenario(s: Side) -> tuple[int, Any, bool]:
        await s.node("small", cpu="2")
        await s.pod("first", A, on="small", cpu="2")
        await s.pod("second", B, on="small", cpu="2")

        async def one() -> tuple[str, str] | None:
            placed = await s.placement()
            if len(placed) != 1:
                return None
            (winner,) = placed
            other = "second" if winner == "first" else "first"
            cond = await s.scheduled(other)
            return (winner, other) if cond is not None and cond[0] == "False" else None

        winner, other = await until(one, f"{s.name}: one bound", timeout=TIMEOUT, interval=0.2)
        cond = await s.scheduled(other)
        await s.cluster.delete("Pod", winner, s.namespace, grace_period_seconds=0)
        await s.settled([other])
        return len(await s.placement()), cond, True

    upstream, ours = await both(sides, scenario)
    print("upstream", upstream, "ours", ours)
    assert upstream == ours == (1, ("False", "Unschedulable"), True)


async def test_a_gang_under_the_second_profile(sides: tuple[Side, Side]) -> None:
    """Three tainted nodes: B's gang of 3 binds, one pod per node; A's gang binds nothing."""

    async def scenario(s: Side) -> tuple[int, Any, Any, int]:
        for i in range(3):
            await s.tainted_node(f"t{i}", cpu="2")
        for group, profile in (("gb", B), ("ga", A)):
            await s.cluster.create(make_pod_group(group, s.namespace).gang(3).obj())
            for i in range(3):
                await s.pod(f"{group}-{i}", profile, group, cpu="2")
        gb = await s.group_settled("gb", "True")
        ga = await s.group_settled("ga", "False")
        placed = await s.placement()
        nodes = {n for p, n in placed.items() if p.startswith("gb-")}
        return len(nodes), gb, ga, sum(1 for p in placed if p.startswith("ga-"))

    upstream, ours = await both(sides, scenario)
    print("upstream", upstream, "ours", ours)
    assert upstream == ours
    assert ours[0] == 3 and ours[2][0] == "False" and ours[3] == 0


async def test_a_group_naming_both_profiles_is_a_scheduler_error(
    sides: tuple[Side, Side],
) -> None:
    async def scenario(s: Side) -> tuple[Any, dict[str, str]]:
        await s.node("n")
        await s.cluster.create(make_pod_group("mixed", s.namespace).gang(2).obj())
        await s.pod("mixed-0", A, "mixed")
        await s.pod("mixed-1", B, "mixed")
        return await s.group_settled("mixed", "False"), await s.placement()

    upstream, ours = await both(sides, scenario)
    print("upstream", upstream, "ours", ours)
    assert upstream == ours == (("False", "SchedulerError"), {})


# ---- validation: the binary and parse_config reject the same files at the same field -------


def _upstream_errors(control_plane: ControlPlane, tmp: Path, profiles: Any) -> str:
    doc = {**API, "clientConnection": {"kubeconfig": str(tmp / "none")}, "profiles": profiles}
    path = tmp / "bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    with contextlib.suppress(subprocess.TimeoutExpired):
        out = subprocess.run(
            [str(_kube_scheduler(control_plane)), f"--config={path}", f"--cert-dir={tmp}"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode != 0
        return out.stderr
    raise AssertionError("kube-scheduler did not stop on an invalid configuration")


@pytest.mark.parametrize(
    ("profiles", "field", "detail"),
    [
        ([{"schedulerName": "a"}, {}], "profiles[1].schedulerName", "Required value"),
        ([{}, {}], "profiles[0].schedulerName", "Required value"),
        (
            [{"schedulerName": "a"}, {"schedulerName": "a"}],
            "profiles[1].schedulerName",
            "Duplicate value",
        ),
        (
            [
                {
                    "schedulerName": "a",
                    "plugins": {"queueSort": {"enabled": [{"name": "PrioritySort"}]}},
                },
                {"schedulerName": "b"},
            ],
            "profiles[1].plugins.queueSort",
            "must be the same for all profiles",
        ),
    ],
)
def test_validation_matches_kube_scheduler(
    control_plane: ControlPlane,
    tmp_path: Path,
    profiles: list[dict[str, Any]],
    field: str,
    detail: str,
) -> None:
    upstream = _upstream_errors(control_plane, tmp_path, profiles)
    print(upstream.strip().splitlines()[-1])
    assert f"{field}: {detail.split(':')[0]}" in upstream or (
        field in upstream and detail in upstream
    )
    with pytest.raises(ConfigError) as info:
        parse_config({**API, "profiles": profiles})
    ours = str(info.value)
    print(ours)
    assert f"config: {field}" in ours and detail in ours
    # both accept the same two profiles when each is named once and the queue sort agrees
    parse_config({**API, "profiles": PROFILES})
