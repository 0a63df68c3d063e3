"""The lean HTTP/1.1 transport (``workloadbuilder/cluster/_transport/``) against scripted
asyncio servers on 127.0.0.1: keep-alive reuse, idle connections the server closed, framing
(content-length, chunked, read-to-close, 1xx, 204, gzip), large bodies, timeouts, the
failure types, TLS with a client certificate, and ``KubeCluster``'s error semantics
(401/409/429 + Retry-After, retries) being the same on the lean path and on aiohttp; streams
(watches): chunked, content-length and read-to-close bodies delivered as they arrive, cuts,
gzip and flow control, a connection of their own that never joins the pool, cancellation and
close, TLS, and ``KubeCluster``'s watch semantics (410, ERROR events, 5xx retries, refused
connections, big lines, refreshed tokens) on both transports."""

from __future__ import annotations

import asyncio
import datetime
import gzip
import json
import socket
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio.client import Configuration

from workloadbuilder.cluster import HttpTransport, KubeCluster, RetryPolicy
from workloadbuilder.cluster._retry import classify_transport_error
from workloadbuilder.cluster._transport import (
    ConnectError,
    Disconnected,
    ProtocolError,
    TLSError,
)
from workloadbuilder.errors import ApiError, Conflict, Gone, TooManyRequests, Unauthorized

Reply = Callable[["Request", asyncio.StreamWriter], Awaitable[bool]]


class Request:
    """One request as the scripted server read it."""

    def __init__(self, line: str, headers: dict[str, str], body: bytes, conn: int) -> None:
        self.method, self.target, _ = line.split(" ", 2)
        self.headers = headers
        self.body = body
        self.conn = conn
        self.reader: asyncio.StreamReader | None = None  # the rest of the connection


