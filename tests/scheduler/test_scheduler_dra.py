"""Dynamic Resource Allocation: pod claims and PodGroup claims, on MemoryCluster and on the
real v1.37.2 API server (ResourceSlices created by the test; no driver, no kubelet).

The cases follow upstream's DynamicResources plugin tests and test/integration/dra: a claim
that does not exist makes the pod unschedulable; devices are allocated from the slices a node
can reach, by class and CEL selectors; a gang whose claims cannot all be served binds no pod
and allocates nothing; a claim shared by a PodGroup is allocated once, reserved for the
PodGroup, and its node restriction holds every pod of the group.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from dra_helpers import DRIVER, Dra, allocated, reserved
from sched_helpers import Env

from workloadbuilder.api import PodGroup, from_dict
from workloadbuilder.errors import NotFound
from workloadbuilder.scheduler import Scheduler, SchedulerConfig
from workloadbuilder.scheduler._dra import DynamicResources
from workloadbuilder.scheduler._interface import Code, Status
from workloadbuilder.scheduler._plugins import default_framework
from workloadbuilder.testing.builders import make_pod, make_pod_group

H100 = f'device.attributes["{DRIVER}"].model == "H100"'


@pytest.fixture
async def dra(env: Env) -> AsyncIterator[Dra]:
    d = Dra(env)
    try:
        yield d
    finally:
        await d.cleanup()


async def _condition(env: Env, pod: str) -> dict[str, Any] | None:
    return await env.pod_condition(pod)


async def test_pod_claims_get_devices_of_their_node(env: Env, dra: Dra) -> None:
    a = await env.node("a")
    b = await env.node("b")
    gpu = await dra.device_class("gpu")
    await dra.node_slice(a, 2, attributes={"model": "H100"})
    await dra.node_slice(b, 2, attributes={"model": "A100"})
    for i in range(3):
        await dra.claim(f"c{i}", gpu, selectors=(H100,))
        await dra.pod(f"p{i}", {"gpu": f"c{i}"})
    s = env.scheduler()
    await s.start()
    await env.seen(s, lambda: env.cached_pods(s) == 3)

    async def decided() -> bool:
        return len(await env.bound()) == 2 and await env.pod_condition("p2") is not None

    await env.until(s, decided)
    assert await env.bound() == {"p0": a, "p1": a}
    devices = set()
    for i in range(2):
        claim = await dra.get_claim(f"c{i}")
        got = allocated(claim)
        assert len(got) == 1 and got[0][:3] == ("gpu", DRIVER, a)
        devices.add(got[0][3])
        assert reserved(claim) == [("", "pods", f"p{i}")]
        terms = claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"]
        assert terms == [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [a]}]}
        ]
        assert "resource.kubernetes.io/delete-protection" in claim["metadata"]["finalizers"]
    assert devices == {"gpu-0", "gpu-1"}
    assert allocated(await dra.get_claim("c2")) == []
    cond = await env.pod_condition("p2")
    assert cond is not None and cond["reason"] == "Unschedulable"
    assert cond["message"] == "0/2 nodes are available: 2 cannot allocate all claims."

    # a new slice with a matching device is an event: the pod is retried and placed
    c = await env.node("c")
    await dra.node_slice(c, 1, attributes={"model": "H100"})

    async def p2_bound() -> bool:
        return "p2" in await env.bound()

    await env.until(s, p2_bound)
    assert (await env.bound())["p2"] == c
    assert allocated(await dra.get_claim("c2")) == [("gpu", DRIVER, c, "gpu-0")]


async def test_a_missing_claim_holds_the_pod_until_it_exists(env: Env, dra: Dra) -> None:
    # kube-scheduler v1.37.2: DynamicResources' PreEnqueue holds the pod silently (no
    # condition, no event) while a claim it names does not exist
    a = await env.node("a")
    gpu = await dra.device_class("gpu")
    await dra.node_slice(a, 1)
    await dra.pod("p", {"gpu": "later"})
    s = env.scheduler()
    await s.start()
    await env.seen(s, lambda: env.cached_pods(s) == 1)
    assert await s.until_idle() == 0
    e = s.queue.entities[("Pod", env.namespace, "p")]
    assert e.state == "gated" and e.gate_message == 'resourceclaim "later" not found'
    assert await env.pod_condition("p") is None
    assert await env.bound() == {}

    await dra.claim("later", gpu)

    async def bound() -> bool:
        return await env.bound() == {"p": a}

    await env.until(s, bound)
    assert reserved(await dra.get_claim("later")) == [("", "pods", "p")]


async def test_gang_claims_are_allocated_together_or_not_at_all(env: Env, dra: Dra) -> None:
    nodes = [await env.node(n) for n in ("a", "b", "c")]
    gpu = await dra.device_class("gpu")
    for n in nodes:
        await dra.node_slice(n, 2)
    await env.pod_group("train", 4)
    for i in range(4):
        await dra.claim(f"train-{i}", gpu, count=2)
        await dra.pod(f"train-{i}", {"gpu": f"train-{i}"}, "train")
    s = env.scheduler()
    await s.start()
    await env.seen(s, lambda: env.cached_pods(s) == 4)

    async def decided() -> bool:
        return await env.group_condition("train") is not None

    await env.until(s, decided)
    assert await env.bound() == {}
    for i in range(4):  # reverted together: nothing allocated
        assert allocated(await dra.get_claim(f"train-{i}")) == []
    cond = await env.group_condition("train")
    assert (cond.status, cond.reason) == ("False", "Unschedulable")
    assert cond.message.startswith("minCount 4: at most 3 pods fit, 1 short")
    assert 'cannot allocate claim "gpu"' in cond.message
    assert "0 of 2 matching devices free, 2 needed" in cond.message

    d = await env.node("d")
    await dra.node_slice(d, 2)

    async def all_bound() -> bool:
        return len(await env.bound("train")) == 4

    await env.until(s, all_bound)
    placed = await env.bound("train")
    assert sorted(placed.values()) == sorted([*nodes, d])
    for i in range(4):
        got = allocated(await dra.get_claim(f"train-{i}"))
        assert {g[2] for g in got} == {placed[f"train-{i}"]} and len(got) == 2


async def test_match_attribute_and_allocation_mode_all(env: Env, dra: Dra) -> None:
    a = await env.node("a", cpu="16")
    gpu = await dra.device_class("gpu")
    await dra.node_slice(a, 4, numa=[0, 1, 1, 0], model=["A", "B", "B", "C"])
    await dra.claim(
        "pair",
        gpu,
        requests=[
            {"name": "x", "exactly": {"deviceClassName": gpu}},
            {"name": "y", "exactly": {"deviceClassName": gpu}},
        ],
        constraints=[{"matchAttribute": f"{DRIVER}/model"}],
    )
    await dra.pod("p", {"gpu": "pair"})
    s = env.scheduler()
    await s.start()

    async def bound() -> bool:
        return "p" in await env.bound()

    await env.until(s, bound)
    got = allocated(await dra.get_claim("pair"))
    assert [(g[0], g[3]) for g in got] == [("x", "gpu-1"), ("y", "gpu-2")]  # the two "B"s

    # All: every matching device of the node, here gpu-0 ("A") and gpu-3 ("C")
    await dra.claim(
        "rest", gpu, mode="All", selectors=(f'device.attributes["{DRIVER}"].model in ["A", "C"]',)
    )
    await dra.pod("q", {"gpu": "rest"})
    # ... and All over devices some of which are in use cannot be allocated
    await dra.claim("every", gpu, mode="All")
    await dra.pod("r", {"gpu": "every"})

    async def decided() -> bool:
        return "q" in await env.bound() and await env.pod_condition("r") is not None

    await env.until(s, decided)
    assert {g[3] for g in allocated(await dra.get_claim("rest"))} == {"gpu-0", "gpu-3"}
    assert allocated(await dra.get_claim("every")) == []
    cond = await env.pod_condition("r")
    assert cond is not None and cond["message"] == (
        "0/1 nodes are available: 1 cannot allocate all claims."
    )


async def test_unsupported_requests_are_refused_not_ignored(env: Env, dra: Dra) -> None:
    a = await env.node("a")
    gpu = await dra.device_class("gpu")
    await dra.node_slice(a, 2)
    # consumable capacity (a request's ``capacity``) is not implemented: refused, not
    # ignored (firstAvailable, once refused here, is served: test_scheduler_dra2.py)
    await dra.claim(
        "choice",
        gpu,
        requests=[
            {
                "name": "gpu",
                "exactly": {
                    "deviceClassName": gpu,
                    "capacity": {"requests": {"memory": "10Gi"}},
                },
            }
        ],
    )
    await dra.pod("p", {"gpu": "choice"})
    s = env.scheduler()
    await s.start()

    async def failed() -> bool:
        return await env.pod_condition("p") is not None

    await env.until(s, failed)
    cond = await env.pod_condition("p")
    assert cond is not None and "capacity unsupported" in cond["message"]
    assert await env.bound() == {}
    assert allocated(await dra.get_claim("choice")) == []


async def test_group_claim_on_a_rack_wide_device_holds_the_gang_in_the_rack(
    env: Env, dra: Dra
) -> None:
    r1 = [await env.node(n, cpu="4", labels={"rack": "r1"}) for n in ("r1a", "r1b")]
    await env.node("r2a", cpu="16", labels={"rack": "r2"})  # roomier, but no fabric
    fabric = await dra.device_class("fabric")
    await dra.slice(
        "fabric-r1",
        {
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}
                ]
            }
        },
        pool="fabric-r1",
        devices=[{"name": "switch"}],
    )
    await dra.claim("fab", fabric)
    pg = await dra.pod_group("ring", 2, claims={"fabric": "fab"})
    for i in range(2):
        await dra.pod(f"ring-{i}", {"fabric": "fab"}, "ring", cpu="3")
    s = env.scheduler()
    await s.start()
    await env.seen(s, lambda: env.cached_pods(s) == 2)

    async def bound() -> bool:
        return len(await env.bound("ring")) == 2

    await env.until(s, bound)
    assert sorted((await env.bound("ring")).values()) == sorted(r1)
    claim = await dra.get_claim("fab")
    assert allocated(claim) == [("gpu", DRIVER, dra.name("fabric-r1"), "switch")]
    assert reserved(claim) == [("scheduling.k8s.io", "podgroups", "ring")]
    assert claim["status"]["reservedFor"][0]["uid"] == pg.metadata.uid
    sel = claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"]
    assert sel == [{"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}]


class _FailingBinder:
    name = "FailingBinder"

    async def bind(self, cluster: Any, pod: Any, node: str) -> Status:
        return Status(code=Code.ERROR, message="bind refused by the test")


async def test_a_failed_bind_releases_the_allocation(mem_env: Any) -> None:
    env, _ = mem_env
    dra = Dra(env)
    a = await env.node("a")
    gpu = await dra.device_class("gpu")
    await dra.node_slice(a, 1)
    await dra.claim("c", gpu)
    await dra.pod("p", {"gpu": "c"})
    fw = default_framework()
    fw.bind = [_FailingBinder()]
    fw.refresh()
    s = Scheduler(env.cluster, SchedulerConfig(scheduler_name=env.scheduler_name), framework=fw)
    env.schedulers.append(s)
    await s.start()
    await s.until_idle()
    claim = await dra.get_claim("c")
    assert allocated(claim) == []
    assert reserved(claim) == []
    assert await env.bound() == {}
    plugin = next(r for r in fw.reserve if r.name == "DynamicResources")
    assert isinstance(plugin, DynamicResources)
    assert not plugin.assumed  # nothing held in the scheduler either


async def test_template_claims_from_the_memory_cluster_claim_controller(mem_env: Any) -> None:
    """MemoryCluster plays kube-controller-manager's resourceclaim controller: one claim per
    pod for a pod template entry, one per PodGroup for the group's template entry."""
    env, _ = mem_env
    dra = Dra(env)
    nodes = [await env.node(n, labels={"rack": "r1"}) for n in ("a", "b")]
    gpu = await dra.device_class("gpu")
    fabric = await dra.device_class("fabric", 'device.driver == "fabric.example.com"')
    for n in nodes:
        await dra.node_slice(n, 1)
    await dra.slice(
        "fabric-r1",
        {"allNodes": True},
        pool="fabric",
        devices=[{"name": "switch"}],
        driver="fabric.example.com",
    )
    for name, cls in (("one-gpu", gpu), ("fabric", fabric)):
        await env.cluster.create(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaimTemplate",
                "metadata": {"name": name, "namespace": env.namespace},
                "spec": {
                    "spec": {
                        "devices": {
                            "requests": [{"name": "r", "exactly": {"deviceClassName": cls}}]
                        }
                    }
                },
            }
        )
    pg = await dra.pod_group("ring", 2, templates={"fabric": "fabric"})
    for i in range(2):
        await dra.pod(f"ring-{i}", {}, "ring", templates={"fabric": "fabric", "gpu": "one-gpu"})
    s = env.scheduler()
    await s.start()

    async def bound() -> bool:
        return len(await env.bound("ring")) == 2

    await env.until(s, bound)
    claims = {
        c["metadata"]["name"]: c
        for c in (await env.cluster.list("ResourceClaim", env.namespace)).items
    }
    group_claims = [n for n in claims if n.startswith("ring-fabric-")]
    assert len(group_claims) == 1 and len(claims) == 3
    group_claim = claims[group_claims[0]]
    assert reserved(group_claim) == [("scheduling.k8s.io", "podgroups", "ring")]
    assert group_claim["metadata"]["ownerReferences"][0]["uid"] == pg.metadata.uid
    assert group_claim["metadata"]["annotations"] == {
        "resource.kubernetes.io/pod-claim-name": "fabric"
    }
    pods = await env.pods()
    for i in range(2):
        statuses = pods[f"ring-{i}"]["status"]["resourceClaimStatuses"]
        assert [s_["name"] for s_ in statuses] == ["fabric", "gpu"]
        assert statuses[0]["resourceClaimName"] == group_claims[0]
        own = claims[statuses[1]["resourceClaimName"]]
        assert reserved(own) == [("", "pods", f"ring-{i}")]
        assert {g[2] for g in allocated(own)} == {pods[f"ring-{i}"]["spec"]["nodeName"]}

    # a finished pod: its own claim is released and deleted; the group claim stays reserved
    done = pods["ring-0"]["status"]["resourceClaimStatuses"][1]["resourceClaimName"]
    await env.cluster.patch(
        "Pod", "ring-0", {"status": {"phase": "Succeeded"}}, env.namespace, subresource="status"
    )
    names = {c["metadata"]["name"] for c in (await env.cluster.list("ResourceClaim")).items}
    assert done not in names and group_claims[0] in names
    assert reserved(await dra.get_claim(group_claims[0])) == [
        ("scheduling.k8s.io", "podgroups", "ring")
    ]


