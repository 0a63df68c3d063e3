"""Reading a kubeconfig without kubernetes-asyncio, and what a request needs from it.

:class:`KubeCluster` used kubernetes-asyncio for its configuration; importing that package
imports its ~1,500 generated model modules (about half a second of CPU at every start of a
component). This module reads what most kubeconfigs hold itself:

* files: a ``:``-separated list (``$KUBECONFIG``) merged as client-go merges them -- the first
  file that names a cluster, user or context wins, and the first file that sets
  ``current-context`` sets it; relative paths are relative to the file the entry came from;
* the context: the given one, else ``current-context``;
* the cluster: ``server``, ``certificate-authority`` / ``-data`` (data wins),
  ``insecure-skip-tls-verify``, ``tls-server-name``, ``proxy-url``, ``disable-compression``;
* the user: ``client-certificate`` / ``-data`` and ``client-key`` / ``-data`` (data wins),
  ``token`` or ``tokenFile`` (the file re-read at most once a minute, as client-go does, so
  a rotated token is picked up), ``username`` / ``password`` (basic auth).

A user with an ``exec`` credential plugin or an ``auth-provider`` is loaded by
kubernetes-asyncio as before (imported then, only for such a kubeconfig), as is the in-cluster
service account. Either way the result is a :class:`ClientSettings`: the server, one TLS
context, the proxy and an ``Authorization`` source.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import ssl
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from workloadbuilder.errors import WorkloadBuilderError

__all__ = [
    "ClientSettings",
    "KubeConfigError",
    "Kubeconfig",
    "read_kubeconfig",
    "settings_from_configuration",
]

logger = logging.getLogger(__name__)

#: the ``Authorization`` header value of the next request (None: send none); awaited per request
TokenSource = Callable[[], Awaitable[str | None]]

#: how long a ``tokenFile``'s content is reused before the file is read again (client-go: 1 min)
TOKEN_FILE_PERIOD = 60.0

#: libyaml's safe loader when PyYAML was built with it
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

#: the clock of the token-file period (tests replace it)
_now = time.monotonic


class KubeConfigError(WorkloadBuilderError):
    """The kubeconfig (or in-cluster service account) cannot be used: missing file, unknown
    context, malformed content, or no service-account token."""


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """What every request to one API server needs: the base URL, the TLS context, the name
    the certificate is checked against, the proxy and the source of the ``Authorization``
    header. What :class:`~workloadbuilder.cluster.KubeCluster` takes
    (``KubeCluster(ClientSettings(host=..., authorization=...))``); the factories make them
    from a kubeconfig or the in-cluster service account."""

    #: the API server's base URL (``https://host:port``, or ``http://`` without TLS)
    host: str
    #: the TLS context of ``https://`` (CA, client certificate); None: a default one
    ssl_context: ssl.SSLContext | None = None
    #: the name the server's certificate is checked against (None: the URL's host)
    server_hostname: str | None = None
    #: an ``http://`` proxy URL (credentials in it); None: the environment's, if any
    proxy: str | None = None
    #: extra header fields for the proxy
    proxy_headers: Mapping[str, str] | None = None
    #: the source of the ``Authorization`` header, awaited per request (None: send none)
    authorization: TokenSource | None = None
    #: the cluster's ``disable-compression``: ask for uncompressed responses
    disable_compression: bool = False


def _static(value: str) -> TokenSource:
    async def token() -> str | None:
        return value

    return token


def _token_file(path: Path) -> TokenSource:
    """``Bearer <content of path>``, re-read once ``TOKEN_FILE_PERIOD`` has passed."""
    state: dict[str, Any] = {"value": None, "due": 0.0}

    def read() -> str | None:
        try:
            text = path.read_text().strip()
        except OSError as e:
            if state["value"] is not None:
                return str(state["value"])  # keep the last token while the file is replaced
            raise KubeConfigError(f"cannot read tokenFile {path}: {e}") from e
        return f"Bearer {text}" if text else None

    state["value"] = read()
    state["due"] = _now() + TOKEN_FILE_PERIOD

    async def token() -> str | None:
        now = _now()
        if now >= state["due"]:
            state["value"] = read()
            state["due"] = now + TOKEN_FILE_PERIOD
        return state["value"]  # type: ignore[no-any-return]

    return token


class Kubeconfig:
    """One context of a merged kubeconfig: its cluster and user entries, and the directories
    their relative paths are relative to. Made by :func:`read_kubeconfig`."""

    def __init__(
        self,
        *,
        paths: Sequence[str],
        context: str,
        cluster: Mapping[str, Any],
        cluster_dir: Path,
        user: Mapping[str, Any],
        user_dir: Path,
    ) -> None:
        self.paths = list(paths)
        self.context = context
        self.cluster = cluster
        self.cluster_dir = cluster_dir
        self.user = user
        self.user_dir = user_dir

    @property
    def needs_plugin(self) -> bool:
        """Whether the user's credentials come from an ``exec`` plugin or an
        ``auth-provider`` (loaded by kubernetes-asyncio, see the module)."""
        return bool(self.user.get("exec") or self.user.get("auth-provider"))

    def settings(self) -> ClientSettings:
        """The server, TLS context, proxy and credentials. Raises :class:`KubeConfigError`
        (a missing file, bad base64, a certificate that does not load)."""
        if self.needs_plugin:
            raise KubeConfigError("this user's credentials need kubernetes-asyncio's loader")
        server = self.cluster.get("server")
        if not isinstance(server, str) or not server:
            raise KubeConfigError(f"context {self.context!r}: the cluster has no server")
        host = server.rstrip("/")
        ctx: ssl.SSLContext | None = None
        if host.startswith("https"):
            try:
                ctx = self._ssl_context()
            except (OSError, ValueError) as e:  # ssl.SSLError is an OSError
                raise KubeConfigError(f"cannot set up TLS for {host}: {e}") from e
        name = self.cluster.get("tls-server-name")
        proxy = self.cluster.get("proxy-url")
        return ClientSettings(
            host=host,
            ssl_context=ctx,
            server_hostname=str(name) if name else None,
            proxy=str(proxy) if proxy else None,
            proxy_headers=None,
            authorization=self._authorization(),
            disable_compression=self.cluster.get("disable-compression") is True,
        )

    # ------------------------------------------------------------------ internals

    def _data(self, entry: Mapping[str, Any], key: str, base: Path) -> bytes | None:
        """``<key>-data`` (base64) or the content of the file ``<key>`` names, or None."""
        data = entry.get(f"{key}-data")
        if data:
            try:
                return base64.b64decode("".join(str(data).split()), validate=True)
            except (binascii.Error, ValueError) as e:
                raise KubeConfigError(f"{key}-data is not valid base64: {e}") from e
        path = entry.get(key)
        if path:
            file = (base / Path(str(path)).expanduser()).resolve()
            try:
                return file.read_bytes()
            except OSError as e:
                raise KubeConfigError(f"cannot read {key} {file}: {e}") from e
        return None

    def _ssl_context(self) -> ssl.SSLContext:
        ca = self._data(self.cluster, "certificate-authority", self.cluster_dir)
        ctx = ssl.create_default_context(cadata=ca.decode("ascii") if ca else None)
        cert = self._data(self.user, "client-certificate", self.user_dir)
        if cert:
            key = self._data(self.user, "client-key", self.user_dir)
            _load_cert_chain(ctx, cert, key)
        if self.cluster.get("insecure-skip-tls-verify"):
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        return ctx

    def _authorization(self) -> TokenSource | None:
        """The source of the ``Authorization`` header (None: the user has no token or
        password, e.g. a client certificate)."""
        user = self.user
        token = user.get("token")
        if token:
            return _static(f"Bearer {token}")
        token_file = user.get("tokenFile")
        if token_file:
            return _token_file((self.user_dir / Path(str(token_file)).expanduser()).resolve())
        if "username" in user and "password" in user:
            pair = f"{user['username']}:{user['password']}".encode()
            return _static("Basic " + base64.b64encode(pair).decode())
        return None


def _load_cert_chain(ctx: ssl.SSLContext, cert: bytes, key: bytes | None) -> None:
    """Load a client certificate and key given as bytes (``ssl`` reads only files: they are
    written to a private temporary directory and removed at once)."""
    with tempfile.TemporaryDirectory(prefix="wb-kubeconfig-") as tmp:
        cert_file = Path(tmp) / "client.crt"
        cert_file.write_bytes(cert)
        key_file = None
        if key:
            key_file = Path(tmp) / "client.key"
            fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(key)
        ctx.load_cert_chain(str(cert_file), keyfile=str(key_file) if key_file else None)


def _named(doc: Mapping[str, Any], section: str, path: str) -> list[tuple[str, Any]]:
    items = doc.get(section) or []
    if not isinstance(items, list):
        raise KubeConfigError(f"{path}: {section} must be a list")
    out: list[tuple[str, Any]] = []
    for item in items:
        if not isinstance(item, dict) or "name" not in item:
            raise KubeConfigError(f"{path}: every entry of {section} needs a name")
        out.append((str(item["name"]), item))
    return out


#: a kubeconfig user's impersonation fields (``kubectl --as`` and friends): refused
_IMPERSONATION = ("as", "as-uid", "as-groups", "as-user-extra")


def read_kubeconfig(paths: Sequence[str], context: str | None = None) -> Kubeconfig:
    """Merge the kubeconfig files (see the module) and select ``context`` (the merged
    ``current-context`` when None). Raises :class:`KubeConfigError` for a file that cannot
    be read or parsed, a missing context, or a context whose cluster is missing."""
    clusters: dict[str, tuple[Mapping[str, Any], Path]] = {}
    users: dict[str, tuple[Mapping[str, Any], Path]] = {}
    contexts: dict[str, Mapping[str, Any]] = {}
    current: str | None = None
    for path in paths:
        file = Path(path).expanduser()
        try:
            doc = yaml.load(file.read_text(), Loader=_YAML_LOADER) or {}
        except OSError as e:
            raise KubeConfigError(f"cannot read kubeconfig {file}: {e}") from e
        except (yaml.YAMLError, UnicodeDecodeError) as e:
            raise KubeConfigError(f"cannot use kubeconfig {file}: {e}") from e
        if not isinstance(doc, dict):
            raise KubeConfigError(f"cannot use kubeconfig {file}: not a mapping")
        base = file.resolve().parent
        for name, item in _named(doc, "clusters", str(file)):
            clusters.setdefault(name, (item.get("cluster") or {}, base))
        for name, item in _named(doc, "users", str(file)):
            users.setdefault(name, (item.get("user") or {}, base))
        for name, item in _named(doc, "contexts", str(file)):
            contexts.setdefault(name, item.get("context") or {})
        if current is None and doc.get("current-context"):
            current = str(doc["current-context"])
    where = os.pathsep.join(paths)
    selected = context if context is not None else current
    if not selected:
        raise KubeConfigError(f"cannot use kubeconfig {where}: no current-context and no context")
    name = selected
    ctx = contexts.get(name)
    if ctx is None:
        raise KubeConfigError(f"cannot use kubeconfig {where}: no context named {name!r}")
    if not isinstance(ctx, dict) or not ctx.get("cluster"):
        raise KubeConfigError(f"cannot use kubeconfig {where}: context {name!r} names no cluster")
    cluster = clusters.get(str(ctx["cluster"]))
    if cluster is None:
        raise KubeConfigError(
            f"cannot use kubeconfig {where}: context {name!r} names cluster "
            f"{ctx['cluster']!r}, which is not defined"
        )
    user_name = ctx.get("user")
    user: tuple[Mapping[str, Any], Path] = ({}, cluster[1])
    if user_name and str(user_name) in users:
        user = users[str(user_name)]
    for section, (entry, _) in (("cluster", cluster), ("user", user)):
        if not isinstance(entry, dict):
            raise KubeConfigError(f"cannot use kubeconfig {where}: the {section} is not a mapping")
    impersonation = sorted(k for k in _IMPERSONATION if user[0].get(k))
    if impersonation:  # never drop them silently: the requests would run as someone else
        raise KubeConfigError(
            f"cannot use kubeconfig {where}: user {user_name!r} of context {name!r} sets "
            f"{', '.join(impersonation)}; impersonation is not supported"
        )
    logger.debug(
        "kubeconfig %s: context %s, cluster %s, user %s",
        where,
        name,
        ctx["cluster"],
        user_name if user_name and str(user_name) in users else "(none)",
    )
    return Kubeconfig(
        paths=paths,
        context=name,
        cluster=cluster[0],
        cluster_dir=cluster[1],
        user=user[0],
        user_dir=user[1],
    )


def settings_from_configuration(cfg: Any) -> ClientSettings:
    """:class:`ClientSettings` from a kubernetes-asyncio ``Configuration``: its TLS settings
    as kubernetes-asyncio builds them (CA file, client certificate and key, ``verify_ssl``,
    strict verification), its proxy and its ``BearerToken`` (read through the configuration
    on every request: exec plugins and rotated service-account tokens refresh it)."""
    host = str(cfg.host)
    ctx: ssl.SSLContext | None = None
    if host.startswith("https"):
        try:
            ctx = ssl.create_default_context(cafile=cfg.ssl_ca_cert)
            if cfg.cert_file:
                ctx.load_cert_chain(cfg.cert_file, keyfile=cfg.key_file)
        except (OSError, ValueError) as e:  # ssl.SSLError is an OSError
            raise KubeConfigError(f"cannot set up TLS for {host}: {e}") from e
        if not cfg.verify_ssl:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if cfg.disable_strict_ssl_verification:
            ctx.verify_flags &= ~ssl.VERIFY_X509_STRICT

    async def authorization() -> str | None:
        if "BearerToken" in cfg.api_key:
            token = await cfg.get_api_key_with_prefix("BearerToken")
            return str(token) if token else None
        return None

    return ClientSettings(
        host=host,
        ssl_context=ctx,
        server_hostname=cfg.tls_server_name or None,
        proxy=cfg.proxy or None,
        proxy_headers=cfg.proxy_headers or None,
        authorization=authorization,
    )
