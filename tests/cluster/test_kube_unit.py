"""KubeCluster against a small scripted HTTP server on 127.0.0.1 (no real API server).

Covers request/response mapping, error mapping (Status -> typed errors, field causes),
retries (429 + Retry-After, 5xx, slow responses, resets, refused connections), watch
streaming, kubeconfig loading (contexts, TLS with client certificates) and lifetime.
"""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
import yaml
from aiohttp import web
from kubernetes_asyncio.client import Configuration

from workloadbuilder.api import ObjectMeta, PodGroup, Workload, from_dict, object_from_dict
from workloadbuilder.cluster import (
    KubeCluster,
    KubeConfigError,
    Preconditions,
    ResourceInfo,
    RetryPolicy,
)
from workloadbuilder.cluster._kube import error_from_status
from workloadbuilder.errors import (
    AlreadyExists,
    ApiError,
    BadRequest,
    Conflict,
    FieldError,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    TooManyRequests,
    Unauthorized,
)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@attrs.define
class Seen:
    """One request the fake server received."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any


class FakeApi:
    """A scripted HTTP server: ``responses`` are consumed in order, one per request; when
    empty, ``default`` answers. Every request is recorded in ``seen``."""

    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self.responses: list[Handler] = []
        self.default: Handler = _reply(404, _status(404, "NotFound", "not scripted"))
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode()
        self.seen.append(
            Seen(
                method=request.method,
                path=request.path,
                query=dict(request.query),
                headers=dict(request.headers),
                body=body,
            )
        )
        handler = self.responses.pop(0) if self.responses else self.default
        return await handler(request)

    async def start(self, ssl_context: ssl.SSLContext | None = None) -> str:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self.runner = web.AppRunner(app, handle_signals=False)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0, ssl_context=ssl_context)
        await site.start()
        port = self.runner.addresses[0][1]
        self.url = f"{'https' if ssl_context else 'http'}://127.0.0.1:{port}"
        return self.url

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()


def _status(code: int, reason: str, message: str, **details: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        doc["details"] = details
    return doc


def _reply(code: int, doc: Any, headers: dict[str, str] | None = None) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.json_response(doc, status=code, headers=headers)

    return handler


def _slow(seconds_event: asyncio.Event) -> Handler:
    """Never answers until the event is set (the client times out first)."""

    async def handler(request: web.Request) -> web.StreamResponse:
        await seconds_event.wait()
        return web.json_response({})

    return handler


def _reset() -> Handler:
    """Drop the connection without an answer."""

    async def handler(request: web.Request) -> web.StreamResponse:
        assert request.transport is not None
        request.transport.abort()
        raise asyncio.CancelledError

    return handler


def _stream(lines: list[Any], *, then: str = "end", hold: asyncio.Event | None = None) -> Handler:
    """A watch response: JSON lines, then end the response ("end"), cut the connection
    mid-line ("cut"), or stay open until ``hold`` is set ("hold")."""

    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        for line in lines:
            data = line if isinstance(line, bytes) else json.dumps(line).encode() + b"\n"
            await resp.write(data)
        if then == "cut":
            await resp.write(b'{"type":"ADDED","object":{"kind"')
            assert request.transport is not None
            request.transport.abort()
            raise asyncio.CancelledError
        if then == "hold":
            assert hold is not None
            await hold.wait()
        await resp.write_eof()
        return resp

    return handler


class Sleeps:
    """A RetryPolicy.sleep that records the waits instead of sleeping."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.fixture
async def api() -> AsyncIterator[FakeApi]:
    fake = FakeApi()
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
async def kube(api: FakeApi, sleeps: Sleeps) -> AsyncIterator[KubeCluster]:
    cfg = Configuration(host=api.url)
    cluster = KubeCluster(
        cfg,
        retry=RetryPolicy(max_attempts=4, initial_backoff=0.01, max_backoff=0.05, sleep=sleeps),
        request_timeout=0.5,
        connect_timeout=0.5,
    )
    try:
        yield cluster
    finally:
        await cluster.close()


POD_GROUP = {
    "apiVersion": "scheduling.k8s.io/v1beta1",
    "kind": "PodGroup",
    "metadata": {"name": "pg", "namespace": "ns1", "resourceVersion": "7", "uid": "u1"},
    "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}},
}


# ---------------------------------------------------------------- request/response mapping


async def test_get_returns_typed_model_for_our_kinds(api: FakeApi, kube: KubeCluster) -> None:
    api.responses.append(_reply(200, POD_GROUP))
    got = await kube.get("PodGroup", "pg", "ns1")
    assert isinstance(got, PodGroup)
    assert got.metadata.name == "pg"
    assert got.metadata.resource_version == "7"
    assert api.seen[0].method == "GET"
    assert api.seen[0].path == "/apis/scheduling.k8s.io/v1beta1/namespaces/ns1/podgroups/pg"


