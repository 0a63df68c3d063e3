"""Scenario parsing, the simulation annotations and NodePool expansion."""

from __future__ import annotations

import pytest
from sim_helpers import gang, nodes, scenario

from workloadbuilder.simulator import (
    ScenarioError,
    expand_node_pool,
    format_duration,
    parse_duration,
    parse_quantity,
    parse_scenario,
)


def test_objects_in_document_order_with_defaults() -> None:
    sc = parse_scenario(scenario(nodes(2), gang("g", 2, "1", arrival="1m30s", duration="2m")))
    assert [o.key for o in sc.objects] == [
        "Node n-0",
        "Node n-1",
        "PodGroup default/g",
        "Pod default/g-0",
        "Pod default/g-1",
    ]
    pg = sc.objects[2]
    assert (pg.document, pg.arrival, pg.duration) == (2, 90.0, 120.0)
    assert sc.objects[0].arrival == 0.0 and sc.objects[0].duration is None
    assert sc.objects[0].pool == "n" and sc.objects[0].document == 1
    assert pg.manifest["metadata"]["namespace"] == "default"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0s", 0.0),
        ("30s", 30.0),
        ("2m", 120.0),
        ("1h30m", 5400.0),
        ("1.5h", 5400.0),
        ("250ms", 0.25),
        ("45", 45.0),
        (12, 12.0),
        ("1m0.5s", 60.5),
    ],
)
def test_parse_duration(text: object, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "3x", "-5s", "1m-", "abc", "1 m", True, None, [1]])
def test_parse_duration_rejects(text: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (45, "45s"),
        (1.5, "1.5s"),
        (150, "2m30s"),
        (3600, "1h"),
        (3900, "1h5m"),
        (None, "-"),
    ],
)
def test_format_duration(seconds: float | None, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", 0.5),
        ("2", 2.0),
        ("1Gi", 2.0**30),
        ("1k", 1000.0),
        ("1e3", 1000.0),
        (8, 8.0),
        ("0.5", 0.5),
        ("64Mi", 64 * 2.0**20),
    ],
)
def test_parse_quantity(text: object, value: float) -> None:
    assert parse_quantity(text) == pytest.approx(value)


def test_node_pool_racks_inside_blocks() -> None:
    doc = {
        "apiVersion": "sim.workloadbuilder.io/v1alpha1",
        "kind": "NodePool",
        "metadata": {"name": "gpu"},
        "spec": {
            "count": 64,
            "labels": {"tier": "gpu"},
            "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
            "allocatable": {"cpu": "96", "nvidia.com/gpu": "8"},
            "topology": [
                {"key": "example.com/block", "size": 32},
                {"key": "example.com/rack", "size": 8},
            ],
        },
    }
    out = expand_node_pool(doc)
    assert len(out) == 64
    assert out[0]["metadata"]["name"] == "gpu-00" and out[63]["metadata"]["name"] == "gpu-63"
    for i, node in enumerate(out):
        labels = node["metadata"]["labels"]
        assert labels["example.com/rack"] == f"gpu-rack-{i // 8}"
        assert labels["example.com/block"] == f"gpu-block-{i // 32}"
        assert labels["tier"] == "gpu"
        assert labels["kubernetes.io/hostname"] == node["metadata"]["name"]
        assert node["spec"]["taints"] == [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
        assert node["status"]["allocatable"] == node["status"]["capacity"]
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
        assert node["status"]["allocatable"]["pods"] == "110"
    # every rack lies inside one block
    racks: dict[str, set[str]] = {}
    for node in out:
        labels = node["metadata"]["labels"]
        racks.setdefault(labels["example.com/rack"], set()).add(labels["example.com/block"])
    assert len(racks) == 8 and all(len(b) == 1 for b in racks.values())


def test_node_pool_name_prefix_and_topology_keys() -> None:
    sc = parse_scenario(
        scenario(nodes(3, name="cpu", namePrefix="worker-", topology=[{"key": "zone", "size": 2}]))
    )
    assert [o.name for o in sc.nodes] == ["worker-0", "worker-1", "worker-2"]
    assert [o.manifest["metadata"]["labels"]["zone"] for o in sc.nodes] == [
        "cpu-zone-0",
        "cpu-zone-0",
        "cpu-zone-1",
    ]
    assert sc.topology_keys == ("zone",)


def _error(text: str) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, source="s.yaml")
    return info.value


