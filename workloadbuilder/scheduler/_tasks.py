"""Background API calls (bindings, status writes, events) the scheduler waits for on
``stop()`` and in ``until_idle()``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

__all__ = ["Tasks"]

_log = logging.getLogger(__name__)


class Tasks:
    """A set of fire-and-forget tasks with a :meth:`drain`."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def __bool__(self) -> bool:
        return bool(self._tasks)

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run ``coro`` in the background."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            _log.error("background task failed", exc_info=task.exception())

    async def drain(self) -> None:
        """Wait until every task (including those spawned meanwhile) finished."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
