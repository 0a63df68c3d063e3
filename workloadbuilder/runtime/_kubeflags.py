"""The kube connection flags every command shares (``--kubeconfig``, ``--context``, ...) and
the one way to turn them into a :class:`~workloadbuilder.cluster.KubeCluster`."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workloadbuilder.cluster import KubeCluster

__all__ = ["add_kube_flags", "kube_cluster"]


def add_kube_flags(parser: argparse.ArgumentParser, *, namespace: bool = False) -> None:
    """``--kubeconfig``, ``--context`` and, with ``namespace=True``, ``-n/--namespace``
    (default None: the caller decides, kubectl uses the context's)."""
    parser.add_argument(
        "--kubeconfig",
        help="path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)",
    )
    parser.add_argument("--context", help="the kubeconfig context to use")
    if namespace:
        parser.add_argument("-n", "--namespace", help="the namespace (default: the context's)")


def kube_cluster(args: argparse.Namespace, **options: Any) -> KubeCluster:
    """A :class:`~workloadbuilder.cluster.KubeCluster` from the flags of
    :func:`add_kube_flags`: the kubeconfig file and context, or, without ``--kubeconfig``
    and with no kubeconfig file present inside a pod, the pod's service account (client-go's
    default loading rules). ``options`` go to the ``KubeCluster`` constructor. Raises
    ``KubeConfigError`` (a ``WorkloadBuilderError``) when neither works."""
    from workloadbuilder.cluster import KubeCluster

    return KubeCluster.from_kubeconfig(
        getattr(args, "kubeconfig", None), getattr(args, "context", None), **options
    )
