"""Where learner code runs, and how the parent keeps it there.

Local grading (``make grade``) starts plain child processes: their own
session, resource limits, every descendant killed afterwards. It is feedback
on the learner's own machine, not a security boundary.

Official grading (``--official``: Gradescope, ``make grade-submission``) starts
every child (test, benchmark, lab) as the run's own grading user, an
unprivileged user no other run holds (:func:`take_grading_user`), in a world of
its own (:func:`official_popen`, :func:`official_preexec`):

* new PID, mount, network, IPC and UTS namespaces; the filesystem it sees is a
  fresh tmpfs holding only read-only binds of ``/usr`` (and the ``/bin``,
  ``/lib`` links), a few files of ``/etc``, ``/sys``, the Python it runs, its
  grading tree (at ``/grading``) and a tmpfs of its own at ``/tmp`` (a
  benchmark's fresh programs share one more, at ``/cache``); ``/proc`` shows
  only itself; no network, not even loopback;
* chroot into it, then ``no_new_privs``, an empty capability bounding set,
  no supplementary groups and the grading user's uid and gid;
* a seccomp filter that refuses to create processes (threads are fine), so
  the parent's CPU clock of the child is the CPU time of all its work;
* resource limits (:data:`config.LIMITS`).

The graded exercise's answer (its reference and the helpers it reaches:
:func:`withhold`), the oracle, the grader, the results and the other children's
folders are not in that world, whatever their permissions on the host; no
other process is. When the machine cannot provide it (not root, no such user
and no ``useradd``, every user of the pool taken, no namespaces, an
architecture without the seccomp filter), official grading refuses
(:class:`Refused`) instead of running learner code with less.
"""

from __future__ import annotations

import ast
import ctypes
import fcntl
import os
import platform
import pwd
import resource
import shutil
import signal
import site
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .. import config
from .manifest import exercises

ROOT = config.ROOT
PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP, PR_SET_SECCOMP = 36, 38, 24, 22
CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWIPC, CLONE_NEWUTS = 0x20000, 0x40000000, 0x8000000, 0x4000000
CLONE_NEWPID = 0x20000000
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
    """Kill every process of ``uid`` (a grading user this run holds: it owns nothing else)."""
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
               "labkernel.py", "labrun.py", "baselines.py", "strategies.py")  # fmt: skip
INI = """\
[pytest]
python_files = test_*.py bench_*.py
python_functions = test_* bench_*
addopts =
"""


def _ignore(folder: str, names: list[str]) -> set[str]:
    return {n for n in names if n in ("__pycache__", ".ipynb_checkpoints")
            or n.endswith((".pyc", ".so", ".nbi", ".nbc"))}  # fmt: skip


def _binds(stmt: ast.stmt) -> set[str]:
    """The module-level names a top-level statement defines (imports are not answers: none)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return set()


def _uses(stmt: ast.stmt) -> set[str]:
    return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}


def withhold(source: str, ex_id: str, stubs: dict[str, str]) -> tuple[str, set[str]]:
    """``source`` (one reference module) without the code of exercise ``ex_id``'s answer.

    ``stubs`` maps every exercise's reference name in the module to its id. Exercise
    ``ex_id`` owns its reference and every helper it reaches (transitively) without
    passing through another exercise's reference: all of it is deleted, not emptied, so
    neither its source nor its bytecode is in the module. What uses a deleted helper is
    deleted too: another exercise's reference deleted so is bound to the learner's own
    function (``REGISTRY[id].stub``), ``ex_id``'s to a refusal (calling its own stub would
    recurse). Returns the new source and the ids whose references were deleted."""
    tree = ast.parse(source)
    binds = [_binds(s) for s in tree.body]
    uses = [_uses(s) for s in tree.body]
    defined = set().union(*binds)
    name = next(n for n, i in stubs.items() if i == ex_id)
    if name not in defined:  # another part of the chapter
        return source, set()
    owned, frontier = set(), [name]
    while frontier:  # the answer: its reference and what it reaches but other references
        n = frontier.pop()
        if n in owned:
            continue
        owned.add(n)
        for b, u in zip(binds, uses):
            if n in b:
                frontier += [m for m in u & defined if m not in stubs or m == n]
    gone, grew = set(owned), True
    while grew:  # and what cannot run without a deleted helper
        grew = False
        for b, u in zip(binds, uses):
            if b and not b <= gone and u & (gone - set(stubs)):
                gone |= b
                grew = True
    lines = source.splitlines(keepends=True)
    for stmt, b in sorted(zip(tree.body, binds), key=lambda sb: -sb[0].lineno):
        if b & gone:
            first = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", []))])
            lines[first - 1 : stmt.end_lineno] = []
    lines += [
        f"\n\n# withheld while Exercise {ex_id} is graded\n"
        f"def {name}(*args, **kwargs):\n"
        f"    raise NotImplementedError('reference of Exercise {ex_id} is withheld while it is graded')\n"
    ]
    others = sorted(n for n in gone if n in stubs and n != name)
    if others:
        lines.append(
            "\n\n# they used its helpers: the learner's code runs instead\n"
            "from minitorch.exercises import REGISTRY as _REGISTRY  # noqa: E402\n\n"
        )
        lines += [f"{n} = _REGISTRY[{stubs[n]!r}].stub\n" for n in others]
    return "".join(lines), {stubs[n] for n in gone if n in stubs}


def _chapter(path: Path) -> int:
    return int(path.name[2:].split("_")[0].split(".")[0])  # ch7_codegen.py: 7


def _stubs(names: frozenset, chapter: int) -> dict[str, str]:
    """Reference name -> id of chapter ``chapter``'s exercises."""
    return {n: i for n, i in names if i.split(".")[0] == str(chapter)}


