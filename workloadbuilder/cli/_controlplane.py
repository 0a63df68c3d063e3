"""``workloadbuilder controlplane up|build``: a local v1.37.2 WAS control plane without Docker."""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

from workloadbuilder.testing import BIN_DIR_ENV, ControlPlane, ControlPlaneError

__all__ = ["register"]

_SCRIPT = Path(__file__).resolve().parents[2] / "hack" / "build-controlplane.sh"


def register(subparsers: Any) -> None:
    """Add ``controlplane`` with the sub-commands ``up`` and ``build``."""
    parser = subparsers.add_parser(
        "controlplane",
        help="run a local v1.37.2 control plane (etcd, kube-apiserver, ...) with WAS enabled",
        description="Run or build a local Kubernetes v1.37.2 control plane with every "
        "workload-aware-scheduling feature gate on.",
    )
    sub = parser.add_subparsers(dest="controlplane_command", metavar="COMMAND")
    up = sub.add_parser(
        "up",
        help="start it in the foreground; prints KUBECONFIG=<path> when ready",
        description="Start etcd and kube-apiserver on free loopback ports, print "
        "'KUBECONFIG=<absolute path>' once the API server is ready and run until SIGINT/SIGTERM.",
    )
    up.add_argument("--dir", type=Path, help="run directory (kept; default: a temporary one)")
    up.add_argument(
        "--with-controller-manager",
        action="store_true",
        help="also run kube-controller-manager (job, GC, namespace, podgroup protection, "
        "resourceclaim controllers)",
    )
    up.add_argument("--with-scheduler", action="store_true", help="also run kube-scheduler")
    up.add_argument(
        "--bin-dir", type=Path, help=f"binary directory (default: ${BIN_DIR_ENV} or cache)"
    )
    up.set_defaults(func=_up)
    build = sub.add_parser(
        "build",
        help="build the binaries with hack/build-controlplane.sh (needs Go >= 1.26)",
    )
    build.add_argument("components", nargs="*", help="default: all four")
    build.set_defaults(func=_build)
    parser.set_defaults(func=lambda _args: _usage(parser))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_usage(sys.stderr)
    sys.stderr.write("error: a sub-command is required (up, build)\n")
    return 2


def _up(args: argparse.Namespace) -> int:
    stop = threading.Event()
    started = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        if not started.is_set():
            raise KeyboardInterrupt
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    plane = ControlPlane(
        args.dir,
        with_controller_manager=args.with_controller_manager,
        with_scheduler=args.with_scheduler,
        bin_dir=args.bin_dir,
    )
    try:
        plane.start()
        started.set()
        print(f"KUBECONFIG={plane.kubeconfig}", flush=True)
        print(
            f"kube-apiserver {plane.server} ready; logs in {plane.log_dir}; "
            "Ctrl-C (SIGINT) or SIGTERM stops it",
            file=sys.stderr,
            flush=True,
        )
        while not stop.wait(1.0):
            plane.check()
    except KeyboardInterrupt:
        return 130 if not started.is_set() else 0
    except ControlPlaneError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        plane.stop()
        for sig, prev in previous.items():
            signal.signal(sig, prev)
    print("control plane stopped", file=sys.stderr)
    return 0


def _build(args: argparse.Namespace) -> int:
    if not _SCRIPT.is_file():
        print(
            f"error: {_SCRIPT} not found; `controlplane build` needs a source checkout of "
            "workloadbuilder (the script builds from the pinned Go modules in hack/)",
            file=sys.stderr,
        )
        return 1
    return subprocess.call(["bash", str(_SCRIPT), *args.components])
