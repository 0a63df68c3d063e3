"""What a component's start imports (issue 14, start-up CPU): a provider's command (the
scheduler) loads no built-in command module it does not run, no MemoryCluster, no
integration kinds or builder, and the kube client no kubernetes-asyncio; a built-in command
loads no provider; numpy starts no OpenBLAS thread pool under the CLI."""

from __future__ import annotations

import argparse
import importlib

from fresh import run_fresh

from workloadbuilder import cli


def test_builtin_command_table_matches_the_modules() -> None:
    assert sorted(cli._BUILTIN_COMMANDS.values()) == sorted(cli._BUILTIN)
    for command, module in cli._BUILTIN_COMMANDS.items():
        parser = argparse.ArgumentParser()
        sub = parser.add_subparsers()
        importlib.import_module(f"workloadbuilder.cli.{module}").register(sub)
        assert list(sub.choices) == [command]


def _modules_after_parsing(argv: list[str]) -> list[str]:
    code = f"""
        import json, sys
        from workloadbuilder import cli
        parser = cli._make_parser({argv!r})
        parser.parse_args({argv!r})
        print(json.dumps(sorted(sys.modules)))
    """
    return list(run_fresh(code))


def test_the_scheduler_command_loads_no_other_command_and_no_kubernetes_asyncio() -> None:
    modules = set(_modules_after_parsing(["scheduler", "--kubeconfig", "k"]))
    assert "workloadbuilder.scheduler.cli" in modules
    unneeded = {
        "workloadbuilder.cli._conformance",
        "workloadbuilder.cli._controlplane",
        "workloadbuilder.cli._lint",
        "workloadbuilder.conformance",
        "workloadbuilder.testing",
        "kubernetes_asyncio",
        "workloadbuilder.simulator",
        "workloadbuilder.integrations",
        # the manifest commands' helpers, the embedded cluster, the integrations' kinds,
        # builder and reconciler: ~90 ms of a start (workloadbuilder.cli's re-exports,
        # workloadbuilder.cluster's MemoryCluster and workloadbuilder.runtime's Reconciler
        # are resolved on first access)
        "workloadbuilder.cli._build",
        "workloadbuilder.cli._common",
        "workloadbuilder.cli._validate",
        "workloadbuilder.cluster._memory",
        "workloadbuilder.kinds",
        "workloadbuilder.builder",
        "workloadbuilder.validation",
        "workloadbuilder.runtime._reconciler",
        "workloadbuilder.runtime._podlink",
    }
    assert {m.split(".")[0] for m in modules} & unneeded == set()
    assert modules & unneeded == set()
    # a command of a provider registered under another name still works
    assert "workloadbuilder.scheduler.cli" in set(
        _modules_after_parsing(["explain", "podgroup", "g"])
    )


def test_a_builtin_command_loads_no_provider_and_help_lists_all() -> None:
    modules = set(_modules_after_parsing(["lint", "topology", "-f", "x.yaml"]))
    assert "workloadbuilder.cli._lint" in modules
    assert (
        "workloadbuilder.scheduler.cli" not in modules
        and "workloadbuilder.cli._conformance" not in modules
    )
    parser = cli._make_parser([])
    choices = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert {"build", "validate", "lint", "controlplane", "conformance", "scheduler"} <= set(choices)
    # an unknown command: the error lists the built-ins too
    unknown = cli._make_parser(["nope"])
    listed = unknown._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert {"build", "scheduler"} <= set(listed)


def test_the_lazy_names_still_resolve() -> None:
    got = run_fresh(
        """
        import json
        from workloadbuilder.cli import InputError, build_objects, read_manifests
        from workloadbuilder.cluster import MemoryCluster
        from workloadbuilder.runtime import Reconciler, link_pod
        print(json.dumps([x.__module__ for x in
                          (InputError, build_objects, read_manifests, MemoryCluster,
                           Reconciler, link_pod)]))
        """
    )
    assert got == [
        "workloadbuilder.cli._common",
        "workloadbuilder.cli._build",
        "workloadbuilder.cli._common",
        "workloadbuilder.cluster._memory._cluster",
        "workloadbuilder.runtime._reconciler",
        "workloadbuilder.runtime._podlink",
    ]


def _openblas_threads(preset: str | None) -> object:
    code = f"""
        import json, os
        os.environ.pop("OPENBLAS_NUM_THREADS", None)
        if {preset!r} is not None:
            os.environ["OPENBLAS_NUM_THREADS"] = {preset!r}
        from workloadbuilder import cli
        try:
            cli.main(["scheduler", "--help"])
        except SystemExit:
            pass
        import numpy
        with open("/proc/self/status") as f:  # the process's OS threads, OpenBLAS's included
            threads = next(int(line.split()[1]) for line in f if line.startswith("Threads:"))
        print(json.dumps([os.environ.get("OPENBLAS_NUM_THREADS"), threads]))
    """
    return run_fresh(code)


def test_the_cli_starts_numpy_without_an_openblas_thread_pool() -> None:
    # no command does linear algebra; the pool's threads cost ~50 ms of CPU at each start
    assert _openblas_threads(None) == ["1", 1]
    assert _openblas_threads("3")[0] == "3"  # type: ignore[index]  # the user's choice stands