async def test_a_shared_claim_is_reserved_for_each_of_its_pods(env: Env, dra: Dra) -> None:
    a = await env.node("a")
    await env.node("b")
    gpu = await dra.device_class("gpu")
    await dra.node_slice(a, 1)
    await dra.claim("shared", gpu)
    await dra.pod("p", {"gpu": "shared"})
    await dra.pod("q", {"gpu": "shared"})
    s = env.scheduler()
    await s.start()

    async def bound() -> bool:
        return len(await env.bound()) == 2

    await env.until(s, bound)
    assert await env.bound() == {"p": a, "q": a}  # the allocation's node holds both
    claim = await dra.get_claim("shared")
    assert allocated(claim) == [("gpu", DRIVER, a, "gpu-0")]
    assert sorted(reserved(claim)) == [("", "pods", "p"), ("", "pods", "q")]


async def test_claim_problems_are_named(env: Env, dra: Dra) -> None:
    a = await env.node("a")
    gpu = await dra.device_class("gpu")
    await dra.node_slice(a, 2, attributes={"model": "H100"})
    await dra.claim("no-class", dra.name("nope"))
    await dra.claim("no-attr", gpu, selectors=(f'device.attributes["{DRIVER}"].colour == "red"',))
    await dra.claim("no-match", gpu, selectors=(f'device.attributes["{DRIVER}"].model == "B200"',))
    for claim in ("no-class", "no-attr", "no-match"):
        await dra.pod(f"p-{claim}", {"gpu": claim})
    s = env.scheduler()
    await s.start()

    async def decided() -> bool:
        return all(
            [
                await env.pod_condition(f"p-{c}") is not None
                for c in ("no-class", "no-attr", "no-match")
            ]
        )

    await env.until(s, decided)
    messages = {
        c: (await env.pod_condition(f"p-{c}") or {})["message"]
        for c in ("no-class", "no-attr", "no-match")
    }
    assert f'device class "{dra.name("nope")}" does not exist' in messages["no-class"]
    assert messages["no-attr"] == "0/1 nodes are available: 1 cannot allocate all claims."
    assert messages["no-match"] == "0/1 nodes are available: 1 cannot allocate all claims."
    assert await env.bound() == {}
    plugin = next(p for p in s.framework.reserve if isinstance(p, DynamicResources))
    pod = s.cache.pods[(env.namespace, "p-no-match")]
    reasons = plugin.diagnose_pod(pod, s.cache, s.cache.nodes.present_rows())
    assert reasons and "no device matches" in reasons[0][1] and "B200" in reasons[0][1]


