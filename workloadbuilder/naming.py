"""Deterministic object names, identical to the upstream v1.37.2 controllers.

Job (kube-controller-manager v1.37.2, ``pkg/controller/job/job_scheduling_manager.go``):

* PodGroupTemplate: ``<job-name>-pgt-0`` (:func:`job_template_name`).
* Workload: ``<job-name, truncated>-<hash>`` where ``hash`` is
  ``rand.SafeEncodeString(decimal(fnv32a(spew("%#v", job.UID))))`` and the prefix is cut so the
  name fits a DNS-1123 subdomain (253 bytes) (:func:`workload_name`).
* PodGroup: ``<workload>-<template>-<hash>`` with ``hash = SafeEncodeString(decimal(
  fnv32a(workload + template)))`` and *balanced* truncation of the two parts
  (:func:`pod_group_name`).

Objects without ``metadata.uid`` (a manifest that was never submitted) cannot be named exactly
as the controller will name them, because the UID is assigned by the API server. This SDK then
hashes the string ``<namespace>/<name>`` in place of the UID (see :func:`workload_name`); the
result is stable and unique per namespace, but differs from the name the real controller will
use once the object exists.

JobSet (kubernetes-sigs/jobset KEP-969 and its controller) derives its names differently; the
``jobset_*`` helpers reproduce those rules for the JobSet adapter. (LeaderWorkerSet names are
made in :mod:`workloadbuilder.kinds.lws`, after kubernetes-sigs/lws PR #982.)

Names are treated as ASCII (every valid Kubernetes name is); truncation counts characters.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

__all__ = [
    "DNS1123_LABEL_MAX_LENGTH",
    "DNS1123_SUBDOMAIN_MAX_LENGTH",
    "fnv32a",
    "job_template_name",
    "jobset_group_template_name",
    "jobset_hashed_name",
    "jobset_identity_hash",
    "jobset_job_template_name",
    "jobset_pod_group_name",
    "jobset_replicated_job_template_name",
    "jobset_top_level_template_name",
    "jobset_workload_name",
    "pod_group_name",
    "safe_encode_string",
    "uid_hash",
    "workload_name",
]

DNS1123_SUBDOMAIN_MAX_LENGTH = 253
DNS1123_LABEL_MAX_LENGTH = 63

# k8s.io/apimachinery/pkg/util/rand: vowels are left out to avoid "bad words".
_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"

_FNV32_OFFSET = 0x811C9DC5
_FNV32_PRIME = 0x01000193


def fnv32a(data: bytes) -> int:
    """Return the 32-bit FNV-1a hash of ``data`` (Go's ``hash/fnv.New32a``)."""
    h = _FNV32_OFFSET
    for byte in data:
        h ^= byte
        h = (h * _FNV32_PRIME) & 0xFFFFFFFF
    return h


def safe_encode_string(s: str) -> str:
    """Map each character to ``bcdfghjklmnpqrstvwxz2456789`` (Go's ``rand.SafeEncodeString``)."""
    return "".join(_ALPHANUMS[ord(c) % len(_ALPHANUMS)] for c in s)


def _hash_decimal(value: int) -> str:
    return safe_encode_string(str(value))


def uid_hash(uid: str) -> str:
    """The Workload-name hash of an object UID.

    Upstream writes ``dump.ForHash(job.UID)`` -- spew's ``%#v`` rendering of a ``types.UID``,
    i.e. ``(types.UID)<uid>`` -- into an FNV-1a hasher and safe-encodes the decimal sum.
    """
    return _hash_decimal(fnv32a(f"(types.UID){uid}".encode()))


def _identity(name: str, uid: str | None, namespace: str | None) -> str:
    if uid:
        return uid
    return f"{namespace or 'default'}/{name}"


def job_template_name(job_name: str) -> str:
    """The single PodGroupTemplate name the Job controller compiles: ``<job>-pgt-0``."""
    return f"{job_name}-pgt-0"


def workload_name(name: str, uid: str | None = None, namespace: str | None = None) -> str:
    """The Workload name the Job controller gives the Job ``name`` with ``uid``.

    ``<name truncated>-<uid_hash(uid)>``, at most 253 characters. Without a UID (a manifest
    that was never submitted) the string ``<namespace>/<name>`` (namespace defaulting to
    ``default``) is hashed in place of the UID: deterministic, but not the name the real
    controller will choose once the API server has assigned a UID.
    """
    suffix = uid_hash(_identity(name, uid, namespace))
    max_prefix = DNS1123_SUBDOMAIN_MAX_LENGTH - len(suffix) - 1
    return f"{name[:max_prefix]}-{suffix}"


def pod_group_name(workload: str, template: str) -> str:
    """The PodGroup name for ``template`` of Workload ``workload``: ``<wl>-<tpl>-<hash>``.

    The hash covers the full, untruncated names. When ``wl + tpl`` does not fit the remaining
    space, each part gets up to half; a part shorter than its half leaves the rest to the other,
    and when both are longer the workload part gets the extra character of an odd split.
    """
    suffix = _hash_decimal(fnv32a(workload.encode() + template.encode()))
    available = DNS1123_SUBDOMAIN_MAX_LENGTH - len(suffix) - 2
    wl, tpl = workload, template
    if len(wl) + len(tpl) > available:
        half = available // 2
        if len(wl) <= half:
            tpl = tpl[: available - len(wl)]
        elif len(tpl) <= half:
            wl = wl[: available - len(tpl)]
        else:
            wl = wl[: available - half]
            tpl = tpl[:half]
    return f"{wl}-{tpl}-{suffix}"


# --------------------------------------------------------------------------- JobSet (KEP-969)

_JOBSET_HASH_LENGTH = 10


def _sha1_hex(s: str) -> str:
    return hashlib.sha1(s.encode(), usedforsecurity=False).hexdigest()


def jobset_identity_hash(kind: str, namespace: str, name: str) -> str:
    """First 10 hex characters of SHA-1 over ``<kind>/<namespace>/<name>``."""
    return _sha1_hex(f"{kind}/{namespace}/{name}")[:_JOBSET_HASH_LENGTH]


def jobset_hashed_name(prefix: str, hash_: str) -> str:
    """``<prefix>-<hash>``, the prefix cut so the result fits a DNS label (63)."""
    name = f"{prefix}-{hash_}"
    if len(name) <= DNS1123_LABEL_MAX_LENGTH:
        return name
    return f"{prefix[: DNS1123_LABEL_MAX_LENGTH - 1 - len(hash_)]}-{hash_}"


def jobset_workload_name(jobset: str, namespace: str) -> str:
    """The single Workload of a JobSet: ``<jobset>-<sha1(JobSet/<ns>/<jobset>)[:10]>``."""
    return jobset_hashed_name(jobset, jobset_identity_hash("JobSet", namespace, jobset))


def jobset_top_level_template_name(jobset: str, namespace: str) -> str:
    """Template name of the one JobSet-wide group (top-level mode); equals the Workload name."""
    return jobset_workload_name(jobset, namespace)


def jobset_replicated_job_template_name(jobset: str, namespace: str, replicated_job: str) -> str:
    """Template of one ReplicatedJob (per-ReplicatedJob mode)."""
    h = jobset_identity_hash("ReplicatedJob", namespace, f"{jobset}/{replicated_job}")
    return jobset_hashed_name(replicated_job, h)


def jobset_group_template_name(jobset: str, namespace: str, targets: Sequence[str]) -> str:
    """Template shared by a ``replicatedJobs`` entry: target names joined with ``-``."""
    group = "-".join(targets)
    h = jobset_identity_hash("ReplicatedJobGroup", namespace, f"{jobset}/{group}")
    return jobset_hashed_name(group, h)


def jobset_job_template_name(
    jobset: str, namespace: str, replicated_job: str, job_index: int
) -> str:
    """Template of one child Job (Gang-of-Gangs per-Job mode): ``<rj>-<index>-<hash>``."""
    h = jobset_identity_hash("Job", namespace, f"{jobset}/{replicated_job}/{job_index}")
    return jobset_hashed_name(f"{replicated_job}-{job_index}", h)


def jobset_pod_group_name(jobset: str, template: str, *, top_level: bool = False) -> str:
    """PodGroup name for a JobSet template.

    Top-level mode reuses the template name. Otherwise ``<jobset>-<template>`` when it fits a
    DNS label; else the JobSet name cut to 52 characters plus ``-`` and the first 10 hex
    characters of SHA-1 over ``<jobset>/<template>``.
    """
    if top_level:
        return template
    name = f"{jobset}-{template}"
    if len(name) <= DNS1123_LABEL_MAX_LENGTH:
        return name
    h = _sha1_hex(f"{jobset}/{template}")[:_JOBSET_HASH_LENGTH]
    return f"{jobset[: DNS1123_LABEL_MAX_LENGTH - 1 - _JOBSET_HASH_LENGTH]}-{h}"
