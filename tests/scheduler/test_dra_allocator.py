"""The DRA allocator on its own: hand-made ResourceSlices, DeviceClasses and ResourceClaims,
no scheduler, no cluster (the pure half of ``workloadbuilder.scheduler._dra``, as upstream's
``k8s.io/dynamic-resource-allocation/structured`` tests)."""

from __future__ import annotations

from typing import Any

from workloadbuilder.scheduler._dra._allocator import (
    Allocation,
    DeviceList,
    allocate_claim,
    allocate_claims,
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
    bound = {**_gpu("b0"), "bindingConditions": ["attached"]}
    devices = _node([_slice("a", [bound], node="a")])
    assert devices[0].unusable == "needs binding conditions (not supported)"
    spec = _spec(_claim(_request()), cel)
    assert allocate_claim(spec, DeviceList(devices, cel=cel), "a") == (
        "request 'r': no device reachable from the node"
    )
    distinct = _claim(_request(), constraints=[{"distinctAttribute": f"{DRIVER}/numa"}])
    assert parse_claim_spec(distinct, CLASSES, cel) == (
        "claim 'c': distinctAttribute constraints are unsupported"
    )
    capacity = _claim(_request(capacity={"requests": {"memory": "1Gi"}}))
    assert parse_claim_spec(capacity, CLASSES, cel) == (
        "claim 'c': request 'r': capacity unsupported"
    )
    neither = _claim({"name": "r"})
    assert parse_claim_spec(neither, CLASSES, cel) == (
        "claim 'c': request 'r': needs exactly or firstAvailable"
    )
    missing = _claim({"name": "r", "exactly": {"deviceClassName": "tpu"}})
    assert parse_claim_spec(missing, CLASSES, cel) == (
        "request 'r': device class \"tpu\" does not exist"
    )


# ---- prioritized list (firstAvailable) ------------------------------------------------


def _mem(gi: int) -> dict[str, Any]:
    return {
        "cel": {
            "expression": f'device.capacity["{DRIVER}"].memory.compareTo(quantity("{gi}Gi")) >= 0'
        }
    }


def _first(name: str, *subs: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "firstAvailable": list(subs)}


def _sub(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "deviceClassName": "gpu", **fields}


def test_first_available_takes_the_first_alternative_that_fits() -> None:
    cel = Cel()
    devices = _node([_slice("a", [_gpu("g0"), _gpu("g1")], node="a")])
    claim = _claim(_first("r", _sub("four", count=4), _sub("two", count=2), _sub("one")))
    got = allocate_claim(_spec(claim, cel), DeviceList(devices, cel=cel), "a")
    assert isinstance(got, Allocation)
    assert [r["request"] for r in got.allocation["devices"]["results"]] == ["r/two", "r/two"]
    # the first alternative wins when it fits
    claim = _claim(_first("r", _sub("one"), _sub("two", count=2)))
    got = allocate_claim(_spec(claim, cel), DeviceList(devices, cel=cel), "a")
    assert isinstance(got, Allocation)
    assert got.allocation["devices"]["results"] == [
        {"request": "r/one", "driver": DRIVER, "pool": "pool", "device": "g0"}
    ]


def test_first_available_when_no_alternative_fits_names_each() -> None:
    cel = Cel()
    devices = _node([_slice("a", [_gpu("g0")], node="a")])
    claim = _claim(_first("r", _sub("three", count=3), _sub("two", count=2)))
    assert allocate_claim(_spec(claim, cel), DeviceList(devices, cel=cel), "a") == (
        "request 'r': no alternative can be allocated: "
        "request 'r/three' (class gpu): 1 of 1 matching devices free, 3 needed; "
        "request 'r/two' (class gpu): 1 of 1 matching devices free, 2 needed"
    )


def test_first_available_backtracks_when_a_later_request_needs_the_device() -> None:
    # upstream's prioritized-list-with-backtracking: the first alternative takes the only
    # 8Gi device the next request needs; the second alternative leaves it to it
    cel = Cel()
    devices = _node([_slice("a", [_gpu("big", memory="8Gi"), _gpu("small", memory="4Gi")])])
    claim = _claim(
        _first("r0", _sub("a", selectors=[_mem(8)]), _sub("b", selectors=[_mem(4)])),
        _request("r1", selectors=[_mem(8)]),
    )
    got = allocate_claim(_spec(claim, cel), DeviceList(devices, cel=cel), "a")
    assert isinstance(got, Allocation)
    assert [(r["request"], r["device"]) for r in got.allocation["devices"]["results"]] == [
        ("r0/b", "small"),
        ("r1", "big"),
    ]


def test_match_attribute_constraints_name_the_parent_or_the_alternative() -> None:
    # upstream's prioritized-list-subrequests-with-constraints-ref-parent-request
    cel = Cel()
    devices = _node(
        [
            _slice("a", [_gpu("g0", memory="8Gi", numa=1)], node="a"),
            _slice(
                "b",
                [_gpu("g1", memory="2Gi", numa=2), _gpu("g2", memory="1Gi", numa=1)],
                node="a",
                pool="p2",
            ),
        ]
    )
    for names in (["r0", "r1"], ["r0", "r1/small"]):
        claim = _claim(
            _request("r0", selectors=[_mem(8)]),
            _first("r1", _sub("mid", selectors=[_mem(2)]), _sub("small", selectors=[_mem(1)])),
            constraints=[{"requests": names, "matchAttribute": f"{DRIVER}/numa"}],
        )
        got = allocate_claim(_spec(claim, cel), DeviceList(devices, cel=cel), "a")
        assert isinstance(got, Allocation), names
        pairs = [(r["request"], r["device"]) for r in got.allocation["devices"]["results"]]
        if names == ["r0", "r1"]:
            assert pairs == [("r0", "g0"), ("r1/small", "g2")]
        else:  # the constraint covers r1/small only: r1/mid is free to take g1
            assert pairs == [("r0", "g0"), ("r1/mid", "g1")]


def test_class_config_follows_the_chosen_alternative() -> None:
    # upstream's prioritized-list-class-config: the config of the chosen alternative's
    # class, naming no request when it covers them all
    cel = Cel()
    classes = {
        **CLASSES,
        "tpu": {
            "metadata": {"name": "tpu"},
            "spec": {
                "selectors": [{"cel": {"expression": 'device.driver == "tpu.example.com"'}}],
                "config": [{"opaque": {"driver": "tpu.example.com", "parameters": {"a": 1}}}],
            },
        },
    }
    claim = _claim(_first("r", _sub("t", deviceClassName="tpu"), _sub("g")))
    spec = parse_claim_spec(claim, classes, cel)
    assert isinstance(spec, ClaimSpec)
    devices = _node([_slice("a", [_gpu("g0")], node="a")])
    got = allocate_claim(spec, DeviceList(devices, cel=cel), "a")
    assert isinstance(got, Allocation)
    assert "config" not in got.allocation["devices"]
    tpu = {**_slice("t", [{"name": "t0"}], node="a", pool="tp")}
    tpu["spec"]["driver"] = "tpu.example.com"
    got = allocate_claim(spec, DeviceList(_node([tpu]), cel=cel), "a")
    assert isinstance(got, Allocation)
    assert got.allocation["devices"]["config"] == [
        {"source": "FromClass", "opaque": {"driver": "tpu.example.com", "parameters": {"a": 1}}}
    ]


# ---- partitionable devices (sharedCounters / consumesCounters) ------------------------


def _counter_slice(
    name: str, sets: dict[str, dict[str, str]], *, node: str = "a"
) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "driver": DRIVER,
            "pool": {"name": "pool", "generation": 1, "resourceSliceCount": 2},
            "nodeName": node,
            "sharedCounters": [
                {"name": cs, "counters": {c: {"value": v} for c, v in counters.items()}}
                for cs, counters in sets.items()
            ],
        },
    }


