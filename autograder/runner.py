"""Run graded tests in child processes that may crash, hang or exit without harm.

The child is pytest with :mod:`autograder.plugin`; it reports each test to an
events file. The parent watches that file: a test that runs past its time
limit is killed, a child that dies costs only the test it was running, and the
remaining tests run again in a fresh child. Whatever happens, every expected
test ends with a result.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .manifest import ROOT, Item


@dataclass
class Result:
    item: Item
    status: str  # passed | failed | crashed | timeout | not run | excluded
    score: float = 0.0
    message: str = ""
    where: str = ""
    figures: dict = field(default_factory=dict)
    duration: float = 0.0

    @property
    def counted(self) -> bool:
        return self.status != "excluded"


def child_env(mode: str, events: Path | None = None, focus: str | None = None) -> dict:
    env = dict(os.environ)
    env.update(MINITORCH_MODE=mode, PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1")
    # One BLAS thread: on a busy 2-core machine threaded BLAS makes timings erratic.
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env.setdefault("MKL_NUM_THREADS", "1")
    env.pop("MINITORCH_FOCUS", None)
    if focus:
        env["MINITORCH_FOCUS"] = focus
    if events is not None:
        env["AUTOGRADER_EVENTS"] = str(events)
    return env


def _tail(path: Path, lines: int = 8) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    interesting = [t for t in text if t.strip() and not t.startswith(("=", "_", "  warnings"))]
    return "\n".join(interesting[-lines:])


def _exit_reason(code: int) -> str:
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"the test process exited with code {code}"


def _score(item: Item, event: dict) -> Result:
    outcome = event.get("outcome")
    figures = event.get("figures") or {}
    msg, where = event.get("message", ""), event.get("where", "")
    if outcome == "passed":
        fraction = event.get("fraction", 1.0) if item.kind == "benchmark" else 1.0
        status = "passed" if fraction >= 1.0 else "failed"
        if item.kind == "benchmark" and fraction < 1.0:
            value = figures.get(item.metric)
            msg = f"{item.metric} = {value:.3g}, below the full-credit threshold {item.bands[0][0]}"
        return Result(item, status, item.points * fraction, msg, where, figures, event["duration"])
    if outcome == "skipped" and item.needs == "gpu":
        return Result(item, "excluded", 0.0, msg or "not run: no GPU", "", figures)
    status = "failed" if outcome in ("failed", "skipped") else outcome
    if outcome == "skipped":
        msg = f"skipped ({msg}); a skipped test earns nothing"
    return Result(item, status, 0.0, msg, where, figures, event.get("duration", 0.0))


def run_items(
    items: list[Item],
    mode: str,
    focus: str | None = None,
    test_timeout: float = 90.0,
    bench_timeout: float = 240.0,
    total_timeout: float = 1200.0,
    progress: Callable[[str, Result | None], None] = lambda nodeid, result: None,
) -> dict[str, Result]:
    """Run ``items`` in as many child processes as it takes; every item gets a Result."""
    session = _Session({i.nodeid: i for i in items}, mode, focus, test_timeout, bench_timeout,
                       time.monotonic() + total_timeout, progress)  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="autograder-") as tmp:
        for round_no in itertools.count(1):
            remaining = [n for n in session.by_id if n not in session.results]
            if not remaining:
                break
            log = Path(tmp, f"log{round_no}.txt")
            started = session.run_child(remaining, Path(tmp, f"events{round_no}.jsonl"), log)
            if time.monotonic() > session.deadline:
                session.finish(remaining, "timeout", "not run: the chapter ran out of time")
                break
            if not started:  # nothing could even start: collection or import failure
                reason = _tail(log) or "the test process could not start"
                session.finish(remaining, "not run", f"not run: {reason}")
                break
    return session.results


@dataclass
class _Session:
    by_id: dict[str, Item]
    mode: str
    focus: str | None
    test_timeout: float
    bench_timeout: float
    deadline: float
    progress: Callable[[str, Result | None], None]
    results: dict[str, Result] = field(default_factory=dict)

    def record(self, node: str, result: Result) -> None:
        self.results[node] = result
        self.progress(node, result)

    def finish(self, nodes: list[str], status: str, message: str) -> None:
        for n in nodes:
            if n not in self.results:
                self.record(n, Result(self.by_id[n], status, message=message))

    def run_child(self, remaining: list[str], events: Path, log: Path) -> bool:
        """One child process over ``remaining``; returns whether any test started."""
        events.touch()
        cmd = [
            sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
            "-q", "--no-header", "-rN", "--continue-on-collection-errors",
            "-o", "python_files=test_*.py bench_*.py", "-o", "python_functions=test_* bench_*",
            "-o", "addopts=", "--rootdir", str(ROOT), *remaining,
        ]  # fmt: skip
        with open(log, "wb") as out:
            proc = subprocess.Popen(cmd, cwd=ROOT, env=child_env(self.mode, events, self.focus),
                                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)  # fmt: skip
        started_any, current, t_start, offset, killed = False, None, 0.0, 0, None
        while True:
            done = proc.poll() is not None
            with open(events, encoding="utf-8") as f:
                f.seek(offset)
                chunk = f.read()
            complete = chunk[: chunk.rfind("\n") + 1]
            offset += len(complete.encode("utf-8"))
            for line in complete.splitlines():
                ev = json.loads(line)
                node = ev["nodeid"]
                if node not in self.by_id:
                    continue
                if ev["event"] == "start":
                    started_any, current, t_start = True, node, time.monotonic()
                    self.progress(node, None)
                elif ev["event"] == "result" and node not in self.results:
                    self.record(node, _score(self.by_id[node], ev))
                    current = None
            if done:
                break
            if current is not None:
                is_bench = self.by_id[current].kind == "benchmark"
                limit = self.bench_timeout if is_bench else self.test_timeout
                if time.monotonic() - t_start > limit:
                    killed = f"timed out after {limit:.0f} s (an infinite loop?)"
            if time.monotonic() > self.deadline:
                killed = "the chapter ran out of time"
            if killed:
                _kill(proc)
                break
            time.sleep(0.05)
        if current is not None and current not in self.results:
            if killed:
                self.record(current, Result(self.by_id[current], "timeout", message=killed))
            else:
                reason = f"{_exit_reason(proc.returncode)} while running this test"
                tail = _tail(log, 4)
                message = reason + (f"\n{tail}" if tail else "")
                self.record(current, Result(self.by_id[current], "crashed", message=message))
        return started_any


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
