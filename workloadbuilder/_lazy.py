"""Public names a package resolves on first access (PEP 562 module ``__getattr__``).

A package lists ``name -> defining module`` and binds what :func:`lazy_names` returns::

    __getattr__, __dir__ = lazy_names(globals(), _LAZY)

The defining module is imported the first time the name is read, and the value is then
stored in the package's namespace (later reads do not come back here); ``dir()`` lists
``__all__`` as well as what is loaded.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(
    namespace: dict[str, Any], table: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of the package whose ``globals()`` is
    ``namespace``, resolving the names of ``table`` (name -> module that defines it)."""
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(namespace.get("__all__", ())))

    return __getattr__, __dir__
