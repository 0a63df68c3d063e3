"""The start-up credential check shared by the scheduler and ``integrations run``
(``workloadbuilder.runtime.check_access``), and ``integrations run`` honouring a stop while
its informers still list. Against MemoryCluster behind a proxy that answers what a real
server would (the real-server cases are in tests/controlplane/test_least_privilege_logs.py)."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

import pytest

from workloadbuilder.cluster import ClusterProxy, MemoryCluster, resource_info
from workloadbuilder.errors import ApiError, Forbidden, NotFound, Unauthorized
from workloadbuilder.integrations.cli import run_integrations
from workloadbuilder.runtime import AccessError, check_access, credential_source


class _Answers(ClusterProxy):
    """Lists of the kinds in ``errors`` raise the given error; the others are forwarded."""

    def __init__(self, errors: dict[str, Exception]) -> None:
        super().__init__(MemoryCluster())
        self.errors = errors
        self.listed: list[str] = []

    async def list(self, kind: Any, *args: Any, **kwargs: Any) -> Any:
        plural = resource_info(kind).plural
        self.listed.append(plural)
        if plural in self.errors:
            raise self.errors[plural]
        return await super().list(kind, *args, **kwargs)


async def _check(cluster: _Answers) -> None:
    await check_access(
        cluster,
        ["Node", "Pod", "Pod"],
        source="kubeconfig /x/bad.kubeconfig, current context",
        component="the scheduler",
        rbac="examples/deploy/scheduler/clusterrole.yaml",
    )


async def test_a_rejected_credential_names_its_source() -> None:
    cluster = _Answers({"nodes": Unauthorized("Unauthorized")})
    with pytest.raises(AccessError) as info:
        await _check(cluster)
    assert info.value.status == 401
    msg = str(info.value)
    assert "kubeconfig /x/bad.kubeconfig" in msg and "401 Unauthorized" in msg
    assert "the scheduler cannot work" in msg


async def test_a_forbidden_kind_names_the_kind_and_the_role() -> None:
    cluster = _Answers({"pods": Forbidden('pods is forbidden: User "u" cannot list')})
    with pytest.raises(AccessError) as info:
        await _check(cluster)
    assert info.value.status == 403
    msg = str(info.value)
    assert "not allowed to list pods" in msg and "clusterrole.yaml" in msg
    assert 'User "u" cannot list' in msg


async def test_allowed_unserved_and_unreachable_pass_and_each_kind_is_listed_once() -> None:
    ok = _Answers({})
    await _check(ok)
    assert ok.listed == ["nodes", "pods"]
    await _check(_Answers({"nodes": NotFound("not served")}))
    await _check(_Answers({"nodes": ApiError("cannot reach the API server", status=0)}))


async def test_the_lists_go_out_together_and_are_judged_in_order() -> None:
    class _Together(_Answers):
        """Each list waits until every kind's list has arrived (so they must be in flight
        at once) before it answers."""

        def __init__(self, errors: dict[str, Exception], kinds: int) -> None:
            super().__init__(errors)
            self.kinds = kinds
            self.waiting = 0
            self.arrived = asyncio.Event()

        async def list(self, kind: Any, *args: Any, **kwargs: Any) -> Any:
            self.waiting += 1
            if self.waiting == self.kinds:
                self.arrived.set()
            await asyncio.wait_for(self.arrived.wait(), 5)
            return await super().list(kind, *args, **kwargs)

    async def check(cluster: _Answers) -> None:
        await check_access(
            cluster,
            ["Node", "Pod", "PodGroup"],
            source="kubeconfig /k, current context",
            component="the scheduler",
            rbac="clusterrole.yaml",
        )

    together = _Together({}, kinds=3)
    await check(together)
    assert together.listed == ["nodes", "pods", "podgroups"]
    # the first answer in the order of the kinds decides, as when checked one by one:
    # an unreachable first kind leaves the later 401 to the component...
    await check(_Answers({"nodes": ApiError("cannot reach", status=0), "pods": Unauthorized("no")}))
    # ...an unserved one does not, and a 403 before a 401 is the 403
    with pytest.raises(AccessError) as info:
        await check(_Answers({"nodes": NotFound("not served"), "pods": Unauthorized("no")}))
    assert info.value.status == 401
    with pytest.raises(AccessError) as info:
        await check(_Answers({"pods": Forbidden("forbidden"), "podgroups": Unauthorized("no")}))
    assert info.value.status == 403 and "list pods" in str(info.value)
    # any other failure surfaces as itself (not wrapped in an ExceptionGroup), as it did when
    # the kinds were checked one by one; a 401 after it is not reached
    with pytest.raises(RuntimeError, match="KubeCluster is closed"):
        await check(
            _Answers({"nodes": RuntimeError("KubeCluster is closed"), "pods": Unauthorized("no")})
        )


def test_credential_source_names_the_file_or_the_service_account(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ns = argparse.Namespace
    assert credential_source(ns(kubeconfig="/k", context="c")) == "kubeconfig /k, context c"
    monkeypatch.setenv("KUBECONFIG", "/a:/b")
    assert credential_source(ns(kubeconfig=None, context=None)) == (
        "kubeconfig /a:/b (from $KUBECONFIG), current context"
    )
    monkeypatch.delenv("KUBECONFIG")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    assert "service account token" in credential_source(ns(kubeconfig=None, context=None))


async def test_integrations_stop_while_their_informers_still_list() -> None:
    # every list fails (a server that answers 500): the informers retry, start never ends
    cluster = _Answers({"workloads": ApiError("injected", status=500)})
    stop = asyncio.Event()
    task = asyncio.create_task(run_integrations(cluster, ["lws"], stop=stop))
    await asyncio.sleep(0.3)
    assert not task.done()
    stop.set()
    assert await asyncio.wait_for(task, 10) == 0
