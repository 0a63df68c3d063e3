"""The integration profile: one rule played against one sample.

Each rule gets its own namespace; the sample object is created there (labelled with the run,
its pod templates pointed at a scheduler nobody runs, so its pods stay Pending and never
reach a Node). The integration under test -- an operator, the native Job controller, the
reference integrations -- must then create the Workload, PodGroups and CompositePodGroups
the sample expects and link the pods. Everything in the namespace is deleted afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from workloadbuilder.api import to_dict
from workloadbuilder.cluster import Cluster
from workloadbuilder.conformance._base import RUN_LABEL, Failed
from workloadbuilder.conformance._rules import Rule
from workloadbuilder.conformance._samples import (
    IntegrationSample,
    SampleOutcome,
    standin_child_jobs,
    standin_pods,
)
from workloadbuilder.errors import NotFound, WorkloadBuilderError

if TYPE_CHECKING:
    from workloadbuilder.conformance._runner import ConformanceRunner

__all__ = [
    "GROUP_TEMPLATE_ANNOTATION",
    "PARENT_NAME",
    "PARENT_TEMPLATE",
    "UNSCHEDULED",
    "SampleScenario",
]

#: the ``schedulerName`` the sample's pod templates get: no scheduler serves it
UNSCHEDULED = "wbc-not-scheduled"
#: the downward-mapping annotation of a delegating child (KEP-6089)
GROUP_TEMPLATE_ANNOTATION = "scheduling.k8s.io/group-template-name"
#: the parent the suite plays for ``createParent`` (a ConfigMap and its Workload)
PARENT_NAME = "wbc-parent"
#: the parent Workload's PodGroupTemplate the sample, as its child, delegates to
PARENT_TEMPLATE = "workers"

_Obj = dict[str, Any]


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _controller_uid(obj: Mapping[str, Any]) -> str | None:
    for ref in _meta(obj).get("ownerReferences") or ():
        if ref.get("controller"):
            return str(ref.get("uid"))
    return None


def _deleting(obj: Mapping[str, Any]) -> bool:
    return bool(_meta(obj).get("deletionTimestamp"))


def _name(obj: Mapping[str, Any]) -> str:
    return str(_meta(obj).get("name"))


def _group_of(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def _min_count(policy: Mapping[str, Any] | None) -> int:
    gang = (policy or {}).get("gang")
    return int(gang.get("minCount", 0)) if isinstance(gang, Mapping) else 0


def _merge(obj: Any, patch: Any) -> Any:
    """A JSON merge patch (RFC 7386) applied to a copy of ``obj``."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    out = dict(obj) if isinstance(obj, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merge(out.get(key), value)
    return out


class _Templates:
    """Every template of the sample's Workloads: (workload, template) -> (kind, template,
    the enclosing composite template's name or ``None``)."""

    def __init__(self, workloads: Sequence[Mapping[str, Any]]) -> None:
        self.leaves: dict[tuple[str, str], tuple[Mapping[str, Any], str | None]] = {}
        self.composites: dict[tuple[str, str], tuple[Mapping[str, Any], str | None]] = {}
        for wl in workloads:
            spec = wl.get("spec") or {}
            self._walk(_name(wl), spec, None)

    def _walk(self, wl: str, node: Mapping[str, Any], parent: str | None) -> None:
        for t in node.get("podGroupTemplates") or ():
            self.leaves[(wl, str(t.get("name")))] = (t, parent)
        for t in node.get("compositePodGroupTemplates") or ():
            self.composites[(wl, str(t.get("name")))] = (t, parent)
            self._walk(wl, t, str(t.get("name")))


class _State:
    """One observation of the namespace."""

    def __init__(self, uid: str, objs: Mapping[str, list[_Obj]]) -> None:
        self.uid = uid
        self.all = objs

        def owned(kind: str) -> list[_Obj]:
            return [o for o in objs[kind] if _controller_uid(o) == uid and not _deleting(o)]

        self.workloads = owned("Workload")
        self.pod_groups = owned("PodGroup")
        self.composites = owned("CompositePodGroup")
        self.pods = [p for p in objs["Pod"] if not _deleting(p)]
        self.templates = _Templates(self.workloads)
        #: Jobs controlled by the sample (only listed for the ``childJobs`` check)
        self.child_jobs = [
            j for j in objs.get("Job", ()) if _controller_uid(j) == uid and not _deleting(j)
        ]

    def controlled_by(self, kind: str, uid: str) -> list[_Obj]:
        """The live objects of ``kind`` whose controller has ``uid``."""
        return [o for o in self.all[kind] if _controller_uid(o) == uid and not _deleting(o)]