async def test_only_the_newest_pool_generation_counts(env: Env, dra: Dra) -> None:
    a = await env.node("a")
    gpu = await dra.device_class("gpu")
    old = [{"name": f"old-{i}"} for i in range(2)]
    await dra.slice("a-old", {"nodeName": a}, pool="p", devices=old)
    full = dra.name("a-new")
    await env.cluster.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": full},
            "spec": {
                "driver": DRIVER,
                "pool": {"name": dra.name("p"), "generation": 2, "resourceSliceCount": 1},
                "nodeName": a,
                "devices": [{"name": "new-0"}],
            },
        }
    )
    dra.cluster_scoped.append(("ResourceSlice", full))
    await dra.claim("c", gpu)
    await dra.claim("d", gpu)
    await dra.pod("p", {"gpu": "c"})
    await dra.pod("q", {"gpu": "d"})
    s = env.scheduler()
    await s.start()

    async def decided() -> bool:
        return len(await env.bound()) == 1 and any(
            [await env.pod_condition(n) is not None for n in ("p", "q")]
        )

    await env.until(s, decided)
    got = [allocated(await dra.get_claim(n)) for n in ("c", "d")]
    assert sorted(x[0][3] for x in got if x) == ["new-0"]


async def test_a_failed_gang_allocates_no_group_claim(env: Env, dra: Dra) -> None:
    nodes = [await env.node(n, cpu="4", labels={"rack": "r1"}) for n in ("r1a", "r1b")]
    fabric = await dra.device_class("fabric")
    await dra.slice(
        "fabric-r1",
        {
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}
                ]
            }
        },
        pool="fabric-r1",
        devices=[{"name": "switch"}],
    )
    await dra.claim("fab", fabric)
    await dra.pod_group("ring", 3, claims={"fabric": "fab"})
    for i in range(3):  # three pods of 3 cpu: only two 4-cpu nodes in the rack
        await dra.pod(f"ring-{i}", {"fabric": "fab"}, "ring", cpu="3")
    s = env.scheduler()
    await s.start()

    async def decided() -> bool:
        return await env.group_condition("ring") is not None

    await env.until(s, decided)
    assert await env.bound() == {}
    claim = await dra.get_claim("fab")
    assert allocated(claim) == [] and reserved(claim) == []
    cond = await env.group_condition("ring")
    assert cond.message.startswith("minCount 3: at most 2 pods fit, 1 short")

    c = await env.node("r1c", cpu="4", labels={"rack": "r1"})

    async def bound() -> bool:
        return len(await env.bound()) == 3

    await env.until(s, bound)
    assert sorted((await env.bound()).values()) == sorted([*nodes, c])
    assert reserved(await dra.get_claim("fab")) == [("scheduling.k8s.io", "podgroups", "ring")]


