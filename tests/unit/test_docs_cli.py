"""The CLI and the docs agree.

Rule: ``docs/cli.md`` has one section per command (a heading ``## `workloadbuilder <command>```)
whose **Flags** table lists, in its first column, exactly the flags ``--help`` shows for that
command (``-h``/``--help`` aside). And every ``workloadbuilder <command> ...`` command line in
a fenced code block or an inline code span of any docs page uses only flags that command has.
"""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from workloadbuilder.cli import _make_parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
CLI_PAGE = DOCS / "cli.md"
_HEADING = re.compile(r"^## `(workloadbuilder(?: [a-z][a-z0-9-]*)*)`\s*$")
_FLAG = re.compile(r"`(--?[A-Za-z0-9][A-Za-z0-9-]*)`")
_HELP = frozenset({"-h", "--help"})


def _commands() -> dict[str, argparse.ArgumentParser]:
    """Every command of the CLI (``workloadbuilder``, ``workloadbuilder lint topology``, ...)."""
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        found[path] = parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{path} {name}")

    walk(_make_parser(), "workloadbuilder")
    return found


def _help_flags(parser: argparse.ArgumentParser) -> set[str]:
    """The flags ``--help`` shows (suppressed ones are not shown)."""
    return {
        opt
        for action in parser._actions
        if action.help != argparse.SUPPRESS
        for opt in action.option_strings
    } - _HELP


def _all_flags(parser: argparse.ArgumentParser) -> set[str]:
    return {opt for action in parser._actions for opt in action.option_strings}


def _documented() -> dict[str, set[str]]:
    """command -> the flags of its section's Flags table in docs/cli.md."""
    sections: dict[str, set[str]] = {}
    current: str | None = None
    for line in CLI_PAGE.read_text().splitlines():
        m = _HEADING.match(line)
        if m:
            current = m.group(1)
            assert current not in sections, f"docs/cli.md: two sections for {current!r}"
            sections[current] = set()
        elif line.startswith("## "):
            current = None
        elif current is not None and line.startswith("|"):
            first = line.strip("|").split("|")[0]
            sections[current].update(_FLAG.findall(first))
    return sections


COMMANDS = _commands()
DOCUMENTED = _documented()


def test_every_command_has_a_section() -> None:
    assert sorted(set(COMMANDS) - set(DOCUMENTED)) == []
    assert sorted(set(DOCUMENTED) - set(COMMANDS)) == [], "docs/cli.md documents no such command"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_flags_table_matches_help(command: str) -> None:
    shown = _help_flags(COMMANDS[command])
    documented = DOCUMENTED.get(command, set())
    assert sorted(shown - documented) == [], f"{command}: flags of --help missing in docs/cli.md"
    assert sorted(documented - shown) == [], f"{command}: docs/cli.md lists flags it has not"


def _code_lines(text: str) -> Iterator[str]:
    """The lines of fenced code blocks, continuation lines (``\\``) joined."""
    fence: str | None = None
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if fence is None:
            if stripped.startswith(("```", "~~~")):
                fence = stripped[:3]
            continue
        if stripped.startswith(fence):
            fence = None
            pending = ""
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        yield pending + stripped
        pending = ""


_INVOCATION = re.compile(r"(?:^|[\s/;&|(`$])workloadbuilder(?=\s)((?:\s+[^\s|;&>)`]+)*)")


_INLINE = re.compile(r"`(workloadbuilder [^`]+)`")


def _prose_lines(text: str) -> Iterator[str]:
    """The inline code spans of the prose that are command lines (``workloadbuilder ...``)."""
    fence: str | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if fence is None and stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
        elif fence is not None and stripped.startswith(fence):
            fence = None
        elif fence is None:
            yield from _INLINE.findall(line)


def _invocations() -> Iterator[tuple[str, list[str]]]:
    """(page, argv) for each ``workloadbuilder ...`` command line in the docs' code blocks and
    inline code spans."""
    for page in sorted(DOCS.rglob("*.md")):
        text = page.read_text()
        for line in [*_code_lines(text), *_prose_lines(text)]:
            if line.startswith("#"):
                continue
            for m in _INVOCATION.finditer(line):
                try:
                    argv = shlex.split(m.group(1), comments=True)
                except ValueError:
                    argv = m.group(1).split()
                yield str(page.relative_to(ROOT)), argv


def _command_of(argv: list[str]) -> tuple[str, list[str]]:
    """The deepest command ``argv`` names and the arguments after it."""
    command = "workloadbuilder"
    rest = list(argv)
    while rest and f"{command} {rest[0]}" in COMMANDS:
        command = f"{command} {rest.pop(0)}"
    return command, rest


def test_docs_command_lines_use_existing_flags() -> None:
    bad: list[str] = []
    seen = 0
    for page, argv in _invocations():
        command, rest = _command_of(argv)
        if command == "workloadbuilder" and rest and not rest[0].startswith("-"):
            continue  # prose such as "workloadbuilder is ..." in a block, not a command line
        seen += 1
        flags = _all_flags(COMMANDS[command])
        for arg in rest:
            arg = arg.strip("[]{}(),")  # an optional flag in a synopsis: [--context C]
            if arg.startswith("-") and arg != "-":
                flag = arg.split("=", 1)[0]
                if flag not in flags:
                    bad.append(f"{page}: {command} has no flag {flag} ({shlex.join(argv)})")
    assert seen > 20, "the docs' command lines were not found"
    assert bad == []
