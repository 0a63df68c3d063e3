"""Apply what one scheduling attempt decided (kube-scheduler v1.37's
``submitPodGroupAlgorithmResult``): bind, nominate and preempt, requeue, write the status and
finish the attempt with ``queue.done``, exactly once per attempt, in that order.

:class:`Submit` is the half of :class:`~workloadbuilder.scheduler._schedule_one.ScheduleOne`
that has effects outside the snapshot; the algorithm half only computes a
:mod:`~workloadbuilder.scheduler._result` value.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Literal, assert_never

from workloadbuilder.scheduler._binding import Binder
from workloadbuilder.scheduler._cache import Cache, PodInfo
from workloadbuilder.scheduler._enqueue import Enqueuer
from workloadbuilder.scheduler._framework import Framework
from workloadbuilder.scheduler._preemption import Victim
from workloadbuilder.scheduler._queue import QueuedEntity, SchedulingQueue
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
from workloadbuilder.scheduler._status import (
    REASON_INVALID,
    REASON_SCHEDULED,
    REASON_SCHEDULER_ERROR,
    REASON_UNSCHEDULABLE,
    StatusWriter,
)
from workloadbuilder.scheduler._tree import TreeNode, find_root

__all__ = ["Outcome", "Submit"]

Outcome = Literal["success", "unschedulable", "error"]
"""How an attempt ends (``SchedulingQueue.done``)."""

# the records keep the logger name they always had (filters and tests select by it)
_log = logging.getLogger("workloadbuilder.scheduler._schedule_one")


class Submit:
    """The submit step of a scheduling attempt (mixed into ``ScheduleOne``, whose
    constructor sets these attributes)."""

    cache: Cache
    queue: SchedulingQueue
    #: the framework of the attempt being submitted (its entity's profile)
    framework: Framework
    enqueuer: Enqueuer
    binder: Binder
    status: StatusWriter
    #: ``(namespace, podgroup)`` -> the last Unschedulable / SchedulerError message
    explanations: dict[tuple[str, str], str]

    def submit(self, e: QueuedEntity, r: ScheduleResult) -> None:
        """Apply the result ``r`` of the attempt at ``e`` (popped, in flight): its binds,
        nominations, preemptions and status writes, then the one ``queue.done`` of the
        attempt, then what follows it (pods left out retried at once, gates re-evaluated)."""
        self.queue.done(e, self._apply(e, r))
        self._follow_up(e, r)

    def _apply(self, e: QueuedEntity, r: ScheduleResult) -> Outcome:
        """Everything before ``queue.done``; the attempt's outcome."""
        if isinstance(r, PodBind):
            self.framework.run_commit(r.cycle.reservations)
            self.binder.assume_and_bind(e.key, r.cycle.assignments, framework=self.framework)
            self.queue.remove(e.key)
            return "success"
        if isinstance(r, GroupBind):
            self._bind_group(e, r)
            return "success"
        if isinstance(r, NothingToDo):
            self.queue.remove(e.key)
            return "success"
        if isinstance(r, PodUnschedulable):
            if r.preempt is not None:
                self._preempt(r.preempt)
            self.status.pod_failed(r.pod, REASON_UNSCHEDULABLE, r.message)
            return "error" if r.error else "unschedulable"
        if isinstance(r, GroupUnschedulable):
            self._group_unschedulable(r)
            return "error" if r.error else "unschedulable"
        if isinstance(r, Requeue):
            return "unschedulable"
        if isinstance(r, GroupError):
            g = r.group
            _log.info("pod group %s/%s rejected (SchedulerError): %s", *g.key, r.message)
            self.explanations[g.key] = r.message
            self.status.group_condition(g, "False", REASON_SCHEDULER_ERROR, r.message)
            for p in r.pending:
                self.status.pod_failed(p, REASON_SCHEDULER_ERROR, r.message)
            return "error"
        if isinstance(r, TreeBind):
            self._bind_tree(e, r)
            return "success"
        if isinstance(r, TreeUnschedulable):
            if r.preempt is not None:
                self._preempt(r.preempt)
            self._tree_failed(r.tree, r.pending, REASON_UNSCHEDULABLE, r.message, r.per_node)
            return "error" if r.error else "unschedulable"
        if isinstance(r, TreeError):
            self._tree_failed(r.tree, r.pending, REASON_SCHEDULER_ERROR, r.message, {})
            return "error"
        if isinstance(r, TreeInvalid):
            self._tree_invalid(r)
            return "error"
        assert_never(r)

    def _follow_up(self, e: QueuedEntity, r: ScheduleResult) -> None:
        """Everything after ``queue.done``: pods a successful cycle left out are retried at
        once when preemption may help them; the entity's gates are re-evaluated."""
        if isinstance(r, GroupBind):
            if r.retry and any(r.cycle.diagnoses.get(p.req) is not None for p in r.cycle.unplaced):
                # Pods that found no node in a successful cycle (a basic group's, a gang's
                # above its quorum) are retried at once: that cycle places nothing new, so it
                # fails and runs PodGroupPostFilter for them, as kube-scheduler v1.37.2's
                # next attempt does. In the unschedulable pool they would wait for an event
                # that only the preemption they need can cause.
                self.queue.move(e.key)
            self.enqueuer.refresh_group((e.key[1], e.key[2]))
        elif isinstance(r, NothingToDo):
            if r.refresh == "group":
                self.enqueuer.refresh_group((e.key[1], e.key[2]))
            elif r.refresh == "namespace":
                self.enqueuer.refresh_namespace_trees(e.key[1])
        elif isinstance(r, Requeue):
            if r.root is not None:
                self.enqueuer.refresh_tree(r.root, None)
            else:
                self.enqueuer.refresh_group((e.key[1], e.key[2]))
        elif isinstance(r, TreeBind):
            if r.retry:
                placed = {p.key for p, _ in r.cycle.assignments}
                if any(p.key not in placed for p in r.pending):
                    # As for a flat group: pods of a tree whose cycle succeeded without them
                    # (a leaf left out above the root's quorum, a leaf's pods above its
                    # minCount, a leaf that grew) are retried at once; that cycle places
                    # nothing new, fails and preempts for them, as kube-scheduler v1.37.2's
                    # next attempt does.
                    self.queue.move(e.key)
            self.enqueuer.refresh_tree(r.root, None)

    # ---- preemption ------------------------------------------------------------------

    def _preempt(self, pr: Preempt) -> None:
        if pr.single_pod:
            _log.info(
                "%s preempts %s",
                pr.who,
                ", ".join(f"{v.kind} {v.namespace}/{v.name}" for v in pr.victims),
            )
            self._nominate_and_preempt(
                pr.who, pr.nominations, pr.victims, pr.on_failure, pr.profile
            )
        else:
            self._actuate(pr.who, pr.nominations, pr.victims, pr.on_failure, pr.profile)

    def _actuate(
        self,
        who: str,
        nominations: Sequence[tuple[PodInfo, str]],
        victims: Sequence[Victim],
        on_failure: Callable[[], None],
        profile: str | None = None,
    ) -> None:
        """Log, nominate the preemptor's pods and preempt the victims (a group's or a
        tree's: the victims are logged with their pod counts)."""
        _log.info(
            "%s preempts %s",
            who,
            ", ".join(f"{v.kind} {v.namespace}/{v.name} ({len(v.pods)} pods)" for v in victims),
        )
        self._nominate_and_preempt(who, nominations, victims, on_failure, profile)

    def _nominate_and_preempt(
        self,
        who: str,
        nominations: Sequence[tuple[PodInfo, str]],
        victims: Sequence[Victim],
        on_failure: Callable[[], None],
        profile: str | None = None,
    ) -> None:
        for p, node in nominations:
            self.cache.nominations[p.key] = node
            self.status.nominate(p, node)
        keys = [p.key for p, _ in nominations]

        def failed() -> None:
            for k in keys:
                self.cache.nominations.pop(k, None)
            on_failure()

        for v in victims:
            for victim in v.pods:
                self.status.preempt(victim, who, failed, profile=profile)

    # ---- pod groups ------------------------------------------------------------------

    def _bind_group(self, e: QueuedEntity, r: GroupBind) -> None:
        res, gk = r.cycle, (e.key[1], e.key[2])
        _log.info("pod group %s/%s scheduled: %d pods", *gk, len(res.assignments))
        _log.debug(
            "pod group %s/%s placement: %s", *gk, dict((p.name, n) for p, n in res.assignments)
        )
        self.framework.run_commit(res.reservations)
        # a gang whose quorum depends on this batch binds one pod first (see Binder)
        self.binder.assume_and_bind(
            e.key, res.assignments, group=r.group, canary=r.canary, framework=self.framework
        )
        for p in res.unplaced:
            diag = res.diagnoses.get(p.req)
            if diag is not None:
                self.status.pod_failed(p, REASON_UNSCHEDULABLE, diag.pod_message())

    def _group_unschedulable(self, r: GroupUnschedulable) -> None:
        g, message = r.group, r.message
        _log.info("pod group %s/%s unschedulable: %s", *g.key, message)
        self.explanations[g.key] = message
        if r.condition:
            # A group whose quorum is already bound or assumed (its bindings in flight, the
            # True condition not yet written) was initially scheduled: leftover pods that do
            # not fit must not flip it to False (upstream writes True in the cycle itself).
            self.status.group_condition(g, "False", REASON_UNSCHEDULABLE, message)
        pod_message = f'pod group "{g.name}" is unschedulable: {message}'
        for p in r.pending:
            self.status.pod_failed(p, REASON_UNSCHEDULABLE, pod_message)

    # ---- CompositePodGroup trees -----------------------------------------------------

    def _bind_tree(self, e: QueuedEntity, r: TreeBind) -> None:
        tree, res = r.tree, r.cycle
        self.binder.assume_and_bind(
            e.key, res.assignments, canary=tree.is_gang, framework=self.framework
        )
        self.explanations.pop(tree.key, None)
        for node in tree.composites():
            assert node.cpg is not None
            ref_n = (node.kind, node.name)
            if ref_n in res.succeeded:
                self.status.composite_condition(node.cpg, "True", REASON_SCHEDULED, "")
            else:
                text = res.explanations.get(ref_n, "not placed")
                self.status.composite_condition(node.cpg, "False", REASON_UNSCHEDULABLE, text)
        placed = {p.key for p, _ in res.assignments}
        for leaf in tree.leaves():
            assert leaf.group is not None
            ref_l = (leaf.kind, leaf.name)
            if ref_l in res.succeeded:
                self.status.group_condition(leaf.group, "True", REASON_SCHEDULED, "")
                continue
            text = res.explanations.get(ref_l, "not placed")
            self.explanations[leaf.key] = text
            if not any(p.scheduled for p in self.cache.members(leaf.group)):
                self.status.group_condition(leaf.group, "False", REASON_UNSCHEDULABLE, text)
            for p in r.by_group.get(leaf.key, ()):
                self.status.pod_failed(
                    p, REASON_UNSCHEDULABLE, f'pod group "{leaf.name}" is unschedulable: {text}'
                )
        for p in r.pending:
            if p.key not in placed and p.group_key is not None:
                leaf_ok = ("PodGroup", p.group_key[1]) in res.succeeded
                diag = res.diagnoses.get(p.req)
                if leaf_ok and diag is not None:
                    self.status.pod_failed(p, REASON_UNSCHEDULABLE, diag.pod_message())

    def _tree_failed(
        self,
        tree: TreeNode,
        pending: Sequence[PodInfo],
        reason: str,
        message: str,
        per_node: Mapping[tuple[str, str], str],
    ) -> None:
        self.explanations[tree.key] = message
        for node in tree.composites():
            assert node.cpg is not None
            self.status.composite_condition(
                node.cpg, "False", reason, per_node.get((node.kind, node.name), message)
            )
        for leaf in tree.leaves():
            assert leaf.group is not None
            if not any(p.scheduled for p in self.cache.members(leaf.group)):
                text = per_node.get((leaf.kind, leaf.name), message)
                self.explanations[leaf.key] = text
                self.status.group_condition(leaf.group, "False", reason, text)
        pod_message = f'composite pod group "{tree.name}" is unschedulable: {message}'
        for p in pending:
            self.status.pod_failed(
                p, reason, pod_message if reason == REASON_UNSCHEDULABLE else message
            )

    def _tree_invalid(self, r: TreeInvalid) -> None:
        ns, root, message = r.namespace, r.name, r.message
        self.explanations[(ns, root)] = message
        cpg = self.cache.composite_groups.get((ns, root))
        if cpg is not None:
            self.status.composite_condition(cpg, "False", REASON_INVALID, message)
        # An invalid hierarchy (a cycle, too deep) is never scheduled: say so on each of its
        # PodGroups and pending pods too (CompositePodGroup conditions may be off), so that
        # the gang does not wait silently.
        for (gns, name), g in list(self.cache.groups.items()):
            if gns != ns:
                continue
            ref = find_root(self.cache, ns, "PodGroup", name)
            if ref.name != root or not ref.invalid:
                continue
            self.explanations[(ns, name)] = message
            members = list(self.cache.members(g))
            if not any(p.scheduled for p in members):
                self.status.group_condition(g, "False", REASON_UNSCHEDULABLE, message)
            for p in members:
                if self.enqueuer.is_pending(p):
                    self.status.pod_failed(
                        p, REASON_UNSCHEDULABLE, f'pod group "{name}" is unschedulable: {message}'
                    )
