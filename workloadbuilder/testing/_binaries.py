"""Where the control-plane binaries live and how to tell the user to build them."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from workloadbuilder.errors import WorkloadBuilderError

__all__ = [
    "ALL_COMPONENTS",
    "BIN_DIR_ENV",
    "K8S_VERSION",
    "BinariesNotFoundError",
    "ControlPlaneError",
    "default_bin_dir",
    "find_binaries",
]

#: The Kubernetes release the harness builds and the SDK targets.
K8S_VERSION = "v1.37.2"
#: Environment variable that points at a directory holding the binaries (also honoured by
#: ``hack/build-controlplane.sh`` as its output directory).
BIN_DIR_ENV = "WORKLOADBUILDER_BIN_DIR"
ALL_COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")


class ControlPlaneError(WorkloadBuilderError):
    """The local control plane could not be started or failed while running."""


class BinariesNotFoundError(ControlPlaneError):
    """Some control-plane binaries are missing; the message says how to build them."""

    def __init__(self, bin_dir: Path, missing: list[str]) -> None:
        self.bin_dir = bin_dir
        self.missing = missing
        super().__init__(
            f"control-plane binaries not found in {bin_dir}: {', '.join(missing)}. "
            f"Build them with `hack/build-controlplane.sh` (or `workloadbuilder controlplane "
            f"build`; needs Go >= 1.26), or point ${BIN_DIR_ENV} at a directory holding "
            f"{K8S_VERSION} binaries. Developers without them can deselect these tests with "
            f"`-m 'not controlplane'`."
        )


def default_bin_dir() -> Path:
    """``$WORKLOADBUILDER_BIN_DIR`` or ``~/.cache/workloadbuilder/k8s/<version>/bin``."""
    env = os.environ.get(BIN_DIR_ENV)
    if env:
        return Path(env).expanduser().absolute()
    return Path.home() / ".cache" / "workloadbuilder" / "k8s" / K8S_VERSION / "bin"


def find_binaries(
    bin_dir: Path | str | None = None,
    components: Iterable[str] = ("etcd", "kube-apiserver"),
) -> dict[str, Path]:
    """Return ``{component: executable path}``; raise :class:`BinariesNotFoundError` when any
    requested component is missing from ``bin_dir`` (default: :func:`default_bin_dir`)."""
    directory = Path(bin_dir).expanduser().absolute() if bin_dir else default_bin_dir()
    found: dict[str, Path] = {}
    missing: list[str] = []
    for name in components:
        if name not in ALL_COMPONENTS:
            raise ValueError(f"unknown component {name!r}; expected one of {ALL_COMPONENTS}")
        path = directory / name
        if path.is_file() and os.access(path, os.X_OK):
            found[name] = path
        else:
            missing.append(name)
    if missing:
        raise BinariesNotFoundError(directory, missing)
    return found
