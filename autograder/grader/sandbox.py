"""Where learner code runs, and how the parent keeps it there.

Local grading (``make grade``) starts plain child processes: their own
session, resource limits, every descendant killed afterwards. It is feedback
on the learner's own machine, not a security boundary.

Official grading (``--official``: Gradescope, ``make grade-submission``) starts
every child (test, benchmark, lab) as :data:`config.GRADER_USER`, an
unprivileged user, in a world of its own (:func:`official_preexec`):

* new mount, network, IPC and UTS namespaces; the filesystem it sees is a
  fresh tmpfs holding only read-only binds of ``/usr`` (and the ``/bin``,
  ``/lib`` links), a few files of ``/etc``, ``/sys``, the Python it runs, its
  grading tree (at ``/grading``) and a tmpfs of its own at ``/tmp``; ``/proc``
  shows only its own user's processes; no network, not even loopback;
* chroot into it, then ``no_new_privs``, an empty capability bounding set,
  no supplementary groups and the grading user's uid and gid;
* a seccomp filter that refuses to create processes (threads are fine), so
  the parent's CPU clock of the child is the CPU time of all its work;
* resource limits (:data:`config.LIMITS`).

The references, the oracle, the grader, the results and the other children's
folders are not in that world, whatever their permissions on the host. When
the machine cannot provide it (not root, no such user and no ``useradd``, no
namespaces, an architecture without the seccomp filter), official grading
refuses (:class:`Refused`) instead of running learner code with less.
"""

from __future__ import annotations

import ast
import ctypes
import os
import platform
import pwd
import resource
import shutil
import signal
import site
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .. import config

ROOT = config.ROOT
PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP, PR_SET_SECCOMP = 36, 38, 24, 22
CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWIPC, CLONE_NEWUTS = 0x20000, 0x40000000, 0x8000000, 0x4000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
try:
    _libc = ctypes.CDLL(None, use_errno=True)
    _libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
except (OSError, AttributeError):  # not Linux: local grading only
    _libc = None


class Refused(Exception):
    """Official grading cannot give learner code a world of its own on this machine."""


# --- the process tree (both modes) ------------------------------------------------------


def become_subreaper() -> bool:
    """Orphans of our children become ours (Linux); then :func:`kill_descendants` finds them."""
    return _libc is not None and _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process (from /proc)."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path("/proc", entry, "stat").read_text()
            except OSError:
                continue
            table[int(entry)] = int(stat[stat.rfind(")") + 2 :].split()[1])
    return table


def descendants(root: int | None = None, spare=frozenset()) -> list[int]:
    """Every descendant of ``root`` (this process), except ``spare`` and theirs."""
    root = os.getpid() if root is None else root
    table, found, frontier = _parents(), [], [root]
    while frontier:
        parent = frontier.pop()
        kids = [pid for pid, pp in table.items() if pp == parent and pid not in spare]
        found += kids
        frontier += kids
    return found


def kill_descendants(spare=frozenset()) -> int:
    """Stop, then kill, every descendant of this process but ``spare`` (and theirs), and
    reap them; returns how many."""
    killed = 0
    for _ in range(50):
        pids = descendants(spare=spare)
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


def kill_user(uid: int) -> None:
    """Kill every process of ``uid`` (the grading user owns nothing else)."""
    for _ in range(50):
        pids = []
        for entry in filter(str.isdigit, os.listdir("/proc")):
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    pids.append(int(entry))
            except OSError:
                pass
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.02)


def cpu_seconds(pid: int) -> float:
    """CPU time of process ``pid``, every thread it has had, in nanosecond resolution
    (its process CPU clock; 0 when it is gone). Read from outside: learner code in the
    process cannot change what this returns."""
    try:
        return time.clock_gettime(((~pid) << 3) | 2)  # MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)
    except OSError:
        return 0.0


def read_memory(pid: int, address: int, nbytes: int) -> bytes:
    """``nbytes`` of process ``pid``'s memory at ``address`` (``/proc/PID/mem``: the parent,
    root or the child's ancestor, may read it). The read costs that process no CPU time."""
    fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY)
    try:
        chunks, done = [], 0
        while done < nbytes:
            chunk = os.pread(fd, min(nbytes - done, 64 << 20), address + done)
            if not chunk:
                raise ValueError(f"only {done} of {nbytes} bytes could be read")
            chunks.append(chunk)
            done += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def tasks_on_machine() -> int:
    """Every thread on the machine, from ``/proc/loadavg`` (one cheap read)."""
    try:
        return int(Path("/proc/loadavg").read_text().split()[3].split("/")[1])
    except (OSError, ValueError, IndexError):
        return 1 << 30