async def test_preemption_never_evicts_for_devices_it_cannot_get(env: Env, dra: Dra) -> None:
    a = await env.node("a", cpu="4")
    gpu = await dra.device_class("gpu")
    await dra.node_slice(a, 1)
    low = await env.priority_class("low", 10)
    high = await env.priority_class("high", 1000)
    # a low-priority gang pod holds the cpu; the only device is held by another claim
    await env.pod_group("fill", 1, priority_class=low)
    await env.pod("filler", "fill", cpu="4", priority_class=low)
    await dra.claim("taken", gpu)
    await dra.claim("wanted", gpu)
    s = env.scheduler(preemption=True)
    await s.start()
    await dra.pod("holder", {"gpu": "taken"}, cpu="0")  # gets the device (no cpu needed)

    async def held() -> bool:
        return "holder" in await env.bound() and "filler" in await env.bound()

    await env.until(s, held)
    pod = make_pod("urgent", env.namespace).scheduler_name(env.scheduler_name)
    pod.request("cpu", "4").priority_class(high).pod_resource_claim("gpu", claim="wanted")
    await env.cluster.create(pod.obj())

    async def decided() -> bool:
        return await env.pod_condition("urgent") is not None

    await env.until(s, decided)
    cond = await env.pod_condition("urgent")
    assert cond is not None and "resource claims cannot be allocated" in cond["message"]
    assert "filler" in await env.bound()  # not evicted


