"""Which event loop the components run on (``workloadbuilder.runtime.run`` and
``--event-loop``): uvloop when installed, asyncio when asked or when uvloop is missing."""

from __future__ import annotations

import asyncio
import importlib.util
import platform
import sys
from typing import Any

import pytest

from workloadbuilder import cli
from workloadbuilder.runtime import (
    EVENT_LOOP_ENV,
    event_loop_factory,
    resolve_event_loop,
    run,
)

_real_find_spec = importlib.util.find_spec


def _without_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    def find_spec(name: str, *args: Any, **kwargs: Any) -> Any:
        return None if name == "uvloop" else _real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


async def _loop_module() -> str:
    await asyncio.sleep(0)
    return type(asyncio.get_running_loop()).__module__.split(".")[0]


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(EVENT_LOOP_ENV, raising=False)


@pytest.mark.skipif(
    sys.platform == "win32" or platform.python_implementation() != "CPython",
    reason="uvloop is a dependency only on CPython outside Windows (pyproject.toml marker)",
)
def test_uvloop_is_installed_where_the_dependency_says() -> None:
    assert importlib.util.find_spec("uvloop") is not None
    assert resolve_event_loop() == resolve_event_loop("auto") == "uvloop"


def test_choices_resolve(monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_event_loop("asyncio") == "asyncio"
    assert run(_loop_module(), event_loop="asyncio") == "asyncio"
    assert event_loop_factory("asyncio") is asyncio.new_event_loop
    if importlib.util.find_spec("uvloop") is not None:
        assert resolve_event_loop("uvloop") == "uvloop"
        assert run(_loop_module(), event_loop="uvloop") == "uvloop"
        assert run(_loop_module()) == "uvloop"  # the default is auto
        monkeypatch.setenv(EVENT_LOOP_ENV, "asyncio")
        assert run(_loop_module()) == "asyncio"  # the environment sets the default
        assert run(_loop_module(), event_loop="uvloop") == "uvloop"  # an explicit choice wins
    monkeypatch.setenv(EVENT_LOOP_ENV, "tokio")
    with pytest.raises(ValueError, match="WORKLOADBUILDER_EVENT_LOOP must be one of"):
        resolve_event_loop()
    with pytest.raises(ValueError, match="event loop must be one of"):
        resolve_event_loop("tokio")  # type: ignore[arg-type]


def test_without_uvloop_auto_is_asyncio_and_uvloop_is_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _without_uvloop(monkeypatch)
    assert resolve_event_loop("auto") == "asyncio"
    assert run(_loop_module()) == "asyncio"
    coro = _loop_module()
    with pytest.raises(ValueError, match="uvloop is not installed"):
        run(coro, event_loop="uvloop")
    assert coro.cr_frame is None  # closed, never left un-awaited


def test_cli_refuses_a_missing_uvloop_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _without_uvloop(monkeypatch)
    code = cli.main(["scheduler", "--event-loop", "uvloop", "--kubeconfig", "/nonexistent"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip() == "error: event loop 'uvloop' requested but uvloop is not installed"
    with pytest.raises(SystemExit) as bad:
        cli.main(["integrations", "run", "--event-loop", "nope"])
    assert bad.value.code == 2
    assert "invalid choice: 'nope'" in capsys.readouterr().err


def test_commands_run_on_the_chosen_loop(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI runs a command's coroutine on the loop ``--event-loop`` names."""
    seen: list[str] = []

    async def fake_command(args: Any) -> int:
        seen.append(await _loop_module())
        return 0

    import workloadbuilder.scheduler.cli as scheduler_cli

    monkeypatch.setattr(scheduler_cli, "_scheduler_command", fake_command)
    choices = ["asyncio"]
    if importlib.util.find_spec("uvloop") is not None:
        choices += ["uvloop", "auto"]
    for choice in choices:
        assert cli.main(["scheduler", "--event-loop", choice]) == 0
    assert seen == [resolve_event_loop(c) for c in choices]  # type: ignore[arg-type]