# --- the child's Python ---------------------------------------------------------------


def site_dirs() -> list[str]:
    """The site-packages folders, as real paths (a venv reached through a link too)."""
    return [os.path.realpath(p) for p in site.getsitepackages() if Path(p).is_dir()]


def installed_pth_files() -> list[str]:
    """The ``.pth`` files pip installed (named in a RECORD), not ones something else wrote;
    never the editable install's (it would import the instructor's checkout)."""
    found = []
    for sp in site_dirs():
        recorded = set()
        for record in Path(sp).glob("*.dist-info/RECORD"):
            for line in record.read_text(encoding="utf-8", errors="replace").splitlines():
                name = line.split(",")[0]
                if name.endswith(".pth") and "/" not in name and "__editable__" not in name:
                    recorded.add(name)
        found += [str(Path(sp, n)) for n in sorted(recorded) if Path(sp, n).exists()]
    return found


def python() -> str:
    """The interpreter children run: the real file, so no venv link has to exist for them."""
    return os.path.realpath(sys.executable)


def python_env(tree: str) -> dict:
    """What a child's own ``python`` subprocesses need to find the packages (local mode)."""
    return {"PYTHONPATH": os.pathsep.join([tree, *site_dirs()])}


# --- the grading tree -----------------------------------------------------------------

CHILD_FILES = ("__init__.py", "config.py", "harness.py", "timing.py", "plugin.py", "wire.py", "boot.py",
               "labkernel.py", "labrun.py", "baselines.py")  # fmt: skip
INI = """\
[pytest]
python_files = test_*.py bench_*.py
python_functions = test_* bench_*
addopts =
"""


def _ignore(folder: str, names: list[str]) -> set[str]:
    return {n for n in names if n in ("__pycache__", ".ipynb_checkpoints")
            or n.endswith((".pyc", ".so", ".nbi", ".nbc"))}  # fmt: skip


