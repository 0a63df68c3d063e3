"""The DRA allocator on its own: hand-made ResourceSlices, DeviceClasses and ResourceClaims,
no scheduler, no cluster (the pure half of ``workloadbuilder.scheduler._dra``, as upstream's
``k8s.io/dynamic-resource-allocation/structured`` tests)."""

from __future__ import annotations

from typing import Any

from workloadbuilder.scheduler._dra._allocator import (
    Allocation,
    DeviceList,
    allocate_claim,
    allocation_selector,
)
from workloadbuilder.scheduler._dra._cel import Cel
from workloadbuilder.scheduler._dra._devices import Device, index_slices
from workloadbuilder.scheduler._dra._requests import ClaimSpec, parse_claim_spec

DRIVER = "gpu.example.com"
CLASSES: dict[str, dict[str, Any]] = {
    "gpu": {
        "metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }
}


def _slice(
    name: str,
    devices: list[dict[str, Any]],
    *,
    node: str | None = None,
    selector: dict[str, Any] | None = None,
    generation: int = 1,
    pool: str = "pool",
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "driver": DRIVER,
        "pool": {"name": pool, "generation": generation, "resourceSliceCount": 1},
        "devices": devices,
    }
    if node is not None:
        spec["nodeName"] = node
    elif selector is not None:
        spec["nodeSelector"] = selector
    else:
        spec["allNodes"] = True
    return {"metadata": {"name": name}, "spec": spec}


def _gpu(name: str, model: str = "H100", numa: int = 0, memory: str = "80Gi") -> dict[str, Any]:
    return {
        "name": name,
        "attributes": {"model": {"string": model}, "numa": {"int": numa}},
        "capacity": {"memory": {"value": memory}},
    }


def _claim(*requests: dict[str, Any], constraints: Any = ()) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = list(constraints)
    return {"metadata": {"name": "c", "namespace": "ns"}, "spec": {"devices": devices}}


def _request(name: str = "r", **exactly: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": "gpu", **exactly}}


def _spec(claim: dict[str, Any], cel: Cel) -> ClaimSpec:
    got = parse_claim_spec(claim, CLASSES, cel)
    assert isinstance(got, ClaimSpec), got
    return got


def _node(slices: list[dict[str, Any]], node: str = "a", **labels: str) -> list[Device]:
    index, _ = index_slices({s["metadata"]["name"]: s for s in slices}, {})
    return index.reachable(node, labels)


def _devices(got: Allocation | str) -> list[str]:
    assert isinstance(got, Allocation), got
    return [r["device"] for r in got.allocation["devices"]["results"]]


def test_a_claim_gets_the_first_free_devices_of_its_node_restricted_to_the_node() -> None:
    cel = Cel()
    devices = _node([_slice("a", [_gpu("g0"), _gpu("g1"), _gpu("g2")], node="a")])
    spec = _spec(_claim(_request(count=2)), cel)
    got = allocate_claim(spec, DeviceList(devices, in_use={(DRIVER, "pool", "g0")}, cel=cel), "a")
    assert _devices(got) == ["g1", "g2"]
    assert isinstance(got, Allocation)
    assert got.devices == ((DRIVER, "pool", "g1"), (DRIVER, "pool", "g2"))
    assert got.allocation["devices"]["results"][0] == {
        "request": "r",
        "driver": DRIVER,
        "pool": "pool",
        "device": "g1",
    }
    assert got.allocation["nodeSelector"] == {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]}]}
        ]
    }


def test_too_few_free_devices_say_how_many_are_free() -> None:
    cel = Cel()
    devices = _node([_slice("a", [_gpu("g0"), _gpu("g1")], node="a")])
    spec = _spec(_claim(_request(count=2)), cel)
    node = DeviceList(devices, in_use={(DRIVER, "pool", "g1")}, cel=cel)
    assert allocate_claim(spec, node, "a") == (
        "request 'r' (class gpu): 1 of 2 matching devices free, 2 needed"
    )
    # the devices another claim of the same pod took count as taken
    assert allocate_claim(spec, DeviceList(devices, cel=cel), "a", {(DRIVER, "pool", "g0")}) == (
        "request 'r' (class gpu): 1 of 2 matching devices free, 2 needed"
    )


def test_cel_selectors_of_the_request_over_attributes_and_capacity() -> None:
    cel = Cel()
    devices = _node(
        [
            _slice(
                "a",
                [_gpu("g0", "A100", memory="40Gi"), _gpu("g1", "H100"), _gpu("g2", "H100")],
                node="a",
            )
        ]
    )
    big = f'device.capacity["{DRIVER}"].memory.compareTo(quantity("64Gi")) >= 0'
    spec = _spec(_claim(_request(selectors=[{"cel": {"expression": big}}])), cel)
    assert _devices(allocate_claim(spec, DeviceList(devices, cel=cel), "a")) == ["g1"]
    a100 = f'device.attributes["{DRIVER}"].model == "B200"'
    spec = _spec(_claim(_request(selectors=[{"cel": {"expression": a100}}])), cel)
    assert allocate_claim(spec, DeviceList(devices, cel=cel), "a") == (
        f"request 'r': no device matches `{a100}`"
    )