class Server:
    """A raw HTTP/1.1 server: ``replies`` are consumed in order (one per request; when empty,
    ``default``); each writes its bytes and returns whether to keep the connection open."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.replies: list[Reply] = []
        self.default: Reply = ok(b'{"ok":true}')
        self.connections = 0
        self.open = 0
        self.url = ""
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self, ssl_context: ssl.SSLContext | None = None) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=ssl_context)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"{'https' if ssl_context else 'http'}://127.0.0.1:{port}"
        return self.url

    async def stop(self) -> None:
        for w in list(self._writers):
            w.close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def close_idle(self) -> None:
        """Close every open connection from the server side."""
        for w in list(self._writers):
            w.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open += 1
        conn = self.connections
        self._writers.add(writer)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                headers = {}
                for line in lines[1:]:
                    if line:
                        name, _, value = line.partition(":")
                        headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                request = Request(lines[0], headers, body, conn)
                request.reader = reader
                self.requests.append(request)
                reply = self.replies.pop(0) if self.replies else self.default
                if not await reply(request, writer):
                    return
        except (ConnectionError, ssl.SSLError):
            return
        finally:
            self.open -= 1
            self._writers.discard(writer)
            writer.close()


def ok(body: bytes, *, status: str = "200 OK", headers: str = "") -> Reply:
    async def reply(request: Request, writer: asyncio.StreamWriter) -> bool:
        writer.write(
            f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{headers}"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        return True

    return reply


def raw(*parts: bytes, keep: bool = True, pause: float = 0.0) -> Reply:
    """Write ``parts`` one by one (``pause`` seconds apart), then keep or close."""

    async def reply(request: Request, writer: asyncio.StreamWriter) -> bool:
        for part in parts:
            writer.write(part)
            await writer.drain()
            if pause:
                await asyncio.sleep(pause)
        return keep

    return reply


def hang(release: asyncio.Event) -> Reply:
    async def reply(request: Request, writer: asyncio.StreamWriter) -> bool:
        await release.wait()
        return False

    return reply


async def eventually(cond: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    s = Server()
    await s.start()
    try:
        yield s
    finally:
        await s.stop()


@pytest.fixture
async def client(server: Server) -> AsyncIterator[HttpTransport]:
    t = HttpTransport(server.url, max_connections=4)
    try:
        yield t
    finally:
        await t.close()


# ------------------------------------------------------------------ keep-alive and the pool


async def test_sequential_requests_reuse_one_connection(
    server: Server, client: HttpTransport
) -> None:
    for i in range(5):
        resp = await client.request("POST", f"/x/{i}", [("X-N", str(i))], b'{"i":1}')
        assert (resp.status, resp.body) == (200, b'{"ok":true}')
    assert server.connections == 1
    assert [r.target for r in server.requests] == [f"/x/{i}" for i in range(5)]
    first = server.requests[0]
    assert first.headers["host"] == server.url.removeprefix("http://")
    assert first.headers["content-length"] == "7"
    assert first.headers["x-n"] == "0"
    assert first.headers["accept-encoding"] == "gzip"
    assert first.body == b'{"i":1}'


async def test_header_tuples_are_encoded_once_and_each_request_carries_its_own(
    server: Server, client: HttpTransport
) -> None:
    # a tuple of fields is encoded once and reused while the same fields come again; any
    # other fields (a new tuple, a list, a refreshed token) are what the request carries
    a = (("X-A", "1"), ("Authorization", "Bearer t1"))
    sent: list[Any] = [
        a,
        a,
        (("X-A", "1"), ("Authorization", "Bearer t2")),
        [("X-A", "2")],
        a,
        (("Accept-Encoding", "identity"),),
    ]
    for fields in sent:
        resp = await client.request("GET", "/h", fields)
        assert resp.status == 200
    seen = [
        (r.headers.get("x-a"), r.headers.get("authorization"), r.headers["accept-encoding"])
        for r in server.requests
    ]
    assert seen == [
        ("1", "Bearer t1", "gzip"),
        ("1", "Bearer t1", "gzip"),
        ("1", "Bearer t2", "gzip"),
        ("2", None, "gzip"),
        ("1", "Bearer t1", "gzip"),
        (None, None, "identity"),
    ]
    assert all(r.headers["host"] == server.url.removeprefix("http://") for r in server.requests)
    with pytest.raises(ValueError, match="invalid header"):  # checked when first encoded
        await client.request("GET", "/h", (("X-A", "1\r\nX-B: 2"),))


async def test_concurrency_is_bounded_by_the_pool(server: Server, client: HttpTransport) -> None:
    async def slow(request: Request, writer: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(0.05)
        return await ok(b"{}")(request, writer)

    server.default = slow
    await asyncio.gather(*(client.request("GET", "/") for _ in range(12)))
    assert len(server.requests) == 12
    assert server.connections == 4  # max_connections: more requests waited, none opened more
    assert client.connections == 4


async def test_connection_the_server_closed_while_idle_is_not_reused(
    server: Server, client: HttpTransport
) -> None:
    await client.request("GET", "/a")
    await server.close_idle()
    await eventually(lambda: server.open == 0)
    await asyncio.sleep(0.05)  # the client's loop sees the EOF
    resp = await client.request("POST", "/b", body=b"{}")  # not a retry: a fresh connection
    assert resp.status == 200
    assert server.connections == 2
    assert [r.target for r in server.requests] == ["/a", "/b"]


async def test_connection_close_header_and_idle_timeout_end_reuse(server: Server) -> None:
    server.replies = [ok(b"{}", headers="Connection: close\r\n")]
    t = HttpTransport(server.url, idle_timeout=0.0)
    try:
        await t.request("GET", "/1")  # the server asked to close
        await t.request("GET", "/2")  # kept alive by the server, but idle_timeout is 0
        await t.request("GET", "/3")
    finally:
        await t.close()
    assert server.connections == 3
    t2 = HttpTransport(server.url, idle_timeout=60.0)
    try:
        await t2.request("GET", "/4")
        await t2.request("GET", "/5")
    finally:
        await t2.close()
    assert server.connections == 4


async def test_base_url_path_prefixes_targets(server: Server) -> None:
    t = HttpTransport(server.url + "/k8s/clusters/c1/")
    try:
        await t.request("GET", "/api/v1/pods?limit=1")
    finally:
        await t.close()
    assert server.requests[0].target == "/k8s/clusters/c1/api/v1/pods?limit=1"


# ------------------------------------------------------------------ framing


async def test_chunked_body_in_pieces_with_extensions_and_trailers(
    server: Server, client: HttpTransport
) -> None:
    server.replies = [
        raw(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-A: 1\r\n",
            b"X-A: 2\r\n\r\n5;ext=1\r\nhel",
            b"lo\r\n",
            b"6\r\n wor",
            b"ld\r\n0\r\nTrailer: x\r\n\r\n",
            pause=0.01,
        )
    ]
    resp = await client.request("GET", "/")
    assert resp.body == b"hello world"
    assert resp.headers["x-a"] == "1, 2"
    assert resp.headers.get("Transfer-Encoding") == "chunked"  # lookups ignore case
    again = await client.request("GET", "/")  # the connection is still usable
    assert again.body == b'{"ok":true}'
    assert server.connections == 1


async def test_content_length_body_split_across_writes(
    server: Server, client: HttpTransport
) -> None:
    server.replies = [
        raw(b"HTTP/1.1 201 Created\r\nContent-Len", b"gth: 10\r\n\r\n0123", b"456789", pause=0.01)
    ]
    resp = await client.request("POST", "/", body=b"")
    assert (resp.status, resp.reason, resp.body) == (201, "Created", b"0123456789")
    assert server.requests[0].headers["content-length"] == "0"


@pytest.mark.parametrize("chunked", [False, True])
async def test_large_bodies_both_ways(server: Server, client: HttpTransport, chunked: bool) -> None:
    big = json.dumps({"items": [{"n": i, "pad": "x" * 100} for i in range(40_000)]}).encode()
    assert len(big) > 4_000_000
    if chunked:
        pieces = [big[i : i + 65_536] for i in range(0, len(big), 65_536)]
        framed = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"
        server.replies = [raw(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", framed)]
    else:
        server.replies = [ok(big)]
    resp = await client.request("PUT", "/big", body=big, timeout=30)
    assert resp.body == big
    assert server.requests[0].body == big


async def test_gzip_read_to_close_1xx_and_204(server: Server, client: HttpTransport) -> None:
    zipped = gzip.compress(b'{"zipped":true}')
    server.replies = [
        ok(zipped, headers="Content-Encoding: gzip\r\n"),
        raw(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"),
        raw(b"HTTP/1.1 204 No Content\r\n\r\n"),
        raw(b"HTTP/1.1 200 OK\r\n\r\nuntil", b" the end", keep=False, pause=0.01),
    ]
    assert (await client.request("GET", "/")).body == b'{"zipped":true}'
    assert (await client.request("GET", "/")).body == b"{}"
    assert (await client.request("DELETE", "/")).status == 204
    assert (await client.request("GET", "/")).body == b"until the end"
    assert server.connections == 1
    await client.request("GET", "/")  # read-to-close: that connection was not kept
    assert server.connections == 2


# ------------------------------------------------------------------ failures


async def test_whole_request_timeout(server: Server, client: HttpTransport) -> None:
    release = asyncio.Event()
    server.replies = [hang(release)]
    start = time.monotonic()
    with pytest.raises(TimeoutError):
        await client.request("GET", "/slow", timeout=0.2)
    assert 0.15 < time.monotonic() - start < 2.0
    release.set()
    assert client.connections == 0  # a timed-out connection is never reused
    assert (await client.request("GET", "/")).status == 200
    marker = classify_transport_error(TimeoutError())
    assert marker is not None and not marker.not_sent  # as aiohttp's timeouts


async def test_connect_timeout_when_the_tls_handshake_never_completes() -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)  # accepts TCP, never speaks TLS
    try:
        t = HttpTransport(f"https://127.0.0.1:{silent.getsockname()[1]}")
        start = time.monotonic()
        with pytest.raises(TimeoutError):
            await t.request("GET", "/", timeout=5.0, connect_timeout=0.2)
        assert time.monotonic() - start < 2.0
        await t.close()
    finally:
        silent.close()


async def test_refused_connection_is_connect_error_not_sent() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    t = HttpTransport(f"http://127.0.0.1:{port}")
    with pytest.raises(ConnectError) as info:
        await t.request("POST", "/", body=b"{}")
    marker = classify_transport_error(info.value)
    assert marker is not None and marker.not_sent  # a POST may be retried: it was not sent
    await t.close()


async def test_server_closing_without_an_answer_is_disconnected(
    server: Server, client: HttpTransport
) -> None:
    server.replies = [
        raw(keep=False),
        raw(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", keep=False),
        raw(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", keep=False),
    ]
    for _ in range(3):
        with pytest.raises(Disconnected) as info:
            await client.request("POST", "/", body=b"{}")
        marker = classify_transport_error(info.value)
        assert marker is not None and not marker.not_sent  # it may have run: no blind re-send
    assert len(server.requests) == 3
    # an idempotent request is sent once more when no response head arrived, only once
    server.replies = [raw(keep=False), ok(b"{}")]
    assert (await client.request("GET", "/")).body == b"{}"
    server.replies = [raw(keep=False), raw(keep=False)]
    with pytest.raises(Disconnected):
        await client.request("PUT", "/", body=b"{}")
    server.replies = [raw(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", keep=False)]
    with pytest.raises(Disconnected) as cut:
        await client.request("GET", "/")  # the head had arrived: not sent again
    assert cut.value.head_received
    assert len(server.requests) == 3 + 2 + 2 + 1


@pytest.mark.parametrize(
    "response",
    [
        b"SSH-2.0-OpenSSH\r\n\r\n",
        b"HTTP/1.1 abc OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: 1\r\n\r\nx",
        b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 3\r\n\r\nxyz",
    ],
)
async def test_malformed_responses_are_protocol_errors(
    server: Server, client: HttpTransport, response: bytes
) -> None:
    server.replies = [raw(response, keep=False)]
    with pytest.raises(ProtocolError) as info:
        await client.request("GET", "/")
    assert classify_transport_error(info.value) is None  # final, like a bad aiohttp response


async def test_header_injection_is_refused(client: HttpTransport) -> None:
    with pytest.raises(ValueError, match="invalid header"):
        await client.request("GET", "/", [("X-A", "1\r\nX-B: 2")])
    with pytest.raises(ValueError, match="invalid request target"):
        await client.request("GET", "/a b")
    with pytest.raises(ValueError, match="not an http"):
        HttpTransport("ftp://example.com")


async def test_cancelled_request_drops_its_connection(
    server: Server, client: HttpTransport
) -> None:
    release = asyncio.Event()
    server.replies = [hang(release)]
    task = asyncio.create_task(client.request("GET", "/slow"))
    await eventually(lambda: len(server.requests) == 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    release.set()
    assert client.connections == 0
    assert (await client.request("GET", "/")).status == 200


# ------------------------------------------------------------------ TLS


def _mutual_tls(tmp_path: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(server context requiring a client certificate, client context with alice's): a CA,
    a serving certificate valid for 127.0.0.1 and localhost, and the client alice."""
    from workloadbuilder.testing._pki import Pki

    pki = Pki(tmp_path / "pki")
    serving = pki.serving("server")  # valid for 127.0.0.1 and localhost
    alice = pki.client("alice", ("team",))
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki.ca_cert))
    server_ctx.load_cert_chain(str(serving.cert), str(serving.key))
    server_ctx.verify_mode = ssl.CERT_REQUIRED
    ctx = ssl.create_default_context(cafile=str(pki.ca_cert))
    ctx.load_cert_chain(str(alice.cert), str(alice.key))
    return server_ctx, ctx


