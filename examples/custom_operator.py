"""A custom operator in a few lines: plan the scheduling objects for a "Trainer" resource.

Run it with ``.venv/bin/python examples/custom_operator.py``: it prints the Workload and
PodGroups (multi-document YAML) and the pod-set -> PodGroup mapping an operator puts into
``pod.spec.schedulingGroup.podGroupName`` of the pods it creates. Create the objects in the
printed order (Workload first, then PodGroups, then pods); see docs/sdk.md.
"""

from __future__ import annotations

from typing import Any

import yaml

from workloadbuilder.api import object_to_dict
from workloadbuilder.builder import PodSet, simple_workload

# The custom resource the operator reconciles (normally read from the API server).
trainer: dict[str, Any] = {
    "apiVersion": "example.com/v1",
    "kind": "Trainer",
    "metadata": {
        "name": "llm",
        "namespace": "default",
        "uid": "0e6a3f6c-1d8e-4b7e-9c55-3f1f0d2a7b10",
    },
}

plan = simple_workload(
    name=trainer["metadata"]["name"],
    namespace=trainer["metadata"]["namespace"],
    owner=trainer,  # becomes the controller ownerReference of every object
    pod_sets=[
        PodSet(name="driver", replicas=1, gang=False),
        PodSet(
            name="workers",
            replicas=8,  # an 8-pod gang (minCount defaults to 8) inside one rack
            topology_key="topology.kubernetes.io/rack",
            disruption_mode="all",  # preempted as a whole, never pod by pod
        ),
    ],
)

print(yaml.safe_dump_all([object_to_dict(o) for o in plan.objects()], sort_keys=False), end="")
print("# pod set -> spec.schedulingGroup.podGroupName")
for pod_set, pod_group in plan.pod_group_names.items():
    print(f"#   {pod_set}: {pod_group}")
