"""The result of a simulation, assembled from what the simulation recorded
(:class:`._world.World`) once its loop ended: the pod, group and composite records of
:mod:`._result` and the :class:`SimulationResult` that holds them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from workloadbuilder.simulator._dra import ClaimRecord
from workloadbuilder.simulator._preemption import PreemptionRecord
from workloadbuilder.simulator._result import (
    CompositeRecord,
    GroupRecord,
    PodRecord,
    SimulationResult,
    Violation,
)
from workloadbuilder.simulator._scenario import Scenario
from workloadbuilder.simulator._world import Key, World

__all__ = ["assemble_result"]


def assemble_result(
    world: World,
    scenario: Scenario,
    *,
    scheduler_name: str,
    end: float,
    rounds: int,
    until: float | None,
    violations: Sequence[Violation],
    preemptions: Sequence[PreemptionRecord],
    resource_claims: tuple[ClaimRecord, ...],
) -> SimulationResult:
    """The :class:`SimulationResult` of a simulation of ``scenario`` that ended at ``end``."""
    pods = tuple(_pod_records(world))
    by_group: dict[Key, list[PodRecord]] = {}
    for p in pods:
        if p.group is not None and p.deleted is None:
            by_group.setdefault((p.namespace, p.group), []).append(p)
    groups = _group_records(world, scenario, by_group) + _missing_groups(world, by_group)
    return SimulationResult(
        source=scenario.source,
        scheduler_name=scheduler_name,
        end=end,
        rounds=rounds,
        pods=pods,
        groups=tuple(groups),
        nodes=tuple(world.nodes.values()),
        violations=tuple(violations),
        until=until,
        last_arrival=max((o.arrival for o in scenario.objects), default=0.0),
        topology_keys=scenario.topology_keys,
        composites=_composite_records(world, scenario, groups, by_group),
        preemptions=tuple(preemptions),
        resource_claims=resource_claims,
    )


def _pod_records(world: World) -> list[PodRecord]:
    return [
        PodRecord(
            namespace=p.namespace,
            name=p.name,
            group=p.group,
            owner=p.owner,
            created=p.created,
            node=p.node,
            bound=p.bound,
            finished=p.finished,
            deleted=p.deleted,
            ours=p.ours,
            requests=p.requests,
            preempted=p.preempted,
        )
        for p in world.pods.values()
    ]


def _group_records(
    world: World, scenario: Scenario, by_group: Mapping[Key, list[PodRecord]]
) -> list[GroupRecord]:
    """One record per PodGroup the simulation saw (``by_group``: the live pods of each)."""
    groups: list[GroupRecord] = []
    for gkey, g in world.groups.items():
        live = by_group.get(gkey, [])
        keys = [*scenario.topology_keys, *world.ancestor_keys(g.parent, gkey[0]), g.key]
        scheduled_at = g.scheduled_at if g.scheduled_at is not None else g.quorum_at
        reason, message = g.reason, g.message
        need = g.min_count or 1
        if scheduled_at is None and not g.initially_scheduled and len(live) < need:
            # gated (fewer pods than minCount): the scheduler writes no status for it
            reason = "Waiting"
            message = f"waiting: {len(live)} of {need} pod{'s' if need != 1 else ''} exist"
        groups.append(
            GroupRecord(
                namespace=gkey[0],
                name=gkey[1],
                policy=g.policy,
                min_count=g.min_count,
                owner=g.owner,
                arrival=g.arrival,
                total_pods=len(live),
                bound_pods=sum(1 for p in live if p.node is not None),
                initially_scheduled=g.initially_scheduled,
                scheduled_at=scheduled_at,
                nodes=tuple(sorted({p.node for p in live if p.node is not None})),
                placements=tuple(sorted((p.name, p.node) for p in live if p.node is not None)),
                priority=g.priority,
                reason=reason,
                message=message,
                wait_message=g.wait_message
                if (g.scheduled_at or g.quorum_at) != g.arrival
                else None,
                template=g.template,
                parent=g.parent,
                key=g.key,
                domains=world.domain_values(live, keys),
                finished_at=_finished(live),
                preempted_at=tuple(g.preempted_at),
            )
        )
    return groups


def _missing_groups(world: World, by_group: Mapping[Key, list[PodRecord]]) -> list[GroupRecord]:
    """A waiting record per PodGroup that pods name but that does not exist."""
    groups: list[GroupRecord] = []
    for gkey, live in by_group.items():
        if gkey in world.groups or all(p.bound is not None for p in live):
            continue
        n = len(live)
        groups.append(
            GroupRecord(
                namespace=gkey[0],
                name=gkey[1],
                policy="unknown",
                min_count=None,
                owner=live[0].owner,
                arrival=min(p.created for p in live),
                total_pods=n,
                bound_pods=sum(1 for p in live if p.node is not None),
                initially_scheduled=False,
                scheduled_at=None,
                nodes=(),
                reason="Waiting",
                message=f"waiting: PodGroup {gkey[0]}/{gkey[1]} does not exist "
                f"({n} pod{' names' if n == 1 else 's name'} it)",
            )
        )
    return groups


def _composite_records(
    world: World,
    scenario: Scenario,
    groups: list[GroupRecord],
    by_group: Mapping[Key, list[PodRecord]],
) -> tuple[CompositeRecord, ...]:
    if not world.composites:
        return ()
    children = world.children()
    by_key = {(g.namespace, g.name): g for g in groups}
    done: dict[Key, float | None] = {}

    def scheduled(ckey: Key, depth: int = 0) -> float | None:
        if ckey in done or depth > 8:
            return done.get(ckey)
        c = world.composites[ckey]
        times: list[float] = []
        for what, key in children.get(ckey, ()):
            if what == "group":
                g = by_key.get(key)
                at = g.scheduled_at if g is not None else None
            else:
                at = scheduled(key, depth + 1)
            if at is not None:
                times.append(at)
        need = c.min_group_count if c.policy == "gang" and c.min_group_count else 1
        times.sort()
        at = (
            c.scheduled_at
            if c.scheduled_at is not None
            else (times[need - 1] if len(times) >= need else None)
        )
        done[ckey] = at
        return at

    out: list[CompositeRecord] = []
    for ckey, c in world.composites.items():
        live = [p for g in world.subtree_groups(ckey, children) for p in by_group.get(g, ())]
        keys = [*scenario.topology_keys, *world.ancestor_keys(c.parent, ckey[0]), c.key]
        out.append(
            CompositeRecord(
                namespace=ckey[0],
                name=ckey[1],
                owner=c.owner,
                arrival=c.arrival,
                policy=c.policy,
                min_group_count=c.min_group_count,
                children=tuple(key[1] for _, key in children.get(ckey, ())),
                initially_scheduled=c.initially_scheduled,
                scheduled_at=scheduled(ckey),
                reason=c.reason,
                message=c.message,
                template=c.template,
                parent=c.parent,
                key=c.key,
                domains=world.domain_values(live, keys),
            )
        )
    return tuple(out)


def _finished(pods: list[PodRecord]) -> float | None:
    """When the last pod of a group finished; None while one is pending or running."""
    if not pods or any(p.finished is None for p in pods):
        return None
    return max(p.finished for p in pods if p.finished is not None)
