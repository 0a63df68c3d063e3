"""The wheel that ``pip install workloadbuilder`` installs: one top-level import name.

Built from a copy of the sources (``pyproject.toml``, ``README.md``, ``workloadbuilder/``) with
the project's own build backend, without build isolation (setuptools comes with ``[dev]``), so
the test needs no network.
"""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    src = tmp_path_factory.mktemp("src")
    shutil.copy(ROOT / "pyproject.toml", src)
    shutil.copy(ROOT / "README.md", src)
    shutil.copytree(
        ROOT / "workloadbuilder",
        src / "workloadbuilder",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out)],
        cwd=src,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (path,) = out.glob("workloadbuilder-*.whl")
    return zipfile.ZipFile(path)


def test_the_wheel_has_one_top_level_import_name(wheel: zipfile.ZipFile) -> None:
    names = wheel.namelist()
    top = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(".dist-info")}
    assert top == {"workloadbuilder"}
    (top_level,) = [n for n in names if n.endswith(".dist-info/top_level.txt")] or [None]
    if top_level is not None:  # setuptools writes it; other backends may not
        assert wheel.read(top_level).decode().split() == ["workloadbuilder"]


def test_the_reference_packages_are_inside_the_namespace(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    for pkg in ("scheduler", "integrations", "integrations/job", "simulator"):
        assert f"workloadbuilder/{pkg}/__init__.py" in names, pkg
    assert "workloadbuilder/scheduler/_framework.py" in names
    assert "workloadbuilder/py.typed" in names
    assert any(n.startswith("workloadbuilder/conformance/rules/") for n in names)


def test_the_console_script_and_the_commands_point_into_the_namespace(
    wheel: zipfile.ZipFile,
) -> None:
    (path,) = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    entry = configparser.ConfigParser()
    entry.read_string(wheel.read(path).decode())
    assert entry["console_scripts"]["workloadbuilder"] == "workloadbuilder.cli:main"
    commands = dict(entry["workloadbuilder.commands"])
    assert commands == {
        "scheduler": "workloadbuilder.scheduler.cli:register",
        "integrations": "workloadbuilder.integrations.cli:register",
        "simulate": "workloadbuilder.simulator.cli:register",
    }
