"""The few string formats the building-block checks need, with upstream's messages.

(``k8s.io/apimachinery/pkg/api/validate/content`` at v0.37.2.) Kept local so the builder does not
depend on the full validation package for three regular expressions.
"""

from __future__ import annotations

import re

__all__ = ["dns1123_label_errors", "dns1123_subdomain_errors", "label_key_errors"]

_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN_FMT = _LABEL_FMT + "(\\." + _LABEL_FMT + ")*"
_LABEL_RE = re.compile(f"^{_LABEL_FMT}$")
_SUBDOMAIN_RE = re.compile(f"^{_SUBDOMAIN_FMT}$")
_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character"
)
_KEY_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_KEY_NAME_RE = re.compile(f"^{_KEY_NAME_FMT}$")
_KEY_NAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character"
)


def _regex_error(msg: str, regex: str, *examples: str) -> str:
    if not examples:
        return f"{msg} (regex used for validation is '{regex}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{regex}')"


def _max_len(n: int) -> str:
    return f"must be no more than {n} bytes"


def _fullmatch(regex: re.Pattern[str], value: str) -> bool:
    # Go's regexp "$" does not match before a trailing newline; Python's does.
    return regex.match(value) is not None and not value.endswith("\n")


def dns1123_label_errors(value: str) -> list[str]:
    """Messages of ``content.IsDNS1123Label``."""
    errs: list[str] = []
    if len(value.encode()) > 63:
        errs.append(_max_len(63))
    if not _fullmatch(_LABEL_RE, value):
        if _fullmatch(_SUBDOMAIN_RE, value):
            errs.append("must not contain dots")
        else:
            errs.append(_regex_error(_LABEL_MSG, _LABEL_FMT, "my-name", "123-abc"))
    return errs


def dns1123_subdomain_errors(value: str) -> list[str]:
    """Messages of ``content.IsDNS1123Subdomain``."""
    errs: list[str] = []
    if len(value.encode()) > 253:
        errs.append(_max_len(253))
    if not _fullmatch(_SUBDOMAIN_RE, value):
        errs.append(_regex_error(_SUBDOMAIN_MSG, _SUBDOMAIN_FMT, "example.com"))
    return errs


def label_key_errors(value: str) -> list[str]:
    """Messages of ``content.IsLabelKey``."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend(f"prefix part {m}" for m in dns1123_subdomain_errors(prefix))
    else:
        return [
            "a valid label key "
            + _regex_error(_KEY_NAME_MSG, _KEY_NAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name.encode()) > 63:
        errs.append("name part " + _max_len(63))
    if not _fullmatch(_KEY_NAME_RE, name):
        errs.append(
            "name part "
            + _regex_error(_KEY_NAME_MSG, _KEY_NAME_FMT, "MyName", "my.name", "123-abc")
        )
    return errs
