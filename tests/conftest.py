"""Top-level pytest configuration: the real control-plane fixtures come from the SDK's plugin."""

from collections.abc import Iterator

import pytest

from workloadbuilder.runtime import gc_policy

pytest_plugins = ["workloadbuilder.testing._pytest"]


@pytest.fixture(autouse=True)
def _restore_the_collector() -> Iterator[None]:
    """A Scheduler started in a test installs the process-wide garbage-collector policy
    (docs/scheduler.md, "The garbage collector"); undo it after the test, so that no test
    runs under the collector settings another one left behind."""
    yield
    if gc_policy.installed:
        gc_policy.uninstall()