def _same(pg_value: Any, template_value: Any, default: Any = None) -> bool:
    if template_value is None:
        return pg_value is None or pg_value == default
    return bool(pg_value == template_value)


class SampleScenario:
    """One integration rule played once against the runner's sample."""

    def __init__(self, runner: ConformanceRunner, rule: Rule, index: int) -> None:
        if runner.sample is None:
            raise ValueError("the integration profile needs a sample (--integration-sample)")
        self.runner = runner
        self.sample: IntegrationSample = runner.sample
        self.rule = rule
        self.namespace = f"wbc-{runner.run_id}-{index}"
        self.deadline = 0.0
        self.uid = ""
        self.resized = False
        self.seen: dict[str, set[str]] = {}  # kind -> names of the sample's objects seen
        self.standin: set[str] = set()
        #: stand-in child Jobs (``standin_jobs``): name -> uid
        self.standin_jobs: dict[str, str] = {}
        #: the parent the suite plays (``createParent``): its uid, once created
        self.parent_uid = ""
        self.as_child = any(
            "createSample" in step and (step["createSample"] or {}).get("asChild")
            for step in rule.steps
        )

    @property
    def cluster(self) -> Cluster:
        return self.runner.cluster

    def _late(self) -> bool:
        return time.monotonic() > self.deadline

    # ---- what it creates ---------------------------------------------------------------

    def namespace_object(self) -> _Obj:
        return {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": self.namespace, "labels": {RUN_LABEL: self.runner.run_id}},
        }

    def sample_object(self) -> _Obj:
        obj = self.sample.instance(self.namespace, {RUN_LABEL: self.runner.run_id}, UNSCHEDULED)
        if self.as_child:
            # the sample as a delegating child of the parent the suite plays (KEP-6089)
            meta = obj["metadata"]
            meta["annotations"] = {
                **(meta.get("annotations") or {}),
                GROUP_TEMPLATE_ANNOTATION: PARENT_TEMPLATE,
            }
            meta["ownerReferences"] = [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "name": PARENT_NAME,
                    "uid": self.parent_uid or "<the parent's uid>",
                    "controller": True,
                }
            ]
        return obj

    def parent_objects(self) -> list[_Obj]:
        """``createParent``: :meth:`parent_object` and :meth:`parent_workload`."""
        return [self.parent_object(), self.parent_workload()]

    def parent_object(self) -> _Obj:
        """A ConfigMap standing for any parent controller's object."""
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": PARENT_NAME,
                "namespace": self.namespace,
                "labels": {RUN_LABEL: self.runner.run_id},
            },
        }

    def parent_workload(self) -> _Obj:
        """The parent's Workload (``spec.controllerRef`` and, once the parent exists, a
        controller ownerReference to it) with one PodGroupTemplate, :data:`PARENT_TEMPLATE`:
        a gang of the sample's first ``minCount`` (a basic group for 0 or none)."""
        labels = {RUN_LABEL: self.runner.run_id}
        mins = self.sample.expect.min_counts or ()
        policy: dict[str, Any] = (
            {"gang": {"minCount": mins[0]}} if mins and mins[0] > 0 else {"basic": {}}
        )
        workload: _Obj = {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "Workload",
            "metadata": {"name": PARENT_NAME, "namespace": self.namespace, "labels": labels},
            "spec": {
                "controllerRef": {"apiGroup": "", "kind": "ConfigMap", "name": PARENT_NAME},
                "podGroupTemplates": [{"name": PARENT_TEMPLATE, "schedulingPolicy": policy}],
            },
        }
        if self.parent_uid:
            workload["metadata"]["ownerReferences"] = [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "name": PARENT_NAME,
                    "uid": self.parent_uid,
                    "controller": True,
                }
            ]
        return workload

    def plan(self) -> list[_Obj]:
        """What this rule creates and changes: the namespace, the parent (``createParent``),
        the sample, its stand-in child Jobs (``standin_jobs``) and pods (``standin_pods``),
        and for a resizing rule the patch (a ``Patch`` document: ``patchType``, ``target``,
        ``patch``) and the stand-in pods after it."""
        sample = self.sample_object()
        out = [self.namespace_object()]
        if any("createParent" in step for step in self.rule.steps):
            out += self.parent_objects()
        out.append(sample)
        if self.runner.standin_jobs:
            out += standin_child_jobs(sample)
        if self.runner.standin_pods:
            out += self._standin_pods_for(sample, standin_child_jobs(sample))
        if any("resizeSample" in step for step in self.rule.steps):
            if self.sample.resize_patch is not None:
                out.append(
                    {
                        "kind": "Patch",
                        "patchType": self.sample.resize_patch_type,
                        "target": {
                            "apiVersion": sample["apiVersion"],
                            "kind": sample["kind"],
                            "namespace": self.namespace,
                            "name": _name(sample),
                        },
                        "patch": copy.deepcopy(self.sample.resize_patch),
                    }
                )
            if self.runner.standin_pods and self.sample.resize_patch_type == "merge":
                resized = _merge(sample, self.sample.resize_patch)
                before = {_name(p) for p in standin_pods(sample)}
                out += [p for p in standin_pods(resized) if _name(p) not in before]
        return out

    def _standin_pods_for(self, sample: _Obj, jobs: Sequence[_Obj]) -> list[_Obj]:
        """The stand-in pods: with stand-in child Jobs, those the Job controller makes for
        each of them; else those of the sample's own workload controller."""
        if self.runner.standin_jobs and jobs:
            return [p for job in jobs for p in standin_pods(job)]
        return standin_pods(sample)

    # ---- playing -----------------------------------------------------------------------

    async def play(self) -> None:
        self.deadline = time.monotonic() + self.rule.timeout
        await self.cluster.create(self.namespace_object())
        for step in self.rule.steps:
            ((kind, spec),) = step.items()
            spec = spec or {}
            if kind == "createParent":
                made = to_dict(await self.cluster.create(self.parent_object()))
                self.parent_uid = str(_meta(made).get("uid"))
                await self.cluster.create(self.parent_workload())
            elif kind == "createSample":
                created = to_dict(await self.cluster.create(self.sample_object()))
                self.uid = str(_meta(created).get("uid"))
                if self.runner.standin_pods or self.runner.standin_jobs:
                    await self._standin(self.sample.expect)
            elif kind == "resizeSample":
                await self.resize()
            elif kind == "deleteSample":
                await self.cluster.delete(
                    self.sample.resource,
                    str(self.sample.object["metadata"]["name"]),
                    self.namespace,
                    propagation_policy="Background",
                )
                for pod in sorted(self.standin):  # as the garbage collector would
                    with contextlib.suppress(NotFound):
                        await self.cluster.delete(
                            "Pod", pod, self.namespace, grace_period_seconds=0
                        )
                for job in sorted(self.standin_jobs):
                    with contextlib.suppress(NotFound):
                        await self.cluster.delete(
                            "Job", job, self.namespace, propagation_policy="Background"
                        )
            elif kind == "expectSample":
                want = self.sample.expect
                if spec.get("after") == "resize":
                    want = self.sample.resize_expect or want
                await self.expect(list(spec["checks"]), want)

    async def resize(self) -> None:
        if self.sample.resize_patch is None:
            raise Failed(f"sample {self.sample.name} has no resize (its resize: block is missing)")
        await self.cluster.patch(
            self.sample.resource,
            str(self.sample.object["metadata"]["name"]),
            self.sample.resize_patch,
            self.namespace,
            patch_type="json" if self.sample.resize_patch_type == "json" else "merge",
        )
        self.resized = True
        if self.runner.standin_pods or self.runner.standin_jobs:
            await self._standin(self.sample.resize_expect or self.sample.expect)

    async def _standin(self, want: SampleOutcome) -> None:
        """Stand-in workload controller: once the sample's PodGroups are there (the order the
        Job controller keeps: Workload, PodGroup, pods), create the pods its controllers would
        and delete those they would no longer have."""

        async def groups_ready() -> list[str]:
            state = await self.observe()
            n = len(state.pod_groups)
            if want.pod_groups is not None and n != want.pod_groups:
                return [f"{n} PodGroups, want {want.pod_groups}"]
            if want.min_counts is not None:
                got = tuple(
                    sorted(_min_count(g["spec"].get("schedulingPolicy")) for g in state.pod_groups)
                )
                if got != want.min_counts:
                    return [f"minCounts {list(got)}, want {list(want.min_counts)}"]
            return []

        # not there by the deadline: create the pods anyway, the checks then say what is wrong
        with contextlib.suppress(Failed):
            await self._until(groups_ready, "the stand-in pods wait for the sample's PodGroups")
        live = to_dict(
            await self.cluster.get(
                self.sample.resource, str(self.sample.object["metadata"]["name"]), self.namespace
            )
        )
        jobs: list[_Obj] = []
        if self.runner.standin_jobs:
            jobs = await self._standin_child_jobs(live)
        if not self.runner.standin_pods:
            return
        desired = {_name(p): p for p in self._standin_pods_for(live, jobs)}
        for name, pod in desired.items():
            if name not in self.standin:
                await self.cluster.create(copy.deepcopy(pod))
                self.standin.add(name)
        for name in sorted(self.standin - set(desired)):
            with contextlib.suppress(NotFound):
                await self.cluster.delete("Pod", name, self.namespace, grace_period_seconds=0)
            self.standin.discard(name)

    async def _standin_child_jobs(self, live: _Obj) -> list[_Obj]:
        """Stand-in JobSet controller: create the sample's child Jobs (those not made yet),
        delete those it no longer has; the live ones, with their uids."""
        want = {_name(j): j for j in standin_child_jobs(live)}
        out: list[_Obj] = []
        for name, job in want.items():
            if name in self.standin_jobs:
                out.append(to_dict(await self.cluster.get("Job", name, self.namespace)))
                continue
            made = to_dict(await self.cluster.create(copy.deepcopy(job)))
            self.standin_jobs[name] = str(_meta(made).get("uid"))
            out.append(made)
        for name in sorted(set(self.standin_jobs) - set(want)):
            with contextlib.suppress(NotFound):
                await self.cluster.delete(
                    "Job", name, self.namespace, propagation_policy="Background"
                )
            del self.standin_jobs[name]
        return out

    async def _until(self, probe: Callable[[], Awaitable[list[str]]], what: str) -> None:
        while True:
            await self.runner.step()
            problems = await probe()
            if not problems:
                return
            if self._late():
                raise Failed(f"{what}: " + "; ".join(problems))
            await asyncio.sleep(self.runner.poll)

    async def expect(self, checks: list[str], want: SampleOutcome) -> None:
        async def probe() -> list[str]:
            state = await self.observe(jobs="childJobs" in checks)
            out: list[str] = []
            for check in checks:
                out += getattr(self, f"_check_{check}")(state, want)
            if not out:
                for kind, objs in (
                    ("Workload", state.workloads),
                    ("PodGroup", state.pod_groups),
                    ("CompositePodGroup", state.composites),
                ):
                    self.seen.setdefault(kind, set()).update(_name(o) for o in objs)
            return out

        what = "outcome not reached by the deadline" + (" after the resize" if self.resized else "")
        await self._until(probe, what)

    async def observe(self, *, jobs: bool = False) -> _State:
        objs: dict[str, list[_Obj]] = {}
        kinds = ["Workload", "PodGroup", "CompositePodGroup", "Pod"] + (["Job"] if jobs else [])
        for kind in kinds:
            try:
                items = (await self.cluster.list(kind, self.namespace)).items
            except NotFound:  # a kind the server does not serve
                items = ()
            objs[kind] = [to_dict(o) for o in items]
        return _State(self.uid, objs)

    # ---- the checks --------------------------------------------------------------------

    def _check_workload(self, s: _State, want: SampleOutcome) -> list[str]:
        obj = self.sample.object
        name = str(obj["metadata"]["name"])
        out: list[str] = []
        if want.workloads is not None and len(s.workloads) != want.workloads:
            others = sorted(_name(w) for w in s.all["Workload"] if w not in s.workloads)
            out.append(
                f"{len(s.workloads)} Workloads controlled by {self.sample.kind} {name}, want "
                f"{want.workloads}" + (f" (others in the namespace: {others})" if others else "")
            )
        for wl in s.workloads:
            refs = [r for r in _meta(wl).get("ownerReferences") or () if r.get("controller")]
            ref = refs[0]
            got = (ref.get("apiVersion"), ref.get("kind"), ref.get("name"))
            if got != (obj["apiVersion"], obj["kind"], name):
                out.append(f"Workload {_name(wl)}: controller ownerReference {got}")
            want_ref = {
                "apiGroup": _group_of(str(obj["apiVersion"])),
                "kind": obj["kind"],
                "name": name,
            }
            cref = dict((wl.get("spec") or {}).get("controllerRef") or {})
            if not want_ref["apiGroup"]:
                cref.setdefault("apiGroup", "")
            if cref != want_ref:
                out.append(
                    f"Workload {_name(wl)}: spec.controllerRef {cref or None}, want {want_ref}"
                )
        return out

    def _check_podGroups(self, s: _State, want: SampleOutcome) -> list[str]:
        out: list[str] = []
        if want.pod_groups is not None and len(s.pod_groups) != want.pod_groups:
            others = sorted(_name(g) for g in s.all["PodGroup"] if g not in s.pod_groups)
            out.append(
                f"{len(s.pod_groups)} PodGroups controlled by the sample, want {want.pod_groups}"
                + (f" (others, or being deleted: {others})" if others else "")
            )
        for pg in s.pod_groups:
            spec = pg.get("spec") or {}
            ref = spec.get("workloadRef") or {}
            key = (str(ref.get("workloadName")), str(ref.get("templateName")))
            if key not in s.templates.leaves:
                out.append(
                    f"PodGroup {_name(pg)}: workloadRef {ref or None} names no PodGroupTemplate "
                    "of the sample's Workload"
                )
                continue
            out.extend(self._pod_group_from(s, pg, key, "PodGroup"))
        if want.min_counts is not None:
            got = tuple(
                sorted(
                    _min_count((g.get("spec") or {}).get("schedulingPolicy")) for g in s.pod_groups
                )
            )
            if got != want.min_counts:
                out.append(f"PodGroup minCounts {list(got)}, want {list(want.min_counts)}")
        return out

    def _check_composites(self, s: _State, want: SampleOutcome) -> list[str]:
        out: list[str] = []
        n = want.composite_pod_groups
        if n is not None and len(s.composites) != n:
            out.append(f"{len(s.composites)} CompositePodGroups controlled by the sample, want {n}")
        by_name = {_name(c): c for c in s.composites}
        for cpg in s.composites:
            spec = cpg.get("spec") or {}
            ref = spec.get("workloadRef") or {}
            key = (str(ref.get("workloadName")), str(ref.get("templateName")))
            if key not in s.templates.composites:
                out.append(
                    f"CompositePodGroup {_name(cpg)}: workloadRef {ref or None} names no "
                    "CompositePodGroupTemplate of the sample's Workload"
                )
                continue
            template, parent = s.templates.composites[key]
            if spec.get("schedulingPolicy") != template.get("schedulingPolicy"):
                want_policy = template.get("schedulingPolicy")
                out.append(
                    f"CompositePodGroup {_name(cpg)}: schedulingPolicy "
                    f"{spec.get('schedulingPolicy')}, its template has {want_policy}"
                )
            out += self._parent_mismatch("CompositePodGroup", cpg, key[0], parent, by_name)
        for pg in s.pod_groups:
            ref = (pg.get("spec") or {}).get("workloadRef") or {}
            key = (str(ref.get("workloadName")), str(ref.get("templateName")))
            if key in s.templates.leaves:
                parent = s.templates.leaves[key][1]
                out += self._parent_mismatch("PodGroup", pg, key[0], parent, by_name)
        return out

    @staticmethod
    def _parent_mismatch(
        kind: str,
        obj: Mapping[str, Any],
        workload: str,
        parent_template: str | None,
        composites: Mapping[str, Mapping[str, Any]],
    ) -> list[str]:
        got = (obj.get("spec") or {}).get("parentCompositePodGroupName")
        if parent_template is None:
            return [f"{kind} {_name(obj)}: parent {got}, its template is top-level"] if got else []
        parent = composites.get(str(got)) if got else None
        pref = ((parent or {}).get("spec") or {}).get("workloadRef") or {}
        if parent is None or (pref.get("workloadName"), pref.get("templateName")) != (
            workload,
            parent_template,
        ):
            return [
                f"{kind} {_name(obj)}: parentCompositePodGroupName {got}, want a "
                f"CompositePodGroup of template {parent_template}"
            ]
        return []

    def _check_pods(self, s: _State, want: SampleOutcome) -> list[str]:
        out: list[str] = []
        if want.pods is not None and len(s.pods) != want.pods:
            out.append(f"{len(s.pods)} pods in the namespace, want {want.pods}")
        groups = {_name(g): g for g in s.pod_groups}
        linked: dict[str, int] = {}
        for pod in s.pods:
            target = ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
            if not target:
                out.append(f"pod {_name(pod)}: no spec.schedulingGroup")
            elif target not in groups:
                out.append(f"pod {_name(pod)}: linked to {target}, not a PodGroup of the sample")
            else:
                linked[target] = linked.get(target, 0) + 1
        for name, pg in sorted(groups.items()):
            need = _min_count((pg.get("spec") or {}).get("schedulingPolicy"))
            if linked.get(name, 0) < max(need, 1):
                out.append(f"PodGroup {name}: {linked.get(name, 0)} pods linked, minCount {need}")
        return out

    def _check_childJobs(self, s: _State, want: SampleOutcome) -> list[str]:
        """The sample's delegating child Jobs (KEP-6089 downward mapping): each names a
        PodGroupTemplate of the sample's Workload, owns no Workload, and its pods are linked to
        a PodGroup made from that template, by the parent (centralized) or by the child
        (delegated management)."""
        out: list[str] = []
        if want.child_jobs is not None and len(s.child_jobs) != want.child_jobs:
            hint = " (made by its workload controller; without one, --stand-in-jobs)"
            out.append(
                f"{len(s.child_jobs)} Jobs controlled by the sample, want {want.child_jobs}"
                + ("" if s.child_jobs else hint)
            )
        wl_names = {_name(w) for w in s.workloads}
        for job in s.child_jobs:
            jname, juid = _name(job), str(_meta(job).get("uid"))
            template = (_meta(job).get("annotations") or {}).get(GROUP_TEMPLATE_ANNOTATION)
            keys = [k for k in s.templates.leaves if k[1] == template and k[0] in wl_names]
            if not template:
                out.append(f"Job {jname}: no {GROUP_TEMPLATE_ANNOTATION} annotation")
                continue
            if not keys:
                out.append(
                    f"Job {jname}: {GROUP_TEMPLATE_ANNOTATION}={template} names no "
                    "PodGroupTemplate of the sample's Workload"
                )
                continue
            own_wls = sorted(_name(w) for w in s.controlled_by("Workload", juid))
            if own_wls:
                out.append(f"Job {jname}: controls Workloads {own_wls} (a child makes none)")
            groups = {_name(g): g for g in s.pod_groups}
            for g in s.controlled_by("PodGroup", juid):
                groups[_name(g)] = g
                out += self._pod_group_from(s, g, keys[0], f"Job {jname}'s PodGroup")
            pods = [p for p in s.pods if _controller_uid(p) == juid]
            if not pods:
                out.append(f"Job {jname}: no pods")
            for pod in pods:
                target = ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
                ref = ((groups.get(str(target)) or {}).get("spec") or {}).get("workloadRef") or {}
                if (ref.get("workloadName"), ref.get("templateName")) != keys[0]:
                    out.append(
                        f"pod {_name(pod)} of Job {jname}: linked to {target}, not a PodGroup "
                        f"of template {template} made by the sample or the Job"
                    )
        return out

    def _pod_group_from(
        self, s: _State, pg: Mapping[str, Any], key: tuple[str, str], what: str
    ) -> list[str]:
        """``pg`` names template ``key`` (workload, template) in spec.workloadRef and copies
        its policy, constraints, disruption mode and priority class."""
        spec = pg.get("spec") or {}
        ref = spec.get("workloadRef") or {}
        if (ref.get("workloadName"), ref.get("templateName")) != key:
            return [f"{what} {_name(pg)}: workloadRef {ref or None}, want {list(key)}"]
        template, _ = s.templates.leaves[key]
        out = []
        for field, default in (
            ("schedulingPolicy", None),
            ("schedulingConstraints", None),
            ("disruptionMode", {"single": {}}),
            ("priorityClassName", None),
        ):
            if not _same(spec.get(field), template.get(field), default):
                out.append(
                    f"{what} {_name(pg)}: {field} {spec.get(field)}, its template {key[1]} "
                    f"has {template.get(field)}"
                )
        return out

    def _check_delegatedPodGroup(self, s: _State, want: SampleOutcome) -> list[str]:
        """The sample, a delegating child of the parent the suite plays: no Workload of its
        own, exactly one PodGroup made from the parent's template, its pods linked to it."""
        out: list[str] = []
        if s.workloads:
            out.append(
                f"the sample controls Workloads {sorted(_name(w) for w in s.workloads)}; a "
                "delegating child makes none (its parent owns the Workload)"
            )
        parents = _Templates([w for w in s.all["Workload"] if _name(w) == PARENT_NAME])
        key = (PARENT_NAME, PARENT_TEMPLATE)
        if key not in parents.leaves:
            return [*out, f"the parent's Workload {PARENT_NAME} is missing"]
        if len(s.pod_groups) != 1:
            return [*out, f"{len(s.pod_groups)} PodGroups controlled by the sample, want 1"]
        pg = s.pod_groups[0]
        view = _State(s.uid, s.all)
        view.templates = parents
        out += self._pod_group_from(view, pg, key, "PodGroup")
        if want.pods is not None and len(s.pods) != want.pods:
            out.append(f"{len(s.pods)} pods in the namespace, want {want.pods}")
        for pod in s.pods:
            target = ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
            if target != _name(pg):
                out.append(f"pod {_name(pod)}: linked to {target}, want {_name(pg)}")
        return out

    def _check_cleanedUp(self, s: _State, want: SampleOutcome) -> list[str]:
        out: list[str] = []
        for kind in ("Workload", "PodGroup", "CompositePodGroup"):
            live = sorted(
                _name(o)
                for o in s.all[kind]
                if not _deleting(o)
                and (_controller_uid(o) == self.uid or _name(o) in self.seen.get(kind, set()))
            )
            if live:
                out.append(f"{kind}s of the deleted sample still there: {live}")
        return out

    # ---- cleanup -----------------------------------------------------------------------

    async def cleanup(self) -> None:
        ns = self.namespace
        with contextlib.suppress(WorkloadBuilderError):
            await self.cluster.delete(
                self.sample.resource,
                str(self.sample.object["metadata"]["name"]),
                ns,
                propagation_policy="Background",
            )
        for job in sorted(self.standin_jobs):
            with contextlib.suppress(WorkloadBuilderError):
                await self.cluster.delete("Job", job, ns, propagation_policy="Background")
        for kind in ("Pod", "PodGroup", "CompositePodGroup", "Workload"):
            with contextlib.suppress(WorkloadBuilderError):
                for obj in map(to_dict, (await self.cluster.list(kind, ns)).items):
                    with contextlib.suppress(NotFound):
                        if kind == "Pod":
                            await self.cluster.delete(kind, _name(obj), ns, grace_period_seconds=0)
                        else:
                            await self.cluster.delete(kind, _name(obj), ns)
        with contextlib.suppress(WorkloadBuilderError):
            await self.cluster.delete("Namespace", ns)
