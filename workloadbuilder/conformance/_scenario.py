"""A rule's scenario, the part that needs no cluster: its names (namespace, Nodes,
PriorityClasses) and every object it creates, in order (also ``--dry-run``'s plan)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from workloadbuilder.cluster import Cluster
from workloadbuilder.conformance._base import (
    RUN_LABEL,
    SCENARIO_LABEL,
    TAINT_KEY,
    WITNESS_TAINT_KEY,
)
from workloadbuilder.conformance._rules import Rule
from workloadbuilder.testing.builders import (
    make_composite_pod_group,
    make_node,
    make_pod,
    make_pod_group,
    make_priority_class,
)

if TYPE_CHECKING:
    from workloadbuilder.conformance._runner import ConformanceRunner

__all__ = ["CLUSTER_KINDS", "DRA_DRIVER", "DRA_STEPS", "ScenarioObjects"]


#: the driver of the devices the DRA rules publish (ResourceSlices without a driver running)
DRA_DRIVER = "conformance.workloadbuilder.io"
_RESOURCE_V1 = "resource.k8s.io/v1"
#: the steps of the DRA rules (a rule with one also cleans up its claims)
DRA_STEPS = frozenset({"deviceClass", "resourceSlice", "resourceClaim", "resourceClaimTemplate"})
#: cluster-scoped kinds the runner creates and removes by name (and by label afterwards)
CLUSTER_KINDS = ("PriorityClass", "DeviceClass", "ResourceSlice")


def _toleration(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "operator": "Equal", "value": value, "effect": "NoSchedule"}


class ScenarioObjects:
    """One rule played once: its namespace and Nodes, and the objects it creates (what
    ``--dry-run`` prints). :class:`ScenarioChecks` adds the observations, the runner's
    scenario the playing."""

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
                _pod_constraints(obj, spec)
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


def _pod_constraints(obj: dict[str, Any], spec: Mapping[str, Any]) -> None:
    """A pods step's own constraints: ``antiAffinity`` / ``affinity`` (required terms:
    ``{topologyKey, matchLabels}``), ``preferredAntiAffinity`` / ``preferredAffinity`` (one
    preferred term: ``{topologyKey, matchLabels, weight}``), ``spread`` (``{topologyKey,
    maxSkew, matchLabels, whenUnsatisfiable}``, ``DoNotSchedule`` unless said),
    ``hostPort`` (TCP, on the first container) and ``persistentVolumeClaim`` (a volume
    naming that claim)."""
    pod_spec = obj["spec"]
    for field, kind in (("affinity", "podAffinity"), ("antiAffinity", "podAntiAffinity")):
        term = spec.get(field)
        if term:
            required = [
                {
                    "labelSelector": {"matchLabels": dict(term.get("matchLabels") or {})},
                    "topologyKey": str(term["topologyKey"]),
                }
            ]
            block = pod_spec.setdefault("affinity", {}).setdefault(kind, {})
            block["requiredDuringSchedulingIgnoredDuringExecution"] = required
    for field, kind in (
        ("preferredAffinity", "podAffinity"),
        ("preferredAntiAffinity", "podAntiAffinity"),
    ):
        term = spec.get(field)
        if term:
            preferred = [
                {
                    "weight": int(term.get("weight", 100)),
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": dict(term.get("matchLabels") or {})},
                        "topologyKey": str(term["topologyKey"]),
                    },
                }
            ]
            block = pod_spec.setdefault("affinity", {}).setdefault(kind, {})
            block["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    spread = spec.get("spread")
    if spread:
        pod_spec["topologySpreadConstraints"] = [
            {
                "maxSkew": int(spread.get("maxSkew", 1)),
                "topologyKey": str(spread["topologyKey"]),
                "whenUnsatisfiable": str(spread.get("whenUnsatisfiable", "DoNotSchedule")),
                "labelSelector": {"matchLabels": dict(spread.get("matchLabels") or {})},
            }
        ]
    if spec.get("hostPort"):
        port = int(spec["hostPort"])
        pod_spec["containers"][0]["ports"] = [{"containerPort": port, "hostPort": port}]
    if spec.get("persistentVolumeClaim"):
        claim = str(spec["persistentVolumeClaim"])
        pod_spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
