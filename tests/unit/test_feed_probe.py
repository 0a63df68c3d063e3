"""Probing optional feeds together (``workloadbuilder.runtime.probe_feeds``): the probes are
in flight at once, and each feed then starts, skips or fails exactly as it would have had it
probed its kind by itself."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from workloadbuilder.cluster import ClusterProxy, MemoryCluster, resource_info
from workloadbuilder.errors import ApiError, Forbidden, NotFound
from workloadbuilder.runtime import Feed, probe_feeds


class _Probed(ClusterProxy):
    """One-object lists (the probes) wait until ``together`` of them are in flight; lists of
    the kinds in ``errors`` raise the given error."""

    def __init__(self, errors: dict[str, Exception], together: int) -> None:
        super().__init__(MemoryCluster())
        self.errors = errors
        self.together = together
        self.in_flight = 0
        self.all_in = asyncio.Event()
        self.probes: list[str] = []

    async def list(self, kind: Any, *args: Any, **kwargs: Any) -> Any:
        plural = resource_info(kind).plural
        if kwargs.get("limit") == 1:
            self.probes.append(plural)
            self.in_flight += 1
            if self.in_flight >= self.together:
                self.all_in.set()
            await asyncio.wait_for(self.all_in.wait(), 5)
        if plural in self.errors:
            raise self.errors[plural]
        return await super().list(kind, *args, **kwargs)


def _feeds(cluster: _Probed, seen: dict[str, list[Any]]) -> list[Feed]:
    def handler(kind: str) -> Any:
        return lambda event, obj: seen.setdefault(kind, []).append(event)

    return [
        Feed(cluster, "PriorityClass", handler("PriorityClass"), optional=True),
        Feed(cluster, "Node", handler("Node")),
        Feed(cluster, "PodGroup", handler("PodGroup"), optional=True),
        Feed(cluster, "PodDisruptionBudget", handler("PodDisruptionBudget"), optional=True),
    ]


async def test_optional_kinds_are_probed_together_then_started_as_alone() -> None:
    cluster = _Probed(
        {"podgroups": NotFound("not served"), "poddisruptionbudgets": Forbidden("no")},
        together=3,
    )
    seen: dict[str, list[Any]] = {}
    feeds = _feeds(cluster, seen)
    await probe_feeds(feeds)
    assert sorted(cluster.probes) == ["poddisruptionbudgets", "podgroups", "priorityclasses"]
    try:
        for f in feeds:
            await f.start()
        assert [f.available for f in feeds] == [True, True, False, False]
        assert seen == {"PriorityClass": ["SYNC"], "Node": ["SYNC"]}
        assert len(cluster.probes) == 3  # start did not probe again
    finally:
        for f in feeds:
            await f.stop()


async def test_a_failed_probe_is_raised_by_start_and_probed_again_next_time() -> None:
    cluster = _Probed({"podgroups": ApiError("injected", status=500)}, together=3)
    seen: dict[str, list[Any]] = {}
    feeds = _feeds(cluster, seen)
    await probe_feeds(feeds)  # the probes themselves do not raise
    try:
        await feeds[0].start()
        await feeds[1].start()
        with pytest.raises(ApiError, match="injected"):
            await feeds[2].start()  # where starting it alone would have failed
        del cluster.errors["podgroups"]
        await feeds[2].start()  # probes again
        assert feeds[2].available and seen["PodGroup"] == ["SYNC"]
        assert cluster.probes.count("podgroups") == 2
    finally:
        for f in feeds:
            await f.stop()
