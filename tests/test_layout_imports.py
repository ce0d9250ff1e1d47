"""The folder tree is a map of the chapters: imports flow only from later chapters to earlier ones.

Every import in ``minitorch/`` (top level or inside a function) is read from the
source; a chapter's folder may import its own chapter and earlier ones, never a
later one. Later chapters reach earlier code by registering themselves (a
pipeline stage, a hook list), as ``CONTRIBUTING.md`` describes. A folder this
table does not know (a new chapter) counts as later than every listed one.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "minitorch"
CHAPTER = {
    "core": 1,  # the foundation: dtypes, registry, Tensor
    "backends": 1,
    "tensor": 1,
    "autograd": 2,
    "nn": 2,
    "fast": 3,
    "cuda": 4,
    "tracing": 5,
    "passes": 6,
    "fusion": 7,
    "memory": 8,
    "compile": 9,
    "profiler": 10,
    "onnx": 10,
    "transformer": 11,
    "distributed": 12,
}
LATEST = 1 + max(CHAPTER.values())


def chapter(folder: str) -> int:
    return CHAPTER.get(folder, LATEST)


def imports(path: Path, root: Path = ROOT):
    """(line, imported top-level minitorch folder) for every import in ``path``."""
    rel = path.relative_to(root).parts
    package = ["minitorch", *rel[:-1]]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == "minitorch" and len(parts) > 1:
                    yield node.lineno, parts[1]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                parts = base + (node.module.split(".") if node.module else [])
            else:
                parts = (node.module or "").split(".")
            if parts[0] != "minitorch":
                continue
            if len(parts) > 1:
                yield node.lineno, parts[1]
            else:  # from minitorch import x / from .. import x
                for a in node.names:
                    yield node.lineno, a.name


def test_no_chapter_imports_a_later_chapter():
    bad = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).parts
        if len(rel) < 2:  # minitorch/__init__.py and exercises.py tie the chapters together
            continue
        mine = chapter(rel[0])
        for line, folder in imports(path):
            if (ROOT / folder).is_dir() and chapter(folder) > mine:
                bad.append(f"minitorch/{'/'.join(rel)}:{line} imports {folder} (chapter "
                           f"{chapter(folder)}) from chapter {mine}")  # fmt: skip
    assert not bad, "\n".join(bad)


def test_the_check_sees_function_level_imports(tmp_path):
    path = tmp_path / "tracing" / "probe.py"
    path.parent.mkdir()
    path.write_text("def f():\n    from ..fusion import fuse\n    import minitorch.compile\n")
    assert [f for _, f in imports(path, tmp_path)] == ["fusion", "compile"]
