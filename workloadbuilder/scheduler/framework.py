"""The scheduler's plugin API (as kube-scheduler's ``k8s.io/kube-scheduler/framework``): what
an out-of-tree plugin implements and what it sees.

A plugin is an object with a unique ``name`` and the methods of the extension points it
serves (each a :class:`~typing.Protocol` below: :class:`FilterPlugin`, :class:`ScorePlugin`,
:class:`PreEnqueuePlugin`, ...). Optional hooks (:class:`FilterOnePlugin`,
:class:`ScoreOnePlugin`, :class:`PreEnqueueTreePlugin`, :class:`PlacementGenerateForPlugin`,
:class:`PlacementWeightPlugin`, :class:`ExplainGroupPlugin`, :class:`HandlePlugin`) are found
once, when the profile is built. Filters and scores are vectorised: they answer for an array
of node rows of the :class:`NodeTable` at once.

Register plugins by name in a :data:`Registry` (name -> :data:`PluginFactory`) and name them
in a ``KubeSchedulerConfiguration`` profile::

    from workloadbuilder.scheduler import Scheduler, parse_config

    loaded = parse_config(doc, registry={"AvoidLabel": AvoidLabel})
    scheduler = Scheduler(cluster, loaded.scheduler, framework=loaded.framework)

``load_config(path, registry=...)`` does the same for a file. A configuration with several
profiles builds one framework per profile (``loaded.frameworks``, by schedulerName), each
with its own plugin instances: ``Scheduler(cluster, loaded.scheduler,
frameworks=loaded.frameworks)`` serves them all. ``examples/scheduler_plugin.py``
is a complete Filter plugin; docs/scheduler.md ("Writing a plugin") describes the contract.
"""

from __future__ import annotations

from workloadbuilder.scheduler._cache import GroupInfo, NodeTable, PodInfo
from workloadbuilder.scheduler._interface import (
    SUCCESS,
    ActionType,
    BindPlugin,
    BoundedPlacementScorePlugin,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    EnqueueExtensions,
    ExplainGroupPlugin,
    FilterOnePlugin,
    FilterPlugin,
    HandlePlugin,
    Mask,
    Placement,
    PlacementFeasiblePlugin,
    PlacementGenerateForPlugin,
    PlacementGeneratePlugin,
    PlacementScorePlugin,
    PlacementSet,
    PlacementWeightPlugin,
    Plugin,
    PluginFactory,
    PodGroupPostFilterPlugin,
    PodScopedPlugin,
    PodScorePlugin,
    PodsRemovablePlugin,
    PreEnqueuePlugin,
    PreEnqueueTreePlugin,
    QueueingHint,
    Registry,
    ReservePlugin,
    Rows,
    ScoreOnePlugin,
    ScorePlugin,
    SharedLister,
    Status,
)
from workloadbuilder.scheduler._resources import PodRequirements
from workloadbuilder.scheduler._tree import TreeNode

__all__ = [
    "SUCCESS",
    "ActionType",
    "BindPlugin",
    "BoundedPlacementScorePlugin",
    "ClusterEvent",
    "ClusterEventWithHint",
    "Code",
    "EnqueueExtensions",
    "ExplainGroupPlugin",
    "FilterOnePlugin",
    "FilterPlugin",
    "GroupInfo",
    "HandlePlugin",
    "Mask",
    "NodeTable",
    "Placement",
    "PlacementFeasiblePlugin",
    "PlacementGenerateForPlugin",
    "PlacementGeneratePlugin",
    "PlacementScorePlugin",
    "PlacementSet",
    "PlacementWeightPlugin",
    "Plugin",
    "PluginFactory",
    "PodGroupPostFilterPlugin",
    "PodInfo",
    "PodRequirements",
    "PodScopedPlugin",
    "PodScorePlugin",
    "PodsRemovablePlugin",
    "PreEnqueuePlugin",
    "PreEnqueueTreePlugin",
    "QueueingHint",
    "Registry",
    "ReservePlugin",
    "Rows",
    "ScoreOnePlugin",
    "ScorePlugin",
    "SharedLister",
    "Status",
    "TreeNode",
]
