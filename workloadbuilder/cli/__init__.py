"""``workloadbuilder <command>``: the command-line interface (kubectl conventions).

Commands come from the SDK's own modules (``build``, ``validate``, ``controlplane``) and from
packages that register an entry point in the ``workloadbuilder.commands`` group (the reference
scheduler adds ``scheduler``, ``simulate`` and ``explain``). Each provider exposes
``register(subparsers)`` and sets ``func(args) -> int`` on its parsers.

Providers are loaded only when needed: a built-in command (``build``, ``validate``, ...) never
imports them, so it does not pull in the scheduler's dependencies. A provider whose optional
dependencies are missing (``numpy`` without ``workloadbuilder[scheduler]``) does not break the
CLI: its command is listed as unavailable and says which extra to install. A command whose
provider loads but whose run needs an extra (``simulate`` imports numpy and matplotlib as it
starts) is checked before it runs, with the same one-line message.

``workloadbuilder --version`` prints the distribution's version and the Kubernetes minor it
targets, without loading any provider.

Exit codes: 0 success, 1 the input was invalid or the operation failed, 2 usage error,
130 interrupted. Errors are one clear line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import importlib.util
import inspect
import logging
import os
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from workloadbuilder._lazy import lazy_names
from workloadbuilder.errors import WorkloadBuilderError

if TYPE_CHECKING:
    from workloadbuilder.cli._build import build_objects
    from workloadbuilder.cli._common import (
        Document,
        InputError,
        add_filename_flag,
        parse_manifests,
        read_manifests,
    )
    from workloadbuilder.cli._validate import validate_document

__all__ = [
    "Document",
    "InputError",
    "add_filename_flag",
    "build_objects",
    "main",
    "parse_manifests",
    "read_manifests",
    "validate_document",
]

#: public names resolved on first access (module that defines them): a component's start
#: (``workloadbuilder scheduler``) does not load the manifest commands' modules
_LAZY = {
    "Document": "workloadbuilder.cli._common",
    "InputError": "workloadbuilder.cli._common",
    "add_filename_flag": "workloadbuilder.cli._common",
    "parse_manifests": "workloadbuilder.cli._common",
    "read_manifests": "workloadbuilder.cli._common",
    "build_objects": "workloadbuilder.cli._build",
    "validate_document": "workloadbuilder.cli._validate",
}


__getattr__, __dir__ = lazy_names(globals(), _LAZY)


def _one_line(e: BaseException) -> str:
    from workloadbuilder.cli._common import one_line  # an error path: loaded when needed

    return one_line(e)


_BUILTIN = ("_build", "_validate", "_lint", "_controlplane", "_conformance", "_migrate")
#: the command each built-in module registers (tests/unit checks this against _BUILTIN)
_BUILTIN_COMMANDS = {
    "build": "_build",
    "validate": "_validate",
    "lint": "_lint",
    "controlplane": "_controlplane",
    "conformance": "_conformance",
    "migrate": "_migrate",
}
#: top-level module -> the extra of pyproject.toml that installs it (for the CLI's hint)
_OPTIONAL_MODULES = {"numpy": "scheduler", "matplotlib": "simulator"}
#: a provider's command -> the extra it needs and the top-level modules that extra brings
#: which the command imports (checked before the command runs; tests/unit checks the table
#: against pyproject.toml)
_COMMAND_EXTRAS: dict[str, tuple[str, tuple[str, ...]]] = {
    "scheduler": ("scheduler", ("numpy", "cel")),
    "explain": ("scheduler", ("numpy",)),
    "simulate": ("simulator", ("numpy", "matplotlib", "cel")),
}
#: the Kubernetes minor version whose APIs this release speaks (docs/install.md)
KUBERNETES_VERSION = "v1.37"
_log = logging.getLogger(__name__)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: command -> why it cannot run (its provider's optional dependencies are missing)
        self.unavailable: dict[str, str] = {}

    def error(self, message: str) -> Any:  # exit 2 with a one-line message, like kubectl
        self.print_usage(sys.stderr)
        sys.stderr.write(f"error: {message}\n")
        raise SystemExit(2)


def _command_of(argv: Sequence[str]) -> str | None:
    """The command named on the command line (the first argument that is not an option);
    ``None`` when there is none or help is asked for first (help lists every command)."""
    for arg in argv:
        if arg in ("-h", "--help"):
            return None
        if not arg.startswith("-"):
            return arg
    return None


def _needs_extra(command: str, extra: str) -> str:
    """The one-line error of ``command`` run without the extra ``extra``."""
    install = f"pip install 'workloadbuilder[{extra}]'"
    return f"workloadbuilder {command} needs the {extra!r} extra: {install}"


def _missing_extra(command: str | None) -> str | None:
    """Why ``command`` cannot run (an extra it needs is not installed), or ``None``."""
    need = _COMMAND_EXTRAS.get(command or "")
    if need is None:
        return None
    extra, modules = need
    for module in modules:
        if module in sys.modules:
            if sys.modules[module] is None:  # blocked (as the tests simulate a missing one)
                return _needs_extra(command or "", extra)
            continue
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return _needs_extra(command or "", extra)
    return None


def _unavailable(parser: _Parser, sub: Any, name: str, error: ImportError) -> None:
    """Register ``name`` as a command that only explains why it cannot run."""
    missing = (error.name or "").split(".")[0] if isinstance(error, ModuleNotFoundError) else ""
    extra = _OPTIONAL_MODULES.get(missing)
    if extra is None and missing and name in _COMMAND_EXTRAS:
        extra = _COMMAND_EXTRAS[name][0] if missing in _COMMAND_EXTRAS[name][1] else None
    if extra is not None:
        hint = f"needs the {extra!r} extra"
        message = _needs_extra(name, extra)
    else:
        hint = "its dependencies are missing"
        message = f"the {name!r} command is unavailable: {_one_line(error)}"
    sub.add_parser(name, help=f"(unavailable: {hint})", add_help=False)
    parser.unavailable[name] = message


def _register_builtin(sub: Any, name: str) -> None:
    modname = f"{__name__}.{name}"
    if importlib.util.find_spec(modname) is not None:
        importlib.import_module(modname).register(sub)


def _register_providers(parser: _Parser, sub: Any, command: str | None = None) -> None:
    """Every provider's commands; for ``command``, the provider of that name first, and no
    other when it registered the command (the scheduler starts without the simulator's
    and the integrations' modules)."""
    providers = list(entry_points(group="workloadbuilder.commands"))
    if command is not None:
        named = [ep for ep in providers if ep.name == command]
        _load_providers(parser, sub, named)
        if command in sub.choices:
            return
        providers = [ep for ep in providers if ep.name != command]
    _load_providers(parser, sub, providers)


def _load_providers(parser: _Parser, sub: Any, providers: list[Any]) -> None:
    for ep in providers:
        try:
            ep.load()(sub)
        except ImportError as e:  # a provider whose optional deps are missing
            _log.debug("command provider %s unavailable: %s", ep.name, e)
            if ep.name not in sub.choices:
                _unavailable(parser, sub, ep.name, e)


def _make_parser(argv: Sequence[str] = ()) -> _Parser:
    parser = _Parser(
        prog="workloadbuilder",
        description="Kubernetes v1.37 workload-aware scheduling: SDK, scheduler and simulator.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging")
    parser.add_argument(
        "--version",
        action="version",
        version=f"workloadbuilder {_version()} (Kubernetes {KUBERNETES_VERSION})",
        help="print the version and exit",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    command = _command_of(argv)
    if command is None and "--version" in argv and not {"-h", "--help"} & set(argv):
        return parser  # the version needs no command
    builtin = _BUILTIN_COMMANDS.get(command or "")
    if builtin is not None:
        _register_builtin(sub, builtin)  # a built-in command: the providers are not needed
        return parser
    if command is not None:
        # a provider's command (the scheduler's, ...): the other built-ins are not needed
        # either (importing them all costs ~0.2 s of a component's start-up)
        _register_providers(parser, sub, command)
        if command in sub.choices:
            return parser
        for name in _BUILTIN:  # an unknown command: the error lists every command
            _register_builtin(sub, name)
        return parser
    for name in _BUILTIN:  # help: every command
        _register_builtin(sub, name)
    _register_providers(parser, sub)
    return parser


def _version() -> str:
    from workloadbuilder import __version__

    return __version__


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit code."""
    if argv is None:
        argv = sys.argv[1:]
    if "numpy" not in sys.modules:
        # no command does linear algebra: OpenBLAS's thread pool (one thread per core,
        # started when numpy is imported) would only cost CPU (~50 ms of a start on 2 cores)
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    missing = _missing_extra(_command_of(argv))
    if missing is not None:
        print(f"error: {missing}", file=sys.stderr)
        return 1
    parser = _make_parser(argv)
    unavailable = parser.unavailable.get(_command_of(argv) or "")
    if unavailable is not None:
        print(f"error: {unavailable}", file=sys.stderr)
        return 1
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING - 10 * min(args.verbose, 2),
        format="%(levelname)s %(name)s: %(message)s",
    )
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return 2
    loop_choice = vars(args).get("event_loop", _NO_LOOP_FLAG)
    if loop_choice is not _NO_LOOP_FLAG:  # a command with --event-loop: check it first
        from workloadbuilder.runtime import resolve_event_loop

        try:
            resolve_event_loop(loop_choice)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    try:
        result = func(args)
        if inspect.isawaitable(result):
            if loop_choice is _NO_LOOP_FLAG:
                result = asyncio.run(_await(result))
            else:
                from workloadbuilder.runtime import run as run_on_loop

                result = run_on_loop(_await(result), event_loop=loop_choice)
        return int(result or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except (WorkloadBuilderError, OSError) as e:
        print(f"error: {_one_line(e)}", file=sys.stderr)
        return 1
    except UnicodeDecodeError as e:  # input read outside read_manifests (a command's own file)
        print(f"error: input is not UTF-8 text: {_one_line(e)}", file=sys.stderr)
        return 1
    except Exception as e:  # a bug: still one line; -v logs the traceback
        _log.info("internal error", exc_info=True)
        print(f"error: internal error: {type(e).__name__}: {_one_line(e)}", file=sys.stderr)
        return 1


#: ``args`` of a command without ``--event-loop`` (it runs on plain asyncio)
_NO_LOOP_FLAG: Any = object()


async def _await(aw: Any) -> Any:
    return await aw


if __name__ == "__main__":
    sys.exit(main())
