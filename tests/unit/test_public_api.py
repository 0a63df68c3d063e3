"""The top-level package's public surface: every advertised name resolves, lazily."""

from __future__ import annotations

import subprocess
import sys

import workloadbuilder


def test_every_public_name_resolves() -> None:
    missing = [n for n in workloadbuilder.__all__ if not hasattr(workloadbuilder, n)]
    assert missing == []
    assert workloadbuilder.MemoryCluster.__module__.startswith("workloadbuilder.cluster")
    assert workloadbuilder.plan_for.__module__.startswith("workloadbuilder.kinds")


def test_unknown_attribute_is_an_attribute_error() -> None:
    try:
        _ = workloadbuilder.NoSuchThing  # type: ignore[attr-defined]
    except AttributeError as e:
        assert "NoSuchThing" in str(e)
    else:
        raise AssertionError("expected AttributeError")


def test_models_do_not_pull_in_the_http_client() -> None:
    code = (
        "import sys, workloadbuilder.api, workloadbuilder.validation, workloadbuilder.kinds; "
        "print('kubernetes_asyncio' in sys.modules, 'aiohttp' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
