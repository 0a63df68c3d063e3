"""The control-plane harness on an error path that needs no real binaries: a component that
cannot be executed leaves no open log file behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from workloadbuilder.testing import ControlPlane


def _open_files() -> set[str]:
    fds = Path("/proc/self/fd")
    out = set()
    for fd in fds.iterdir():
        try:
            out.add(os.readlink(fd))
        except OSError:
            continue
    return out


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc (Linux)")
def test_unexecutable_component_leaves_no_open_log_file(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("etcd", "kube-apiserver"):
        binary = bin_dir / name
        binary.write_text("#!/nonexistent/interpreter\n")  # execve fails: Popen raises
        binary.chmod(0o755)
    run_dir = tmp_path / "run"
    plane = ControlPlane(run_dir, bin_dir=bin_dir)
    with pytest.raises(OSError) as failure:
        plane.start()
    log = str(run_dir / "logs" / "etcd.log")
    assert Path(log).exists()
    # the error (and its traceback) is still held, as a caller that reports it later would
    assert failure.value.__traceback__ is not None
    assert log not in _open_files()
    assert not plane.running
