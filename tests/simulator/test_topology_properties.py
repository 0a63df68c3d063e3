"""Property: with a scheduler that honours topology and composite trees (the stand-in of
sim_topo_toy), random rack- and block-constrained scenarios never trip the simulator's
composite and topology invariants, and every constrained group that ran reports exactly one
domain of its key; a scheduler that ignores the keys is caught whenever it spreads a gang."""

from __future__ import annotations

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sim_helpers import scenario
from sim_topo_toy import TopoToyScheduler
from sim_trees import BLOCK, RACK, rack_gang, racks, tree

from workloadbuilder.simulator import Simulation, parse_scenario

_groups = st.lists(
    st.tuples(
        st.integers(min_value=1, max_value=4),  # pods
        st.sampled_from(["1", "2", "4"]),  # cpu per pod (4-CPU nodes)
        st.sampled_from([RACK, BLOCK, None]),  # constraint
        st.integers(min_value=0, max_value=60),  # arrival (s)
    ),
    min_size=1,
    max_size=5,
)


def _text(groups: list[tuple[int, str, str | None, int]], with_tree: bool) -> str:
    parts = [racks()]
    for i, (size, cpu, key, arrival) in enumerate(groups):
        doc = yaml.safe_load_all(rack_gang(f"g{i}", size, cpu, key=key))
        docs = list(doc)
        for d in docs:
            d["metadata"]["annotations"] = {
                "sim.workloadbuilder.io/arrival": f"{arrival}s",
                "sim.workloadbuilder.io/duration": "30s",
            }
        parts.append(yaml.safe_dump_all(docs))
    if with_tree:
        parts.append(tree("t", 2, [("t-a", 2, "2"), ("t-b", 2, "2")]))
    return scenario(*parts)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(groups=_groups, with_tree=st.booleans())
async def test_a_topology_aware_scheduler_never_trips_the_invariants(
    groups: list[tuple[int, str, str | None, int]], with_tree: bool
) -> None:
    result = await Simulation(
        parse_scenario(_text(groups, with_tree)),
        scheduler_factory=lambda c, clock: TopoToyScheduler(c),
    ).run()
    assert result.violations == ()
    for g in result.groups:
        if g.key is not None and g.bound_pods:
            assert isinstance(g.domains[g.key], str), g
    for c in result.composites:
        if c.key is not None and c.key in c.domains:
            assert isinstance(c.domains[c.key], str), c


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(groups=_groups)
async def test_a_spreading_scheduler_is_always_caught(
    groups: list[tuple[int, str, str | None, int]],
) -> None:
    result = await Simulation(
        parse_scenario(_text(groups, False)),
        scheduler_factory=lambda c, clock: TopoToyScheduler(c, spread=True),
    ).run()
    flagged = {v.name for v in result.violations if v.type == "topology"}
    for g in result.groups:
        spread = g.key is not None and isinstance(g.domains.get(g.key), list)
        assert spread == (g.name in flagged), (g, result.violations)
