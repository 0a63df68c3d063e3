"""Which event loop a long-running component runs on: uvloop when it is installed, plain
asyncio otherwise (or when asked).

uvloop (libuv and Cython, with its own TLS layer) runs the same asyncio code with much less
interpreter work per callback, per socket read and per TLS record: on the real-plane
benchmark it cuts the CPU of every API request (docs/performance.md). Everything the
components use works on it unchanged: ``ssl`` with client certificates and
``server_hostname``, aiohttp clients and servers, signal handlers, subprocesses (exec
credential plugins), threads (``asyncio.to_thread``), timers and protocol callbacks.

``workloadbuilder scheduler`` and ``workloadbuilder integrations run`` take
``--event-loop {auto,uvloop,asyncio}`` (:func:`add_event_loop_flag`); the default comes from
``$WORKLOADBUILDER_EVENT_LOOP`` and is ``auto`` otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import logging
import os
from collections.abc import Callable, Coroutine
from typing import Any, Literal, TypeVar, cast

__all__ = [
    "EVENT_LOOP_ENV",
    "EventLoopChoice",
    "add_event_loop_flag",
    "event_loop_factory",
    "resolve_event_loop",
    "run",
]

T = TypeVar("T")

#: ``auto`` (uvloop when installed, else asyncio), ``uvloop`` (an error without it), ``asyncio``
EventLoopChoice = Literal["auto", "uvloop", "asyncio"]

#: the environment variable that sets the default choice (``auto`` when unset)
EVENT_LOOP_ENV = "WORKLOADBUILDER_EVENT_LOOP"

_CHOICES: tuple[EventLoopChoice, ...] = ("auto", "uvloop", "asyncio")

_log = logging.getLogger(__name__)


def _default_choice() -> EventLoopChoice:
    value = os.environ.get(EVENT_LOOP_ENV, "").strip() or "auto"
    if value not in _CHOICES:
        raise ValueError(f"${EVENT_LOOP_ENV} must be one of {', '.join(_CHOICES)}, not {value!r}")
    return value


def resolve_event_loop(choice: EventLoopChoice | None = None) -> Literal["uvloop", "asyncio"]:
    """The loop a choice means here: ``auto`` is ``uvloop`` when it is installed (and
    ``asyncio`` otherwise); None is the default (``$WORKLOADBUILDER_EVENT_LOOP``, else
    ``auto``). ``uvloop`` without uvloop installed raises ``ValueError``."""
    if choice is None:
        choice = _default_choice()
    if choice not in _CHOICES:
        raise ValueError(f"event loop must be one of {', '.join(_CHOICES)}, not {choice!r}")
    if choice == "asyncio":
        return "asyncio"
    available = importlib.util.find_spec("uvloop") is not None
    if choice == "uvloop" and not available:
        raise ValueError("event loop 'uvloop' requested but uvloop is not installed")
    return "uvloop" if available else "asyncio"


def event_loop_factory(
    choice: EventLoopChoice | None = None,
) -> Callable[[], asyncio.AbstractEventLoop]:
    """A function that makes a new event loop of the chosen kind (see
    :func:`resolve_event_loop`), for ``asyncio.Runner(loop_factory=...)``."""
    if resolve_event_loop(choice) == "uvloop":
        import uvloop

        return cast(Callable[[], asyncio.AbstractEventLoop], uvloop.new_event_loop)
    return asyncio.new_event_loop


def run(
    main: Coroutine[Any, Any, T],
    *,
    event_loop: EventLoopChoice | None = None,
    debug: bool | None = None,
) -> T:
    """``asyncio.run(main)`` on the chosen loop (see :func:`resolve_event_loop`); the loop
    it runs on is logged at DEBUG."""
    try:
        kind = resolve_event_loop(event_loop)
        factory = event_loop_factory(kind)
    except BaseException:
        main.close()  # never awaited: no "coroutine was never awaited" warning
        raise
    _log.debug("event loop: %s", kind)
    with asyncio.Runner(debug=debug, loop_factory=factory) as runner:
        return runner.run(main)


def add_event_loop_flag(parser: argparse.ArgumentParser) -> None:
    """``--event-loop {auto,uvloop,asyncio}`` (``args.event_loop``; None means the default:
    ``$WORKLOADBUILDER_EVENT_LOOP``, else ``auto``)."""
    parser.add_argument(
        "--event-loop",
        choices=_CHOICES,
        default=None,
        help="the event loop: uvloop (faster; the default when installed) or asyncio "
        f"(default: ${EVENT_LOOP_ENV}, else auto)",
    )