async def test_get_returns_dicts_for_other_kinds_and_default_namespace(
    api: FakeApi, kube: KubeCluster
) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}
    api.responses += [_reply(200, pod), _reply(200, node)]
    assert await kube.get("Pod", "p") == pod
    assert await kube.get("Node", "n") == node
    assert [s.path for s in api.seen] == [
        "/api/v1/namespaces/default/pods/p",
        "/api/v1/nodes/n",
    ]


async def test_unknown_generated_client_kinds_use_resource_info_paths(
    api: FakeApi, kube: KubeCluster
) -> None:
    widget = ResourceInfo(group="example.com", version="v1", kind="Widget", plural="widgets")
    doc = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    api.responses.append(_reply(200, doc))
    assert await kube.get(widget, "w", "ns") == doc
    assert api.seen[0].path == "/apis/example.com/v1/namespaces/ns/widgets/w"


async def test_list_adds_kind_to_items_and_passes_selectors(
    api: FakeApi, kube: KubeCluster
) -> None:
    item = {k: v for k, v in POD_GROUP.items() if k not in ("apiVersion", "kind")}
    api.responses.append(
        _reply(
            200,
            {
                "kind": "PodGroupList",
                "apiVersion": "scheduling.k8s.io/v1beta1",
                "metadata": {"resourceVersion": "42", "continue": "tok2"},
                "items": [item, item],
            },
        )
    )
    page = await kube.list(
        "PodGroup", "ns1", label_selector="a=b", field_selector="metadata.name=pg", limit=2
    )
    assert page.resource_version == "42"
    assert page.continue_token == "tok2"
    assert len(page.items) == 2
    assert all(isinstance(i, PodGroup) for i in page.items)
    assert api.seen[0].query == {
        "labelSelector": "a=b",
        "fieldSelector": "metadata.name=pg",
        "limit": "2",
    }


async def test_list_all_namespaces_and_continue(api: FakeApi, kube: KubeCluster) -> None:
    api.responses.append(
        _reply(200, {"kind": "PodList", "metadata": {"resourceVersion": "5"}, "items": []})
    )
    page = await kube.list("Pod", continue_token="tok")
    assert page.items == ()
    assert page.continue_token is None
    assert api.seen[0].path == "/api/v1/pods"
    assert api.seen[0].query == {"continue": "tok"}


async def test_create_serialises_typed_models(api: FakeApi, kube: KubeCluster) -> None:
    stored = dict(POD_GROUP, metadata=dict(POD_GROUP["metadata"], resourceVersion="8"))  # type: ignore[arg-type]
    api.responses.append(_reply(201, stored))
    pg = attrs.evolve(from_dict(POD_GROUP, PodGroup), metadata=ObjectMeta(name="pg"))
    got = await kube.create(pg, "ns1", dry_run=True, field_manager="me")
    assert isinstance(got, PodGroup)
    assert got.metadata.resource_version == "8"
    seen = api.seen[0]
    assert seen.method == "POST"
    assert seen.path == "/apis/scheduling.k8s.io/v1beta1/namespaces/ns1/podgroups"
    assert seen.query == {"dryRun": "All", "fieldManager": "me"}
    assert seen.body["kind"] == "PodGroup"
    assert seen.body["apiVersion"] == "scheduling.k8s.io/v1beta1"
    assert seen.body["spec"]["schedulingPolicy"] == {"gang": {"minCount": 3}}


async def test_update_and_update_status_paths(api: FakeApi, kube: KubeCluster) -> None:
    pg = from_dict(POD_GROUP, PodGroup)
    api.responses += [_reply(200, POD_GROUP), _reply(200, POD_GROUP)]
    await kube.update(pg)
    await kube.update_status(pg, field_manager="sched")
    assert [(s.method, s.path, s.query) for s in api.seen] == [
        ("PUT", "/apis/scheduling.k8s.io/v1beta1/namespaces/ns1/podgroups/pg", {}),
        (
            "PUT",
            "/apis/scheduling.k8s.io/v1beta1/namespaces/ns1/podgroups/pg/status",
            {"fieldManager": "sched"},
        ),
    ]
    assert api.seen[0].body["metadata"]["resourceVersion"] == "7"


async def test_v1alpha3_workload_goes_to_v1alpha3(api: FakeApi, kube: KubeCluster) -> None:
    wl = {
        "apiVersion": "scheduling.k8s.io/v1alpha3",
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": {
            "podGroupTemplates": [
                {"name": "t", "schedulingPolicy": {"basic": {}}},
            ]
        },
    }
    api.responses.append(_reply(201, wl))
    obj = object_from_dict(wl)
    got = await kube.create(obj)
    assert isinstance(got, Workload)
    assert got.api_version == "scheduling.k8s.io/v1alpha3"
    assert api.seen[0].path == "/apis/scheduling.k8s.io/v1alpha3/namespaces/ns/workloads"


