"""Conformance rules: one YAML file per rule under ``rules/``, loaded into :class:`Rule`."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from typing import Any

import yaml

__all__ = [
    "FEATURES",
    "INTEGRATION_CHECKS",
    "PLANNED_FEATURES",
    "PROFILES",
    "UPSTREAM_SCHEDULER",
    "Rule",
    "load_rules",
    "select_rules",
]

#: features that have rules, in report order
FEATURES: tuple[str, ...] = (
    "gang",
    "queueing",
    "basic",
    "status",
    "events",
    "topology",
    "composite",
    "preemption",
    "elastic",
    "dra",
    "constraints",
)
#: the profiles: ``scheduler`` (rules of the features above) and ``integration`` (feature
#: ``integration``: the objects an integration makes for a sample)
PROFILES: tuple[str, ...] = ("scheduler", "integration")
#: what an integration rule's ``expectSample`` step may check
INTEGRATION_CHECKS: tuple[str, ...] = (
    "workload",
    "podGroups",
    "composites",
    "pods",
    "cleanedUp",
    "childJobs",
    "delegatedPodGroup",
)
#: features of the v1.37 scheduler profile without rules yet (nothing to run)
PLANNED_FEATURES: tuple[str, ...] = ()
#: kube-scheduler's own scheduler name: rules marked ``extension`` are skipped for it
UPSTREAM_SCHEDULER = "default-scheduler"

_STEP_KINDS = frozenset(
    {
        "priorityClass",
        "podGroup",
        "compositePodGroup",
        "pods",
        "podsRunning",
        "podDisruptionBudget",
        "deviceClass",
        "resourceSlice",
        "resourceClaim",
        "resourceClaimTemplate",
        "node",
        "patch",
        "sleep",
        "backoffPassed",
        "settle",
        "expect",
    }
)
_SAMPLE_STEP_KINDS = frozenset(
    {"createParent", "createSample", "expectSample", "resizeSample", "deleteSample"}
)


@dataclasses.dataclass(frozen=True)
class Rule:
    """One rule of the suite: the scenario (nodes, steps) and what it requires.

    ``steps`` are plain data (see ``docs/conformance.md``): ``priorityClass``, ``podGroup``,
    ``compositePodGroup``, ``pods``, ``podDisruptionBudget``, ``node`` and the DRA steps
    ``deviceClass``, ``resourceSlice``, ``resourceClaim`` and ``resourceClaimTemplate`` create
    objects (builder-style shorthands), ``podsRunning`` reports pods Running and Ready as a kubelet
    would, ``patch`` changes one, ``sleep`` waits ``seconds``, ``settle`` waits until the scheduler
    has handled everything created so far and ``expect`` is the outcome, polled until it
    holds or the deadline passes.
    """

    id: str
    feature: str
    summary: str
    checks: str
    sources: tuple[str, ...]
    nodes: tuple[Mapping[str, Any], ...]
    steps: tuple[Mapping[str, Any], ...]
    #: a rule for one of this project's extensions, not upstream behaviour
    extension: bool = False
    #: why it is an extension (the reason printed when it is skipped)
    extension_reason: str = ""
    timeout: float = 30.0

    @property
    def profile(self) -> str:
        """``integration`` for the integration profile's rules, else ``scheduler``."""
        return "integration" if self.feature == "integration" else "scheduler"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Rule:
        """A rule from its YAML document; raises ``ValueError`` on a malformed one."""
        try:
            rid = str(data["id"])
            feature = str(data["feature"])
            sources = data["source"]
            steps = data["steps"]
        except KeyError as e:
            raise ValueError(f"conformance rule {data.get('id', '?')}: missing {e}") from e
        if feature not in FEATURES and feature != "integration":
            raise ValueError(f"conformance rule {rid}: unknown feature {feature!r}")
        kinds = _SAMPLE_STEP_KINDS if feature == "integration" else _STEP_KINDS
        if isinstance(sources, str):
            sources = [sources]
        if not sources or not all(
            str(s).startswith(("https://github.com/kubernetes/", "https://kep.k8s.io"))
            for s in sources
        ):
            raise ValueError(f"conformance rule {rid}: every source must be an upstream URL")
        for step in steps:
            if len(step) != 1 or next(iter(step)) not in kinds:
                raise ValueError(f"conformance rule {rid}: bad step {step!r}")
            ((kind, spec),) = step.items()
            if kind == "expectSample":
                bad = [c for c in (spec or {}).get("checks", ()) if c not in INTEGRATION_CHECKS]
                if bad or not (spec or {}).get("checks"):
                    raise ValueError(f"conformance rule {rid}: bad checks in {step!r}")
        extension = bool(data.get("extension", False))
        reason = str(data.get("extensionReason", ""))
        if extension and not reason:
            raise ValueError(f"conformance rule {rid}: an extension needs extensionReason")
        return cls(
            id=rid,
            feature=feature,
            summary=str(data.get("summary", "")),
            checks=str(data.get("checks", "")).strip(),
            sources=tuple(str(s) for s in sources),
            nodes=tuple(data.get("nodes") or ()),
            steps=tuple(steps),
            extension=extension,
            extension_reason=reason,
            timeout=float(data.get("timeout", 30.0)),
        )


def load_rules(profile: str = "scheduler") -> list[Rule]:
    """The rules of ``profile`` shipped with the package, in feature order then file name."""
    if profile not in PROFILES:
        raise ValueError(f"unknown conformance profile {profile!r}; known: {', '.join(PROFILES)}")
    files = sorted(
        (
            f
            for f in resources.files(__package__).joinpath("rules").iterdir()
            if f.name.endswith(".yaml")
        ),
        key=lambda f: f.name,
    )
    rules = [Rule.from_dict(yaml.safe_load(f.read_text(encoding="utf-8"))) for f in files]
    ids = [r.id for r in rules]
    if len(set(ids)) != len(ids):
        raise ValueError("conformance rules: duplicate ids")
    order = (*FEATURES, "integration")
    rules = [r for r in rules if r.profile == profile]
    return sorted(rules, key=lambda r: order.index(r.feature))  # stable: file order


def select_rules(
    rules: Iterable[Rule], features: Sequence[str] | None = None, *, profile: str = "scheduler"
) -> list[Rule]:
    """The rules of ``profile`` (``scheduler`` or ``integration``); for the scheduler profile
    only those of ``features`` (all when ``None``). Unknown names raise ``ValueError``."""
    if profile not in PROFILES:
        raise ValueError(f"unknown conformance profile {profile!r}; known: {', '.join(PROFILES)}")
    rules = [r for r in rules if r.profile == profile]
    if features is None or profile == "integration":
        return rules
    unknown = [f for f in features if f not in FEATURES and f not in PLANNED_FEATURES]
    if unknown:
        known = ", ".join((*FEATURES, *PLANNED_FEATURES))
        raise ValueError(f"unknown conformance feature(s) {', '.join(unknown)}; known: {known}")
    return [r for r in rules if r.feature in features]