def withhold(source: str, names: set[str], ex_id: str) -> str:
    """``source`` with the bodies of functions ``names`` replaced by a refusal."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    for fn in sorted((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names),
                     key=lambda n: -n.lineno):  # fmt: skip
        start = fn.body[0].lineno - 1
        if isinstance(fn.body[0], ast.Expr) and isinstance(fn.body[0].value, ast.Constant):
            start = fn.body[0].end_lineno  # keep the docstring
        indent = " " * fn.body[0].col_offset
        lines[start : fn.end_lineno] = [
            f"{indent}raise NotImplementedError('reference of Exercise {ex_id} is withheld "
            "while it is graded')\n"
        ]
    return "".join(lines)


@dataclass(frozen=True)
class Withheld:
    """References a tree leaves out: whole chapters (a lab), or some functions of one."""

    chapters: frozenset = frozenset()
    exercise: str | None = None
    names: frozenset = frozenset()


def build_tree(package: Path, references: bool, withheld: Withheld = Withheld(),
               dest: Path | None = None) -> Path:  # fmt: skip
    """A grading tree: ``package`` (a copy of the submission's ``minitorch/``, made by
    :func:`autograder.grader.submission.copy_package`) with the grader's mode switch,
    the child side of the grader, the graded tests and, when ``references``, the
    references the mode needs minus ``withheld``. The caller removes it."""
    tree = Path(tempfile.mkdtemp(prefix="grading-")) if dest is None else dest
    try:
        shutil.copytree(package, tree / "minitorch", symlinks=True)
        shutil.copy(ROOT / "minitorch" / "exercises.py", tree / "minitorch" / "exercises.py")
        (tree / "autograder").mkdir()
        for name in CHILD_FILES:
            shutil.copy(ROOT / "autograder" / name, tree / "autograder" / name)
        shutil.copytree(ROOT / "autograder" / "tests", tree / "autograder" / "tests",
                        ignore=_ignore)  # fmt: skip
        if references:
            ref = tree / "solutions" / "reference"
            ref.mkdir(parents=True)
            (tree / "solutions" / "__init__.py").write_text("")
            for path in sorted((ROOT / "solutions" / "reference").glob("ch*.py")):
                name = path.name
                chapter = int(name[2:].split("_")[0].split(".")[0])
                if chapter in withheld.chapters:
                    continue
                text = path.read_text(encoding="utf-8")
                if withheld.exercise and chapter == int(withheld.exercise.split(".")[0]):
                    text = withhold(text, set(withheld.names), withheld.exercise)
                (ref / name).write_text(text, encoding="utf-8")
        (tree / "pytest.ini").write_text(INI)
        for path in [tree, *tree.rglob("*")]:  # readable by a child of another user, not writable
            if not path.is_symlink():
                path.chmod(0o755 if path.is_dir() else 0o644)
    except BaseException:  # a full disk, say: no half-built tree is left behind
        remove_tree(tree)
        raise
    return tree


def remove_tree(tree: Path) -> None:
    for path in [tree, *tree.rglob("*")]:  # a child may have made parts read-only
        try:
            if not path.is_symlink():
                path.chmod(0o700)
        except OSError:
            pass
    shutil.rmtree(tree, ignore_errors=True)


# --- local children ---------------------------------------------------------------------


def local_preexec() -> None:
    """``preexec_fn`` of a local child: its own session and resource limits."""
    os.setsid()
    _limits()


def _limits(extra: dict | None = None) -> None:
    for name, value in {**config.LIMITS, **(extra or {})}.items():
        try:
            resource.setrlimit(getattr(resource, name), (value, value))
        except (ValueError, OSError, AttributeError):
            pass


# --- official children -----------------------------------------------------------------


def grading_user(create: bool = True) -> tuple[int, int]:
    """The grading user's (uid, gid), created with ``useradd`` when missing.

    Refuses unless this process is root (only root can start a child as another
    user) and the user is an unprivileged one of its own."""
    if _libc is None or platform.system() != "Linux":
        raise Refused("official grading needs Linux (namespaces, seccomp)")
    if os.geteuid() != 0:
        raise Refused("official grading runs as root: it starts learner code as "
                      f"the unprivileged user {config.GRADER_USER} (use sudo, or Gradescope)")  # fmt: skip
    name = config.GRADER_USER
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        useradd = shutil.which("useradd") or "/usr/sbin/useradd"
        if not create or not os.path.exists(useradd):
            raise Refused(f"no user {name} and no useradd to create it") from None
        proc = subprocess.run([useradd, "--system", "--user-group", "--no-create-home",
                               "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", name],
                              capture_output=True, text=True)  # fmt: skip
        if proc.returncode != 0:
            raise Refused(f"useradd {name} failed: {proc.stderr.strip()[-300:]}") from None
        pw = pwd.getpwnam(name)
    if pw.pw_uid == 0 or pw.pw_gid == 0:
        raise Refused(f"user {name} is root")
    return pw.pw_uid, pw.pw_gid


_SECCOMP = {  # machine: (audit arch, clone, clone3, fork, vfork)
    "x86_64": (0xC000003E, 56, 435, 57, 58),
    "aarch64": (0xC00000B7, 220, 435, None, None),
}


def _no_processes_filter() -> ctypes.Structure:
    """A seccomp program: creating a process fails (EPERM); threads are allowed.

    ``clone3`` answers ENOSYS so that the C library falls back to ``clone``, whose
    flags a filter can read."""
    spec = _SECCOMP.get(platform.machine())
    if spec is None:
        raise Refused(f"no process filter for {platform.machine()}")
    arch, clone, clone3, fork, vfork = spec

    class Insn(ctypes.Structure):
        _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                    ("k", ctypes.c_uint)]  # fmt: skip

    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Insn))]

    ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    allow, kill = 0x7FFF0000, 0x80000000
    eperm, enosys = 0x00050000 | 1, 0x00050000 | 38
    denied = [n for n in (fork, vfork) if n is not None]
    # Each instruction is (code, jump if true, jump if false, k); jumps count from the next one.
    prog = [(ld, 0, 0, 4), (jeq, 1, 0, arch), (ret, 0, 0, kill), (ld, 0, 0, 0),
            (jge, 0, 1, 0x40000000), (ret, 0, 0, kill)]  # fmt: skip
    prog += [(jeq, 0, 1, clone3), (ret, 0, 0, enosys)]
    for nr in denied:
        prog += [(jeq, 0, 1, nr), (ret, 0, 0, eperm)]
    prog += [(jeq, 1, 0, clone), (ret, 0, 0, allow), (ld, 0, 0, 16),
             (jset, 0, 1, 0x10000), (ret, 0, 0, allow), (ret, 0, 0, eperm)]  # fmt: skip
    insns = (Insn * len(prog))(*[Insn(*i) for i in prog])
    return Prog(len(prog), insns), insns


@dataclass
class World:
    """What one official child sees. ``root``: an empty folder of the parent's to mount the
    world on; ``tree``: its grading tree (read-only at ``/grading``); ``scratch``: a
    folder shared with other processes of the same sample (``None``: a fresh tmpfs)."""

    root: Path
    tree: Path
    scratch: Path | None = None


SYSTEM = ("/usr", "/bin", "/lib", "/lib64", "/lib32", "/libx32", "/sbin", "/sys")
ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "passwd", "group", "nsswitch.conf",
       "localtime", "hosts", "mime.types")  # fmt: skip
DEVICES = ("null", "zero", "full", "random", "urandom")


def _check(ok: bool, what: str) -> None:
    if not ok:
        raise OSError(ctypes.get_errno(), f"{what}: {os.strerror(ctypes.get_errno())}")


def _enc(s) -> bytes | None:
    return s if s is None or isinstance(s, bytes) else os.fsencode(str(s))


def _mount(src, dst, fstype, flags, data=None) -> None:
    enc = _enc
    _check(_libc.mount(enc(src), enc(dst), enc(fstype), flags, enc(data)) == 0, f"mount {dst}")


def _bind(src: str, root: str, writable: bool = False) -> None:
    """``src`` at the same path under ``root``; links are recreated as links."""
    dst = root + src
    if os.path.islink(src):
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if not os.path.lexists(dst):
            os.symlink(os.readlink(src), dst)
        return
    if not os.path.exists(src):
        return
    if os.path.isdir(src):
        os.makedirs(dst, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        open(dst, "a").close()
    _mount(src, dst, None, MS_BIND | MS_REC)
    if not writable:
        _mount(None, dst, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def python_paths() -> list[str]:
    """What the child's interpreter reads: its prefix (stdlib) and the site-packages."""
    return sorted({os.path.realpath(sys.base_prefix), *site_dirs()})