@pytest.mark.parametrize(
    ("patch_type", "content_type"),
    [
        ("merge", "application/merge-patch+json"),
        ("json", "application/json-patch+json"),
        ("strategic", "application/strategic-merge-patch+json"),
        ("apply", "application/apply-patch+yaml"),
    ],
)
async def test_patch_content_types(
    api: FakeApi, kube: KubeCluster, patch_type: Any, content_type: str
) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}}
    api.responses.append(_reply(200, pod))
    body: Any = (
        [{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}]
        if patch_type == "json"
        else {"metadata": {"labels": {"a": "b"}}}
    )
    got = await kube.patch(
        "Pod",
        "p",
        body,
        "ns",
        patch_type=patch_type,
        field_manager="fm",
        force=True,
        subresource="status",
    )
    assert got == pod
    seen = api.seen[0]
    assert seen.method == "PATCH"
    assert seen.path == "/api/v1/namespaces/ns/pods/p/status"
    assert seen.headers["Content-Type"] == content_type
    assert seen.body == body
    expected = {"fieldManager": "fm"}
    if patch_type == "apply":
        expected["force"] = "true"
    assert seen.query == expected


async def test_delete_sends_delete_options(api: FakeApi, kube: KubeCluster) -> None:
    api.responses.append(_reply(200, _status(200, "", "")))
    await kube.delete(
        "Workload",
        "w",
        "ns",
        propagation_policy="Foreground",
        preconditions=Preconditions(uid="u", resource_version="9"),
        grace_period_seconds=0,
    )
    seen = api.seen[0]
    assert seen.method == "DELETE"
    assert seen.path == "/apis/scheduling.k8s.io/v1beta1/namespaces/ns/workloads/w"
    assert seen.body == {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "propagationPolicy": "Foreground",
        "gracePeriodSeconds": 0,
        "preconditions": {"uid": "u", "resourceVersion": "9"},
    }


async def test_bind_evict_and_event_bodies(api: FakeApi, kube: KubeCluster) -> None:
    api.responses += [_reply(201, {}), _reply(201, {}), _reply(201, {})]
    await kube.bind("ns", "p", "node-1", pod_uid="uid-1")
    await kube.evict("ns", "p", grace_period_seconds=5)
    await kube.create_event(
        namespace="ns",
        involved_object={"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "uid-1"},
        reason="Scheduled",
        message="assigned",
        type="Normal",
        reporting_component="sched",
    )
    bind, evict, event = api.seen
    assert (bind.method, bind.path) == ("POST", "/api/v1/namespaces/ns/pods/p/binding")
    assert bind.body == {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p", "namespace": "ns", "uid": "uid-1"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"},
    }
    assert (evict.method, evict.path) == ("POST", "/api/v1/namespaces/ns/pods/p/eviction")
    assert evict.body["apiVersion"] == "policy/v1"
    assert evict.body["kind"] == "Eviction"
    assert evict.body["deleteOptions"] == {"gracePeriodSeconds": 5}
    assert (event.method, event.path) == ("POST", "/api/v1/namespaces/ns/events")
    assert event.body["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "p",
        "uid": "uid-1",
        "namespace": "ns",
    }
    assert event.body["reason"] == "Scheduled"
    assert event.body["type"] == "Normal"
    assert event.body["source"] == {"component": "sched"}
    assert event.body["metadata"]["generateName"] == "p."


async def test_requests_carry_agent_token_query_and_json_body(api: FakeApi) -> None:
    """The direct request path sends what kubernetes-asyncio's ApiClient sent: the
    User-Agent, the bearer token (with its prefix, refreshed by the configuration's hook
    before every request), the query, and JSON bodies (dates as ISO 8601)."""
    import datetime

    cfg = Configuration(host=api.url)
    cfg.api_key["BearerToken"] = "t0"
    cfg.api_key_prefix["BearerToken"] = "Bearer"
    tokens = iter(["t1", "t2", "t3"])

    def refresh(c: Configuration) -> None:
        c.api_key["BearerToken"] = next(tokens)

    cfg.refresh_api_key_hook = refresh
    api.default = _reply(200, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}})
    async with KubeCluster(cfg, user_agent="agent/1") as kube:
        await kube.list("ConfigMap", "ns", label_selector="a in (b, c)", limit=5)
        await kube.patch(
            "ConfigMap", "cm", {"data": {"at": datetime.date(2026, 1, 2)}}, "ns", field_manager="m"
        )
        await kube.bind("ns", "p", "n")
    listed, patched, bound = api.seen
    assert [s.headers["Authorization"] for s in api.seen] == ["Bearer t1", "Bearer t2", "Bearer t3"]
    assert {s.headers["User-Agent"] for s in api.seen} == {"agent/1"}
    assert listed.query == {"labelSelector": "a in (b, c)", "limit": "5"}
    assert listed.headers["Accept"] == "application/json"
    assert patched.query == {"fieldManager": "m"}
    assert patched.headers["Content-Type"] == "application/merge-patch+json"
    assert patched.body == {"data": {"at": "2026-01-02"}}
    assert bound.headers["Content-Type"] == "application/json"


async def test_no_token_no_authorization_header(api: FakeApi, kube: KubeCluster) -> None:
    api.default = _reply(200, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}})
    await kube.get("ConfigMap", "cm", "ns")
    assert "Authorization" not in api.seen[0].headers


# ---------------------------------------------------------------- error mapping


