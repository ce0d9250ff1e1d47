"""Starting grading children, and stopping everything they start.

A :class:`Launcher` turns a job (``autograder/boot.py``) into a running
:class:`Child` with a results pipe (child to parent) and, for benchmarks, a
command pipe (parent to child):

* local grading forks each child from a server that has already imported the
  libraries, the learner's package and the graded tests (one server per
  grading tree); the children of one run share a Numba cache;
* official grading starts each child fresh, as the run's own grading user
  (``sandbox.take_grading_user``) in a world and a PID namespace of its own
  (``sandbox.official_popen``), with nothing shared but, for a benchmark's fresh
  programs, one size-limited tmpfs at ``/cache``.

After every child the parent kills what it left: its process group, every
descendant of the grader (a subreaper: double forks come back to it), and in
official grading every process of the run's grading user.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import config
from ..boot import BOOT
from . import sandbox


@dataclass
class Child:
    pid: int
    out: int  # read end of the results pipe
    ctl: int | None  # write end of the command pipe
    log: Path
    popen: subprocess.Popen | None = None
    server: Server | None = None
    stopped: bool = False

    def cpu(self) -> float:
        return sandbox.cpu_seconds(self.pid)

    def exit_code(self) -> int | None:
        """The exit code (negative: a signal) once it has ended, else None."""
        if self.popen is not None:
            return self.popen.poll()
        return self.server.exited(self.pid)

    def send(self, command: dict) -> bool:
        try:
            os.write(self.ctl, (json.dumps(command) + "\n").encode())
            return True
        except (OSError, TypeError):
            return False

    def signal(self, sig: int) -> None:
        for kill in (lambda: os.killpg(self.pid, sig), lambda: os.kill(self.pid, sig)):
            try:
                kill()
                return
            except (ProcessLookupError, PermissionError):
                pass

    def tail(self, lines: int = 8) -> str:
        """The log's last lines; only its last :data:`config.LOG_TAIL` bytes are read (a
        child that printed hundreds of MiB costs no more memory than one that did not)."""
        try:
            with open(self.log, "rb") as f:
                f.seek(max(0, f.seek(0, os.SEEK_END) - config.LOG_TAIL))
                text = f.read(config.LOG_TAIL).decode("utf-8", "replace").strip().splitlines()
        except OSError:
            return ""
        keep = [t for t in text if t.strip() and not t.startswith(("=", "_", "  warnings"))]
        return "\n".join(t[:300] for t in keep[-lines:])


def keep_tail(log: Path) -> None:
    """Cut a finished child's log to its last :data:`config.LOG_TAIL` bytes (what
    :meth:`Child.tail` reads): a run's logs together take no more disk than one child's."""
    try:
        with open(log, "r+b") as f:
            size = f.seek(0, os.SEEK_END)
            if size > config.LOG_TAIL:
                f.seek(size - config.LOG_TAIL)
                kept = f.read()
                f.seek(0)
                f.write(kept)
                f.truncate()
    except OSError:
        pass


def exit_reason(code: int | None) -> str:
    if code is None:
        return "stopped by the grader"
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"the test process exited with code {code}"


# Local grading passes this on: a machine without a GPU grades as a GPU machine does
# (traffic tests rerun in a child on the simulator; autograder/tests/ch4/util.py).
KEEP = ("MINITORCH_RERUN_ON_SIMULATOR",)


def gpu_present() -> bool:
    """An NVIDIA GPU seems present (minitorch/cuda/__init__.py asks the same; the parent
    imports no minitorch)."""
    return os.path.exists("/dev/nvidia0") or shutil.which("nvidia-smi") is not None


def base_env(official: bool, scratch: str, gpu: bool = False) -> dict:
    """The environment of every child: the grader's settings; in official grading nothing
    else of the parent's (no token or path of the instructor's travels). Children run
    chapter 4's kernels on the CUDA simulator unless ``gpu`` (or the caller's environment
    says otherwise)."""
    if official:
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    else:
        drop = ("MINITORCH_", "AUTOGRADER_", "PYTHON", "PYTEST_", "NUMBA_CACHE")
        env = {k: v for k, v in os.environ.items() if not k.startswith(drop) or k in KEEP}
    env.update(MINITORCH_MODE_FIXED="1", PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1",
               PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", MPLBACKEND="Agg",
               NUMBA_CACHE_DIR=f"{scratch}/numba")  # minitorch's cache follows it (core/cachedir.py)  # fmt: skip
    if official:
        env.update(HOME=scratch, TMPDIR=scratch)
    # Grading measures the learners' kernels: the course's tuned CUDA kernels (on by default
    # on a GPU, minitorch/cuda/backend.py) would serve 4.5's matmul benchmark there instead.
    env["MINITORCH_CUDA_TUNED"] = "0"
    if not gpu:
        env.setdefault("NUMBA_ENABLE_CUDASIM", "1")
    # One BLAS thread: on a busy 2-core machine threaded BLAS makes timings erratic.
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env.setdefault("MKL_NUM_THREADS", "1")
    return env


class Server:
    """Local grading: one process that imported everything once and forks a child per job."""

    def __init__(self, job: dict, env: dict, log: Path, timeout: float):
        self.exits: dict[int, int] = {}
        mine, theirs = socket.socketpair()
        self.sock, self.buffer = mine, b""
        with open(log, "ab") as out:
            self.popen = subprocess.Popen(
                [sandbox.python(), "-I", "-S", "-B", "-c", BOOT,
                 json.dumps({**job, "kind": "server", "control": theirs.fileno()})],
                env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=job["tree"],
                pass_fds=(theirs.fileno(),), preexec_fn=sandbox.local_preexec)  # fmt: skip
        theirs.close()
        self.log = log
        self.problem = ""
        if self._reply(timeout, "ready") is None:
            self.problem = "the grading process could not start"
            if self.popen.poll() is None:
                self.popen.kill()
                self.problem = (f"importing minitorch did not finish within {timeout:.0f} s "
                                "(a loop or a wait at import time?)")  # fmt: skip

    def _reply(self, timeout: float, key: str) -> dict | None:
        """The next message with ``key``, noting exits on the way; None if none comes."""
        deadline = time.monotonic() + timeout
        while True:
            *lines, self.buffer = self.buffer.split(b"\n")
            found = None
            for line in lines:
                msg = json.loads(line)
                if "exit" in msg:
                    self.exits[msg["exit"]] = msg["status"]
                elif key in msg and found is None:
                    found = msg
            if found is not None:
                return found
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.sock], [], [], min(left, 0.5))[0]:
                if left <= 0 or self.popen.poll() is not None:
                    return None
                continue
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                return None
            self.buffer += chunk

    def exited(self, pid: int) -> int | None:
        """Its exit code (the server reports it), None while it runs."""
        if pid not in self.exits:
            self._reply(0, "never")
        if pid not in self.exits and (
            self.popen.poll() is not None or not Path(f"/proc/{pid}").exists()
        ):
            deadline = time.monotonic() + 2  # reaped: the server's word is on its way
            while (
                pid not in self.exits and time.monotonic() < deadline and self.popen.poll() is None
            ):
                self._reply(0.1, "never")
            return self.exits.get(pid, -signal.SIGKILL)
        return self.exits.get(pid)

    def fork(self, request: dict, fds: list[int]) -> int | None:
        try:
            socket.send_fds(self.sock, [json.dumps(request).encode()], fds)
        except OSError:
            return None
        reply = self._reply(60, "pid")
        return reply["pid"] if reply else None

    def close(self) -> None:
        try:
            self.sock.close()
        finally:
            if self.popen.poll() is None:
                self.popen.kill()
            self.popen.wait()


@dataclass
class Launcher:
    """Starts children; ``official`` decides how (see the module's docstring)."""

    official: bool
    work: Path  # the parent's own folder for this run (mode 700)
    test_timeout: float = config.TEST_TIMEOUT
    ids: tuple[int, int] | None = None
    lease: sandbox.Lease | None = None  # official grading: the user this run holds alone
    mounts: list = field(default_factory=list)  # official grading: the fresh programs' tmpfs
    servers: dict = field(default_factory=dict)
    scratch: Path | None = None  # local grading: the run's shared scratch (Numba cache)
    count: int = 0
    gpu: bool = False  # local grading on a GPU: benchmarks that need one run there

    def __post_init__(self):
        if self.official:
            self.lease = sandbox.take_grading_user()
            self.ids = self.lease.ids
        else:
            self.scratch = Path(tempfile.mkdtemp(prefix="scratch-", dir=self.work))
            self.gpu = gpu_present()

    def env(self, mode: str, focus: str | None = None, gpu: bool = False) -> dict:
        env = base_env(self.official, "/tmp" if self.official else str(self.scratch), gpu)
        env["MINITORCH_MODE"] = mode
        if focus:
            env["MINITORCH_FOCUS"] = focus
        return env

    def server(self, tree: Path, mode: str, preload: list[str], gpu: bool = False) -> Server:
        """Local grading: the server of ``tree`` (started on first use), one on the GPU."""
        key = (str(tree), mode, gpu)
        if key not in self.servers:
            job = {"tree": str(tree), "sites": sandbox.site_dirs(),
                   "pths": sandbox.installed_pth_files(), "preload": preload}  # fmt: skip
            env = {**self.env(mode, gpu=gpu), **sandbox.python_env(str(tree))}
            self.servers[key] = Server(job, env, self.work / f"server-{len(self.servers)}.log",
                                       self.test_timeout)  # fmt: skip
        return self.servers[key]

    def start(self, job: dict, tree: Path, mode: str, focus: str | None = None,
              preload: list[str] = (), commands: bool = False, baseline: bool = False,
              scratch: Path | None = None, gpu: bool = False) -> Child | str:  # fmt: skip
        """A child running ``job`` on ``tree``; a reason instead when none could start.
        ``baseline``: the course's own code (benchmark baselines), not the learner's;
        ``scratch``: a folder its ``/tmp`` shares with other children (:meth:`scratch_dir`);
        ``gpu``: on the GPU, not the simulator (local grading only)."""
        self.count += 1
        log = self.work / f"child-{self.count}.log"
        out_r, out_w = os.pipe()
        ctl_r, ctl_w = os.pipe() if commands else (None, None)
        theirs = [fd for fd in (out_w, ctl_r) if fd is not None]
        try:
            if self.official:
                ids = None if baseline else self.ids
                return self._official(
                    job, tree, mode, focus, log, (out_r, out_w, ctl_r, ctl_w), ids, scratch
                )
            if scratch is not None:
                job = {**job, "cache": str(scratch)}
            server = self.server(tree, mode, list(preload), gpu and self.gpu)
            if server.problem:
                return f"{server.problem}\n{Child(0, 0, None, server.log).tail()}"
            with open(log, "ab") as f:
                pid = server.fork({**job, "commands": commands}, [*theirs, f.fileno()])
            if pid is None:
                return f"the grading process stopped\n{Child(0, 0, None, server.log).tail()}"
            return Child(pid, out_r, ctl_w, log, server=server)
        finally:
            for fd in theirs:
                os.close(fd)

    def _official(self, job, tree, mode, focus, log, pipes, ids, scratch) -> Child:
        out_r, out_w, ctl_r, ctl_w = pipes
        world = sandbox.new_world(self.work, tree, scratch)
        job = {**job, "tree": "/grading", "sites": sandbox.site_dirs(),
               "pths": sandbox.installed_pth_files(), "out": out_w, "ctl": ctl_r}  # fmt: skip
        if scratch is not None:
            job["cache"] = "/cache"
        with open(log, "ab") as f:
            popen = sandbox.official_popen(
                [sandbox.python(), "-I", "-S", "-B", "-c", BOOT, json.dumps(job)], world, ids,
                env=self.env(mode, focus), stdin=subprocess.DEVNULL, stdout=f,
                stderr=subprocess.STDOUT, pass_fds=[fd for fd in (out_w, ctl_r) if fd is not None],
                cwd="/")  # fmt: skip
        return Child(popen.pid, out_r, ctl_w, log, popen=popen)

    def scratch_dir(self, baseline: bool) -> Path:
        """A folder for children to share (a benchmark's fresh processes); in official
        grading a tmpfs of its own (no child writes to the grader's disk), the learner's
        children's owned by the grading user, in no other child's world."""
        path = Path(tempfile.mkdtemp(prefix="shared-", dir=self.work))
        if self.official:
            sandbox.mount_scratch(path, (0, 0) if baseline else self.ids)
            self.mounts.append(path)
        return path

    def finish(self, child: Child | None, others: tuple[Child, ...] = ()) -> None:
        """Kill ``child`` and everything it left but ``others`` (still running); close its
        pipes."""
        if child is not None:
            child.signal(signal.SIGKILL)
            if child.popen is not None:
                child.popen.wait()
            for fd in (child.out, child.ctl):
                if fd is not None:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
        spare = {s.popen.pid for s in self.servers.values()} | {o.pid for o in others}
        if child is not None and child.server is not None:  # its server stays
            spare.add(child.server.popen.pid)
            child.server.exited(child.pid)
        sandbox.kill_descendants(spare)
        if self.lease is not None and not others:  # baselines run as root: only learners are left
            sandbox.kill_user(self.ids[0])
        if child is not None:
            keep_tail(child.log)

    def close(self) -> None:
        for server in self.servers.values():
            server.close()
        self.servers.clear()
        self.finish(None)
        for path in self.mounts:
            sandbox.unmount(path)
        self.mounts.clear()
        if self.lease is not None:  # another run may take the user now: never kill it again
            self.lease.release()
            self.lease = None
