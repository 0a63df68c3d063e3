"""``workloadbuilder scheduler`` with a memory probe (the child of ``benchmarks/memprobe.py``).

    python benchmarks/_memprobe_child.py OUT_DIR scheduler --kubeconfig=...

On SIGUSR1 (the n-th time) it collects garbage and writes ``OUT_DIR/probe-<n>.json``: RSS,
glibc ``mallinfo2``, the object count by type, the sizes of every container reachable from
the Scheduler object (and the asyncio tasks); from the second signal on, a ``tracemalloc``
snapshot ``OUT_DIR/snap-<n>.pickle`` (tracing starts at the first signal, so a diff of two
snapshots holds only what was allocated after the first one and is still alive;
``MEMPROBE_FRAMES`` frames per trace, 0: no tracing, for RSS figures without its overhead).
On SIGUSR2 it calls ``malloc_trim(0)`` and writes ``OUT_DIR/trim-<n>.json`` (RSS before and
after) and ``OUT_DIR/pymalloc-<n>.txt`` (``sys._debugmallocstats()``).
"""

from __future__ import annotations

import asyncio
import collections
import ctypes
import gc
import json
import os
import signal
import sys
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

OUT = Path(sys.argv[1])
_count = {"probe": 0, "trim": 0}
_libc = ctypes.CDLL("libc.so.6")


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (n, ctypes.c_size_t)
        for n in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


_libc.mallinfo2.restype = _MallInfo2


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _mallinfo() -> dict[str, int]:
    m = _libc.mallinfo2()
    return {f[0]: int(getattr(m, f[0])) for f in _MallInfo2._fields_}


def _sizes(root: object, prefix: str, out: dict[str, int], seen: set[int], depth: int) -> None:
    """len() of every container reachable through attributes, dict values, list items (first
    few), to ``depth``."""
    if id(root) in seen or depth < 0:
        return
    seen.add(id(root))
    if isinstance(root, (str, bytes, int, float, bool)) or root is None:
        return
    if isinstance(root, (dict, list, set, frozenset, tuple, collections.deque)):
        out[prefix] = len(root)
        if isinstance(root, dict):
            items = list(root.items())[:3]
            for _k, v in items:
                _sizes(v, f"{prefix}[*]", out, seen, depth - 1)
        elif not isinstance(root, (set, frozenset)):
            for v in list(root)[:3]:
                _sizes(v, f"{prefix}[*]", out, seen, depth - 1)
        return
    mod = type(root).__module__ or ""
    if not (mod.startswith(("scheduler", "workloadbuilder", "aiohttp", "prometheus"))):
        return
    attrs: dict[str, Any] = {}
    if hasattr(root, "__dict__"):
        attrs.update(vars(root))
    for cls in type(root).__mro__:
        for s in getattr(cls, "__slots__", ()):
            if hasattr(root, s):
                attrs[s] = getattr(root, s)
    for k, v in attrs.items():
        _sizes(v, f"{prefix}.{k}", out, seen, depth - 1)


def _probe() -> None:
    from prometheus_client import CollectorRegistry

    from workloadbuilder.scheduler import Scheduler

    # the scheduler's GC policy keeps the long-lived heap frozen (runtime.GcPolicy), and
    # gc.get_objects() lists only the collected generations: thaw it, collect everything
    # (the policy freezes the survivors again), thaw again for the census, refreeze after
    frozen = gc.get_freeze_count()
    gc.unfreeze()
    gc.collect()
    gc.unfreeze()
    n = _count["probe"] = _count["probe"] + 1
    report: dict[str, Any] = {"n": n, "rss_kib": _rss_kib(), "mallinfo": _mallinfo()}
    report["gc_frozen"] = frozen
    objs = gc.get_objects()
    report["gc_objects"] = len(objs)
    types = collections.Counter(f"{type(o).__module__}.{type(o).__qualname__}" for o in objs)
    report["types"] = dict(types.most_common(150))
    sizes: dict[str, int] = {}
    # the scheduler's metrics registry, found like the Scheduler (no private import)
    registries = [o for o in objs if isinstance(o, CollectorRegistry)]
    for o in objs:
        if type(o) is Scheduler:
            _sizes(o, "scheduler", sizes, set(), 7)
            report["events_queued"] = len(o.status._event_queue)
            report["events_dropped"] = getattr(o.status, "events_dropped", None)
    report["sizes"] = sizes
    del objs
    if frozen:
        gc.freeze()
    try:
        report["tasks"] = collections.Counter(
            (t.get_coro().__qualname__ if t.get_coro() else "?")  # type: ignore[union-attr]
            for t in asyncio.all_tasks()
        )
    except RuntimeError:
        report["tasks"] = {}
    report["metric_samples"] = sum(len(m.samples) for r in registries for m in r.collect())
    report["tracemalloc_kib"] = tracemalloc.get_tracemalloc_memory() // 1024
    if tracemalloc.is_tracing():
        tracemalloc.take_snapshot().dump(str(OUT / f"snap-{n}.pickle"))
        report["traced_kib"] = tracemalloc.get_traced_memory()[0] // 1024
    elif os.environ.get("MEMPROBE_FRAMES", "8") != "0":
        tracemalloc.start(int(os.environ.get("MEMPROBE_FRAMES", "8")))
    (OUT / f"probe-{n}.json").write_text(json.dumps(report, indent=1) + "\n")


def _trim() -> None:
    gc.collect()
    n = _count["trim"] = _count["trim"] + 1
    before, info = _rss_kib(), _mallinfo()
    _libc.malloc_trim(0)
    after = _rss_kib()
    fd = os.open(OUT / f"pymalloc-{n}.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    saved = os.dup(2)
    try:
        sys.stderr.flush()
        os.dup2(fd, 2)
        sys._debugmallocstats()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)
    (OUT / f"trim-{n}.json").write_text(
        json.dumps({"n": n, "rss_before_kib": before, "rss_after_kib": after, "mallinfo": info})
    )


def main() -> int:
    """Install the handlers and run the CLI with the remaining arguments."""
    OUT.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGUSR1, lambda *_: _probe())
    signal.signal(signal.SIGUSR2, lambda *_: _trim())
    from workloadbuilder.cli import main as cli

    return cli(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
