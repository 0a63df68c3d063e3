"""The conformance runner: plays each rule's scenario against any ``Cluster`` and checks the
outcome the rule requires.

Isolation: every rule gets its own namespace and its own fake Nodes (no kubelet; Ready,
allocatable set through the status subresource). The Nodes carry the taint
``conformance.workloadbuilder.io/run=<run id>:NoSchedule`` that only the suite's pods
tolerate, so real workloads never land on them, and the suite's pods never land on real
Nodes (they also select the suite's Nodes by the label ``RUN_LABEL``, and their own rule's
Nodes by ``SCENARIO_LABEL``: a scheduler whose cache still holds the Nodes of the rule
before, deleted a moment ago, must not bind to them). Everything is
deleted when the rule ends (pass, fail or error).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import datetime
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from workloadbuilder.api import to_dict
from workloadbuilder.cluster import Cluster
from workloadbuilder.conformance._base import (
    RUN_LABEL,
    SCENARIO_LABEL,
    TAINT_KEY,
    WITNESS_TAINT_KEY,
    Progress,
    Result,
    RuleResult,
)
from workloadbuilder.conformance._base import Failed as _Failed
from workloadbuilder.conformance._integration import SampleScenario
from workloadbuilder.conformance._rules import UPSTREAM_SCHEDULER, Rule
from workloadbuilder.conformance._samples import IntegrationSample
from workloadbuilder.errors import Forbidden, NotFound, WorkloadBuilderError
from workloadbuilder.testing.builders import (
    make_composite_pod_group,
    make_node,
    make_pod,
    make_pod_group,
    make_priority_class,
)

__all__ = [
    "RUN_LABEL",
    "SCENARIO_LABEL",
    "TAINT_KEY",
    "WITNESS_TAINT_KEY",
    "ConformanceRunner",
    "Progress",
    "RuleResult",
    "remove_leftovers",
]


#: the driver of the devices the DRA rules publish (ResourceSlices without a driver running)
DRA_DRIVER = "conformance.workloadbuilder.io"
_RESOURCE_V1 = "resource.k8s.io/v1"
#: the steps of the DRA rules (a rule with one also cleans up its claims)
_DRA_STEPS = frozenset({"deviceClass", "resourceSlice", "resourceClaim", "resourceClaimTemplate"})
#: cluster-scoped kinds the runner creates and removes by name (and by label afterwards)
_CLUSTER_KINDS = ("PriorityClass", "DeviceClass", "ResourceSlice")


def _toleration(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "operator": "Equal", "value": value, "effect": "NoSchedule"}


class _Scenario:
    """One rule played once: its namespace, Nodes, objects, and the observations."""

    @property
    def cluster(self) -> Cluster:
        return self.runner.cluster

    def __init__(self, runner: ConformanceRunner, rule: Rule, index: int) -> None:
        self.runner = runner
        self.rule = rule
        self.namespace = f"wbc-{runner.run_id}-{index}"
        self.nodes: dict[str, dict[str, str]] = {}  # full name -> labels
        self.priority_classes: list[str] = []
        #: DeviceClasses and ResourceSlices created (kind, name), removed at the end
        self.cluster_objects: list[tuple[str, str]] = []
        #: pool name -> (the Node it is local to, or the labels its nodeSelector requires)
        self.pools: dict[str, tuple[str | None, dict[str, str]]] = {}
        self.deadline = 0.0
        self.witnesses = 0

    # ---- names -------------------------------------------------------------------------

    def node_name(self, short: str) -> str:
        return f"{self.namespace}-{short}"

    def pc_name(self, short: str) -> str:
        return f"{self.namespace}-{short}"

    def _mark(self, obj: dict[str, Any], *, namespaced: bool = True) -> dict[str, Any]:
        meta = obj.setdefault("metadata", {})
        meta.setdefault("labels", {})[RUN_LABEL] = self.runner.run_id
        if namespaced:
            meta["namespace"] = self.namespace
        return obj

    # ---- what it creates (also the dry-run) ----------------------------------------------

    def namespace_object(self) -> dict[str, Any]:
        return self._mark(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}},
            namespaced=False,
        )

    def node_objects(
        self, specs: Sequence[Mapping[str, Any]] | None = None
    ) -> list[dict[str, Any]]:
        out = []
        if specs is None:
            specs = [*self.rule.nodes, {"name": "witness", "cpu": "1"}]
        for spec in specs:
            full = self.node_name(str(spec["name"]))
            labels = {str(k): str(v) for k, v in (spec.get("labels") or {}).items()}
            node = (
                make_node(full)
                .label("kubernetes.io/hostname", full)
                .label(SCENARIO_LABEL, self.namespace)
                .labels(labels)
                .taint(TAINT_KEY, self.runner.run_id)
            )
            if spec["name"] == "witness":
                node.taint(WITNESS_TAINT_KEY, self.runner.run_id)
            else:
                self.nodes[full] = labels
            node.resources(
                {
                    "cpu": str(spec.get("cpu", "4")),
                    "memory": str(spec.get("memory", "16Gi")),
                    "pods": str(spec.get("pods", "110")),
                }
            ).ready()
            out.append(self._mark(node.obj(), namespaced=False))
        return out

    def step_objects(self, kind: str, spec: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The objects one creating step makes."""
        if kind == "priorityClass":
            pcb = make_priority_class(self.pc_name(str(spec["name"])), int(spec["value"]))
            if spec.get("preemptionPolicy"):
                pcb.preemption_policy(str(spec["preemptionPolicy"]))
            return [self._mark(pcb.obj(), namespaced=False)]
        if kind == "podGroup":
            pg = make_pod_group(str(spec["name"]), self.namespace)
            if spec.get("parent"):
                pg.parent(str(spec["parent"])).workload_ref(str(spec["parent"]), str(spec["name"]))
            if "minCount" in spec:
                pg.gang(int(spec["minCount"]))
            if spec.get("topology"):
                pg.topology(str(spec["topology"]))
            if spec.get("priorityClass"):
                pg.priority_class(self.pc_name(str(spec["priorityClass"])))
            if spec.get("disruptionMode"):
                pg.disruption_mode(str(spec["disruptionMode"]))
            if spec.get("preemptionPolicy"):
                pg.preemption_policy(str(spec["preemptionPolicy"]))
            for entry, claim in (spec.get("claims") or {}).items():
                pg.resource_claim(str(entry), claim=str(claim))
            for entry, template in (spec.get("templates") or {}).items():
                pg.resource_claim(str(entry), template=str(template))
            return [self._mark(pg.obj())]
        if kind == "compositePodGroup":
            cpg = make_composite_pod_group(str(spec["name"]), self.namespace)
            if "minGroupCount" in spec:
                cpg.gang(int(spec["minGroupCount"]))
            if spec.get("topology"):
                cpg.topology(str(spec["topology"]))
            if spec.get("priorityClass"):
                cpg.priority_class(self.pc_name(str(spec["priorityClass"])))
            if spec.get("disruptionMode"):
                cpg.disruption_mode(str(spec["disruptionMode"]))
            return [self._mark(cpg.obj())]
        if kind == "node":
            return self.node_objects([spec])
        if kind == "pods":
            group = spec.get("group")
            prefix = str(spec.get("prefix", group or "pod"))
            start = int(spec.get("start", 0))
            out = []
            for i in range(start, start + int(spec.get("count", 1))):
                pod = make_pod(f"{prefix}-{i}", self.namespace)
                pod.scheduler_name(str(spec.get("schedulerName", self.runner.scheduler_name)))
                pod.tolerations(_toleration(TAINT_KEY, self.runner.run_id))
                # the taint keeps real pods off the suite's Nodes; the selector keeps the
                # suite's pods off real Nodes
                pod.node_selector(RUN_LABEL, self.runner.run_id)
                # and this rule's Nodes only: a scheduler may still see the Nodes of the rule
                # before (deleted, the delete not yet in its cache) and bind to them
                pod.node_selector(SCENARIO_LABEL, self.namespace)
                if group:
                    pod.pod_group(str(group))
                if spec.get("node"):
                    pod.node_name(self.node_name(str(spec["node"])))
                if spec.get("priorityClass"):
                    pod.priority_class(self.pc_name(str(spec["priorityClass"])))
                if spec.get("labels"):
                    pod.labels({str(k): str(v) for k, v in spec["labels"].items()})
                pod.request("cpu", str(spec.get("cpu", "1")))
                pod.request("memory", str(spec.get("memory", "1Gi")))
                for entry, claim in (spec.get("claims") or {}).items():
                    pod.pod_resource_claim(str(entry), claim=str(claim))
                for entry, template in (spec.get("templates") or {}).items():
                    pod.pod_resource_claim(str(entry), template=str(template))
                obj = pod.obj()
                # no kubelet: a deleted pod (a preemption victim) must go at once
                obj["spec"]["terminationGracePeriodSeconds"] = 0
                out.append(self._mark(obj))
            return out
        if kind == "podDisruptionBudget":
            selector = spec.get("selector")
            if selector is None:
                selector = {"matchLabels": dict(spec.get("matchLabels") or {})}
            pdb = {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": str(spec["name"])},
                "spec": {"minAvailable": spec.get("minAvailable", 0), "selector": selector},
            }
            return [self._mark(pdb)]
        if kind in ("deviceClass", "resourceSlice", "resourceClaim", "resourceClaimTemplate"):
            return [self._dra_object(kind, spec)]
        return []

    def _dra_object(self, kind: str, spec: Mapping[str, Any]) -> dict[str, Any]:
        """A DeviceClass or ResourceSlice (cluster-scoped: named ``<namespace>-<name>``), or
        a ResourceClaim / ResourceClaimTemplate (in the rule's namespace)."""
        name = str(spec["name"])
        if kind == "deviceClass":
            selector = {"cel": {"expression": f'device.driver == "{DRA_DRIVER}"'}}
            return self._mark(
                {
                    "apiVersion": _RESOURCE_V1,
                    "kind": "DeviceClass",
                    "metadata": {"name": self.node_name(name)},
                    "spec": {"selectors": [selector]},
                },
                namespaced=False,
            )
        if kind == "resourceSlice":
            full = self.node_name(name)
            where: dict[str, Any]
            if spec.get("node"):
                node = self.node_name(str(spec["node"]))
                where = {"nodeName": node}
                self.pools[full] = (node, {})
            else:
                # never a real Node: the run's label is required as well
                labels = {str(k): str(v) for k, v in (spec.get("nodeLabels") or {}).items()}
                exprs = [
                    {"key": k, "operator": "In", "values": [v]}
                    for k, v in {
                        RUN_LABEL: self.runner.run_id,
                        SCENARIO_LABEL: self.namespace,
                        **labels,
                    }.items()
                ]
                where = {"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": exprs}]}}
                self.pools[full] = (None, labels)
            devices = [{"name": f"dev-{i}"} for i in range(int(spec.get("devices", 1)))]
            return self._mark(
                {
                    "apiVersion": _RESOURCE_V1,
                    "kind": "ResourceSlice",
                    "metadata": {"name": full},
                    "spec": {
                        "driver": DRA_DRIVER,
                        "pool": {"name": full, "generation": 1, "resourceSliceCount": 1},
                        **where,
                        "devices": devices,
                    },
                },
                namespaced=False,
            )
        request = {
            "name": str(spec.get("request", "dev")),
            "exactly": {
                "deviceClassName": self.node_name(str(spec["deviceClass"])),
                "count": int(spec.get("count", 1)),
            },
        }
        claim_spec = {"devices": {"requests": [request]}}
        if kind == "resourceClaim":
            return self._mark(
                {
                    "apiVersion": _RESOURCE_V1,
                    "kind": "ResourceClaim",
                    "metadata": {"name": name},
                    "spec": claim_spec,
                }
            )
        return self._mark(
            {
                "apiVersion": _RESOURCE_V1,
                "kind": "ResourceClaimTemplate",
                "metadata": {"name": name},
                "spec": {"spec": claim_spec},
            }
        )

    def witness_objects(self, n: int) -> list[dict[str, Any]]:
        """The ``n``-th ``settle``'s witness: a basic PodGroup of one pod that only the
        witness Node accepts."""
        name = f"wbc-witness-{n}"
        pg = make_pod_group(name, self.namespace).obj()
        pod = (
            make_pod(f"{name}-0", self.namespace)
            .scheduler_name(self.runner.scheduler_name)
            .pod_group(name)
            .tolerations(
                _toleration(TAINT_KEY, self.runner.run_id),
                _toleration(WITNESS_TAINT_KEY, self.runner.run_id),
            )
            .node_selector("kubernetes.io/hostname", self.node_name("witness"))
            .request("cpu", "10m")
            .obj()
        )
        return [self._mark(pg), self._mark(pod)]

    def plan(self) -> list[dict[str, Any]]:
        """Everything this rule creates, in order (the witnesses of ``settle`` included)."""
        objs = [self.namespace_object(), *self.node_objects()]
        witnesses = 0
        for step in self.rule.steps:
            ((kind, spec),) = step.items()
            if kind == "settle":
                witnesses += 1
                objs.extend(self.witness_objects(witnesses))
            objs.extend(self.step_objects(kind, spec or {}))
        return objs

    # ---- playing -----------------------------------------------------------------------

    async def setup(self) -> None:
        await self.cluster.create(self.namespace_object())
        for node in self.node_objects():
            await self._create_node(node)

    async def _create_node(self, node: dict[str, Any]) -> None:
        status = node.pop("status")
        await self.cluster.create(node)
        await self.cluster.patch(
            "Node", node["metadata"]["name"], {"status": status}, subresource="status"
        )

    async def _create(self, obj: dict[str, Any]) -> None:
        # the Priority admission plugin reads PriorityClasses from an informer: a pod naming
        # a class created a moment ago may be refused for a short while
        while True:
            try:
                await self.cluster.create(copy.deepcopy(obj))
                return
            except Forbidden as e:
                if "no PriorityClass with name" not in str(e) or self._late():
                    raise
            await asyncio.sleep(0.05)

    def _late(self) -> bool:
        return time.monotonic() > self.deadline

    async def play(self) -> None:
        self.deadline = time.monotonic() + self.rule.timeout
        await self.setup()
        for step in self.rule.steps:
            ((kind, spec),) = step.items()
            spec = spec or {}
            if kind == "patch":
                await self.cluster.patch(
                    str(spec["kind"]), str(spec["name"]), spec["patch"], self.namespace
                )
            elif kind == "settle":
                await self.settle()
            elif kind == "backoffPassed":
                await self.backoff_passed(spec)
            elif kind == "sleep":
                await asyncio.sleep(float(spec.get("seconds", 1)))
                await self.runner.step()
            elif kind == "node":
                for node in self.step_objects(kind, spec):
                    await self._create_node(node)
            elif kind == "expect":
                await self.expect(spec)
            elif kind == "podsRunning":
                await self.pods_running(spec)
            else:
                for obj in self.step_objects(kind, spec):
                    if obj["kind"] == "PriorityClass":
                        self.priority_classes.append(obj["metadata"]["name"])
                    elif obj["kind"] in _CLUSTER_KINDS:
                        self.cluster_objects.append((obj["kind"], obj["metadata"]["name"]))
                    await self._create(obj)
                if kind == "podDisruptionBudget":
                    await self.budget_counted(spec)

    async def pods_running(self, spec: Mapping[str, Any]) -> None:
        """What a kubelet would report for the bound pods ``spec["pods"]``: Running, Ready,
        and start times one minute apart in the order given (the first the oldest), the
        start time preemption orders victims by."""
        base = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
        for i, name in enumerate(spec.get("pods") or ()):
            pod = to_dict(await self.cluster.get("Pod", str(name), self.namespace))
            conds = [c for c in pod["status"].get("conditions") or () if c.get("type") != "Ready"]
            conds.append({"type": "Ready", "status": "True"})
            start = (base + datetime.timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%SZ")
            status = {"phase": "Running", "conditions": conds, "startTime": start}
            await self.cluster.patch(
                "Pod", str(name), {"status": status}, self.namespace, subresource="status"
            )

    async def budget_counted(self, spec: Mapping[str, Any]) -> None:
        """Wait until the PodDisruptionBudget's status (written by kube-controller-manager's
        disruption controller, not the scheduler) is current and allows ``allowed``
        disruptions: preemption reads ``status.disruptionsAllowed``."""
        name = str(spec["name"])
        want = int(spec.get("allowed", 0))

        async def probe() -> list[str]:
            pdb = to_dict(await self.cluster.get("PodDisruptionBudget", name, self.namespace))
            st = pdb.get("status") or {}
            if (
                st.get("observedGeneration") == (pdb.get("metadata") or {}).get("generation")
                and st.get("disruptionsAllowed") == want
            ):
                return []
            return [
                f"PodDisruptionBudget {name}: status.disruptionsAllowed "
                f"{st.get('disruptionsAllowed')} (observedGeneration "
                f"{st.get('observedGeneration')}), want {want}"
            ]

        await self._until(
            probe,
            "the budget was not counted (the cluster needs kube-controller-manager's "
            "disruption controller)",
        )

    async def _until(self, probe: Callable[[], Awaitable[list[str]]], what: str) -> None:
        """Poll until ``probe`` returns no mismatch; fail with the last ones at the deadline."""
        while True:
            await self.runner.step()
            problems = await probe()
            if not problems:
                return
            if self._late():
                raise _Failed(f"{what}: " + "; ".join(problems))
            await asyncio.sleep(self.runner.poll)

    async def settle(self) -> None:
        """A witness pod (a basic group of one, on the witness Node) created now is bound:
        the scheduler has handled everything created before it."""
        self.witnesses += 1
        name = f"wbc-witness-{self.witnesses}"
        for obj in self.witness_objects(self.witnesses):
            await self.cluster.create(obj)

        async def bound() -> list[str]:
            got = await self.cluster.get("Pod", f"{name}-0", self.namespace)
            return [] if to_dict(got)["spec"].get("nodeName") else [f"{name}-0 not bound"]

        await self._until(bound, "the scheduler did not bind the witness pod")

    async def backoff_passed(self, spec: Mapping[str, Any]) -> None:
        """Wait until every pod of ``spec["groups"]`` is past the backoff its failed attempts
        earned: reckoned from its ``FailedScheduling`` events (how many attempts, the last
        one's time), ``initialSeconds`` doubling per attempt up to ``maxSeconds`` (defaults:
        kube-scheduler's ``podInitialBackoffSeconds`` 1 and ``podMaxBackoffSeconds`` 10), plus
        ``marginSeconds`` (0.5: an attempt's event may be written a moment late).
        Each new failure seen while waiting moves the point."""
        groups = {str(g) for g in spec.get("groups") or ()}
        initial = float(spec.get("initialSeconds", 1))
        ceiling = float(spec.get("maxSeconds", 10))
        # events are written asynchronously: a retry's event may show a moment late
        margin = float(spec.get("marginSeconds", 0.5))

        async def probe() -> list[str]:
            members = {
                str(p["metadata"]["name"])
                for p in map(to_dict, (await self.cluster.list("Pod", self.namespace)).items)
                if (p["spec"].get("schedulingGroup") or {}).get("podGroupName") in groups
            }
            attempts: dict[str, int] = {}
            last: dict[str, float] = {}
            for ev in map(to_dict, (await self.cluster.list("Event", self.namespace)).items):
                inv = ev.get("involvedObject") or {}
                name = str(inv.get("name"))
                if inv.get("kind") != "Pod" or name not in members:
                    continue
                if ev.get("reason") != "FailedScheduling":
                    continue
                attempts[name] = attempts.get(name, 0) + _occurrences(ev)
                last[name] = max(last.get(name, 0.0), _last_seen(ev))
            now = time.time()
            out = []
            for name in sorted(members):
                if name not in attempts:
                    out.append(f"pod {name}: no FailedScheduling event yet")
                    continue
                wait = min(initial * 2 ** (attempts[name] - 1), ceiling)
                if now < last[name] + wait + margin:
                    left = last[name] + wait + margin - now
                    out.append(f"pod {name}: in backoff for {left:.1f}s")
            return out

        await self._until(probe, "the groups did not leave their backoff")

    async def expect(self, spec: Mapping[str, Any]) -> None:
        async def probe() -> list[str]:
            return await self.mismatches(spec)

        await self._until(probe, "outcome not reached by the deadline")

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
        for key, value in (want.get("domain") or {}).items():
            got = {self.nodes.get(node, {}).get(key) for node in bound.values()}
            if value == "same" and len(got) > 1:
                out.append(
                    f"PodGroup {group}: pods in several {key} domains {sorted(map(str, got))}"
                )
            elif value != "same" and got and got != {str(value)}:
                out.append(f"PodGroup {group}: pods in {key} {sorted(map(str, got))}, want {value}")
        return out


def _occurrences(ev: Mapping[str, Any]) -> int:
    """How many times an Event happened (core/v1 ``count`` or events.k8s.io ``series``)."""
    series = ev.get("series") or {}
    return max(int(series.get("count") or 0), int(ev.get("count") or 0), 1)


def _last_seen(ev: Mapping[str, Any]) -> float:
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
        if got != exp:
            out.append(f"pod {name}: PodScheduled {got}, want {exp}")
    missing = sorted(set(map(str, want.get("events") or ())) - events)
    if missing:
        out.append(f"pod {name}: no {', '.join(missing)} event")
    if want.get("noEvents") and events:
        out.append(f"pod {name}: events {sorted(events)}, want none")
    return out


async def _no_step() -> None:
    return None


class ConformanceRunner:
    """Runs rules against ``cluster`` for the scheduler named ``scheduler_name``.

    ``step`` is awaited before every observation: a scheduler stepped in process (on
    ``MemoryCluster``) does its work there; against a running scheduler leave it out.
    ``progress`` is called when each rule starts and ends. ``run_id`` (default: random) names
    the namespaces, Nodes and the taint's value. ``cluster`` may be ``None`` for
    :meth:`plan` only.

    Integration-profile rules play ``sample`` (an :class:`IntegrationSample`); with
    ``standin_pods`` the runner also creates the pods the sample's workload controllers
    would (for clusters that run the integration but not those controllers); with
    ``standin_jobs`` it creates a JobSet sample's child Jobs as a workload-aware JobSet
    controller would (for clusters that run a Job controller but no JobSet controller).
    """

    def __init__(
        self,
        cluster: Cluster | None,
        scheduler_name: str,
        *,
        step: Callable[[], Awaitable[None]] | None = None,
        poll: float = 0.1,
        progress: Progress | None = None,
        run_id: str | None = None,
        run_extensions: bool = False,
        sample: IntegrationSample | None = None,
        standin_pods: bool = False,
        standin_jobs: bool = False,
    ) -> None:
        self._cluster = cluster
        self.scheduler_name = scheduler_name
        self.step = step or _no_step
        self.poll = poll
        self.progress = progress
        self.run_id = run_id or secrets.token_hex(3)
        #: run extension rules even for ``default-scheduler`` (to show they differ)
        self.run_extensions = run_extensions
        #: the sample the integration profile's rules play
        self.sample = sample
        #: create the sample's pods as its workload controllers would
        self.standin_pods = standin_pods
        #: create a JobSet sample's child Jobs as a workload-aware JobSet controller would
        self.standin_jobs = standin_jobs

    @property
    def cluster(self) -> Cluster:
        """The cluster under test (``ValueError`` for a plan-only runner)."""
        if self._cluster is None:
            raise ValueError("this ConformanceRunner has no cluster (plan only)")
        return self._cluster

    def skip_reason(self, rule: Rule) -> str | None:
        """Why ``rule`` is not run for this scheduler, or ``None``."""
        if rule.extension and self.scheduler_name == UPSTREAM_SCHEDULER and not self.run_extensions:
            return f"extension, not upstream behaviour: {rule.extension_reason}"
        if rule.profile == "integration" and self.sample is not None:
            kinds = {k for step in rule.steps for k in step}
            checks = {
                c for step in rule.steps for c in (step.get("expectSample") or {}).get("checks", ())
            }
            if "createParent" in kinds and self.sample.kind != "Job":
                return (
                    f"the sample is a {self.sample.kind}: this rule makes the sample a parent's "
                    "delegating child, which the suite does for Jobs only"
                )
            if "childJobs" in checks and self.sample.expect.child_jobs is None:
                return (
                    f"the sample ({self.sample.kind} {self.sample.name}) makes no delegating "
                    "child Jobs (its expect.childJobs is not set)"
                )
        return None

    def plan(self, rules: Sequence[Rule]) -> list[tuple[Rule, list[dict[str, Any]]]]:
        """What each rule would create (``--dry-run``); touches nothing."""
        return [(r, self._scenario(r, i).plan()) for i, r in enumerate(rules)]

    def _scenario(self, rule: Rule, index: int) -> _Scenario | SampleScenario:
        if rule.profile == "integration":
            return SampleScenario(self, rule, index)
        return _Scenario(self, rule, index)

    async def run(self, rules: Sequence[Rule]) -> list[RuleResult]:
        """Run ``rules`` one after the other; one result each."""
        results = []
        for i, rule in enumerate(rules):
            if self.progress:
                self.progress(rule, None)
            result = await self.run_one(rule, i)
            if self.progress:
                self.progress(rule, result)
            results.append(result)
        return results

    async def run_one(self, rule: Rule, index: int = 0) -> RuleResult:
        """Play one rule and clean up after it."""
        reason = self.skip_reason(rule)
        if reason is not None:
            return RuleResult(rule.id, rule.feature, "skip", 0.0, reason, rule.extension)
        scenario = self._scenario(rule, index)
        start = time.monotonic()
        result: Result = "pass"
        message = ""
        try:
            await scenario.play()
        except _Failed as e:
            result, message = "fail", str(e)
        except WorkloadBuilderError as e:
            result, message = "fail", f"API error: {e}"
        finally:
            await self.cleanup(scenario)
        return RuleResult(
            rule.id, rule.feature, result, time.monotonic() - start, message, rule.extension
        )

    async def cleanup(self, scenario: _Scenario | SampleScenario) -> None:
        """Delete everything the scenario created (missing objects are fine)."""
        if isinstance(scenario, SampleScenario):
            await scenario.cleanup()
            return
        ns = scenario.namespace
        with contextlib.suppress(WorkloadBuilderError):
            for pod in map(to_dict, (await self.cluster.list("Pod", ns)).items):
                with contextlib.suppress(NotFound):
                    await self.cluster.delete(
                        "Pod", pod["metadata"]["name"], ns, grace_period_seconds=0
                    )
            kinds = ["PodGroup", "CompositePodGroup", "PodDisruptionBudget"]
            if any(k in _DRA_STEPS for s in scenario.rule.steps for k in s):
                kinds += ["ResourceClaim", "ResourceClaimTemplate"]
            for kind in kinds:
                for obj in map(to_dict, (await self.cluster.list(kind, ns)).items):
                    with contextlib.suppress(NotFound):
                        await self.cluster.delete(kind, obj["metadata"]["name"], ns)
        for node in [*scenario.nodes, scenario.node_name("witness")]:
            with contextlib.suppress(WorkloadBuilderError):
                await self.cluster.delete("Node", node)
        for pc in scenario.priority_classes:
            with contextlib.suppress(WorkloadBuilderError):
                await self.cluster.delete("PriorityClass", pc)
        for kind, name in reversed(scenario.cluster_objects):
            with contextlib.suppress(WorkloadBuilderError):
                await self.cluster.delete(kind, name)
        with contextlib.suppress(WorkloadBuilderError):
            await self.cluster.delete("Namespace", ns)


async def remove_leftovers(cluster: Cluster, run_id: str | None = None) -> list[str]:
    """Delete what an interrupted run left behind: the namespaces, Nodes and PriorityClasses
    labelled ``RUN_LABEL`` (``=run_id`` when given, else any run), and the DeviceClasses and
    ResourceSlices of the DRA rules (on a cluster that serves them). Returns ``Kind/name`` of
    each one deleted. A namespace takes its pods, groups and claims with it."""
    selector = RUN_LABEL if run_id is None else f"{RUN_LABEL}={run_id}"
    gone: list[str] = []
    for kind in ("Namespace", "Node", *_CLUSTER_KINDS):
        try:
            found = (await cluster.list(kind, label_selector=selector)).items
        except NotFound:  # resource.k8s.io not served: nothing of the DRA rules to remove
            if kind in ("DeviceClass", "ResourceSlice"):
                continue
            raise
        for obj in map(to_dict, found):
            meta = obj.get("metadata") or {}
            if kind == "Namespace" and meta.get("deletionTimestamp"):
                continue
            with contextlib.suppress(NotFound):
                await cluster.delete(kind, str(meta["name"]))
                gone.append(f"{kind}/{meta['name']}")
    return gone
