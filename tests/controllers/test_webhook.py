"""The pod webhook: patches, pass-through, bad reviews, TLS and certificate reload."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp.test_utils import TestClient, TestServer

from workloadbuilder.cluster import MemoryCluster
from workloadbuilder.integrations.webhook import PodWebhook, patch_ca_bundle, self_signed


class _Fixed:
    def __init__(self, groups: Mapping[str, str]) -> None:
        self.groups = groups

    def pod_group_for(self, pod: Mapping[str, Any]) -> str | None:
        return self.groups.get(pod["metadata"].get("name", ""))


def _review(pod: dict[str, Any], op: str = "CREATE", uid: str = "u1") -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "default",
            "operation": op,
            "object": pod,
        },
    }


def _pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": dict(spec)}


def test_review_patches_only_the_scheduling_group() -> None:
    hook = PodWebhook([_Fixed({"ours": "g-0"})])
    out = hook.review(_review(_pod("ours", containers=[])))
    resp = out["response"]
    assert resp["uid"] == "u1" and resp["allowed"] is True and resp["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(resp["patch"])) == [
        {"op": "add", "path": "/spec/schedulingGroup", "value": {"podGroupName": "g-0"}}
    ]
    # not ours, already linked, not a CREATE: allowed unchanged
    for review in (
        _review(_pod("other")),
        _review(_pod("ours", schedulingGroup={"podGroupName": "x"})),
        _review(_pod("ours"), op="UPDATE"),
    ):
        assert hook.review(review)["response"] == {"uid": "u1", "allowed": True}


def test_a_failing_resolver_never_blocks_the_pod() -> None:
    class Broken:
        def pod_group_for(self, pod: Mapping[str, Any]) -> str | None:
            raise RuntimeError("boom")

    out = PodWebhook([Broken()]).review(_review(_pod("p")))
    assert out["response"]["allowed"] is True and "patch" not in out["response"]


async def test_bad_reviews_get_clean_errors() -> None:
    hook = PodWebhook([_Fixed({})], max_body=4096)
    async with TestClient(TestServer(hook.app())) as client:
        r = await client.post("/mutate", data=b"{not json")
        assert r.status == 400 and "not JSON" in (await r.json())["error"]
        bad_version = _review(_pod("p"))
        bad_version["apiVersion"] = "admission.k8s.io/v1beta1"
        r = await client.post("/mutate", json=bad_version)
        assert r.status == 400 and "only admission.k8s.io/v1" in (await r.json())["error"]
        r = await client.post("/mutate", json={"kind": "AdmissionReview"})
        assert r.status == 400
        r = await client.post("/mutate", json=[1, 2])
        assert r.status == 400
        r = await client.post("/mutate", data=b"x" * 10000)
        assert r.status == 413
        r = await client.post("/mutate", json=_review(_pod("p")))
        assert r.status == 200 and (await r.json())["response"]["allowed"] is True
        assert hook.rejected == 5 and hook.reviews == 1


async def _served_cert(port: int, ca: bytes) -> bytes:
    ctx = ssl.create_default_context(cadata=ca.decode())
    _reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx)
    ssl_obj = writer.get_extra_info("ssl_object")
    der = ssl_obj.getpeercert(binary_form=True)
    writer.close()
    return bytes(der)


async def test_tls_and_certificate_reload(tmp_path: Path) -> None:
    cert, key, ca = self_signed(str(tmp_path), ["localhost", "127.0.0.1"])
    hook = PodWebhook([_Fixed({"p": "g"})], cert_file=cert, key_file=key, reload_interval=0.05)
    await hook.start("127.0.0.1", 0)
    try:
        port = hook.port
        assert port is not None
        ctx = ssl.create_default_context(cadata=ca.decode())
        async with (
            aiohttp.ClientSession() as s,
            s.post(f"https://127.0.0.1:{port}/mutate", json=_review(_pod("p")), ssl=ctx) as r,
        ):
            assert r.status == 200
            assert (await r.json())["response"]["patchType"] == "JSONPatch"
        first = await _served_cert(port, ca)
        # a renewed certificate (new CA too) is served without a restart
        await asyncio.sleep(0.02)
        _, _, ca2 = self_signed(str(tmp_path), ["localhost", "127.0.0.1"])
        for _ in range(100):
            await asyncio.sleep(0.05)
            if hook.reloads >= 2:
                break
        assert hook.reloads >= 2
        second = await _served_cert(port, ca2)
        assert second != first
    finally:
        await hook.stop()


async def test_self_signed_patches_the_ca_bundle() -> None:
    cluster = MemoryCluster()
    from workloadbuilder.integrations.webhook import MUTATING_WEBHOOK_CONFIGURATION

    config = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "wb"},
        "webhooks": [
            {"name": "pods.workloadbuilder.io", "clientConfig": {"url": "https://x/mutate"}},
            {"name": "lws.workloadbuilder.io", "clientConfig": {"url": "https://x/mutate"}},
        ],
    }
    await cluster.create(config)
    assert await patch_ca_bundle(cluster, "wb", b"PEM") == 2
    live = await cluster.get(MUTATING_WEBHOOK_CONFIGURATION, "wb")
    assert isinstance(live, dict)
    assert [w["clientConfig"]["caBundle"] for w in live["webhooks"]] == [
        base64.b64encode(b"PEM").decode()
    ] * 2
