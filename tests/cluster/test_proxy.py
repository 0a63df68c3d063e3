"""ClusterProxy forwards every call and reports it with its RBAC verb and subresource."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable
from typing import Any, TypeVar

from workloadbuilder.cluster import ClusterProxy, MemoryCluster, ResourceInfo, WatchEvent

T = TypeVar("T")


class Spy(ClusterProxy):
    def __init__(self, inner: MemoryCluster) -> None:
        super().__init__(inner)
        self.calls: list[tuple[str, str, str | None]] = []

    async def around(
        self, verb: str, info: ResourceInfo, subresource: str | None, call: Awaitable[T]
    ) -> T:
        self.calls.append((verb, info.plural, subresource))
        return await call

    def around_watch(
        self, info: ResourceInfo, stream: AsyncIterator[WatchEvent]
    ) -> AsyncIterator[WatchEvent]:
        self.calls.append(("watch", info.plural, None))
        return stream


def _pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }


async def test_every_call_is_forwarded_with_its_verb() -> None:
    inner = MemoryCluster()
    spy = Spy(inner)
    await spy.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "status": {}})
    created = await spy.create(_pod("p"))
    assert isinstance(created, dict)
    await spy.patch("Pod", "p", {"metadata": {"labels": {"a": "b"}}}, "default")
    await spy.patch("Pod", "p", {"status": {"phase": "Running"}}, "default", subresource="status")
    await spy.bind("default", "p", "n1")
    got = await spy.get("Pod", "p", "default")
    assert isinstance(got, dict) and got["spec"]["nodeName"] == "n1"
    listed = await spy.list("Pod", "default")
    stream = spy.watch("Pod", "default", resource_version=listed.resource_version)
    await spy.delete("Pod", "p", "default", grace_period_seconds=0)
    first = await anext(aiter(stream))
    assert first.type in ("MODIFIED", "DELETED")
    assert spy.calls == [
        ("create", "nodes", None),
        ("create", "pods", None),
        ("patch", "pods", None),
        ("patch", "pods", "status"),
        ("create", "pods", "binding"),
        ("get", "pods", None),
        ("list", "pods", None),
        ("watch", "pods", None),
        ("delete", "pods", None),
    ]
    await spy.close()
