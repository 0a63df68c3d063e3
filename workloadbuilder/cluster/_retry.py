"""Retry policy for API requests: which failures are retryable, and how long to wait.

Only failures that say nothing about the request itself are retried:

* ``429 TooManyRequests`` (the server did not run the request), waiting at least the
  ``Retry-After`` the server asked for (a request whose Retry-After exceeds
  :attr:`RetryPolicy.max_retry_after` fails at once with ``TooManyRequests``);
* ``5xx`` server errors other than ``501``/``505``;
* timeouts and connection resets;
* connection failures (the request never reached the server).

Non-idempotent requests (``POST``, JSON patch) are retried only when the request surely did
not run: connection failures and 429. Every other 4xx (404, 409, 410, 422, ...) is final.
Waits grow exponentially with random jitter, and both the number of attempts and the total
time are bounded.

The retries run on a ``tenacity.AsyncRetrying`` made from the :class:`RetryPolicy` (its retry
predicate, wait, stop, sleep and log line are the policy's). The first attempt runs outside it:
setting ``AsyncRetrying`` up for every request was the largest single overhead of a request
on the profile (docs/performance.md), so a request that succeeds, or fails for good, at once
pays nothing for it, and tenacity is imported at the first retryable failure.
"""

from __future__ import annotations

import asyncio
import logging
import random
import sys
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import attrs

from workloadbuilder.errors import ApiError, TooManyRequests

if TYPE_CHECKING:
    from tenacity import RetryCallState

