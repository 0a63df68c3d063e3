"""An out-of-tree scheduler plugin in a few lines: a Filter that keeps pods off labelled nodes.

Run it with ``.venv/bin/python examples/scheduler_plugin.py``: on an in-memory cluster of two
nodes, one labelled ``example.com/reserved``, the reference scheduler runs a profile that
enables the ``AvoidLabel`` plugin; the pods land on the other node, and a pod that only fits
on the labelled one stays pending with the plugin's reason. See docs/scheduler.md ("Writing a
plugin").

The plugin only uses :mod:`workloadbuilder.scheduler.framework` (the plugin API). It is
registered by name (``registry={"AvoidLabel": AvoidLabel}``, as kube-scheduler's
``app.WithPlugin``) and enabled in the profile like any in-tree plugin; its ``pluginConfig``
args reach its constructor.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from workloadbuilder.cluster import MemoryCluster
from workloadbuilder.scheduler import Scheduler, parse_config
from workloadbuilder.scheduler.framework import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    FilterPlugin,
    Mask,
    NodeTable,
    PodRequirements,
    Registry,
    Rows,
)
from workloadbuilder.testing import make_node, make_pod

#: the label the example reserves nodes with
RESERVED = "example.com/reserved"


class AvoidLabel:
    """Filter: no pod may run on a node carrying the label ``args["label"]``."""

    name = "AvoidLabel"
    #: the verdict reads only the node object: cached per pod shape until a node changes
    uses_node_usage = False

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        args = args or {}
        label = args.get("label", RESERVED)
        if not isinstance(label, str) or not label:
            raise ValueError(f"label must be a non-empty string, not {label!r}")
        self.label = label

    def events_to_register(self) -> list[ClusterEventWithHint]:
        """A node added or changed (its labels) may take a pod this plugin rejected."""
        return [ClusterEventWithHint(ClusterEvent("Node", ActionType.ADD | ActionType.UPDATE_NODE))]

    def filter(
        self, req: PodRequirements, vec: npt.NDArray[np.int64], table: NodeTable, rows: Rows
    ) -> Mask:
        """One verdict per node row: True unless the node has the label."""
        return np.fromiter(
            (self.label not in table.labels[r] for r in rows), dtype=bool, count=rows.size
        )

    def diagnose(
        self, req: PodRequirements, vec: npt.NDArray[np.int64], table: NodeTable, rows: Rows
    ) -> list[tuple[str, str, int]]:
        """``(short, long, count)``: how many of ``rows`` carry the label."""
        n = int((~self.filter(req, vec, table, rows)).sum())
        return [(f"node(s) had label {self.label}", f"carry the label {self.label}", n)]


if TYPE_CHECKING:  # mypy checks that the class is a Filter plugin

    def _is_a_filter(p: AvoidLabel) -> FilterPlugin:
        return p


#: the out-of-tree plugins this program adds to the scheduler
REGISTRY: Registry = {AvoidLabel.name: AvoidLabel}

#: a KubeSchedulerConfiguration profile enabling the plugin (as a file would give it)
CONFIG: dict[str, Any] = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    "profiles": [
        {
            "schedulerName": "default-scheduler",
            "plugins": {"filter": {"enabled": [{"name": AvoidLabel.name}]}},
            "pluginConfig": [{"name": AvoidLabel.name, "args": {"label": RESERVED}}],
        }
    ],
}


async def _node(cluster: MemoryCluster, name: str, cpu: str, labels: dict[str, str]) -> None:
    obj = make_node(name).labels(labels).resources({"cpu": cpu, "memory": "8Gi", "pods": 110})
    node = obj.obj()
    status = node.pop("status")  # status is a subresource, as on a real API server
    await cluster.create(node)
    await cluster.patch("Node", name, {"status": status}, subresource="status")


async def main() -> dict[str, str | None]:
    """Two nodes (``reserved`` carries the label), three small pods and one that only the
    labelled node is big enough for; returns ``{pod: node or None}``."""
    cluster = MemoryCluster()
    await _node(cluster, "reserved", "16", {RESERVED: "true"})
    await _node(cluster, "open", "4", {})
    for name, cpu in (("small-0", "1"), ("small-1", "1"), ("small-2", "1"), ("big", "8")):
        pod = make_pod(name, "default").request("cpu", cpu).request("memory", "1Gi")
        await cluster.create(pod.obj())
    loaded = parse_config(CONFIG, registry=REGISTRY)
    scheduler = Scheduler(cluster, loaded.scheduler, framework=loaded.framework)
    try:
        await scheduler.start()
        await scheduler.until_idle()
    finally:
        await scheduler.stop()
    placed: dict[str, str | None] = {}
    for item in (await cluster.list("Pod", "default")).items:
        assert isinstance(item, dict)
        placed[item["metadata"]["name"]] = item["spec"].get("nodeName")
    await cluster.close()
    return placed


if __name__ == "__main__":
    for pod, node in sorted(asyncio.run(main()).items()):
        print(f"{pod}: {node or 'pending'}")
