"""``examples/deploy/integrations``: every file listed, names agree, the Deployment's args
parse with the CLI, ports and the webhook's Service line up."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import yaml

from workloadbuilder.integrations.cli import register

DIR = Path(__file__).resolve().parents[2] / "examples" / "deploy" / "integrations"


def _docs() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for p in sorted(DIR.glob("*.yaml")):
        for d in yaml.safe_load_all(p.read_text()):
            if d:
                out[d["kind"]] = d
    return out


def test_kustomization_lists_every_manifest() -> None:
    k = _docs()["Kustomization"]
    assert set(k["resources"]) == {p.name for p in DIR.glob("*.yaml")} - {"kustomization.yaml"}
    assert k["namespace"] == _docs()["Namespace"]["metadata"]["name"]


def test_deployment_service_and_webhook_agree() -> None:
    docs = _docs()
    dep, svc, mwc = docs["Deployment"], docs["Service"], docs["MutatingWebhookConfiguration"]
    pod = dep["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == docs["ServiceAccount"]["metadata"]["name"]
    (container,) = pod["containers"]
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(container["args"])
    assert args.kinds == "job,jobset,lws" and args.leader_elect
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"webhook": args.webhook_port, "metrics": args.metrics_port}
    assert svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]
    for hook in mwc["webhooks"]:
        ref = hook["clientConfig"]["service"]
        assert (ref["name"], ref["namespace"]) == (
            svc["metadata"]["name"],
            svc["metadata"]["namespace"],
        )
        assert ref["port"] == svc["spec"]["ports"][0]["port"]
        assert hook["failurePolicy"] == "Ignore" and hook["sideEffects"] == "None"
        assert hook["rules"][0]["operations"] == ["CREATE"]
    lease = docs["Role"]["rules"][1]["resourceNames"]
    assert lease == [args.leader_elect_lease_name]
