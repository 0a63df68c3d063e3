"""RBAC checks shared by the deploy tests: the rules a ClusterRole grants, and a cluster proxy
that records the rule every call needs and every Forbidden answer."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Iterable, Mapping
from typing import Any, TypeVar

from workloadbuilder.cluster import ClusterProxy, KubeCluster, ResourceInfo, WatchEvent
from workloadbuilder.errors import Forbidden

__all__ = ["RecordingCluster", "Rule", "rules_granted"]

T = TypeVar("T")
Rule = tuple[str, str, str]  # (apiGroup, resource[/subresource], verb)


def rules_granted(rules: Iterable[Mapping[str, Any]]) -> set[Rule]:
    """Every (group, resource, verb) that RBAC policy rules grant."""
    return {
        (g, r, v)
        for rule in rules
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }


class RecordingCluster(ClusterProxy):
    """Forwards to a real cluster; records the RBAC rule each call needs and every
    ``Forbidden`` answer.

    One 403 is not about authorization: kube-apiserver's Priority admission plugin reads
    PriorityClasses from an informer, so an object naming a class created a moment ago may be
    refused with "no PriorityClass with name ... was found" until that informer catches up
    (callers retry it). Those refusals go to ``admission_refused``, every other one to
    ``forbidden``."""

    def __init__(self, inner: KubeCluster) -> None:
        super().__init__(inner)
        self.used: set[Rule] = set()
        self.forbidden: list[str] = []
        self.admission_refused: list[str] = []

    def _refused(self, e: Forbidden) -> None:
        message = str(e)
        if "no PriorityClass with name" in message:
            self.admission_refused.append(message)
        else:
            self.forbidden.append(message)

    def _note(self, verb: str, info: ResourceInfo, subresource: str | None) -> None:
        resource = info.plural + (f"/{subresource}" if subresource else "")
        self.used.add((info.group, resource, verb))
        if resource == "resourceclaims/status" and verb == "patch":
            # v1.37.2 also authorizes a claim's allocation / reservedFor change as "patch
            # resourceclaims/binding" (a check on the same request, not a call of its own)
            self.used.add((info.group, "resourceclaims/binding", verb))

    async def around(
        self, verb: str, info: ResourceInfo, subresource: str | None, call: Awaitable[T]
    ) -> T:
        self._note(verb, info, subresource)
        try:
            return await call
        except Forbidden as e:
            self._refused(e)
            raise

    async def around_watch(
        self, info: ResourceInfo, stream: AsyncIterator[WatchEvent]
    ) -> AsyncIterator[WatchEvent]:
        self._note("watch", info, None)
        try:
            async for event in stream:
                yield event
        except Forbidden as e:
            self._refused(e)
            raise