@pytest.mark.parametrize(
    ("code", "reason", "cls"),
    [
        (404, "NotFound", NotFound),
        (409, "AlreadyExists", AlreadyExists),
        (409, "Conflict", Conflict),
        (410, "Expired", Gone),
        (422, "Invalid", Invalid),
        (403, "Forbidden", Forbidden),
        (401, "Unauthorized", Unauthorized),
        (400, "BadRequest", BadRequest),
        (418, "Teapot", ApiError),
    ],
)
async def test_error_mapping_is_final(
    api: FakeApi, kube: KubeCluster, sleeps: Sleeps, code: int, reason: str, cls: type[ApiError]
) -> None:
    api.default = _reply(code, _status(code, reason, f"it is {reason}"))
    with pytest.raises(cls) as info:
        await kube.get("Pod", "p", "ns")
    assert type(info.value) is cls
    assert info.value.status == code
    assert info.value.reason == reason
    assert "it is " + reason in str(info.value)
    assert len(api.seen) == 1  # 4xx are never retried
    assert sleeps.waits == []


async def test_invalid_carries_field_causes(api: FakeApi, kube: KubeCluster) -> None:
    causes = [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist '
            "of lower case alphanumeric characters",
            "field": "metadata.name",
        },
        {
            "reason": "FieldValueRequired",
            "message": "Required value",
            "field": "spec.podGroupTemplates[0].schedulingPolicy",
        },
        {
            "reason": "FieldValueInvalid",
            "message": "Invalid value: 0: must be greater than or equal to 1",
            "field": "spec.podGroupTemplates[0].schedulingPolicy.gang.minCount",
        },
        {
            "reason": "FieldValueNotSupported",
            "message": 'Unsupported value: "Sometimes": supported values: "All", "Single"',
            "field": "spec.disruptionMode",
        },
        {
            "reason": "FieldValueForbidden",
            "message": "Forbidden: field is immutable",
            "field": "spec.podGroupTemplates",
        },
    ]
    api.default = _reply(
        422,
        _status(
            422,
            "Invalid",
            'Workload.scheduling.k8s.io "Bad_Name" is invalid: [...]',
            name="Bad_Name",
            group="scheduling.k8s.io",
            kind="Workload",
            causes=causes,
        ),
    )
    with pytest.raises(Invalid) as info:
        await kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}})
    got = info.value.causes
    assert got == (
        FieldError(
            path="metadata.name",
            type="Invalid value",
            detail="a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
            "characters",
        ),
        FieldError(path="spec.podGroupTemplates[0].schedulingPolicy", type="Required value"),
        FieldError(
            path="spec.podGroupTemplates[0].schedulingPolicy.gang.minCount",
            type="Invalid value",
            detail="must be greater than or equal to 1",
        ),
        FieldError(
            path="spec.disruptionMode",
            type="Unsupported value",
            detail='supported values: "All", "Single"',
        ),
        FieldError(path="spec.podGroupTemplates", type="Forbidden", detail="field is immutable"),
    )
    assert got[0].value == "Bad_Name"
    assert got[2].value == 0
    # Rendered back, each cause reads exactly like the server's field error.
    assert [str(c) for c in got] == [f"{c['field']}: {c['message']}" for c in causes]


def test_error_from_status_without_status_body() -> None:
    err = error_from_status(503, b"upstream connect error", {"Retry-After": "3"})
    assert type(err) is ApiError
    assert err.status == 503
    assert err.retry_after == 3.0
    assert "upstream connect error" in str(err)
    gone = error_from_status(
        200, {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}, {}
    )
    assert isinstance(gone, Gone)
    assert gone.status == 410


# ---------------------------------------------------------------- retries


async def test_429_honours_retry_after(api: FakeApi, kube: KubeCluster, sleeps: Sleeps) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    api.responses += [
        _reply(429, _status(429, "TooManyRequests", "slow down"), {"Retry-After": "2"}),
        _reply(429, _status(429, "TooManyRequests", "slow down", retryAfterSeconds=3)),
        _reply(200, pod),
    ]
    assert await kube.get("Pod", "p", "ns") == pod
    assert len(api.seen) == 3
    assert len(sleeps.waits) == 2
    assert 2.0 <= sleeps.waits[0] <= 2.0 * 1.5
    assert 3.0 <= sleeps.waits[1] <= 3.0 * 1.5


async def test_429_is_retried_even_for_create(
    api: FakeApi, kube: KubeCluster, sleeps: Sleeps
) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}}
    api.responses += [
        _reply(429, _status(429, "TooManyRequests", "slow down"), {"Retry-After": "1"}),
        _reply(201, pod),
    ]
    assert await kube.create(pod) == pod
    assert [s.method for s in api.seen] == ["POST", "POST"]


async def test_retry_after_beyond_the_bound_fails_at_once(
    api: FakeApi, kube: KubeCluster, sleeps: Sleeps
) -> None:
    api.default = _reply(429, _status(429, "TooManyRequests", "go away"), {"Retry-After": "3600"})
    with pytest.raises(TooManyRequests) as info:
        await kube.get("Pod", "p", "ns")
    assert info.value.retry_after == 3600.0
    assert len(api.seen) == 1
    assert sleeps.waits == []


