"""The :class:`Component` protocol: what a long-running controller or scheduler offers so the
same code runs for real (``run``) and step by step under a simulator or a test."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["Component"]


@runtime_checkable
class Component(Protocol):
    """A long-running component driven by cluster events and its own clock.

    Real clusters: ``await start()``, then the component's own run loop, ``await stop()``.
    A simulator steps it instead: ``await sync()`` folds every change delivered so far into
    its state, ``await until_idle()`` works until nothing more can be done *now* (and waits
    for the API calls it started), ``next_wakeup()`` says when it wants to run again.
    """

    async def start(self) -> None:
        """List what the component watches and keep watching in the background."""
        ...

    async def stop(self) -> None:
        """Stop watching and wait for the work in flight."""
        ...

    async def sync(self) -> None:
        """Process every cluster change delivered so far."""
        ...

    async def until_idle(self) -> int:
        """Work until nothing can be done now; returns how much was done (e.g. pods bound)."""
        ...

    def next_wakeup(self) -> float | None:
        """Clock time at which the component wants to run again (a backoff or a periodic
        resync), the current time when work is ready now, or None when only an event can
        create work."""
        ...
