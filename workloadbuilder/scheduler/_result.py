"""What one scheduling attempt decided (kube-scheduler v1.37's ``podGroupAlgorithmResult``,
which ``submitPodGroupAlgorithmResult`` applies): the pod, pod-group and tree algorithms of
:class:`~workloadbuilder.scheduler._schedule_one.ScheduleOne` each return exactly one of these
values, and :meth:`~workloadbuilder.scheduler._submit.Submit.submit` applies it (bind,
nominate, preempt, requeue, status writes, ``queue.done``).

The values only carry what the algorithm found; they do no work of their own. One value is
allocated per attempt (the frequent "nothing to do" and "wait at PreEnqueue" ones are shared
constants), never one per pod.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Literal

import attrs

from workloadbuilder.scheduler._cache import GroupInfo, PodInfo
from workloadbuilder.scheduler._composite import TreeResult
from workloadbuilder.scheduler._cycle import CycleResult
from workloadbuilder.scheduler._preemption import Victim
from workloadbuilder.scheduler._tree import RootRef, TreeNode

__all__ = [
    "CompositeResult",
    "GroupBind",
    "GroupError",
    "GroupResult",
    "GroupUnschedulable",
    "NothingToDo",
    "PodBind",
    "PodResult",
    "PodUnschedulable",
    "Preempt",
    "Requeue",
    "ScheduleResult",
    "TreeBind",
    "TreeError",
    "TreeInvalid",
    "TreeUnschedulable",
]

# ---- every path ------------------------------------------------------------------------


@attrs.frozen
class NothingToDo:
    """Nothing of the entity is left to schedule (gone, bound, or scheduled with its tree's
    root): drop it from the queue (``success``), then re-evaluate what ``refresh`` names
    (``group``: the PodGroup's entity; ``namespace``: every tree of the namespace)."""

    refresh: Literal["", "group", "namespace"] = ""


@attrs.frozen
class Requeue:
    """PreEnqueue says wait: back to the unschedulable pool (``unschedulable``) and
    re-evaluate the entity's gate (the tree rooted at ``root``, else the PodGroup)."""

    root: RootRef | None = None


@attrs.frozen
class Preempt:
    """Victims to preempt and the preemptor's pods to nominate (``(pod, node name)``);
    ``on_failure`` runs when a victim cannot be preempted. ``who`` names the preemptor in
    the log and the victims' ``DisruptionTarget``; ``single_pod`` logs the victims without
    their pod counts (a single pod's preemption); ``profile``: the preemptor's schedulerName
    (who reports the preemption when several profiles are served)."""

    who: str
    nominations: Sequence[tuple[PodInfo, str]]
    victims: Sequence[Victim]
    on_failure: Callable[[], None]
    single_pod: bool = False
    profile: str | None = None


# ---- single pods -----------------------------------------------------------------------


@attrs.frozen
class PodBind:
    """The pod's cycle succeeded: commit its reservations, assume and bind it."""

    cycle: CycleResult


@attrs.frozen
class PodUnschedulable:
    """The pod fits nowhere: ``message`` on it; with ``preempt`` its victims are preempted
    first; ``error`` when it retries after its backoff (room is being made) rather than
    waiting for an event."""

    pod: PodInfo
    message: str
    preempt: Preempt | None = None
    error: bool = False


# ---- pod groups ------------------------------------------------------------------------


@attrs.frozen
class GroupBind:
    """The group's cycle succeeded: commit, assume and bind ``cycle.assignments`` (one pod
    first when ``canary``), explain the pods it left out; with ``retry`` (preemption is on)
    pods left out are retried at once."""

    group: GroupInfo
    cycle: CycleResult
    canary: bool
    retry: bool


@attrs.frozen
class GroupUnschedulable:
    """The group does not fit: ``message`` on the group (its condition only when
    ``condition``: a group whose quorum is bound keeps True) and on its ``pending`` pods;
    ``error`` when it retries after its backoff (room is being made, or PodGroupPostFilter
    failed) rather than waiting for an event."""

    group: GroupInfo
    message: str
    pending: Sequence[PodInfo]
    condition: bool = True
    error: bool = False


@attrs.frozen
class GroupError:
    """The group cannot be scheduled as it is (``SchedulerError``: mixed scheduler names,
    priorities or preemption policies, a PlacementGenerate error): back off."""

    group: GroupInfo
    message: str
    pending: Sequence[PodInfo]


# ---- CompositePodGroup trees -----------------------------------------------------------


@attrs.frozen
class TreeBind:
    """The tree's cycle succeeded: assume and bind ``cycle.assignments``, write every
    level's condition and explain the pods left out (``pending`` sorted, ``by_group`` the
    pending pods per leaf); with ``retry`` (preemption is on) pods left out are retried at
    once. ``root`` is the tree's entity, re-evaluated last."""

    tree: TreeNode
    root: RootRef
    cycle: TreeResult
    pending: Sequence[PodInfo]
    by_group: Mapping[tuple[str, str], Sequence[PodInfo]]
    retry: bool


@attrs.frozen
class TreeUnschedulable:
    """The tree does not fit: ``message`` on the root and its pending pods, ``per_node``'s
    own message (else ``message``) on each level; with ``preempt`` its victims are
    preempted first; ``error`` when it retries after its backoff (room is being made)."""

    tree: TreeNode
    message: str
    pending: Sequence[PodInfo]
    per_node: Mapping[tuple[str, str], str]
    preempt: Preempt | None = None
    error: bool = False


@attrs.frozen
class TreeError:
    """The tree cannot be scheduled as it is (``SchedulerError``: mixed scheduler names,
    priorities or preemption policies): on every level and pending pod; back off."""

    tree: TreeNode
    message: str
    pending: Sequence[PodInfo]


@attrs.frozen
class TreeInvalid:
    """The hierarchy rooted at ``namespace``/``name`` is invalid (a cycle, too deep):
    ``Invalid`` on the root, the message on its PodGroups and their pending pods; back off."""

    namespace: str
    name: str
    message: str


PodResult = NothingToDo | PodBind | PodUnschedulable
"""What the pod algorithm returns."""

GroupResult = NothingToDo | Requeue | GroupBind | GroupUnschedulable | GroupError
"""What the pod-group algorithm returns."""

CompositeResult = NothingToDo | Requeue | TreeBind | TreeUnschedulable | TreeError | TreeInvalid
"""What the CompositePodGroup tree algorithm returns."""

ScheduleResult = PodResult | GroupResult | CompositeResult
"""Any attempt's result (what the submit step takes)."""
