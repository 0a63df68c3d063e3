"""What a rule's scenario observes: the differences between the cluster now and the
outcome a rule expects (pods, groups, conditions, events, claims)."""

from __future__ import annotations

import datetime
import time
from collections.abc import Mapping
from typing import Any

from workloadbuilder.api import to_dict
from workloadbuilder.conformance._scenario import ScenarioObjects
from workloadbuilder.errors import NotFound

__all__ = ["ScenarioChecks", "last_seen", "occurrences"]


class ScenarioChecks(ScenarioObjects):
    """The observations of a scenario: :meth:`mismatches` against an ``expect`` step."""

    # ---- observing ---------------------------------------------------------------------

    async def mismatches(self, spec: Mapping[str, Any]) -> list[str]:
        """What differs between the cluster now and the expected outcome ``spec``."""
        pods = {  # a pod being deleted (a victim) counts as gone
            str(p["metadata"]["name"]): p
            for p in map(to_dict, (await self.cluster.list("Pod", self.namespace)).items)
            if not p["metadata"].get("deletionTimestamp")
        }
        events: dict[str, set[str]] = {}
        for ev in map(to_dict, (await self.cluster.list("Event", self.namespace)).items):
            inv = ev.get("involvedObject") or {}
            if inv.get("kind") == "Pod":
                events.setdefault(str(inv.get("name")), set()).add(str(ev.get("reason")))
        out: list[str] = []
        for name, want in (spec.get("pods") or {}).items():
            exists = want.get("exists", True)
            if name not in pods:
                if exists:
                    out.append(f"pod {name} does not exist")
                continue
            if not exists:
                out.append(f"pod {name} still exists")
                continue
            out += _pod_mismatches(name, pods[name], events.get(name, set()), want)
        for group, want in (spec.get("groups") or {}).items():
            out += await self._group_mismatches(group, want, pods, events)
        for name, want in (spec.get("composites") or {}).items():
            cpg = to_dict(await self.cluster.get("CompositePodGroup", name, self.namespace))
            cond = _condition(cpg, "CompositePodGroupInitiallyScheduled")
            out += _condition_mismatch(f"CompositePodGroup {name}", cond, cpg, want)
        if "claims" in spec or "claimCount" in spec:
            out += await self._claim_mismatches(spec, pods)
        return out

    async def _claim_mismatches(
        self, spec: Mapping[str, Any], pods: Mapping[str, dict[str, Any]]
    ) -> list[str]:
        """``claims``: per claim (``pod/<pod>/<entry>``, ``podGroup/<group>/<entry>`` or a
        claim's name) ``allocated``, ``devices`` (how many), ``reservedFor``
        (``[<apiGroup>/]<resource>/<name>`` each) and ``onNodeOf`` (every device reachable from that
        pod's Node); ``claimCount``: how many ResourceClaims the namespace has."""
        out: list[str] = []
        claims = {
            str(c["metadata"]["name"]): c
            for c in map(to_dict, (await self.cluster.list("ResourceClaim", self.namespace)).items)
        }
        if "claimCount" in spec and len(claims) != int(spec["claimCount"]):
            out.append(f"{len(claims)} ResourceClaims {sorted(claims)}, want {spec['claimCount']}")
        for key, want in (spec.get("claims") or {}).items():
            name = await self._claim_name(str(key), pods)
            if name is None or name not in claims:
                out.append(f"claim {key}: no ResourceClaim (yet)")
                continue
            out += self._one_claim_mismatches(f"claim {key} ({name})", claims[name], want, pods)
        return out

    async def _claim_name(self, key: str, pods: Mapping[str, dict[str, Any]]) -> str | None:
        """The ResourceClaim ``key`` means: named in the entry, or the generated one recorded
        in the owner's ``status.resourceClaimStatuses``."""
        parts = key.split("/")
        if len(parts) != 3 or parts[0] not in ("pod", "podGroup"):
            return key
        kind, owner, entry = parts
        if kind == "pod":
            if owner not in pods:
                return None
            obj = pods[owner]
            entries = obj["spec"].get("resourceClaims") or ()
        else:
            try:
                obj = to_dict(await self.cluster.get("PodGroup", owner, self.namespace))
            except NotFound:
                return None
            entries = obj["spec"].get("resourceClaims") or ()
        for e in entries:
            if e.get("name") == entry and e.get("resourceClaimName"):
                return str(e["resourceClaimName"])
        for st in (obj.get("status") or {}).get("resourceClaimStatuses") or ():
            if st.get("name") == entry and st.get("resourceClaimName"):
                return str(st["resourceClaimName"])
        return None

    def _one_claim_mismatches(
        self,
        what: str,
        claim: Mapping[str, Any],
        want: Mapping[str, Any],
        pods: Mapping[str, dict[str, Any]],
    ) -> list[str]:
        out: list[str] = []
        status = claim.get("status") or {}
        allocation = status.get("allocation") or {}
        results = (allocation.get("devices") or {}).get("results") or ()
        if "allocated" in want and bool(allocation) != bool(want["allocated"]):
            out.append(f"{what}: allocated={bool(allocation)}, want {bool(want['allocated'])}")
        if "devices" in want and len(results) != int(want["devices"]):
            out.append(f"{what}: {len(results)} devices allocated, want {want['devices']}")
        if "reservedFor" in want:
            got = sorted(
                "/".join(x for x in (r.get("apiGroup"), r.get("resource"), r.get("name")) if x)
                for r in status.get("reservedFor") or ()
            )
            exp = sorted(map(str, want["reservedFor"]))
            if got != exp:
                out.append(f"{what}: reservedFor {got}, want {exp}")
        if want.get("onNodeOf"):
            pod = str(want["onNodeOf"])
            node = (pods.get(pod) or {}).get("spec", {}).get("nodeName")
            if not node:
                out.append(f"{what}: pod {pod} is not bound")
            for r in results:
                local, labels = self.pools.get(str(r.get("pool")), (None, None))
                reached = (
                    (local == node)
                    if local
                    else labels is not None
                    and all(self.nodes.get(str(node), {}).get(k) == v for k, v in labels.items())
                )
                if node and not reached:
                    out.append(
                        f"{what}: device {r.get('pool')}/{r.get('device')} is not on "
                        f"{pod}'s Node {node}"
                    )
        return out

    async def _group_mismatches(
        self,
        group: str,
        want: Mapping[str, Any],
        pods: Mapping[str, dict[str, Any]],
        events: Mapping[str, set[str]],
    ) -> list[str]:
        out: list[str] = []
        try:
            pg = to_dict(await self.cluster.get("PodGroup", group, self.namespace))
        except NotFound:
            return [f"PodGroup {group} does not exist"]
        cond = _condition(pg, "PodGroupInitiallyScheduled")
        out += _condition_mismatch(f"PodGroup {group}", cond, pg, want)
        members = {
            n: p
            for n, p in pods.items()
            if (p["spec"].get("schedulingGroup") or {}).get("podGroupName") == group
        }
        bound = {n: p["spec"]["nodeName"] for n, p in members.items() if p["spec"].get("nodeName")}
        if "bound" in want and len(bound) != int(want["bound"]):
            out.append(f"PodGroup {group}: {len(bound)} pods bound, want {want['bound']}")
        if "members" in want and len(members) != int(want["members"]):
            out.append(
                f"PodGroup {group}: {len(members)} pods exist {sorted(members)}, "
                f"want {want['members']}"
            )
        for selector, subset in (
            ("pods", members),
            ("boundPods", {n: p for n, p in members.items() if n in bound}),
            ("pendingPods", {n: p for n, p in members.items() if n not in bound}),
        ):
            if selector in want:
                for n, p in sorted(subset.items()):
                    out += _pod_mismatches(n, p, events.get(n, set()), want[selector])
        if want.get("distinctNodes") and len(set(bound.values())) != len(bound):
            out.append(f"PodGroup {group}: pods share nodes {sorted(bound.values())}")
        for key, skew in (want.get("balanced") or {}).items():
            per = {v: 0 for labels in self.nodes.values() if (v := labels.get(key)) is not None}
            for node in bound.values():
                v = self.nodes.get(node, {}).get(key)
                if v is not None:
                    per[v] += 1
            if per and max(per.values()) - min(per.values()) > int(skew):
                out.append(f"PodGroup {group}: pods per {key} {dict(sorted(per.items()))}")
        for key, value in (want.get("domain") or {}).items():
            got = {self.nodes.get(node, {}).get(key) for node in bound.values()}
            if value == "same" and len(got) > 1:
                out.append(
                    f"PodGroup {group}: pods in several {key} domains {sorted(map(str, got))}"
                )
            elif value != "same" and got and got != {str(value)}:
                out.append(f"PodGroup {group}: pods in {key} {sorted(map(str, got))}, want {value}")
        return out


