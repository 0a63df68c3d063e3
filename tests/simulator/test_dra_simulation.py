"""DRA in the simulator: the NodePool ``devices`` shorthand, scenarios with DeviceClasses,
ResourceSlices and claim templates, and the JSON report's ``resourceClaims``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from workloadbuilder.cli import main
from workloadbuilder.simulator import parse_scenario

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "simulations"


def simulate(path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["simulate", str(path), "-o", "json"]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert data["invariantViolations"] == []
    return data


def test_gpu_dra_gangs_example(capsys: pytest.CaptureFixture[str]) -> None:
    data = simulate(EXAMPLES / "gpu-dra-gangs.yaml", capsys)
    groups = {g["owner"]: g for g in data["podGroups"]}
    a, b, c = groups["Job/train-a"], groups["Job/train-b"], groups["Job/train-c"]
    assert a["scheduledAt"] == 0.0 and b["scheduledAt"] == 10.0
    racks = {
        g: {n.split("-")[0] for n in groups[g]["nodes"]} for g in ("Job/train-a", "Job/train-b")
    }
    assert racks["Job/train-a"] in ({"r1"}, {"r2"}) and racks["Job/train-b"] in ({"r1"}, {"r2"})
    assert racks["Job/train-a"] != racks["Job/train-b"]
    assert c["scheduledAt"] == 300.0  # when train-a finished and released its GPUs
    claims = data["resourceClaims"]
    fabric = [x for x in claims if x["owner"].startswith("PodGroup/")]
    assert len(fabric) == 2  # one per gang, not one per pod
    for x in fabric:
        assert x["allocated"] and len(x["devices"]) == 1
        assert x["devices"][0]["driver"] == "fabric.example.com"
        assert x["reservedFor"] == [{"resource": "podgroups", "name": x["owner"].split("/")[1]}]
        rack = x["devices"][0]["pool"].removeprefix("fabric-")
        expr = x["nodeSelector"]["nodeSelectorTerms"][0]["matchExpressions"][0]
        assert expr["values"] == [rack]
    per_pod = [x for x in claims if x["owner"].startswith("Pod/")]
    assert len(per_pod) == 10 and all(x["allocated"] for x in per_pod)
    devices = [(d["pool"], d["device"]) for x in per_pod for d in x["devices"]]
    # train-a's GPUs are reused by train-c after train-a finished; at any time each once
    assert len(devices) == 4 * 8 + 4 * 8 + 2 * 4


def test_node_pool_devices_shorthand() -> None:
    scenario = parse_scenario(
        """
apiVersion: sim.workloadbuilder.io/v1alpha1
kind: NodePool
metadata: {name: p}
spec:
  count: 2
  allocatable: {cpu: "8"}
  devices:
  - driver: gpu.example.com
    count: 2
    attributes: {model: H100, numa: 1, fast: true}
    capacity: {memory: 80Gi}
  - {driver: nic.example.com, count: 1}
"""
    )
    slices = [o.manifest for o in scenario.objects if o.kind == "ResourceSlice"]
    assert [s["metadata"]["name"] for s in slices] == [
        "p-0-gpu.example.com",
        "p-0-nic.example.com",
        "p-1-gpu.example.com",
        "p-1-nic.example.com",
    ]
    first = slices[0]["spec"]
    assert first["nodeName"] == "p-0" and first["pool"]["name"] == "p-0"
    assert [d["name"] for d in first["devices"]] == ["gpu-0", "gpu-1"]
    assert first["devices"][0]["attributes"] == {
        "model": {"string": "H100"},
        "numa": {"int": 1},
        "fast": {"bool": True},
    }
    assert first["devices"][0]["capacity"] == {"memory": {"value": "80Gi"}}
    assert len(scenario.nodes) == 2


@pytest.mark.parametrize(
    ("devices", "path"),
    [
        ("[{count: 2}]", "spec.devices[0].driver: Required value"),
        ("[{driver: d, count: 0}]", "spec.devices[0].count: Invalid value"),
        (
            "[{driver: d, count: 1, colour: red}]",
            'spec.devices[0].colour: Unsupported value: "colour"',
        ),
        ("[{driver: d, count: 1, capacity: {memory: lots}}]", "spec.devices[0].capacity[memory]"),
        ("{driver: d}", "spec.devices: Invalid value: must be a list"),
    ],
)
def test_device_shorthand_errors_name_the_field(devices: str, path: str) -> None:
    from workloadbuilder.simulator import ScenarioError

    text = f"""
apiVersion: sim.workloadbuilder.io/v1alpha1
kind: NodePool
metadata: {{name: p}}
spec:
  count: 1
  allocatable: {{cpu: "8"}}
  devices: {devices}
