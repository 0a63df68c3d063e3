"""``KubeSchedulerConfiguration`` files (``kubescheduler.config.k8s.io/v1``): profiles with
their plugins enabled/disabled per extension point and plugin args, client QPS/burst, leader
election and the queue's backoff.

Several ``profiles`` are served by one scheduler (one cache, queue and binder), as by
kube-scheduler: each names its ``schedulerName`` and gets its own
:class:`~workloadbuilder.scheduler._framework.Framework`
(:attr:`LoadedConfig.frameworks`); a pod, a PodGroup's pods or a CompositePodGroup tree's pods
are scheduled by the profile their ``spec.schedulerName`` names. As upstream validates them:
with several profiles every one needs a ``schedulerName`` (only a lone profile defaults it),
the names are unique, and ``plugins.queueSort`` is the same in every profile (the queue is
shared; its one sort is ``PrioritySort``).

Every error names the field path (``profiles[0].plugins.filter.enabled[1].name: ...``).

Profiles name plugins: the in-tree ones (``IN_TREE``) and the out-of-tree ones of a
:data:`~workloadbuilder.scheduler._interface.Registry` given to :func:`load_config` /
:func:`parse_config` (upstream's ``app.WithPlugin``). An out-of-tree plugin is built once
per profile by its factory, with its ``pluginConfig`` args (every field but ``apiVersion``
and ``kind``); the extension points it may be enabled at are those whose method it has.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from workloadbuilder.errors import WorkloadBuilderError
from workloadbuilder.scheduler._config import DEFAULT_SCHEDULER_NAME, SchedulerConfig
from workloadbuilder.scheduler._framework import Framework
from workloadbuilder.scheduler._interface import PlacementWeightPlugin, Registry
from workloadbuilder.scheduler._plugins import (
    DEFAULT_PLUGINS,
    IN_TREE,
    NodeAffinity,
    NodeResourcesBalancedAllocation,
    NodeResourcesFit,
    TopologyPlacementGenerator,
)
from workloadbuilder.scheduler._podconstraints import (
    MAX_HARD_POD_AFFINITY_WEIGHT,
    InterPodAffinity,
)
from workloadbuilder.scheduler._podspec import Selector, SpreadConstraint
from workloadbuilder.scheduler._preemption import DefaultPreemption

__all__ = [
    "API_VERSION",
    "EXTENSION_POINTS",
    "KIND",
    "ClientConnection",
    "ConfigError",
    "LeaderElection",
    "LoadedConfig",
    "load_config",
    "parse_config",
]

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"

#: configuration name -> (Framework attribute, the method a plugin needs for it)
EXTENSION_POINTS: dict[str, tuple[str, str]] = {
    "preEnqueue": ("pre_enqueue", "pre_enqueue_group"),
    "filter": ("filters", "filter"),
    "score": ("scores", "score"),
    "placementGenerate": ("placement_generate", "generate"),
    "placementScore": ("placement_score", "score_placement"),
    "placementFeasible": ("placement_feasible", "placement_feasible"),
    "podGroupPostFilter": ("pod_group_post_filter", "post_filter"),
    "bind": ("bind", "bind"),
    "reserve": ("reserve", "reserve_pod"),
}
_WEIGHTED = ("score", "placementScore")
_STRATEGIES = ("MostAllocated", "LeastAllocated")


class ConfigError(WorkloadBuilderError):
    """The scheduler configuration file is unusable (the message names the field)."""


@attrs.frozen(kw_only=True)
class LeaderElection:
    """``leaderElection`` (client-go's defaults)."""

    leader_elect: bool = False
    resource_namespace: str = "kube-system"
    resource_name: str | None = None
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


@attrs.frozen(kw_only=True)
class ClientConnection:
    """``clientConnection``: None means "not set" (no client-side rate limit)."""

    kubeconfig: str | None = None
    qps: float | None = None
    burst: int | None = None


@attrs.define(kw_only=True)
class LoadedConfig:
    """What a configuration file sets up: the scheduler's settings (``scheduler_name`` is
    the first profile's) and one framework per profile.

    ``Scheduler(cluster, loaded.scheduler, frameworks=loaded.frameworks)`` serves them all;
    ``framework`` is the first profile's (the only one's, for a one-profile file)."""

    scheduler: SchedulerConfig
    framework: Framework
    leader_election: LeaderElection = attrs.field(factory=LeaderElection)
    client_connection: ClientConnection = attrs.field(factory=ClientConnection)
    #: schedulerName -> that profile's framework, in the file's order (empty when built by
    #: hand: ``{scheduler.scheduler_name: framework}``)
    frameworks: dict[str, Framework] = attrs.field(factory=dict)

    def __attrs_post_init__(self) -> None:
        if not self.frameworks:
            self.frameworks = {self.scheduler.scheduler_name: self.framework}


class _Fields:
    """Reads one mapping, remembering which keys were used; :meth:`done` rejects the rest."""

    def __init__(self, value: Any, path: str) -> None:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{path or 'the document'}: expected a mapping, not {_kind(value)}")
        self.value = value
        self.path = path
        self.used: set[str] = set()

    def at(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def get(self, key: str, default: Any = None) -> Any:
        self.used.add(key)
        v = self.value.get(key)
        return default if v is None else v

    def done(self) -> None:
        for key in self.value:
            if key not in self.used:
                raise ConfigError(f"{self.at(str(key))}: unknown field")


def _kind(v: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(v), type(v).__name__
    )


def _str(v: Any, path: str) -> str:
    if not isinstance(v, str) or not v:
        raise ConfigError(f"{path}: expected a non-empty string, not {_kind(v)}")
    return v


def _bool(v: Any, path: str) -> bool:
    if not isinstance(v, bool):
        raise ConfigError(f"{path}: expected true or false, not {_kind(v)}")
    return v


def _number(v: Any, path: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise ConfigError(f"{path}: expected a number, not {_kind(v)}")
    return float(v)


def _int(v: Any, path: str, *, minimum: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ConfigError(f"{path}: expected an integer, not {_kind(v)}")
    if v < minimum:
        raise ConfigError(f"{path}: must be at least {minimum}, not {v}")
    return v


def _list(v: Any, path: str) -> list[Any]:
    if not isinstance(v, list):
        raise ConfigError(f"{path}: expected a list, not {_kind(v)}")
    return v


_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def _duration(v: Any, path: str) -> float:
    """A Go duration (``15s``, ``1m30s``, ``500ms``), positive."""
    text = v if isinstance(v, str) else ""
    pos, total = 0, 0.0
    for m in _DURATION.finditer(text):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if not text or pos != len(text):
        raise ConfigError(f"{path}: expected a duration like 15s, 2m or 1m30s, not {v!r}")
    if total <= 0:
        raise ConfigError(f"{path}: must be positive, not {v!r}")
    return total


# ---- plugins ------------------------------------------------------------------------------


def _plugin_name(v: Any, path: str, registry: Registry) -> str:
    name = _str(v, path)
    if name != "*" and name not in IN_TREE and name not in registry:
        known = ", ".join(sorted([*IN_TREE, *registry]))
        raise ConfigError(f"{path}: unknown plugin {name!r} (known: {known})")
    return name


def _fit_args(f: _Fields, defaults: SchedulerConfig) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "gang_strategy": defaults.gang_scoring,
        "single_strategy": defaults.single_scoring,
        "resources": defaults.score_resources,
    }
    strategy = f.get("scoringStrategy")
    if strategy is not None:
        s = _Fields(strategy, f.at("scoringStrategy"))
        for key, kw in (("type", "single_strategy"), ("podGroupType", "gang_strategy")):
            value = s.get(key)
            if value is not None:
                if value not in _STRATEGIES:
                    raise ConfigError(
                        f"{s.at(key)}: must be one of {', '.join(_STRATEGIES)}, not {value!r}"
                    )
                kwargs[kw] = value
        resources = s.get("resources")
        if resources is not None:
            out: list[tuple[str, int]] = []
            for i, item in enumerate(_list(resources, s.at("resources"))):
                r = _Fields(item, f"{s.at('resources')}[{i}]")
                name = _str(r.get("name"), r.at("name"))
                weight = _int(r.get("weight", 1), r.at("weight"), minimum=1)
                r.done()
                out.append((name, weight))
            if not out:
                raise ConfigError(f"{s.at('resources')}: must name at least one resource")
            kwargs["resources"] = tuple(out)
        s.done()
    return kwargs


_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def _requirement(v: Any, path: str, *, field: bool) -> dict[str, Any]:
    """One ``matchExpressions`` / ``matchFields`` item, checked as upstream's node selector
    parsing does (``matchFields``: only ``metadata.name`` with ``In``/``NotIn`` and one
    value)."""
    r = _Fields(v, path)
    key = _str(r.get("key"), r.at("key"))
    op = r.get("operator")
    if op not in _OPERATORS:
        raise ConfigError(f"{r.at('operator')}: must be one of {', '.join(_OPERATORS)}, not {op!r}")
    values = [
        _str(x, f"{r.at('values')}[{i}]")
        for i, x in enumerate(_list(r.get("values", []), r.at("values")))
    ]
    r.done()
    if field:
        if key != "metadata.name":
            raise ConfigError(f"{r.at('key')}: only metadata.name is supported, not {key!r}")
        if op not in ("In", "NotIn") or len(values) != 1:
            raise ConfigError(f"{r.at('values')}: metadata.name takes In or NotIn with one value")
    elif op in ("In", "NotIn") and not values:
        raise ConfigError(f"{r.at('values')}: must be non-empty with operator {op}")
    elif op in ("Exists", "DoesNotExist") and values:
        raise ConfigError(f"{r.at('values')}: must be empty with operator {op}")
    elif op in ("Gt", "Lt") and (len(values) != 1 or not re.fullmatch(r"[-+]?\d+", values[0])):
        raise ConfigError(f"{r.at('values')}: operator {op} takes one integer value")
    return {"key": key, "operator": op, "values": values}


def _selector_term(v: Any, path: str) -> dict[str, Any]:
    t = _Fields(v, path)
    out: dict[str, Any] = {}
    for key, field in (("matchExpressions", False), ("matchFields", True)):
        items = t.get(key)
        if items is not None:
            out[key] = [
                _requirement(x, f"{t.at(key)}[{i}]", field=field)
                for i, x in enumerate(_list(items, t.at(key)))
            ]
    t.done()
    return out


def _node_affinity_args(f: _Fields) -> dict[str, Any]:
    """NodeAffinityArgs: ``addedAffinity`` (required ``nodeSelectorTerms`` every pod must
    also match; preferred terms every pod also scores)."""
    added = f.get("addedAffinity")
    if added is None:
        return {}
    a = _Fields(added, f.at("addedAffinity"))
    out: dict[str, Any] = {}
    required = a.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is not None:
        key = "requiredDuringSchedulingIgnoredDuringExecution"
        r = _Fields(required, a.at(key))
        terms = _list(r.get("nodeSelectorTerms", []), r.at("nodeSelectorTerms"))
        out["added_required"] = [
            _selector_term(t, f"{r.at('nodeSelectorTerms')}[{i}]") for i, t in enumerate(terms)
        ]
        r.done()
    preferred = a.get("preferredDuringSchedulingIgnoredDuringExecution")
    if preferred is not None:
        key = "preferredDuringSchedulingIgnoredDuringExecution"
        items: list[tuple[int, dict[str, Any]]] = []
        for i, item in enumerate(_list(preferred, a.at(key))):
            p = _Fields(item, f"{a.at(key)}[{i}]")
            weight = _int(p.get("weight", 0), p.at("weight"), minimum=0)
            if weight > 100:
                raise ConfigError(f"{p.at('weight')}: must be at most 100, not {weight}")
            items.append((weight, _selector_term(p.get("preference", {}), p.at("preference"))))
            p.done()
        out["added_preferred"] = items
    a.done()
    return out


def _balanced_args(f: _Fields) -> dict[str, Any]:
    """NodeResourcesBalancedAllocationArgs: ``resources`` (names, each once, weight 1; 0 or
    unset defaults to 1, an empty list to cpu and memory, as upstream's defaulting)."""
    resources = f.get("resources")
    if resources is None:
        return {}
    out: list[tuple[str, int]] = []
    for i, item in enumerate(_list(resources, f.at("resources"))):
        r = _Fields(item, f"{f.at('resources')}[{i}]")
        name = _str(r.get("name"), r.at("name"))
        if any(name == n for n, _ in out):
            raise ConfigError(f"{r.at('name')}: {name!r} is listed twice")
        weight = r.get("weight", 1)
        if weight not in (0, 1) or isinstance(weight, bool):
            raise ConfigError(f"{r.at('weight')}: must be 1, not {weight!r}")
        r.done()
        out.append((name, 1))
    return {"resources": tuple(out)} if out else {}


def _topology_args(f: _Fields) -> dict[str, Any]:
    """TopologyPlacementGenerator (our extensions): ``tieBreakSeed`` (default 0) and
    ``compositeSearch: {mode: bounded|greedy, budget: N, deadlineSeconds: S}``."""
    out: dict[str, Any] = {}
    seed = f.get("tieBreakSeed")
    if seed is not None:
        out["tie_break_seed"] = _int(seed, f.at("tieBreakSeed"), minimum=0)
    search = f.get("compositeSearch")
    if search is not None:
        s = _Fields(search, f.at("compositeSearch"))
        mode = s.get("mode")
        if mode is not None:
            if mode not in ("bounded", "greedy"):
                raise ConfigError(f"{s.at('mode')}: must be bounded or greedy, not {mode!r}")
            out["composite_search"] = mode
        budget = s.get("budget")
        if budget is not None:
            out["search_budget"] = _int(budget, s.at("budget"), minimum=1)
        deadline = s.get("deadlineSeconds")
        if deadline is not None:
            value = _number(deadline, s.at("deadlineSeconds"))
            if value <= 0:
                raise ConfigError(f"{s.at('deadlineSeconds')}: must be positive")
            out["search_deadline"] = value
        s.done()
    return out


def _inter_pod_affinity_args(f: _Fields) -> dict[str, Any]:
    """``InterPodAffinityArgs``: ``hardPodAffinityWeight`` (0..100, default 1) and
    ``ignorePreferredTermsOfExistingPods`` (default false)."""
    out: dict[str, Any] = {}
    weight = f.get("hardPodAffinityWeight")
    if weight is not None:
        w = _int(weight, f.at("hardPodAffinityWeight"), minimum=0)
        if w > MAX_HARD_POD_AFFINITY_WEIGHT:
            raise ConfigError(
                f"{f.at('hardPodAffinityWeight')}: must be in the range 0-"
                f"{MAX_HARD_POD_AFFINITY_WEIGHT}, not {w}"
            )
        out["hard_pod_affinity_weight"] = w
    ignore = f.get("ignorePreferredTermsOfExistingPods")
    if ignore is not None:
        out["ignore_preferred_terms_of_existing_pods"] = _bool(
            ignore, f.at("ignorePreferredTermsOfExistingPods")
        )
    return out


_ACTIONS = ("DoNotSchedule", "ScheduleAnyway")
_POLICIES = ("Honor", "Ignore")


def _quoted(v: Any) -> str:
    return f'"{v}"' if isinstance(v, str) else str(v)


def _spread_args(f: _Fields) -> dict[str, Any]:
    """PodTopologySpreadArgs: ``defaultingType`` (System, the default, or List) and
    ``defaultConstraints``, checked as upstream's ``ValidatePodTopologySpreadArgs`` (every
    error found, each with its field path)."""
    # imported here: the scheduler command does not load the SDK's validation at start-up
    from workloadbuilder.validation import is_qualified_name

    errors: list[str] = []
    raw = f.get("defaultConstraints", [])
    items = _list(raw, f.at("defaultConstraints"))
    defaulting = f.get("defaultingType", "System")
    if defaulting not in ("System", "List"):
        errors.append(
            f"{f.at('defaultingType')}: Unsupported value: {_quoted(defaulting)}: supported "
            'values: "System", "List"'
        )
    elif defaulting == "System" and items:
        errors.append(
            f'{f.at("defaultingType")}: Invalid value: "System": when .defaultConstraints are '
            "not empty"
        )
    out: list[SpreadConstraint] = []
    seen: list[tuple[Any, Any]] = []
    for i, item in enumerate(items):
        c = _Fields(item, f"{f.at('defaultConstraints')}[{i}]")
        max_skew = c.get("maxSkew", 0)
        if isinstance(max_skew, bool) or not isinstance(max_skew, int) or max_skew <= 0:
            errors.append(
                f"{c.at('maxSkew')}: Invalid value: {_quoted(max_skew)}: not in valid range "
                "(0, inf)"
            )
        key = c.get("topologyKey", "")
        if not isinstance(key, str) or not key:
            errors.append(f"{c.at('topologyKey')}: Required value: can not be empty")
        else:
            for e in is_qualified_name(key):
                errors.append(f"{c.at('topologyKey')}: Invalid value: {_quoted(key)}: {e}")
        action = c.get("whenUnsatisfiable", "")
        if not action:
            errors.append(f"{c.at('whenUnsatisfiable')}: Required value: can not be empty")
        elif action not in _ACTIONS:
            errors.append(
                f"{c.at('whenUnsatisfiable')}: Unsupported value: {_quoted(action)}: "
                'supported values: "DoNotSchedule", "ScheduleAnyway"'
            )
        if "labelSelector" in c.value:
            c.get("labelSelector")
            errors.append(
                f"{c.at('labelSelector')}: Forbidden: constraint must not define a selector, "
                "as they deduced for each pod"
            )
        if (key, action) in seen:
            errors.append(
                f'{f.at("defaultConstraints")}[{i}]: Duplicate value: "{{{key}, {action}}}"'
            )
        seen.append((key, action))
        min_domains = c.get("minDomains")
        if min_domains is not None:
            min_domains = _int(min_domains, c.at("minDomains"), minimum=1)
        policies: dict[str, bool] = {}
        for field, default in (("nodeAffinityPolicy", "Honor"), ("nodeTaintsPolicy", "Ignore")):
            value = c.get(field, default)
            if value not in _POLICIES:
                errors.append(
                    f"{c.at(field)}: Unsupported value: {_quoted(value)}: supported values: "
                    '"Honor", "Ignore"'
                )
            policies[field] = value == "Honor"
        if c.get("matchLabelKeys") is not None:
            errors.append(
                f"{c.at('matchLabelKeys')}: Forbidden: has no effect in a default constraint "
                "(its selector is built for each pod), so it is not accepted"
            )
        c.done()
        if isinstance(max_skew, int) and isinstance(key, str) and action in _ACTIONS:
            out.append(
                SpreadConstraint(
                    max_skew=max_skew,
                    topology_key=key,
                    selector=Selector(),
                    hard=action == "DoNotSchedule",
                    min_domains=min_domains or 1,
                    honor_node_affinity=policies["nodeAffinityPolicy"],
                    honor_node_taints=policies["nodeTaintsPolicy"],
                )
            )
    if errors:
        raise ConfigError("; ".join(errors))
    return {"defaulting_type": defaulting, "default_constraints": tuple(out)}


def _plugin_args(
    entries: Any, path: str, defaults: SchedulerConfig, registry: Registry
) -> dict[str, dict[str, Any]]:
    """``pluginConfig[]`` -> constructor keyword arguments per in-tree plugin name, the args
    themselves (a mapping) per out-of-tree one."""
    out: dict[str, dict[str, Any]] = {}
    for i, entry in enumerate(_list(entries, path)):
        e = _Fields(entry, f"{path}[{i}]")
        name = _plugin_name(e.get("name"), e.at("name"), registry)
        if name == "*":
            raise ConfigError(f"{e.at('name')}: must name one plugin")
        if name in out:
            raise ConfigError(f"{e.at('name')}: {name!r} is configured twice")
        args = _Fields(e.get("args", {}), e.at("args"))
        args.get("apiVersion")
        kind = args.get("kind")
        if kind is not None and kind != f"{name}Args":
            raise ConfigError(f"{args.at('kind')}: expected {name}Args, not {kind!r}")
        if name in registry:  # out of tree: the plugin's factory reads its args
            out[name] = {k: v for k, v in args.value.items() if k not in ("apiVersion", "kind")}
            args.used.update(str(k) for k in args.value)
        elif name == NodeResourcesFit.name:
            out[name] = _fit_args(args, defaults)
        elif name == TopologyPlacementGenerator.name:
            out[name] = _topology_args(args)
        elif name == InterPodAffinity.name:
            out[name] = _inter_pod_affinity_args(args)
        elif name == NodeAffinity.name:
            out[name] = _node_affinity_args(args)
        elif name == NodeResourcesBalancedAllocation.name:
            out[name] = _balanced_args(args)
        elif name == "PodTopologySpread":
            out[name] = _spread_args(args)
        elif name == DefaultPreemption.name:
            aware = args.get("topologyAware")
            if aware is not None and not isinstance(aware, bool):
                raise ConfigError(f"{args.at('topologyAware')}: must be true or false")
            out[name] = {} if aware is None else {"topology_aware": aware}
        else:
            out[name] = {}
        args.done()
        e.done()
    return out


def _plugin_set(
    v: Any, path: str, registry: Registry
) -> tuple[list[tuple[str, int | None]], list[str]]:
    """``{enabled: [{name, weight}], disabled: [{name}]}``."""
    f = _Fields(v, path)
    enabled: list[tuple[str, int | None]] = []
    for i, item in enumerate(_list(f.get("enabled", []), f.at("enabled"))):
        p = _Fields(item, f"{f.at('enabled')}[{i}]")
        name = _plugin_name(p.get("name"), p.at("name"), registry)
        if name == "*":
            raise ConfigError(f"{p.at('name')}: '*' can only be disabled")
        weight = p.get("weight")
        w = None if weight is None else _int(weight, p.at("weight"), minimum=0) or None
        p.done()
        enabled.append((name, w))
    disabled: list[str] = []
    for i, item in enumerate(_list(f.get("disabled", []), f.at("disabled"))):
        p = _Fields(item, f"{f.at('disabled')}[{i}]")
        disabled.append(_plugin_name(p.get("name"), p.at("name"), registry))
        p.done()
    f.done()
    return enabled, disabled


#: the queue's one sort (upstream's only in-tree QueueSort plugin): priority, then arrival
_QUEUE_SORT = "PrioritySort"


def _queue_sort(v: Any, path: str) -> str:
    """``plugins.queueSort``: it may only keep ``PrioritySort`` (the shared queue's order).
    Returns the set as written, canonically, for the every-profile-the-same check."""
    f = _Fields(v, path)
    enabled: list[dict[str, Any]] = []
    for i, item in enumerate(_list(f.get("enabled", []), f.at("enabled"))):
        p = _Fields(item, f"{f.at('enabled')}[{i}]")
        name = _str(p.get("name"), p.at("name"))
        if name != _QUEUE_SORT:
            raise ConfigError(
                f"{p.at('name')}: queue sort plugin {name!r} is not supported (the queue "
                f"orders by {_QUEUE_SORT}: priority, then arrival)"
            )
        if p.get("weight") is not None:
            raise ConfigError(f"{p.at('weight')}: only score extension points take a weight")
        p.done()
        enabled.append({"name": name})
    disabled: list[dict[str, Any]] = []
    for i, item in enumerate(_list(f.get("disabled", []), f.at("disabled"))):
        p = _Fields(item, f"{f.at('disabled')}[{i}]")
        name = _str(p.get("name"), p.at("name"))
        if name not in ("*", _QUEUE_SORT):
            raise ConfigError(f"{p.at('name')}: unknown queue sort plugin {name!r}")
        p.done()
        disabled.append({"name": name})
    f.done()
    if len(enabled) > 1:
        raise ConfigError(f"{f.at('enabled')}: only one queue sort plugin can be enabled")
    if disabled and not enabled:
        raise ConfigError(f"{path}: a queue sort plugin is required ({_QUEUE_SORT})")
    out: dict[str, Any] = {}
    if enabled:
        out["enabled"] = enabled
    if disabled:
        out["disabled"] = disabled
    return json.dumps(out, sort_keys=True)


def _framework(
    profile: _Fields, defaults: SchedulerConfig, name: str, registry: Registry
) -> tuple[Framework, str]:
    """The profile's framework and its ``plugins.queueSort`` (see :func:`_queue_sort`)."""
    args = _plugin_args(
        profile.get("pluginConfig", []), profile.at("pluginConfig"), defaults, registry
    )
    instances: dict[str, Any] = {}

    def instance(plugin: str) -> Any:
        if plugin not in instances:
            kwargs = args.get(plugin)
            if plugin in registry:
                try:
                    built = registry[plugin](kwargs or {})
                except (TypeError, ValueError, KeyError) as e:  # the factory refused its args
                    raise ConfigError(
                        f"{profile.at('pluginConfig')}: plugin {plugin!r}: {e}"
                    ) from None
                if getattr(built, "name", None) != plugin:
                    raise ConfigError(
                        f"{profile.at('plugins')}: the factory of {plugin!r} built a plugin "
                        f"named {getattr(built, 'name', None)!r}"
                    )
                instances[plugin] = built
                return built
            if kwargs is None and plugin == NodeResourcesFit.name:
                kwargs = _fit_args(_Fields({}, ""), defaults)
            instances[plugin] = IN_TREE[plugin](**(kwargs or {}))
        return instances[plugin]

    def implements(plugin: str, method: str) -> bool:
        """In-tree plugins by their class; out-of-tree ones by the instance built."""
        target = instance(plugin) if plugin in registry else IN_TREE[plugin]
        if method == "score":  # a vectorised Score plugin or a per-pod one
            return callable(getattr(target, "score", None)) or callable(
                getattr(target, "score_pod", None)
            )
        return callable(getattr(target, method, None))

    points: dict[str, list[str]] = {p: list(DEFAULT_PLUGINS[p]) for p in EXTENSION_POINTS}
    weights: dict[tuple[str, str], int] = {}
    plugins = _Fields(profile.get("plugins", {}), profile.at("plugins"))
    queue_sort = _queue_sort(plugins.get("queueSort", {}), plugins.at("queueSort"))
    multi = plugins.get("multiPoint")
    if multi is not None:
        enabled, disabled = _plugin_set(multi, plugins.at("multiPoint"), registry)
        for point in points:
            if "*" in disabled:
                points[point] = []
            points[point] = [p for p in points[point] if p not in disabled]
        for plugin, w in enabled:
            for point, (_, method) in EXTENSION_POINTS.items():
                if implements(plugin, method):
                    if plugin not in points[point]:
                        points[point].append(plugin)
                    if w is not None and point in _WEIGHTED:
                        weights[(point, plugin)] = w
    for point, (_, method) in EXTENSION_POINTS.items():
        raw = plugins.get(point)
        if raw is None:
            continue
        enabled, disabled = _plugin_set(raw, plugins.at(point), registry)
        current = [] if "*" in disabled else [p for p in points[point] if p not in disabled]
        for i, (plugin, w) in enumerate(enabled):
            if not implements(plugin, method):
                raise ConfigError(
                    f"{plugins.at(point)}.enabled[{i}].name: plugin {plugin!r} does not "
                    f"implement the {point} extension point"
                )
            if w is not None and point not in _WEIGHTED:
                raise ConfigError(
                    f"{plugins.at(point)}.enabled[{i}].weight: only score "
                    "extension points take a weight"
                )
            if plugin in current:
                current.remove(plugin)  # re-enabled: the custom order wins (as upstream)
            current.append(plugin)
            if w is not None:
                weights[(point, plugin)] = w
        points[point] = current
    for key in plugins.value:
        if key not in EXTENSION_POINTS and key not in ("multiPoint", "queueSort"):
            raise ConfigError(
                f"{plugins.at(str(key))}: unknown extension point (known: multiPoint, "
                f"queueSort, {', '.join(EXTENSION_POINTS)})"
            )
    plugins.done()
    for plugin in args:
        if not any(plugin in names for names in points.values()):
            raise ConfigError(
                f"{profile.at('pluginConfig')}: args for {plugin!r}, which is not enabled"
            )
    fw_lists: dict[str, list[Any]] = {}
    for point, (attr, _) in EXTENSION_POINTS.items():
        fw_lists[attr] = [instance(p) for p in points[point]]
        for p in points[point]:
            w = weights.get((point, p))
            if w is not None:
                attr_name = "weight"
                if point == "placementScore" and isinstance(instances[p], PlacementWeightPlugin):
                    attr_name = "placement_weight"  # NodeResourcesFit: its own weight here
                setattr(instances[p], attr_name, w)
    fw = Framework(profile=name)
    for attr, lst in fw_lists.items():
        setattr(fw, attr, lst)
    if TopologyPlacementGenerator.name in points["placementGenerate"]:
        generator = instances[TopologyPlacementGenerator.name]
        fw.placement_seed = generator.tie_break_seed
        fw.composite_search = generator.composite_search
        fw.search_budget = generator.search_budget
        fw.search_deadline = generator.search_deadline
    fw.refresh()
    return fw, queue_sort


# ---- the document -------------------------------------------------------------------------


def parse_config(
    doc: Any, *, source: str = "config", registry: Registry | None = None
) -> LoadedConfig:
    """A ``KubeSchedulerConfiguration`` document (already parsed YAML) -> what it sets up.
    ``registry``: out-of-tree plugins the profile may name besides the in-tree ones."""
    registry = registry or {}
    clash = sorted(set(registry) & set(IN_TREE))
    if clash:
        raise ConfigError(f"registry: {', '.join(clash)} already name in-tree plugins")
    try:
        return _parse(doc, registry)
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from None


def _parse(doc: Any, registry: Registry) -> LoadedConfig:
    top = _Fields(doc, "")
    api_version = top.get("apiVersion")
    if api_version != API_VERSION:
        raise ConfigError(f"apiVersion: expected {API_VERSION}, not {api_version!r}")
    kind = top.get("kind")
    if kind != KIND:
        raise ConfigError(f"kind: expected {KIND}, not {kind!r}")
    base = SchedulerConfig()
    initial = top.get("podInitialBackoffSeconds")
    maximum = top.get("podMaxBackoffSeconds")
    initial_backoff = (
        base.initial_backoff if initial is None else _number(initial, "podInitialBackoffSeconds")
    )
    max_backoff = base.max_backoff if maximum is None else _number(maximum, "podMaxBackoffSeconds")
    if initial_backoff <= 0:
        raise ConfigError(f"podInitialBackoffSeconds: must be positive, not {initial}")
    if max_backoff < initial_backoff:
        raise ConfigError(
            f"podMaxBackoffSeconds: must be at least podInitialBackoffSeconds "
            f"({initial_backoff:g}), not {maximum}"
        )
    profiles = _list(top.get("profiles", [{}]), "profiles") or [{}]
    settings = attrs.evolve(base, initial_backoff=initial_backoff, max_backoff=max_backoff)
    frameworks: dict[str, Framework] = {}
    first: tuple[int, str] | None = None  # the index and queueSort of the first profile
    for i, raw in enumerate(profiles):
        profile = _Fields(raw, f"profiles[{i}]")
        name = profile.get("schedulerName")
        if name is None and len(profiles) == 1:  # only a lone profile gets the default name
            name = DEFAULT_SCHEDULER_NAME
        if name is None or name == "":
            raise ConfigError(f"{profile.at('schedulerName')}: Required value")
        name = _str(name, profile.at("schedulerName"))
        if name in frameworks:
            raise ConfigError(f"{profile.at('schedulerName')}: Duplicate value: {name!r}")
        framework, queue_sort = _framework(profile, settings, name, registry)
        if first is None:
            first = (i, queue_sort)
        elif queue_sort != first[1]:
            raise ConfigError(
                f"{profile.at('plugins')}.queueSort: Invalid value: {queue_sort}: must be the "
                f"same for all profiles (profiles[{first[0]}].plugins.queueSort: {first[1]})"
            )
        profile.done()
        frameworks[name] = framework
    scheduler = attrs.evolve(settings, scheduler_name=next(iter(frameworks)))
    client = ClientConnection()
    raw = top.get("clientConnection")
    if raw is not None:
        c = _Fields(raw, "clientConnection")
        kubeconfig = c.get("kubeconfig")
        qps, burst = c.get("qps"), c.get("burst")
        client = ClientConnection(
            kubeconfig=None if kubeconfig is None else _str(kubeconfig, c.at("kubeconfig")),
            qps=None if qps is None else _number(qps, c.at("qps")),
            burst=None if burst is None else _int(burst, c.at("burst"), minimum=0),
        )
        c.done()
    leader = LeaderElection()
    raw = top.get("leaderElection")
    if raw is not None:
        le = _Fields(raw, "leaderElection")
        values: dict[str, Any] = {}
        if le.get("leaderElect") is not None:
            values["leader_elect"] = _bool(le.get("leaderElect"), le.at("leaderElect"))
        lock = le.get("resourceLock")
        if lock is not None and lock != "leases":
            raise ConfigError(f"{le.at('resourceLock')}: only 'leases' is supported, not {lock!r}")
        for key, attr in (
            ("resourceNamespace", "resource_namespace"),
            ("resourceName", "resource_name"),
        ):
            if le.get(key) is not None:
                values[attr] = _str(le.get(key), le.at(key))
        for key, attr in (
            ("leaseDuration", "lease_duration"),
            ("renewDeadline", "renew_deadline"),
            ("retryPeriod", "retry_period"),
        ):
            if le.get(key) is not None:
                values[attr] = _duration(le.get(key), le.at(key))
        le.done()
        leader = LeaderElection(**values)
        if leader.lease_duration <= leader.renew_deadline:
            raise ConfigError("leaderElection.leaseDuration: must be greater than renewDeadline")
        if leader.renew_deadline <= leader.retry_period:
            raise ConfigError("leaderElection.renewDeadline: must be greater than retryPeriod")
    top.done()
    return LoadedConfig(
        scheduler=scheduler,
        framework=next(iter(frameworks.values())),
        frameworks=frameworks,
        leader_election=leader,
        client_connection=client,
    )


def load_config(path: str | Path, *, registry: Registry | None = None) -> LoadedConfig:
    """Read and check a ``KubeSchedulerConfiguration`` YAML file. Raises
    :class:`ConfigError` (one line naming the file and the field). ``registry``: out-of-tree
    plugins the profile may name besides the in-tree ones."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"cannot read {path}: not UTF-8 text") from None
    import yaml  # only a configuration file needs it (no import cost at start-up)

    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {' '.join(str(e).split())}") from None
    if len(docs) != 1:
        raise ConfigError(f"{path}: expected one KubeSchedulerConfiguration, found {len(docs)}")
    return parse_config(docs[0], source=str(path), registry=registry)