async def test_tls_with_client_certificate_and_server_hostname(tmp_path: Path) -> None:
    server_ctx, ctx = _mutual_tls(tmp_path)
    peers: list[Any] = []
    s = Server()

    async def who(request: Request, writer: asyncio.StreamWriter) -> bool:
        peers.append(writer.get_extra_info("peercert"))
        return await ok(b"{}")(request, writer)

    s.default = who
    url = await s.start(server_ctx)
    try:
        t = HttpTransport(url, ssl_context=ctx)
        for _ in range(3):
            assert (await t.request("GET", "/")).status == 200
        await t.close()
        assert s.connections == 1  # keep-alive over TLS too
        subject = dict(x[0] for x in peers[0]["subject"])
        assert subject["commonName"] == "alice"
        # the certificate is checked against server_hostname (SNI), not the URL's host
        named = HttpTransport(url, ssl_context=ctx, server_hostname="localhost")
        assert (await named.request("GET", "/")).status == 200
        await named.close()
        wrong = HttpTransport(url, ssl_context=ctx, server_hostname="not-the-server.example")
        with pytest.raises(TLSError) as info:
            await wrong.request("GET", "/")
        assert classify_transport_error(info.value) is None  # final, as aiohttp's TLS errors
        await wrong.close()
        # an unknown CA does not verify
        stranger = HttpTransport(url, ssl_context=ssl.create_default_context())
        with pytest.raises(TLSError):
            await stranger.request("GET", "/")
        await stranger.close()
    finally:
        await s.stop()


