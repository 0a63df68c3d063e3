"""Scenario pieces with topology: racks inside blocks, rack-constrained gangs, and a
block-constrained CompositePodGroup tree of rack-constrained PodGroups."""

from __future__ import annotations

from typing import Any

import yaml
from sim_helpers import nodes, scenario

from workloadbuilder.testing.builders import (
    make_composite_pod_group,
    make_composite_pod_group_template,
    make_pod,
    make_pod_group,
    make_pod_group_template,
    make_workload,
)

RACK = "example.com/rack"
BLOCK = "example.com/block"


def racks(count: int = 8, per_rack: int = 2, per_block: int = 4, cpu: str = "4") -> str:
    """``count`` nodes ``n-<i>``: racks of ``per_rack`` nodes inside blocks of ``per_block``."""
    return nodes(
        count,
        cpu,
        topology=[{"key": BLOCK, "size": per_block}, {"key": RACK, "size": per_rack}],
    )


def rack_gang(name: str, size: int, cpu: str, *, key: str | None = RACK, **extra: Any) -> str:
    pg = make_pod_group(name).gang(size)
    if key:
        pg.topology(key)
    if extra.get("parent"):
        pg.workload_ref("tree", "rack").parent(extra["parent"])
    docs = [pg.obj()]
    for i in range(size):
        docs.append(
            make_pod(f"{name}-{i}").pod_group(name).container_name("c").request("cpu", cpu).obj()
        )
    return yaml.safe_dump_all(docs)


def tree(name: str, min_groups: int, children: list[tuple[str, int, str]]) -> str:
    """A Workload with a block-constrained composite template over rack-constrained groups,
    one CompositePodGroup ``name`` and its children (name, pods, cpu)."""
    wl = (
        make_workload("tree")
        .composite_pod_group_template(
            make_composite_pod_group_template("block")
            .gang(min_groups)
            .topology(BLOCK)
            .pod_group_template(make_pod_group_template("rack").gang(1).topology(RACK))
        )
        .obj()
    )
    cpg = (
        make_composite_pod_group(name)
        .workload_ref("tree", "block")
        .gang(min_groups)
        .topology(BLOCK)
    )
    docs = [yaml.safe_dump(wl), yaml.safe_dump(cpg.obj())]
    docs += [rack_gang(c, n, cpu, parent=name) for c, n, cpu in children]
    return scenario(*docs)