async def test_single_pod_preemption_frees_no_devices(env: Env, dra: Dra) -> None:
    # kube-scheduler v1.37.2: DynamicResources has no PreFilterExtensions and its Filter
    # failure is UnschedulableAndUnresolvable, so a single pod never preempts a pod for the
    # devices its claim holds (parity-tested in tests/controlplane/test_dra_parity.py)
    a = await env.node("a", cpu="4")
    gpu = await dra.device_class("gpu")
    await dra.node_slice(a, 1)
    low = await env.priority_class("low", 10)
    high = await env.priority_class("high", 1000)
    await dra.claim("held", gpu)
    await dra.claim("wanted", gpu)
    s = env.scheduler(preemption=True)
    await s.start()
    holder = make_pod("holder", env.namespace).scheduler_name(env.scheduler_name)
    holder.request("cpu", "4").priority_class(low).pod_resource_claim("gpu", claim="held")
    await env.cluster.create(holder.obj())

    async def held() -> bool:
        return "holder" in await env.bound()

    await env.until(s, held)
    pod = make_pod("urgent", env.namespace).scheduler_name(env.scheduler_name)
    pod.request("cpu", "4").priority_class(high).pod_resource_claim("gpu", claim="wanted")
    await env.cluster.create(pod.obj())

    async def decided() -> bool:
        return await env.pod_condition("urgent") is not None

    await env.until(s, decided)
    assert await s.until_idle() == 0
    cond = await env.pod_condition("urgent")
    assert cond is not None and cond["message"] == (
        "0/1 nodes are available: 1 Insufficient cpu. preemption: the pod's "
        "resource claims cannot be allocated on 1 node with lower-priority pods (a single "
        "pod's preemption frees no devices)."
    )
    holder_now = (await env.pods())["holder"]
    assert not holder_now["metadata"].get("deletionTimestamp")  # not evicted
    assert reserved(await dra.get_claim("held")) == [("", "pods", "holder")]
    assert allocated(await dra.get_claim("wanted")) == []


