"""A minimal synchronous JSON client for the local API server (tests and the harness itself).

It keeps one HTTPS connection alive, authenticates with a client certificate and returns the
decoded JSON body with the HTTP status. It deliberately knows nothing about kinds or retries:
tests that compare our behaviour with the server's want the raw answer.
"""

from __future__ import annotations

import http.client
import json
import ssl
import threading
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

__all__ = ["Response", "RestClient"]

JSON = dict[str, Any]


@attrs.frozen(kw_only=True)
class Response:
    """One API answer: HTTP ``status`` and the decoded JSON ``body`` (``{}`` when empty)."""

    status: int
    body: JSON

    @property
    def ok(self) -> bool:
        """True for 2xx."""
        return 200 <= self.status < 300

    @property
    def message(self) -> str:
        """The ``Status.message`` of an error answer (empty otherwise)."""
        msg = self.body.get("message", "")
        return msg if isinstance(msg, str) else str(msg)

    @property
    def causes(self) -> list[JSON]:
        """``Status.details.causes`` of a 422 answer."""
        details = self.body.get("details") or {}
        causes = details.get("causes") or []
        return [c for c in causes if isinstance(c, dict)]


class RestClient:
    """Talks HTTPS to ``server`` (``https://127.0.0.1:PORT``) with a client certificate.

    Thread-safe (one lock around the single keep-alive connection).
    """

    def __init__(
        self,
        server: str,
        *,
        ca_file: Path,
        cert_file: Path | None = None,
        key_file: Path | None = None,
        timeout: float = 30.0,
    ) -> None:
        parsed = urllib.parse.urlsplit(server)
        if parsed.scheme != "https" or parsed.hostname is None or parsed.port is None:
            raise ValueError(f"expected https://host:port, got {server!r}")
        self.server = server
        self._host = parsed.hostname
        self._port = parsed.port
        self._timeout = timeout
        self._ctx = ssl.create_default_context(cafile=str(ca_file))
        if cert_file is not None:
            self._ctx.load_cert_chain(str(cert_file), str(key_file) if key_file else None)
        self._conn: http.client.HTTPSConnection | None = None
        self._lock = threading.Lock()

    def _connection(self) -> http.client.HTTPSConnection:
        if self._conn is None:
            self._conn = http.client.HTTPSConnection(
                self._host, self._port, context=self._ctx, timeout=self._timeout
            )
        return self._conn

    def close(self) -> None:
        """Close the keep-alive connection."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> RestClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | list[Any] | None = None,
        *,
        params: Mapping[str, str] | None = None,
        content_type: str = "application/json",
    ) -> Response:
        """Send one request and decode the JSON answer."""
        status, raw = self.request_raw(method, path, body, params=params, content_type=content_type)
        try:
            decoded: Any = json.loads(raw) if raw else {}
        except ValueError:
            decoded = {"message": raw.decode(errors="replace")}
        return Response(status=status, body=decoded if isinstance(decoded, dict) else {})

    def request_raw(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | list[Any] | None = None,
        *,
        params: Mapping[str, str] | None = None,
        content_type: str = "application/json",
    ) -> tuple[int, bytes]:
        """Send one request; return the status and the undecoded body (e.g. ``/metrics``).

        Reconnects once if the kept-alive connection was closed by the server (a reset, a
        broken pipe or a TLS EOF); a failed connection is never reused.
        """
        if params:
            path = f"{path}?{urllib.parse.urlencode(params)}"
        payload = None if body is None else json.dumps(body).encode()
        headers = {"Accept": "application/json, */*"}
        if payload is not None:
            headers["Content-Type"] = content_type
        with self._lock:
            for attempt in (0, 1):
                conn = self._connection()
                try:
                    conn.request(method, path, body=payload, headers=headers)
                    resp = conn.getresponse()
                    return resp.status, resp.read()
                except (OSError, http.client.HTTPException):
                    # a kept-alive connection the server closed (reset, broken pipe, TLS EOF):
                    # drop it, so the next request does not find it half-used, and retry once
                    conn.close()
                    self._conn = None
                    if attempt:
                        raise
                except BaseException:
                    conn.close()
                    self._conn = None
                    raise
        raise AssertionError("unreachable")

    def get(self, path: str, **params: str) -> Response:
        """GET ``path``."""
        return self.request("GET", path, params=params or None)

    def create(self, path: str, obj: Mapping[str, Any], *, dry_run: bool = False) -> Response:
        """POST ``obj`` to the collection ``path`` (server-side dry run when asked)."""
        return self.request("POST", path, obj, params={"dryRun": "All"} if dry_run else None)

    def replace(self, path: str, obj: Mapping[str, Any], *, dry_run: bool = False) -> Response:
        """PUT ``obj`` to the object ``path`` (server-side dry run when asked)."""
        return self.request("PUT", path, obj, params={"dryRun": "All"} if dry_run else None)

    def patch(
        self,
        path: str,
        patch: Mapping[str, Any] | list[Any],
        *,
        patch_type: str = "merge",
        dry_run: bool = False,
    ) -> Response:
        """PATCH ``path`` with a ``merge``, ``json`` or ``strategic`` patch."""
        ctype = {
            "merge": "application/merge-patch+json",
            "json": "application/json-patch+json",
            "strategic": "application/strategic-merge-patch+json",
        }[patch_type]
        return self.request(
            "PATCH",
            path,
            patch,
            params={"dryRun": "All"} if dry_run else None,
            content_type=ctype,
        )

    def delete(self, path: str) -> Response:
        """DELETE ``path``."""
        return self.request("DELETE", path)