def shared_with(ex_id: str, names: frozenset) -> set[str]:
    """The other exercises whose references go with ``ex_id``'s answer (they use a helper it
    owns): while ``ex_id`` is graded officially, they run the learner's code."""
    chapter = int(ex_id.split(".")[0])
    stubs, found = _stubs(names, chapter), set()
    for path in sorted((ROOT / "solutions" / "reference").glob("ch*.py")):
        if _chapter(path) == chapter and ex_id in stubs.values():
            found |= withhold(path.read_text(encoding="utf-8"), ex_id, stubs)[1]
    return found - {ex_id}


@dataclass(frozen=True)
class Withheld:
    """References a tree leaves out: whole chapters (a lab), or one exercise's answer
    (:func:`withhold`); ``names``: (reference name, id) of every exercise."""

    chapters: frozenset = frozenset()
    exercise: str | None = None
    names: frozenset = frozenset()

    @staticmethod
    def names_of(info: dict | None = None) -> frozenset:
        return frozenset((i.name, i.id) for i in (info or exercises()).values())

    @classmethod
    def answer(cls, ex_id: str, info: dict | None = None) -> Withheld:
        return cls(exercise=ex_id, names=cls.names_of(info))


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
                if _chapter(path) in withheld.chapters:
                    continue
                text = path.read_text(encoding="utf-8")
                stubs = _stubs(withheld.names, _chapter(path))
                if withheld.exercise in stubs.values():
                    text = withhold(text, withheld.exercise, stubs)[0]
                (ref / path.name).write_text(text, encoding="utf-8")
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


def grading_user(name: str, create: bool = True) -> tuple[int, int]:
    """User ``name``'s (uid, gid), created with ``useradd`` when missing; it must be an
    unprivileged user of its own."""
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


@dataclass
class Lease:
    """A grading user this run holds alone: an exclusive ``flock`` on its lock file, let go
    when the file closes (:meth:`release`, or the grader's death)."""

    name: str
    ids: tuple[int, int]
    lock: int | None

    def release(self) -> None:
        if self.lock is not None:
            os.close(self.lock)
            self.lock = None


