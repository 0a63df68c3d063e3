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
from workloadbuilder.conformance._observe import ScenarioChecks, last_seen, occurrences
from workloadbuilder.conformance._rules import UPSTREAM_SCHEDULER, Rule
from workloadbuilder.conformance._samples import IntegrationSample
from workloadbuilder.conformance._scenario import CLUSTER_KINDS, DRA_STEPS
from workloadbuilder.errors import Forbidden, NotFound, WorkloadBuilderError

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


class _Scenario(ScenarioChecks):
    """One rule played once: its namespace, Nodes, objects, and the observations (the
    objects come from :class:`ScenarioObjects`, the observations from
    :class:`ScenarioChecks`)."""

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
                    elif obj["kind"] in CLUSTER_KINDS:
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
                attempts[name] = attempts.get(name, 0) + occurrences(ev)
                last[name] = max(last.get(name, 0.0), last_seen(ev))
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
            if any(k in DRA_STEPS for s in scenario.rule.steps for k in s):
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
    for kind in ("Namespace", "Node", *CLUSTER_KINDS):
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
