"""Test and development support: fluent object builders and a real Kubernetes v1.37.2 control
plane on loopback.

:mod:`workloadbuilder.testing.builders` (re-exported here) builds test objects as plain dicts,
Kueue style: ``make_job("a").parallelism(3).obj()``, ``make_pod``, ``make_node``,
``make_pod_group``, ... It imports only the standard library.

``ControlPlane`` runs etcd + kube-apiserver (optionally kube-controller-manager and the
upstream kube-scheduler) with every workload-aware-scheduling feature gate on. The binaries
come from ``hack/build-controlplane.sh``; :func:`find_binaries` locates them (or says how to
build them). The pytest plugin ``workloadbuilder.testing._pytest`` provides the fixtures
``control_plane`` and ``control_plane_kcm`` for tests marked ``controlplane``.

The harness names are resolved lazily, so importing this package for the builders does not
pull in ``cryptography`` (the harness's PKI) or the HTTP client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from workloadbuilder._lazy import lazy_names
from workloadbuilder.testing.builders import (
    PAUSE_IMAGE,
    CompositePodGroupBuilder,
    CompositePodGroupTemplateBuilder,
    JobBuilder,
    JobSetBuilder,
    LeaderWorkerSetBuilder,
    NodeBuilder,
    ObjectBuilder,
    PodBuilder,
    PodGroupBuilder,
    PodGroupTemplateBuilder,
    PodTemplateBuilder,
    PriorityClassBuilder,
    ReplicatedJobBuilder,
    SchedulingBuilder,
    WorkloadBuilder,
    make_composite_pod_group,
    make_composite_pod_group_template,
    make_job,
    make_jobset,
    make_lws,
    make_node,
    make_pod,
    make_pod_group,
    make_pod_group_template,
    make_pod_template,
    make_priority_class,
    make_replicated_job,
    make_scheduling,
    make_workload,
)

if TYPE_CHECKING:
    from workloadbuilder.testing._aiorest import AsyncRestClient
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

_LAZY: dict[str, str] = {
    "BIN_DIR_ENV": "workloadbuilder.testing._binaries",
    "K8S_VERSION": "workloadbuilder.testing._binaries",
    "BinariesNotFoundError": "workloadbuilder.testing._binaries",
    "ControlPlaneError": "workloadbuilder.testing._binaries",
    "default_bin_dir": "workloadbuilder.testing._binaries",
    "find_binaries": "workloadbuilder.testing._binaries",
    "ADMIN_USER": "workloadbuilder.testing._controlplane",
    "DEFAULT_CONTROLLERS": "workloadbuilder.testing._controlplane",
    "DISABLED_ADMISSION_PLUGINS": "workloadbuilder.testing._controlplane",
    "RUNTIME_CONFIG": "workloadbuilder.testing._controlplane",
    "WAS_FEATURE_GATES": "workloadbuilder.testing._controlplane",
    "ControlPlane": "workloadbuilder.testing._controlplane",
    "Response": "workloadbuilder.testing._rest",
    "RestClient": "workloadbuilder.testing._rest",
    "AsyncRestClient": "workloadbuilder.testing._aiorest",
    "collection_path": "workloadbuilder.testing._util",
    "object_path": "workloadbuilder.testing._util",
    "wait_for": "workloadbuilder.testing._util",
}

__all__ = [
    "ADMIN_USER",
    "BIN_DIR_ENV",
    "DEFAULT_CONTROLLERS",
    "DISABLED_ADMISSION_PLUGINS",
    "K8S_VERSION",
    "PAUSE_IMAGE",
    "RUNTIME_CONFIG",
    "WAS_FEATURE_GATES",
    "AsyncRestClient",
    "BinariesNotFoundError",
    "CompositePodGroupBuilder",
    "CompositePodGroupTemplateBuilder",
    "ControlPlane",
    "ControlPlaneError",
    "JobBuilder",
    "JobSetBuilder",
    "LeaderWorkerSetBuilder",
    "NodeBuilder",
    "ObjectBuilder",
    "PodBuilder",
    "PodGroupBuilder",
    "PodGroupTemplateBuilder",
    "PodTemplateBuilder",
    "PriorityClassBuilder",
    "ReplicatedJobBuilder",
    "Response",
    "RestClient",
    "SchedulingBuilder",
    "WorkloadBuilder",
    "collection_path",
    "default_bin_dir",
    "find_binaries",
    "make_composite_pod_group",
    "make_composite_pod_group_template",
    "make_job",
    "make_jobset",
    "make_lws",
    "make_node",
    "make_pod",
    "make_pod_group",
    "make_pod_group_template",
    "make_pod_template",
    "make_priority_class",
    "make_replicated_job",
    "make_scheduling",
    "make_workload",
    "object_path",
    "wait_for",
]


__getattr__, __dir__ = lazy_names(globals(), _LAZY)