def take_grading_user(create: bool = True) -> Lease:
    """A user of the pool (:data:`config.GRADER_USERS`) that no other official run holds
    (two runs sharing one killed each other's children: every process of the run's user is
    killed after each child). Refuses unless this process is root (only root can start a
    child as another user), and when every user of the pool is taken."""
    if _libc is None or platform.system() != "Linux":
        raise Refused("official grading needs Linux (namespaces, seccomp)")
    if os.geteuid() != 0:
        raise Refused("official grading runs as root: it starts learner code as an "
                      f"unprivileged user {config.GRADER_USER}-N (use sudo, or Gradescope)")  # fmt: skip
    locks = config.GRADER_LOCKS
    os.makedirs(locks, mode=0o700, exist_ok=True)
    st = os.lstat(locks)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0 or st.st_mode & 0o022:
        raise Refused(f"{locks} (the grading users' lock files) is not a folder only root writes")
    count = config.GRADER_USERS
    for n in range(count):
        name = f"{config.GRADER_USER}-{n}"
        fd = os.open(f"{locks}/{name}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600)  # fmt: skip
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            ids = grading_user(name, create)
        except BlockingIOError:  # another run holds it
            os.close(fd)
            continue
        except BaseException:
            os.close(fd)
            raise
        kill_user(ids[0])  # what a run that died left behind
        return Lease(name, ids, fd)
    raise Refused(f"{count} official gradings already run on this machine, each as its own user "
                  f"({config.GRADER_USER}-0 to -{count - 1}); this one would share a user with "
                  "one of them. Run it when one has finished.")  # fmt: skip


_SECCOMP = {  # machine: (audit arch, clone, clone3, fork, vfork, (add_key, request_key, keyctl))
    "x86_64": (0xC000003E, 56, 435, 57, 58, (248, 249, 250)),
    "aarch64": (0xC00000B7, 220, 435, None, None, (217, 218, 219)),
}


def _no_processes_filter() -> ctypes.Structure:
    """A seccomp program: creating a process fails (EPERM); threads are allowed; the
    keyring calls answer ENOSYS.

    ``clone3`` answers ENOSYS so that the C library falls back to ``clone``, whose
    flags a filter can read."""
    spec = _SECCOMP.get(platform.machine())
    if spec is None:
        raise Refused(f"no process filter for {platform.machine()}")
    arch, clone, clone3, fork, vfork, keys = spec

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
    # The kernel's keyrings are shared by every process of a user: a channel between the
    # run's children (a benchmark's test process and its fresh programs) that no world cuts.
    for nr in (clone3, *keys):
        prog += [(jeq, 0, 1, nr), (ret, 0, 0, enosys)]
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
    tmpfs shared with the other processes of the same sample (:func:`mount_scratch`), at
    ``/cache``. Its ``/tmp`` is always a fresh tmpfs of its own."""

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
        _mount("tmpfs", root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV,
               f"size={config.SCRATCH_BYTES},mode=1777")  # fmt: skip
        if world.scratch is not None:
            os.makedirs(root + "/cache")
            _mount(str(world.scratch), root + "/cache", None, MS_BIND)
        for path in paths:  # after /tmp: a venv under /tmp (a clone there) is bound inside it
            _bind(path, root)
        for name in DEVICES:
            _bind(f"/dev/{name}", root, writable=True)
        os.makedirs(root + "/dev/shm")
        _mount("tmpfs", root + "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,mode=1777")
        for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                             ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):  # fmt: skip
            os.symlink(target, f"{root}/dev/{name}")
        os.makedirs(root + "/proc")  # of its own PID namespace (official_popen): itself alone
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


def official_popen(args: list[str], world: World, ids: tuple[int, int] | None,
                   **kwargs) -> subprocess.Popen:  # fmt: skip
    """An official child, started in a PID namespace of its own (it is the namespace's
    init, and process creation is refused in it): its ``/proc`` and ``kill()`` see only
    itself, so it can neither see, trace nor signal another child of the run, another
    run's or the grader, and nothing of it outlives it. Then :func:`official_preexec`."""
    preexec = official_preexec(world, ids)
    own = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    try:  # unshare(CLONE_NEWPID) moves only this thread's next child; setns comes back
        _check(_libc.unshare(CLONE_NEWPID) == 0, "unshare(CLONE_NEWPID)")
        try:
            return subprocess.Popen(args, preexec_fn=preexec, **kwargs)
        finally:
            _check(_libc.setns(own, CLONE_NEWPID) == 0, "setns(CLONE_NEWPID)")
    finally:
        os.close(own)


def new_world(work: Path, tree: Path, scratch: Path | None = None) -> World:
    """An empty mount point under ``work`` (the parent's own folder, mode 700)."""
    root = Path(tempfile.mkdtemp(prefix="world-", dir=work))
    return World(root, tree, scratch)


def mount_scratch(path: Path, ids: tuple[int, int]) -> None:
    """A tmpfs of :data:`config.SCRATCH_BYTES` at ``path`` (under the parent's own folder),
    owned by ``ids``: what a benchmark's fresh programs share (its Numba cache)."""
    _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV,
           f"size={config.SCRATCH_BYTES},mode=700,uid={ids[0]},gid={ids[1]}")  # fmt: skip


def unmount(path: Path) -> None:
    _libc.umount2(_enc(path), 2)  # MNT_DETACH: gone even while a process still holds it
