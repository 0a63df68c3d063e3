"""The pod webhook under hostile input: fuzzed AdmissionReviews (Hypothesis), wrong
apiVersions and missing fields, huge and endless bodies, slow clients (slowloris), idle
connections, and plain HTTP or garbage on the TLS port.

The webhook runs on 127.0.0.1 in a thread of its own (its own event loop), with the real
LeaderWorkerSet and JobSet Reconcilers on a MemoryCluster as resolvers, so the fuzzed pods go
through the real ``pod_group_for`` code. What must hold for every input: the answer is 200
(an allowing AdmissionReview for the same uid), 400, 408 or 413 with a JSON error, never a
5xx, never an exception out of the handler; a patch is exactly ``add /spec/schedulingGroup``
with the PodGroup the plan gives, and only for a Pod CREATE without a group; the server keeps
serving afterwards and its memory stays bounded.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import http.client
import json
import socket
import ssl
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workloadbuilder import integrations
from workloadbuilder.cluster import MemoryCluster
from workloadbuilder.integrations.webhook import PodWebhook, self_signed
from workloadbuilder.kinds import plan_for
from workloadbuilder.kinds.lws import lws_pods
from workloadbuilder.runtime import Reconciler
from workloadbuilder.testing import make_lws, make_scheduling

MAX_BODY = 256 * 1024
NS = "fuzz"


class Served:
    """A PodWebhook on 127.0.0.1 in a background thread."""

    def __init__(self, hook: PodWebhook) -> None:
        self.hook = hook
        self.loop = asyncio.new_event_loop()
        self.errors: list[str] = []
        self.loop.set_exception_handler(lambda _l, ctx: self.errors.append(str(ctx)))
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.run(hook.start("127.0.0.1", 0))
        port = hook.port
        assert port is not None
        self.port = port

    def run(self, coro: Any, timeout: float = 60) -> Any:
        """Run a coroutine on the server's loop and wait for it."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        """Stop the server and the loop."""
        self.run(self.hook.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


@pytest.fixture(scope="module")
def lws() -> dict[str, Any]:
    obj = make_lws("trainer", NS).replicas(2).size(3).scheduling(make_scheduling()).obj()
    obj["metadata"]["uid"] = "uid-trainer"
    return obj


@pytest.fixture(scope="module")
def served(lws: dict[str, Any]) -> Iterator[Served]:
    """The webhook with the real LWS and JobSet Reconcilers (their informers synced on a
    MemoryCluster that holds one LWS)."""
    cluster = MemoryCluster()
    recs = [Reconciler(cluster, integrations.integration_for(k)) for k in ("lws", "jobset")]

    async def setup() -> None:
        await cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        await cluster.create(copy.deepcopy(lws))
        for r in recs:
            await r.start()

    hook = PodWebhook(recs, max_body=MAX_BODY, read_timeout=1.0, idle_timeout=1.5)
    srv = Served(hook)
    srv.run(setup())
    try:
        yield srv
    finally:

        async def teardown() -> None:
            for r in recs:
                await r.stop()

        srv.run(teardown())
        srv.close()


def _post(port: int, body: bytes, *, timeout: float = 10) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", "/mutate", body=body, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        raw = resp.read()
    finally:
        conn.close()
    try:
        return resp.status, json.loads(raw)
    except ValueError:
        return resp.status, raw


def _review(obj: Any, *, uid: str = "u", op: str = "CREATE", kind: str = "Pod") -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": kind},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": NS,
            "operation": op,
            "object": obj,
        },
    }


