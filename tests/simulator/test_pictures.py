"""What the pictures show: a colour key for the node panel, no grey group colour (grey means
"no group"), distinguishable utilization lines, priority and domains in the labels."""

from __future__ import annotations

from pathlib import Path

from matplotlib.colors import to_rgb
from sim_helpers import gang, nodes, scenario
from sim_topo_toy import TopoToyScheduler

from workloadbuilder.simulator import GroupRecord, Simulation, parse_scenario, write_report
from workloadbuilder.simulator._report import _domain_mark, _group_colors, _group_label, _palette


def _grey(color: object) -> bool:
    r, g, b = to_rgb(color)  # type: ignore[arg-type]
    return abs(r - g) < 0.02 and abs(g - b) < 0.02


def test_no_group_gets_grey() -> None:
    assert not any(_grey(c) for c in _palette())
    colors = _group_colors([("ns", f"g{i}") for i in range(60)])
    assert not any(_grey(c) for c in colors.values())
    assert len({to_rgb(c) for c in list(colors.values())[:38]}) == 38  # distinct at first


def _record(**kw: object) -> GroupRecord:
    base: dict[str, object] = dict(
        namespace="default",
        name="train-abc-train-pgt-0-123",
        policy="gang",
        min_count=4,
        owner="Job/train",
        arrival=0.0,
        total_pods=4,
        bound_pods=4,
        initially_scheduled=True,
        scheduled_at=0.0,
        nodes=(),
        priority=100,
        template="train-pgt-0",
    )
    base.update(kw)
    return GroupRecord(**base)  # type: ignore[arg-type]


def test_labels_carry_priority_and_domains() -> None:
    assert _group_label(_record(), False) == "Job train train-pgt-0 · gang 4 · 4 pods · prio 100"
    assert _group_label(_record(owner="", name="g", total_pods=1), False) == (
        "g · gang 4 · 1 pod · prio 100"
    )
    rec = _record(key="example.com/rack", domains={"example.com/rack": "gpu-rack-3"})
    assert _domain_mark(rec) == "rack=gpu-rack-3"
    assert _domain_mark(_record()) == ""


async def test_report_with_domains_and_a_legend(tmp_path: Path) -> None:
    text = scenario(
        nodes(4, "4", topology=[{"key": "example.com/rack", "size": 2}]),
        gang("a", 2, "4", duration="1m"),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: alone}\n"
        "spec: {containers: [{name: c, resources: {requests: {cpu: '1'}}}]}\n",
    )
    result = await Simulation(
        parse_scenario(text), scheduler_factory=lambda c, clock: TopoToyScheduler(c)
    ).run()
    paths = write_report(result, tmp_path)
    assert all(p.stat().st_size > 10_000 for p in paths if p.suffix == ".png")
