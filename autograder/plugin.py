"""The pytest plugin that runs inside the grader's child process.

It puts each graded test's exercise in focus (isolated mode), starts every test
from the same random state, collects the benchmark figures, and writes one
record per event to the results pipe (``wire``), never to stdout, so learner
output cannot mix in. The parent trusts none of it beyond what it can check
(``autograder/grader/protocol.py``). ``autograder/tests/conftest.py`` loads
this plugin, so plain ``pytest`` on a test file works too (without a pipe it
only sets the focus and the seeds).
"""

from __future__ import annotations

import os
import re
import traceback
from pathlib import Path

import pytest

from . import config, wire

__all__ = [
    "Figures",
    "pytest_configure",
    "pytest_runtest_logstart",
    "pytest_runtest_makereport",
    "report",
    "_focus_on_exercise",
]

_ROOT = Path(__file__).resolve().parent.parent
MESSAGE_LIMIT = config.MESSAGE_LIMIT


def ready() -> None:
    """Tell the parent that importing minitorch is over: its time limit moves on."""
    wire.emit(event="ready")


def _exercises():
    from minitorch import exercises  # imported late: after attach(), inside the tests

    return exercises


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "graded(exercise, points, kind): a graded test or benchmark")


def _marker(item):
    m = item.get_closest_marker("graded")
    return m.kwargs if m else None


class Figures(dict):
    """The ``report`` fixture: ``report(speedup=12.3, slow_ms=...)`` records figures."""

    def __call__(self, **figures) -> None:
        self.update({k: float(v) for k, v in figures.items()})


@pytest.fixture
def report(request) -> Figures:
    figures = Figures()
    request.node._figures = figures
    return figures


def _same_start() -> None:
    """Every random source a test can reach starts from the same state, whatever ran
    before it in the process: the references' comparisons are recorded with one child
    per chapter, learners are graded with one per exercise."""
    import random

    import numpy as np

    import minitorch

    minitorch.manual_seed(0)
    np.random.seed(0)
    random.seed(0)


@pytest.fixture(autouse=True)
def _focus_on_exercise(request):
    info = _marker(request.node)
    exercises = _exercises()
    _same_start()
    if info is None or exercises.get_mode()[0] != "isolated" or os.environ.get("MINITORCH_FOCUS"):
        yield
        return
    with exercises.focus(info["exercise"]):
        yield


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logstart(nodeid, location) -> None:
    wire.current[0] = nodeid
    wire.emit(event="start", nodeid=nodeid)


def _where(excinfo, exercise: str) -> str:
    """Where to look: the deepest frame in the framework, else the exercise's own function."""
    best = None
    for entry in traceback.extract_tb(excinfo.tb):
        try:
            rel = Path(entry.filename).resolve().relative_to(_ROOT)
        except ValueError:
            continue
        if rel.parts and rel.parts[0] in ("minitorch", "solutions"):
            best = f"{rel.as_posix()}:{entry.lineno}"
    registry = _exercises().REGISTRY
    if best is None and exercise in registry:
        code = registry[exercise].stub.__code__
        try:
            rel = Path(code.co_filename).resolve().relative_to(_ROOT).as_posix()
            best = f"{rel}:{code.co_firstlineno}"
        except ValueError:
            pass
    return best or ""


def _first_failure(exc: BaseException) -> BaseException:
    """Hypothesis raises an ExceptionGroup for distinct failures: report the first one."""
    while getattr(exc, "exceptions", None):
        exc = exc.exceptions[0]
    return exc


def _message(exc: BaseException, exercise: str) -> str:
    exc = _first_failure(exc)
    notes = [n for n in getattr(exc, "__notes__", []) if "Falsifying" in n or "=" in n]
    if isinstance(exc, NotImplementedError):
        text = str(exc).strip()
        return "not implemented yet: " + (
            text if text.startswith("Exercise") else f"Exercise {exercise}"
        )
    text = str(exc).strip() or type(exc).__name__
    stub = re.search(r"NotImplementedError: (Exercise \d+\.\d+[^\\\n'\"]*)", text)
    if stub:  # a stub that raised in a process the test started
        return f"not implemented yet: {stub.group(1).strip()}"
    if not isinstance(exc, AssertionError):
        text = f"{type(exc).__name__}: {text}"
    if notes:
        text += "\n" + "\n".join(notes[:6])
    return text[:MESSAGE_LIMIT]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    info = _marker(item)
    if info is None:
        return
    failed = rep.failed or (rep.skipped and rep.when != "teardown")
    if rep.when == "call" or failed:
        if getattr(item, "_reported", False):
            return
        item._reported = True
        event = {"event": "result", "nodeid": item.nodeid, "duration": round(rep.duration, 4)}
        figures = dict(getattr(item, "_figures", {}) or {})
        if rep.passed:
            event["outcome"] = "passed"
        elif rep.skipped:
            if hasattr(rep, "wasxfail"):
                reason = f"xfail: {rep.wasxfail}"
            elif isinstance(rep.longrepr, tuple):
                reason = str(rep.longrepr[-1])
            else:
                reason = str(rep.longrepr).strip().splitlines()[-1:][0] if rep.longrepr else ""
            event.update(outcome="skipped", message=reason[:MESSAGE_LIMIT])
        else:
            exc = call.excinfo
            event.update(
                outcome="failed",
                message=_message(exc.value, info["exercise"]) if exc else str(rep.longrepr)[-500:],
                where=_where(exc, info["exercise"]) if exc else "",
            )
        event["figures"] = figures
        wire.current[0] = None
        wire.emit(**event)
