"""``/metrics``, ``/healthz``, ``/livez`` and ``/readyz`` on a tiny asyncio HTTP/1.1 server
(kube-scheduler serves the same paths on its secure port)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

__all__ = ["HealthServer"]


class HealthServer:
    """Serves health and metrics for one process.

    ``ready()`` decides ``/readyz`` (200 or 503); ``/healthz`` and ``/livez`` answer 200 while
    the process runs. ``/metrics`` renders ``registry`` (a ``prometheus_client``
    ``CollectorRegistry``) in the Prometheus text format; without one it is 404.
    """

    def __init__(self, ready: Callable[[], bool], *, registry: Any = None) -> None:
        self.ready = ready
        self.registry = registry
        self.server: asyncio.Server | None = None

    @property
    def port(self) -> int | None:
        """The bound port (useful with port 0), or None before :meth:`start`."""
        if self.server is None or not self.server.sockets:
            return None
        return int(self.server.sockets[0].getsockname()[1])

    async def start(self, host: str, port: int) -> None:
        """Listen on ``host:port``."""
        self.server = await asyncio.start_server(self._handle, host, port)

    async def stop(self) -> None:
        """Stop listening."""
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
            self.server = None

    def _respond(self, path: str) -> tuple[str, str, bytes]:
        if path == "/metrics" and self.registry is not None:
            from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

            return "200 OK", CONTENT_TYPE_LATEST, generate_latest(self.registry)
        if path in ("/healthz", "/livez"):
            return "200 OK", "text/plain", b"ok"
        if path == "/readyz":
            ok = bool(self.ready())
            status = "200 OK" if ok else "503 Service Unavailable"
            return status, "text/plain", b"ok" if ok else b"not ready"
        return "404 Not Found", "text/plain", b"not found"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await reader.readline()
            while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                pass
            parts = line.decode("latin-1").split()
            path = parts[1].split("?")[0] if len(parts) > 1 else "/"
            status, ctype, body = self._respond(path)
            head = (
                f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n"
            )
            writer.write(head.encode("latin-1") + body)
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