def official_preexec(world: World, ids: tuple[int, int] | None, seccomp: bool = True):
    """The ``preexec_fn`` of an official child (see the module's docstring). Anything that
    fails raises: the child never starts with less than all of it. ``ids`` None: the
    child runs the course's own code (benchmark baselines) and stays uid 0, without
    capabilities: learner code, another user, cannot signal or trace it."""
    prog = _no_processes_filter() if seccomp else None  # built before fork: no allocation after
    paths = python_paths()

    def enter() -> None:
        os.setsid()
        os.umask(0o022)
        _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS) == 0,
               "unshare")  # fmt: skip
        _mount(None, "/", None, MS_REC | MS_PRIVATE)
        root = str(world.root)
        _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=4m,mode=755")
        for path in SYSTEM:
            _bind(path, root)
        for name in ETC:
            _bind(f"/etc/{name}", root)
        os.makedirs(root + "/grading")
        _mount(str(world.tree), root + "/grading", None, MS_BIND | MS_REC)
        _mount(
            None, root + "/grading", None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV
        )
        os.makedirs(root + "/tmp")
        if world.scratch is None:
            _mount("tmpfs", root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV,
                   f"size={config.SCRATCH_BYTES},mode=1777")  # fmt: skip
        else:
            _mount(str(world.scratch), root + "/tmp", None, MS_BIND)
        for path in paths:  # after /tmp: a venv under /tmp (a clone there) is bound inside it
            _bind(path, root)
        for name in DEVICES:
            _bind(f"/dev/{name}", root, writable=True)
        os.makedirs(root + "/dev/shm")
        _mount("tmpfs", root + "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,mode=1777")
        for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                             ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):  # fmt: skip
            os.symlink(target, f"{root}/dev/{name}")
        os.makedirs(root + "/proc")
        flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
        if _libc.mount(b"proc", (root + "/proc").encode(), b"proc", flags, b"hidepid=invisible"):
            _mount("proc", root + "/proc", "proc", flags, "hidepid=2")
        os.chroot(root)
        os.chdir("/grading")
        _limits({"RLIMIT_NPROC": config.OFFICIAL_NPROC})
        _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0, "no_new_privs")
        for cap in range(64):
            _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
        if ids is not None:
            os.setgroups([])
            os.setgid(ids[1])
            os.setuid(ids[0])
            if os.getuid() != ids[0] or os.geteuid() == 0:
                raise OSError("could not become the grading user")
        if prog is not None:
            _check(_libc.prctl(PR_SET_SECCOMP, 2, ctypes.byref(prog[0]), 0, 0) == 0, "seccomp")

    return enter


def new_world(work: Path, tree: Path, scratch: Path | None = None) -> World:
    """An empty mount point under ``work`` (the parent's own folder, mode 700)."""
    root = Path(tempfile.mkdtemp(prefix="world-", dir=work))
    return World(root, tree, scratch)