# ------------------------------------------------------------------ KubeCluster on both paths


def _kube(url: str, transport: str, sleeps: list[float]) -> KubeCluster:
    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    return KubeCluster(
        Configuration(host=url),
        retry=RetryPolicy(max_attempts=3, initial_backoff=0.01, max_backoff=0.02, sleep=sleep),
        request_timeout=2.0,
        transport=transport,  # type: ignore[arg-type]
    )


def _status(code: int, reason: str) -> bytes:
    return json.dumps(
        {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "code": code}
    ).encode()


async def test_kube_cluster_request_paths_headers_and_event_timestamps(server: Server) -> None:
    async with _kube(server.url, "auto", []) as kube:
        await kube.bind("ns-1", "p.a-b_c~0", "n")  # DNS names go as they are
        await kube.get("ConfigMap", "a b/ç?", "x y")  # anything else is quoted
        before = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
        await kube.create_event(
            namespace="ns-1",
            involved_object={"apiVersion": "v1", "kind": "Pod", "name": "p"},
            reason="Scheduled",
            message="m",
        )
        after = datetime.datetime.now(datetime.UTC)
    bind, get, event = server.requests
    assert bind.target == "/api/v1/namespaces/ns-1/pods/p.a-b_c~0/binding"
    assert get.target == "/api/v1/namespaces/x%20y/configmaps/a%20b%2F%C3%A7%3F"
    for r in (bind, get, event):
        assert r.headers["accept"] == "application/json"
        assert r.headers["content-type"] == "application/json"
        assert r.headers["user-agent"].startswith("workloadbuilder")
    body = json.loads(event.body)
    assert body["firstTimestamp"] == body["lastTimestamp"]
    stamp = datetime.datetime.strptime(body["firstTimestamp"], "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=datetime.UTC
    )
    assert before <= stamp <= after


@pytest.mark.parametrize("transport", ["auto", "aiohttp"])
async def test_kube_cluster_asks_for_uncompressed_responses_when_told(
    server: Server, transport: str
) -> None:
    big = json.dumps({"kind": "ConfigMap", "data": {"a": "x" * 4096}}).encode()
    for compression in (True, False):
        server.requests.clear()
        cluster = KubeCluster(
            Configuration(host=server.url),
            transport=transport,  # type: ignore[arg-type]
            compression=compression,
        )
        async with cluster as kube:
            server.replies = [
                ok(gzip.compress(big), headers="content-encoding: gzip\r\n"),
                ok(b'{"kind":"Status"}'),
            ]
            got = await kube.get("ConfigMap", "a", "ns")  # a gzipped answer is still read
            assert isinstance(got, dict) and got["data"]["a"] == "x" * 4096
            await kube.bind("ns", "p", "n")
        for r in server.requests:
            encoding = r.headers.get("accept-encoding", "")
            if compression:  # client-go's default: gzip accepted
                assert "gzip" in encoding
            else:  # as kube-scheduler asks (DisableCompression)
                assert encoding == "identity"