async def test_eviction_refused_by_budget_is_not_retried(
    api: FakeApi, kube: KubeCluster, sleeps: Sleeps
) -> None:
    api.default = _reply(
        429,
        _status(
            429,
            "TooManyRequests",
            "Cannot evict pod as it would violate the pod's disruption budget.",
            causes=[{"reason": "DisruptionBudget", "message": "needs 2 healthy pods"}],
        ),
    )
    with pytest.raises(TooManyRequests):
        await kube.evict("ns", "p")
    assert len(api.seen) == 1


async def test_5xx_retried_with_backoff_then_succeeds(
    api: FakeApi, kube: KubeCluster, sleeps: Sleeps
) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    api.responses += [
        _reply(500, _status(500, "InternalError", "etcd hiccup")),
        _reply(503, _status(503, "ServiceUnavailable", "later")),
        _reply(200, pod),
    ]
    assert await kube.get("Pod", "p", "ns") == pod
    assert len(api.seen) == 3
    assert len(sleeps.waits) == 2
    # exponential: 0.01 then 0.02, each stretched by at most 50 % jitter
    assert 0.01 <= sleeps.waits[0] <= 0.015
    assert 0.02 <= sleeps.waits[1] <= 0.03


async def test_5xx_retries_are_bounded(api: FakeApi, kube: KubeCluster, sleeps: Sleeps) -> None:
    api.default = _reply(503, _status(503, "ServiceUnavailable", "down"))
    with pytest.raises(ApiError) as info:
        await kube.get("Pod", "p", "ns")
    assert info.value.status == 503
    assert len(api.seen) == 4  # max_attempts
    assert len(sleeps.waits) == 3
    assert all(w <= 0.05 * 1.5 for w in sleeps.waits)


async def test_5xx_not_retried_for_post(api: FakeApi, kube: KubeCluster, sleeps: Sleeps) -> None:
    api.default = _reply(500, _status(500, "InternalError", "maybe created"))
    with pytest.raises(ApiError) as info:
        await kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}})
    assert info.value.status == 500
    assert len(api.seen) == 1


async def test_501_is_final(api: FakeApi, kube: KubeCluster) -> None:
    api.default = _reply(501, _status(501, "NotImplemented", "no"))
    with pytest.raises(ApiError):
        await kube.get("Pod", "p", "ns")
    assert len(api.seen) == 1


async def test_json_patch_not_retried_on_5xx_but_merge_is(api: FakeApi, kube: KubeCluster) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    api.responses += [_reply(500, _status(500, "InternalError", "x"))]
    with pytest.raises(ApiError):
        await kube.patch("Pod", "p", [{"op": "remove", "path": "/a"}], "ns", patch_type="json")
    assert len(api.seen) == 1
    api.responses += [_reply(500, _status(500, "InternalError", "x")), _reply(200, pod)]
    assert await kube.patch("Pod", "p", {"a": 1}, "ns") == pod
    assert len(api.seen) == 3


async def test_slow_response_times_out_and_is_retried(
    api: FakeApi, kube: KubeCluster, sleeps: Sleeps
) -> None:
    release = asyncio.Event()
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    api.responses += [_slow(release), _reply(200, pod)]
    try:
        assert await kube.get("Pod", "p", "ns") == pod
    finally:
        release.set()
    assert len(api.seen) == 2
    assert len(sleeps.waits) == 1


async def test_timeouts_exhausted_raise_api_error(api: FakeApi, sleeps: Sleeps) -> None:
    release = asyncio.Event()
    api.default = _slow(release)
    cluster = KubeCluster(
        Configuration(host=api.url),
        retry=RetryPolicy(max_attempts=2, initial_backoff=0.01, sleep=sleeps),
        request_timeout=0.2,
    )
    try:
        with pytest.raises(ApiError) as info:
            await cluster.get("Pod", "p", "ns")
        assert info.value.reason == "Timeout"
        assert info.value.status == 0
        assert len(api.seen) == 2
    finally:
        release.set()
        await cluster.close()


async def test_timeout_not_retried_for_post(api: FakeApi, kube: KubeCluster) -> None:
    release = asyncio.Event()
    api.default = _slow(release)
    try:
        with pytest.raises(ApiError) as info:
            await kube.bind("ns", "p", "n1")
        assert info.value.reason == "Timeout"
        assert len(api.seen) == 1
    finally:
        release.set()


async def test_connection_reset_retried_for_get_not_for_post(
    api: FakeApi, kube: KubeCluster, sleeps: Sleeps
) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    api.responses += [_reset(), _reply(200, pod)]
    assert await kube.get("Pod", "p", "ns") == pod
    assert len(api.seen) == 2
    api.responses += [_reset(), _reply(201, pod)]
    with pytest.raises(ApiError) as info:
        await kube.create(pod, "ns")
    assert info.value.reason == "ConnectionError"
    assert len(api.seen) == 3