def occurrences(ev: Mapping[str, Any]) -> int:
    """How many times an Event happened (core/v1 ``count`` or events.k8s.io ``series``)."""
    series = ev.get("series") or {}
    return max(int(series.get("count") or 0), int(ev.get("count") or 0), 1)


def last_seen(ev: Mapping[str, Any]) -> float:
    """When an Event last happened, as a Unix time; second-resolution stamps count as the
    end of their second (they are truncated)."""
    series = ev.get("series") or {}
    for value, truncated in (
        (series.get("lastObservedTime"), False),
        (ev.get("eventTime"), False),
        (ev.get("lastTimestamp"), True),
        ((ev.get("metadata") or {}).get("creationTimestamp"), True),
    ):
        if value:
            stamp = datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
            return stamp.timestamp() + (1.0 if truncated else 0.0)
    return time.time()


def _condition(obj: Mapping[str, Any], ctype: str) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == ctype:
            return dict(c)
    return None


def _condition_mismatch(
    what: str, cond: Mapping[str, Any] | None, obj: Mapping[str, Any], want: Mapping[str, Any]
) -> list[str]:
    out: list[str] = []
    if "condition" in want:
        expected = want["condition"]
        got = None if cond is None else [str(cond.get("status")), str(cond.get("reason", ""))]
        exp = None if expected is None else [str(v) for v in expected]
        if got != exp:
            out.append(f"{what}: condition {got}, want {exp}")
    if want.get("observedGenerationCurrent") and cond is not None:
        gen = (obj.get("metadata") or {}).get("generation")
        if cond.get("observedGeneration") != gen:
            out.append(f"{what}: observedGeneration {cond.get('observedGeneration')}, want {gen}")
    return out


def _pod_mismatches(
    name: str, pod: Mapping[str, Any], events: set[str], want: Mapping[str, Any]
) -> list[str]:
    out: list[str] = []
    bound = bool(pod["spec"].get("nodeName"))
    if "bound" in want and bound != bool(want["bound"]):
        out.append(f"pod {name}: bound={bound}, want {bool(want['bound'])}")
    if "scheduled" in want:
        cond = _condition(pod, "PodScheduled")
        got = None if cond is None else [str(cond.get("status")), str(cond.get("reason", ""))]
        exp = None if want["scheduled"] is None else [str(v) for v in want["scheduled"]]
        if exp is not None and got is not None and len(exp) == 1:
            got = got[:1]  # ["False"]: the status alone, any reason
        if got != exp:
            out.append(f"pod {name}: PodScheduled {got}, want {exp}")
    missing = sorted(set(map(str, want.get("events") or ())) - events)
    if missing:
        out.append(f"pod {name}: no {', '.join(missing)} event")
    if want.get("noEvents") and events:
        out.append(f"pod {name}: events {sorted(events)}, want none")
    return out
