"""Run graded tests in child processes that may crash, hang, exit or lie without harm.

Each child is pytest with :mod:`autograder.plugin` in a fresh grading tree
(:mod:`autograder.sandbox`); in isolated mode every exercise gets its own
child, with that exercise's reference withheld. The child reports each test
over a pipe the parent opened; the parent validates every record (schema, one
result per expected test, in order) and treats anything else as tampering,
which voids that child's results. A test that runs past its time limit is
killed, a child that dies costs only the test it was running, and the
remaining tests run again in a fresh child. After every child the whole
process tree is killed. Whatever happens, every expected test ends with a result.
"""

from __future__ import annotations

import json
import math
import os
import select
import signal
import subprocess
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from . import oracle as oracle_mod
from . import sandbox, wire
from .manifest import ROOT, Item, exercises

MESSAGE_LIMIT = 2000
RECORD_LIMIT = 4 << 20  # a check record carries two arrays of up to 64k elements
CHECK_LIMIT = 100_000  # check records one test may send
WALL_FACTOR = 3  # a test's wall-clock limit, in multiples of its CPU-time limit
OUTCOMES = ("passed", "failed", "skipped")


@dataclass
class Result:
    item: Item
    status: str  # passed | failed | crashed | timeout | not run | excluded
    score: float = 0.0
    message: str = ""
    where: str = ""
    figures: dict = field(default_factory=dict)
    duration: float = 0.0

    def __post_init__(self):
        if len(self.message) > MESSAGE_LIMIT:
            self.message = self.message[:MESSAGE_LIMIT] + " ... (cut)"
        self.where = self.where[:300]

    @property
    def counted(self) -> bool:
        return self.status != "excluded"


