"""Deterministic names: known vectors from the upstream v1.37.2 code, truncation, properties.

The vectors were computed by running the upstream Go code (``hash/fnv``, ``k8s.io/utils/dump``
``ForHash``, ``k8s.io/apimachinery/pkg/util/rand.SafeEncodeString`` at the versions
kube-controller-manager v1.37.2 vendors, and the job controller's ``computeWorkloadName`` /
``computePodGroupName`` logic) on the inputs below.
"""

from __future__ import annotations

import hashlib
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workloadbuilder import naming

_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

UID = "3f0a1c2e-1111-4a2b-9c3d-0123456789ab"


def test_fnv32a_reference_values() -> None:
    # Published FNV-1a 32-bit test values.
    assert naming.fnv32a(b"") == 0x811C9DC5
    assert naming.fnv32a(b"a") == 0xE40C292C
    assert naming.fnv32a(b"foobar") == 0xBF9CF968


def test_safe_encode_string_alphabet() -> None:
    # alphabet "bcdfghjklmnpqrstvwxz2456789": '0' is 48, 48 % 27 == 21 -> '4';
    # '9' is 57, 57 % 27 == 3 -> 'f'.
    assert naming.safe_encode_string("0") == "4"
    assert naming.safe_encode_string("9") == "f"
    assert naming.safe_encode_string("0123456789") == "456789bcdf"


@pytest.mark.parametrize(
    ("uid", "expected"),
    [
        ("abc", "54b6d87f7"),
        (UID, "c8f889c78"),
        ("", "69ddf977d7"),
        ("0b5d1ab4-2b8e-4c43-9f6e-9d2f7c1e8a01", "6b556464fd"),
    ],
)
def test_uid_hash_matches_upstream(uid: str, expected: str) -> None:
    assert naming.uid_hash(uid) == expected


def test_job_template_name() -> None:
    assert naming.job_template_name("trainer") == "trainer-pgt-0"


@pytest.mark.parametrize(
    ("name", "uid", "workload", "pod_group"),
    [
        ("trainer", UID, "trainer-c8f889c78", "trainer-c8f889c78-trainer-pgt-0-64cc7bc995"),
        (
            "pi",
            "0b5d1ab4-2b8e-4c43-9f6e-9d2f7c1e8a01",
            "pi-6b556464fd",
            "pi-6b556464fd-pi-pgt-0-64d979ff9c",
        ),
    ],
)
def test_job_names_match_upstream(name: str, uid: str, workload: str, pod_group: str) -> None:
    wl = naming.workload_name(name, uid)
    assert wl == workload
    assert naming.pod_group_name(wl, naming.job_template_name(name)) == pod_group


def test_workload_name_without_uid_hashes_namespace_and_name() -> None:
    # Vector: the upstream hash applied to the identity "default/trainer".
    assert naming.workload_name("trainer", None, "default") == "trainer-5bbcffb886"
    assert naming.workload_name("trainer") == "trainer-5bbcffb886"
    assert naming.workload_name("trainer", None, "other") != "trainer-5bbcffb886"
    assert naming.workload_name("trainer", "", "default") == "trainer-5bbcffb886"


def test_long_job_name_is_truncated_to_subdomain_length() -> None:
    wl = naming.workload_name("a" * 250, UID)
    assert wl == "a" * 243 + "-c8f889c78"
    assert len(wl) == 253
    # Long workload and template: both exceed half of the 241 available characters.
    pg = naming.pod_group_name(wl, naming.job_template_name("a" * 250))
    assert pg == "a" * 121 + "-" + "a" * 120 + "-59bc8566fd"


@pytest.mark.parametrize(
    ("wl", "tpl", "expected"),
    [
        # workload fits its half: the template gets the rest
        ("w" * 100, "t" * 200, "w" * 100 + "-" + "t" * 141 + "-7766888445"),
        # template fits its half: the workload gets the rest
        ("w" * 200, "t" * 100, "w" * 142 + "-" + "t" * 100 + "-967c4f7df"),
        # both exceed half: even split, the workload gets the odd character
        ("w" * 200, "t" * 200, "w" * 121 + "-" + "t" * 120 + "-6f9f45db49"),
        ("w" * 121, "t" * 121, "w" * 121 + "-" + "t" * 120 + "-86bdcddbc4"),
        # short: untouched
        ("w" * 10, "t" * 10, "wwwwwwwwww-tttttttttt-77f9f7c4c"),
    ],
)
def test_pod_group_name_balanced_truncation(wl: str, tpl: str, expected: str) -> None:
    assert naming.pod_group_name(wl, tpl) == expected
    assert len(naming.pod_group_name(wl, tpl)) <= 253


_names = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,250}[a-z0-9])?", fullmatch=True)


@settings(max_examples=60, deadline=None)
@given(name=_names, uid=st.uuids().map(str))
def test_workload_names_are_valid_subdomains(name: str, uid: str) -> None:
    wl = naming.workload_name(name, uid)
    assert len(wl) <= 253
    assert _SUBDOMAIN.match(wl)
    assert wl.startswith(name[:200])
    assert naming.workload_name(name, uid) == wl  # deterministic


@settings(max_examples=60, deadline=None)
@given(wl=_names, tpl=_names)
def test_pod_group_names_fit_and_keep_prefixes(wl: str, tpl: str) -> None:
    pg = naming.pod_group_name(wl, tpl)
    assert len(pg) <= 253
    assert _SUBDOMAIN.match(pg)
    suffix = pg.rsplit("-", 1)[1]
    head = pg[: -len(suffix) - 1]
    available = 253 - len(suffix) - 2
    if len(wl) + len(tpl) <= available:
        assert head == f"{wl}-{tpl}"
    else:
        assert len(head) == available + 1
        # each part keeps at least min(own length, half) characters
        half = available // 2
        assert head.startswith(wl[: min(len(wl), half)])


# ------------------------------------------------------------------------------- JobSet


def _sha10(s: str) -> str:
    return hashlib.sha1(s.encode(), usedforsecurity=False).hexdigest()[:10]


def test_jobset_names() -> None:
    h = _sha10("JobSet/ml/trainer")
    assert naming.jobset_workload_name("trainer", "ml") == f"trainer-{h}"
    assert naming.jobset_top_level_template_name("trainer", "ml") == f"trainer-{h}"
    rj = naming.jobset_replicated_job_template_name("trainer", "ml", "workers")
    assert rj == f"workers-{_sha10('ReplicatedJob/ml/trainer/workers')}"
    grp = naming.jobset_group_template_name("trainer", "ml", ["driver", "workers"])
    assert grp == f"driver-workers-{_sha10('ReplicatedJobGroup/ml/trainer/driver-workers')}"
    job = naming.jobset_job_template_name("trainer", "ml", "workers", 3)
    assert job == f"workers-3-{_sha10('Job/ml/trainer/workers/3')}"
    assert naming.jobset_pod_group_name("trainer", rj) == f"trainer-{rj}"
    assert naming.jobset_pod_group_name("trainer", "x", top_level=True) == "x"


def test_jobset_long_names_fit_a_label() -> None:
    long = "j" * 70
    wl = naming.jobset_workload_name(long, "ns")
    assert len(wl) == 63
    assert wl == "j" * 52 + "-" + _sha10(f"JobSet/ns/{long}")
    pg = naming.jobset_pod_group_name(long, "workers-0123456789")
    assert pg == "j" * 52 + "-" + _sha10(f"{long}/workers-0123456789")
    assert _LABEL.match(pg)
