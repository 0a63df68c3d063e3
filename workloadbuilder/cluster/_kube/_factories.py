"""Where a :class:`~workloadbuilder.cluster.KubeCluster`'s settings come from: a kubeconfig
file (read by :mod:`._kubeconfig`, no kubernetes-asyncio), kubernetes-asyncio's loader for
users with an ``exec`` credential plugin or an ``auth-provider`` and for the in-cluster
service account (imported only then), a ``Configuration`` handed in; and the environment's
proxy for a server, resolved once."""

from __future__ import annotations

import dataclasses
import os
import platform
import sys
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from workloadbuilder.cluster._kube._kubeconfig import (
    ClientSettings,
    KubeConfigError,
    read_kubeconfig,
    settings_from_configuration,
)

__all__ = [
    "USER_AGENT",
    "ConfigSource",
    "configuration_source",
    "environment_proxy",
    "in_cluster_source",
    "kubeconfig_source",
    "plugin_source",
]

#: loads the settings on first use (an exec plugin may run then)
ConfigSource = Callable[[], Awaitable[ClientSettings]]

#: the package's version: the root package is always imported before this module; read from
#: it, not imported (its lazy names would make the cluster seam depend on the whole SDK)
_VERSION = str(getattr(sys.modules.get("workloadbuilder"), "__version__", "unknown"))

#: the default ``User-Agent``, as client-go's (``<program>/<version> (<os>/<arch>) ...``)
USER_AGENT = (
    f"workloadbuilder/{_VERSION} ({sys.platform}/{platform.machine().lower() or 'unknown'})"
    f" python/{platform.python_version()}"
)


def kubeconfig_source(
    path: str | os.PathLike[str] | None, context: str | None
) -> tuple[ConfigSource, str] | None:
    """The settings source of a kubeconfig file (``$KUBECONFIG`` or ``~/.kube/config`` when
    ``path`` is None; ``:``-separated lists merge) and context, and its description; None
    when ``path`` is None, no such file exists and ``KUBERNETES_SERVICE_HOST`` is set (the
    caller goes in-cluster, like client-go's default loading rules). The files and the
    context are checked now (``KubeConfigError``)."""
    if path is None:
        paths = os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
    else:
        paths = os.fspath(path)
    existing = [p for p in paths.split(os.pathsep) if p and Path(p).expanduser().exists()]
    if not existing:
        if path is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
            return None
        raise KubeConfigError(f"kubeconfig not found: {paths}")
    kubeconfig = read_kubeconfig(existing, context)
    if kubeconfig.needs_plugin:
        loaded = plugin_source(existing, kubeconfig.context)
        disable_compression = kubeconfig.cluster.get("disable-compression") is True

        async def source() -> ClientSettings:  # the cluster's fields are ours to read
            settings = await loaded()
            return dataclasses.replace(settings, disable_compression=disable_compression)

    else:

        async def source() -> ClientSettings:
            return kubeconfig.settings()

    return source, f"kubeconfig {paths} context {kubeconfig.context}"


def in_cluster_source() -> tuple[ConfigSource, str]:
    """The settings source of the pod's service account (``KUBERNETES_SERVICE_HOST``/``PORT``,
    the mounted token, refreshed as it rotates, and CA), loaded by kubernetes-asyncio
    (imported now), and the server's URL. Raises ``KubeConfigError`` outside a pod."""
    from kubernetes_asyncio.client import Configuration
    from kubernetes_asyncio.config import ConfigException
    from kubernetes_asyncio.config.incluster_config import load_incluster_config

    cfg = type.__call__(Configuration)
    try:
        load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
    except ConfigException as e:
        raise KubeConfigError(f"not running in a cluster: {e}") from e
    return configuration_source(cfg), str(cfg.host)


def configuration_source(configuration: Any) -> ConfigSource:
    """The settings of a kubernetes-asyncio ``Configuration`` handed in, read when the
    cluster opens (its token through the configuration on every request)."""

    async def source() -> ClientSettings:
        return settings_from_configuration(configuration)

    return source


def environment_proxy(server: str) -> str | None:
    """The proxy the environment names for ``server`` (``HTTPS_PROXY``/``HTTP_PROXY`` by the
    URL's scheme, unless ``NO_PROXY`` exempts its host), or None."""
    parts = urllib.parse.urlsplit(server)
    if parts.hostname and urllib.request.proxy_bypass(parts.hostname):
        return None
    return urllib.request.getproxies().get(parts.scheme) or None


def plugin_source(paths: Sequence[str], context: str) -> ConfigSource:
    """Credentials from an ``exec`` plugin or an ``auth-provider``: kubernetes-asyncio's
    loader (imported now, only for such a kubeconfig) on the same files and context, the
    plugin re-run when the token it gave has expired."""
    where = os.pathsep.join(paths)

    async def source() -> ClientSettings:
        from kubernetes_asyncio.client import Configuration
        from kubernetes_asyncio.config import ConfigException
        from kubernetes_asyncio.config.kube_config import KubeConfigLoader, KubeConfigMerger

        try:
            merger = KubeConfigMerger(where)
            loader = KubeConfigLoader(
                config_dict=merger.config, config_base_path=None, active_context=context
            )
            cfg = type.__call__(Configuration)
            await loader.load_and_set(cfg)
        except (ConfigException, KeyError, TypeError, ValueError, AssertionError, OSError) as e:
            raise KubeConfigError(f"cannot load credentials from {where}: {e}") from e
        if getattr(loader, "exec_plugin_expiry", None) is not None:

            async def refresh(config: Configuration) -> None:
                await loader.load_from_exec_plugin()  # a no-op until the token expires
                token = getattr(loader, "token", None)
                if token:
                    config.api_key["BearerToken"] = token

            cfg.refresh_api_key_hook = refresh
        return settings_from_configuration(cfg)

    return source
