"""``workloadbuilder migrate`` on the real v1.37.2 API server: every object migrated from
every example in examples/migrate/ (one per source) is accepted as it is; the API server
no longer serves scheduling.k8s.io/v1alpha2; and a migrated gang (a Kueue pod group of
three) is scheduled all-or-nothing with the same quorum by kube-scheduler v1.37.2 and by
our scheduler."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from controlplane._parity import UPSTREAM, ParitySide, parity_sides, until
from workloadbuilder.api import PodGroup
from workloadbuilder.migrate import migrate
from workloadbuilder.testing import ControlPlane, RestClient

pytestmark = [pytest.mark.controlplane]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "migrate"
TIERS = {"1": "topology.kubernetes.io/rack"}

#: kind -> (API path prefix, plural, namespaced)
_PATHS = {
    "Workload": ("/apis/scheduling.k8s.io/v1beta1", "workloads", True),
    "PodGroup": ("/apis/scheduling.k8s.io/v1beta1", "podgroups", True),
    "CompositePodGroup": ("/apis/scheduling.k8s.io/v1alpha3", "compositepodgroups", True),
    "Pod": ("/api/v1", "pods", True),
    "Job": ("/apis/batch/v1", "jobs", True),
    "Deployment": ("/apis/apps/v1", "deployments", True),
    "JobSet": ("/apis/jobset.x-k8s.io/v1alpha2", "jobsets", True),
    "PriorityClass": ("/apis/scheduling.k8s.io/v1", "priorityclasses", False),
}


def _path(obj: dict[str, Any]) -> str:
    base, plural, namespaced = _PATHS[obj["kind"]]
    if namespaced:
        return f"{base}/namespaces/{obj['metadata']['namespace']}/{plural}"
    return f"{base}/{plural}"


def _contains(stored: Any, sent: Any) -> bool:
    """Everything ``sent`` holds is in ``stored`` (the server may add defaults and nulls)."""
    if isinstance(sent, dict):
        return isinstance(stored, dict) and all(
            _contains(stored.get(k), v) for k, v in sent.items()
        )
    if isinstance(sent, list):
        return (
            isinstance(stored, list)
            and len(stored) == len(sent)
            and all(_contains(a, b) for a, b in zip(stored, sent, strict=True))
        )
    return bool(stored == sent)


def _load(example: Path, namespace: str) -> list[dict[str, Any]]:
    """The example's objects in ``namespace`` (cluster-scoped names made unique with it)."""
    text = example.read_text().replace("trainer-high", f"{namespace}-high")
    docs = [d for d in yaml.safe_load_all(text) if d]
    for doc in docs:
        if _PATHS[doc["kind"]][2]:
            doc["metadata"]["namespace"] = namespace
    return docs


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_every_migrated_object_is_created_on_the_real_api_server(
    control_plane: ControlPlane, api: RestClient, crds: list[str], example: str
) -> None:
    ns = control_plane.create_namespace("migrate-")
    result = migrate(_load(EXAMPLES / example, ns), tier_labels=TIERS)
    assert result.objects
    for obj in result.objects:
        r = api.create(_path(obj), obj)
        assert r.status == 201, f"{example}: {obj['kind']} {obj['metadata']['name']}: {r.message}"
        # what the server stored is what was sent (nothing silently dropped by a gate)
        stored = api.get(f"{_path(obj)}/{obj['metadata']['name']}").body
        if obj["kind"] in ("Workload", "PodGroup", "CompositePodGroup"):
            assert _contains(stored["spec"], obj["spec"]), (example, obj["kind"], stored["spec"])
        if obj["kind"] == "Pod":
            assert stored["spec"].get("schedulingGroup") == obj["spec"].get("schedulingGroup")
        if obj["kind"] == "Job" and "scheduling" in obj["spec"]:
            assert _contains(stored["spec"]["scheduling"], obj["spec"]["scheduling"])


def test_the_v1_37_2_api_server_no_longer_serves_v1alpha2(api: RestClient) -> None:
    versions = [v["version"] for v in api.get("/apis/scheduling.k8s.io").body["versions"]]
    assert "v1alpha2" not in versions
    assert {"v1beta1", "v1alpha3"} <= set(versions)
    assert api.get("/apis/scheduling.k8s.io/v1alpha2").status == 404


# ---- one migrated gang, scheduled by both schedulers ------------------------------------

OURS = "wb-migrate"
TIMEOUT = 30.0


class Side(ParitySide):
    """A scheduler under test running the migrated Kueue pod group."""

    def __init__(self, name: str, plane: ControlPlane, scheduler_name: str) -> None:
        super().__init__(name, plane, scheduler_name, "migrate")

    async def create_migrated(self) -> list[str]:
        """The Kueue example migrated into this side's namespace, for its scheduler."""
        docs = _load(EXAMPLES / "kueue.yaml", self.namespace)
        result = migrate(docs, scheduler_name=self.scheduler_name)
        pods = []
        for obj in result.objects:
            await self.cluster.create(obj)
            if obj["kind"] == "Pod":
                pods.append(obj["metadata"]["name"])
        return pods

    async def bound(self) -> set[str]:
        return {n for n, p in (await self.pods()).items() if p["spec"].get("nodeName")}

    async def group_condition(self) -> tuple[str, str] | None:
        pg = await self.cluster.get("PodGroup", "gang", self.namespace)
        assert isinstance(pg, PodGroup)
        conds = pg.status.conditions if pg.status else ()
        c = next((c for c in conds if c.type == "PodGroupInitiallyScheduled"), None)
        return (c.status, c.reason or "") if c else None