def _partition(name: str, counter_set: str = "gpu-0", **counters: str) -> dict[str, Any]:
    return {
        "name": name,
        "consumesCounters": [
            {"counterSet": counter_set, "counters": {c: {"value": v} for c, v in counters.items()}}
        ],
    }


def _partitioned(*devices: dict[str, Any], **sets: dict[str, str]) -> list[dict[str, Any]]:
    devs = _slice("a", list(devices), node="a")
    devs["spec"]["pool"]["resourceSliceCount"] = 2
    return [devs, _counter_slice("counters", sets or {"gpu-0": {"memory": "40Gi", "slices": "7"}})]


def test_a_partition_is_allocatable_only_while_its_counters_last() -> None:
    cel = Cel()
    slices = _partitioned(
        _partition("whole", memory="40Gi", slices="7"),
        _partition("half-0", memory="20Gi", slices="3"),
        _partition("half-1", memory="20Gi", slices="3"),
    )
    devices = _node(slices)
    one = _spec(_claim(_request()), cel)
    # nothing in use: the first device (the whole GPU) fits
    assert _devices(allocate_claim(one, DeviceList(devices, cel=cel), "a")) == ["whole"]
    # the whole GPU in use: no half fits, though both are free
    used = DeviceList(devices, in_use={(DRIVER, "pool", "whole")}, cel=cel)
    assert allocate_claim(one, used, "a") == (
        "request 'r' (class gpu): 2 of 3 matching devices free, 1 needed; "
        "2 lack counters (gpu-0/memory used up)"
    )
    # one half in use: the other half fits, the whole GPU does not
    used = DeviceList(devices, in_use={(DRIVER, "pool", "half-0")}, cel=cel)
    assert _devices(allocate_claim(one, used, "a")) == ["half-1"]
    # two devices in one claim never overlap: the two halves
    two = _spec(_claim(_request(count=2)), cel)
    assert _devices(allocate_claim(two, DeviceList(devices, cel=cel), "a")) == [
        "half-0",
        "half-1",
    ]