__all__ = [
    "RetryPolicy",
    "RetryableTransportError",
    "is_retryable",
    "retry_call",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: 5xx codes that will not get better by asking again.
_FINAL_5XX = frozenset({501, 505})


@attrs.frozen(kw_only=True)
class RetryPolicy:
    """How :class:`~workloadbuilder.cluster.KubeCluster` retries retryable failures.

    ``max_attempts`` counts the first try (``1`` disables retries). Waits are
    ``min(max_backoff, initial_backoff * 2**(n-1))`` stretched by up to ``jitter`` (a
    fraction), or the server's ``Retry-After`` (plus jitter) when it sent one.
    ``max_elapsed`` bounds the total time spent retrying one request. ``sleep`` is the
    coroutine used to wait (tests may record the waits instead).
    """

    max_attempts: int = 6
    initial_backoff: float = 0.2
    max_backoff: float = 5.0
    jitter: float = 0.5
    max_retry_after: float = 60.0
    max_elapsed: float = 120.0
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    def backoff(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before attempt ``attempt + 1`` (``attempt`` >= 1 failed)."""
        if retry_after is not None and retry_after > 0:
            base = retry_after
        else:
            base = min(self.max_backoff, self.initial_backoff * 2 ** max(0, attempt - 1))
        return base * (1.0 + self.jitter * random.random())


class RetryableTransportError(Exception):
    """Internal marker: a transport failure, with whether the request surely did not run."""

    def __init__(self, cause: BaseException, *, not_sent: bool) -> None:
        super().__init__(str(cause) or type(cause).__name__)
        self.cause = cause
        self.not_sent = not_sent


def classify_transport_error(exc: BaseException) -> RetryableTransportError | None:
    """Map an aiohttp, asyncio or lean-transport failure to a :class:`RetryableTransportError`,
    or None when it is not a transport failure worth retrying (e.g. a TLS verification
    error, a malformed response)."""
    from workloadbuilder.cluster import _transport as lean

    # the lean transport's failures, classified as their aiohttp counterparts are below
    if isinstance(exc, lean.ConnectError):
        return RetryableTransportError(exc, not_sent=True)
    if isinstance(exc, lean.Disconnected):
        return RetryableTransportError(exc, not_sent=False)
    if isinstance(exc, lean.TransportError):  # TLSError, ProtocolError: final
        return None
    # an aiohttp failure needs aiohttp loaded: never import it just to look (the lean path,
    # the scheduler's default, does not load it)
    aiohttp = sys.modules.get("aiohttp")
    if aiohttp is None:
        if isinstance(exc, (asyncio.TimeoutError, ConnectionResetError)):
            return RetryableTransportError(exc, not_sent=False)
        return None
    if isinstance(exc, (aiohttp.ClientSSLError, aiohttp.InvalidURL)):
        return None
    if isinstance(exc, aiohttp.ClientConnectorError):
        # The TCP (or TLS) connection could not be established: nothing was sent.
        return RetryableTransportError(exc, not_sent=True)
    if isinstance(
        exc,
        (
            asyncio.TimeoutError,
            aiohttp.ServerDisconnectedError,
            aiohttp.ClientOSError,
            aiohttp.ClientPayloadError,
            aiohttp.ServerTimeoutError,
            ConnectionResetError,
        ),
    ):
        return RetryableTransportError(exc, not_sent=False)
    return None


def is_retryable(exc: BaseException, *, idempotent: bool) -> bool:
    """Whether ``exc`` (an ``ApiError`` or a :class:`RetryableTransportError`) may be retried
    for a request that is (or is not) idempotent."""
    if isinstance(exc, RetryableTransportError):
        return idempotent or exc.not_sent
    if isinstance(exc, TooManyRequests):
        # The server did not run the request. An eviction refused by a PodDisruptionBudget
        # is also a 429, but it is an answer, not a throttle.
        causes = exc.body.get("details", {}).get("causes", []) if exc.body else []
        return not any(
            isinstance(c, dict) and c.get("reason") == "DisruptionBudget" for c in causes
        )
    if isinstance(exc, ApiError):
        return idempotent and exc.status >= 500 and exc.status not in _FINAL_5XX
    return False


async def retry_call(
    fn: Callable[[], Awaitable[T]],
    *,
    policy: RetryPolicy,
    idempotent: bool,
    what: str = "request",
) -> T:
    """Run ``fn`` until it succeeds, fails for good, or the policy's bound is reached.

    The last failure is re-raised as it was (``ApiError`` or ``RetryableTransportError``).
    The first attempt is a plain call; only a retryable failure of it goes on to
    :func:`_retry` (tenacity).
    """
    start = time.monotonic()
    try:
        return await fn()
    except Exception as exc:
        if not _retryable(exc, policy, idempotent):
            raise
        failure = exc
    return await _retry(fn, failure, policy=policy, idempotent=idempotent, what=what, start=start)


def _retryable(exc: BaseException, policy: RetryPolicy, idempotent: bool) -> bool:
    """Whether ``exc`` is retried: retryable for the request, and no ``Retry-After`` beyond
    the policy's bound."""
    if not is_retryable(exc, idempotent=idempotent):
        return False
    ra = getattr(exc, "retry_after", None)
    return not (ra is not None and ra > policy.max_retry_after)


def _retry_after(exc: BaseException | None) -> float | None:
    ra = getattr(exc, "retry_after", None)
    return ra if isinstance(ra, (int, float)) else None


async def _retry(
    fn: Callable[[], Awaitable[T]],
    failure: Exception,
    *,
    policy: RetryPolicy,
    idempotent: bool,
    what: str,
    start: float,
) -> T:
    """Attempts 2, 3, ... of a request whose first attempt failed with ``failure`` (a
    retryable one), on ``tenacity.AsyncRetrying``. The order of the checks after a failure is
    tenacity's: retryable? then the wait (the policy's backoff, at least the Retry-After), then
    the bounds (attempts, time since the first try), then the debug line and the sleep."""
    import tenacity

    attempts = max(1, policy.max_attempts)
    # tenacity counts its own attempts; the first one ran before it, so attempt n of the
    # request is tenacity's n - 1 (and attempt 1's failure is decided here, as tenacity would)

    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        return policy.backoff(state.attempt_number + 1, _retry_after(exc))

    def stop(state: RetryCallState) -> bool:
        return bool(
            state.attempt_number + 1 >= attempts or time.monotonic() - start >= policy.max_elapsed
        )

    def log(attempt: int, exc: BaseException | None, delay: float) -> None:
        logger.debug("%s failed (attempt %d): %s; retrying in %.2fs", what, attempt, exc, delay)

    def before_sleep(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        log(state.attempt_number + 1, exc, state.upcoming_sleep)

    delay = policy.backoff(1, _retry_after(failure))
    if attempts <= 1 or time.monotonic() - start >= policy.max_elapsed:
        raise failure
    log(1, failure, delay)
    await policy.sleep(delay)
    retrying = tenacity.AsyncRetrying(
        sleep=policy.sleep,
        retry=tenacity.retry_if_exception(lambda e: _retryable(e, policy, idempotent)),
        wait=wait,
        stop=stop,
        before_sleep=before_sleep,
        reraise=True,
    )
    return await retrying(fn)
