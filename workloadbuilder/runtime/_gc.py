"""A garbage-collector policy for long-running components with a large long-lived heap.

CPython's cyclic collector is generational, but its oldest generation holds everything
that ever survived two young collections: in a scheduler that is the cache (every node and
pod, the informers' copies of them, the queue), which stays alive for the life of the
process. Every full collection walks all of it again, and CPython starts one each time
objects promoted since the last one reach a quarter of the oldest generation -- during a
burst of thousands of pods, several times, each a pause proportional to the whole cache.

:class:`GcPolicy` keeps the collector on (cycles are still found) but stops re-walking
what has proved long-lived:

* :meth:`GcPolicy.install` (the scheduler calls it once its informers have synced) calls
  ``gc.freeze()``: what is tracked after start-up -- modules, the configuration, the
  initial lists -- moves to the permanent generation, which collections do not walk. It
  runs no full collection first: in the scheduler that walk found nothing unreachable
  and cost ~70 ms of its start (1,000 nodes, 5,000 pods); a cycle that is already garbage
  then is frozen with the rest and freed by the next complete collection (below).
* After every full collection (an automatic one or ``gc.collect()``), the survivors are
  frozen too: they have just proved long-lived. So the next full collection only walks
  what was promoted since, and the cost of full collections follows the allocation rate,
  not the size of the heap.
* Frozen objects are never examined for cycles; objects freed by reference counting (the
  JSON dicts and cache entries the scheduler drops) are freed as before, frozen or not.
  To bound what a cycle among frozen objects could hold, every ``complete_every`` seconds
  the permanent generation is unfrozen after a full collection, so the next full
  collection walks the whole heap again (as CPython would), and its survivors are frozen.

* :meth:`GcPolicy.hold` (the scheduler calls it before its informers list) pauses the two
  older generations until :meth:`GcPolicy.install`: start-up allocates what will live (the
  initial lists), and CPython would walk it again in each middle and full collection it
  starts while the heap grows (in the scheduler, 1,000 nodes and 5,000 pods: three full
  collections and 40 middle ones, ~100 ms of CPU, none of which found anything to free).
  Young collections go on, so short-lived cycles (a failed request's exception and
  traceback) are still freed; a hold not followed by ``install`` ends after
  ``hold_limit`` seconds (checked at each young collection), so a start that never
  completes does not keep the older generations unexamined for long.
* The youngest generation is collected after ``young_threshold`` (10,000) net allocations
  instead of CPython's 700, when the threshold is still CPython's default: fewer young
  collections, and fewer short-lived objects (an event in flight, a coroutine's state)
  promoted towards the old generation only because a collection caught them alive.

The policy is process-wide (the collector is): installing it twice is a no-op;
:meth:`GcPolicy.uninstall` restores the collector (unfreezes, removes the callback, puts
the thresholds back).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

__all__ = ["GcPolicy", "gc_policy"]

#: CPython's threshold of the youngest generation
_CPYTHON_YOUNG = 700

#: the middle generation's threshold during a hold: never reached (its count grows by one
#: per young collection)
_NEVER = 1_000_000_000


class GcPolicy:
    """Freeze what survives full collections; unfreeze every ``complete_every`` seconds
    (``clock``: monotonic seconds) so that a complete collection still runs that often;
    collect the youngest generation every ``young_threshold`` net allocations."""

    def __init__(
        self,
        *,
        complete_every: float = 300.0,
        young_threshold: int = 10_000,
        hold_limit: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if complete_every <= 0:
            raise ValueError(f"complete_every must be positive, not {complete_every!r}")
        if young_threshold <= 0:
            raise ValueError(f"young_threshold must be positive, not {young_threshold!r}")
        if hold_limit <= 0:
            raise ValueError(f"hold_limit must be positive, not {hold_limit!r}")
        self.complete_every = complete_every
        self.young_threshold = young_threshold
        self.hold_limit = hold_limit
        #: during a hold: when it began, and the middle threshold it replaced
        self._held_since: float | None = None
        self._held_middle = 0
        self._thresholds: tuple[int, int, int] | None = None
        self._clock = clock
        self._installed = False
        self._last_complete = 0.0
        #: the permanent generation was unfrozen; the next full collection is complete
        self._complete_pending = False
        #: full collections seen since install, and how many of them were complete
        self.full_collections = 0
        self.complete_collections = 0

    @property
    def installed(self) -> bool:
        """Whether the policy is active in this process."""
        return self._installed

    @property
    def holding(self) -> bool:
        """Whether a :meth:`hold` is in effect."""
        return self._held_since is not None

    def hold(self) -> None:
        """Collect only the youngest generation until :meth:`install`, :meth:`uninstall`
        or ``hold_limit`` seconds from now (a no-op once installed, during a hold, or with
        the collector off)."""
        if self._installed or self._held_since is not None or not gc.isenabled():
            return
        young, middle, old = gc.get_threshold()
        self._held_since = self._clock()
        self._held_middle = middle
        gc.set_threshold(young, _NEVER, old)
        if self._after_young_collection not in gc.callbacks:
            gc.callbacks.append(self._after_young_collection)

    def _release(self, *, from_callback: bool = False) -> None:
        """End a hold: the middle threshold back (unless someone changed it since). The
        callback stays registered when called from it (CPython is walking the list)."""
        if not from_callback and self._after_young_collection in gc.callbacks:
            gc.callbacks.remove(self._after_young_collection)
        if self._held_since is None:
            return
        self._held_since = None
        young, middle, old = gc.get_threshold()
        if middle == _NEVER:
            gc.set_threshold(young, self._held_middle, old)

    def _after_young_collection(self, phase: str, info: dict[str, Any]) -> None:
        if phase != "stop" or self._held_since is None:
            return
        if self._clock() - self._held_since >= self.hold_limit:
            self._release(from_callback=True)

    def install(self) -> None:
        """Freeze what the collector tracks now (no collection first: see the module's
        docstring), and the survivors of every later full collection (idempotent). Ends a
        :meth:`hold`."""
        if self._installed:
            return
        self._release()
        self._installed = True
        if not gc.isenabled():  # someone turned the collector off: leave it to them
            return
        gc.freeze()
        self._last_complete = self._clock()
        gc.callbacks.append(self._after_collection)
        young, middle, old = gc.get_threshold()
        if young == _CPYTHON_YOUNG:  # not chosen by someone else
            self._thresholds = (young, middle, old)
            gc.set_threshold(self.young_threshold, middle, old)

    def uninstall(self) -> None:
        """Stop the policy: end a hold, remove the callback and unfreeze the permanent
        generation."""
        self._release()
        if not self._installed:
            return
        self._installed = False
        self._complete_pending = False
        if self._after_collection in gc.callbacks:
            gc.callbacks.remove(self._after_collection)
        if self._thresholds is not None:
            gc.set_threshold(*self._thresholds)
            self._thresholds = None
        gc.unfreeze()

    def _after_collection(self, phase: str, info: dict[str, Any]) -> None:
        if phase != "stop" or info.get("generation") != 2:
            return
        self.full_collections += 1
        now = self._clock()
        if self._complete_pending:  # this one walked the whole heap
            self._complete_pending = False
            self.complete_collections += 1
            self._last_complete = now
        elif now - self._last_complete >= self.complete_every:
            gc.unfreeze()  # the next full collection walks everything again
            self._complete_pending = True
            return
        gc.freeze()


#: the process's policy (the collector is process-wide)
gc_policy = GcPolicy()
