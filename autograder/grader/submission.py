"""The submission, read once by the parent into a folder of its own, never following a link.

Everything after grades this copy (``minitorch/`` and ``exercises/*.ipynb``).
A careless mistake costs only what it touches: a file that does not parse, a
symbolic link (a link could point at a reference or at the grader's files), a
special or unreadable file is named in the report with its line and error and
left out of the copy; the exercises defined in a file that does not parse
score 0 with that reason, and everything else is graded with the course's own
copy of that file in its place (10.7's tests import 10.6's module). A submission larger
than :data:`config.MAX_FILES` files or :data:`config.MAX_BYTES` is not copied.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .. import config

SKIPPED = ("__pycache__", ".ipynb_checkpoints")
COMPILED = (".pyc", ".so", ".nbi", ".nbc")


class TooLarge(Exception):
    pass


def _read(path: Path, limit: int) -> bytes:
    """A regular file's bytes, refusing a link even if one appears after the walk saw a file."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError("not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise TooLarge(f"larger than {limit >> 20} MiB")
    return data


def _unusable(path: Path) -> str:
    try:
        mode = path.lstat().st_mode
    except OSError as e:
        return f"cannot be read ({e.strerror})"
    if stat.S_ISLNK(mode):
        return "is a symbolic link; the grader copies no links: put the file itself there"
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        return "is not a regular file"
    if not os.access(path, os.R_OK | (os.X_OK if stat.S_ISDIR(mode) else 0), follow_symlinks=False):
        return "cannot be read (its permissions)"
    return ""


def _syntax(source: bytes, name: str) -> str:
    try:
        compile(source, name, "exec", dont_inherit=True)
    except SyntaxError as e:
        where = f"line {e.lineno}: " if e.lineno else ""
        return f"{where}{type(e).__name__}: {e.msg}"
    except ValueError as e:  # null bytes
        return f"{type(e).__name__}: {e}"
    return ""


def copy(submission: Path, dest: Path) -> dict[str, str]:
    """Copy the submission's ``minitorch/`` and lab notebooks into ``dest``; returns the
    problems found, ``{"minitorch/x.py": "line 3: SyntaxError: invalid syntax"}``."""
    found: dict[str, str] = {}
    files: list[tuple[str, bytes]] = []
    size = 0
    for top in ("minitorch", "exercises"):
        why = _unusable(submission / top)
        if why:
            if top == "minitorch" or (submission / top).is_symlink():
                found[f"{top}/"] = why
            continue
        for folder, dirs, names in os.walk(submission / top, followlinks=False):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED)
            for name in sorted(dirs + names):
                path = Path(folder, name)
                rel = path.relative_to(submission).as_posix()
                why = _unusable(path)
                if why:
                    found[rel] = why
                    if name in dirs:
                        dirs.remove(name)
                    continue
                if name in dirs or name.endswith(COMPILED) or name in SKIPPED:
                    continue
                if top == "exercises" and not (
                    name.endswith(".ipynb") and folder == str(submission / top)
                ):
                    continue
                limit = config.MAX_NOTEBOOK_BYTES if top == "exercises" else config.MAX_BYTES
                try:
                    data = _read(path, limit)
                except (OSError, TooLarge) as e:
                    found[rel] = f"cannot be read ({e})"
                    continue
                if top == "minitorch":
                    size += len(data)
                    if len(files) >= config.MAX_FILES or size > config.MAX_BYTES:
                        found["minitorch/"] = (f"more than the grader copies ({config.MAX_FILES} "
                                               f"files, {config.MAX_BYTES >> 20} MiB)")  # fmt: skip
                        return found
                    if name.endswith(".py"):
                        why = _syntax(data, rel)
                        if why:
                            found[rel] = why
                            course = config.ROOT / rel  # other exercises' tests import it
                            if course.is_file():
                                data = course.read_bytes()
                files.append((rel, data))
    for rel, data in files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return found
