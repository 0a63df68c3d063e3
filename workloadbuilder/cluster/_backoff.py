"""``Backoff``: the pause an :class:`~workloadbuilder.cluster.Informer` takes before it lists
or watches again after a failure.

The same schedule as client-go's reflector (its backoff manager in
``k8s.io/client-go/tools/cache/reflector.go``): the first pause is 0.8 s, each further one
doubles, capped at 30 s; every pause is stretched by a random factor in [1, 2) (jitter 1.0),
so a pause lies in [0.8, 1.6) s at first and in [30, 60) s at the cap; once two failures
are more than 2 minutes apart (the informer was healthy in between) it starts again from
0.8 s.

The exponential schedule is tenacity's ``wait_exponential`` (the project's retry library, as
for :func:`~workloadbuilder.cluster.KubeCluster`'s requests) over the count of failures in a
row; the jitter is drawn here, from ``rng`` (seedable). tenacity is imported at the first
pause: an informer that never fails never loads it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tenacity import RetryCallState
    from tenacity.wait import wait_exponential

__all__ = ["Backoff"]


class Backoff:
    """Exponential backoff with jitter, capped, reset after a quiet period.

    ``initial`` is the first pause (seconds), ``factor`` the growth per failure, ``cap`` the
    largest pause before jitter, ``jitter`` the random stretch (a pause of ``d`` becomes
    ``d * (1 + jitter * r)`` with ``r`` uniform in [0, 1)), ``reset_after`` the time between
    two pauses after which the schedule starts again from ``initial``. ``clock`` reads the
    time (seconds, any origin: tests pass a manual clock's ``now``); ``rng`` draws the jitter.
    """

    def __init__(
        self,
        *,
        initial: float = 0.8,
        cap: float = 30.0,
        factor: float = 2.0,
        jitter: float = 1.0,
        reset_after: float = 120.0,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        if initial < 0 or cap < 0 or factor < 1 or jitter < 0 or reset_after < 0:
            raise ValueError(
                "Backoff: initial, cap, jitter and reset_after must be >= 0 and factor >= 1"
            )
        self.initial = initial
        self.cap = cap
        self.factor = factor
        self.jitter = jitter
        self.reset_after = reset_after
        self.clock = clock
        self._rng = rng if rng is not None else random.Random()
        self._failures = 0  # pauses taken since the schedule (re)started
        self._last: float | None = None
        #: tenacity's wait and the state it reads (the failure count), made at the first pause
        self._wait: tuple[wait_exponential, RetryCallState] | None = None

    @classmethod
    def constant(cls, seconds: float, *, clock: Callable[[], float] = time.monotonic) -> Backoff:
        """The same pause every time, no jitter (tests that want a fixed, short pause)."""
        return cls(initial=seconds, cap=seconds, factor=1.0, jitter=0.0, clock=clock)

    def next(self) -> float:
        """The pause to take now (seconds); advances the schedule."""
        now = self.clock()
        if self._last is None or now - self._last > self.reset_after:
            self._failures = 0
        self._last = now
        self._failures += 1
        if self._wait is None:
            import tenacity

            self._wait = (
                tenacity.wait_exponential(
                    multiplier=self.initial, max=self.cap, exp_base=self.factor, min=0
                ),
                tenacity.RetryCallState(tenacity.Retrying(), None, (), {}),
            )
        wait, state = self._wait
        state.attempt_number = self._failures
        base = float(wait(state))  # min(initial * factor ** (n - 1), cap): the n-th in a row
        return base * (1.0 + self.jitter * self._rng.random()) if self.jitter else base

    def reset(self) -> None:
        """Start again from ``initial`` at the next pause."""
        self._failures = 0
        self._last = None

    def __repr__(self) -> str:
        return (
            f"Backoff(initial={self.initial}, cap={self.cap}, factor={self.factor}, "
            f"jitter={self.jitter}, reset_after={self.reset_after})"
        )
