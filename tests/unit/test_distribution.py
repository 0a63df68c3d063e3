"""The wheel that ``pip install workloadbuilder`` installs: one top-level import name.

Built from a copy of the sources (``pyproject.toml``, ``README.md``, ``workloadbuilder/``) with
the project's own build backend, without build isolation (setuptools comes with ``[dev]``), so
the test needs no network. The wheel is then installed into a fresh virtual environment with
``--no-deps --no-index``; the SDK's own dependencies (and theirs) are linked in from this
environment, the extras' (numpy, matplotlib, cel) are not: what ``pip install workloadbuilder``
gives, offline.
"""

from __future__ import annotations

import configparser
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import tomllib
import zipfile
from pathlib import Path
from typing import Any

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


# -- the wheel installed into a fresh virtual environment, without any extra ------------------

#: what the SDK alone must not import (the extras' modules and the HTTP client stack)
NOT_IMPORTED_BY_THE_SDK = ("numpy", "matplotlib", "aiohttp", "kubernetes_asyncio.client")
#: the extras' top-level modules: absent from the fresh environment
EXTRA_MODULES = ("numpy", "matplotlib", "cel")


def _base_distributions() -> set[str]:
    """The distributions that ``pip install workloadbuilder`` (no extra) brings: the
    project's ``dependencies`` and theirs, recursively, as installed in this environment."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    todo = [Requirement(r) for r in project["dependencies"]]
    seen: set[str] = set()
    while todo:
        req = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        name = canonicalize_name(req.name)
        if name in seen:
            continue
        seen.add(name)
        todo.extend(Requirement(r) for r in importlib.metadata.requires(req.name) or ())
    return seen


def _link_base_dependencies(into: Path) -> None:
    """Make the base dependencies importable from ``into`` by linking their installed files'
    top-level entries (and their .dist-info) there: offline, and no extra's module comes along."""
    for name in _base_distributions():
        dist = importlib.metadata.distribution(name)
        site = Path(str(dist.locate_file("")))
        tops = {Path(str(f)).parts[0] for f in dist.files or () if not str(f).startswith("..")}
        for top in tops:
            src = site / top
            if src.exists() and not (into / top).exists():
                (into / top).symlink_to(src)


@pytest.fixture(scope="module")
def fresh_venv(wheel: zipfile.ZipFile, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtual environment holding the wheel and the SDK's own dependencies only."""
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    python = venv / "bin" / "python"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
         "--no-deps", "--no-index", str(wheel.filename)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
    )  # fmt: skip
    deps = venv / "base-deps"
    deps.mkdir()
    _link_base_dependencies(deps)
    (site / "base-deps.pth").write_text(f"{deps}\n")
    return venv


