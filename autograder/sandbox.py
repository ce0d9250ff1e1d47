"""Where and how learner code runs: a fresh grading tree, a locked-down child, no survivors.

Every child gets its own directory holding a copy of the learner's
``minitorch/`` next to the grader's files (checked against ``hashes.json`` by
:mod:`autograder.integrity`), with ``minitorch/exercises.py`` (the mode switch)
taken from the grader. When one exercise is graded its reference is withheld
from that tree, so delegating to ``solutions.reference`` earns nothing.

The child is ``python -I -S`` (no user site, no environment paths, no ``.pth``
files except those pip installed), pytest with ``--noconftest``, a trusted ini
and no plugin autoload, under resource limits. The grader is a child
subreaper: every process a child leaves behind, detached or not, is reparented
to the grader and killed when the child ends.
"""

from __future__ import annotations

import ast
import ctypes
import os
import pwd
import resource
import shutil
import signal
import site
import sys
import tempfile
import time
from pathlib import Path

from . import vault
from .manifest import ROOT

GRADER_DIRS = ("autograder",)
LIMITS = {  # soft = hard; generous for Numba, tight enough to stop a runaway
    "RLIMIT_AS": 16 << 30,
    "RLIMIT_FSIZE": 256 << 20,
    "RLIMIT_CORE": 0,
    "RLIMIT_NPROC": 4096,
}
PR_SET_CHILD_SUBREAPER = 36
_IGNORE = shutil.ignore_patterns(
    "__pycache__", "*.pyc", ".ipynb_checkpoints", "*.so", "*.nbi", "*.nbc", "vault.zip"
)


def become_subreaper() -> bool:
    """Orphans of our children become ours (Linux); then :func:`kill_descendants` finds them."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _children() -> dict[int, int]:
    """pid -> parent pid of every process (from /proc)."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path("/proc", entry, "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        table[int(entry)] = int(fields[1])
    return table


def descendants(root: int | None = None) -> list[int]:
    root = os.getpid() if root is None else root
    table = _children()
    found, frontier = [], [root]
    while frontier:
        parent = frontier.pop()
        kids = [pid for pid, pp in table.items() if pp == parent]
        found += kids
        frontier += kids
    return found


def kill_descendants(spare: tuple[int, ...] = ()) -> int:
    """Stop, then kill, every descendant of this process; reap them. Returns how many."""
    killed = 0
    for _ in range(50):
        pids = [p for p in descendants() if p not in spare]
        if not pids:
            break
        for sig in (signal.SIGSTOP, signal.SIGKILL):  # freeze first: no fork races
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
        killed += len(pids)
        for pid in pids:
            try:
                os.waitpid(pid, 0)
            except (ChildProcessError, OSError):
                pass
        time.sleep(0.01)
    return killed


CHILD_USER = os.environ.get("AUTOGRADER_CHILD_USER")  # class setup: run learner code as this user
# Looked up here, not after fork: a preexec_fn must not import (another thread may hold the lock).
_CHILD_IDS = (lambda u: (u.pw_uid, u.pw_gid))(pwd.getpwnam(CHILD_USER)) if CHILD_USER else None


def limit_resources(cpu_seconds: int, switch_user: bool = True) -> None:
    """``preexec_fn`` of every child: its own session, resource limits, maybe another user."""
    os.setsid()
    if switch_user and _CHILD_IDS and os.geteuid() == 0:
        os.setgroups([])
        os.setgid(_CHILD_IDS[1])
        os.setuid(_CHILD_IDS[0])
    for name, value in LIMITS.items():
        try:
            resource.setrlimit(getattr(resource, name), (value, value))
        except (ValueError, OSError, AttributeError):
            pass
    try:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 5))
    except (ValueError, OSError):
        pass


