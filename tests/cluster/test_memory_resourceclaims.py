"""MemoryCluster's ResourceClaim controller (what kube-controller-manager's resourceclaim
controller does; the shapes were read off v1.37.2: generateName ``<owner>-<entry>-``, the
``resource.kubernetes.io/pod-claim-name`` annotation, the template's labels, a controller
ownerReference without blockOwnerDeletion, statuses sorted by entry name)."""

from __future__ import annotations

from typing import Any

from workloadbuilder.api import PodGroup, from_dict, to_dict
from workloadbuilder.cluster import MemoryCluster
from workloadbuilder.testing.builders import make_pod, make_pod_group

NS = "default"


def _template(name: str = "t") -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "metadata": {"labels": {"team": "ml"}},
            "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "c"}}]}},
        },
    }


async def _claims(c: MemoryCluster) -> dict[str, dict[str, Any]]:
    items = (await c.list("ResourceClaim", NS)).items
    return {str(x["metadata"]["name"]): x for x in items if isinstance(x, dict)}


async def test_pod_template_claim_is_generated_and_recorded() -> None:
    c = MemoryCluster()
    await c.create(_template())
    pod = (
        make_pod("p", NS)
        .pod_resource_claim("gpu", template="t")
        .pod_resource_claim("acc", template="t")
    )
    created = await c.create(pod.obj())
    claims = await _claims(c)
    assert len(claims) == 2
    by_entry = {
        x["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"]: x
        for x in claims.values()
    }
    gpu = by_entry["gpu"]
    assert gpu["metadata"]["generateName"] == "p-gpu-"
    assert gpu["metadata"]["labels"] == {"team": "ml"}
    assert gpu["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": "p",
            "uid": created["metadata"]["uid"],
            "controller": True,
        }
    ]
    assert gpu["spec"] == _template()["spec"]["spec"]
    got = await c.get("Pod", "p", NS)
    assert got["status"]["resourceClaimStatuses"] == [
        {"name": "acc", "resourceClaimName": by_entry["acc"]["metadata"]["name"]},
        {"name": "gpu", "resourceClaimName": gpu["metadata"]["name"]},
    ]


async def test_long_names_are_cut_in_proportion() -> None:
    c = MemoryCluster()
    await c.create(_template())
    await c.create(make_pod("a" * 40, NS).pod_resource_claim("b" * 40, template="t").obj())
    (claim,) = (await _claims(c)).values()
    assert claim["metadata"]["generateName"] == "a" * 27 + "-" + "b" * 27 + "-"


async def test_the_claim_waits_for_its_template() -> None:
    c = MemoryCluster()
    await c.create(make_pod("p", NS).pod_resource_claim("gpu", template="t").obj())
    assert await _claims(c) == {}
    await c.create(_template())
    assert len(await _claims(c)) == 1
    got = await c.get("Pod", "p", NS)
    assert [s["name"] for s in got["status"]["resourceClaimStatuses"]] == ["gpu"]


async def test_one_claim_for_the_pod_group_recorded_in_every_member() -> None:
    c = MemoryCluster()
    await c.create(_template())
    for i in range(2):  # the pods first: they wait for their PodGroup
        pod = make_pod(f"w-{i}", NS).pod_group("ring").pod_resource_claim("net", template="t")
        await c.create(pod.obj())
    assert await _claims(c) == {}
    pg = make_pod_group("ring", NS).gang(2).resource_claim("net", template="t")
    created = await c.create(from_dict(pg.obj(), PodGroup))
    claims = await _claims(c)
    assert len(claims) == 1
    ((name, claim),) = claims.items()
    assert claim["metadata"]["generateName"] == "ring-net-"
    owner = claim["metadata"]["ownerReferences"][0]
    assert (owner["apiVersion"], owner["kind"], owner["uid"]) == (
        "scheduling.k8s.io/v1beta1",
        "PodGroup",
        created.metadata.uid,
    )
    got = await c.get("PodGroup", "ring", NS)
    assert to_dict(got)["status"]["resourceClaimStatuses"] == [
        {"name": "net", "resourceClaimName": name}
    ]
    for i in range(2):
        pod = await c.get("Pod", f"w-{i}", NS)
        assert pod["status"]["resourceClaimStatuses"] == [
            {"name": "net", "resourceClaimName": name}
        ]


async def test_a_deleted_pod_releases_and_deallocates_its_claims() -> None:
    c = MemoryCluster()
    await c.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "shared", "namespace": NS},
            "spec": _template()["spec"]["spec"],
        }
    )
    pods = []
    for n in ("a", "b"):
        pods.append(await c.create(make_pod(n, NS).pod_resource_claim("g", claim="shared").obj()))
    await c.patch(
        "ResourceClaim",
        "shared",
        {"metadata": {"finalizers": ["resource.kubernetes.io/delete-protection"]}},
        NS,
    )
    allocation = {
        "devices": {"results": [{"request": "g", "driver": "d", "pool": "p", "device": "x"}]}
    }
    reserved = [
        {"resource": "pods", "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]}
        for p in pods
    ]
    await c.patch(
        "ResourceClaim",
        "shared",
        {"status": {"allocation": allocation, "reservedFor": reserved}},
        NS,
        subresource="status",
    )
    await c.delete("Pod", "a", NS)
    claim = await c.get("ResourceClaim", "shared", NS)
    assert claim["status"]["reservedFor"] == reserved[1:]
    assert claim["status"]["allocation"] == allocation
    await c.delete("Pod", "b", NS)
    claim = await c.get("ResourceClaim", "shared", NS)
    assert "allocation" not in claim.get("status", {})
    assert "finalizers" not in claim["metadata"]
