"""The docs site builds with ``mkdocs build --strict``.

A broken link (to a page, an anchor, or a repository file outside ``docs/``), a page missing
from the nav, or an API reference (mkdocstrings) that does not resolve fails the build. The
negative cases build a copy of the site with one defect each and expect the build to fail, so
that the strict configuration itself is tested.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


def test_mkdocs_is_installed() -> None:
    import material  # type: ignore[import-untyped]  # noqa: F401  (mkdocs-material)
    import mkdocs  # noqa: F401
    import mkdocstrings  # noqa: F401


def test_site_builds_strict(tmp_path: Path) -> None:
    site = tmp_path / "site"
    done = _mkdocs_build(ROOT / "mkdocs.yml", site)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (site / "index.html").is_file()
    assert (site / "performance-history" / "index.html").is_file()
    # the API reference is generated from the docstrings
    api = (site / "reference" / "builder" / "index.html").read_text()
    assert "workloadbuilder.builder" in api and "doc-heading" in api
    # a link to a repository file outside docs/ becomes a link to the repository
    page = (site / "conformance" / "index.html").read_text()
    assert "/blob/main/examples/conformance/clusterrole.yaml" in page


def _copy_site(tmp_path: Path) -> Path:
    """A copy of the site's sources whose pages the negative tests may break."""
    copy = tmp_path / "repo"
    copy.mkdir()
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", copy / "docs")
    (copy / "hack").mkdir()
    shutil.copy(ROOT / "hack" / "mkdocs_hooks.py", copy / "hack" / "mkdocs_hooks.py")
    for name in ("workloadbuilder", "benchmarks", "examples", "tests", "charts", "deploy"):
        if (ROOT / name).exists():
            (copy / name).symlink_to(ROOT / name)
    for name in ("README.md", "CHANGELOG.md", "Makefile", "pyproject.toml"):
        if (ROOT / name).exists():
            shutil.copy(ROOT / name, copy / name)
    return copy


@pytest.mark.parametrize(
    ("defect", "expected"),
    [
        ("broken-page-link", "missing-page.md"),
        ("broken-anchor", "#no-such-section"),
        ("broken-repo-link", "no-such-file.py"),
        ("page-not-in-nav", "orphan.md"),
        ("bad-api-reference", "workloadbuilder.no_such_module"),
    ],
)
def test_strict_build_fails_on(defect: str, expected: str, tmp_path: Path) -> None:
    copy = _copy_site(tmp_path)
    docs = copy / "docs"
    page = docs / "lint.md"
    if defect == "broken-page-link":
        page.write_text(page.read_text() + "\nSee [this](missing-page.md).\n")
    elif defect == "broken-anchor":
        page.write_text(page.read_text() + "\nSee [this](sdk.md#no-such-section).\n")
    elif defect == "broken-repo-link":
        page.write_text(page.read_text() + "\nSee [this](../benchmarks/no-such-file.py).\n")
    elif defect == "page-not-in-nav":
        (docs / "orphan.md").write_text("# Orphan\n")
    else:
        ref = docs / "reference" / "builder.md"
        ref.write_text(ref.read_text() + "\n::: workloadbuilder.no_such_module\n")
    done = _mkdocs_build(copy / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0, f"{defect}: the strict build passed"
    assert expected in done.stdout + done.stderr
