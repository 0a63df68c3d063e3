"""pytest plugin: the conformance suite as test items in your own CI.

Enable it with ``-p workloadbuilder.conformance.pytest_plugin`` (or ``pytest_plugins = [...]``
in a ``conftest.py``) and ask for the suite::

    pytest -p workloadbuilder.conformance.pytest_plugin --wb-conformance \\
        --wb-kubeconfig ~/.kube/config --wb-scheduler-name my-scheduler \\
        [--wb-context C] [--wb-features gang,topology] [--wb-timeout SECONDS]
    pytest -p workloadbuilder.conformance.pytest_plugin --wb-conformance \\
        --wb-kubeconfig ~/.kube/config --wb-profile integration \\
        --wb-integration-sample my-sample.yaml [--wb-stand-in-pods] [--wb-stand-in-jobs]

Without ``--wb-conformance`` it adds nothing. With it, one item per rule
(``conformance::<rule id>``) is appended to the session: a failed rule fails its item with the
rule's message, a skipped one (an extension, for ``default-scheduler``) is skipped with the
reason. Each item plays its rule as ``workloadbuilder conformance run`` does.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from workloadbuilder.conformance._rules import Rule, load_rules, select_rules
from workloadbuilder.conformance._runner import ConformanceRunner
from workloadbuilder.conformance._samples import load_sample

__all__ = ["ConformanceItem", "pytest_addoption", "pytest_collection_modifyitems"]


def pytest_addoption(parser: pytest.Parser) -> None:
    """The ``--wb-*`` options."""
    group = parser.getgroup("wb-conformance", "workload-aware scheduling conformance")
    group.addoption("--wb-conformance", action="store_true", help="run the conformance rules")
    group.addoption("--wb-kubeconfig", help="kubeconfig of the cluster under test")
    group.addoption("--wb-context", help="kubeconfig context")
    group.addoption("--wb-scheduler-name", help="spec.schedulerName of the scheduler under test")
    group.addoption("--wb-features", help="comma-separated features (default: all)")
    group.addoption("--wb-timeout", type=float, help="seconds per rule (default: the rule's)")
    group.addoption(
        "--wb-profile",
        choices=["scheduler", "integration"],
        default="scheduler",
        help="scheduler (default) or integration (needs --wb-integration-sample)",
    )
    group.addoption("--wb-integration-sample", help="integration profile: the sample")
    group.addoption(
        "--wb-stand-in-pods",
        action="store_true",
        help="integration profile: create the pods the sample's workload controllers would",
    )
    group.addoption(
        "--wb-stand-in-jobs",
        action="store_true",
        help="integration profile: create a JobSet sample's child Jobs as a workload-aware "
        "JobSet controller would",
    )


class ConformanceItem(pytest.Item):
    """One conformance rule as a pytest item."""

    def __init__(self, *, rule: Rule, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rule = rule

    def runtest(self) -> None:
        """Play the rule against the configured cluster; fail or skip as it says."""
        from workloadbuilder.cluster import KubeCluster

        opt = self.config.getoption

        async def play() -> tuple[str, str]:
            cluster = KubeCluster.from_kubeconfig(opt("wb_kubeconfig"), opt("wb_context"))
            try:
                sample = opt("wb_integration_sample")
                runner = ConformanceRunner(
                    cluster,
                    str(opt("wb_scheduler_name") or f"integration sample {sample}"),
                    sample=load_sample(sample) if sample else None,
                    standin_pods=bool(opt("wb_stand_in_pods")),
                    standin_jobs=bool(opt("wb_stand_in_jobs")),
                )
                result = await runner.run_one(self.rule)
            finally:
                await cluster.close()
            return result.result, result.message

        outcome, message = asyncio.run(play())
        if outcome == "skip":
            pytest.skip(message)
        if outcome == "fail":
            raise AssertionError(f"{self.rule.id}: {message}")

    def reportinfo(self) -> tuple[str, int | None, str]:
        """Where the rule comes from (its first upstream source)."""
        return self.rule.sources[0], None, f"conformance::{self.rule.id}"

    def repr_failure(self, excinfo: Any, style: Any = None) -> str:
        """The rule's message, without a traceback into the runner."""
        if isinstance(excinfo.value, AssertionError):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """With ``--wb-conformance``: append one item per selected rule."""
    if not config.getoption("wb_conformance"):
        return
    profile = config.getoption("wb_profile")
    if profile == "scheduler" and not config.getoption("wb_scheduler_name"):
        raise pytest.UsageError("--wb-conformance needs --wb-scheduler-name")
    if profile == "integration" and not config.getoption("wb_integration_sample"):
        raise pytest.UsageError("--wb-profile integration needs --wb-integration-sample")
    features = config.getoption("wb_features")
    try:
        if profile == "integration":
            load_sample(config.getoption("wb_integration_sample"))  # a bad sample: usage error
        rules = select_rules(
            load_rules(profile),
            [f.strip() for f in features.split(",")] if features else None,
            profile=profile,
        )
    except ValueError as e:
        raise pytest.UsageError(str(e)) from e
    timeout = config.getoption("wb_timeout")
    for rule in rules:
        if timeout is not None:
            rule = dataclasses.replace(rule, timeout=float(timeout))
        items.append(
            ConformanceItem.from_parent(session, name=f"conformance::{rule.id}", rule=rule)
        )