@pytest.mark.parametrize("transport", ["auto", "aiohttp"])
async def test_kube_cluster_error_semantics_on_both_transports(
    server: Server, transport: str
) -> None:
    sleeps: list[float] = []
    async with _kube(server.url, transport, sleeps) as kube:
        assert (kube._http is not None) == (transport == "auto")
        server.replies = [ok(_status(401, "Unauthorized"), status="401 Unauthorized")]
        with pytest.raises(Unauthorized):
            await kube.get("Pod", "p", "ns")
        server.replies = [ok(_status(409, "Conflict"), status="409 Conflict")]
        with pytest.raises(Conflict) as conflict:
            await kube.bind("ns", "p", "n")
        assert conflict.value.status == 409 and conflict.value.reason == "Conflict"
        # 429 with Retry-After: waited (at least what was asked), then retried, even a POST
        server.replies = [
            ok(_status(429, "TooManyRequests"), status="429 Too Many", headers="retry-after: 3\r\n")
        ]
        await kube.bind("ns", "p", "n")
        assert len(sleeps) == 1 and sleeps[0] >= 3.0
        # a 429 whose Retry-After exceeds the bound fails at once
        server.replies = [
            ok(
                _status(429, "TooManyRequests"),
                status="429 Too Many",
                headers="Retry-After: 99\r\n",
            )
        ]
        with pytest.raises(TooManyRequests) as throttled:
            await kube.get("Pod", "p", "ns")
        assert throttled.value.retry_after == 99.0
        # a connection dropped before the answer: a GET is sent again at once (by the
        # transport, as aiohttp does), then by the retry policy; a POST is not re-sent
        sleeps.clear()
        server.replies = [raw(keep=False)]
        await kube.get("Pod", "p", "ns")
        assert sleeps == []
        server.replies = [raw(keep=False), raw(keep=False)]
        await kube.get("Pod", "p", "ns")
        assert len(sleeps) == 1
        server.replies = [raw(keep=False)]
        with pytest.raises(ApiError) as dropped:
            await kube.bind("ns", "p", "n")
        assert dropped.value.status == 0 and dropped.value.reason == "ConnectionError"
        assert len(sleeps) == 1
    bound = [r for r in server.requests if r.method == "POST"]
    assert len(bound) == 4  # 409, 429 + its retry, the dropped one (not re-sent)
    assert {r.headers["content-type"] for r in bound} == {"application/json"}
    assert all(r.headers["user-agent"].startswith("workloadbuilder/") for r in bound)
    assert json.loads(bound[0].body)["target"] == {"apiVersion": "v1", "kind": "Node", "name": "n"}


async def test_transport_choice_and_proxy_fallback(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ValueError, match="transport must be"):
        KubeCluster(Configuration(host=server.url), transport="h2")  # type: ignore[arg-type]
    monkeypatch.setenv("WORKLOADBUILDER_KUBE_TRANSPORT", "aiohttp")
    async with KubeCluster(Configuration(host=server.url)) as kube:
        assert kube.transport == "aiohttp" and kube._http is None
        await kube.get("Pod", "p", "ns")
    monkeypatch.delenv("WORKLOADBUILDER_KUBE_TRANSPORT")
    # a proxy (a kubeconfig proxy-url) is spoken by the lean transport too, on "auto" and
    # "lean" alike: absolute-form requests to the proxy for an http:// server (an https://
    # one goes through a CONNECT tunnel: test_http_proxy.py)
    for transport in ("auto", "lean"):
        cfg = Configuration(host="http://apiserver.invalid:6443")
        cfg.proxy = server.url
        async with KubeCluster(cfg, transport=transport) as kube:  # type: ignore[arg-type]
            assert kube._http is not None and kube._session is None
            await kube.get("Pod", "p", "ns")
        assert server.requests[-1].target.startswith("http://apiserver.invalid:6443/api/v1/")
        assert server.requests[-1].headers["host"] == "apiserver.invalid:6443"


async def test_json_bodies_with_and_without_orjson(monkeypatch: pytest.MonkeyPatch) -> None:
    import datetime

    from workloadbuilder.cluster._kube import _codec as _kube

    when = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
    doc = {"a": when, "b": [1, 2.5, None], 3: "x"}
    fast = _kube.dumps(doc)  # orjson
    big = _kube.dumps({"b": [2**70]})  # orjson refuses integers beyond 64 bits: json
    assert json.loads(big) == {"b": [2**70]}
    monkeypatch.setattr(_kube, "_orjson", None)
    slow = _kube.dumps(doc)
    expected = {"a": when.isoformat(), "b": [1, 2.5, None], "3": "x"}
    assert json.loads(fast) == json.loads(slow) == expected


