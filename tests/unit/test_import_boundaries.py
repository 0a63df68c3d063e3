"""No module imports another package's ``_private`` module (docs/architecture.md, "Import rules").

``import a.b._c`` / ``from a.b._c import x`` / ``from a.b import _c`` (and
``importlib.import_module("a.b._c")``) are allowed only in
modules inside package ``a.b`` (a package's own modules may use its privates). Scanned: the
SDK, the scheduler, the simulator, the integrations, the benchmarks and the production
helpers of the tests (conftest, helpers, fixtures: every module under ``tests/`` that is not a
``test_*.py`` file; a test that unit-tests one internal module may import it).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("workloadbuilder", "benchmarks")


def _is_private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def _owner(target: list[str]) -> list[str] | None:
    """The package a dotted import target is private to: the parent of its last private
    component (``a.b._c`` -> ``a.b``; ``a._b.c`` -> ``a``), or None when it is public."""
    owner = None
    for i, part in enumerate(target):
        if _is_private(part):
            owner = target[:i]
    return owner


def _module_names(path: Path, root: Path) -> list[list[str]]:
    """The dotted names a file is imported under (tests/ is also on sys.path)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    names = [parts]
    if parts and parts[0] == "tests":
        names.append(parts[1:])
    return names


def _targets(node: ast.AST, me: list[str], is_package: bool) -> list[list[str]]:
    if isinstance(node, ast.Import):
        return [alias.name.split(".") for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        if node.level:
            base = me if is_package else me[:-1]
            base = base[: len(base) - (node.level - 1)]
            module = base + (node.module.split(".") if node.module else [])
        else:
            module = (node.module or "").split(".")
        return [module] + [[*module, alias.name] for alias in node.names if alias.name != "*"]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, (ast.Attribute, ast.Name))
        and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
        == "import_module"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
        and not node.args[0].value.startswith(".")
    ):
        return [node.args[0].value.split(".")]  # importlib.import_module("a.b._c")
    return []


def violations(files: list[Path], root: Path = ROOT) -> set[tuple[str, str]]:
    """(file, imported private target) for every import across a package boundary."""
    found: set[tuple[str, str]] = set()
    for path in files:
        names = _module_names(path, root)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            for target in _targets(node, names[0], path.name == "__init__.py"):
                owner = _owner(target)
                if owner is None:
                    continue
                if any(name[: len(owner)] == owner for name in names):
                    continue
                # report the private module (or name) itself, not the names imported from it
                last = max(i for i, part in enumerate(target) if _is_private(part))
                found.add((path.relative_to(root).as_posix(), ".".join(target[: last + 1])))
    return found


def scanned_files() -> list[Path]:
    files: list[Path] = []
    for top in SCANNED:
        if (ROOT / top).is_dir():
            files += sorted((ROOT / top).rglob("*.py"))
    files += [p for p in sorted((ROOT / "tests").rglob("*.py")) if not p.name.startswith("test_")]
    return files


def test_no_module_imports_another_packages_private_module() -> None:
    found = violations(scanned_files())
    assert not found, "imports of another package's private module:\n" + "\n".join(
        f"  {path}: {target}" for path, target in sorted(found)
    )


def test_the_scan_sees_every_form_of_import(tmp_path: Path) -> None:
    """The checker itself: absolute, from-, relative and private-name imports."""
    cases = {
        "import workloadbuilder.cluster._memory": {"workloadbuilder.cluster._memory"},
        "from workloadbuilder.cluster._kube import KubeCluster": {"workloadbuilder.cluster._kube"},
        "from workloadbuilder.cluster import _patch": {"workloadbuilder.cluster._patch"},
        "from ..cluster._retry import RetryPolicy": {"workloadbuilder.cluster._retry"},
        "from workloadbuilder.cluster import MemoryCluster": set(),
        "from workloadbuilder.builder._types import WorkloadItem": set(),  # own package
        "from . import _common": set(),
        "import importlib\nimportlib.import_module('workloadbuilder.cluster._kube')": {
            "workloadbuilder.cluster._kube"
        },
    }
    # a module of workloadbuilder.builder (relative imports resolve there)
    probe = tmp_path / "workloadbuilder" / "builder" / "probe.py"
    probe.parent.mkdir(parents=True)
    for source, expected in cases.items():
        probe.write_text(source + "\n", encoding="utf-8")
        got = {target for _, target in violations([probe], tmp_path)}
        assert got == expected, source
    helper = tmp_path / "tests" / "cluster" / "conftest.py"
    helper.parent.mkdir(parents=True)
    helper.write_text("from workloadbuilder.cluster._memory import MemoryCluster\n")
    assert violations([helper], tmp_path) == {
        ("tests/cluster/conftest.py", "workloadbuilder.cluster._memory")
    }
