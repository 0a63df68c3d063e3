"""Property: on random small scenarios, the simulation keeps the gang invariant, never puts
more on a node than it can hold, and every gang ends up either whole or not bound at all."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sim_helpers import gang, nodes, scenario

from workloadbuilder.simulator import Simulation, SimulationResult, parse_quantity, parse_scenario

_gangs = st.lists(
    st.tuples(
        st.integers(min_value=1, max_value=5),  # pods
        st.sampled_from(["1", "2", "3", "500m"]),  # cpu per pod
        st.integers(min_value=0, max_value=120),  # arrival (s)
        st.one_of(st.none(), st.integers(min_value=1, max_value=90)),  # duration (s)
    ),
    min_size=1,
    max_size=5,
)


def _check_capacity(result: SimulationResult) -> None:
    alloc = {n.name: n.allocatable["cpu"] for n in result.nodes}
    events: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for p in result.pods:
        if p.node is None or p.bound is None:
            continue
        cpu = p.requests.get("cpu", 0.0)
        events[p.node].append((p.bound, cpu))
        if p.finished is not None:
            events[p.node].append((p.finished, -cpu))
    for node, evs in events.items():
        used = 0.0
        for _, delta in sorted(evs, key=lambda e: (e[0], e[1])):  # frees before adds
            used += delta
            assert used <= alloc[node] + 1e-9, f"{node} overcommitted: {used} > {alloc[node]}"


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(node_count=st.integers(min_value=1, max_value=4), gangs=_gangs)
async def test_random_scenarios_keep_the_invariants(
    node_count: int, gangs: list[tuple[int, str, int, int | None]]
) -> None:
    parts = [nodes(node_count, "4")]
    for i, (size, cpu, arrival, duration) in enumerate(gangs):
        parts.append(
            gang(
                f"g{i}",
                size,
                cpu,
                arrival=f"{arrival}s",
                duration=None if duration is None else f"{duration}s",
            )
        )
    result = await Simulation(parse_scenario(scenario(*parts))).run()
    assert result.violations == ()
    _check_capacity(result)
    for g in result.groups:
        assert g.bound_pods in (0, g.total_pods) or g.bound_pods >= (g.min_count or 1)
        if g.initially_scheduled:
            assert g.scheduled_at is not None and g.scheduled_at >= g.arrival
        else:
            assert g.bound_pods == 0 and g.message  # it says why
    # a gang that fits an empty cluster and has a duration-bound competition finishes
    for g, (size, cpu, _, _) in zip(
        sorted(result.groups, key=lambda g: int(g.name[1:])), gangs, strict=True
    ):
        per_node = int(4 // parse_quantity(cpu))
        if size <= per_node * node_count and all(d is not None for *_, d in gangs):
            assert g.initially_scheduled, g
