"""String-format checks with the exact upstream messages.

Two flavours exist upstream and they differ only in the length message:

* ``k8s.io/apimachinery/pkg/util/validation`` (object names, namespaces) says
  ``must be no more than 253 characters``;
* ``k8s.io/apimachinery/pkg/api/validate/content`` (declarative ``k8s-short-name`` /
  ``k8s-long-name`` / ``k8s-label-key`` formats) says ``must be no more than 63 bytes``.

Both measure the length in bytes (Go ``len``). Label keys and label values only exist in the
``content`` flavour (``util/validation`` re-exports them).
"""

from __future__ import annotations

import re

__all__ = [
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_label_key",
    "is_label_value",
    "is_path_segment_name",
    "is_qualified_name",
    "name_is_dns_label",
    "name_is_dns_subdomain",
]

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character"
)
_LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_KEY_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_LABEL_VALUE_FMT = "(" + _LABEL_KEY_FMT + ")?"
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
    "or '.', and must start and end with an alphanumeric character"
)

# Go's regexp ``^...$`` on a string is a full match (``$`` does not accept a trailing newline).
_DNS1123_LABEL_RE = re.compile(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)
_LABEL_KEY_RE = re.compile(_LABEL_KEY_FMT)
_LABEL_VALUE_RE = re.compile(_LABEL_VALUE_FMT)


def _blen(value: str) -> int:
    return len(value.encode("utf-8", "surrogatepass"))


def _match(regex: re.Pattern[str], value: str) -> bool:
    return regex.fullmatch(value) is not None


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """``RegexError`` from apimachinery (note the double space between examples)."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    msg += " (e.g. "
    for i, example in enumerate(examples):
        if i > 0:
            msg += " or "
        msg += f"'{example}', "
    return msg + f"regex used for validation is '{fmt}')"


def _max_len(length: int, unit: str) -> str:
    return f"must be no more than {length} {unit}"


def _dns1123_label(value: str, unit: str) -> list[str]:
    errs: list[str] = []
    if _blen(value) > 63:
        errs.append(_max_len(63, unit))
    if not _match(_DNS1123_LABEL_RE, value):
        if _match(_DNS1123_SUBDOMAIN_RE, value):
            errs.append("must not contain dots")
        else:
            errs.append(regex_error(_DNS1123_LABEL_MSG, _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def _dns1123_subdomain(value: str, unit: str) -> list[str]:
    errs: list[str] = []
    if _blen(value) > 253:
        errs.append(_max_len(253, unit))
    if not _match(_DNS1123_SUBDOMAIN_RE, value):
        errs.append(regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_dns1123_label(value: str) -> list[str]:
    """``validation.IsDNS1123Label`` (util/validation wording: "... 63 characters")."""
    return _dns1123_label(value, "characters")


def is_dns1123_subdomain(value: str) -> list[str]:
    """``validation.IsDNS1123Subdomain`` (util/validation wording: "... 253 characters")."""
    return _dns1123_subdomain(value, "characters")


def content_dns1123_label(value: str) -> list[str]:
    """``content.IsDNS1123Label``: the declarative ``k8s-short-name`` format ("... bytes")."""
    return _dns1123_label(value, "bytes")


def content_dns1123_subdomain(value: str) -> list[str]:
    """``content.IsDNS1123Subdomain``: the declarative ``k8s-long-name`` format."""
    return _dns1123_subdomain(value, "bytes")


def is_label_key(value: str) -> list[str]:
    """``content.IsLabelKey`` (= ``validation.IsQualifiedName``): ``[prefix/]name``."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in content_dns1123_subdomain(prefix))
    else:
        errs.append(
            "a valid label key "
            + regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        )
        return errs
    if not name:
        errs.append("name part must be non-empty")
    elif _blen(name) > 63:
        errs.append("name part " + _max_len(63, "bytes"))
    if not _match(_LABEL_KEY_RE, name):
        errs.append(
            "name part "
            + regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
        )
    return errs


#: ``validation.IsQualifiedName`` is the same function as ``IsLabelKey`` upstream.
is_qualified_name = is_label_key


def is_label_value(value: str) -> list[str]:
    """``content.IsLabelValue`` (= ``validation.IsValidLabelValue``)."""
    errs: list[str] = []
    if _blen(value) > 63:
        errs.append(_max_len(63, "bytes"))
    if not _match(_LABEL_VALUE_RE, value):
        errs.append(regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def is_path_segment_name(value: str) -> list[str]:
    """``content.IsPathSegmentName`` (the ``k8s-path-segment-name`` format)."""
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{bad}'" for bad in ("/", "%") if bad in value]


def _mask_trailing_dash(name: str) -> str:
    # Upstream quirk kept verbatim: drops two characters and appends "a".
    if len(name) > 1 and name.endswith("-"):
        return name[:-2] + "a"
    return name


def name_is_dns_subdomain(name: str, prefix: bool) -> list[str]:
    """``apimachinery/pkg/api/validation.NameIsDNSSubdomain`` (object names)."""
    return is_dns1123_subdomain(_mask_trailing_dash(name) if prefix else name)


def name_is_dns_label(name: str, prefix: bool) -> list[str]:
    """``NameIsDNSLabel`` (namespace names)."""
    return is_dns1123_label(_mask_trailing_dash(name) if prefix else name)
