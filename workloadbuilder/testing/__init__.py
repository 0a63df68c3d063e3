"""Test and development support: a real Kubernetes v1.37.2 control plane on loopback.

``ControlPlane`` runs etcd + kube-apiserver (optionally kube-controller-manager and the
upstream kube-scheduler) with every workload-aware-scheduling feature gate on. The binaries
come from ``hack/build-controlplane.sh``; :func:`find_binaries` locates them (or says how to
build them). The pytest plugin ``workloadbuilder.testing._pytest`` provides the fixtures
``control_plane`` and ``control_plane_kcm`` for tests marked ``controlplane``.
"""

from workloadbuilder.testing._binaries import (
    BIN_DIR_ENV,
    K8S_VERSION,
    BinariesNotFoundError,
    ControlPlaneError,
    default_bin_dir,
    find_binaries,
)
from workloadbuilder.testing._controlplane import (
    ADMIN_USER,
    DEFAULT_CONTROLLERS,
    DISABLED_ADMISSION_PLUGINS,
    RUNTIME_CONFIG,
    WAS_FEATURE_GATES,
    ControlPlane,
)
from workloadbuilder.testing._rest import Response, RestClient
from workloadbuilder.testing._util import collection_path, object_path, wait_for

__all__ = [
    "ADMIN_USER",
    "BIN_DIR_ENV",
    "DEFAULT_CONTROLLERS",
    "DISABLED_ADMISSION_PLUGINS",
    "K8S_VERSION",
    "RUNTIME_CONFIG",
    "WAS_FEATURE_GATES",
    "BinariesNotFoundError",
    "ControlPlane",
    "ControlPlaneError",
    "Response",
    "RestClient",
    "collection_path",
    "default_bin_dir",
    "find_binaries",
    "object_path",
    "wait_for",
]