def child_env(mode: str, focus: str | None = None, cache: Path | None = None) -> dict:
    drop = ("MINITORCH_", "AUTOGRADER_", "PYTHON", "PYTEST_", "NUMBA_CACHE")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(MINITORCH_MODE=mode, MINITORCH_MODE_FIXED="1", PYTHONHASHSEED="0",
               PYTHONDONTWRITEBYTECODE="1", PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")  # fmt: skip
    env.setdefault("NUMBA_ENABLE_CUDASIM", "1")
    # One BLAS thread: on a busy 2-core machine threaded BLAS makes timings erratic.
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env.setdefault("MKL_NUM_THREADS", "1")
    if focus:
        env["MINITORCH_FOCUS"] = focus
    if os.environ.get("AUTOGRADER_GUARD_LOG"):  # for instructors: log what the guard would refuse
        env["AUTOGRADER_GUARD_LOG"] = os.environ["AUTOGRADER_GUARD_LOG"]
    if cache is not None:
        env["NUMBA_CACHE_DIR"] = str(cache)
    return env


def _tail(path: Path, lines: int = 8) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    interesting = [t for t in text if t.strip() and not t.startswith(("=", "_", "  warnings"))]
    return "\n".join(t[:300] for t in interesting[-lines:])


def _exit_reason(code: int) -> str:
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"the test process exited with code {code}"


class Forged(Exception):
    """A record on the results pipe that the grader's plugin would not have written."""


def _finite(x) -> bool:
    return type(x) in (int, float) and math.isfinite(x)


def parse_record(line: bytes, expected: set[str]) -> dict:
    """One record from the pipe, checked field by field; raises :class:`Forged`."""
    try:
        ev = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        raise Forged("a line that is not JSON") from None
    if not isinstance(ev, dict) or ev.get("event") not in ("ready", "start", "result", "check"):
        raise Forged("a record of unknown kind")
    if ev["event"] == "ready":  # the child imported minitorch (or failed to): tests come next
        if set(ev) != {"event"}:
            raise Forged("a ready record with extra fields")
        return ev
    if not isinstance(ev.get("nodeid"), str) or ev["nodeid"] not in expected:
        raise Forged(f"a record for a test that was not asked for: {str(ev.get('nodeid'))[:80]!r}")
    if ev["event"] == "start":
        if set(ev) != {"event", "nodeid"}:
            raise Forged("a start record with extra fields")
        return ev
    if ev["event"] == "check":
        if not set(ev) <= {"event", "nodeid", "how", "error", "ok", "actual", "expected", "rtol",
                           "atol", "sampled", "value", "inputs"}:  # fmt: skip
            raise Forged("a check record with extra fields")
        return ev
    allowed = {"event", "nodeid", "outcome", "duration", "message", "where", "figures"}
    figures = ev.get("figures", {})
    if (
        not set(ev) <= allowed
        or ev.get("outcome") not in OUTCOMES
        or not _finite(ev.get("duration"))
        or not isinstance(ev.get("message", ""), str)
        or not isinstance(ev.get("where", ""), str)
        or not isinstance(figures, dict)
        or len(figures) > 32
        or not all(isinstance(k, str) and len(k) < 64 and _finite(v) for k, v in figures.items())
    ):
        raise Forged("a result record that does not fit the schema")
    return ev


def band_fraction(value: float, bands, higher_is_better: bool = True) -> float:
    """The fraction of a benchmark's points for ``value``, from the grader's own bands."""
    for threshold, fraction in bands:
        if (value >= threshold) if higher_is_better else (value <= threshold):
            return min(1.0, max(0.0, float(fraction)))
    return 0.0


def shown(value: float, threshold: float) -> str:
    """``value`` with enough digits that it never prints as the threshold it missed."""
    for digits in range(3, 8):
        text = f"{value:.{digits}g}"
        if float(text) != threshold or value == threshold:
            return text
    return repr(value)


def full_credit(item: Item) -> str:
    """``"lower is better; full credit at 16 or below"``: which way the figure should go."""
    if item.higher_is_better:
        return f"higher is better; full credit at {item.bands[0][0]:g} or above"
    return f"lower is better; full credit at {item.bands[0][0]:g} or below"


def _score(item: Item, ev: dict, checks: tuple[int, str] = (0, "")) -> Result:
    """The grader's verdict on one result record, given ``checks``: how many of the
    test's check records held, and why the first one that did not failed ("" if none)."""
    outcome, figures = ev["outcome"], ev.get("figures", {})
    msg, where, duration = ev.get("message", ""), ev.get("where", ""), max(0.0, ev["duration"])
    held, refused = checks
    if outcome == "passed" and refused:
        outcome, msg = "failed", refused
    elif outcome == "passed" and held < item.checks:
        outcome, msg = "failed", ("reported a pass without the comparisons the test makes "
                                  "(the grader received none)")  # fmt: skip
    if outcome == "passed":
        if item.kind != "benchmark":
            return Result(item, "passed", item.points, "", where, figures, duration)
        value = figures.get(item.metric)
        if value is None:
            return Result(item, "failed", 0.0, f"benchmark reported no {item.metric!r}", where,
                          figures, duration)  # fmt: skip
        fraction = band_fraction(value, item.bands, item.higher_is_better)
        if fraction < 1.0:
            msg = f"{item.metric} {shown(value, item.bands[0][0])} ({full_credit(item)})"
        status = "passed" if fraction >= 1.0 else "failed"
        return Result(item, status, item.points * fraction, msg, where, figures, duration)
    if outcome == "skipped" and item.needs == "gpu":
        return Result(item, "excluded", 0.0, msg or "not run: no GPU", "", figures)
    if outcome == "skipped":
        msg = f"skipped ({msg}); a skipped test earns nothing"
    return Result(item, "failed", 0.0, msg, where, figures, duration)


def run_items(
    items: list[Item],
    mode: str,
    focus: str | None = None,
    test_timeout: float = 90.0,
    bench_timeout: float = 240.0,
    total_timeout: float = 1200.0,
    progress: Callable[[str, Result | None], None] = lambda nodeid, result: None,
    submission: Path = ROOT,
    oracle: dict[str, list] | None = None,
    record: dict[str, list] | None = None,
    per_exercise: bool | None = None,
    problems: dict[str, str] | None = None,
) -> dict[str, Result]:
    """Run ``items`` in as many child processes as it takes; every item gets a Result.

    ``oracle`` (:mod:`autograder.oracle`): the reference run's comparisons, which
    every test's check records must match. ``record``: filled with this run's.
    ``per_exercise``: one child per exercise (as learners are graded; the default in
    isolated mode) rather than one for all ``items``. ``problems``: the submission's
    broken files (:func:`autograder.submission.problems`); the exercises defined in one
    score 0 with its reason, without running.

    Kills every descendant of this process after each child: call it from a
    process that has no other children (the grader).
    """
    deadline = time.monotonic() + total_timeout
    info = exercises()
    names = {ex: {i.name} for ex, i in info.items()}
    results: dict[str, Result] = {}
    problems = problems or {}
    broken = {ex: f"{i.path}: {problems[i.path]}" for ex, i in info.items() if i.path in problems}
    for item in items:
        if item.exercise in broken:
            results[item.nodeid] = Result(
                item, "not run", message=f"not run: {broken[item.exercise]}"
            )
            progress(item.nodeid, results[item.nodeid])
    items = [i for i in items if i.nodeid not in results]
    shared = {"import hang": "", "problems": problems}
    if per_exercise is None:
        per_exercise = mode == "isolated"
    groups: dict[str | None, list[Item]] = defaultdict(list)
    for item in items:
        groups[item.exercise if per_exercise else None].append(item)
    sandbox.choose_child_user()
    with tempfile.TemporaryDirectory(prefix="autograder-") as tmp:
        if sandbox.CHILD_USER:  # the child's user needs the Numba cache, nothing else here
            os.chmod(tmp, 0o711)
            (Path(tmp) / "numba-cache").mkdir(mode=0o777)
            os.chmod(Path(tmp) / "numba-cache", 0o777)
        for ex, group in groups.items():
            session = _Session({i.nodeid: i for i in group}, mode, ex or focus, test_timeout,
                               bench_timeout, deadline, progress, submission,
                               names.get(ex, set()), Path(tmp), oracle or {}, record,
                               shared)  # fmt: skip
            session.run()
            results.update(session.results)
    return gate_benchmarks(results)


def gate_benchmarks(results: dict[str, Result]) -> dict[str, Result]:
    """No benchmark points for an exercise whose graded tests do not all pass."""
    failing = defaultdict(list)
    for r in results.values():
        if r.item.kind == "test" and r.status != "passed":
            failing[r.item.exercise].append(r.item.name)
    for node, r in results.items():
        if r.item.kind == "benchmark" and r.score > 0 and failing[r.item.exercise]:
            names = ", ".join(failing[r.item.exercise][:3])
            results[node] = Result(r.item, "failed", 0.0,
                                   f"no benchmark points until the exercise's tests pass ({names})",
                                   r.where, r.figures, r.duration)  # fmt: skip
    return results


@dataclass
class _Session:
    by_id: dict[str, Item]
    mode: str
    focus: str | None
    test_timeout: float
    bench_timeout: float
    deadline: float
    progress: Callable[[str, Result | None], None]
    submission: Path
    withheld: set[str]
    tmp: Path
    oracle: dict[str, list]
    recording: dict[str, list] | None
    shared: dict  # across the run's children: an import that hung, the broken files
    results: dict[str, Result] = field(default_factory=dict)

    def record(self, node: str, result: Result) -> None:
        self.results[node] = result
        self.progress(node, result)

    def finish(self, nodes: list[str], status: str, message: str) -> None:
        for n in nodes:
            if n not in self.results:
                self.record(n, Result(self.by_id[n], status, message=message))

    def run(self) -> None:
        for round_no in range(1, len(self.by_id) + 2):
            remaining = [n for n in self.by_id if n not in self.results]
            if not remaining:
                return
            if time.monotonic() > self.deadline:
                self.finish(remaining, "timeout", "not run: the chapter ran out of time")
                return
            if self.shared["import hang"]:  # it would hang again: one time limit is enough
                self.finish(remaining, "not run", f"not run: {self.shared['import hang']}")
                return
            log = self.tmp / f"log-{self.focus}-{round_no}.txt"
            tree = sandbox.build_tree(self.submission, self.mode,
                                      self.focus if self.mode == "isolated" else None,
                                      self.withheld)  # fmt: skip
            try:
                started = self.run_child(remaining, tree, log)
            finally:
                sandbox.remove_tree(tree)
            if not started:  # nothing could even start: collection or import failure
                reason = _tail(log) or "the test process could not start"
                broken = "; ".join(f"{k}: {v}" for k, v in self.shared["problems"].items())
                if broken:
                    reason = f"your files have problems ({broken[:600]})\n{reason}"
                self.finish(remaining, "not run", f"not run: {reason}")
                return

    def run_child(self, remaining: list[str], tree: Path, log: Path) -> bool:
        """One child process over ``remaining``; returns whether any test started."""
        read_end, write_end = os.pipe()
        cpu = int(max(10, self.deadline - time.monotonic())) + 30
        env = child_env(self.mode, self.focus, self.tmp / "numba-cache")
        hidden = sandbox.hidden_paths(self.submission)
        try:
            with open(log, "wb") as out:
                proc = subprocess.Popen(
                    sandbox.child_command(tree, write_end, remaining), cwd=tree, env=env,
                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    pass_fds=(write_end,), preexec_fn=lambda: sandbox.limit_resources(hidden=hidden),
                )  # fmt: skip
        finally:
            os.close(write_end)
        mine: dict[str, Result] = {}
        started_any, current, t_start, killed, forged = False, None, 0.0, None, None
        cpu_start, cpu_now = 0.0, 0.0  # the child's CPU seconds when the test started, now
        launched, imported = time.monotonic(), False
        kill_status = "timeout"
        held, refused = 0, ""  # the running test's check records: how many held, first failure
        seen, expected = 0, None  # how many it sent; the reference run's, if recorded
        watch, next_cpu = sandbox.ProcessWatch(), 0.0
        buffer, eof = b"", False
        try:
            while True:
                done = proc.poll() is not None
                ready = not eof and select.select([read_end], [], [], 0 if done else 0.05)[0]
                if ready:
                    chunk = os.read(read_end, 1 << 16)
                    eof = not chunk
                    buffer += chunk
                elif eof and not done:  # the pipe was closed under us: just watch the clock
                    time.sleep(0.05)
                *lines, buffer = buffer.split(b"\n")
                try:
                    if len(buffer) > RECORD_LIMIT:
                        raise Forged("a record longer than 64 kB")
                    for line in lines:
                        ev = parse_record(line, set(remaining))
                        if ev["event"] == "ready":
                            if imported or started_any:
                                raise Forged("a second ready record")
                            imported, launched = True, time.monotonic()
                            continue
                        node = ev["nodeid"]
                        if ev["event"] == "check":
                            if node != current or held >= CHECK_LIMIT:
                                raise Forged(f"a check record out of order for {node[-60:]}")
                            ok, why = wire.decide(ev)
                            if ok and expected is not None:
                                ok, why = oracle_mod.judge(expected, seen, ev)
                            if self.recording is not None:
                                self.recording.setdefault(node, []).append(oracle_mod.entry(ev))
                            seen += 1
                            held, refused = held + ok, refused or ("" if ok else why or "failed")
                            continue
                        if node in mine or (ev["event"] == "result") != (node == current):
                            raise Forged(f"a record out of order for {node.split('::')[-1]}")
                        if ev["event"] == "start":
                            started_any, current, t_start = True, node, time.monotonic()
                            cpu_start = cpu_now = sandbox.cpu_used(proc.pid)
                            held, refused, seen = 0, "", 0
                            expected = self.oracle.get(node)
                            if self.recording is not None:
                                self.recording[node] = []
                            self.progress(node, None)
                        else:
                            if expected is not None and seen < len(expected) and not refused:
                                refused = (f"{seen} comparisons, the reference run makes "
                                           f"{len(expected)}")  # fmt: skip
                            mine[node] = _score(self.by_id[node], ev, (held, refused))
                            self.record(node, mine[node])
                            current = None
                except Forged as e:
                    forged = f"the results pipe received {e}; this child's results are void"
                except Exception as e:  # a record the checks above missed: still not a crash
                    forged = f"the results pipe received an unreadable record ({type(e).__name__})"
                if forged:
                    break
                if done and not ready:
                    break
                if current is not None:
                    # A test's limit is CPU time: on a busy machine its wall time stretches
                    # (cold Numba compiles, threads waiting for a core) while its CPU time
                    # does not. A test that sleeps is stopped at WALL_FACTOR times the limit.
                    limit = (self.bench_timeout if self.by_id[current].kind == "benchmark"
                             else self.test_timeout)  # fmt: skip
                    if cpu_now - cpu_start > limit:
                        killed = f"used more than {limit:.0f} s of CPU time (an infinite loop?)"
                    elif time.monotonic() - t_start > WALL_FACTOR * limit:
                        killed = (f"still running after {WALL_FACTOR * limit:.0f} s "
                                  "(waiting for something that never comes?)")  # fmt: skip
                elif not started_any and time.monotonic() - launched > self.test_timeout:
                    # Before the first test: importing minitorch, then the test modules.
                    what = "the graded tests' modules" if imported else "minitorch"
                    killed = (f"importing {what} did not finish within {self.test_timeout:.0f} s "
                              "(a loop or a wait at import time?)")  # fmt: skip
                    if not imported:
                        self.shared["import hang"] = killed
                if time.monotonic() > self.deadline:
                    killed = "the chapter ran out of time"
                if time.monotonic() > next_cpu:  # twice a second: /proc/<pid>/stat
                    next_cpu = time.monotonic() + 0.5
                    cpu_now = sandbox.cpu_used(proc.pid)
                    if cpu_now > cpu:
                        killed = f"used more than {cpu} s of CPU time"
                if sandbox.too_many_processes(watch):  # a fork bomb: root ignores RLIMIT_NPROC
                    kill_status = "crashed"
                    killed = (f"started more than {sandbox.MAX_PROCESSES} processes at "
                              "once; the grader stopped them all")  # fmt: skip
                if killed:
                    break
        finally:
            os.close(read_end)
            _kill(proc)
            sandbox.kill_descendants()
        if forged:
            for node in remaining:
                self.record(node, Result(self.by_id[node], "failed", message=forged))
            return True
        if killed and not started_any:  # stopped before its first test: none of them ran
            self.finish(remaining, "timeout", f"not run: {killed}")
            return True
        if current is not None and current not in self.results:
            if killed:
                self.record(current, Result(self.by_id[current], kill_status, message=killed))
            else:
                reason = f"{_exit_reason(proc.returncode)} while running this test"
                tail = _tail(log, 4)
                message = reason + (f"\n{tail}" if tail else "")
                self.record(current, Result(self.by_id[current], "crashed", message=message))
        return started_any


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()
    proc.wait()
