"""The simulator: replay a scenario (ordinary manifests plus ``sim.workloadbuilder.io``
annotations and NodePools) against the reference scheduler on an in-memory cluster with a
virtual clock, and report what happened (table, JSON, pictures).

    scenario = load_scenario("examples/simulations/gang-demo.yaml")
    result = await simulate(scenario)
    print(render_table(result))
"""

from typing import Any

from workloadbuilder.simulator._clock import VirtualClock
from workloadbuilder.simulator._engine import ProgressInfo, SchedulerLike, Simulation, simulate
from workloadbuilder.simulator._preemption import PreemptionRecord, Preemptor, VictimRecord
from workloadbuilder.simulator._report import plot_timeline, plot_utilization, write_report
from workloadbuilder.simulator._result import (
    CompositeRecord,
    GroupRecord,
    NodeRecord,
    PodRecord,
    SimulationResult,
    Violation,
    render_table,
    utilization_series,
)
from workloadbuilder.simulator._scenario import (
    ARRIVAL_ANNOTATION,
    AT_ANNOTATION,
    DELETE_AT_ANNOTATION,
    DURATION_ANNOTATION,
    MAX_NODES,
    MAX_PODS_PER_OBJECT,
    NODE_POOL_API_VERSION,
    Scenario,
    ScenarioError,
    ScenarioObject,
    expand_node_pool,
    load_scenario,
    parse_scenario,
)
from workloadbuilder.simulator._units import format_duration, parse_duration, parse_quantity

__all__ = [
    "ARRIVAL_ANNOTATION",
    "AT_ANNOTATION",
    "DEFAULT_SCHEDULER_NAME",
    "DELETE_AT_ANNOTATION",
    "DURATION_ANNOTATION",
    "MAX_NODES",
    "MAX_PODS_PER_OBJECT",
    "NODE_POOL_API_VERSION",
    "CompositeRecord",
    "GroupRecord",
    "NodeRecord",
    "PodRecord",
    "PreemptionRecord",
    "Preemptor",
    "ProgressInfo",
    "Scenario",
    "ScenarioError",
    "ScenarioObject",
    "SchedulerLike",
    "Simulation",
    "SimulationResult",
    "VictimRecord",
    "Violation",
    "VirtualClock",
    "expand_node_pool",
    "format_duration",
    "load_scenario",
    "parse_duration",
    "parse_quantity",
    "parse_scenario",
    "plot_timeline",
    "plot_utilization",
    "render_table",
    "simulate",
    "utilization_series",
    "write_report",
]


def __getattr__(name: str) -> Any:
    """``DEFAULT_SCHEDULER_NAME`` is the scheduler's own
    (:data:`workloadbuilder.scheduler.DEFAULT_SCHEDULER_NAME`), resolved on first access: the
    scheduler (numpy) is not loaded with the simulator's modules."""
    if name == "DEFAULT_SCHEDULER_NAME":
        from workloadbuilder.scheduler import DEFAULT_SCHEDULER_NAME

        return DEFAULT_SCHEDULER_NAME
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
