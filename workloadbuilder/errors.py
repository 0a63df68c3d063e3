"""The SDK's one error hierarchy.

``WorkloadBuilderError`` is the root. Validation failures carry :class:`FieldError` items
rendered like the API server (``spec.podGroupTemplates[0].name: Invalid value: "Bad_Name":
...``). API failures (``ApiError`` and its subclasses) come from any ``Cluster``
implementation and carry the HTTP status code and, for ``Invalid``, the server's causes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import attrs

__all__ = [
    "AlreadyExists",
    "ApiError",
    "BadRequest",
    "BuildError",
    "Conflict",
    "FieldError",
    "Forbidden",
    "Gone",
    "Invalid",
    "NotFound",
    "TooManyRequests",
    "Unauthorized",
    "ValidationError",
    "WorkloadBuilderError",
]

# Upstream field.ErrorType strings (k8s.io/apimachinery/pkg/util/validation/field).
_TYPES_WITH_VALUE = {"Invalid value", "Unsupported value", "Duplicate value", "Too many"}


@attrs.frozen(kw_only=True)
class FieldError:
    """One validation error at a JSON field path, rendered like the API server.

    ``type`` is the upstream ``field.ErrorType`` string: ``Required value``, ``Invalid value``,
    ``Forbidden``, ``Too many``, ``Duplicate value``, ``Unsupported value``, ``Too long``,
    ``Internal error``.
    """

    path: str
    type: str
    detail: str = ""
    value: Any = attrs.field(default=None, eq=False)
    has_value: bool = attrs.field(default=False, eq=False)

    def __str__(self) -> str:
        head = f"{self.path}: {self.type}" if self.path else self.type
        if self.has_value and self.type in _TYPES_WITH_VALUE:
            head += f": {_render_value(self.value)}"
        return f"{head}: {self.detail}" if self.detail else head


def _render_value(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value, separators=(",", ":"), default=str)


class WorkloadBuilderError(Exception):
    """Root of every error the SDK raises on purpose."""


class ValidationError(WorkloadBuilderError):
    """Validation failed; ``errors`` lists every FieldError found."""

    def __init__(
        self,
        errors: Sequence[FieldError],
        *,
        subject: str = "",
        causes: Sequence[FieldError] = (),
    ) -> None:
        #: the errors of the object that was validated (a planned object, or the input)
        self.errors = tuple(errors)
        self.subject = subject
        #: when ``errors`` are about a derived object: the source object's fields at fault
        #: (a Job name too long for the PodGroupTemplate name derived from it)
        self.causes = tuple(causes)
        lines = "; ".join(str(e) for e in (*self.causes, *self.errors))
        super().__init__(f"{subject}: {lines}" if subject else lines)


class BuildError(WorkloadBuilderError):
    """The builder could not produce an object (e.g. gang without a resolved minCount)."""


class ApiError(WorkloadBuilderError):
    """An API request failed. ``status`` is the HTTP code; ``reason`` the Status reason."""

    code: int = 0
    default_reason: str = ""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        reason: str | None = None,
        retry_after: float | None = None,
        body: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status if status is not None else self.code
        self.reason = reason or self.default_reason
        self.retry_after = retry_after
        self.body = body or {}


class BadRequest(ApiError):
    """400 BadRequest (e.g. a body the server cannot decode: a number out of int32 range, a
    string where a number belongs)."""

    code, default_reason = 400, "BadRequest"


class NotFound(ApiError):
    """404 NotFound."""

    code, default_reason = 404, "NotFound"


class AlreadyExists(ApiError):
    """409 AlreadyExists."""

    code, default_reason = 409, "AlreadyExists"


class Conflict(ApiError):
    """409 Conflict (stale resourceVersion, failed precondition, already bound)."""

    code, default_reason = 409, "Conflict"


class Gone(ApiError):
    """410 Gone / Expired: the resourceVersion is too old to watch from."""

    code, default_reason = 410, "Expired"


class Invalid(ApiError):
    """422 Invalid; ``causes`` are the server's field errors."""

    code, default_reason = 422, "Invalid"

    def __init__(self, message: str, *, causes: Sequence[FieldError] = (), **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.causes = tuple(causes)


class Forbidden(ApiError):
    """403 Forbidden (RBAC, or admission that forbids the request)."""

    code, default_reason = 403, "Forbidden"


class Unauthorized(ApiError):
    """401 Unauthorized."""

    code, default_reason = 401, "Unauthorized"


class TooManyRequests(ApiError):
    """429 TooManyRequests; ``retry_after`` in seconds when the server said so."""

    code, default_reason = 429, "TooManyRequests"
