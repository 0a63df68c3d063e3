"""Fixtures for the tests that talk to the real API server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from controlplane._crds import crds, crds_kcm  # the JobSet / LWS / TrainJob CRDs fixtures
from workloadbuilder.testing import ControlPlane, RestClient

__all__ = ["api", "crds", "crds_kcm", "namespace", "our_plane", "upstream_plane"]


@pytest.fixture(scope="session")
def api(control_plane: ControlPlane) -> Iterator[RestClient]:
    """An admin REST client for the session's API server."""
    with control_plane.client() as client:
        yield client


@pytest.fixture
def namespace(control_plane: ControlPlane) -> str:
    """A fresh namespace per test (never deleted: the etcd data dir is thrown away)."""
    return control_plane.create_namespace("t-")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the differential-validation case counts (see test_differential.py)."""
    from controlplane._differential import SUMMARIES

    for line in SUMMARIES:
        terminalreporter.write_line(line)


@pytest.fixture(scope="module")
def upstream_plane(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """A parity module's private plane with the upstream kube-scheduler (``_parity``)."""
    from controlplane._parity import parity_plane

    with parity_plane(control_plane, upstream=True) as plane:
        yield plane


@pytest.fixture(scope="module")
def our_plane(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """A parity module's private plane without a scheduler: ours runs in process against it
    (a module may override both, e.g. with kube-controller-manager)."""
    from controlplane._parity import parity_plane

    with parity_plane(control_plane, upstream=False) as plane:
        yield plane