async def test_refused_connection_is_retried_even_for_post(sleeps: Sleeps) -> None:
    with socket.socket() as s:  # a port that nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cluster = KubeCluster(
        Configuration(host=f"http://127.0.0.1:{port}"),
        retry=RetryPolicy(max_attempts=3, initial_backoff=0.01, sleep=sleeps),
    )
    try:
        with pytest.raises(ApiError) as info:
            await cluster.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}})
        assert info.value.reason == "ConnectionError"
        assert len(sleeps.waits) == 2  # three attempts, all refused
    finally:
        await cluster.close()


async def test_retried_delete_that_finds_object_gone_succeeds(
    api: FakeApi, kube: KubeCluster
) -> None:
    api.responses += [
        _reply(503, _status(503, "ServiceUnavailable", "x")),
        _reply(404, _status(404, "NotFound", "gone")),
    ]
    await kube.delete("Pod", "p", "ns")
    assert len(api.seen) == 2
    api.responses.append(_reply(404, _status(404, "NotFound", "never existed")))
    with pytest.raises(NotFound):
        await kube.delete("Pod", "p", "ns")


async def test_retried_delete_after_throttling_reports_not_found(
    api: FakeApi, kube: KubeCluster
) -> None:
    # a 429 means the first attempt did not run: the 404 after it is the real answer
    api.responses += [
        _reply(429, _status(429, "TooManyRequests", "slow down")),
        _reply(404, _status(404, "NotFound", "never existed")),
    ]
    with pytest.raises(NotFound):
        await kube.delete("Pod", "p", "ns")
    assert len(api.seen) == 2


# ---------------------------------------------------------------- watch


async def test_watch_streams_typed_events_and_bookmarks(api: FakeApi, kube: KubeCluster) -> None:
    modified = dict(POD_GROUP, metadata=dict(POD_GROUP["metadata"], resourceVersion="9"))  # type: ignore[arg-type]
    api.responses.append(
        _stream(
            [
                {"type": "ADDED", "object": POD_GROUP},
                {"type": "MODIFIED", "object": modified},
                {
                    "type": "BOOKMARK",
                    "object": {
                        "kind": "PodGroup",
                        "apiVersion": "scheduling.k8s.io/v1beta1",
                        "metadata": {"resourceVersion": "12"},
                    },
                },
                {"type": "DELETED", "object": modified},
            ]
        )
    )
    events = [
        e async for e in kube.watch("PodGroup", "ns1", resource_version="6", timeout_seconds=30)
    ]
    assert [e.type for e in events] == ["ADDED", "MODIFIED", "BOOKMARK", "DELETED"]
    assert isinstance(events[0].object, PodGroup)
    assert isinstance(events[1].object, PodGroup)
    assert events[1].object.metadata.resource_version == "9"
    assert events[2].object == {
        "kind": "PodGroup",
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "metadata": {"resourceVersion": "12"},
    }
    assert api.seen[0].path == "/apis/scheduling.k8s.io/v1beta1/namespaces/ns1/podgroups"
    assert api.seen[0].query == {
        "watch": "1",
        "allowWatchBookmarks": "true",
        "resourceVersion": "6",
        "timeoutSeconds": "30",
    }


async def test_watch_410_error_event_raises_gone(api: FakeApi, kube: KubeCluster) -> None:
    api.responses.append(
        _stream(
            [
                {"type": "ADDED", "object": POD_GROUP},
                {
                    "type": "ERROR",
                    "object": _status(410, "Expired", "too old resource version: 1 (5)"),
                },
            ]
        )
    )
    seen: list[str] = []
    with pytest.raises(Gone) as info:
        async for e in kube.watch("PodGroup", "ns1", resource_version="1"):
            seen.append(e.type)
    assert seen == ["ADDED"]
    assert "too old" in str(info.value)


async def test_watch_410_status_raises_gone(api: FakeApi, kube: KubeCluster) -> None:
    api.responses.append(_reply(410, _status(410, "Gone", "too old")))
    with pytest.raises(Gone):
        async for _ in kube.watch("Pod", "ns", resource_version="1"):
            pass
    assert len(api.seen) == 1


async def test_watch_open_retried_on_429_and_5xx(
    api: FakeApi, kube: KubeCluster, sleeps: Sleeps
) -> None:
    api.responses += [
        _reply(429, _status(429, "TooManyRequests", "x"), {"Retry-After": "1"}),
        _reply(500, _status(500, "InternalError", "x")),
        _stream([{"type": "ADDED", "object": POD_GROUP}]),
    ]
    events = [e async for e in kube.watch("PodGroup", "ns1")]
    assert [e.type for e in events] == ["ADDED"]
    assert len(api.seen) == 3
    assert sleeps.waits[0] >= 1.0


async def test_dropped_watch_connection_ends_the_stream_quietly(
    api: FakeApi, kube: KubeCluster
) -> None:
    api.responses.append(_stream([{"type": "ADDED", "object": POD_GROUP}], then="cut"))
    events = [e async for e in kube.watch("PodGroup", "ns1")]
    # the complete event arrives; the half-written one is not invented
    assert [e.type for e in events] == ["ADDED"]