def test_partitions_taken_by_the_pods_other_claims_consume_counters() -> None:
    cel = Cel()
    devices = _node(
        _partitioned(
            _partition("whole", memory="40Gi", slices="7"),
            _partition("half-0", memory="20Gi", slices="3"),
        )
    )
    spec = _spec(_claim(_request()), cel)
    got = allocate_claim(spec, DeviceList(devices, cel=cel), "a", {(DRIVER, "pool", "half-0")})
    assert isinstance(got, str) and "lack counters" in got


def test_a_counter_set_limits_each_counter_and_counter_sets_are_separate() -> None:
    cel = Cel()
    devices = _node(
        _partitioned(
            _partition("a-0", "gpu-0", memory="30Gi", slices="1"),
            _partition("a-1", "gpu-0", memory="30Gi", slices="1"),
            _partition("b-0", "gpu-1", memory="30Gi", slices="1"),
            **{
                "gpu-0": {"memory": "40Gi", "slices": "7"},
                "gpu-1": {"memory": "40Gi", "slices": "7"},
            },
        )
    )
    two = _spec(_claim(_request(count=2)), cel)
    # a-0 and a-1 overdraw gpu-0's memory: the search backs off to a-0 and b-0
    assert _devices(allocate_claim(two, DeviceList(devices, cel=cel), "a")) == ["a-0", "b-0"]
    three = _spec(_claim(_request(count=3)), cel)
    assert isinstance(allocate_claim(three, DeviceList(devices, cel=cel), "a"), str)


def test_first_available_falls_back_to_partitions_when_the_whole_gpu_is_gone() -> None:
    cel = Cel()
    devices = _node(
        _partitioned(
            {
                **_partition("whole", memory="40Gi", slices="7"),
                "attributes": {"kind": {"string": "full"}},
            },
            {
                **_partition("s-0", memory="5Gi", slices="1"),
                "attributes": {"kind": {"string": "slice"}},
            },
            {
                **_partition("s-1", memory="5Gi", slices="1"),
                "attributes": {"kind": {"string": "slice"}},
            },
            {
                **_partition("s-2", memory="5Gi", slices="1"),
                "attributes": {"kind": {"string": "slice"}},
            },
        )
    )
    kind = 'device.attributes["{d}"].kind == "{k}"'
    claim = _claim(
        _first(
            "gpu",
            _sub("full", selectors=[{"cel": {"expression": kind.format(d=DRIVER, k="full")}}]),
            _sub(
                "slices",
                count=2,
                selectors=[{"cel": {"expression": kind.format(d=DRIVER, k="slice")}}],
            ),
        )
    )
    spec = _spec(claim, cel)
    got = allocate_claim(spec, DeviceList(devices, cel=cel), "a")
    assert isinstance(got, Allocation)
    assert [r["request"] for r in got.allocation["devices"]["results"]] == ["gpu/full"]
    # a slice in use: the whole GPU no longer fits, two other slices do
    used = DeviceList(devices, in_use={(DRIVER, "pool", "s-0")}, cel=cel)
    got = allocate_claim(spec, used, "a")
    assert isinstance(got, Allocation)
    assert [(r["request"], r["device"]) for r in got.allocation["devices"]["results"]] == [
        ("gpu/slices", "s-1"),
        ("gpu/slices", "s-2"),
    ]