def _run(venv: Path, program: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """Run the fresh environment's ``program`` away from the checkout (so that only the
    installed copy can be imported)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(
        [str(venv / "bin" / program), *argv],
        cwd=venv, capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip


def _python(venv: Path, code: str, *argv: str) -> Any:
    done = _run(venv, "python", "-c", textwrap.dedent(code), *argv)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_fresh_environment_has_no_extra_and_no_checkout(fresh_venv: Path) -> None:
    out = _python(
        fresh_venv,
        """
        import importlib.util, json, sys
        import workloadbuilder
        print(json.dumps({
            "found": {m: importlib.util.find_spec(m) is not None
                      for m in ("numpy", "matplotlib", "cel", "yaml", "kubernetes_asyncio")},
            "file": workloadbuilder.__file__,
            "prefix": sys.prefix,
        }))
        """,
    )
    assert out["found"] == {
        "numpy": False, "matplotlib": False, "cel": False, "yaml": True,
        "kubernetes_asyncio": True,
    }  # fmt: skip
    assert out["file"].startswith(out["prefix"]), out  # the installed copy, not the checkout


def test_the_installed_distribution_has_one_top_level_name_and_py_typed(
    fresh_venv: Path,
) -> None:
    out = _python(
        fresh_venv,
        """
        import importlib.metadata as md, json
        dist = md.distribution("workloadbuilder")
        files = [str(f) for f in dist.files]
        print(json.dumps({
            "tops": sorted({f.split("/")[0] for f in files
                            if not f.split("/")[0].endswith(".dist-info")
                            and not f.startswith("..")}),
            "typed": "workloadbuilder/py.typed" in files,
            "top_level": (dist.read_text("top_level.txt") or "").split(),
        }))
        """,
    )
    assert out["tops"] == ["workloadbuilder"]
    assert out["typed"] is True
    assert out["top_level"] in ([], ["workloadbuilder"])


def test_the_installed_metadata(fresh_venv: Path) -> None:
    out = _python(
        fresh_venv,
        """
        import importlib.metadata as md, json
        m = md.metadata("workloadbuilder")
        print(json.dumps({k: m.get_all(k) for k in (
            "Version", "License-Expression", "Requires-Python", "Classifier", "Project-URL",
            "Summary", "Provides-Extra")}))
        """,
    )
    import workloadbuilder

    assert out["Version"] == [workloadbuilder.__version__]
    assert re.fullmatch(r"\d+\.\d+\.\d+", workloadbuilder.__version__)  # semver
    assert out["License-Expression"] == ["Apache-2.0"]
    assert out["Requires-Python"] == [">=3.11"]
    assert "Typing :: Typed" in out["Classifier"]
    assert "Programming Language :: Python :: 3.11" in out["Classifier"]
    urls = dict(u.split(", ", 1) for u in out["Project-URL"])
    assert {"Homepage", "Documentation", "Changelog"} <= set(urls), urls
    assert out["Summary"] and "v1.37" in out["Summary"][0]
    assert set(out["Provides-Extra"]) >= {"scheduler", "simulator", "integrations", "all"}


def test_the_console_script_prints_the_version(fresh_venv: Path) -> None:
    import workloadbuilder

    done = _run(fresh_venv, "workloadbuilder", "--version")
    assert done.returncode == 0, done.stderr
    assert (
        done.stdout.strip() == f"workloadbuilder {workloadbuilder.__version__} (Kubernetes v1.37)"
    )
    out = _python(
        fresh_venv, "import json, workloadbuilder; print(json.dumps(workloadbuilder.__version__))"
    )
    assert out == workloadbuilder.__version__


def test_the_sdk_alone_imports_no_extra_and_no_http_stack(fresh_venv: Path) -> None:
    out = _python(
        fresh_venv,
        """
        import asyncio, contextlib, io, json, sys
        import workloadbuilder
        from workloadbuilder import (Builder, MemoryCluster, PodGroup, Workload, plan_for,
                                     simple_workload, validate_object)
        import workloadbuilder.api, workloadbuilder.builder, workloadbuilder.kinds
        import workloadbuilder.validation, workloadbuilder.naming, workloadbuilder.lint
        from workloadbuilder.cli import main
        example = sys.argv[1]
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            codes = [main(["build", "-f", example]), main(["validate", "-f", example])]

        async def use_memory_cluster():
            c = MemoryCluster()
            await c.create({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "a"}, "data": {}})
            await c.close()

        asyncio.run(use_memory_cluster())
        print(json.dumps({"codes": codes, "printed": printed.getvalue(),
                          "modules": sorted(sys.modules)}))
        """,
        str(ROOT / "examples" / "job-gang.yaml"),
    )
    assert out["codes"] == [0, 0]
    assert "kind: Workload" in out["printed"]
    loaded = [m for m in NOT_IMPORTED_BY_THE_SDK if m in out["modules"]]
    assert loaded == []


@pytest.mark.parametrize(
    ("argv", "extra"),
    [
        (["simulate", str(ROOT / "examples/simulations/gang-demo.yaml")], "simulator"),
        (["-v", "simulate", str(ROOT / "examples/simulations/gang-demo.yaml")], "simulator"),
        (["scheduler", "--kubeconfig", "nowhere"], "scheduler"),
        (["explain", "podgroup", "g"], "scheduler"),
    ],
)
def test_a_command_whose_extra_is_missing_names_the_extra(
    fresh_venv: Path, argv: list[str], extra: str
) -> None:
    done = _run(fresh_venv, "workloadbuilder", *argv)
    command = next(a for a in argv if not a.startswith("-"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr == (
        f"error: workloadbuilder {command} needs the {extra!r} extra: "
        f"pip install 'workloadbuilder[{extra}]'\n"
    )
    assert "Traceback" not in done.stdout + done.stderr


def test_the_help_lists_the_commands_of_a_missing_extra(fresh_venv: Path) -> None:
    done = _run(fresh_venv, "workloadbuilder", "--help")
    assert done.returncode == 0, done.stderr
    assert "(unavailable: needs the 'scheduler' extra)" in done.stdout
    assert "build" in done.stdout


# -- one version ---------------------------------------------------------------------------


def test_one_version_everywhere() -> None:
    """``__version__`` is the one place; pyproject reads it, the chart, the kustomization's
    image tag and the changelog's latest release follow it."""
    import yaml

    import workloadbuilder

    version = workloadbuilder.__version__
    assert re.fullmatch(r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)", version), version
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project and "version" in project["dynamic"]
    chart = yaml.safe_load((ROOT / "charts" / "workloadbuilder" / "Chart.yaml").read_text())
    assert (chart["version"], chart["appVersion"]) == (version, version)
    kustomization = yaml.safe_load((ROOT / "deploy" / "kustomization.yaml").read_text())
    assert kustomization["images"][0]["newTag"] == version
    changelog = (ROOT / "CHANGELOG.md").read_text()
    releases = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2}$", changelog, re.MULTILINE)
    assert releases and releases[0] == version
    assert "## [Unreleased]" in changelog
    assert "Supported Kubernetes versions:** v1.37" in changelog


def test_the_sdist_holds_the_sources(tmp_path: Path) -> None:
    import tarfile

    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(ROOT / "pyproject.toml", src)
    shutil.copy(ROOT / "README.md", src)
    shutil.copytree(
        ROOT / "workloadbuilder",
        src / "workloadbuilder",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    out = tmp_path / "dist"
    done = subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", str(out)],
        cwd=src,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    import workloadbuilder

    (path,) = out.glob("workloadbuilder-*.tar.gz")
    assert path.name == f"workloadbuilder-{workloadbuilder.__version__}.tar.gz"
    with tarfile.open(path) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert {"pyproject.toml", "README.md", "PKG-INFO", "workloadbuilder/py.typed"} <= names
    assert "workloadbuilder/scheduler/_framework.py" in names
