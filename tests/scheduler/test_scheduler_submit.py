"""The submit step alone (``workloadbuilder.scheduler._submit``): every result kind ends its
attempt with exactly one ``queue.done`` and the reason the scheduler always gave it, after
the binds, nominations, preemptions and status writes, in that order.

The collaborators are recorders (the step only calls them), the pods, groups and trees
small stand-ins with the attributes the step reads."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from types import SimpleNamespace
from typing import Any

import pytest

from workloadbuilder.scheduler._composite import TreeResult
from workloadbuilder.scheduler._cycle import CycleResult
from workloadbuilder.scheduler._interface import Code, Status
from workloadbuilder.scheduler._queue import QueuedEntity
from workloadbuilder.scheduler._result import (
    GroupBind,
    GroupError,
    GroupUnschedulable,
    NothingToDo,
    PodBind,
    PodUnschedulable,
    Preempt,
    Requeue,
    ScheduleResult,
    TreeBind,
    TreeError,
    TreeInvalid,
    TreeUnschedulable,
)
from workloadbuilder.scheduler._submit import Submit
from workloadbuilder.scheduler._tree import RootRef

Call = tuple[str, tuple[Any, ...], dict[str, Any]]


class _Recorder:
    """Records every method called on it as ``("<name>.<method>", args, kwargs)``."""

    def __init__(self, name: str, log: list[Call]) -> None:
        self._name = name
        self._log = log

    def __getattr__(self, attr: str) -> Callable[..., None]:
        def call(*args: Any, **kwargs: Any) -> None:
            self._log.append((f"{self._name}.{attr}", args, kwargs))

        return call


class _Cache:
    def __init__(self, members: list[Any]) -> None:
        self.nominations: dict[tuple[str, str], str] = {}
        self.groups: dict[tuple[str, str], Any] = {}
        self.composite_groups: dict[tuple[str, str], Any] = {}
        self._members = members

    def members(self, g: Any) -> Iterator[Any]:
        return iter(self._members)


def _pod(name: str, group: str | None = "g") -> Any:
    return SimpleNamespace(
        namespace="ns",
        name=name,
        key=("ns", name),
        req=name,
        scheduled=False,
        group_key=("ns", group) if group else None,
    )


def _group(name: str = "g") -> Any:
    return SimpleNamespace(namespace="ns", name=name, key=("ns", name))


class _Node:
    def __init__(self, kind: str, name: str, children: Sequence[_Node] = ()) -> None:
        self.kind = kind
        self.name = name
        self.key = ("ns", name)
        self.children = list(children)
        self.is_gang = True
        self.cpg = SimpleNamespace(name=name) if kind == "CompositePodGroup" else None
        self.group = _group(name) if kind == "PodGroup" else None

    def composites(self) -> Iterator[_Node]:
        if self.kind == "CompositePodGroup":
            yield self
        for c in self.children:
            yield from c.composites()

    def leaves(self) -> Iterator[_Node]:
        if self.kind == "PodGroup":
            yield self
        for c in self.children:
            yield from c.leaves()


def _entity(kind: str) -> QueuedEntity:
    return QueuedEntity(key=(kind, "ns", "x"), priority=0, first_seen=0.0, seq=0)


def _submit(kind: str, r: ScheduleResult, members: list[Any] | None = None) -> list[Call]:
    log: list[Call] = []
    s = Submit()
    s.cache = _Cache(members or [])
    s.queue = _Recorder("queue", log)
    s.framework = _Recorder("framework", log)
    s.enqueuer = _Recorder("enqueuer", log)
    s.binder = _Recorder("binder", log)
    s.status = _Recorder("status", log)
    s.explanations = {}
    s.submit(_entity(kind), r)
    return log


def _names(log: list[Call]) -> list[str]:
    return [name for name, _, _ in log]


def _done(log: list[Call]) -> str:
    dones = [args[1] for name, args, _ in log if name == "queue.done"]
    assert len(dones) == 1, dones
    return str(dones[0])


OK = Status(code=Code.SUCCESS)
NO = Status(code=Code.UNSCHEDULABLE, message="no")


def _victims() -> list[Any]:
    return [
        SimpleNamespace(kind="Pod", namespace="ns", name="v", pods=(_pod("v", None),)),
    ]


def _preempt(single: bool) -> Preempt:
    return Preempt("pod ns/a", ((_pod("a"), "n1"),), _victims(), lambda: None, single_pod=single)


def _tree() -> _Node:
    return _Node("CompositePodGroup", "root", [_Node("PodGroup", "l1"), _Node("PodGroup", "l2")])


def _cases() -> list[tuple[str, str, ScheduleResult, str, list[str]]]:
    a, b = _pod("a"), _pod("b")
    g = _group()
    tree = _tree()
    ref = RootRef(namespace="ns", kind="CompositePodGroup", name="root")
    left = CycleResult(status=OK, assignments=((a, "n1"),), unplaced=(b,))
    tree_ok = TreeResult(
        ok=True,
        assignments=[(a, "n1")],
        succeeded={("PodGroup", "l1"), ("CompositePodGroup", "root")},
    )
    return [
        ("nothing", "Pod", NothingToDo(), "success", ["queue.remove", "queue.done"]),
        (
            "nothing-group",
            "PodGroup",
            NothingToDo("group"),
            "success",
            ["queue.remove", "queue.done", "enqueuer.refresh_group"],
        ),
        (
            "nothing-namespace",
            "CompositePodGroup",
            NothingToDo("namespace"),
            "success",
            ["queue.remove", "queue.done", "enqueuer.refresh_namespace_trees"],
        ),
        (
            "requeue-group",
            "PodGroup",
            Requeue(),
            "unschedulable",
            ["queue.done", "enqueuer.refresh_group"],
        ),
        (
            "requeue-tree",
            "CompositePodGroup",
            Requeue(ref),
            "unschedulable",
            ["queue.done", "enqueuer.refresh_tree"],
        ),
        (
            "pod-bind",
            "Pod",
            PodBind(CycleResult(status=OK, assignments=((a, "n1"),))),
            "success",
            ["framework.run_commit", "binder.assume_and_bind", "queue.remove", "queue.done"],
        ),
        (
            "pod-unschedulable",
            "Pod",
            PodUnschedulable(a, "no"),
            "unschedulable",
            ["status.pod_failed", "queue.done"],
        ),
        (
            "pod-preempts",
            "Pod",
            PodUnschedulable(a, "no", _preempt(True), error=True),
            "error",
            ["status.nominate", "status.preempt", "status.pod_failed", "queue.done"],
        ),
        (
            "group-bind",
            "PodGroup",
            GroupBind(g, CycleResult(status=OK, assignments=((a, "n1"),)), True, True),
            "success",
            [
                "framework.run_commit",
                "binder.assume_and_bind",
                "queue.done",
                "enqueuer.refresh_group",
            ],
        ),
        (
            "group-bind-left-behind",
            "PodGroup",
            GroupBind(g, left, canary=False, retry=True),
            "success",
            [
                "framework.run_commit",
                "binder.assume_and_bind",
                "queue.done",
                "enqueuer.refresh_group",
            ],
        ),
        (
            "group-unschedulable",
            "PodGroup",
            GroupUnschedulable(g, "no", (a, b)),
            "unschedulable",
            ["status.group_condition", "status.pod_failed", "status.pod_failed", "queue.done"],
        ),
        (
            "group-quorum-bound",
            "PodGroup",
            GroupUnschedulable(g, "no", (a,), condition=False, error=True),
            "error",
            ["status.pod_failed", "queue.done"],
        ),
        (
            "group-error",
            "PodGroup",
            GroupError(g, "bad", (a,)),
            "error",
            ["status.group_condition", "status.pod_failed", "queue.done"],
        ),
        (
            "tree-bind",
            "CompositePodGroup",
            TreeBind(tree, ref, tree_ok, (a,), {("ns", "l1"): [a]}, retry=True),
            "success",
            [
                "binder.assume_and_bind",
                "status.composite_condition",
                "status.group_condition",
                "status.group_condition",
                "queue.done",
                "enqueuer.refresh_tree",
            ],
        ),
        (
            "tree-unschedulable",
            "CompositePodGroup",
            TreeUnschedulable(tree, "no", (a,), {}),
            "unschedulable",
            [
                "status.composite_condition",
                "status.group_condition",
                "status.group_condition",
                "status.pod_failed",
                "queue.done",
            ],
        ),
        (
            "tree-preempts",
            "CompositePodGroup",
            TreeUnschedulable(tree, "no", (a,), {}, _preempt(False), error=True),
            "error",
            [
                "status.nominate",
                "status.preempt",
                "status.composite_condition",
                "status.group_condition",
                "status.group_condition",
                "status.pod_failed",
                "queue.done",
            ],
        ),
        (
            "tree-error",
            "CompositePodGroup",
            TreeError(tree, "bad", (a,)),
            "error",
            [
                "status.composite_condition",
                "status.group_condition",
                "status.group_condition",
                "status.pod_failed",
                "queue.done",
            ],
        ),
        (
            "tree-invalid",
            "CompositePodGroup",
            TreeInvalid("ns", "root", "cycle"),
            "error",
            ["queue.done"],
        ),
    ]


@pytest.mark.parametrize(
    ("kind", "result", "reason", "calls"),
    [pytest.param(k, r, reason, calls, id=name) for name, k, r, reason, calls in _cases()],
)
def test_each_result_is_done_once_with_its_reason(
    kind: str, result: ScheduleResult, reason: str, calls: list[str]
) -> None:
    log = _submit(kind, result)
    assert _done(log) == reason
    assert _names(log) == calls


def test_left_behind_pods_are_told_and_retried_when_preemption_is_on() -> None:
    a, b = _pod("a"), _pod("b")
    diag = SimpleNamespace(pod_message=lambda: "0/1 nodes are available")
    res = CycleResult(status=OK, assignments=((a, "n1"),), unplaced=(b,), diagnoses={"b": diag})
    log = _submit("PodGroup", GroupBind(_group(), res, canary=False, retry=True))
    assert _names(log) == [
        "framework.run_commit",
        "binder.assume_and_bind",
        "status.pod_failed",
        "queue.done",
        "queue.move",
        "enqueuer.refresh_group",
    ]
    assert log[2][1] == (b, "Unschedulable", "0/1 nodes are available")
    log = _submit("PodGroup", GroupBind(_group(), res, canary=False, retry=False))
    assert "queue.move" not in _names(log)


def test_group_messages_and_explanation() -> None:
    a = _pod("a")
    log: list[Call] = []
    s = Submit()
    s.cache = _Cache([])
    for name in ("queue", "framework", "enqueuer", "binder", "status"):
        setattr(s, name, _Recorder(name, log))
    s.explanations = {}
    s.submit(_entity("PodGroup"), GroupUnschedulable(_group(), "too big", (a,)))
    assert s.explanations == {("ns", "g"): "too big"}
    assert log[0][1][1:] == ("False", "Unschedulable", "too big")
    assert log[1][1] == (a, "Unschedulable", 'pod group "g" is unschedulable: too big')


def test_preemption_failure_drops_the_nominations() -> None:
    failed: list[bool] = []
    log: list[Call] = []
    s = Submit()
    s.cache = _Cache([])
    s.queue = _Recorder("queue", log)
    s.status = _Recorder("status", log)
    s.explanations = {}
    a = _pod("a")
    pr = Preempt("pod ns/a", ((a, "n1"),), _victims(), lambda: failed.append(True), single_pod=True)
    s.submit(_entity("Pod"), PodUnschedulable(a, "no", pr, error=True))
    assert s.cache.nominations == {("ns", "a"): "n1"}
    on_failure = next(args[2] for name, args, _ in log if name == "status.preempt")
    on_failure()
    assert s.cache.nominations == {}
    assert failed == [True]
