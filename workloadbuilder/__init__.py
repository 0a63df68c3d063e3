"""workloadbuilder: the Python SDK for Kubernetes v1.37 workload-aware scheduling.

Subpackages: :mod:`workloadbuilder.api` (typed models and codec),
:mod:`workloadbuilder.validation`, :mod:`workloadbuilder.naming`,
:mod:`workloadbuilder.builder`, :mod:`workloadbuilder.kinds`, :mod:`workloadbuilder.cluster`.
"""

from workloadbuilder.errors import FieldError, ValidationError, WorkloadBuilderError

__version__ = "0.1.0"

__all__ = ["FieldError", "ValidationError", "WorkloadBuilderError", "__version__"]