def test_error_names_document_and_field_path() -> None:
    bad = gang("g", 1, "1", arrival="3x")
    err = _error(scenario(nodes(1), bad))
    assert err.document == 2
    assert err.path == "metadata.annotations[sim.workloadbuilder.io/arrival]"
    assert str(err).startswith("s.yaml document 2: PodGroup default/g: metadata.annotations[")
    assert '"3x"' in str(err)


@pytest.mark.parametrize(
    ("doc", "path", "words"),
    [
        ("apiVersion: v1\nkind: Pod\nmetadata: {}\nspec: {}\n", "metadata.name", "Required"),
        ("kind: Pod\nmetadata: {name: a}\n", "apiVersion", "Required"),
        ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\n", "kind", "Unsupported"),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: []}\n",
            "spec.containers",
            "Required",
        ),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers:\n"
            "  - {name: c, resources: {requests: {cpu: lots}}}\n",
            "spec.containers[0].resources.requests[cpu]",
            "lots",
        ),
        (
            "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {name: g}\n"
            "spec: {schedulingPolicy: {gang: {}}}\n",
            "spec.schedulingPolicy.gang.minCount",
            "Required",
        ),
        (
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  annotations:\n"
            "    sim.workloadbuilder.io/duration: 5\nspec: {containers: [{name: c}]}\n",
            "metadata.annotations[sim.workloadbuilder.io/duration]",
            "quote",
        ),
        (
            "apiVersion: sim.workloadbuilder.io/v1alpha1\nkind: NodePool\nmetadata: {name: p}\n"
            "spec: {allocatable: {cpu: '1'}}\n",
            "spec.count",
            "Required",
        ),
        (
            "apiVersion: sim.workloadbuilder.io/v1alpha1\nkind: NodePool\nmetadata: {name: p}\n"
            "spec: {count: 2, allocatable: {cpu: '1'}, topology: [{key: r, size: 0}]}\n",
            "spec.topology[0].size",
            "greater than or equal to 1",
        ),
        (
            "apiVersion: sim.workloadbuilder.io/v1alpha1\nkind: NodePool\nmetadata: {name: p}\n"
            "spec: {count: 2, allocatable: {cpu: '1'}, taints: [{key: a, effect: Nope}]}\n",
            "spec.taints[0].effect",
            "Unsupported",
        ),
        (
            "apiVersion: sim.workloadbuilder.io/v1alpha1\nkind: NodePool\nmetadata: {name: p}\n"
            "spec: {count: 2}\n",
            "spec.allocatable",
            "Required",
        ),
        (
            "apiVersion: sim.workloadbuilder.io/v1alpha1\nkind: NodeGroup\nmetadata: {name: p}\n",
            "kind",
            "NodePool",
        ),
        (
            "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  parallelism: -1\n"
            "  template: {spec: {containers: [{name: c}]}}\n",
            "spec.parallelism",
            "-1",
        ),
    ],
)
def test_bad_documents(doc: str, path: str, words: str) -> None:
    err = _error(scenario(nodes(1), doc))
    assert err.document == 2
    assert err.path == path
    assert words in str(err)


def test_not_a_mapping_and_invalid_yaml() -> None:
    err = _error("- just\n- a list\n")
    assert err.document == 1 and "mapping" in str(err)
    err = _error("apiVersion: v1\nkind: [\n")
    assert err.document is None and "line" in str(err)


def test_duplicate_objects_are_rejected() -> None:
    text = scenario(nodes(2), nodes(1, namePrefix="n-"))
    err = _error(text)
    assert err.document == 2 and "Duplicate" in str(err) and "document 1" in str(err)


def test_cluster_scoped_objects_have_no_namespace() -> None:
    text = scenario(
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: high}\n"
        "value: 1000\n",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: team}\n"
        "spec: {containers: [{name: c}]}\n",
    )
    sc = parse_scenario(text)
    assert sc.objects[0].namespace is None and sc.objects[0].key == "PriorityClass high"
    assert sc.objects[1].namespace == "team"


def test_bad_duration_in_a_pod_template_names_the_template_path() -> None:
    text = scenario(
        nodes(1),
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  template:\n"
        "    metadata: {annotations: {sim.workloadbuilder.io/duration: forever}}\n"
        "    spec: {containers: [{name: c}]}\n",
    )
    err = _error(text)
    assert err.document == 2
    assert err.path == "spec.template.metadata.annotations[sim.workloadbuilder.io/duration]"