async def test_preemption_frees_cpu_for_a_pod_whose_devices_are_free(env: Env, dra: Dra) -> None:
    a = await env.node("a", cpu="4")
    gpu = await dra.device_class("gpu")
    await dra.node_slice(a, 1)
    low = await env.priority_class("low", 10)
    high = await env.priority_class("high", 1000)
    await env.pod_group("fill", 1, priority_class=low)
    await env.pod("filler", "fill", cpu="4", priority_class=low)
    await dra.claim("wanted", gpu)
    s = env.scheduler(preemption=True)
    await s.start()

    async def held() -> bool:
        return "filler" in await env.bound()

    await env.until(s, held)
    pod = make_pod("urgent", env.namespace).scheduler_name(env.scheduler_name)
    pod.request("cpu", "4").priority_class(high).pod_resource_claim("gpu", claim="wanted")
    await env.cluster.create(pod.obj())

    async def preempted() -> bool:
        filler = (await env.pods()).get("filler")
        return filler is None or bool(filler["metadata"].get("deletionTimestamp"))

    await env.until(s, preempted)
    with contextlib.suppress(NotFound):  # no kubelet: finish the victim's termination
        await env.cluster.delete("Pod", "filler", env.namespace, grace_period_seconds=0)

    async def done() -> bool:
        return "urgent" in await env.bound()

    await env.until(s, done)
    assert "filler" not in await env.pods()
    assert allocated(await dra.get_claim("wanted")) == [("gpu", DRIVER, a, "gpu-0")]


