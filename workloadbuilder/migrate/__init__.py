"""Migrate gang-scheduling objects to the v1.37 workload-aware scheduling API.

Sources: Kubernetes 1.36 ``scheduling.k8s.io/v1alpha2`` Workloads and PodGroups, Volcano
PodGroups, scheduler-plugins coscheduling PodGroups, Apache YuniKorn task groups and Kueue
plain-pod groups. :func:`migrate` returns the v1.37 objects (Workload, CompositePodGroups
where a source has task groups, PodGroups; the pod templates that carried the old links
rewritten to join the new groups) and a :class:`FieldReport` per source field: mapped,
approximated or not expressible in v1.37. :func:`read_cluster` reads the sources from a
live cluster and :func:`apply_objects` creates the result there (server-side dry run
first). See docs/migrate.md.
"""

from workloadbuilder.migrate._core import SOURCES, Source, migrate
from workloadbuilder.migrate._emit import JobMode
from workloadbuilder.migrate._live import ApplyResult, apply_objects, read_cluster
from workloadbuilder.migrate._report import FieldReport, MigrationError, MigrationResult, Outcome

__all__ = [
    "SOURCES",
    "ApplyResult",
    "FieldReport",
    "JobMode",
    "MigrationError",
    "MigrationResult",
    "Outcome",
    "Source",
    "apply_objects",
    "migrate",
    "read_cluster",
]
