"""The volume plugins (VolumeBinding, VolumeRestrictions, VolumeZone, NodeVolumeLimits),
gang-aware, on MemoryCluster and on the real v1.37.2 API server. What needs the PV
controller to bind a claim (PreBind) runs on MemoryCluster, whose stand-in binds and
provisions at once; on the real API server (no kube-controller-manager in this suite) only
what keeps pods pending or needs no binding; test_volume_parity.py runs the binding cases
against kube-scheduler v1.37.2 with kube-controller-manager's PV controller.

The rules, in our words, from kube-scheduler v1.37.2's plugins and their tests
(``pkg/scheduler/framework/plugins/{volumebinding,volumerestrictions,volumezone,
nodevolumelimits}/*_test.go``):

1. every claim a pod names must exist (a generic ephemeral volume's ``<pod>-<volume>``,
   created by the ephemeral volume controller and owned by the pod); an unbound claim of an
   ``Immediate`` class keeps the pod pending;
2. a bound claim's PersistentVolume node affinity restricts the nodes; a claim bound to a
   volume that does not exist fits nowhere (VolumeZone's PreFilter names the volume);
3. a ``WaitForFirstConsumer`` claim fits on a node where an available volume of its class,
   size, access modes and selector can be bound (the smallest), or where its class
   provisions (``allowedTopologies``); PreBind binds the volume or selects the node, and
   undoes it when the PV controller does not bind the claim;
4. a ``ReadWriteOncePod`` claim used by one pod is used by no other; two pods on one node
   cannot use one writable iSCSI disk (read-only both: they can);
5. a bound volume's zone / region labels must match the node's (nodes without such labels
   pass);
6. a CSINode's ``allocatable.count`` of a driver bounds the volumes of that driver on the
   node (one volume used by two pods counts once);
7. inside one gang cycle, volumes chosen, claims used and volumes attached by the pods placed
   before count: a gang binds only if all its pods' volumes fit together.
"""

from __future__ import annotations

import contextlib
from typing import Any

from sched_helpers import Env

from workloadbuilder.cluster import MemoryCluster
from workloadbuilder.errors import NotFound
from workloadbuilder.scheduler import Scheduler

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