def test_json_responses_keep_big_integers_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    from workloadbuilder.cluster._kube import _codec as _kube

    calls: list[bytes] = []
    real = _kube._orjson.loads

    def counting(data: bytes) -> Any:
        calls.append(data)
        return real(data)

    monkeypatch.setattr(_kube._orjson, "loads", counting)
    plain = b'{"kind":"Pod","metadata":{"resourceVersion":"123456"},"n":[1,2.5,-3,"\\u00e9"]}'
    assert _kube.loads(plain) == json.loads(plain)
    assert calls == [plain]  # the fast path
    for text in (
        b'{"n": 18446744073709551616}',  # beyond 64 bits: orjson would give a float
        b'{"n": -9223372036854775809}',
        b'{"n": 123456789012345678901234567890}',
    ):
        got = _kube.loads(text)
        assert got == json.loads(text) and isinstance(got["n"], int)
    assert len(calls) == 1  # none of those went to orjson
    surrogate = b'{"s": "\\ud800"}'  # orjson refuses a lone surrogate; json reads it
    assert _kube.loads(surrogate) == {"s": "\ud800"}
    monkeypatch.setattr(_kube, "_orjson", None)
    assert _kube.loads(plain) == json.loads(plain)


# ------------------------------------------------------------------ streams (watches)


def chunked(*pieces: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces)


STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
)


async def read_to_end(stream: Any) -> list[bytes]:
    pieces = []
    while True:
        data = await stream.read()
        if not data:
            return pieces
        pieces.append(data)


async def test_chunked_stream_delivers_pieces_as_they_arrive(
    server: Server, client: HttpTransport
) -> None:
    release = asyncio.Event()

    async def watch(request: Request, writer: asyncio.StreamWriter) -> bool:
        writer.write(STREAM_HEAD + chunked(b'{"n":1}\n'))
        await writer.drain()
        await release.wait()
        writer.write(chunked(b'{"n":2}\n{"n"', b":3}\n") + b"0\r\n\r\n")
        await writer.drain()
        return True  # the server would keep the connection: the client must not

    server.replies = [watch]
    stream = await client.stream("/w?watch=1", [("Authorization", "Bearer t")])
    assert (stream.status, stream.headers["content-type"]) == (200, "application/json")
    assert await stream.read() == b'{"n":1}\n'  # before the rest is even written
    release.set()
    rest = b"".join(await read_to_end(stream))
    assert rest == b'{"n":2}\n{"n":3}\n'
    assert await stream.read() == b""  # stays at the end
    request = server.requests[0]
    assert (request.method, request.target) == ("GET", "/w?watch=1")
    assert request.headers["authorization"] == "Bearer t"
    # the stream's connection is closed at its end and never joins the pool
    await eventually(lambda: server.open == 0)
    assert stream.closed and client.streams == 0 and client.connections == 0
    await client.request("GET", "/after")
    assert server.connections == 2


