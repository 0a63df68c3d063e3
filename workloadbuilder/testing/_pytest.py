"""pytest plugin: the real control plane as session fixtures.

Register it in ``tests/conftest.py`` with ``pytest_plugins = ["workloadbuilder.testing._pytest"]``.

Fixtures (session scope, started on first use, stopped at session end):

* ``control_plane`` — etcd + kube-apiserver with every WAS gate on;
* ``control_plane_kcm`` — the same plus kube-controller-manager (job, garbage collector,
  namespace, podgroup protection and resourceclaim controllers).

Tests that use them are marked ``controlplane`` automatically (and ``controllermanager`` for
``control_plane_kcm``), so ``-m "not controlplane"`` deselects them. When the binaries are
missing the tests **fail** (CI must run them) with a message that says how to build them.
The binary directory comes from ``--controlplane-bin-dir``, ``$WORKLOADBUILDER_BIN_DIR`` or
the build script's cache directory.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest

from workloadbuilder.testing._binaries import BinariesNotFoundError, ControlPlaneError
from workloadbuilder.testing._controlplane import ControlPlane

__all__ = [
    "control_plane",
    "control_plane_kcm",
    "pytest_addoption",
    "pytest_collection_modifyitems",
    "pytest_configure",
    "pytest_runtest_setup",
]

_FIXTURES = {
    "control_plane": ("controlplane",),
    "control_plane_kcm": ("controlplane", "controllermanager"),
}
_STARTED: list[ControlPlane] = []


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add ``--controlplane-bin-dir``."""
    parser.addoption(
        "--controlplane-bin-dir",
        default=None,
        help="directory with etcd/kube-apiserver/... v1.37.2 binaries "
        "(default: $WORKLOADBUILDER_BIN_DIR or ~/.cache/workloadbuilder/k8s/v1.37.2/bin)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Register the markers (also declared in pyproject.toml)."""
    config.addinivalue_line(
        "markers", "controlplane: needs the real v1.37.2 control plane (hack/build-controlplane.sh)"
    )
    config.addinivalue_line(
        "markers", "controllermanager: needs kube-controller-manager from the control plane harness"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that uses a control-plane fixture, so ``-m`` selection works."""
    for item in items:
        names = getattr(item, "fixturenames", ())
        for fixture, markers in _FIXTURES.items():
            if fixture in names:
                for marker in markers:
                    if item.get_closest_marker(marker) is None:
                        item.add_marker(marker)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Fail fast with the component's log when a started control plane died."""
    if item.get_closest_marker("controlplane") is None:
        return
    for plane in _STARTED:
        if plane.running:
            try:
                plane.check()
            except ControlPlaneError as e:
                pytest.fail(str(e), pytrace=False)


def _sigterm_to_interrupt() -> None:
    """Turn SIGTERM into KeyboardInterrupt so pytest tears the session (and the plane) down."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, handler)


def _start(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    name: str,
    *,
    with_controller_manager: bool,
) -> Iterator[ControlPlane]:
    bin_dir = request.config.getoption("--controlplane-bin-dir")
    run_dir: Path = tmp_path_factory.mktemp(name)
    try:
        plane = ControlPlane(
            run_dir, with_controller_manager=with_controller_manager, bin_dir=bin_dir
        )
    except BinariesNotFoundError as e:
        pytest.fail(str(e), pytrace=False)
    _sigterm_to_interrupt()
    try:
        plane.start()
    except ControlPlaneError as e:
        pytest.fail(f"the control plane did not start: {e}", pytrace=False)
    _STARTED.append(plane)
    try:
        yield plane
    finally:
        plane.stop()
        _STARTED.remove(plane)


@pytest.fixture(scope="session")
def control_plane(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlane]:
    """etcd + kube-apiserver v1.37.2 with all WAS gates on (admin: ``.kubeconfig``)."""
    yield from _start(request, tmp_path_factory, "controlplane", with_controller_manager=False)


@pytest.fixture(scope="session")
def control_plane_kcm(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlane]:
    """Like ``control_plane`` plus kube-controller-manager with the default controllers."""
    yield from _start(request, tmp_path_factory, "controlplane-kcm", with_controller_manager=True)
