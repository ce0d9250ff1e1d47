"""How every grading child starts (the child's side).

The parent runs ``python -I -S -B -c BOOT '<job as JSON>'``: no user site, no
environment paths, no bytecode written. ``BOOT`` puts the grading tree and the
site-packages on ``sys.path`` and calls :func:`main`, which runs one job:

* ``tests``: pytest on some graded tests, reporting through the plugin;
* ``lab``: a prepared lab notebook, cell by cell (``labrun``);
* ``program``: a benchmark's program that must run in a fresh process;
* ``server`` (local grading only): import the libraries, the learner's package
  and the graded tests once, then fork one worker per job the parent sends
  over a socket (with the worker's pipes), so that a hundred exercises do not
  import numpy, Numba, pytest and hypothesis a hundred times.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import socket
import sys

BOOT = ("import json, sys; job = json.loads(sys.argv[1]); sys.path[:0] = [job['tree']]; "
        "sys.path += job['sites']; import autograder.boot; autograder.boot.main(job)")  # fmt: skip
PYTEST_ARGS = ["-p", "no:cacheprovider", "-p", "_hypothesis_pytestplugin", "--noconftest",
               "-q", "--no-header", "-rN", "--continue-on-collection-errors"]  # fmt: skip


def main(job: dict) -> None:
    import site

    for pth in job.get("pths", []):
        site.addpackage(os.path.dirname(pth), os.path.basename(pth), set(sys.path))
    if job["kind"] == "server":
        serve(job)
    else:
        sys.exit(run(job))


def _set_mode(job: dict) -> None:
    if "mode" in job:
        from minitorch import exercises

        exercises._set(job["mode"], job.get("focus"))


def run(job: dict) -> int:
    """One job in this process; returns its exit code."""
    from . import plugin, timing, wire

    wire.attach(job["out"], job.get("ctl"))
    timing.ROLE[0] = job.get("role", "learner")
    try:  # first, alone, so that the parent can tell a hang here from one in a test module
        import minitorch  # noqa: F401

        _set_mode(job)
    except BaseException:  # noqa: BLE001 - pytest (or the lab's first cell) reports it
        pass
    plugin.ready()
    if job["kind"] == "lab":
        from . import labrun

        labrun.run(job["notebook"])
        return 0
    if job["kind"] == "program":  # a benchmark's fresh process: its own Numba cache folder
        if job.get("cache"):
            import numba.core.config

            # minitorch's kernels follow Numba's folder (core/cachedir.py)
            os.environ["NUMBA_CACHE_DIR"] = numba.core.config.CACHE_DIR = f"{job['cache']}/numba"
        exec(compile(job["program"], "<benchmark program>", "exec"), {"__name__": "__main__"})
        return 0
    import pytest

    args = [
        *PYTEST_ARGS,
        "-c",
        f"{job['tree']}/pytest.ini",
        "--rootdir",
        job["tree"],
        *job["nodeids"],
    ]
    return pytest.main(args, plugins=[plugin])


# --- local grading: the fork server ----------------------------------------------------------


def _preload(job: dict) -> None:
    """What every worker would import anyway; a failure here is a worker's to report."""
    import hypothesis  # noqa: F401
    import numba  # noqa: F401
    import numpy  # noqa: F401
    import pytest  # noqa: F401

    from . import harness, plugin  # noqa: F401

    for name in ["minitorch", *job.get("preload", [])]:
        try:
            importlib.import_module(name)
        except BaseException:  # noqa: BLE001 - a broken learner module: its tests say so
            pass


def serve(job: dict) -> None:
    """Fork a worker per request on the control socket; report each worker's exit."""
    sock = socket.socket(fileno=job["control"])

    def reap(signum, frame):
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            try:
                sock.sendall(
                    json.dumps({"exit": pid, "status": os.waitstatus_to_exitcode(status)}).encode()
                    + b"\n"
                )
            except OSError:
                pass

    _preload(job)
    signal.signal(signal.SIGCHLD, reap)
    sock.sendall(b'{"ready": true}\n')
    while True:
        msg, fds, _, _ = socket.recv_fds(sock, 1 << 20, 4)
        if not msg:
            return
        request = json.loads(msg)
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                sock.close()
                os.setsid()
                out, *rest = fds
                ctl = rest.pop(0) if request.get("commands") else None
                for log in rest:  # the worker's own log: its prints and tracebacks
                    os.dup2(log, 1)
                    os.dup2(log, 2)
                    os.close(log)
                code = run({**job, **request, "out": out, "ctl": ctl})
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code if isinstance(code, int) else 1)
        for fd in fds:
            os.close(fd)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})  # no report inside this one
        try:
            sock.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