def test_pools_that_are_incomplete_or_name_unknown_counters_are_not_used() -> None:
    incomplete = _partitioned(_partition("p", memory="1Gi"))[:1]
    assert _node(incomplete)[0].unusable == "pool 'pool' is incomplete (1 of 2 slices)"
    unknown = _node(_partitioned(_partition("p", "gpu-9", memory="1Gi")))
    assert unknown[0].unusable == "pool 'pool' has no counter set 'gpu-9'"
    missing = _node(_partitioned(_partition("p", "gpu-0", power="1")))
    assert missing[0].unusable == "pool 'pool' has no counter 'power' in counter set 'gpu-0'"


# ---- device taints and tolerations ----------------------------------------------------


def _tainted(name: str, *taints: tuple[str, str, str]) -> dict[str, Any]:
    return {
        **_gpu(name),
        "taints": [
            {"key": k, "value": v, "effect": e} if v else {"key": k, "effect": e}
            for k, v, e in taints
        ],
    }


def test_tainted_devices_are_skipped_unless_the_request_tolerates_them() -> None:
    cel = Cel()
    devices = _node(
        [_slice("a", [_tainted("t0", ("broken", "", "NoSchedule")), _gpu("g1")], node="a")]
    )
    spec = _spec(_claim(_request()), cel)
    assert _devices(allocate_claim(spec, DeviceList(devices, cel=cel), "a")) == ["g1"]
    two = _spec(_claim(_request(count=2)), cel)
    assert allocate_claim(two, DeviceList(devices, cel=cel), "a") == (
        "request 'r' (class gpu): 1 of 2 matching devices free, 2 needed; "
        "1 tainted (device 't0': broken:NoSchedule not tolerated)"
    )
    tolerant = _spec(
        _claim(_request(count=2, tolerations=[{"key": "broken", "operator": "Exists"}])), cel
    )
    assert _devices(allocate_claim(tolerant, DeviceList(devices, cel=cel), "a")) == ["t0", "g1"]


def test_toleration_matching_effects_values_and_operators() -> None:
    # upstream's tainted-* cases: NoExecute blocks too, an unknown effect (None) does not,
    # every taint of a device must be tolerated, Equal compares the value
    cel = Cel()
    both = _tainted("t", ("a", "1", "NoSchedule"), ("b", "", "NoExecute"))
    devices = _node([_slice("a", [both], node="a")])

    def fits(*tolerations: dict[str, Any]) -> bool:
        spec = _spec(_claim(_request(tolerations=list(tolerations))), cel)
        return isinstance(allocate_claim(spec, DeviceList(devices, cel=cel), "a"), Allocation)

    assert not fits()
    assert not fits({"key": "a", "operator": "Exists"})
    assert fits({"key": "a", "value": "1"}, {"key": "b", "operator": "Exists"})
    assert not fits({"key": "a", "value": "2"}, {"key": "b", "operator": "Exists"})
    assert fits({"operator": "Exists"})  # no key: every taint
    assert not fits({"operator": "Exists", "effect": "NoSchedule"})
    none = _node([_slice("a", [_tainted("n", ("x", "", "None"))], node="a")])
    spec = _spec(_claim(_request()), cel)
    assert _devices(allocate_claim(spec, DeviceList(none, cel=cel), "a")) == ["n"]


