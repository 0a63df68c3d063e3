"""MkDocs hook: links from a docs page to repository files outside ``docs/``.

The Markdown keeps relative links (``../benchmarks/bench_real.py``) so that they work when the
files are read on GitHub. On the site those targets do not exist, so this hook rewrites each
link that leaves ``docs/``, or names a folder (which has no page), into an absolute link to
the repository (``repo_url``/blob/main/... or /tree/main/...) — and fails the build when the
target does not exist in the checkout, so a broken link to a repository file is caught like a
broken page link.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

_LINK = re.compile(r"(\]\()([^)\s#]+)(#[^)\s]*)?(\))")
_FENCE = re.compile(r"^(```|~~~)")


def _rewrite(line: str, page_dir: str, docs_dir: Path, root: Path, base: str, src: str) -> str:
    def repl(m: re.Match[str]) -> str:
        target = m.group(2)
        if "://" in target or target.startswith(("/", "mailto:")):
            return m.group(0)
        rel = posixpath.normpath(posixpath.join(page_dir, target))
        repo_rel = posixpath.normpath(posixpath.join("docs", page_dir, target))
        path = root / repo_rel
        if not rel.startswith("../") and not (docs_dir / rel).is_dir():
            return m.group(0)  # a file inside docs/: MkDocs validates it
        if not path.exists():
            raise PluginError(f"{src}: link to {target!r}: {repo_rel} does not exist")
        kind = "tree" if path.is_dir() else "blob"
        return f"{m.group(1)}{base}/{kind}/main/{repo_rel}{m.group(3) or ''}{m.group(4)}"

    return _LINK.sub(repl, line)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Rewrite links that leave ``docs/`` into links to the repository."""
    docs_dir = Path(config["docs_dir"]).resolve()
    root = docs_dir.parent
    base = str(config["repo_url"]).rstrip("/")
    src = page.file.src_uri
    page_dir = posixpath.dirname(src)
    out: list[str] = []
    in_fence = False
    for line in markdown.split("\n"):
        if _FENCE.match(line.lstrip()):
            in_fence = not in_fence
        out.append(line if in_fence else _rewrite(line, page_dir, docs_dir, root, base, src))
    return "\n".join(out)