async def test_idle_watch_ends(api: FakeApi, sleeps: Sleeps) -> None:
    hold = asyncio.Event()
    api.responses.append(_stream([{"type": "ADDED", "object": POD_GROUP}], then="hold", hold=hold))
    cluster = KubeCluster(Configuration(host=api.url), watch_idle_timeout=0.3)
    try:
        events = [e async for e in cluster.watch("PodGroup", "ns1")]
        assert [e.type for e in events] == ["ADDED"]
    finally:
        hold.set()
        await cluster.close()


async def test_close_ends_open_watches_and_refuses_new_requests(api: FakeApi) -> None:
    hold = asyncio.Event()
    api.responses.append(_stream([{"type": "ADDED", "object": POD_GROUP}], then="hold", hold=hold))
    cluster = KubeCluster(Configuration(host=api.url))
    got: list[str] = []
    first = asyncio.Event()

    async def consume() -> None:
        async for e in cluster.watch("PodGroup", "ns1"):
            got.append(e.type)
            first.set()

    task = asyncio.create_task(consume())
    try:
        await asyncio.wait_for(first.wait(), 10)
        await cluster.close()
        await asyncio.wait_for(task, 10)  # ends without an exception
        assert got == ["ADDED"]
        with pytest.raises(RuntimeError, match="closed"):
            await cluster.get("Pod", "p")
        await cluster.close()  # idempotent
    finally:
        hold.set()
        task.cancel()


# ---------------------------------------------------------------- configuration


def _kubeconfig(path: Path, contexts: dict[str, dict[str, Any]], current: str) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": c["cluster"]} for n, c in contexts.items()],
        "users": [{"name": n, "user": c.get("user", {})} for n, c in contexts.items()],
        "contexts": [{"name": n, "context": {"cluster": n, "user": n}} for n in contexts],
        "current-context": current,
    }
    path.write_text(yaml.safe_dump(doc))
    return path


async def test_from_kubeconfig_picks_the_context(api: FakeApi, tmp_path: Path) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    api.default = _reply(200, pod)
    path = _kubeconfig(
        tmp_path / "config",
        {
            "nowhere": {"cluster": {"server": "http://127.0.0.1:9"}},
            "fake": {"cluster": {"server": api.url}, "user": {"token": "s3cret"}},
        },
        current="nowhere",
    )
    cluster = KubeCluster.from_kubeconfig(path, context="fake")
    try:
        assert await cluster.get("Pod", "p", "ns") == pod
        assert cluster.server == api.url
        assert api.seen[0].headers["Authorization"] == "Bearer s3cret"
        assert "s3cret" not in repr(cluster)
    finally:
        await cluster.close()


async def test_connect_and_context_manager(api: FakeApi, tmp_path: Path) -> None:
    path = _kubeconfig(tmp_path / "config", {"fake": {"cluster": {"server": api.url}}}, "fake")
    cluster = await KubeCluster.connect(path)
    assert cluster.server == api.url
    await cluster.close()
    async with KubeCluster.from_kubeconfig(str(path)) as c:
        assert c.server == api.url


def test_kubeconfig_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(KubeConfigError, match="not found"):
        KubeCluster.from_kubeconfig(tmp_path / "missing")
    path = _kubeconfig(
        tmp_path / "config", {"a": {"cluster": {"server": "http://127.0.0.1:9"}}}, "a"
    )
    with pytest.raises(KubeConfigError, match="nope"):
        KubeCluster.from_kubeconfig(path, context="nope")
    broken = tmp_path / "broken"
    broken.write_text("clusters: [unclosed\n")
    with pytest.raises(KubeConfigError, match="cannot use kubeconfig"):
        KubeCluster.from_kubeconfig(broken)
    monkeypatch.setenv("KUBECONFIG", str(path))
    assert "context a" in repr(KubeCluster.from_kubeconfig())
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(KubeConfigError, match="not running in a cluster"):
        KubeCluster.in_cluster()


