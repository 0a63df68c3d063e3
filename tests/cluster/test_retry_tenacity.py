"""Retries go through tenacity, and only retries: the first attempt of a request is a plain
call (a success or a final failure never sets ``AsyncRetrying`` up, nor imports tenacity),
a retryable failure hands the next attempts to ``tenacity.AsyncRetrying`` with the policy's
waits and bounds; the informers' backoff schedule is tenacity's ``wait_exponential``."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import tenacity

from workloadbuilder.cluster import Backoff, RetryPolicy
from workloadbuilder.cluster._retry import RetryableTransportError, retry_call
from workloadbuilder.errors import ApiError, NotFound, TooManyRequests


def _script(*outcomes: Exception | str) -> Callable[[], Awaitable[str]]:
    """A request whose attempts fail or succeed as ``outcomes`` say, in order."""
    left = list(outcomes)

    async def fn() -> str:
        outcome = left.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    return fn


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many ``tenacity.AsyncRetrying`` were made."""
    made: list[int] = []
    real = tenacity.AsyncRetrying

    class Counting(real):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            made.append(1)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(tenacity, "AsyncRetrying", Counting)
    return made


def _policy(sleeps: list[float], **options: Any) -> RetryPolicy:
    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    return RetryPolicy(sleep=sleep, jitter=0.0, **options)


async def test_the_happy_path_and_final_failures_never_reach_tenacity(counted: list[int]) -> None:
    sleeps: list[float] = []
    policy = _policy(sleeps)
    assert await retry_call(_script("ok"), policy=policy, idempotent=True) == "ok"
    with pytest.raises(NotFound):
        await retry_call(_script(NotFound("x", status=404)), policy=policy, idempotent=True)
    # a 5xx of a POST is final (it may have run); a Retry-After beyond the bound too
    with pytest.raises(ApiError):
        await retry_call(_script(ApiError("x", status=500)), policy=policy, idempotent=False)
    too_long = TooManyRequests("x", status=429, retry_after=99.0)
    with pytest.raises(TooManyRequests):
        await retry_call(_script(too_long), policy=policy, idempotent=True)
    assert counted == [] and sleeps == []


async def test_retryable_failures_go_through_tenacity_with_the_policy(counted: list[int]) -> None:
    sleeps: list[float] = []
    policy = _policy(sleeps, max_attempts=4, initial_backoff=0.2, max_backoff=5.0)
    fn = _script(
        ApiError("x", status=503),
        TooManyRequests("x", status=429, retry_after=3.0),
        RetryableTransportError(ConnectionResetError(), not_sent=False),
        "ok",
    )
    assert await retry_call(fn, policy=policy, idempotent=True) == "ok"
    assert counted == [1]
    assert sleeps == [0.2, 3.0, 0.8]  # backoff 1, the Retry-After, backoff 3
    # the bound on attempts counts the first one; the last failure is re-raised as it was
    sleeps.clear()
    last = ApiError("last", status=500)
    fn = _script(ApiError("x", status=500), ApiError("y", status=502), last)
    with pytest.raises(ApiError) as info:
        await retry_call(fn, policy=_policy(sleeps, max_attempts=3), idempotent=True)
    assert info.value is last and sleeps == [0.2, 0.4]
    # one attempt only: the first failure is final, no tenacity
    counted.clear()
    with pytest.raises(ApiError):
        await retry_call(
            _script(ApiError("x", status=500)),
            policy=_policy(sleeps, max_attempts=1),
            idempotent=True,
        )
    assert counted == []


def test_backoff_schedule_is_tenacity_wait_exponential() -> None:
    b = Backoff(jitter=0.0, clock=lambda: 0.0)
    wait = tenacity.wait_exponential(multiplier=0.8, max=30.0)
    expected = []
    for n in range(1, 10):
        state = tenacity.RetryCallState(tenacity.Retrying(), None, (), {})
        state.attempt_number = n
        expected.append(wait(state))
    assert [b.next() for _ in range(9)] == expected


def test_importing_and_using_kube_cluster_does_not_import_tenacity() -> None:
    code = (
        "import json, sys\n"
        "from workloadbuilder.cluster import Backoff, Informer, KubeCluster, RetryPolicy\n"
        "KubeCluster.from_kubeconfig\n"
        "print(json.dumps('tenacity' in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) is False