class Vol:
    """Volume objects for one test (cluster-scoped ones named with the env's prefix)."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self.c = env.cluster
        self.created: list[tuple[str, str]] = []

    def name(self, n: str) -> str:
        return self.env.node_name(n)

    async def node(self, n: str, **labels: str) -> str:
        full = self.name(n)
        return await self.env.node(n, labels={HOST: full, **labels})

    async def storage_class(
        self,
        n: str,
        *,
        wffc: bool = True,
        provisioner: str = "kubernetes.io/no-provisioner",
        topologies: list[dict[str, Any]] | None = None,
    ) -> str:
        full = self.name(n)
        obj: dict[str, Any] = {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": full},
            "provisioner": provisioner,
            "volumeBindingMode": "WaitForFirstConsumer" if wffc else "Immediate",
        }
        if topologies:
            obj["allowedTopologies"] = topologies
        await self.c.create(obj)
        self.created.append(("StorageClass", full))
        return full

    async def pv(
        self,
        n: str,
        cls: str,
        *,
        size: str = "10Gi",
        node: str | None = None,
        modes: tuple[str, ...] = ("ReadWriteOnce",),
        labels: dict[str, str] | None = None,
        claim: str | None = None,
        csi: str | None = None,
    ) -> str:
        full = self.name(n)
        spec: dict[str, Any] = {
            "capacity": {"storage": size},
            "accessModes": list(modes),
            "storageClassName": cls,
        }
        if csi:
            spec["csi"] = {"driver": csi, "volumeHandle": full}
        else:
            spec["local"] = {"path": "/data"}
        host = self.name(node) if node else None
        if host or not csi:
            values = [host] if host else [self.name("nowhere")]
            term = {"matchExpressions": [{"key": HOST, "operator": "In", "values": values}]}
            spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [term]}}
        if claim:
            spec["claimRef"] = {"namespace": self.env.namespace, "name": claim}
        meta: dict[str, Any] = {"name": full}
        if labels:
            meta["labels"] = labels
        await self.c.create(
            {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta, "spec": spec}
        )
        self.created.append(("PersistentVolume", full))
        return full

    async def pvc(
        self,
        n: str,
        cls: str,
        *,
        size: str = "5Gi",
        modes: tuple[str, ...] = ("ReadWriteOnce",),
        volume: str | None = None,
        selector: dict[str, Any] | None = None,
        owner: dict[str, Any] | None = None,
    ) -> str:
        """A claim; ``volume``: already bound to that volume (as the PV controller leaves
        it: ``volumeName`` and the bind-completed annotation)."""
        meta: dict[str, Any] = {"name": n, "namespace": self.env.namespace}
        spec: dict[str, Any] = {
            "accessModes": list(modes),
            "storageClassName": cls,
            "resources": {"requests": {"storage": size}},
        }
        if volume:
            spec["volumeName"] = volume
            meta["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
        if selector:
            spec["selector"] = selector
        if owner:
            meta["ownerReferences"] = [owner]
        await self.c.create(
            {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec}
        )
        return n

    async def bound_pvc(self, n: str, cls: str, **pv: Any) -> tuple[str, str]:
        """A volume and a claim bound to each other."""
        vol = await self.pv(f"pv-{n}", cls, claim=n, **pv)
        await self.pvc(n, cls, volume=vol, modes=pv.get("modes", ("ReadWriteOnce",)))
        return vol, n

    async def csi_node(self, n: str, driver: str, count: int) -> None:
        full = self.name(n)
        drivers = [{"name": driver, "nodeID": full, "allocatable": {"count": count}}]
        await self.c.create(
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "CSINode",
                "metadata": {"name": full},
                "spec": {"drivers": drivers},
            }
        )
        self.created.append(("CSINode", full))

    async def cleanup(self) -> None:
        for kind, name in reversed(self.created):
            with contextlib.suppress(NotFound):
                await self.c.delete(kind, name)


def claims(*names: str) -> dict[str, Any]:
    return {
        "volumes": [
            {"name": f"v{i}", "persistentVolumeClaim": {"claimName": n}}
            for i, n in enumerate(names)
        ]
    }


async def _settled(env: Env, s: Scheduler, names: list[str]) -> dict[str, str]:
    """Run until every named pod is bound or has a PodScheduled condition; the bindings."""

    async def check() -> bool:
        bound = await env.bound()
        for n in names:
            if n not in bound and await env.pod_condition(n) is None:
                return False
        return True

    await env.until(s, check)
    return {n: node for n, node in (await env.bound()).items() if n in names}


async def _message(env: Env, pod: str) -> str:
    cond = await env.pod_condition(pod)
    assert cond is not None and cond["status"] == "False", cond
    return str(cond["message"])


# ---- VolumeBinding: claims that must exist, Immediate claims, bound volumes -------------------


async def test_a_missing_claim_keeps_the_pod_pending(env: Env) -> None:
    v = Vol(env)
    a = await v.node("a")
    await env.pod("missing", spec=claims("nope"))
    await env.pod("plain")
    s = env.scheduler()
    await s.start()
    try:
        assert await _settled(env, s, ["missing", "plain"]) == {"plain": a}
        assert 'persistentvolumeclaim "nope" not found' in await _message(env, "missing")
    finally:
        await v.cleanup()


async def test_a_generic_ephemeral_volume_waits_for_its_claim_owned_by_the_pod(env: Env) -> None:
    v = Vol(env)
    await v.node("a")
    cls = await v.storage_class("fast", provisioner="fast.example.com")
    template = {
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": cls,
            "resources": {"requests": {"storage": "1Gi"}},
        }
    }
    eph = {"volumes": [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": template}}]}
    await env.pod("eph", spec=eph)
    await env.pod("other", spec=eph)
    # a claim of the right name that the pod does not own
    await v.pvc("other-scratch", cls)
    s = env.scheduler()
    await s.start()
    try:
        assert await _settled(env, s, ["eph", "other"]) == {}
        msg = await _message(env, "eph")
        assert (
            "waiting for ephemeral volume controller to create the persistentvolumeclaim "
            '"eph-scratch"'
        ) in msg
        other = await _message(env, "other")
        assert "was not created for pod" in other and "(pod is not owner)" in other
    finally:
        await v.cleanup()


async def test_an_unbound_immediate_claim_keeps_the_pod_pending(env: Env) -> None:
    v = Vol(env)
    await v.node("a")
    cls = await v.storage_class("imm", wffc=False)
    await v.pvc("data", cls)  # no volume, a class that does not provision: stays unbound
    await env.pod("p", spec=claims("data"))
    s = env.scheduler()
    await s.start()
    try:
        assert await _settled(env, s, ["p"]) == {}
        assert "pod has unbound immediate PersistentVolumeClaims" in await _message(env, "p")
    finally:
        await v.cleanup()


async def test_a_bound_volume_node_affinity_picks_the_node(env: Env) -> None:
    v = Vol(env)
    await v.node("a")
    b = await v.node("b")
    cls = await v.storage_class("local")
    await v.bound_pvc("on-b", cls, node="b")
    await v.bound_pvc("nowhere", cls)  # node affinity no node matches
    await env.pod("p", spec=claims("on-b"))
    await env.pod("q", spec=claims("nowhere"))
    s = env.scheduler()
    await s.start()
    try:
        assert await _settled(env, s, ["p", "q"]) == {"p": b}
        assert "2 node(s) didn't match PersistentVolume's node affinity" in await _message(env, "q")
    finally:
        await v.cleanup()


async def test_a_claim_bound_to_a_missing_volume_fits_nowhere(env: Env) -> None:
    v = Vol(env)
    await v.node("a")
    cls = await v.storage_class("local")
    await v.pvc("data", cls, volume=v.name("gone"))
    await env.pod("p", spec=claims("data"))
    s = env.scheduler()
    await s.start()
    try:
        assert await _settled(env, s, ["p"]) == {}
        # VolumeZone's PreFilter looks the volume up before VolumeBinding's Filter would
        assert f'persistentvolume "{v.name("gone")}" not found' in await _message(env, "p")
    finally:
        await v.cleanup()


# ---- VolumeBinding: WaitForFirstConsumer ------------------------------------------------------


async def test_no_available_volume_matches_the_claim(env: Env) -> None:
    """Too small, another class, another access mode, or not selected: no node fits."""
    v = Vol(env)
    await v.node("a")
    cls = await v.storage_class("local")
    other = await v.storage_class("other")
    await v.pv("small", cls, size="1Gi", node="a")
    await v.pv("classy", other, node="a")
    await v.pv("rwx", cls, node="a", modes=("ReadWriteMany",))
    await v.pv("unlabelled", cls, node="a")
    await v.pvc("big", cls, size="50Gi")
    await v.pvc("rwo", cls, size="1Gi", modes=("ReadWriteOnce", "ReadOnlyMany"))
    await v.pvc("picky", cls, size="1Gi", selector={"matchLabels": {"tier": "gold"}})
    for n in ("big", "rwo", "picky"):
        await env.pod(n, spec=claims(n))
    s = env.scheduler()
    await s.start()
    try:
        assert await _settled(env, s, ["big", "rwo", "picky"]) == {}
        for n in ("big", "rwo", "picky"):
            msg = await _message(env, n)
            assert "1 node(s) didn't find available persistent volumes to bind" in msg, (n, msg)
    finally:
        await v.cleanup()


async def test_a_class_that_cannot_provision_on_the_node_fits_nowhere(env: Env) -> None:
    v = Vol(env)
    await v.node("a", **{ZONE: v.name("z1")})
    zone = [{"matchLabelExpressions": [{"key": ZONE, "values": [v.name("z2")]}]}]
    cls = await v.storage_class("fast", provisioner="fast.example.com", topologies=zone)
    await v.pvc("data", cls)
    await env.pod("p", spec=claims("data"))
    s = env.scheduler()
    await s.start()
    try:
        assert await _settled(env, s, ["p"]) == {}
        assert "didn't find available persistent volumes to bind" in await _message(env, "p")
    finally:
        await v.cleanup()


async def test_storage_capacity_tracking_is_refused_with_a_reason(env: Env) -> None:
    v = Vol(env)
    await v.node("a")
    driver = v.name("cap.example.com")
    await env.cluster.create(
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSIDriver",
            "metadata": {"name": driver},
            "spec": {"storageCapacity": True},
        }
    )
    v.created.append(("CSIDriver", driver))
    cls = await v.storage_class("cap", provisioner=driver)
    await v.pvc("data", cls)
    await env.pod("p", spec=claims("data"))
    s = env.scheduler()
    await s.start()
    try:
        assert await _settled(env, s, ["p"]) == {}
        msg = await _message(env, "p")
        assert "storageCapacity: true" in msg and "CSIStorageCapacity" in msg
    finally:
        await v.cleanup()


async def test_the_smallest_matching_volume_is_bound_on_its_node() -> None:
    env = Env(MemoryCluster(), "default", "memory")
    v = Vol(env)
    a = await v.node("a")
    cls = await v.storage_class("local")
    await v.pv("big", cls, size="100Gi", node="a")
    await v.pv("fits", cls, size="6Gi", node="a")
    await v.pv("tiny", cls, size="1Gi", node="a")
    await v.pvc("data", cls, size="5Gi")
    await env.pod("p", spec=claims("data"))
    s = env.scheduler()
    await s.start()
    try:
        assert await _settled(env, s, ["p"]) == {"p": a}
        pvc = await env.cluster.get("PersistentVolumeClaim", "data", "default")
        assert isinstance(pvc, dict) and pvc["spec"]["volumeName"] == "fits"
        pv = await env.cluster.get("PersistentVolume", "fits")
        assert isinstance(pv, dict) and pv["spec"]["claimRef"]["name"] == "data"
        assert pv["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] == "yes"
    finally:
        await env.cleanup()


async def test_dynamic_provisioning_selects_the_node() -> None:
    env = Env(MemoryCluster(), "default", "memory")
    v = Vol(env)
    await v.node("a", **{ZONE: "z1"})
    b = await v.node("b", **{ZONE: "z2"})
    zone = [{"matchLabelExpressions": [{"key": ZONE, "values": ["z2"]}]}]
    cls = await v.storage_class("fast", provisioner="fast.example.com", topologies=zone)
    await v.pvc("data", cls)
    await env.pod("p", spec=claims("data"))
    s = env.scheduler()
    await s.start()
    try:
        assert await _settled(env, s, ["p"]) == {"p": b}
        pvc = await env.cluster.get("PersistentVolumeClaim", "data", "default")
        assert isinstance(pvc, dict)
        assert pvc["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == b
        assert pvc["spec"]["volumeName"].startswith("pvc-")
    finally:
        await env.cleanup()


async def test_a_gang_binds_only_when_every_pod_gets_its_own_volume() -> None:
    env = Env(MemoryCluster(), "default", "memory")
    v = Vol(env)
    await v.node("a")
    await v.node("b")
    cls = await v.storage_class("local")
    await v.pv("pv-a", cls, node="a")
    await v.pv("pv-b", cls, node="b")
    for i in range(3):
        await v.pvc(f"ckpt-{i}", cls)
    await env.pod_group("g", 3)
    for i in range(3):
        await env.pod(f"g-{i}", "g", spec=claims(f"ckpt-{i}"))
    s = env.scheduler()
    await s.start()
    try:

        async def failed() -> bool:
            return await env.group_condition("g") is not None

        await env.until(s, failed)
        assert await env.bound() == {}
        cond = await env.group_condition("g")
        assert cond.status == "False" and "at most 2 pods fit" in cond.message
        assert "no available PersistentVolume for claim" in cond.message
        pv_a = await env.cluster.get("PersistentVolume", "pv-a")
        assert isinstance(pv_a, dict) and "claimRef" not in pv_a["spec"]  # nothing written
        await v.pv("pv-a2", cls, node="a")

        async def bound() -> bool:
            return len(await env.bound()) == 3

        await env.until(s, bound)
        names = set()
        for i in range(3):
            pvc = await env.cluster.get("PersistentVolumeClaim", f"ckpt-{i}", "default")
            assert isinstance(pvc, dict)
            names.add(pvc["spec"]["volumeName"])
        assert names == {"pv-a", "pv-b", "pv-a2"}
    finally:
        await env.cleanup()


async def test_a_binding_the_pv_controller_does_not_finish_is_undone() -> None:
    """No PV controller: PreBind gives up after the bind timeout, the pod is not bound, and
    the volume's claimRef and the claim's selected node are taken back."""
    env = Env(MemoryCluster(pv_controller=False), "default", "memory")
    v = Vol(env)
    await v.node("a")
    local = await v.storage_class("local")
    fast = await v.storage_class("fast", provisioner="fast.example.com")
    await v.pv("pv-a", local, node="a")
    pv_a = await env.cluster.get("PersistentVolume", "pv-a")  # as the PV controller would
    assert isinstance(pv_a, dict)
    await env.cluster.update_status({**pv_a, "status": {"phase": "Available"}})
    await v.pvc("static", local)
    await v.pvc("dynamic", fast)
    await env.pod("p", spec=claims("static", "dynamic"))
    s = env.scheduler()
    for plugin in s.framework.reserve:
        if plugin.name == "VolumeBinding":
            plugin.bind_timeout = 0.3  # type: ignore[attr-defined]
    await s.start()
    try:
        await s.until_idle()
        assert await env.bound() == {}
        pv = await env.cluster.get("PersistentVolume", "pv-a")
        pvc = await env.cluster.get("PersistentVolumeClaim", "dynamic", "default")
        assert isinstance(pv, dict) and isinstance(pvc, dict)
        assert "claimRef" not in pv["spec"]
        assert "volume.kubernetes.io/selected-node" not in (
            pvc["metadata"].get("annotations") or {}
        )
    finally:
        await env.cleanup()


# ---- VolumeRestrictions -----------------------------------------------------------------------


async def test_a_read_write_once_pod_claim_in_use_keeps_the_second_pod_pending(env: Env) -> None:
    v = Vol(env)
    a = await v.node("a")
    await v.node("b")
    cls = await v.storage_class("local")
    await v.bound_pvc("solo", cls, modes=("ReadWriteOncePod",), csi="disk.example.com")
    await env.pod("first", spec=claims("solo"), node_name=a)
    await env.pod("second", spec=claims("solo"))
    s = env.scheduler()
    await s.start()
    try:
        assert await _settled(env, s, ["second"]) == {}
        msg = await _message(env, "second")
        assert (
            "2 node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access "
            "mode already in-use by another pod"
        ) in msg
    finally:
        await v.cleanup()


async def test_two_pods_of_a_gang_cannot_share_a_read_write_once_pod_claim(env: Env) -> None:
    v = Vol(env)
    await v.node("a")
    await v.node("b")
    cls = await v.storage_class("local")
    await v.bound_pvc("solo", cls, modes=("ReadWriteOncePod",), csi="disk.example.com")
    await env.gang("g", 2, spec=claims("solo"))
    s = env.scheduler()
    await s.start()
    try:

        async def failed() -> bool:
            return await env.group_condition("g") is not None

        await env.until(s, failed)
        assert await env.bound() == {}
        cond = await env.group_condition("g")
        assert cond.status == "False" and "ReadWriteOncePod" in cond.message
    finally:
        await v.cleanup()


def _iscsi(iqn: str, read_only: bool = False) -> dict[str, Any]:
    src = {"targetPortal": "10.0.0.1:3260", "iqn": iqn, "lun": 0, "readOnly": read_only}
    return {"volumes": [{"name": "disk", "iscsi": src}]}


async def test_two_pods_on_one_node_cannot_both_write_one_iscsi_disk(env: Env) -> None:
    v = Vol(env)
    a = await v.node("a")
    iqn = "iqn.2026-12.test:disk1"
    await env.pod("writer", spec=_iscsi(iqn), node_name=a)
    await env.pod("second", spec=_iscsi(iqn))
    await env.pod("reader", spec=_iscsi("iqn.2026-12.test:disk2", read_only=True), node_name=a)
    await env.pod("reader2", spec=_iscsi("iqn.2026-12.test:disk2", read_only=True))
    s = env.scheduler()
    await s.start()
    try:
        assert await _settled(env, s, ["second", "reader2"]) == {"reader2": a}
        assert "1 node(s) had no available disk" in await _message(env, "second")
    finally:
        await v.cleanup()


# ---- VolumeZone -------------------------------------------------------------------------------


async def test_a_bound_volume_zone_label_must_match_the_node(env: Env) -> None:
    v = Vol(env)
    await v.node("a", **{ZONE: v.name("z1")})
    b = await v.node("b", **{ZONE: v.name("z2")})
    cls = await v.storage_class("csi")
    await v.bound_pvc("z2", cls, csi="disk.example.com", labels={ZONE: v.name("z2")})
    await v.bound_pvc("z3", cls, csi="disk.example.com", labels={ZONE: v.name("z3")})
    await env.pod("p", spec=claims("z2"))
    await env.pod("q", spec=claims("z3"))
    s = env.scheduler()
    await s.start()
    try:
        assert await _settled(env, s, ["p", "q"]) == {"p": b}
        assert "2 node(s) had no available volume zone" in await _message(env, "q")
    finally:
        await v.cleanup()


# ---- NodeVolumeLimits -------------------------------------------------------------------------


async def test_a_node_takes_no_more_csi_volumes_than_its_csinode_allows(env: Env) -> None:
    v = Vol(env)
    a = await v.node("a")
    b = await v.node("b")
    driver = "disk.example.com"
    await v.csi_node("a", driver, 1)
    cls = await v.storage_class("csi")
    for n in ("one", "two"):
        await v.bound_pvc(n, cls, csi=driver)
    await env.pod("first", spec=claims("one"), node_name=a)
    await env.pod("same", spec=claims("one"), node_selector={HOST: a})  # the same volume
    await env.pod("other", spec=claims("two"), node_selector={HOST: a})
    await env.pod("anywhere", spec=claims("two"))
    s = env.scheduler()
    await s.start()
    try:
        placed = await _settled(env, s, ["same", "other", "anywhere"])
        assert placed == {"same": a, "anywhere": b}
        assert "1 node(s) exceed max volume count" in await _message(env, "other")
    finally:
        await v.cleanup()


async def test_a_gang_counts_the_volumes_its_pods_attach(env: Env) -> None:
    v = Vol(env)
    a = await v.node("a")
    b = await v.node("b")
    driver = "disk.example.com"
    await v.csi_node("a", driver, 1)
    await v.csi_node("b", driver, 1)
    cls = await v.storage_class("csi")
    for i in range(3):
        await v.bound_pvc(f"w{i}", cls, csi=driver)
    await env.pod_group("pair", 2)
    for i in range(2):
        await env.pod(f"pair-{i}", "pair", spec=claims(f"w{i}"))
    s = env.scheduler()
    await s.start()
    try:

        async def bound() -> bool:
            return len(await env.bound()) == 2

        await env.until(s, bound)
        assert sorted((await env.bound()).values()) == sorted([a, b])
        await env.pod("third", spec=claims("w2"))
        assert await _settled(env, s, ["third"]) == {}
        assert "2 node(s) exceed max volume count" in await _message(env, "third")
    finally:
        await v.cleanup()
