"""The pytest plugin that runs inside the grader's child process.

It puts each graded test's exercise in focus (isolated mode), collects the
benchmark figures, and writes one JSON line per event to the file named by
``AUTOGRADER_EVENTS`` (never to stdout, so learner output cannot mix in).
``autograder/tests/conftest.py`` loads it, so plain ``pytest`` on a test file
works too (without that variable it only sets the focus).
"""

from __future__ import annotations

import json
import os
import traceback
from pathlib import Path

import pytest

from minitorch import exercises

from .harness import band_fraction

__all__ = [
    "Figures",
    "pytest_configure",
    "pytest_runtest_logstart",
    "pytest_runtest_makereport",
    "report",
    "_focus_on_exercise",
]

# Taken out of the environment so code under test does not find it there.
_events_path = os.environ.pop("AUTOGRADER_EVENTS", None)
_ROOT = Path(__file__).resolve().parent.parent


def _emit(**event) -> None:
    if not _events_path:
        return
    with open(_events_path, "a", encoding="utf-8") as f:
        f.write(json.dumps(event, default=str) + "\n")
        f.flush()
        os.fsync(f.fileno())


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


@pytest.fixture(autouse=True)
def _focus_on_exercise(request):
    info = _marker(request.node)
    if info is None or exercises.get_mode()[0] != "isolated" or os.environ.get("MINITORCH_FOCUS"):
        yield
        return
    with exercises.focus(info["exercise"]):
        yield


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logstart(nodeid, location) -> None:
    _emit(event="start", nodeid=nodeid)


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
    if best is None and exercise in exercises.REGISTRY:
        code = exercises.REGISTRY[exercise].stub.__code__
        try:
            rel = Path(code.co_filename).resolve().relative_to(_ROOT).as_posix()
            best = f"{rel}:{code.co_firstlineno}"
        except ValueError:
            pass
    return best or ""


def _message(excinfo) -> str:
    exc = excinfo.value
    if isinstance(exc, NotImplementedError):
        return "not implemented yet"
    text = str(exc).strip() or type(exc).__name__
    if not isinstance(exc, AssertionError):
        text = f"{type(exc).__name__}: {text}"
    notes = [n for n in getattr(exc, "__notes__", []) if "Falsifying" in n or "=" in n]
    if notes:
        text += "\n" + "\n".join(notes[:6])
    return text


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
            if info.get("kind") == "benchmark":
                value = figures.get(info["metric"])
                if value is None:
                    event.update(
                        outcome="failed", message=f"benchmark reported no {info['metric']!r}"
                    )
                else:
                    event["fraction"] = band_fraction(
                        value, info["bands"], info.get("higher_is_better", True)
                    )
        elif rep.skipped:
            event.update(outcome="skipped", message=str(rep.longrepr[-1]) if rep.longrepr else "")
        else:
            event.update(
                outcome="failed",
                message=_message(call.excinfo) if call.excinfo else str(rep.longrepr)[-500:],
                where=_where(call.excinfo, info["exercise"]) if call.excinfo else "",
            )
        event["figures"] = figures
        _emit(**event)