def test_admin_access_and_all_mode_do_not_bypass_taints() -> None:
    cel = Cel()
    devices = _node(
        [_slice("a", [_tainted("t0", ("broken", "", "NoSchedule")), _gpu("g1")], node="a")]
    )
    admin = _spec(_claim(_request(adminAccess=True, count=2)), cel)
    assert isinstance(allocate_claim(admin, DeviceList(devices, cel=cel), "a"), str)
    every = _spec(_claim(_request(allocationMode="All")), cel)
    assert allocate_claim(every, DeviceList(devices, cel=cel), "a") == (
        "request 'r' (allocationMode All, class gpu): 1 of 2 matching devices free; "
        "1 tainted (device 't0': broken:NoSchedule not tolerated)"
    )


def test_first_available_passes_over_an_alternative_whose_devices_are_tainted() -> None:
    # upstream's tainted-prioritized-list: the tolerating alternative is taken
    cel = Cel()
    devices = _node([_slice("a", [_tainted("t0", ("broken", "", "NoSchedule"))], node="a")])
    claim = _claim(
        _first(
            "r",
            _sub("plain"),
            _sub("tolerant", tolerations=[{"key": "broken", "operator": "Exists"}]),
        )
    )
    got = allocate_claim(_spec(claim, cel), DeviceList(devices, cel=cel), "a")
    assert isinstance(got, Allocation)
    assert got.allocation["devices"]["results"][0]["request"] == "r/tolerant"


def test_device_taint_rules_taint_the_devices_they_select() -> None:
    cel = Cel()
    slices = {s["metadata"]["name"]: s for s in [_slice("a", [_gpu("g0"), _gpu("g1")], node="a")]}

    def rule(effect: str, **selector: str) -> dict[str, Any]:
        return {
            "metadata": {"name": "r"},
            "spec": {"deviceSelector": selector, "taint": {"key": "maint", "effect": effect}},
        }

    index, _ = index_slices(slices, {}, [rule("NoSchedule", driver=DRIVER, device="g0")])
    devices = index.reachable("a", {})
    assert [d.taints for d in devices] == [(("maint", "", "NoSchedule"),), ()]
    spec = _spec(_claim(_request(count=2)), cel)
    got = allocate_claim(spec, DeviceList(devices, cel=cel), "a")
    assert isinstance(got, str) and "device 'g0': maint:NoSchedule not tolerated" in got
    # no selector field: every device; another driver, or effect None: none
    index, _ = index_slices(slices, {}, [rule("NoExecute")])
    assert all(d.taints for d in index.reachable("a", {}))
    index, _ = index_slices(slices, {}, [rule("NoSchedule", driver="other.example.com")])
    assert not any(d.taints for d in index.reachable("a", {}))
    index, _ = index_slices(slices, {}, [rule("None")])
    assert not any(d.taints for d in index.reachable("a", {}))


def test_the_claims_of_one_pod_are_searched_together() -> None:
    # upstream allocates a pod's claims in one search: the first claim's first alternative
    # takes the only 8Gi device the second claim needs, so it falls back to its second
    cel = Cel()
    devices = _node([_slice("a", [_gpu("big", memory="8Gi"), _gpu("small", memory="4Gi")])])
    first = _spec(_claim(_first("r", _sub("a", selectors=[_mem(8)]), _sub("b"))), cel)
    second = _spec(_claim(_request("r", selectors=[_mem(8)])), cel)
    got = allocate_claims([first, second], DeviceList(devices, cel=cel), "a")
    assert isinstance(got, list)
    assert [_devices(a) for a in got] == [["small"], ["big"]]
    assert got[0].allocation["devices"]["results"][0]["request"] == "r/b"
    # one claim at a time (the other's devices given as taken) cannot see that
    alone = allocate_claim(first, DeviceList(devices, cel=cel), "a")
    assert _devices(alone) == ["big"]
    # the failing claim is named by its index
    third = _spec(_claim(_request("r", count=2)), cel)
    failed = allocate_claims([first, third], DeviceList(devices, cel=cel), "a")
    assert failed == (1, "request 'r' (class gpu): 1 of 2 matching devices free, 2 needed")
