"""HTTP answers and transport failures -> the typed errors of :mod:`workloadbuilder.errors`:
:func:`error_from_status` reads a ``metav1.Status`` (reason, ``Retry-After``, field causes),
:func:`gave_up` is the final error of a request whose transport failures outlasted the
retries."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from workloadbuilder.cluster._retry import RetryableTransportError
from workloadbuilder.errors import (
    AlreadyExists,
    ApiError,
    BadRequest,
    Conflict,
    FieldError,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    TooManyRequests,
    Unauthorized,
)

__all__ = ["error_from_status", "gave_up"]

#: upstream metav1.CauseType -> field.ErrorType string (as rendered in messages)
_CAUSE_TYPES: dict[str, str] = {
    "FieldValueNotFound": "Not found",
    "FieldValueRequired": "Required value",
    "FieldValueDuplicate": "Duplicate value",
    "FieldValueInvalid": "Invalid value",
    "FieldValueNotSupported": "Unsupported value",
    "FieldValueForbidden": "Forbidden",
    "FieldValueTooLong": "Too long",
    "FieldValueTooMany": "Too many",
    "InternalError": "Internal error",
    "FieldValueTypeInvalid": "Invalid value",
}


def gave_up(what: str, e: RetryableTransportError) -> ApiError:
    """The final error of a request whose transport failures outlasted the retries."""
    reason = "Timeout" if isinstance(e.cause, TimeoutError) else "ConnectionError"
    return ApiError(f"{what}: {reason}: {e}", status=0, reason=reason)


def _retry_after(headers: Mapping[str, str], details: Mapping[str, Any]) -> float | None:
    value = headers.get("Retry-After")
    if value:
        try:
            return max(0.0, float(value))
        except ValueError:
            pass
    seconds = details.get("retryAfterSeconds")
    return float(seconds) if isinstance(seconds, (int, float)) and seconds > 0 else None


def _field_error(cause: Mapping[str, Any]) -> FieldError:
    """A server StatusCause -> FieldError; the message is ``<type>[: <value>][: <detail>]``."""
    path = str(cause.get("field") or "")
    reason = str(cause.get("reason") or "")
    message = str(cause.get("message") or "")
    etype = _CAUSE_TYPES.get(reason)
    if etype is None:
        return FieldError(path=path, type=reason or "Invalid value", detail=message)
    rest = message
    if rest.startswith(etype):
        rest = rest[len(etype) :]
        rest = rest[2:] if rest.startswith(": ") else rest.lstrip(":").lstrip()
    else:
        return FieldError(path=path, type=etype, detail=message)
    if etype in ("Invalid value", "Unsupported value", "Duplicate value", "Too many") and rest:
        try:
            value, end = json.JSONDecoder().raw_decode(rest)
        except ValueError:
            return FieldError(path=path, type=etype, detail=rest)
        tail = rest[end:]
        if not tail or tail.startswith(": "):
            return FieldError(path=path, type=etype, detail=tail[2:], value=value, has_value=True)
        return FieldError(path=path, type=etype, detail=rest)
    return FieldError(path=path, type=etype, detail=rest)


def error_from_status(
    status: int,
    body: bytes | Mapping[str, Any],
    headers: Mapping[str, str],
    *,
    what: str = "",
) -> ApiError:
    """Turn an HTTP error (status code, body - ideally a ``metav1.Status`` - and headers)
    into the matching typed :class:`~workloadbuilder.errors.ApiError`."""
    doc: Any
    if isinstance(body, Mapping):
        doc = dict(body)
    else:
        try:
            doc = json.loads(body) if body else {}
        except ValueError:
            doc = {}
        if not isinstance(doc, dict):
            doc = {}
    if doc.get("kind") != "Status":
        text = body.decode("utf-8", "replace").strip() if isinstance(body, bytes) else ""
        doc = {"message": text[:500]} if text else {}
    code = doc.get("code")
    if isinstance(code, int) and code >= 400:
        status = code
    reason = str(doc.get("reason") or "")
    message = str(doc.get("message") or "") or f"HTTP {status}"
    if what:
        message = f"{message} ({what})" if status >= 500 or status == 0 else message
    details = doc.get("details") if isinstance(doc.get("details"), dict) else {}
    assert isinstance(details, dict)
    kwargs: dict[str, Any] = {
        "status": status,
        "reason": reason or None,
        "retry_after": _retry_after(headers, details),
        "body": doc,
    }
    if status == 400:
        return BadRequest(message, **kwargs)
    if status == 404:
        return NotFound(message, **kwargs)
    if status == 409:
        if reason == "AlreadyExists":
            return AlreadyExists(message, **kwargs)
        return Conflict(message, **kwargs)
    if status == 410:
        return Gone(message, **kwargs)
    if status == 422:
        causes = [
            _field_error(c)
            for c in details.get("causes") or ()
            if isinstance(c, dict) and (c.get("field") or c.get("reason") in _CAUSE_TYPES)
        ]
        return Invalid(message, causes=causes, **kwargs)
    if status == 403:
        return Forbidden(message, **kwargs)
    if status == 401:
        return Unauthorized(message, **kwargs)
    if status == 429:
        return TooManyRequests(message, **kwargs)
    return ApiError(message, **kwargs)