async def test_content_length_and_read_to_close_streams(
    server: Server, client: HttpTransport
) -> None:
    server.replies = [
        raw(b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\nline1\n", b"line2\n", pause=0.02),
        raw(b"HTTP/1.1 200 OK\r\n\r\nuntil\n", b"the end\n", keep=False, pause=0.02),
    ]
    first = await client.stream("/a")
    assert b"".join(await read_to_end(first)) == b"line1\nline2\n"
    second = await client.stream("/b")
    assert b"".join(await read_to_end(second)) == b"until\nthe end\n"  # the close is the end
    assert server.connections == 2 and client.streams == 0 and client.connections == 0


async def test_a_stream_never_takes_or_returns_a_pooled_connection(server: Server) -> None:
    t = HttpTransport(server.url, max_connections=1)
    release = asyncio.Event()

    async def held(request: Request, writer: asyncio.StreamWriter) -> bool:
        writer.write(STREAM_HEAD + chunked(b"x\n"))
        await writer.drain()
        await release.wait()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True

    try:
        await t.request("GET", "/warm")  # one idle pooled connection
        server.replies = [held]
        stream = await t.stream("/w")
        assert server.connections == 2  # the idle connection was not taken
        assert await stream.read() == b"x\n"
        # the pool's single slot is free while the stream is open
        assert (await asyncio.wait_for(t.request("GET", "/during"), 5)).status == 200
        assert [r.conn for r in server.requests] == [1, 2, 1]
        release.set()
        assert await read_to_end(stream) == []
        assert (t.connections, t.streams) == (1, 0)
        await t.request("GET", "/after")
        assert [r.conn for r in server.requests] == [1, 2, 1, 1]
    finally:
        release.set()
        await t.close()


async def test_stream_cut_mid_body_is_disconnected(server: Server, client: HttpTransport) -> None:
    server.replies = [
        raw(STREAM_HEAD + chunked(b'{"a":1}\n') + b"20\r\n" + b'{"type":"ADD', keep=False),
        raw(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + b"x\n", keep=False),
    ]
    for target in ("/chunked", "/length"):
        stream = await client.stream(target)
        got = b""
        with pytest.raises(Disconnected) as info:
            while True:
                data = await stream.read()
                assert data, "a cut stream does not end cleanly"
                got += data
        assert got in (b'{"a":1}\n', b"x\n")  # what arrived whole; never the cut piece
        assert info.value.head_received
        marker = classify_transport_error(info.value)
        assert marker is not None and not marker.not_sent
        stream.close()
    assert client.streams == 0


async def test_stream_error_status_body_and_connect_failures(
    server: Server, client: HttpTransport
) -> None:
    server.replies = [ok(_status(410, "Gone"), status="410 Gone")]
    stream = await client.stream("/w")
    assert stream.status == 410
    assert json.loads(await stream.read_all())["code"] == 410
    stream.close()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    nowhere = HttpTransport(f"http://127.0.0.1:{port}")
    with pytest.raises(ConnectError) as info:
        await nowhere.stream("/w")
    marker = classify_transport_error(info.value)
    assert marker is not None and marker.not_sent
    assert nowhere.streams == 0
    await nowhere.close()


async def test_large_gzip_stream_with_a_small_high_water_mark(
    server: Server, client: HttpTransport
) -> None:
    body = b"".join(json.dumps({"n": i, "pad": "y" * 5000}).encode() + b"\n" for i in range(800))
    zipped = gzip.compress(body)
    pieces = [zipped[i : i + 50_000] for i in range(0, len(zipped), 50_000)]
    server.replies = [
        raw(
            b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n",
            chunked(*pieces) + b"0\r\n\r\n",
        )
    ]
    stream = await client.stream("/w", high_water=4096)
    got = bytearray()
    while True:
        data = await stream.read()
        if not data:
            break
        got += data
        await asyncio.sleep(0)  # a slow reader: the socket is paused and resumed
    assert bytes(got) == body


async def test_cancelled_read_and_close_end_the_stream_and_its_socket(
    server: Server, client: HttpTransport
) -> None:
    release = asyncio.Event()
    server.default = held_stream(release)
    stream = await client.stream("/w")
    assert await stream.read() == b"x\n"
    task = asyncio.create_task(stream.read())
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    stream.close()  # what KubeCluster.watch does when its consumer is cancelled
    await eventually(lambda: server.open == 0)  # the server saw the socket close
    assert client.streams == 0 and await stream.read() == b""
    # HttpTransport.close() ends every open stream: a pending read returns b""
    other = await client.stream("/w2")
    assert await other.read() == b"x\n"
    pending = asyncio.create_task(other.read())
    await asyncio.sleep(0.05)
    await client.close()
    assert await asyncio.wait_for(pending, 5) == b""
    await eventually(lambda: server.open == 0)
    release.set()


def held_stream(release: asyncio.Event) -> Reply:
    """A stream that sends one line, then holds the connection until ``release`` is set or
    the client closes it (the server notices: its ``open`` count falls)."""

    async def reply(request: Request, writer: asyncio.StreamWriter) -> bool:
        writer.write(STREAM_HEAD + chunked(b"x\n"))
        await writer.drain()
        assert request.reader is not None
        waits = [
            asyncio.ensure_future(release.wait()),
            asyncio.ensure_future(request.reader.read()),
        ]
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for w in waits:
            w.cancel()
        return False

    return reply


async def test_tls_stream_with_client_certificate_and_server_hostname(tmp_path: Path) -> None:
    server_ctx, ctx = _mutual_tls(tmp_path)
    peers: list[Any] = []
    s = Server()

    async def watch(request: Request, writer: asyncio.StreamWriter) -> bool:
        peers.append(writer.get_extra_info("peercert"))
        writer.write(STREAM_HEAD + chunked(b'{"tls":true}\n') + b"0\r\n\r\n")
        await writer.drain()
        return True

    s.default = watch
    url = await s.start(server_ctx)
    try:
        t = HttpTransport(url, ssl_context=ctx, server_hostname="localhost")
        stream = await t.stream("/w")
        assert await read_to_end(stream) == [b'{"tls":true}\n']
        assert dict(x[0] for x in peers[0]["subject"])["commonName"] == "alice"
        await t.close()
        wrong = HttpTransport(url, ssl_context=ctx, server_hostname="not-the-server.example")
        with pytest.raises(TLSError) as info:
            await wrong.stream("/w")
        assert classify_transport_error(info.value) is None
        await wrong.close()
    finally:
        await s.stop()


# ------------------------------------------------------------------ KubeCluster's watches


POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}}


