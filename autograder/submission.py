"""What is wrong with the submitted files themselves, found before anything runs.

A careless mistake costs only what it touches: a file that does not parse, a
symbolic link (the grader copies no links: a link could point at a
reference), a file it cannot read, or a submission too large to copy is named
here with its line and error, the exercises defined in that file score 0 with
that reason, and everything else is graded.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

MAX_FILES = 2000  # files under minitorch/
MAX_BYTES = 64 << 20  # all of them together
SKIPPED = ("__pycache__", ".ipynb_checkpoints")


def problems(submission: Path) -> dict[str, str]:
    """``{"minitorch/x.py": "line 3: SyntaxError: invalid syntax"}`` for the package in
    ``submission``."""
    found: dict[str, str] = {}
    package = submission / "minitorch"
    count = size = 0
    for folder, dirs, files in os.walk(package, followlinks=False):
        dirs[:] = [d for d in dirs if d not in SKIPPED]
        for name in sorted(dirs + files):
            path = Path(folder, name)
            rel = path.relative_to(submission).as_posix()
            why = _unusable(path)
            if why:
                found[rel] = why
                if name in dirs:
                    dirs.remove(name)
                continue
            if name in files:
                count, size = count + 1, size + path.stat().st_size
                if path.suffix == ".py":
                    why = _syntax(path)
                    if why:
                        found[rel] = why
    if count > MAX_FILES or size > MAX_BYTES:
        found["minitorch/"] = (f"{count} files, {size >> 20} MiB: more than the grader copies "
                               f"({MAX_FILES} files, {MAX_BYTES >> 20} MiB)")  # fmt: skip
    return found


def _unusable(path: Path) -> str:
    try:
        mode = path.lstat().st_mode
    except OSError as e:
        return f"cannot be read ({e.strerror})"
    if stat.S_ISLNK(mode):
        return "is a symbolic link; the grader copies no links: put the file itself there"
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        return "is not a regular file"
    if not os.access(path, os.R_OK | (os.X_OK if stat.S_ISDIR(mode) else 0)):
        return "cannot be read (its permissions)"
    return ""


def _syntax(path: Path) -> str:
    try:
        source = path.read_bytes()
    except OSError as e:
        return f"cannot be read ({e.strerror})"
    try:
        compile(source, str(path), "exec", dont_inherit=True)
    except SyntaxError as e:
        where = f"line {e.lineno}: " if e.lineno else ""
        return f"{where}{type(e).__name__}: {e.msg}"
    except ValueError as e:  # null bytes
        return f"{type(e).__name__}: {e}"
    return ""


def copy_ignore(folder: str, names: list[str]) -> set[str]:
    """``shutil.copytree``'s ignore: caches, compiled files, and what :func:`problems` calls
    unusable (links, special and unreadable files). Files that do not parse are copied, so
    importing them fails as it does for the learner."""
    return {n for n in names if n in SKIPPED or n.endswith((".pyc", ".so", ".nbi", ".nbc"))
            or _unusable(Path(folder, n))}  # fmt: skip
