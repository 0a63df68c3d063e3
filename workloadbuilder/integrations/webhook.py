"""The pod-mutating admission webhook: at pod CREATE, ``spec.schedulingGroup.podGroupName``
for pods of integrated workloads that someone else's controller creates.

* ``POST /mutate`` takes an ``admission.k8s.io/v1`` ``AdmissionReview``. A Pod CREATE whose pod
  belongs to one of the reconcilers' owners (``Reconciler.pod_group_for``: the owner's plan
  maps the pod through its ownerReferences / labels / annotations to the same deterministic
  PodGroup name the controller creates) is allowed with one JSON patch operation,
  ``add /spec/schedulingGroup``; nothing else of the pod is touched. Every other request
  (other kinds or operations, pods that already name a group, pods that are not ours, pods
  that cannot be parsed) is allowed unchanged: the webhook never blocks a pod.
* A body that is not JSON, not an ``AdmissionReview`` of ``admission.k8s.io/v1`` or has no
  ``request.uid`` gets HTTP 400 with a JSON ``{"error": ...}``; a body over ``max_body``
  bytes 413 (it is never buffered beyond the limit); a body not received within
  ``read_timeout`` seconds 408 (slow clients). A connection that sends no complete request
  within ``idle_timeout`` seconds is closed (idle keep-alive connections too; slow headers
  count as no request), a TLS handshake must finish within asyncio's 60 s, and a plain-HTTP
  client on the TLS port fails its handshake and is dropped. Nothing raises out of the
  handler.
* TLS from ``cert_file`` / ``key_file`` (cert-manager's ``tls.crt`` / ``tls.key``); both are
  re-read when their modification time changes (checked every ``reload_interval`` seconds),
  so a renewed certificate is served without a restart. :func:`self_signed` makes a CA and
  a serving certificate for development; :func:`patch_ca_bundle` writes the CA into a
  ``MutatingWebhookConfiguration``.

``failurePolicy``: the deploy manifests use ``Ignore`` with an ``objectSelector`` that only
sends pods carrying one of the integrations' labels (see docs/integrations.md): a pod of a
gang created while the webhook is down is then scheduled alone (it has no group) rather
than not created at all -- the cluster keeps working when the webhook is down. Pick
``Fail`` to prefer "not created" over "scheduled alone" for those selected pods.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import ipaddress
import json
import logging
import os
import ssl
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from aiohttp import web

from workloadbuilder.cluster import Cluster, ResourceInfo, register_resource

__all__ = [
    "MUTATING_WEBHOOK_CONFIGURATION",
    "PodGroupResolver",
    "PodWebhook",
    "patch_ca_bundle",
    "review_response",
    "self_signed",
]

_log = logging.getLogger(__name__)

MUTATING_WEBHOOK_CONFIGURATION = register_resource(
    ResourceInfo(
        group="admissionregistration.k8s.io",
        version="v1",
        kind="MutatingWebhookConfiguration",
        plural="mutatingwebhookconfigurations",
        namespaced=False,
        has_status=False,
    )
)


class PodGroupResolver(Protocol):
    """What the webhook asks (a :class:`~workloadbuilder.runtime.Reconciler`)."""

    def pod_group_for(self, pod: Mapping[str, Any]) -> str | None:
        """The PodGroup the new pod joins, or None."""
        ...


class _BadReview(ValueError):
    pass


def _parse_review(body: bytes) -> dict[str, Any]:
    try:
        review = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise _BadReview(f"the body is not JSON: {e}") from e
    if not isinstance(review, dict):
        raise _BadReview("the body is not a JSON object")
    if review.get("kind") != "AdmissionReview":
        raise _BadReview(f"expected kind AdmissionReview, got {review.get('kind')!r}")
    if review.get("apiVersion") != "admission.k8s.io/v1":
        raise _BadReview(
            f"unsupported apiVersion {review.get('apiVersion')!r}: only admission.k8s.io/v1"
        )
    request = review.get("request")
    if not isinstance(request, dict) or not isinstance(request.get("uid"), str):
        raise _BadReview("request.uid is missing")
    return review


def review_response(
    uid: str, patch: Sequence[Mapping[str, Any]] | None = None, warning: str | None = None
) -> dict[str, Any]:
    """An allowing ``AdmissionReview`` response (with a JSON patch when given)."""
    response: dict[str, Any] = {"uid": uid, "allowed": True}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(list(patch)).encode()).decode()
    if warning:
        response["warnings"] = [warning]
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


class PodWebhook:
    """The webhook server (see the module docstring). ``resolvers`` are asked in order."""

    def __init__(
        self,
        resolvers: Sequence[PodGroupResolver],
        *,
        cert_file: str | None = None,
        key_file: str | None = None,
        max_body: int = 3 * 1024 * 1024,
        reload_interval: float = 2.0,
        read_timeout: float = 10.0,
        idle_timeout: float = 30.0,
    ) -> None:
        self.resolvers = list(resolvers)
        self.cert_file = cert_file
        self.key_file = key_file
        self.max_body = max_body
        self.read_timeout = read_timeout
        self.idle_timeout = idle_timeout
        self.reload_interval = reload_interval
        self.ssl_context: ssl.SSLContext | None = None
        self._mtimes: tuple[float, float] | None = None
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
        self._reloader: asyncio.Task[None] | None = None
        self.reviews = 0
        self.patched = 0
        self.rejected = 0
        self.reloads = 0

    # ---- HTTP ------------------------------------------------------------------------

    def app(self) -> web.Application:
        """The aiohttp application (``/mutate``, ``/healthz``)."""
        app = web.Application(client_max_size=self.max_body)
        app.router.add_post("/mutate", self._mutate)
        app.router.add_get("/healthz", self._healthz)
        return app

    async def _healthz(self, _request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _mutate(self, request: web.Request) -> web.Response:
        if request.content_length is not None and request.content_length > self.max_body:
            self.rejected += 1  # refused before reading a byte of it
            return self._too_large()
        try:
            async with asyncio.timeout(self.read_timeout):
                body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            self.rejected += 1
            return self._too_large()
        except TimeoutError:
            self.rejected += 1
            return web.json_response(
                {"error": f"the AdmissionReview was not received within {self.read_timeout:g}s"},
                status=408,
                headers={"Connection": "close"},
            )
        if len(body) > self.max_body:
            self.rejected += 1
            return self._too_large()
        try:
            review = _parse_review(body)
        except _BadReview as e:
            self.rejected += 1
            return web.json_response({"error": str(e)}, status=400)
        self.reviews += 1
        return web.json_response(self.review(review))

    def _too_large(self) -> web.Response:
        return web.json_response(
            {"error": f"AdmissionReview larger than {self.max_body} bytes"},
            status=413,
            headers={"Connection": "close"},
        )

    def review(self, review: Mapping[str, Any]) -> dict[str, Any]:
        """The response to one parsed ``AdmissionReview`` (always allowing)."""
        request = review["request"]
        uid = str(request["uid"])
        try:
            patch = self._patch_for(request)
        except Exception:  # never block a pod because of us
            _log.exception("webhook: review %s failed; allowing the pod unchanged", uid)
            return review_response(uid, warning="workloadbuilder webhook: internal error")
        if patch:
            self.patched += 1
        return review_response(uid, patch)

    def _patch_for(self, request: Mapping[str, Any]) -> list[dict[str, Any]] | None:
        kind = request.get("kind") or {}
        if request.get("operation") != "CREATE" or not isinstance(kind, Mapping):
            return None
        if kind.get("group") not in ("", None) or kind.get("kind") != "Pod":
            return None
        if request.get("subResource"):
            return None
        pod = request.get("object")
        if not isinstance(pod, dict):
            return None
        spec = pod.get("spec")
        if not isinstance(spec, dict) or spec.get("schedulingGroup") is not None:
            return None
        meta = dict(pod.get("metadata") or {})
        if not meta.get("namespace") and isinstance(request.get("namespace"), str):
            meta["namespace"] = request["namespace"]
            pod = {**pod, "metadata": meta}
        for resolver in self.resolvers:
            group = resolver.pod_group_for(pod)
            if group:
                return [
                    {"op": "add", "path": "/spec/schedulingGroup", "value": {"podGroupName": group}}
                ]
        return None

    # ---- TLS -------------------------------------------------------------------------

    def _file_mtimes(self) -> tuple[float, float]:
        assert self.cert_file and self.key_file
        return os.stat(self.cert_file).st_mtime, os.stat(self.key_file).st_mtime

    def load_certificates(self) -> bool:
        """(Re)load the certificate and key into the serving context when the files
        changed; True when they were loaded."""
        if not (self.cert_file and self.key_file):
            return False
        mtimes = self._file_mtimes()
        if mtimes == self._mtimes and self.ssl_context is not None:
            return False
        if self.ssl_context is None:
            ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ctx.minimum_version = ssl.TLSVersion.TLSv1_2
            self.ssl_context = ctx
        # new handshakes use the new chain; open connections keep theirs
        self.ssl_context.load_cert_chain(self.cert_file, self.key_file)
        self._mtimes = mtimes
        self.reloads += 1
        return True

    async def _watch_certificates(self) -> None:
        while True:
            await asyncio.sleep(self.reload_interval)
            try:
                if self.load_certificates():
                    _log.info("webhook: reloaded %s", self.cert_file)
            except (OSError, ssl.SSLError) as e:  # half-written files: keep the old ones
                _log.warning("webhook: certificate reload failed: %s", e)

    async def start(self, host: str, port: int) -> None:
        """Serve on ``host:port`` (TLS when certificate files are set)."""
        self.load_certificates()
        self._runner = web.AppRunner(
            self.app(),
            access_log=None,
            keepalive_timeout=self.idle_timeout,
            lingering_time=1.0,  # the unread rest of a refused body: drained 1 s at most
        )
        await self._runner.setup()
        self._site = web.TCPSite(self._runner, host, port, ssl_context=self.ssl_context)
        await self._site.start()
        if self.cert_file:
            self._reloader = asyncio.create_task(self._watch_certificates())

    @property
    def port(self) -> int | None:
        """The bound port (useful with port 0)."""
        server = getattr(self._site, "_server", None)
        sockets = getattr(server, "sockets", None)
        return int(sockets[0].getsockname()[1]) if sockets else None

    async def stop(self) -> None:
        """Stop serving."""
        if self._reloader is not None:
            self._reloader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reloader
            self._reloader = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


def self_signed(directory: str, hosts: Sequence[str], *, days: int = 365) -> tuple[str, str, bytes]:
    """A development CA and a serving certificate for ``hosts`` (DNS names or IPs) in
    ``directory`` (``tls.crt``, ``tls.key``); returns (cert file, key file, CA PEM)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "workloadbuilder-webhook-ca")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for h in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            names.append(x509.DNSName(h))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    os.makedirs(directory, exist_ok=True)
    cert_file = os.path.join(directory, "tls.crt")
    key_file = os.path.join(directory, "tls.key")
    with open(cert_file, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
    return cert_file, key_file, ca.public_bytes(serialization.Encoding.PEM)


async def patch_ca_bundle(cluster: Cluster, name: str, ca_pem: bytes) -> int:
    """Set ``clientConfig.caBundle`` of every webhook of the MutatingWebhookConfiguration
    ``name`` to ``ca_pem``; returns how many webhooks were patched."""
    config = await cluster.get(MUTATING_WEBHOOK_CONFIGURATION, name)
    assert isinstance(config, dict)
    bundle = base64.b64encode(ca_pem).decode()
    webhooks = config.get("webhooks") or []
    ops = [
        {"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": bundle}
        for i in range(len(webhooks))
    ]
    if ops:
        await cluster.patch(MUTATING_WEBHOOK_CONFIGURATION, name, ops, patch_type="json")
    return len(ops)