async def test_tls_with_client_certificates(tmp_path: Path) -> None:
    from workloadbuilder.testing._pki import Pki

    pki = Pki(tmp_path / "pki")
    serving = pki.serving("server")
    client = pki.client("alice", ("team",))
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki.ca_cert))
    server_ctx.load_cert_chain(str(serving.cert), str(serving.key))
    server_ctx.verify_mode = ssl.CERT_REQUIRED  # no client certificate, no connection
    fake = FakeApi()
    peers: list[Any] = []

    async def who(request: web.Request) -> web.StreamResponse:
        assert request.transport is not None
        peers.append(request.transport.get_extra_info("peercert"))
        return web.json_response({"apiVersion": "v1", "kind": "Pod", "metadata": {}})

    fake.default = who
    url = await fake.start(server_ctx)
    try:
        inline = _kubeconfig(
            tmp_path / "inline",
            {
                "tls": {
                    "cluster": {
                        "server": url,
                        "certificate-authority-data": _b64(pki.ca_cert),
                    },
                    "user": {
                        "client-certificate-data": _b64(client.cert),
                        "client-key-data": _b64(client.key),
                    },
                }
            },
            "tls",
        )
        files = _kubeconfig(
            tmp_path / "files",
            {
                "tls": {
                    "cluster": {"server": url, "certificate-authority": str(pki.ca_cert)},
                    "user": {
                        "client-certificate": str(client.cert),
                        "client-key": str(client.key),
                    },
                }
            },
            "tls",
        )
        for path in (inline, files):
            async with KubeCluster.from_kubeconfig(path) as cluster:
                await cluster.get("Pod", "p", "ns")
        subjects = [dict(x[0] for x in p["subject"]) for p in peers]
        assert [s["commonName"] for s in subjects] == ["alice", "alice"]
        # Without the client certificate the server refuses the TLS handshake: not retried.
        no_cert = _kubeconfig(
            tmp_path / "nocert",
            {"tls": {"cluster": {"server": url, "certificate-authority": str(pki.ca_cert)}}},
            "tls",
        )
        sleeps = Sleeps()
        async with KubeCluster.from_kubeconfig(
            no_cert, retry=RetryPolicy(max_attempts=3, sleep=sleeps)
        ) as cluster:
            with pytest.raises(ApiError):
                await cluster.get("Pod", "p", "ns")
        assert len(peers) == 2
    finally:
        await fake.stop()


def _b64(path: Path) -> str:
    import base64

    return base64.b64encode(path.read_bytes()).decode()


# ---------------------------------------------------------------- protocol + retry rules


def test_kube_cluster_satisfies_the_cluster_protocol() -> None:
    from workloadbuilder.cluster import Cluster

    cluster: Cluster = KubeCluster(Configuration(host="http://127.0.0.1:9"))  # checked by mypy
    assert isinstance(cluster, Cluster)


@pytest.mark.parametrize(
    ("error", "idempotent", "expected"),
    [
        (ApiError("x", status=500), True, True),
        (ApiError("x", status=503), True, True),
        (ApiError("x", status=500), False, False),
        (ApiError("x", status=501), True, False),
        (TooManyRequests("x"), False, True),
        (
            TooManyRequests("pdb", body={"details": {"causes": [{"reason": "DisruptionBudget"}]}}),
            True,
            False,
        ),
        (NotFound("x"), True, False),
        (Conflict("x"), True, False),
        (Invalid("x"), True, False),
        (Gone("x"), True, False),
        (ValueError("x"), True, False),
    ],
)
def test_retryable_classification(error: BaseException, idempotent: bool, expected: bool) -> None:
    from workloadbuilder.cluster._retry import is_retryable

    assert is_retryable(error, idempotent=idempotent) is expected


def test_transport_error_classification() -> None:
    import aiohttp

    from workloadbuilder.cluster._retry import classify_transport_error, is_retryable

    refused = aiohttp.ClientConnectorError(
        aiohttp.client_reqrep.ConnectionKey("127.0.0.1", 1, False, True, None, None, None),
        OSError(111, "refused"),
    )
    marker = classify_transport_error(refused)
    assert marker is not None
    assert marker.not_sent
    assert is_retryable(marker, idempotent=False)
    reset = classify_transport_error(aiohttp.ServerDisconnectedError())
    assert reset is not None
    assert not reset.not_sent
    assert is_retryable(reset, idempotent=True)
    assert not is_retryable(reset, idempotent=False)
    timeout = classify_transport_error(TimeoutError())
    assert timeout is not None
    assert not is_retryable(timeout, idempotent=False)
    assert classify_transport_error(ValueError("x")) is None


def test_backoff_grows_is_bounded_and_honours_retry_after() -> None:
    policy = RetryPolicy(initial_backoff=0.1, max_backoff=1.0, jitter=0.5)
    for attempt, base in [(1, 0.1), (2, 0.2), (3, 0.4), (4, 0.8), (5, 1.0), (9, 1.0)]:
        wait = policy.backoff(attempt)
        assert base <= wait <= base * 1.5
    assert 7.0 <= policy.backoff(1, retry_after=7.0) <= 7.0 * 1.5


async def test_in_cluster_service_account(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kubernetes_asyncio.config import incluster_config

    from workloadbuilder.testing._pki import Pki

    pki = Pki(tmp_path / "pki")
    serving = pki.serving("server")
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(str(serving.cert), str(serving.key))
    fake = FakeApi()
    fake.default = _reply(200, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}})
    url = await fake.start(server_ctx)
    token = tmp_path / "token"
    token.write_text("sa-token")
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(pki.ca_cert))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", url.rsplit(":", 1)[1])
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))
    try:
        async with KubeCluster.in_cluster() as cluster:
            await cluster.get("Pod", "p", "ns")
        # no kubeconfig anywhere: the default loading falls back to the service account
        async with KubeCluster.from_kubeconfig() as cluster:
            assert cluster.server == url
            await cluster.get("Pod", "p", "ns")
        assert [s.headers["Authorization"] for s in fake.seen] == ["Bearer sa-token"] * 2
    finally:
        await fake.stop()
