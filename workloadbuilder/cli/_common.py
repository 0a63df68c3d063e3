"""Flags and I/O shared by the CLI commands (kubectl conventions)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

from workloadbuilder.errors import WorkloadBuilderError

__all__ = [
    "InputError",
    "add_output_flag",
    "dump",
    "one_line",
    "read_documents",
]


class InputError(WorkloadBuilderError):
    """A file could not be read or parsed."""


def add_output_flag(
    parser: argparse.ArgumentParser, choices: Sequence[str] = ("yaml", "json")
) -> None:
    """``-o/--output``."""
    parser.add_argument(
        "-o", "--output", choices=list(choices), default=choices[0], help="output format"
    )


def read_documents(paths: Sequence[str]) -> Iterator[tuple[str, int, Any]]:
    """Yield ``(source, index, document)`` for every YAML/JSON document in ``paths``
    (``-`` is stdin). Empty documents are skipped; a ``kind: List`` is expanded."""
    for path in paths:
        source = "<stdin>" if path == "-" else path
        try:
            text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
        except OSError as e:
            raise InputError(f"cannot read {path}: {e.strerror or e}") from None
        except UnicodeDecodeError:
            raise InputError(f"cannot read {source}: not UTF-8 text") from None
        try:
            docs = list(yaml.safe_load_all(text))
        except yaml.YAMLError as e:
            raise InputError(f"{source}: not valid YAML or JSON: {one_line(e)}") from None
        index = 0
        for doc in docs:
            if doc is None:
                continue
            items = (
                doc.get("items") if isinstance(doc, dict) and doc.get("kind") == "List" else None
            )
            for item in items if isinstance(items, list) else [doc]:
                yield source, index, item
                index += 1


def one_line(e: BaseException) -> str:
    """``e``'s message on one line (its type name when it has no message)."""
    return " ".join(str(e).split()) or type(e).__name__


def dump(objects: Sequence[dict[str, Any]], output: str) -> str:
    """Multi-document YAML, or one JSON ``List`` (a single object is printed as itself)."""
    if output == "json":
        body: Any = {"apiVersion": "v1", "kind": "List", "items": list(objects)}
        return json.dumps(body, indent=2) + "\n"
    return yaml.safe_dump_all(list(objects), sort_keys=False, default_flow_style=False)
