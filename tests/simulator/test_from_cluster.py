"""``simulate --from-cluster``: a cluster's objects -> a snapshot scenario -> the what-if answer.

On :class:`MemoryCluster`: the snapshot only lists (never writes), bound pods keep their node
and run on, pending ones and the new objects are scheduled; the answer per new gang (starts
now / waits / preempts, with the scheduler's reason) is the same as running the saved
scenario file. The real API server with a read-only ServiceAccount:
``tests/controlplane/test_simulate_from_cluster.py``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from workloadbuilder.cli import main
from workloadbuilder.cluster import Cluster, ClusterProxy, MemoryCluster, ResourceInfo
from workloadbuilder.errors import Forbidden
from workloadbuilder.scheduler import SchedulerConfig
from workloadbuilder.simulator import Simulation, parse_scenario
from workloadbuilder.simulator._scenario import scenario_from_documents
from workloadbuilder.simulator._snapshot import (
    ClusterReadError,
    WhatIfAnswer,
    dump_documents,
    snapshot_documents,
    snapshot_groups,
    whatif_answers,
)

T = TypeVar("T")
SCHED = "wb-whatif"  # not the default name: the flag must configure the scheduler


def node(name: str, cpu: str = "4") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {
            "allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"},
            "capacity": {"cpu": cpu, "memory": "16Gi", "pods": "110"},
        },
    }


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def gang_docs(
    name: str,
    size: int,
    cpu: str,
    *,
    nodes: list[str] | None = None,
    priority: tuple[str, int] | None = None,
    duration: str | None = None,
    whole: bool = False,
) -> list[dict[str, Any]]:
    """A PodGroup and ``size`` pods; ``nodes``: the pods are bound there already; ``whole``:
    preempted as one unit (``disruptionMode: all``)."""
    group: dict[str, Any] = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": size}}},
    }
    if whole:
        group["spec"]["disruptionMode"] = {"all": {}}
    if priority is not None:
        group["spec"]["priorityClassName"] = priority[0]
        group["spec"]["priority"] = priority[1]
    docs = [group]
    for i in range(size):
        spec: dict[str, Any] = {
            "schedulerName": SCHED,
            "schedulingGroup": {"podGroupName": name},
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}],
        }
        if priority is not None:
            spec["priorityClassName"], spec["priority"] = priority
        if nodes is not None:
            spec["nodeName"] = nodes[i]
        meta: dict[str, Any] = {"name": f"{name}-{i}", "namespace": "default"}
        if duration is not None:
            meta["annotations"] = {"sim.workloadbuilder.io/duration": duration}
        docs.append({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
    return docs


class _Verbs(ClusterProxy):
    """Records every verb; ``forbid``: a kind whose list is refused with 403."""

    def __init__(self, inner: Cluster, forbid: str | None = None) -> None:
        super().__init__(inner)
        self.verbs: list[tuple[str, str]] = []
        self.forbid = forbid

    async def around(
        self, verb: str, info: ResourceInfo, subresource: str | None, call: Awaitable[T]
    ) -> T:
        self.verbs.append((verb, info.kind))
        if info.kind == self.forbid:
            if asyncio.iscoroutine(call):
                call.close()
            raise Forbidden(f'{info.plural} is forbidden: User "ro" cannot list resource')
        return await call


async def _cluster() -> MemoryCluster:
    """2 nodes of 4 CPU; "running" (2 x 3 CPU, low priority, preempted whole) bound on both
    for 10m; "stuck" (2 x 4 CPU, low) pending."""
    cluster = MemoryCluster()
    objs: list[dict[str, Any]] = [
        priority_class("low", 10),
        priority_class("high", 1000),
        node("n-0"),
        node("n-1"),
        *gang_docs(
            "running",
            2,
            "3",
            nodes=["n-0", "n-1"],
            priority=("low", 10),
            duration="10m",
            whole=True,
        ),
        *gang_docs("stuck", 2, "4", priority=("low", 10)),
    ]
    for obj in objs:
        await cluster.create(obj)
    return cluster


def _new(*docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d for group in docs for d in group]


async def _answer(
    cluster: Cluster, new: list[dict[str, Any]]
) -> tuple[list[WhatIfAnswer], dict[str, Any], list[dict[str, Any]]]:
    docs = await snapshot_documents(cluster)
    scenario = scenario_from_documents([*docs, *new], source="cluster")
    result = await Simulation(scenario, scheduler_config=_config()).run()
    return whatif_answers(result, snapshot_groups(docs)), result.to_json(), docs


def _config() -> SchedulerConfig:
    return SchedulerConfig(scheduler_name=SCHED, preemption=True)


def _by_name(answers: list[WhatIfAnswer]) -> dict[str, WhatIfAnswer]:
    return {a.name: a for a in answers}


async def test_snapshot_lists_only_and_keeps_bound_pods() -> None:
    cluster = await _cluster()
    proxy = _Verbs(cluster)
    docs = await snapshot_documents(proxy)
    assert {verb for verb, _ in proxy.verbs} == {"list"}
    pods = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Pod"}
    assert pods["running-0"]["spec"]["nodeName"] == "n-0"
    assert "nodeName" not in pods["stuck-0"]["spec"]
    assert all("status" not in p and "uid" not in p["metadata"] for p in pods.values())
    assert all("resourceVersion" not in d["metadata"] for d in docs)
    nodes = [d for d in docs if d["kind"] == "Node"]
    assert nodes[0]["status"]["allocatable"]["cpu"] == "4"
    assert snapshot_groups(docs) == {("default", "running"), ("default", "stuck")}


async def test_new_gang_fits_waits_or_preempts() -> None:
    cluster = await _cluster()
    # fits now: 1 CPU left per node
    fits = gang_docs("small", 2, "1", priority=("low", 10))
    # waits for "running" to finish (10m), behind nothing it may preempt
    waits = gang_docs("later", 2, "2", priority=("low", 10))
    answers, out, _ = await _answer(cluster, _new(fits, waits))
    got = _by_name(answers)
    assert got["small"].started and got["small"].starts_at == 0.0
    assert sorted(got["small"].nodes) == ["n-0", "n-1"] and not got["small"].preempts
    assert got["later"].started and got["later"].starts_at is not None
    assert got["later"].starts_at >= 600.0 and not got["later"].preempts
    # the existing pending gang is not a new workload
    assert "stuck" not in got and {g["name"] for g in out["podGroups"]} >= {"stuck", "running"}


async def test_new_high_priority_gang_preempts_a_whole_group() -> None:
    cluster = await _cluster()
    answers, out, _ = await _answer(cluster, gang_docs("urgent", 2, "4", priority=("high", 1000)))
    urgent = _by_name(answers)["urgent"]
    assert urgent.started and urgent.starts_at is not None and urgent.starts_at < 600.0
    assert urgent.preempts == ("PodGroup default/running (2 pods)",)
    assert out["preemptions"]


async def test_cannot_start_says_why() -> None:
    cluster = await _cluster()
    answers, _, _ = await _answer(cluster, gang_docs("huge", 2, "8"))
    huge = _by_name(answers)["huge"]
    assert not huge.started and huge.starts_at is None
    assert huge.reason and "2 of 2 nodes lack cpu" in huge.reason


async def test_saved_snapshot_gives_the_same_answer() -> None:
    cluster = await _cluster()
    new = _new(gang_docs("small", 2, "1"), gang_docs("urgent", 2, "4", priority=("high", 1000)))
    _, direct, docs = await _answer(cluster, new)
    text = dump_documents([*docs, *new], "# saved\n")
    replay = await Simulation(
        parse_scenario(text, source="cluster"), scheduler_config=_config()
    ).run()
    assert replay.to_json() == direct


async def test_forbidden_names_the_kind_and_permission() -> None:
    cluster = await _cluster()
    with pytest.raises(ClusterReadError) as info:
        await snapshot_documents(_Verbs(cluster, forbid="PodDisruptionBudget"))
    message = str(info.value)
    assert "PodDisruptionBudget" in message and "poddisruptionbudgets.policy" in message
    assert "list" in message and "from-cluster-clusterrole.yaml" in message


async def test_namespaces_limit_namespaced_kinds() -> None:
    cluster = await _cluster()
    await cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    pod = gang_docs("elsewhere", 1, "1")[1]
    pod["metadata"]["namespace"] = "other"
    del pod["spec"]["schedulingGroup"]
    await cluster.create(pod)
    docs = await snapshot_documents(cluster, ["other"])
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "Pod"] == ["elsewhere-0"]
    assert sum(d["kind"] == "Node" for d in docs) == 2  # cluster-scoped: always whole


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--from-cluster", "scenario.yaml"], "--from-cluster takes no SCENARIO.yaml"),
        (["scenario.yaml", "--save", "x.yaml"], "--save needs --from-cluster"),
        (["scenario.yaml", "-n", "ns"], "-n/--namespace needs --from-cluster"),
        (["-f", "a.yaml", "-f", "b.yaml"], "give the scenario once"),
    ],
)
def test_flag_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", *argv]) == 2
    assert message in capsys.readouterr().err


def test_unreadable_cluster_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    assert main(["simulate", "--from-cluster", "--kubeconfig", str(config), "-o", "json"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: cannot read ") and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    json.dumps(err)  # plain text


def test_yaml_output_needs_from_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(node("n-0")))
    with pytest.raises(SystemExit) as e:
        main(["simulate", str(path), "-o", "yaml"])
    assert e.value.code == 2
    assert "yaml needs --from-cluster" in capsys.readouterr().err