def _check_answer(status: int, answer: Any, review: Any) -> list[dict[str, Any]] | None:
    """The invariant of every answer; the decoded patch (or None)."""
    assert status in (200, 400, 408, 413), (status, answer)
    assert isinstance(answer, dict), answer
    if status != 200:
        assert isinstance(answer.get("error"), str) and answer["error"], answer
        return None
    assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
    resp = answer["response"]
    assert resp["uid"] == review["request"]["uid"] and resp["allowed"] is True, resp
    if "patch" not in resp:
        return None
    assert resp["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(resp["patch"]))
    assert isinstance(patch, list) and len(patch) == 1, patch
    (op,) = patch
    assert op["op"] == "add" and op["path"] == "/spec/schedulingGroup", op
    assert set(op["value"]) == {"podGroupName"} and isinstance(op["value"]["podGroupName"], str)
    return patch  # type: ignore[no-any-return]


# ---- malformed reviews ------------------------------------------------------------------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=st.binary(max_size=300) | _JSON.map(lambda v: json.dumps(v).encode()))
def test_arbitrary_bodies_get_clean_refusals(served: Served, body: bytes) -> None:
    status, answer = _post(served.port, body)
    assert status in (200, 400), (status, answer)
    if status == 200:  # only a well-formed v1 review with a uid is answered
        review = json.loads(body)
        _check_answer(status, answer, review)
        assert "patch" not in answer["response"]  # nothing here is one of our pods


@pytest.mark.parametrize(
    ("mutate", "error"),
    [
        (lambda r: r.update(apiVersion="admission.k8s.io/v1beta1"), "only admission.k8s.io/v1"),
        (lambda r: r.update(apiVersion=""), "unsupported apiVersion"),
        (lambda r: r.update(apiVersion=None), "unsupported apiVersion"),
        (lambda r: r.update(apiVersion=1), "unsupported apiVersion"),
        (lambda r: r.pop("apiVersion"), "unsupported apiVersion"),
        (lambda r: r.update(kind="ConversionReview"), "expected kind AdmissionReview"),
        (lambda r: r.pop("kind"), "expected kind AdmissionReview"),
        (lambda r: r.pop("request"), "request.uid is missing"),
        (lambda r: r.update(request=[]), "request.uid is missing"),
        (lambda r: r["request"].pop("uid"), "request.uid is missing"),
        (lambda r: r["request"].update(uid=7), "request.uid is missing"),
    ],
)
def test_wrong_versions_and_missing_fields_are_400(
    served: Served, lws: dict[str, Any], mutate: Any, error: str
) -> None:
    review = _review(lws_pods(lws)[0])
    mutate(review)
    status, answer = _post(served.port, json.dumps(review).encode())
    assert status == 400 and error in answer["error"], answer


# ---- pods: ours, mutated, not ours ------------------------------------------------------


def _ours(lws: dict[str, Any]) -> list[dict[str, Any]]:
    pods = lws_pods(lws)
    for p in pods:
        p["metadata"]["namespace"] = NS
    return pods


def test_our_pods_get_exactly_the_planned_group(served: Served, lws: dict[str, Any]) -> None:
    plan = plan_for(lws)
    for pod in _ours(lws):
        review = _review(pod, uid=pod["metadata"]["name"])
        patch = _check_answer(*_post(served.port, json.dumps(review).encode()), review)
        assert patch is not None, pod["metadata"]["name"]
        assert patch[0]["value"]["podGroupName"] == plan.pod_group_for(pod)


def _set(obj: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        nxt = obj.get(key)
        if not isinstance(nxt, dict):
            nxt = obj[key] = {}
        obj = nxt
    obj[path[-1]] = value


_PATHS = st.sampled_from(
    [
        ("metadata",),
        ("metadata", "labels"),
        ("metadata", "annotations"),
        ("metadata", "ownerReferences"),
        ("metadata", "namespace"),
        ("metadata", "name"),
        ("spec",),
        ("spec", "containers"),
        ("spec", "schedulingGroup"),
        ("kind",),
        ("apiVersion",),
    ]
)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    index=st.integers(0, 5),
    edits=st.lists(st.tuples(_PATHS, _JSON), max_size=3),
    op=st.sampled_from(["CREATE", "CREATE", "UPDATE", "DELETE", "CONNECT", ""]),
    kind=st.sampled_from(["Pod", "Pod", "Pod", "Service", ""]),
)
def test_mutated_pods_never_get_a_wrong_patch(
    served: Served, lws: dict[str, Any], index: int, edits: list[Any], op: str, kind: str
) -> None:
    pod = _ours(lws)[index]
    for path, value in edits:
        _set(pod, path, value)
    review = _review(pod, op=op, kind=kind)
    status, answer = _post(served.port, json.dumps(review).encode())
    patch = _check_answer(status, answer, review)
    assert status == 200  # a well-formed review is always answered (and allowed)
    if patch is None:
        return
    # a patch only for a Pod CREATE without a group, and the group is what the plan says
    assert op == "CREATE" and kind == "Pod"
    spec = pod.get("spec")
    assert isinstance(spec, dict) and spec.get("schedulingGroup") is None
    expected = plan_for(lws).pod_group_for(pod)
    assert patch[0]["value"]["podGroupName"] == expected


def test_a_huge_review_of_deep_and_wide_json_is_handled(
    served: Served, lws: dict[str, Any]
) -> None:
    pod = _ours(lws)[0]
    pod["metadata"]["annotations"] = {f"k{i}": "v" * 20 for i in range(5000)}
    _set(pod, ("spec", "extra"), "DEEP")
    text = json.dumps(_review(pod))
    for deep in ("[" * 100_000 + "]" * 100_000, '{"a":' * 50_000 + "1" + "}" * 50_000):
        body = text.replace('"DEEP"', deep).encode()  # nested past json's recursion limit
        status, answer = _post(served.port, body)
        assert status in (400, 413), (status, answer)
        assert isinstance(answer, dict) and answer["error"]
    status, answer = _post(served.port, text.encode())  # wide but flat: answered
    assert _check_answer(status, answer, json.loads(text)) is not None
    status, _ = _post(served.port, json.dumps(_review(_ours(lws)[1])).encode())
    assert status == 200


# ---- size, slow clients, idle connections -----------------------------------------------


def test_bodies_over_the_limit_are_413_and_never_buffered(served: Served) -> None:
    # announced too large: refused before the body is read
    status, answer = _post(served.port, b"{" + b" " * (MAX_BODY + 10) + b"}")
    assert status == 413 and "larger than" in answer["error"]
    # chunked (no Content-Length), 64 MiB offered: refused at the limit, memory bounded
    tracemalloc.start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
        conn.putrequest("POST", "/mutate")
        conn.putheader("Transfer-Encoding", "chunked")
        conn.putheader("Content-Type", "application/json")
        conn.endheaders()
        chunk = b" " * 65536
        sent = 0
        with contextlib.suppress(OSError):
            for _ in range(1024):
                conn.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                sent += len(chunk)
            conn.send(b"0\r\n\r\n")
        resp = conn.getresponse()
        status = resp.status
        conn.close()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert status == 413
    assert peak < 16 * MAX_BODY, f"peak {peak} bytes for a {MAX_BODY}-byte limit ({sent} sent)"
    assert _post(served.port, b"{}")[0] == 400  # still serving


def _raw(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    return s


def _closed_within(s: socket.socket, seconds: float) -> tuple[bool, bytes]:
    """Read until the server closes; (closed in time, what it sent)."""
    s.settimeout(0.2)
    got = b""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            data = s.recv(65536)
        except TimeoutError:
            continue
        except OSError:
            return True, got
        if not data:
            return True, got
        got += data
    return False, got


def test_a_slow_body_gets_408(served: Served) -> None:
    s = _raw(served.port)
    try:
        s.sendall(
            b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000\r\n\r\n{"
        )
        t0 = time.monotonic()
        while time.monotonic() - t0 < 0.6:  # dribble below the read timeout (1 s)
            with contextlib.suppress(OSError):
                s.sendall(b" ")
            time.sleep(0.1)
        closed, answer = _closed_within(s, 5)
    finally:
        s.close()
    assert closed and answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b"not received within" in answer


def test_slow_headers_and_idle_connections_are_closed(served: Served) -> None:
    slow = _raw(served.port)
    idle = [_raw(served.port) for _ in range(50)]
    try:
        slow.sendall(b"POST /mutate HTTP/1.1\r\n")
        t0 = time.monotonic()
        for i in range(10):  # one header line every 0.2 s, never finished
            with contextlib.suppress(OSError):
                slow.sendall(b"X-Slow-%d: y\r\n" % i)
            time.sleep(0.2)
        # meanwhile a real request is served at once
        assert _post(served.port, b"{}", timeout=5)[0] == 400
        closed, _ = _closed_within(slow, 5)
        assert closed, "a never-finished request kept its connection"
        assert time.monotonic() - t0 < 8
        for s in idle:
            assert _closed_within(s, 5)[0], "an idle connection was kept"
    finally:
        slow.close()
        for s in idle:
            s.close()


# ---- TLS --------------------------------------------------------------------------------


def test_plain_http_and_garbage_on_the_tls_port(tmp_path: Path, lws: dict[str, Any]) -> None:
    cert, key, ca = self_signed(str(tmp_path), ["127.0.0.1"])
    hook = PodWebhook([], cert_file=cert, key_file=key, idle_timeout=1.5)
    srv = Served(hook)
    try:
        for payload in (
            b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
            b"\x16\x03\x01\x00\x05garbage-that-is-no-client-hello" * 10,
            b"\x00" * 4096,
        ):
            s = _raw(srv.port)
            with contextlib.suppress(OSError):
                s.sendall(payload)
            closed, answer = _closed_within(s, 5)
            s.close()
            assert closed and not answer.startswith(b"HTTP/1.1 200"), answer[:100]
        # a client that connects and never says hello is dropped too (bounded)
        # and TLS still works
        ctx = ssl.create_default_context(cadata=ca.decode())
        conn = http.client.HTTPSConnection("127.0.0.1", srv.port, context=ctx, timeout=10)
        review = _review(_ours(lws)[0])
        conn.request("POST", "/mutate", body=json.dumps(review).encode())
        resp = conn.getresponse()
        assert resp.status == 200
        resp.read()
        conn.close()
        assert hook.reviews == 1
        assert srv.errors == [], srv.errors
    finally:
        srv.close()


def test_the_handler_raised_nothing(served: Served) -> None:
    """After everything above (same module server): no unhandled exception on its loop and
    the counters add up."""
    assert served.errors == [], served.errors
    assert served.hook.reviews > 0 and served.hook.rejected > 0
