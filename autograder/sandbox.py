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
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import guard, vault
from .manifest import ROOT
from .submission import copy_ignore

GRADER_DIRS = ("autograder",)
LIMITS = {  # soft = hard; generous for Numba, tight enough to stop a runaway
    "RLIMIT_AS": 16 << 30,
    "RLIMIT_FSIZE": 256 << 20,
    "RLIMIT_CORE": 0,
    "RLIMIT_NPROC": 4096,
}
PR_SET_CHILD_SUBREAPER = 36
_IGNORE = shutil.ignore_patterns(
    "__pycache__",
    "*.pyc",
    ".ipynb_checkpoints",
    "*.so",
    "*.nbi",
    "*.nbc",
    "vault.zip",
    "oracle.json.gz",
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


def _tasks_on_machine() -> int:
    """Every thread on the machine, from ``/proc/loadavg`` (one cheap read)."""
    try:
        return int(Path("/proc/loadavg").read_text().split()[3].split("/")[1])
    except (OSError, ValueError, IndexError):
        return 1 << 30  # unknown: always scan


@dataclass
class ProcessWatch:
    """When to count the child's descendants: a full /proc scan costs ~15 ms, so it runs
    when the machine's task count jumped by more than the limit, or every 2 s."""

    base: int = field(default_factory=_tasks_on_machine)
    next_scan: float = 0.0
    next_full: float = 0.0


def too_many_processes(watch: ProcessWatch) -> bool:
    now = time.monotonic()
    if now < watch.next_scan:
        return False
    watch.next_scan = now + 0.1
    if _tasks_on_machine() - watch.base <= MAX_PROCESSES and now < watch.next_full:
        return False
    watch.next_scan, watch.next_full = now + 0.5, now + 2.0
    return len(descendants()) > MAX_PROCESSES


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


CHILD_USER: str | None = None  # the user learner code runs as (set by :func:`choose_child_user`)
_CHILD_IDS: tuple[int, int] | None = None  # looked up before fork: a preexec_fn must not import
MAX_PROCESSES = 64  # more descendants than this at once: the parent kills the child's tree
PROBE = "import sys; sys.path += {sites!r}; import numpy, numba, pytest, hypothesis"
_chosen: list = []


def choose_child_user() -> str | None:
    """Who runs learner code: ``$AUTOGRADER_CHILD_USER`` (empty: the grader's own user), else,
    when the grader is root, ``nobody`` if ``nobody`` can run this Python and its packages.

    As root, ``RLIMIT_NPROC`` does not apply and every file is readable; as
    ``nobody`` the process limit holds and the grading tree is read-only. A
    Python under ``/root`` (mode 700) cannot run as ``nobody``: then learner code
    stays root and only the parent's process watchdog (:data:`MAX_PROCESSES`) holds.
    """
    global CHILD_USER, _CHILD_IDS
    if _chosen:
        return CHILD_USER
    _chosen.append(True)
    user = os.environ.get("AUTOGRADER_CHILD_USER")
    if user is None and os.geteuid() == 0:
        user = "nobody" if _can_run_as("nobody") else ""
    CHILD_USER = user or None
    _CHILD_IDS = (lambda u: (u.pw_uid, u.pw_gid))(pwd.getpwnam(user)) if user else None
    return CHILD_USER


def _can_run_as(user: str) -> bool:
    try:
        ids = pwd.getpwnam(user)
        sites = [p for p in site.getsitepackages() if Path(p).is_dir()]
        proc = subprocess.run([sys.executable, "-I", "-S", "-c", PROBE.format(sites=sites)], cwd="/",
                              user=ids.pw_uid, group=ids.pw_gid, extra_groups=[],
                              capture_output=True, timeout=120)  # fmt: skip
        return proc.returncode == 0
    except (KeyError, OSError, subprocess.SubprocessError):
        return False


def limit_resources(switch_user: bool = True, hidden=()) -> None:
    """``preexec_fn`` of every child: its own session, resource limits, maybe another user.

    CPU time is limited by the parent (:func:`cpu_used`), not ``RLIMIT_CPU``: with that
    limit set, Linux reads a process's CPU clock at the scheduler tick (4 ms here), and
    the benchmarks, which time with that clock, measured 1.0 ms against 1.0 ms.

    As root it first hides ``hidden`` (see :func:`private_paths`) in a mount
    namespace of its own, then gives up root's powers: another user, or, when
    none can run Python, uid 0 without capabilities (it cannot unmount what
    hides the references, nor read the grader's memory).
    """
    os.setsid()
    if hidden:
        _hide(hidden)
    if switch_user and _CHILD_IDS and os.geteuid() == 0:
        os.setgroups([])
        os.setgid(_CHILD_IDS[1])
        os.setuid(_CHILD_IDS[0])
    elif switch_user and _libc is not None and os.geteuid() == 0:
        for cap in range(64):  # the bounding set: what the exec'd Python can hold
            _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    for name, value in LIMITS.items():
        try:
            resource.setrlimit(getattr(resource, name), (value, value))
        except (ValueError, OSError, AttributeError):
            pass


def cpu_used(pid: int) -> float:
    """Seconds of CPU time process ``pid`` has used, all its threads (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


CLONE_NEWNS, CLONE_NEWUSER, PR_CAPBSET_DROP, PR_SET_DUMPABLE = 0x20000, 0x10000000, 24, 4
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 4096, 16384, 1 << 18
try:
    _libc = ctypes.CDLL(None, use_errno=True)
    _libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
except (OSError, AttributeError):
    _libc = None


def private_paths(submission: Path) -> list[tuple[bytes, bool]]:
    """Where the references lie outside the grading tree: ``(path, is a folder)``.

    ``solutions/``, the vault, and the git folders (whose objects hold every
    committed reference) of the grader's repository and of the submission.
    """
    found: dict[Path, bool] = {}
    for base in {ROOT.resolve(), Path(submission).resolve()}:
        found[base / "solutions"] = True
        found[base / "autograder" / "vault.zip"] = False
        found[base / "autograder" / "oracle.json.gz"] = False  # expected values
        git = base / ".git"
        if git.is_file():  # a worktree: "gitdir: <repo>/.git/worktrees/<name>"
            text = git.read_text(errors="replace").strip()
            if text.startswith("gitdir:"):
                gitdir = (base / text[7:].strip()).resolve()
                found[gitdir] = True
                common = gitdir / "commondir"
                if common.is_file():
                    found[(gitdir / common.read_text().strip()).resolve()] = True
        else:
            found[git] = True
    return [(str(p).encode(), d) for p, d in found.items() if (p.is_dir() if d else p.is_file())]


def hidden_paths(submission: Path) -> list[tuple[bytes, bool]]:
    """:func:`private_paths` if hiding them works on this machine (tried once), else []:
    a child never starts half inside a namespace that did not work out."""
    if not _hiding_works:
        paths = private_paths(submission)
        try:
            ok = subprocess.run(["/bin/true"] if Path("/bin/true").exists() else [sys.executable, "-c", ""],
                                preexec_fn=lambda: _hide(paths) or os._exit(3),
                                timeout=60).returncode == 0  # fmt: skip
        except (OSError, subprocess.SubprocessError):
            ok = False
        _hiding_works.append(ok)
    return private_paths(submission) if _hiding_works[0] else []


_hiding_works: list = []


def _hide(paths) -> bool:
    """In the forked child: a private mount namespace where ``paths`` are empty.

    Root mounts over them directly (and then gives up its capabilities). Any
    other user does it inside a user namespace of its own, then enters a
    second, nested one: mounts inherited into a less privileged namespace are
    locked, so the child cannot unmount them, and it appears as its own user
    again. Where user namespaces are disabled, nothing is hidden.
    """
    if _libc is None:
        return False
    uid, gid = os.geteuid(), os.getegid()
    if uid != 0:
        _libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # after a setuid /proc/self/uid_map is root's
        if _libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0 or not _map_ids(0, uid, 0, gid):
            return False
    elif _libc.unshare(CLONE_NEWNS) != 0:
        return False
    if _libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        return False
    ok = True
    for path, is_dir in paths:
        if is_dir:
            flags = MS_RDONLY | MS_NOSUID | MS_NODEV
            ok &= _libc.mount(b"tmpfs", path, b"tmpfs", flags, b"size=4k,mode=555") == 0
        else:
            ok &= _libc.mount(b"/dev/null", path, None, MS_BIND, None) == 0
    if uid != 0:  # lock the mounts: a nested namespace, mapped back to the real ids
        ok &= _libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0 and _map_ids(uid, 0, gid, 0)
    return bool(ok)


def _userns_available() -> bool:
    try:
        return int(Path("/proc/sys/user/max_user_namespaces").read_text()) > 0
    except (OSError, ValueError):
        return False


def _map_ids(inner_uid: int, outer_uid: int, inner_gid: int, outer_gid: int) -> bool:
    for name, text in (("setgroups", b"deny"), ("uid_map", b"%d %d 1" % (inner_uid, outer_uid)),
                       ("gid_map", b"%d %d 1" % (inner_gid, outer_gid))):  # fmt: skip
        try:
            fd = os.open(f"/proc/self/{name}", os.O_WRONLY)
            try:
                os.write(fd, text)
            finally:
                os.close(fd)
        except OSError:
            return False
    return True


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
tree, fd, args, sites, pths, frames = {tree!r}, {fd}, {args!r}, {sites!r}, {pths!r}, {frames!r}
sys.path[:0] = [tree]
sys.path += sites
for pth in pths:
    site.addpackage(os.path.dirname(pth), os.path.basename(pth), set(sys.path))
from autograder import guard, plugin
plugin.attach(fd)
guard.install(tree, frames, sites)
try:  # first, alone, so that the parent can tell a hang here from one in a test module
    import minitorch
except BaseException:
    pass  # pytest reports it as the tests' collection error
plugin.ready()
import pytest
sys.exit(pytest.main(args, plugins=[plugin]))
"""


def child_command(tree: Path, fd: int, nodeids: list[str]) -> list[str]:
    args = ["-p", "no:cacheprovider", "-p", "_hypothesis_pytestplugin", "--noconftest",
            "-c", str(tree / "pytest.ini"), "--rootdir", str(tree),
            "-q", "--no-header", "-rN", "--continue-on-collection-errors", *nodeids]  # fmt: skip
    sites = [p for p in site.getsitepackages() if Path(p).is_dir()]
    boot = BOOT.format(
        tree=str(tree),
        fd=fd,
        args=args,
        sites=sites,
        pths=installed_pth_files(),
        frames=guard.verified_sites(tree),
    )
    return [sys.executable, "-I", "-S", "-B", "-c", boot]


INI = """\
[pytest]
python_files = test_*.py bench_*.py
python_functions = test_* bench_*
addopts =
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
    try:
        _fill_tree(tree, submission, mode, withhold, names)
    except BaseException:  # a full disk, say: no half-built tree is left behind
        remove_tree(tree)
        raise
    return tree


def _fill_tree(tree: Path, submission: Path, mode: str, withhold: str | None, names: set[str]):
    # Links are never followed (one could point at a reference): they are left out,
    # and named in the report by :func:`autograder.submission.problems`.
    shutil.copytree(submission / "minitorch", tree / "minitorch", ignore=copy_ignore,
                    symlinks=True)  # fmt: skip
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
    (tree / "pytest.ini").write_text(INI)
    if CHILD_USER:  # readable, not writable, by the child's user
        for path in [tree, *tree.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)


def remove_tree(tree: Path) -> None:
    for path in [tree, *tree.rglob("*")]:  # a child may have made parts read-only
        try:
            if not path.is_symlink():
                path.chmod(0o700)
        except OSError:
            pass
    shutil.rmtree(tree, ignore_errors=True)
