"""The public plugin API (``workloadbuilder.scheduler.framework``): an out-of-tree plugin is
registered by name, enabled in a profile and used by the scheduler (the example plugin on
MemoryCluster); the registry's errors name the field; the framework finds the optional hooks
once, when it is built."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Mapping
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from fixtures.manifests import EXAMPLES_DIR
from sched_helpers import Env

from workloadbuilder.runtime import ManualClock
from workloadbuilder.scheduler import (
    ConfigError,
    Scheduler,
    SchedulerConfig,
    _interface,
    parse_config,
)
from workloadbuilder.scheduler import framework as api
from workloadbuilder.scheduler._cache import Cache
from workloadbuilder.scheduler._framework import Framework
from workloadbuilder.scheduler._plugins import default_framework
from workloadbuilder.scheduler._resources import PodRequirements
from workloadbuilder.testing import make_node


def _example() -> ModuleType:
    name = "scheduler_plugin_example"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, EXAMPLES_DIR / "scheduler_plugin.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _doc(**profile: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [profile],
    }


# ---- the example plugin, registered and used ----------------------------------------------


async def test_example_plugin_keeps_pods_off_the_labelled_node() -> None:
    placed = await _example().main()
    assert placed == {"small-0": "open", "small-1": "open", "small-2": "open", "big": None}


async def test_registered_filter_is_used_by_the_profile(
    mem_env: tuple[Env, ManualClock],
) -> None:
    env, clock = mem_env
    ex = _example()
    avoid = "example.com/no-batch"
    blocked = await env.node("blocked", cpu="16", labels={avoid: "yes"})
    allowed = await env.node("allowed", cpu="4")
    await env.gang("g", 3, cpu="1")
    await env.pod("huge", cpu="8")  # only the labelled node has room for it
    loaded = parse_config(
        _doc(
            schedulerName=env.scheduler_name,
            plugins={"filter": {"enabled": [{"name": "AvoidLabel"}]}},
            pluginConfig=[{"name": "AvoidLabel", "args": {"label": avoid}}],
        ),
        registry=ex.REGISTRY,
    )
    (plugin,) = [f for f in loaded.framework.filters if f.name == "AvoidLabel"]
    assert isinstance(plugin, ex.AvoidLabel) and plugin.label == avoid
    s = Scheduler(env.cluster, loaded.scheduler, clock=clock, framework=loaded.framework)
    env.schedulers.append(s)
    await s.until_idle()
    assert await env.bound("g-") == {f"g-{i}": allowed for i in range(3)}
    assert await env.bound("huge") == {}
    cond = await env.pod_condition("huge")
    assert cond is not None and cond["status"] == "False"
    assert f"1 node(s) had label {avoid}" in cond["message"]
    assert blocked not in (await env.bound()).values()


async def test_without_the_plugin_the_labelled_node_is_used(
    mem_env: tuple[Env, ManualClock],
) -> None:
    env, clock = mem_env
    blocked = await env.node("blocked", cpu="16", labels={_example().RESERVED: "true"})
    await env.node("allowed", cpu="4")
    await env.pod("huge", cpu="8")
    s = Scheduler(env.cluster, SchedulerConfig(scheduler_name=env.scheduler_name), clock=clock)
    env.schedulers.append(s)
    await s.until_idle()
    assert await env.bound("huge") == {"huge": blocked}


async def test_the_scheduler_seals_the_framework_it_is_given(
    mem_env: tuple[Env, ManualClock],
) -> None:
    env, clock = mem_env
    ex = _example()
    await env.node("blocked", cpu="16", labels={ex.RESERVED: "true"})
    allowed = await env.node("allowed", cpu="4")
    await env.pod("p", cpu="2")
    fw = default_framework()
    fw.filters.append(ex.AvoidLabel())  # changed in place: counts once the scheduler is built
    s = Scheduler(
        env.cluster, SchedulerConfig(scheduler_name=env.scheduler_name), clock=clock, framework=fw
    )
    env.schedulers.append(s)
    assert [f.name for f in fw.static_filters][-1] == "AvoidLabel"
    await s.until_idle()
    assert await env.bound("p") == {"p": allowed}


# ---- the registry in profiles -------------------------------------------------------------


class _Scorer:
    """A Score-only out-of-tree plugin (its args: ``{"bonus": N}``)."""

    name = "Bonus"

    def __init__(self, args: Mapping[str, Any]) -> None:
        self.weight = 1
        self.bonus = int(args.get("bonus", 0))

    def score(self, req: Any, vec: Any, table: Any, rows: Any, gang: bool) -> Any:
        return np.full(rows.size, float(self.bonus))


def test_multi_point_enables_an_out_of_tree_plugin_where_it_has_the_method() -> None:
    loaded = parse_config(
        _doc(
            plugins={"multiPoint": {"enabled": [{"name": "Bonus", "weight": 3}]}},
            pluginConfig=[{"name": "Bonus", "args": {"bonus": 7}}],
        ),
        registry={"Bonus": _Scorer},
    )
    fw = loaded.framework
    (bonus,) = [p for p in fw.scores if p.name == "Bonus"]
    assert isinstance(bonus, _Scorer) and (bonus.weight, bonus.bonus) == (3, 7)
    assert all(p.name != "Bonus" for p in fw.filters)
    assert [p.name for p in fw.plugins()].count("Bonus") == 1


def test_registry_errors_name_the_field() -> None:
    registry: api.Registry = {"Bonus": _Scorer}
    with pytest.raises(ConfigError, match=r"unknown plugin 'Nope' \(known: .*Bonus"):
        parse_config(_doc(plugins={"score": {"enabled": [{"name": "Nope"}]}}), registry=registry)
    with pytest.raises(ConfigError, match="does not implement the filter extension point"):
        parse_config(_doc(plugins={"filter": {"enabled": [{"name": "Bonus"}]}}), registry=registry)
    with pytest.raises(ConfigError, match="already name in-tree plugins"):
        parse_config(_doc(), registry={"NodeAffinity": _Scorer})
    with pytest.raises(ConfigError, match=r"pluginConfig: plugin 'Bonus': invalid literal"):
        parse_config(
            _doc(
                plugins={"score": {"enabled": [{"name": "Bonus"}]}},
                pluginConfig=[{"name": "Bonus", "args": {"bonus": "many"}}],
            ),
            registry=registry,
        )
    with pytest.raises(ConfigError, match="built a plugin named 'Bonus'"):
        parse_config(
            _doc(plugins={"score": {"enabled": [{"name": "Other"}]}}),
            registry={"Other": _Scorer},
        )


# ---- capabilities, found once -------------------------------------------------------------


class _Fit:
    """A usage filter with a one-row form (counts which form ran)."""

    name = "Fit"
    uses_node_usage = True

    def __init__(self) -> None:
        self.rows = 0
        self.ones = 0

    def filter(self, req: Any, vec: Any, table: Any, rows: npt.NDArray[np.intp]) -> Any:
        self.rows += 1
        return np.ones(rows.size, dtype=bool)

    def filter_one(self, req: Any, vec: Any, table: Any, row: int) -> bool:
        self.ones += 1
        return True

    def diagnose(self, req: Any, vec: Any, table: Any, rows: Any) -> list[tuple[str, str, int]]:
        return []


class _Plain(_Fit):
    """The same filter without the one-row form."""

    name = "Plain"
    filter_one = None  # type: ignore[assignment]


def test_optional_hooks_are_found_when_the_framework_is_built() -> None:
    cache = Cache()
    cache.upsert_node(make_node("n").resources({"cpu": "4", "memory": "8Gi"}).obj())
    table = cache.table
    req = PodRequirements(requests=(("cpu", 1000),))
    vec = table.vector(req.requests)
    fit, plain = _Fit(), _Plain()
    fw = Framework(filters=[fit, plain])
    assert isinstance(fit, api.FilterOnePlugin) and not isinstance(plain, api.FilterOnePlugin)
    assert fw.run_usage_filters_one(req, vec, table, 0)
    assert (fit.ones, fit.rows, plain.ones, plain.rows) == (1, 0, 0, 1)
    # a hook added to a plugin after the build is not seen until the framework is rebuilt
    plain.filter_one = _Fit.filter_one.__get__(plain)  # type: ignore[method-assign]
    assert fw.run_usage_filters_one(req, vec, table, 0)
    assert (plain.ones, plain.rows) == (0, 2)
    fw.refresh()
    assert fw.run_usage_filters_one(req, vec, table, 0)
    assert (plain.ones, plain.rows) == (1, 2)


def test_the_public_module_is_the_interface() -> None:
    for name in api.__all__:
        assert getattr(api, name) is not None, name
        if hasattr(_interface, name):
            assert getattr(api, name) is getattr(_interface, name), name
    ex = _example()
    plugin = ex.AvoidLabel({"label": "x"})
    assert not isinstance(plugin, api.FilterOnePlugin)
    with pytest.raises(ValueError, match="non-empty string"):
        ex.AvoidLabel({"label": ""})


# ---- a per-pod Score plugin ----------------------------------------------------------------


class _PreferLabel:
    """Per-pod Score: 100 on nodes whose ``pref`` label equals the pod's ``pref`` label, 0
    elsewhere; nothing to score for a pod without the label."""

    name = "PreferLabel"
    weight = 1

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        self.args = args

    def scores_pod(self, pod: api.PodInfo, lister: api.SharedLister) -> bool:
        return "pref" in pod.labels

    def score_pod(
        self, pod: api.PodInfo, lister: api.SharedLister, rows: api.Rows
    ) -> npt.NDArray[np.float64]:
        table = lister.table  # type: ignore[attr-defined]
        want = pod.labels["pref"]
        return np.array(
            [100.0 if table.labels[r].get("pref") == want else 0.0 for r in rows.tolist()]
        )


async def test_a_per_pod_score_plugin_decides_among_fitting_nodes(
    mem_env: tuple[Env, ManualClock],
) -> None:
    env, clock = mem_env
    a = await env.node("a", cpu="8", labels={"pref": "x"})
    b = await env.node("b", cpu="8", labels={"pref": "y"})
    await env.node("c", cpu="1", labels={"pref": "y"})  # preferred, but too small
    await env.pod("wants-y", cpu="2", labels={"pref": "y"})
    await env.pod("plain", cpu="2")
    loaded = parse_config(
        _doc(
            schedulerName=env.scheduler_name,
            plugins={"score": {"enabled": [{"name": "PreferLabel", "weight": 50}]}},
        ),
        registry={"PreferLabel": _PreferLabel},
    )
    assert [s.name for s in loaded.framework.scores][-1] == "PreferLabel"
    assert loaded.framework.pod_scoring
    s = Scheduler(env.cluster, loaded.scheduler, clock=clock, framework=loaded.framework)
    env.schedulers.append(s)
    await s.until_idle()
    bound = await env.bound()
    assert bound["wants-y"] == b  # the preference wins over the resource score
    assert bound["plain"] == a  # nothing to score per pod: the emptier node, as before


# ---- usage-independent Score plugins ---------------------------------------------------------


class _PreferPref:
    """Score 100 on nodes labelled pref=yes (reads the node object only); counts the
    one-row refreshes it is asked for."""

    name = "PreferPref"
    weight = 1

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        self.refreshes = 0

    def score(
        self,
        req: api.PodRequirements,
        vec: npt.NDArray[np.int64],
        table: api.NodeTable,
        rows: api.Rows,
        gang: bool,
    ) -> npt.NDArray[np.float64]:
        return np.array(
            [100.0 if table.labels[r].get("pref") == "yes" else 0.0 for r in rows.tolist()]
        )

    def score_one(
        self,
        req: api.PodRequirements,
        vec: npt.NDArray[np.int64],
        table: api.NodeTable,
        row: int,
        gang: bool,
    ) -> float:
        self.refreshes += 1
        return 100.0 if table.labels[row].get("pref") == "yes" else 0.0


class _StaticPref(_PreferPref):
    name = "StaticPref"
    usage_independent = True


@pytest.mark.parametrize("plugin", [_PreferPref, _StaticPref])
async def test_a_usage_independent_score_is_not_asked_again_as_pods_land(
    mem_env: tuple[Env, ManualClock], plugin: type[_PreferPref]
) -> None:
    env, clock = mem_env
    pref = await env.node("pref", cpu="4", labels={"pref": "yes"})
    other = await env.node("other", cpu="4")
    await env.gang("g", 6, cpu="1")
    loaded = parse_config(
        _doc(
            schedulerName=env.scheduler_name,
            plugins={"score": {"enabled": [{"name": plugin.name, "weight": 5}]}},
        ),
        registry={plugin.name: plugin},
    )
    (scorer,) = [s for s in loaded.framework.scores if s.name == plugin.name]
    assert isinstance(scorer, _PreferPref)
    s = Scheduler(env.cluster, loaded.scheduler, clock=clock, framework=loaded.framework)
    env.schedulers.append(s)
    await s.until_idle()
    bound = await env.bound("g-")
    # the same placement either way: the preferred node fills first, then the other
    assert sorted(bound.values()).count(pref) == 4 and sorted(bound.values()).count(other) == 2
    if plugin is _StaticPref:
        assert scorer.refreshes == 0  # its evaluated scores were kept
    else:
        assert scorer.refreshes > 0
