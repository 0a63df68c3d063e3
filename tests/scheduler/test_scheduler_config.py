"""``KubeSchedulerConfiguration`` files and ``workloadbuilder scheduler --config``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from workloadbuilder.cli import main
from workloadbuilder.scheduler import ConfigError, load_config
from workloadbuilder.scheduler._plugins import NodeResourcesFit

GOOD = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
podInitialBackoffSeconds: 2
podMaxBackoffSeconds: 20
clientConnection: {qps: 20, burst: 40}
leaderElection:
  leaderElect: true
  resourceNamespace: sched
  resourceName: my-lease
  leaseDuration: 30s
  renewDeadline: 20s
  retryPeriod: 4s
profiles:
- schedulerName: my-scheduler
  plugins:
    filter:
      disabled: [{name: NodeAffinity}]
    score:
      enabled: [{name: NodeResourcesFit, weight: 3}]
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        podGroupType: LeastAllocated
        resources: [{name: cpu, weight: 2}, {name: nvidia.com/gpu, weight: 5}]
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sched.yaml"
    path.write_text(text)
    return path


def _doc(**changes: Any) -> str:
    doc = yaml.safe_load(GOOD)
    doc.update(changes)
    return yaml.safe_dump(doc)


def test_good_file(tmp_path: Path) -> None:
    loaded = load_config(_write(tmp_path, GOOD))
    assert loaded.scheduler.scheduler_name == "my-scheduler"
    assert (loaded.scheduler.initial_backoff, loaded.scheduler.max_backoff) == (2.0, 20.0)
    assert (loaded.client_connection.qps, loaded.client_connection.burst) == (20.0, 40)
    le = loaded.leader_election
    assert (le.leader_elect, le.resource_namespace, le.resource_name) == (
        True,
        "sched",
        "my-lease",
    )
    assert (le.lease_duration, le.renew_deadline, le.retry_period) == (30.0, 20.0, 4.0)
    fw = loaded.framework
    assert [f.name for f in fw.filters] == [
        "NodeUnschedulable",
        "NodeName",
        "TaintToleration",
        "NodeResourcesFit",
        "NodeDeclaredFeatures",
    ]
    # the default Score plugins stay (NodeAffinity is disabled at filter only, as upstream);
    # NodeResourcesFit, enabled again with a weight, moves to the end
    assert [(s.name, s.weight) for s in fw.scores] == [
        ("TaintToleration", 3),
        ("NodeAffinity", 2),
        ("PodTopologySpread", 2),
        ("InterPodAffinity", 2),
        ("NodeResourcesBalancedAllocation", 1),
        ("ImageLocality", 1),
        ("NodeResourcesFit", 3),
    ]
    assert fw.scores[0] is fw.filters[2]  # one TaintToleration instance for both points
    spread = fw.scores[2]
    assert spread in fw.reserve  # one instance: its Filter and its Score
    fit = fw.scores[-1]
    assert isinstance(fit, NodeResourcesFit) and fit is fw.filters[3]
    assert fit.weight == 3
    assert (fit.single_strategy, fit.gang_strategy) == ("MostAllocated", "LeastAllocated")
    assert fit.resources == (("cpu", 2), ("nvidia.com/gpu", 5))
    assert [p.name for p in fw.pre_enqueue] == ["GangScheduling"]
    assert [p.name for p in fw.bind] == ["DefaultBinder"]


def test_star_disables_the_defaults_and_multipoint(tmp_path: Path) -> None:
    text = _doc(
        profiles=[
            {
                "plugins": {
                    "multiPoint": {"disabled": [{"name": "*"}]},
                    "filter": {"enabled": [{"name": "NodeResourcesFit"}]},
                    "bind": {"enabled": [{"name": "DefaultBinder"}]},
                }
            }
        ]
    )
    fw = load_config(_write(tmp_path, text)).framework
    assert [f.name for f in fw.filters] == ["NodeResourcesFit"]
    assert fw.scores == [] and fw.pre_enqueue == [] and fw.placement_feasible == []
    text = _doc(profiles=[{"plugins": {"multiPoint": {"enabled": [{"name": "GangScheduling"}]}}}])
    fw = load_config(_write(tmp_path, text)).framework
    assert [p.name for p in fw.placement_feasible] == ["GangScheduling"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"apiVersion": "v1"}, "apiVersion: expected kubescheduler.config.k8s.io/v1"),
        ({"kind": "Nope"}, "kind: expected KubeSchedulerConfiguration"),
        ({"parallelism": 16}, "parallelism: unknown field"),
        # several profiles are served now; each needs its name (kube-scheduler v1.37.2 says
        # the same: tests/controlplane/test_profiles_parity.py)
        ({"profiles": [{}, {}]}, "profiles[0].schedulerName: Required value"),
        (
            {"profiles": [{"plugins": {"filter": {"enabled": [{"name": "Nope"}]}}}]},
            "profiles[0].plugins.filter.enabled[0].name: unknown plugin 'Nope'",
        ),
        (
            {"profiles": [{"plugins": {"filter": {"enabled": [{"name": "DefaultBinder"}]}}}]},
            "profiles[0].plugins.filter.enabled[0].name: plugin 'DefaultBinder' does not "
            "implement the filter extension point",
        ),
        (
            {"profiles": [{"plugins": {"permit": {}}}]},
            "profiles[0].plugins.permit: unknown extension point",
        ),
        (
            {"profiles": [{"schedulerName": "x", "percentageOfNodesToScore": 50}]},
            "profiles[0].percentageOfNodesToScore: unknown field",
        ),
        (
            {
                "profiles": [
                    {
                        "pluginConfig": [
                            {
                                "name": "NodeResourcesFit",
                                "args": {"scoringStrategy": {"type": "Balanced"}},
                            }
                        ]
                    }
                ]
            },
            "profiles[0].pluginConfig[0].args.scoringStrategy.type: must be one of "
            "MostAllocated, LeastAllocated, not 'Balanced'",
        ),
        (
            {"profiles": [{"pluginConfig": [{"name": "NodeName", "args": {"x": 1}}]}]},
            "profiles[0].pluginConfig[0].args.x: unknown field",
        ),
        ({"clientConnection": {"qps": "fast"}}, "clientConnection.qps: expected a number"),
        ({"clientConnection": {"burst": -1}}, "clientConnection.burst: must be at least 0"),
        (
            {"leaderElection": {"leaseDuration": "soon"}},
            "leaderElection.leaseDuration: expected a duration like 15s",
        ),
        (
            {"leaderElection": {"leaseDuration": "5s"}},
            "leaderElection.leaseDuration: must be greater than renewDeadline",
        ),
        ({"podMaxBackoffSeconds": 0.5}, "podMaxBackoffSeconds: must be at least"),
    ],
)
def test_errors_name_the_field(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    path = _write(tmp_path, _doc(**change))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value).startswith(f"{path}: ")
    assert message in str(info.value)


def test_unreadable_and_invalid_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(_write(tmp_path, "a: [b"))
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_config(_write(tmp_path, "- 1\n"))


def test_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = _write(tmp_path, _doc(kind="Nope"))
    assert main(["scheduler", "--config", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {bad}: kind: expected KubeSchedulerConfiguration")
    assert "Traceback" not in err
    good = _write(tmp_path, GOOD)
    assert main(["scheduler", "--config", str(good), "--scheduler-name", "x"]) == 1
    assert "--scheduler-name cannot be combined with --config" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["scheduler", "--config"])
    assert info.value.code == 2


def test_cli_flags_override_leader_election(tmp_path: Path) -> None:
    import argparse

    from workloadbuilder.scheduler.cli import (
        _settings,  # the flag/file interplay, without a cluster
    )

    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    from workloadbuilder.scheduler.cli import register

    register(sub)
    good = str(_write(tmp_path, GOOD))
    args = parser.parse_args(
        ["scheduler", "--config", good, "--no-leader-elect", "--leader-elect-lease-name", "z"]
    )
    le = _settings(args).leader_election
    assert (le.leader_elect, le.resource_name, le.resource_namespace) == (False, "z", "sched")
    args = parser.parse_args(["scheduler", "--kube-api-qps", "5"])
    loaded = _settings(args)
    assert loaded.client_connection.qps == 5.0
    assert loaded.scheduler.scheduler_name == "workloadbuilder-scheduler"
    assert not loaded.leader_election.leader_elect


def test_topology_plugins_by_default_and_configurable(tmp_path: Path) -> None:
    from workloadbuilder.scheduler._plugins import TopologyPlacementGenerator, default_framework

    fw = default_framework()
    assert [p.name for p in fw.placement_generate] == ["TopologyPlacementGenerator"]
    assert [p.name for p in fw.placement_score] == ["PodGroupPodsCount", "NodeResourcesFit"]
    assert (fw.placement_seed, fw.composite_search) == (0, "bounded")
    text = _doc(
        profiles=[
            {
                "plugins": {
                    "placementScore": {
                        "disabled": [{"name": "PodGroupPodsCount"}],
                        "enabled": [{"name": "NodeResourcesFit", "weight": 4}],
                    }
                },
                "pluginConfig": [
                    {
                        "name": "TopologyPlacementGenerator",
                        "args": {
                            "tieBreakSeed": 7,
                            "compositeSearch": {
                                "mode": "greedy",
                                "budget": 9,
                                "deadlineSeconds": 0.5,
                            },
                        },
                    }
                ],
            }
        ]
    )
    fw = load_config(_write(tmp_path, text)).framework
    (gen,) = fw.placement_generate
    assert isinstance(gen, TopologyPlacementGenerator)
    (fit,) = fw.placement_score
    assert isinstance(fit, NodeResourcesFit)
    assert (fit.placement_weight, fit.weight) == (4, 1)  # the Score weight is its own
    assert (fw.placement_seed, fw.composite_search, fw.search_budget, fw.search_deadline) == (
        7,
        "greedy",
        9,
        0.5,
    )
    bad = _doc(
        profiles=[
            {
                "pluginConfig": [
                    {
                        "name": "TopologyPlacementGenerator",
                        "args": {"compositeSearch": {"mode": "exhaustive"}},
                    }
                ]
            }
        ]
    )
    with pytest.raises(ConfigError, match=r"compositeSearch\.mode: must be bounded or greedy"):
        load_config(_write(tmp_path, bad))


@pytest.mark.parametrize(
    ("argv", "file", "expected"),
    [
        (["--kube-api-qps", "300", "--kube-api-burst", "600"], None, (300.0, 600)),
        (["--kube-api-qps", "300"], None, (300.0, 100)),  # burst: upstream's default
        (["--kube-api-burst", "7"], None, (50.0, 7)),  # qps: upstream's default
        (["--kube-api-qps", "-1"], None, None),  # negative: no client-side limit
        ([], None, None),  # nothing set: no limit
        ([], GOOD, (20.0, 40)),  # clientConnection in --config
        (["--kube-api-qps", "999"], GOOD, (20.0, 40)),  # the flags do not count with --config
    ],
)
def test_client_rate_flags_reach_the_rate_limiter(
    tmp_path: Path, argv: list[str], file: str | None, expected: tuple[float, int] | None
) -> None:
    import argparse

    from workloadbuilder.cluster import MemoryCluster
    from workloadbuilder.runtime import RateLimitedCluster
    from workloadbuilder.scheduler.cli import _rate_limited, _settings, register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    extra = ["--config", str(_write(tmp_path, file))] if file else []
    args = parser.parse_args(["scheduler", *extra, *argv])
    inner = MemoryCluster()
    cluster = _rate_limited(inner, _settings(args))
    if expected is None:
        assert cluster is inner
    else:
        assert isinstance(cluster, RateLimitedCluster)
        assert (cluster.bucket.qps, cluster.bucket.burst) == expected


def test_the_gc_freeze_flag_reaches_the_scheduler_config(tmp_path: Path) -> None:
    import argparse

    from workloadbuilder.scheduler.cli import _settings, register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    good = str(_write(tmp_path, GOOD))
    for argv, want in (
        ([], True),  # on by default, with or without a file
        (["--config", good], True),
        (["--no-gc-freeze"], False),
        (["--config", good, "--no-gc-freeze"], False),
        (["--gc-freeze"], True),
    ):
        assert _settings(parser.parse_args(["scheduler", *argv])).scheduler.gc_freeze is want