def installed_pth_files() -> list[str]:
    """The ``.pth`` files pip installed (named in a RECORD), not ones something else wrote."""
    found = []
    for sp in site.getsitepackages():
        recorded = set()
        for record in Path(sp).glob("*.dist-info/RECORD"):
            for line in record.read_text(encoding="utf-8", errors="replace").splitlines():
                name = line.split(",")[0]
                if name.endswith(".pth") and "/" not in name and "__editable__" not in name:
                    recorded.add(name)
        found += [str(Path(sp, n)) for n in sorted(recorded) if Path(sp, n).exists()]
    return found


BOOT = """\
import os, site, sys
tree, fd, args, sites, pths = {tree!r}, {fd}, {args!r}, {sites!r}, {pths!r}
sys.path[:0] = [tree]
sys.path += sites
for pth in pths:
    site.addpackage(os.path.dirname(pth), os.path.basename(pth), set(sys.path))
from autograder import plugin
plugin.attach(fd)
import pytest
sys.exit(pytest.main(args, plugins=[plugin]))
"""


def child_command(tree: Path, fd: int, nodeids: list[str]) -> list[str]:
    args = ["-p", "no:cacheprovider", "-p", "_hypothesis_pytestplugin", "--noconftest",
            "-c", str(tree / "pytest.ini"), "--rootdir", str(tree),
            "-q", "--no-header", "-rN", "--continue-on-collection-errors", *nodeids]  # fmt: skip
    sites = [p for p in site.getsitepackages() if Path(p).is_dir()]
    boot = BOOT.format(tree=str(tree), fd=fd, args=args, sites=sites, pths=installed_pth_files())
    return [sys.executable, "-I", "-S", "-B", "-c", boot]


INI = """\
[pytest]
python_files = test_*.py bench_*.py
python_functions = test_* bench_*
addopts =
cache_dir = {cache}
"""


def _withhold(source: str, names: set[str], ex_id: str) -> str:
    """``source`` with the bodies of functions ``names`` replaced by a refusal."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    for fn in sorted(
        (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names),
        key=lambda n: -n.lineno,
    ):
        start = fn.body[0].lineno - 1
        if isinstance(fn.body[0], ast.Expr) and isinstance(fn.body[0].value, ast.Constant):
            start = fn.body[0].end_lineno  # keep the docstring
        indent = " " * (fn.body[0].col_offset)
        refusal = f"{indent}raise NotImplementedError('reference of Exercise {ex_id} is withheld while it is graded')\n"
        lines[start : fn.end_lineno] = [refusal]
    return "".join(lines)


def build_tree(submission: Path, mode: str, withhold: str | None, names: set[str]) -> Path:
    """A fresh grading directory; the caller removes it (:func:`remove_tree`)."""
    tree = Path(tempfile.mkdtemp(prefix="grading-"))
    shutil.copytree(submission / "minitorch", tree / "minitorch", ignore=_IGNORE, symlinks=False)
    shutil.copy(ROOT / "minitorch" / "exercises.py", tree / "minitorch" / "exercises.py")
    for name in GRADER_DIRS:
        shutil.copytree(ROOT / name, tree / name, ignore=_IGNORE)
    if mode != "learner":  # references are needed outside the focus (isolated) or everywhere
        ref = tree / "solutions" / "reference"
        ref.mkdir(parents=True)
        (tree / "solutions" / "__init__.py").write_text("")
        for rel in vault.names("solutions/reference/*.py"):
            text, name = vault.read(rel).decode("utf-8"), Path(rel).name
            if withhold and name == f"ch{withhold.split('.')[0]}.py":
                text = _withhold(text, names, withhold)
            (ref / name).write_text(text, encoding="utf-8")
    (tree / "pytest.ini").write_text(INI.format(cache=tree / ".pytest_cache"))
    if CHILD_USER:  # readable, not writable, by the child's user
        for path in [tree, *tree.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
    return tree


def remove_tree(tree: Path) -> None:
    for path in [tree, *tree.rglob("*")]:  # a child may have made parts read-only
        try:
            if not path.is_symlink():
                path.chmod(0o700)
        except OSError:
            pass
    shutil.rmtree(tree, ignore_errors=True)