async def test_pod_and_group_claims_through_the_pods_lifecycle(mem_env: Any) -> None:
    """upstream test/integration/dra (workload resource claims): a basic PodGroup with a
    claim of its own and pods that also share a pod-level claim; the controller releases
    the pods' reservations as they go, the group's only with the PodGroup."""
    env, _ = mem_env
    dra = Dra(env)
    a = await env.node("a")
    gpu = await dra.device_class("gpu")
    await dra.node_slice(a, 2)
    await dra.claim("for-group", gpu)
    await dra.claim("for-pods", gpu)
    pg = make_pod_group("pg", env.namespace).basic().resource_claim("grp", claim="for-group")
    created = await env.cluster.create(from_dict(pg.obj(), PodGroup))
    s = env.scheduler()
    await s.start()
    for n in ("p1", "p2"):
        await dra.pod(n, {"grp": "for-group", "own": "for-pods"}, "pg")

        async def bound(n: str = n) -> bool:
            return n in await env.bound()

        await env.until(s, bound)
    group_ref = ("scheduling.k8s.io", "podgroups", "pg")
    assert reserved(await dra.get_claim("for-group")) == [group_ref]
    assert sorted(reserved(await dra.get_claim("for-pods"))) == [
        ("", "pods", "p1"),
        ("", "pods", "p2"),
    ]
    await env.cluster.delete("Pod", "p1", env.namespace)
    assert reserved(await dra.get_claim("for-pods")) == [("", "pods", "p2")]
    assert reserved(await dra.get_claim("for-group")) == [group_ref]
    await env.cluster.delete("Pod", "p2", env.namespace)
    assert reserved(await dra.get_claim("for-pods")) == []
    assert allocated(await dra.get_claim("for-pods")) == []  # deallocated
    assert reserved(await dra.get_claim("for-group")) == [group_ref]
    assert isinstance(created, PodGroup)
    await env.cluster.delete("PodGroup", "pg", env.namespace)
    claim = await dra.get_claim("for-group")
    assert reserved(claim) == [] and allocated(claim) == []


