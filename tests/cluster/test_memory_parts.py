"""The collaborators of MemoryCluster on their own (the behaviour suite covers them together):
storage and watch routing, server-side apply's merge, and the lifecycle controllers wired to
a bare storage."""

from __future__ import annotations

import re
from typing import Any

import pytest

from workloadbuilder.cluster import resource_info
from workloadbuilder.cluster._memory._apply import merge_apply
from workloadbuilder.cluster._memory._lifecycle import Lifecycle
from workloadbuilder.cluster._memory._storage import Storage, Watcher, route
from workloadbuilder.cluster._patch import json_copy
from workloadbuilder.cluster._selectors import parse_label_selector
from workloadbuilder.errors import Conflict

CM = resource_info("ConfigMap")


def doc(name: str, uid: str, *, owners: tuple[str, ...] = (), **meta: Any) -> dict[str, Any]:
    refs = [{"apiVersion": "v1", "kind": "ConfigMap", "name": o, "uid": o} for o in owners]
    metadata: dict[str, Any] = {"name": name, "namespace": "default", "uid": uid, **meta}
    if refs:
        metadata["ownerReferences"] = refs
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}


def test_storage_versions_indexes_and_history() -> None:
    s = Storage(history=2)
    store = s.kind(CM)
    a = s.insert(store, ("default", "a"), doc("a", "u-a"))
    b = s.insert(store, ("default", "b"), doc("b", "u-b", owners=("u-a",)))
    assert (a.rv, b.rv, s.rv) == (1, 2, 2)
    assert s.by_uid["u-b"] == (store, ("default", "b"))
    assert s.dependents["u-a"] == {(store, ("default", "b"))}
    b2 = s.replace(store, ("default", "b"), b, doc("b", "u-b"))  # ownerReference removed
    assert b2.doc["metadata"]["resourceVersion"] == "3"
    assert "u-a" not in s.dependents
    gone = s.drop(store, ("default", "a"), a)
    assert gone.rv == 4 and store.get("default", "a") is None and "u-a" not in s.by_uid
    # history keeps the newest two events; older versions are below the floor
    assert [(rv, etype) for rv, etype, _, _ in store.history] == [(3, "MODIFIED"), (4, "DELETED")]
    assert store.floor == 2
    assert store.count() == 1 and store.count("other") == 0


def test_a_selector_watch_sees_objects_enter_and_leave() -> None:
    s = Storage(history=10)
    store = s.kind(CM)
    w = Watcher(None, parse_label_selector("app=x"), ())
    store.watchers.append(w)
    a = s.insert(store, ("default", "a"), doc("a", "u-a"))
    a2 = s.replace(store, ("default", "a"), a, doc("a", "u-a", labels={"app": "x"}))
    a3 = s.replace(store, ("default", "a"), a2, doc("a", "u-a", labels={"app": "x", "v": "2"}))
    s.replace(store, ("default", "a"), a3, doc("a", "u-a"))
    assert [etype for etype, _ in w.queue] == ["ADDED", "MODIFIED", "DELETED"]
    other_ns = Watcher("kube-system", (), ())
    route(other_ns, "ADDED", a, None, "default")
    assert not other_ns.queue and not other_ns.event.is_set()
    s.close()
    assert w.closed and w.event.is_set()


def test_merge_apply_returns_new_ownership_and_reports_conflicts() -> None:
    owned = {("data", "k"): {"other"}}
    current = {**doc("a", "u"), "data": {"k": "1"}}
    with pytest.raises(Conflict, match=re.escape('conflict with "other": .data.k')):
        merge_apply(owned, dict(current), {"data": {"k": "2"}}, "me", None, force=False)
    merged, new_owned = merge_apply(
        owned, dict(current), {"data": {"k": "2"}}, "me", None, force=True
    )
    assert merged["data"] == {"k": "2"}
    assert new_owned == {("data", "k"): {"me"}}
    assert owned == {("data", "k"): {"other"}}  # the input is not changed


def test_lifecycle_runs_the_garbage_collector_on_a_bare_storage() -> None:
    s = Storage(history=10)
    life = Lifecycle(s, lambda: "2026-01-01T00:00:00Z", pod_group_protection=False)
    store = s.kind(CM)
    owner = s.insert(store, ("default", "owner"), doc("owner", "u-o"))
    s.insert(store, ("default", "dep"), doc("dep", "u-d", owners=("u-o",)))
    s.insert(store, ("default", "kept"), doc("kept", "u-k", owners=("u-o", "u-dep-owner")))
    s.insert(store, ("default", "dep-owner"), doc("dep-owner", "u-dep-owner"))
    life.delete(store, ("default", "owner"), owner, "Background")
    assert store.get("default", "owner") is None
    assert store.get("default", "dep") is None  # no live owner left: collected
    kept = store.get("default", "kept")
    assert kept is not None  # another owner is alive: only the reference goes
    assert [r["uid"] for r in kept.doc["metadata"]["ownerReferences"]] == ["u-dep-owner"]


def test_a_finalizer_keeps_an_object_until_it_is_removed() -> None:
    s = Storage(history=10)
    life = Lifecycle(s, lambda: "2026-01-01T00:00:00Z", pod_group_protection=False)
    store = s.kind(CM)
    rec = s.insert(store, ("default", "a"), doc("a", "u-a", finalizers=["example.com/f"]))
    life.delete(store, ("default", "a"), rec, "Background")
    marked = store.get("default", "a")
    assert marked is not None
    assert marked.doc["metadata"]["deletionTimestamp"] == "2026-01-01T00:00:00Z"
    life.remove_finalizer(store, ("default", "a"), "example.com/f")
    assert store.get("default", "a") is None


def test_json_copy_copies_every_container_and_shares_only_scalars() -> None:
    class Opaque:
        def __init__(self) -> None:
            self.value = [1]

    original: dict[str, Any] = {
        "s": "text",
        "n": 1,
        "f": 1.5,
        "b": True,
        "none": None,
        "d": {"inner": {"list": [1, "two", {"three": 3}, [4, [5]]]}},
        "t": ("a", {"b": 1}),
        "l": [[], {}, ("x",)],
        "o": Opaque(),
    }
    copied = json_copy(original)
    assert copied == {**original, "t": ["a", {"b": 1}], "l": [[], {}, ["x"]], "o": copied["o"]}
    assert type(copied["t"]) is list and type(copied["l"][2]) is list  # tuples become lists
    assert copied["o"] is not original["o"] and copied["o"].value == [1]  # deep-copied
    assert copied["o"].value is not original["o"].value
    # no container is shared, at any depth
    pairs = [(copied, original)]
    while pairs:
        a, b = pairs.pop()
        if isinstance(b, dict):
            assert a is not b and list(a) == list(b)  # same keys, same order
            pairs.extend((a[k], b[k]) for k in b if isinstance(b[k], dict | list | tuple))
        elif isinstance(b, list | tuple):
            assert a is not b
            pairs.extend(
                (x, y) for x, y in zip(a, b, strict=True) if isinstance(y, dict | list | tuple)
            )
    copied["d"]["inner"]["list"][2]["three"] = "changed"
    copied["d"]["inner"]["list"][3][1].append(6)
    assert original["d"]["inner"]["list"][2] == {"three": 3}
    assert original["d"]["inner"]["list"][3] == [4, [5]]
    # scalars are shared (immutable), a Mapping that is not a dict becomes a dict
    assert copied["s"] is original["s"]
    from types import MappingProxyType

    assert json_copy(MappingProxyType({"k": [1]})) == {"k": [1]}
    assert type(json_copy(MappingProxyType({"k": 1}))) is dict
