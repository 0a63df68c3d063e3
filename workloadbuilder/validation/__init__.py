"""Validation identical to kube-apiserver v1.37 for the workload-aware scheduling API.

``validate_workload`` / ``validate_pod_group`` / ``validate_composite_pod_group`` /
``validate_object`` return every :class:`~workloadbuilder.errors.FieldError` the API server
reports for a create (``old=None``) or an update, in the server's order, rendered like the
server (``str(error)``). ``validate_job_scheduling`` does the same for ``Job.spec.scheduling``;
:mod:`workloadbuilder.validation.building_blocks` validates single v1alpha3 building blocks
at a controller's own field path.

What the server does before validating is reproduced too: defaulting
(:func:`apply_defaults`) and dropping fields of disabled feature gates
(:func:`drop_disabled_fields`, driven by :class:`FeatureGates`). Known, intentional
differences: the *value* shown for errors about whole structs (``Duplicate value`` of a list
item, the depth error) is the SDK's JSON rendering, not Go's; a ``generateName`` is completed
with a fixed suffix instead of a random one; ``metadata.resourceVersion`` is left to the
storage layer.
"""

from workloadbuilder.validation._common import codec_error
from workloadbuilder.validation._gates import FeatureGates, is_served
from workloadbuilder.validation._job import validate_job_scheduling
from workloadbuilder.validation._names import (
    content_dns1123_label,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_label_key,
    is_label_value,
    is_qualified_name,
)
from workloadbuilder.validation._scheduling import (
    MAX_CLAIMS,
    MAX_PRIORITY,
    MAX_TEMPLATE_DEPTH,
    MAX_TEMPLATES,
    PREEMPTION_POLICIES,
    apply_defaults,
    drop_disabled_fields,
    validate_composite_pod_group,
    validate_object,
    validate_pod_group,
    validate_workload,
)

__all__ = [
    "MAX_CLAIMS",
    "MAX_PRIORITY",
    "MAX_TEMPLATES",
    "MAX_TEMPLATE_DEPTH",
    "PREEMPTION_POLICIES",
    "FeatureGates",
    "apply_defaults",
    "codec_error",
    "content_dns1123_label",
    "drop_disabled_fields",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_label_key",
    "is_label_value",
    "is_qualified_name",
    "is_served",
    "validate_composite_pod_group",
    "validate_job_scheduling",
    "validate_object",
    "validate_pod_group",
    "validate_workload",
]