@pytest.mark.parametrize(
    ("expression", "fits"),
    [
        (f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0', True),
        (f'device.capacity["{DRIVER}"].memory.isGreaterThan(quantity("100Gi"))', False),
        (f'device.capacity["{DRIVER}"].memory.isLessThan(quantity("100Gi"))', True),
        (f'"model" in device.attributes["{DRIVER}"]', True),
        (f'device.attributes["{DRIVER}"].model', False),  # not a boolean
        ('device.attributes["other.example.com"].model == "H100"', False),  # runtime error
        (f'device.attributes["{DRIVER}"].numa == 1 && device.driver == "{DRIVER}"', True),
    ],
)
async def test_cel_selectors(mem_env: Any, expression: str, fits: bool) -> None:
    env, _ = mem_env
    dra = Dra(env)
    a = await env.node("a")
    gpu = await dra.device_class("gpu")
    await dra.slice(
        "a-gpus",
        {"nodeName": a},
        pool=a,
        prefix_pool=False,
        devices=[
            {
                "name": "gpu-0",
                # a qualified and an unqualified name: both in the driver's domain
                "attributes": {f"{DRIVER}/model": {"string": "H100"}, "numa": {"int": 1}},
                "capacity": {"memory": {"value": "80Gi"}},
            }
        ],
    )
    await dra.claim("c", gpu, selectors=(expression,))
    await dra.pod("p", {"gpu": "c"})
    s = env.scheduler()
    await s.start()

    async def decided() -> bool:
        return "p" in await env.bound() or await env.pod_condition("p") is not None

    await env.until(s, decided)
    assert ("p" in await env.bound()) is fits


@pytest.mark.parametrize("env", ["memory"], indirect=True)
async def test_group_preemption_counts_the_devices_victims_hold(env: Env, dra: Dra) -> None:
    """A high-priority gang whose only missing piece is a device held by a lower-priority
    gang's claim preempts that gang; the claim is released with its pod (MemoryCluster plays
    the claim controller) and the device goes to the preemptor.

    MemoryCluster only: on the real API server the release is kube-controller-manager's
    resourceclaim controller, which the scheduler suite's plane does not run."""
    a = await env.node("a", cpu="8")
    gpu = await dra.device_class("gpu")
    await dra.node_slice(a, 1)
    low = await env.priority_class("low", 10)
    high = await env.priority_class("high", 1000)
    await dra.claim("held", gpu)
    await dra.claim("wanted", gpu)
    await env.pod_group("hold", 1, priority_class=low)
    pod = make_pod("hold-0", env.namespace).scheduler_name(env.scheduler_name)
    pod.request("cpu", "1").priority_class(low).pod_group("hold")
    await env.cluster.create(pod.pod_resource_claim("gpu", claim="held").obj())
    s = env.scheduler(preemption=True)
    await s.start()

    async def held() -> bool:
        return "hold-0" in await env.bound()

    await env.until(s, held)
    await env.pod_group("want", 1, priority_class=high)
    pod = make_pod("want-0", env.namespace).scheduler_name(env.scheduler_name)
    pod.request("cpu", "1").priority_class(high).pod_group("want")
    await env.cluster.create(pod.pod_resource_claim("gpu", claim="wanted").obj())

    async def moved() -> bool:
        return "want-0" in await env.bound()

    await env.until(s, moved)
    assert "hold-0" not in await env.pods()
    assert allocated(await dra.get_claim("wanted")) == [("gpu", DRIVER, a, "gpu-0")]
    assert allocated(await dra.get_claim("held")) == []


async def test_claims_are_never_ignored_when_the_plugin_is_disabled(mem_env: Any) -> None:
    env, _ = mem_env
    dra = Dra(env)
    a = await env.node("a")
    gpu = await dra.device_class("gpu")
    await dra.node_slice(a, 1)
    await dra.claim("c", gpu)
    await dra.pod("p", {"gpu": "c"})
    fw = default_framework()
    fw.reserve = []  # a profile that disables DynamicResources
    fw.refresh()
    s = Scheduler(env.cluster, SchedulerConfig(scheduler_name=env.scheduler_name), framework=fw)
    env.schedulers.append(s)
    await s.start()
    await s.until_idle()
    assert await env.bound() == {}
    cond = await env.pod_condition("p")
    assert cond is not None and "DynamicResources plugin is disabled" in cond["message"]


async def test_gang_explanation_aggregates_devices_per_class(env: Env, dra: Dra) -> None:
    # issue 12: a gang short of devices says, per device class, how many of its pods can get
    # one, and on how many nodes no device matches a selector
    nodes = [await env.node(f"n{i}") for i in range(8)]
    gpu = await dra.device_class("gpu")
    await dra.node_slice(nodes[0], 2, attributes={"model": "H100"})
    for n in nodes[1:]:
        await dra.node_slice(n, 2, attributes={"model": "A100"})
    await env.pod_group("train", 4)
    for i in range(4):
        await dra.claim(f"train-{i}", gpu, selectors=(H100,))
        await dra.pod(f"train-{i}", {"gpu": f"train-{i}"}, "train")
    s = env.scheduler()
    await s.start()
    await env.seen(s, lambda: env.cached_pods(s) == 4)

    async def decided() -> bool:
        return await env.group_condition("train") is not None

    await env.until(s, decided)
    assert await env.bound() == {}
    cond = await env.group_condition("train")
    assert (cond.status, cond.reason) == ("False", "Unschedulable")
    assert cond.message == (
        f"minCount 4: at most 3 pods fit, 1 short; 2 fit on {nodes[0]}; the rest fit nowhere "
        'once those are placed: 7 of 8 nodes cannot allocate claim "gpu" (train-2): '
        f"request 'gpu': no device matches `{H100}`; 1 of 8 nodes cannot allocate claim "
        f"\"gpu\" (train-2): request 'gpu' (class {gpu}): 0 of 2 matching devices free, "
        f"1 needed; {gpu} class: 2 of 4 pods can get a device; no device matches `{H100}` "
        "on 7 of 8 nodes"
    )
