"""CEL of device selectors (``device.driver``, ``device.attributes``, ``device.capacity``,
``quantity()``, ``compareTo``, ``isGreaterThan``, ``isLessThan``): each expression compiled
once, each verdict computed once per device until the device changes."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from workloadbuilder.resources import quantity_value
from workloadbuilder.scheduler._dra._devices import Device, DeviceId

__all__ = ["Cel"]


def _quantity(text: Any) -> float:
    return quantity_value(str(text))


def _compare(a: Any, b: Any) -> int:
    return int(a > b) - int(a < b)


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": _quantity,
    "compareTo": _compare,
    "isGreaterThan": lambda a, b: a > b,
    "isLessThan": lambda a, b: a < b,
    "asInteger": lambda a: int(a),
    "asApproximateFloat": lambda a: float(a),
}


def _context(d: Device) -> Any:
    """The device's CEL context (made on first use, kept on the device)."""
    if d.ctx is None:
        import cel  # on first use: the package imports its CLI (typer, rich): ~0.15 s

        ctx = cel.Context()
        for fname, fn in _FUNCTIONS.items():
            ctx.add_function(fname, fn)
        ctx.add_variable("device", d.variable)
        d.ctx = ctx
    return d.ctx


class Cel:
    """Compiled selectors and their verdicts per device."""

    def __init__(self) -> None:
        self._programs: dict[str, Any] = {}
        self._verdicts: dict[str, dict[DeviceId, bool | str]] = {}

    def program(self, expression: str) -> Any:
        """The compiled expression (raises on a compile error)."""
        prog = self._programs.get(expression)
        if prog is None:
            import cel  # on first use (see _context)

            prog = self._programs[expression] = cel.compile(expression)
        return prog

    def verdict(self, expression: str, d: Device) -> bool | str:
        """The selector on the device (cached per device until it changes): True, False, or
        the text of a runtime error (the device does not match)."""
        cache = self._verdicts.setdefault(expression, {})
        got = cache.get(d.id)
        if got is None:
            try:
                value = self.program(expression).execute(_context(d))
            except Exception as e:  # a CEL runtime error: the device does not match
                got = f"CEL runtime error: {type(e).__name__}: {e}"
            else:
                got = value if isinstance(value, bool) else "the selector is not a boolean"
            cache[d.id] = got
        return got

    def forget(self, changed: Iterable[DeviceId]) -> None:
        """The devices ``changed`` (or are gone): their verdicts are recomputed."""
        changed = list(changed)
        for verdicts in self._verdicts.values():
            for k in changed:
                verdicts.pop(k, None)
