"""How often the harness's kube-apiserver v1.37.2 sends bookmarks on idle watches.

Starts a control plane, opens watches that receive no change (pods and PodGroups of an
empty namespace, with and without ``timeoutSeconds``, all pods with a field selector,
ConfigMaps of an empty namespace while ConfigMaps elsewhere change every 5 s), resumes each
one from its last resourceVersion when the server ends it, and prints every bookmark and
end with its time, then the gaps per watch. ``KubeCluster``'s stall bound
(``watch_stall_factor`` x ``watch_bookmark_interval``) is tied to these gaps (see
docs/reliability.md). Usage: ``python benchmarks/watch_bookmarks.py [--seconds 660]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

from workloadbuilder.cluster import KubeCluster
from workloadbuilder.testing import ControlPlane


async def _watch(
    kc: KubeCluster,
    name: str,
    kind: str,
    ns: str | None,
    timeout: float | None,
    seconds: float,
    out: list[tuple[str, float, str, str]],
    **selectors: Any,
) -> None:
    t0 = time.monotonic()
    rv = (await kc.list(kind, ns)).resource_version
    while time.monotonic() - t0 < seconds:
        async for ev in kc.watch(
            kind,
            ns,
            resource_version=rv,
            allow_bookmarks=True,
            timeout_seconds=timeout,
            **selectors,
        ):
            meta = ev.object.get("metadata") if isinstance(ev.object, dict) else None
            got = str((meta or {}).get("resourceVersion") or "")
            rv = got or rv
            out.append((name, round(time.monotonic() - t0, 1), ev.type, rv))
            print(*out[-1], flush=True)
        out.append((name, round(time.monotonic() - t0, 1), "END", rv))
        print(*out[-1], flush=True)


async def _writer(kc: KubeCluster, ns: str) -> None:
    i = 0
    while True:
        await asyncio.sleep(5)
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}"}}
        await kc.create(cm, ns)
        i += 1


async def main(seconds: float) -> dict[str, Any]:
    """Run the watches for ``seconds``; returns every bookmark and the gaps."""
    out: list[tuple[str, float, str, str]] = []
    async with ControlPlane() as cp:
        idle = cp.create_namespace("idle-")
        busy = cp.create_namespace("busy-")
        # no stall bound here: we want to see the server's own cadence
        kc = KubeCluster.from_kubeconfig(
            cp.kubeconfig, watch_idle_timeout=3600, watch_bookmark_interval=0
        )
        watches = [
            ("pods-idle", "Pod", idle, None, {}),
            ("pods-idle-timeout330", "Pod", idle, 330.0, {}),
            ("podgroups-idle", "PodGroup", idle, None, {}),
            (
                "pods-all-unbound-timeout570",
                "Pod",
                None,
                570.0,
                {"field_selector": "spec.nodeName="},
            ),
            ("configmaps-idle-others-busy", "ConfigMap", idle, None, {}),
        ]
        tasks = [
            asyncio.create_task(_watch(kc, n, k, ns, t, seconds, out, **sel))
            for n, k, ns, t, sel in watches
        ]
        tasks.append(asyncio.create_task(_writer(kc, busy)))
        await asyncio.sleep(seconds)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await kc.close()
    gaps: dict[str, list[float]] = {}
    last: dict[str, float] = {}
    for name, t, _, _ in out:
        gaps.setdefault(name, []).append(round(t - last.get(name, 0.0), 1))
        last[name] = t
    return {"seconds": seconds, "events": out, "gaps": gaps}


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=660.0)
    args = p.parse_args()
    report = asyncio.run(main(args.seconds))
    print(json.dumps(report["gaps"], indent=1))
    sys.exit(0)