@pytest.fixture
async def sides(
    upstream_plane: ControlPlane, our_plane: ControlPlane
) -> AsyncIterator[tuple[Side, Side]]:
    upstream = Side("upstream", upstream_plane, UPSTREAM)
    ours = Side("ours", our_plane, OURS)
    async with parity_sides(upstream, ours) as pair:
        yield pair


async def _run(side: Side) -> tuple[set[str], tuple[str, str] | None, set[str]]:
    """Two pods' room: none of the three binds (the migrated quorum is 3); a second node:
    all three bind."""
    await side.node("n1", cpu="2")
    pods = await side.create_migrated()
    assert len(pods) == 3

    async def refused() -> tuple[str, str] | None:
        cond = await side.group_condition()
        return cond if cond and cond[0] == "False" else None

    cond = await until(refused, f"{side.name}: the gang refused", timeout=TIMEOUT, interval=0.2)
    before = await side.bound()
    await side.node("n2", cpu="2")

    async def all_bound() -> set[str] | None:
        got = await side.bound()
        return got if got == set(pods) else None

    after = await until(all_bound, f"{side.name}: all pods bound", timeout=TIMEOUT, interval=0.2)
    return before, cond, after


async def test_a_migrated_gang_is_all_or_nothing_on_both_schedulers(
    sides: tuple[Side, Side],
) -> None:
    upstream, ours = sides
    (up_before, up_cond, up_after), (our_before, our_cond, our_after) = await asyncio.gather(
        _run(upstream), _run(ours)
    )
    assert up_before == our_before == set()
    assert up_cond == our_cond == ("False", "Unschedulable")
    assert up_after == our_after == {"gang-0", "gang-1", "gang-2"}


def test_a_coscheduled_job_becomes_its_own_spec_scheduling_on_the_server(
    control_plane: ControlPlane, api: RestClient
) -> None:
    ns = control_plane.create_namespace("migrate-job-")
    group = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "train", "namespace": ns},
        "spec": {"minMember": 2},
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": ns},
        "spec": {
            "parallelism": 2,
            "completions": 2,
            "template": {
                "metadata": {"labels": {"scheduling.x-k8s.io/pod-group": "train"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
                },
            },
        },
    }
    (migrated,) = migrate([group, job]).objects
    r = api.create(_path(migrated), migrated)
    assert r.status == 201, r.message
    stored = api.get(f"{_path(migrated)}/train").body
    assert stored["spec"]["scheduling"]["schedulingPolicy"] == {"gang": {"minCount": 2}}
    labels = (stored["spec"]["template"].get("metadata") or {}).get("labels") or {}
    assert "scheduling.x-k8s.io/pod-group" not in labels


# ---- a live read: the sources from the cluster, nothing written unless --apply ------------

_VOLCANO_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "podgroups.scheduling.volcano.sh"},
    "spec": {
        "group": "scheduling.volcano.sh",
        "names": {"kind": "PodGroup", "plural": "podgroups", "singular": "podgroup"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1beta1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}


def test_a_live_read_writes_nothing_unless_apply_and_then_leaves_pods_alone(
    control_plane: ControlPlane, api: RestClient, capsys: pytest.CaptureFixture[str]
) -> None:
    from workloadbuilder import cli
    from workloadbuilder.testing import wait_for

    r = api.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", _VOLCANO_CRD)
    assert r.status in (201, 409), r.message
    ns = control_plane.create_namespace("migrate-live-")
    volcano = f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{ns}/podgroups"
    group = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": ns},
        "spec": {"minMember": 2},
    }
    wait_for(lambda: api.create(volcano, group).status == 201, what="the Volcano CRD served")
    for i in range(2):
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"p{i}", "annotations": {"scheduling.k8s.io/group-name": "g"}},
            "spec": {
                "schedulerName": "volcano",
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
            },
        }
        assert api.create(f"/api/v1/namespaces/{ns}/pods", pod).status == 201
    flags = ["migrate", "--kubeconfig", str(control_plane.kubeconfig), "-n", ns]
    pg_path = f"/apis/scheduling.k8s.io/v1beta1/namespaces/{ns}/podgroups/g"

    assert cli.main(flags) == 0
    out, err = capsys.readouterr()
    printed = list(yaml.safe_load_all(out))
    assert [o["kind"] for o in printed] == ["Workload", "PodGroup", "Pod", "Pod"]
    assert f"cluster: PodGroup {ns}/g: spec.minMember" in err
    assert api.get(pg_path).status == 404  # read-only without --apply

    assert cli.main([*flags, "--apply"]) == 0
    _, err = capsys.readouterr()
    assert f"created: PodGroup {ns}/g" in err and f"created: Workload {ns}/g" in err
    assert f"not touched: Pod {ns}/p0: exists" in err
    assert api.get(pg_path).body["spec"]["schedulingPolicy"] == {"gang": {"minCount": 2}}
    pod = api.get(f"/api/v1/namespaces/{ns}/pods/p0").body
    assert "schedulingGroup" not in pod["spec"]  # the running pod was not touched
