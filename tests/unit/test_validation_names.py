"""String-format checks: exact upstream messages (apimachinery v0.37.2)."""

from __future__ import annotations

import pytest

from workloadbuilder.validation import (
    is_dns1123_label,
    is_dns1123_subdomain,
    is_label_key,
    is_label_value,
    is_qualified_name,
)

LABEL_REGEX_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
SUBDOMAIN_REGEX_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
KEY_NAME_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)


@pytest.mark.parametrize("value", ["a", "my-name", "123-abc", "a" * 63])
def test_dns1123_label_accepts(value: str) -> None:
    assert is_dns1123_label(value) == []


def test_dns1123_label_messages() -> None:
    assert is_dns1123_label("Bad_Name") == [LABEL_REGEX_MSG]
    assert is_dns1123_label("a.b") == ["must not contain dots"]
    assert is_dns1123_label("a" * 64) == ["must be no more than 63 characters"]
    assert is_dns1123_label("-" * 64) == ["must be no more than 63 characters", LABEL_REGEX_MSG]
    assert is_dns1123_label("") == [LABEL_REGEX_MSG]
    # Go's $ does not match before a trailing newline
    assert is_dns1123_label("abc\n") == [LABEL_REGEX_MSG]


def test_dns1123_subdomain() -> None:
    assert is_dns1123_subdomain("example.com") == []
    assert is_dns1123_subdomain("a" * 253) == []
    assert is_dns1123_subdomain("Example.com") == [SUBDOMAIN_REGEX_MSG]
    assert is_dns1123_subdomain("a" * 254) == ["must be no more than 253 characters"]


def test_label_key_and_qualified_name() -> None:
    assert is_qualified_name is is_label_key
    for ok in ("rack", "topology.kubernetes.io/zone", "example.com/My_Key.1", "a" * 63):
        assert is_label_key(ok) == []
    assert is_label_key("bad key") == [KEY_NAME_MSG]
    assert is_label_key("/x") == ["prefix part must be non-empty"]
    assert is_label_key("example.com/") == ["name part must be non-empty", KEY_NAME_MSG]
    assert is_label_key("a" * 64) == ["name part must be no more than 63 bytes"]
    assert is_label_key("Bad_Prefix/x")[0].startswith(
        "prefix part a lowercase RFC 1123 subdomain must consist"
    )
    assert is_label_key("a/b/c")[0].startswith("a valid label key must consist of alphanumeric")
    assert is_label_key("a/b/c")[0].endswith(
        "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
    )


def test_label_value() -> None:
    assert is_label_value("") == []
    assert is_label_value("my_value-1") == []
    assert is_label_value("a" * 64)[0] == "must be no more than 63 bytes"
    assert is_label_value("-x")[0].startswith("a valid label must be an empty string")