def event_line(etype: str, rv: int, pad: int = 0) -> bytes:
    obj = dict(POD, metadata=dict(POD["metadata"], resourceVersion=str(rv)))  # type: ignore[arg-type]
    if pad:
        obj["data"] = "z" * pad
    return json.dumps({"type": etype, "object": obj}).encode() + b"\n"


@pytest.mark.parametrize("transport", ["auto", "aiohttp"])
async def test_kube_watch_semantics_on_both_transports(server: Server, transport: str) -> None:
    sleeps: list[float] = []
    big = event_line("MODIFIED", 3, pad=3_000_000)  # one line larger than any read buffer
    server.replies = [
        ok(_status(500, "InternalError"), status="500 Internal Server Error"),
        raw(STREAM_HEAD, chunked(event_line("ADDED", 2)), chunked(big[:1000], big[1000:])),
    ]
    async with _kube(server.url, transport, sleeps) as kube:
        assert (kube._http is not None) == (transport == "auto")
        events: list[Any] = []

        async def consume() -> None:
            async for e in kube.watch("Pod", "ns", resource_version="1"):
                events.append(e)

        # a 500 on open is retried; the stream then stays open (its big line in two chunks)
        task = asyncio.create_task(consume())
        await eventually(lambda: len(events) == 2)
        assert [e.type for e in events] == ["ADDED", "MODIFIED"]
        assert len(events[1].object["data"]) == 3_000_000
        assert len(sleeps) == 1  # one retry wait, after the 500
        assert len(kube._streams) == 1
        await kube.close()  # close() ends the open watch quietly
        await asyncio.wait_for(task, 5)
        assert kube._streams == set()
    watches = [r for r in server.requests if "watch=1" in r.target]
    assert len(watches) == 2
    assert all(r.headers["user-agent"].startswith("workloadbuilder/") for r in watches)


@pytest.mark.parametrize("transport", ["auto", "aiohttp"])
async def test_kube_watch_410_cut_and_refused_on_both_transports(
    server: Server, transport: str
) -> None:
    sleeps: list[float] = []
    server.replies = [
        ok(_status(410, "Gone"), status="410 Gone"),
        raw(
            STREAM_HEAD,
            chunked(event_line("ADDED", 2)),
            b"40\r\n" + event_line("MODIFIED", 3)[:20],
            keep=False,
        ),
        raw(STREAM_HEAD + chunked(b'{"type":"ERROR","object":' + _status(410, "Expired") + b"}\n")),
    ]
    async with _kube(server.url, transport, sleeps) as kube:
        with pytest.raises(Gone):
            async for _ in kube.watch("Pod", "ns", resource_version="1"):
                pass
        # the connection drops mid-line: the whole event arrives, the stream ends quietly
        assert [e.type async for e in kube.watch("Pod", "ns")] == ["ADDED"]
        with pytest.raises(Gone):  # an ERROR event
            async for _ in kube.watch("Pod", "ns"):
                pass
        assert sleeps == []
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    async with _kube(f"http://127.0.0.1:{port}", transport, sleeps) as kube:
        with pytest.raises(ApiError) as refused:
            async for _ in kube.watch("Pod", "ns"):
                pass
        assert refused.value.status == 0 and refused.value.reason == "ConnectionError"
        assert len(sleeps) == 2  # retried (3 attempts) as a connection that could not be made


async def test_kube_watch_sends_the_refreshed_token_each_time(server: Server) -> None:
    cfg = Configuration(host=server.url)
    cfg.api_key = {"BearerToken": "zero"}
    cfg.api_key_prefix = {"BearerToken": "Bearer"}
    tokens = iter(["one", "two", "three", "four"])

    def refresh(config: Configuration) -> None:
        config.api_key["BearerToken"] = next(tokens)

    cfg.refresh_api_key_hook = refresh
    server.default = raw(STREAM_HEAD + chunked(event_line("ADDED", 2)) + b"0\r\n\r\n")
    async with KubeCluster(cfg) as kube:
        for _ in range(2):
            assert [e.type async for e in kube.watch("Pod", "ns")] == ["ADDED"]
        assert kube._http is not None and kube._http.streams == 0
    assert [r.headers["authorization"] for r in server.requests] == ["Bearer one", "Bearer two"]
    assert server.connections == 2  # one connection per watch


async def test_kube_watch_cancelled_closes_its_socket(server: Server) -> None:
    release = asyncio.Event()
    server.default = held_stream(release)
    server.replies = [
        raw(STREAM_HEAD + chunked(event_line("ADDED", 2)), pause=0),
    ]
    got = asyncio.Event()

    async def consume(kube: KubeCluster) -> None:
        async for _ in kube.watch("Pod", "ns"):
            got.set()

    try:
        async with KubeCluster(Configuration(host=server.url)) as kube:
            task = asyncio.create_task(consume(kube))
            await asyncio.wait_for(got.wait(), 5)
            assert server.open == 1
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await eventually(lambda: server.open == 0)
            assert kube._streams == set()
            assert kube._http is not None and kube._http.streams == 0
    finally:
        release.set()