"""
    with pytest.raises(ScenarioError) as err:
        parse_scenario(text)
    assert path in str(err.value)
    assert "document 1: NodePool p" in str(err.value)


def test_resource_kinds_are_checked_by_the_codec() -> None:
    from workloadbuilder.simulator import ScenarioError

    with pytest.raises(ScenarioError) as err:
        parse_scenario(
            """
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s}
spec: {driver: d, pool: {name: p}, devices: {}}
"""
        )
    assert "spec.devices" in str(err.value)


def test_partitionable_devices_shorthand() -> None:
    scenario = parse_scenario(
        """
apiVersion: sim.workloadbuilder.io/v1alpha1
kind: NodePool
metadata: {name: p}
spec:
  count: 1
  allocatable: {cpu: "8"}
  devices:
  - driver: gpu.example.com
    count: 2
    attributes: {model: H100}
    partitions: {slices: 7, memory: 40Gi}
"""
    )
    slices = {
        o.manifest["metadata"]["name"]: o.manifest
        for o in scenario.objects
        if o.kind == "ResourceSlice"
    }
    assert sorted(slices) == ["p-0-gpu.example.com", "p-0-gpu.example.com-counters"]
    counters = slices["p-0-gpu.example.com-counters"]["spec"]
    assert counters["pool"] == {"name": "p-0", "generation": 1, "resourceSliceCount": 2}
    assert counters["sharedCounters"][0] == {
        "name": "gpu-0",
        "counters": {"slices": {"value": "7"}, "memory": {"value": "40Gi"}},
    }
    devices = slices["p-0-gpu.example.com"]["spec"]["devices"]
    assert len(devices) == 2 * 8
    whole, part = devices[0], devices[1]
    assert whole["name"] == "gpu-0" and part["name"] == "gpu-0-s0"
    assert whole["attributes"] == {"model": {"string": "H100"}, "partition": {"string": "whole"}}
    assert part["consumesCounters"] == [
        {
            "counterSet": "gpu-0",
            "counters": {"slices": {"value": "1"}, "memory": {"value": str(40 * 2**30 // 7)}},
        }
    ]
    with pytest.raises(Exception, match="at most 8 partitionable devices"):
        parse_scenario(
            """
apiVersion: sim.workloadbuilder.io/v1alpha1
kind: NodePool
metadata: {name: p}
spec:
  count: 1
  allocatable: {cpu: "8"}
  devices:
  - {driver: gpu.example.com, count: 9, partitions: {slices: 7, memory: 40Gi}}
"""
        )


def test_gangs_share_the_partitions_of_one_gpu(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # one GPU of 7 slices: a gang of 3 pods taking two slices each fits on it; a pod asking
    # for the whole GPU (else... nothing smaller) waits until the gang finishes
    def template(name: str, requests: str) -> str:
        return f"""
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {{name: {name}}}
spec:
  spec:
    devices:
      requests: {requests}
"""

    def job(name: str, pods: int, template: str, arrival: str) -> str:
        return f"""
apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  annotations: {{sim.workloadbuilder.io/arrival: {arrival}, sim.workloadbuilder.io/duration: 1m}}
spec:
  parallelism: {pods}
  completions: {pods}
  completionMode: Indexed
  scheduling: {{schedulingPolicy: {{gang: {{}}}}}}
  template:
    spec:
      restartPolicy: Never
      resourceClaims: [{{name: gpu, resourceClaimTemplateName: {template}}}]
      containers:
      - name: main
        image: registry.k8s.io/pause:3.10
        resources: {{requests: {{cpu: "1"}}, claims: [{{name: gpu}}]}}
"""

    def sel(value: str) -> list[dict[str, Any]]:
        expr = f'device.attributes["gpu.example.com"].partition == "{value}"'
        return [{"cel": {"expression": expr}}]

    first = [
        {
            "name": "gpu",
            "firstAvailable": [
                {"name": "whole", "deviceClassName": "gpu", "selectors": sel("none")},
                {"name": "two", "deviceClassName": "gpu", "count": 2, "selectors": sel("slice")},
            ],
        }
    ]
    whole = [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "selectors": sel("whole")}}]
    docs = [
        """
apiVersion: sim.workloadbuilder.io/v1alpha1
kind: NodePool
metadata: {name: p}
spec:
  count: 1
  allocatable: {cpu: "16", memory: 64Gi}
  devices:
  - {driver: gpu.example.com, count: 1, partitions: {slices: 7, memory: 40Gi}}
""",
        """
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec:
  selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]
""",
        template("two-slices", json.dumps(first)),
        template("whole", json.dumps(whole)),
        job("slices", 3, "two-slices", "0s"),
        job("whole", 1, "whole", "10s"),
    ]
    path = tmp_path / "partitions.yaml"
    path.write_text("---".join(docs))
    data = simulate(path, capsys)
    groups = {g["owner"]: g for g in data["podGroups"]}
    assert groups["Job/slices"]["scheduledAt"] == 0.0
    assert groups["Job/whole"]["scheduledAt"] == 60.0  # when the slices were given back
    got = [
        d["device"] for x in data["resourceClaims"] if "slices" in x["owner"] for d in x["devices"]
    ]
    assert sorted(got) == [f"gpu-0-s{k}" for k in range(6)]
