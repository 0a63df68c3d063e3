"""Flags and I/O shared by the CLI commands (kubectl conventions)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import yaml

from workloadbuilder.errors import WorkloadBuilderError

__all__ = [
    "Document",
    "InputError",
    "add_filename_flag",
    "add_output_flag",
    "dump",
    "one_line",
    "parse_manifests",
    "read_manifests",
]


class InputError(WorkloadBuilderError):
    """A file could not be read or parsed (the CLI's exit code 1)."""


def add_output_flag(
    parser: argparse.ArgumentParser, choices: Sequence[str] = ("yaml", "json")
) -> None:
    """``-o/--output``."""
    parser.add_argument(
        "-o", "--output", choices=list(choices), default=choices[0], help="output format"
    )


def add_filename_flag(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    """``-f/--filename FILE`` (repeatable; ``-`` is stdin), read with :func:`read_manifests`."""
    parser.add_argument(
        "-f",
        "--filename",
        action="append",
        required=required,
        metavar="FILE",
        help="manifest file (YAML or JSON, multi-document; '-' for stdin); repeatable",
    )


@attrs.frozen
class Document:
    """One document of a manifest file: where it came from and what it holds.

    ``number`` counts from 1 within its ``source`` (after ``kind: List`` expansion); ``obj``
    is whatever the YAML held (a mapping for a Kubernetes object; a scalar or a list is the
    caller's to refuse, see :meth:`require_object`)."""

    source: str
    number: int
    obj: Any

    def identity(self, default_namespace: str = "default") -> str | None:
        """``Kind namespace/name`` when the document says so, else None."""
        if not isinstance(self.obj, Mapping):
            return None
        kind = self.obj.get("kind")
        meta = self.obj.get("metadata")
        name = meta.get("name") if isinstance(meta, Mapping) else None
        if not (isinstance(kind, str) and kind and isinstance(name, str) and name):
            return None
        ns = meta.get("namespace") if isinstance(meta, Mapping) else None
        return f"{kind} {ns if isinstance(ns, str) and ns else default_namespace}/{name}"

    def where(self, default_namespace: str = "default") -> str:
        """``FILE document N`` and, when known, ``: Kind namespace/name``."""
        where = f"{self.source} document {self.number}"
        ident = self.identity(default_namespace)
        return f"{where}: {ident}" if ident else where

    def require_object(self) -> Mapping[str, Any]:
        """``obj`` when it is a mapping; otherwise InputError naming what it is."""
        if not isinstance(self.obj, Mapping):
            raise InputError(f"expected a Kubernetes object (a mapping), got {_describe(self.obj)}")
        return self.obj

    def error(self, e: BaseException | str, default_namespace: str = "default") -> str:
        """The one-line ``error:`` message for a failure of this document: ``FILE document N:
        Kind ns/name: <message>``, without repeating the identity when the message already
        starts with it."""
        message = e if isinstance(e, str) else one_line(e)
        ident = self.identity(default_namespace)
        for prefix in filter(None, (ident, _short_identity(self.obj))):
            if message.startswith(f"{prefix}: "):
                message = message[len(prefix) + 2 :]
                break
        return f"error: {self.where(default_namespace)}: {message}"


def _short_identity(obj: Any) -> str | None:
    if not isinstance(obj, Mapping):
        return None
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    kind = obj.get("kind")
    return f"{kind} {name}" if isinstance(kind, str) and isinstance(name, str) else None


def _describe(value: Any) -> str:
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


def _read_bytes(path: str) -> bytes:
    if path == "-":
        buffer = getattr(sys.stdin, "buffer", None)
        if buffer is not None:
            data: bytes = buffer.read()
            return data
        return str(sys.stdin.read()).encode("utf-8", "surrogatepass")
    target = Path(path)
    if target.is_dir():
        raise InputError(f"cannot read {path}: is a directory")
    if not target.exists():
        raise InputError(f"cannot read {path}: no such file")
    try:
        return target.read_bytes()
    except OSError as e:
        raise InputError(f"cannot read {path}: {(e.strerror or str(e)).lower()}") from None


def _yaml_problem(e: yaml.YAMLError) -> str:
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    problem = getattr(e, "problem", None) or ""
    context = getattr(e, "context", None)
    text = problem if problem else one_line(e)
    if context and problem:
        text = f"{problem} ({context})"
    if mark is not None:
        return f"line {mark.line + 1}, column {mark.column + 1}: {one_line(Exception(text))}"
    return one_line(Exception(text))


def parse_manifests(data: bytes, source: str) -> list[Document]:
    """The documents of one manifest file's bytes (see :func:`read_manifests`)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"cannot read {source}: not UTF-8 text") from None
    try:
        raw = list(yaml.safe_load_all(text))
    except yaml.YAMLError as e:
        raise InputError(f"{source}: not valid YAML or JSON: {_yaml_problem(e)}") from None
    except RecursionError:
        raise InputError(f"{source}: not valid YAML or JSON: nested too deeply") from None
    except (ValueError, TypeError, OverflowError) as e:  # e.g. a timestamp out of range
        raise InputError(f"{source}: not valid YAML or JSON: {one_line(e)}") from None
    docs: list[Document] = []
    for doc in raw:
        if doc is None:
            continue
        items = doc.get("items") if isinstance(doc, dict) and doc.get("kind") == "List" else None
        for item in items if isinstance(items, list) else [doc]:
            docs.append(Document(source=source, number=len(docs) + 1, obj=item))
    return docs


def read_manifests(paths: Sequence[str], *, command: str = "") -> list[Document]:
    """Every document of the manifest files ``paths`` (``-`` is stdin), in order.

    The one reader of ``-f FILE|-`` for every command. Empty documents are skipped and a
    ``kind: List`` is expanded; documents are numbered from 1 per file. Raises
    :class:`InputError` (one line, never a traceback) for a missing file, a directory,
    bytes that are not UTF-8, malformed YAML (with line and column), and, when ``command``
    is given, for input without any document (``no objects passed to <command>``)."""
    docs: list[Document] = []
    for path in paths:
        source = "<stdin>" if path == "-" else path
        docs.extend(parse_manifests(_read_bytes(path), source))
    if command and not docs:
        raise InputError(f"no objects passed to {command}")
    return docs


def one_line(e: BaseException) -> str:
    """``e``'s message on one line (its type name when it has no message)."""
    return " ".join(str(e).split()) or type(e).__name__


def dump(objects: Sequence[dict[str, Any]], output: str) -> str:
    """Multi-document YAML, or one JSON ``List`` (a single object is printed as itself)."""
    if output == "json":
        body: Any = {"apiVersion": "v1", "kind": "List", "items": list(objects)}
        return json.dumps(body, indent=2) + "\n"
    return yaml.safe_dump_all(list(objects), sort_keys=False, default_flow_style=False)