def test_match_attribute_picks_devices_sharing_the_value() -> None:
    cel = Cel()
    devices = _node(
        [
            _slice(
                "a",
                [_gpu("g0", numa=0), _gpu("g1", numa=1), _gpu("g2", numa=1)],
                node="a",
            )
        ]
    )
    claim = _claim(
        _request("x"),
        _request("y"),
        constraints=[{"requests": ["x", "y"], "matchAttribute": f"{DRIVER}/numa"}],
    )
    got = allocate_claim(_spec(claim, cel), DeviceList(devices, cel=cel), "a")
    assert _devices(got) == ["g1", "g2"]  # numa 0 has one device only: backtracked to 1


def test_allocation_mode_all_needs_every_matching_device_free() -> None:
    cel = Cel()
    devices = _node([_slice("a", [_gpu("g0"), _gpu("g1")], node="a")])
    spec = _spec(_claim(_request(allocationMode="All")), cel)
    assert _devices(allocate_claim(spec, DeviceList(devices, cel=cel), "a")) == ["g0", "g1"]
    used = DeviceList(devices, in_use={(DRIVER, "pool", "g0")}, cel=cel)
    assert allocate_claim(spec, used, "a") == (
        "request 'r' (allocationMode All, class gpu): 1 of 2 matching devices free"
    )


def test_admin_access_takes_devices_in_use_without_holding_them() -> None:
    cel = Cel()
    devices = _node([_slice("a", [_gpu("g0")], node="a")])
    spec = _spec(_claim(_request(adminAccess=True)), cel)
    got = allocate_claim(spec, DeviceList(devices, in_use={(DRIVER, "pool", "g0")}, cel=cel), "a")
    assert isinstance(got, Allocation)
    assert got.allocation["devices"]["results"][0]["adminAccess"] is True
    assert got.devices == ()


def test_the_newest_pool_generation_and_how_nodes_reach_slices() -> None:
    zone = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}
        ]
    }
    slices = [
        _slice("old", [_gpu("stale")], node="a", generation=1),
        _slice("new", [_gpu("g0")], node="a", generation=2),
        _slice("zonal", [_gpu("z0")], selector=zone, pool="zonal"),
        _slice("shared", [_gpu("s0")], pool="shared"),
    ]
    assert [d.id[2] for d in _node(slices, "a", zone="z1")] == ["g0", "s0", "z0"]
    assert [d.id[2] for d in _node(slices, "b", zone="z2")] == ["s0"]
    cel = Cel()
    spec = _spec(_claim(_request("x"), _request("y")), cel)
    got = allocate_claim(spec, DeviceList(_node(slices[2:], "b", zone="z1"), cel=cel), "b")
    assert _devices(got) == ["s0", "z0"]
    assert isinstance(got, Allocation)
    assert got.allocation["nodeSelector"] == zone  # the slice's selector, not the node


def test_allocation_selector_merges_single_term_selectors() -> None:
    index, _ = index_slices(
        {
            "s1": _slice("s1", [_gpu("x")], pool="p1", selector=_terms("zone", "z1")),
            "s2": _slice("s2", [_gpu("y")], pool="p2", selector=_terms("rack", "r1")),
        },
        {},
    )
    devs = [(d, False) for d in index.selected]
    assert allocation_selector(devs, "n") == {
        "nodeSelectorTerms": [
            {
                "matchExpressions": [
                    {"key": "zone", "operator": "In", "values": ["z1"]},
                    {"key": "rack", "operator": "In", "values": ["r1"]},
                ]
            }
        ]
    }
    assert allocation_selector([], "n") is None


def _terms(key: str, value: str) -> dict[str, Any]:
    return {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}
        ]
    }


def test_unusable_devices_and_unsupported_claims() -> None:
    cel = Cel()
    tainted = {**_gpu("t0"), "taints": [{"key": "broken", "effect": "NoSchedule"}]}
    devices = _node([_slice("a", [tainted], node="a")])
    assert devices[0].unusable == "tainted"
    spec = _spec(_claim(_request()), cel)
    assert allocate_claim(spec, DeviceList(devices, cel=cel), "a") == (
        "request 'r': no device reachable from the node"
    )
    first = _claim({"name": "r", "firstAvailable": [{"name": "a", "deviceClassName": "gpu"}]})
    assert parse_claim_spec(first, CLASSES, cel) == (
        "claim 'c': request 'r': firstAvailable is unsupported"
    )
    missing = _claim({"name": "r", "exactly": {"deviceClassName": "tpu"}})
    assert parse_claim_spec(missing, CLASSES, cel) == (
        "request 'r': device class \"tpu\" does not exist"
    )
