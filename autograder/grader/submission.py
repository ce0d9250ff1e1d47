"""The submission, read once by the parent into a folder of its own, never following a link.

Everything after grades this copy (``minitorch/`` and ``exercises/*.ipynb``).
A careless mistake costs only what it touches: a file that does not parse, a
symbolic link (a link could point at a reference or at the grader's files), a
special or unreadable file is named in the report with its line and error and
left out of the copy; the exercises defined in a file that does not parse
score 0 with that reason, and everything else is graded with the course's own
copy of that file in its place (10.7's tests import 10.6's module). A submission larger
than :data:`config.MAX_FILES` files or :data:`config.MAX_BYTES`, or with more than
:data:`config.MAX_ENTRIES` entries, is not copied; folders past :data:`config.MAX_DEPTH` or
:data:`config.MAX_PATH` are left out. Names are escaped before the report shows them.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .. import config
from .protocol import clean

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


def _walk(top: Path, found: dict[str, str]):
    """``(folder, dirs, names)`` of ``top`` like ``os.walk``, without recursion (a folder
    thousands of levels deep must not crash the grader): folders deeper than
    :data:`config.MAX_DEPTH` or paths longer than :data:`config.MAX_PATH` are named in
    ``found`` and not entered."""
    stack = [(top, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            entries = sorted(os.listdir(folder))
        except OSError as e:
            found[_name(folder, top)] = f"cannot be read ({e.strerror})"
            continue
        dirs = [n for n in entries if n not in SKIPPED and (folder / n).is_dir()
                and not (folder / n).is_symlink()]  # fmt: skip
        names = [n for n in entries if n not in dirs]
        yield folder, dirs, names
        for d in reversed(dirs):  # ``dirs`` edited by the caller: those it removed are skipped
            path = folder / d
            too_long = len(str(path.relative_to(top.parent))) > config.MAX_PATH
            if depth + 1 > config.MAX_DEPTH or too_long:
                found[_name(path, top)] = (f"is deeper than the grader reads ({config.MAX_DEPTH} "
                                           f"folders, {config.MAX_PATH} characters); left out")  # fmt: skip
                continue
            stack.append((path, depth + 1))


def _name(path: Path, top: Path) -> str:
    """A learner's file name as the report shows it: escaped, cut."""
    return clean(path.relative_to(top.parent).as_posix(), 200, keep="")


def copy(submission: Path, dest: Path) -> dict[str, str]:
    """Copy the submission's ``minitorch/`` and lab notebooks into ``dest``; returns the
    problems found, ``{"minitorch/x.py": "line 3: SyntaxError: invalid syntax"}``."""
    found: dict[str, str] = {}
    files: list[tuple[str, bytes]] = []
    size = visited = 0
    for top in ("minitorch", "exercises"):
        why = _unusable(submission / top)
        if why:
            if top == "minitorch" or (submission / top).is_symlink():
                found[f"{top}/"] = why
            continue
        for folder, dirs, names in _walk(submission / top, found):
            for name in sorted(dirs + names):
                visited += 1
                if visited > config.MAX_ENTRIES:
                    found[f"{top}/"] = f"more than the grader reads ({config.MAX_ENTRIES} entries)"
                    return found
                path = folder / name
                rel = path.relative_to(submission).as_posix()
                shown = _name(path, submission / top)
                why = _unusable(path)
                if why:
                    found[shown] = why
                    if name in dirs:
                        dirs.remove(name)
                    continue
                if name in dirs or name.endswith(COMPILED) or name in SKIPPED:
                    continue
                if top == "exercises" and not (
                    name.endswith(".ipynb") and folder == submission / top
                ):
                    continue
                limit = config.MAX_NOTEBOOK_BYTES if top == "exercises" else config.MAX_BYTES
                try:
                    data = _read(path, limit)
                except (OSError, TooLarge) as e:
                    found[shown] = f"cannot be read ({e})"
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
                            found[shown] = why
                            course = config.ROOT / rel  # other exercises' tests import it
                            if course.is_file():
                                data = course.read_bytes()
                files.append((rel, data))
    for rel, data in files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return found
