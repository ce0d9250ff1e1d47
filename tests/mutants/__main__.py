"""Grade every known-wrong implementation of one chapter: ``python -m tests.mutants C``.

One process per chapter: each mutant is installed in turn as the learner's
code of its exercise (isolated mode, that exercise in focus) and only that
exercise's graded tests run, stopping at the first failure. Test modules and
the Numba kernels of the other exercises are compiled once and shared.
Prints a table (exercise, wrong implementations, caught, survived), or writes
JSON for ``tests/test_mutants.py`` with ``--json PATH``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import inspect
import json
import os
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent

# Before minitorch (and numba) load: isolated mode, and the CUDA simulator even on a
# GPU machine, so that a missing barrier shows the same way everywhere.
os.environ["MINITORCH_MODE"] = "isolated"
os.environ.pop("MINITORCH_FOCUS", None)
os.environ.pop("MINITORCH_MODE_FIXED", None)
os.environ.setdefault("PYTHONHASHSEED", "0")
os.environ["NUMBA_ENABLE_CUDASIM"] = "1"

import pytest  # noqa: E402
from hypothesis import Phase, settings  # noqa: E402

from autograder import harness  # noqa: E402
from autograder.grader import manifest  # noqa: E402
from minitorch import exercises  # noqa: E402

from . import MIN_PER_EXERCISE, Mutant, load  # noqa: E402

# The grading profile, without shrinking: the same examples fail, found as fast.
settings.register_profile(
    "mutants", settings.get_profile("grading"), phases=[Phase.explicit, Phase.generate]
)
assert harness.graded  # the harness loads "grading" on import; load ours after it
settings.load_profile("mutants")

TIME_LIMIT = 120  # seconds per mutant; a hang loses points in real grading too


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout(f"still running after {TIME_LIMIT} s")


class _Collect:
    """Pytest plugin: the outcome of each test of one run."""

    def __init__(self):
        self.failed: dict[str, str] = {}
        self.passed: set[str] = set()
        self.broken: list[str] = []  # collection errors: the tests never ran

    def pytest_collectreport(self, report):
        if report.failed:
            self.broken.append(f"{report.nodeid or 'collection'}: {report.longreprtext[-300:]}")

    def pytest_runtest_logreport(self, report):
        if report.failed or (report.skipped and report.when == "setup"):
            crash = getattr(report.longrepr, "reprcrash", None)
            text = getattr(crash, "message", "") or report.outcome
            self.failed.setdefault(report.nodeid, text.strip().splitlines()[0][:200])
        elif report.when == "call" and report.passed:
            self.passed.add(report.nodeid)


def _run(nodeids: list[str]) -> _Collect:
    collect = _Collect()
    args = ["-x", "-qq", "--tb=short", "-p", "no:cacheprovider", "-o", "addopts=",
            "-o", "python_files=test_*.py", "-o", "python_functions=test_*",
            "--rootdir", str(ROOT), *nodeids]  # fmt: skip
    with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
        pytest.main(args, plugins=[collect])
    return collect


def _signature_problem(m: Mutant) -> str:
    ex = exercises.REGISTRY.get(m.exercise)
    if ex is None:
        return f"no exercise {m.exercise}"
    want = list(inspect.signature(ex.stub).parameters)
    got = list(inspect.signature(m.fn).parameters)
    return "" if want == got else f"signature ({', '.join(got)}), the stub has ({', '.join(want)})"


def grade_mutant(m: Mutant, nodeids: list[str]) -> dict:
    """Install ``m`` as the learner's code of its exercise and grade that exercise."""
    row = {"exercise": m.exercise, "name": m.name, "description": m.description}
    problem = _signature_problem(m) or ("" if nodeids else "the exercise has no graded tests")
    if problem:
        return {**row, "status": "error", "detail": problem}
    ex = exercises.REGISTRY[m.exercise]
    stub = ex.stub
    ex.stub = m.fn
    exercises._cache.clear()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TIME_LIMIT)
    t0 = time.perf_counter()
    try:
        collect = _run(nodeids)
    except _Timeout as e:  # outside a test; inside one it fails that test
        collect = _Collect()
        collect.failed["timeout"] = str(e)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        ex.stub = stub
        exercises._cache.clear()
    row["seconds"] = round(time.perf_counter() - t0, 2)
    if collect.broken:
        return {**row, "status": "error", "detail": "; ".join(collect.broken)}
    if collect.failed:
        node, why = next(iter(collect.failed.items()))
        detail = f"{node.split('::')[-1]}: {why}"
        if "NotImplementedError" in why:  # the stub ran, not the mutant: it proves nothing
            return {**row, "status": "error", "detail": f"the mutant was not installed: {detail}"}
        return {**row, "status": "caught", "detail": detail}
    if collect.passed >= set(nodeids):
        return {**row, "status": "survived", "detail": "every graded test passed"}
    missing = sorted(set(nodeids) - collect.passed)
    return {**row, "status": "error", "detail": f"not run: {', '.join(missing)}"}


def control(ex_id: str) -> dict:
    """Grade the reference of ``ex_id`` the way mutants are graded: it must survive."""
    chapter = int(ex_id.split(".")[0])
    info = manifest.exercises()[ex_id]
    importlib.import_module(info.path.removesuffix(".py").replace("/", "."))
    ex = exercises.REGISTRY[ex_id]
    items = manifest.graded_items(chapter)
    nodeids = [i.nodeid for i in items if i.exercise == ex_id and i.kind == "test"]
    return grade_mutant(Mutant(ex_id, ex.name, "the reference solution", ex.reference()), nodeids)


def check_chapter(chapter: int, only: str | None = None) -> dict:
    tests: dict[str, list[str]] = {}
    for item in manifest.graded_items(chapter):
        if item.kind == "test":
            tests.setdefault(item.exercise, []).append(item.nodeid)
    found = {e: info for e, info in manifest.exercises().items() if e.split(".")[0] == str(chapter)}
    for info in found.values():  # register the chapter's stubs (some load on first use)
        importlib.import_module(info.path.removesuffix(".py").replace("/", "."))
    mutants = load(chapter)
    ids = sorted(found, key=manifest.exercise_sort_key)
    rows = [
        grade_mutant(m, tests.get(m.exercise, [])) for m in mutants if only in (None, m.exercise)
    ]
    counts = {e: sum(m.exercise == e for m in mutants) for e in ids if only in (None, e)}
    return {"chapter": chapter, "exercises": counts, "rows": rows}


def table(result: dict) -> str:
    lines = [f"Chapter {result['chapter']}: known-wrong implementations",
             f"{'exercise':<9} {'wrong':>5} {'caught':>6} {'survived':>8}"]  # fmt: skip
    for ex, n in result["exercises"].items():
        rows = [r for r in result["rows"] if r["exercise"] == ex]
        caught = sum(r["status"] == "caught" for r in rows)
        bad = [r for r in rows if r["status"] != "caught"]
        flag = "" if n >= MIN_PER_EXERCISE else f"   (needs at least {MIN_PER_EXERCISE})"
        lines.append(f"{ex:<9} {n:>5} {caught:>6} {len(bad):>8}{flag}")
        lines += [
            f"    {r['status']}: {r['name']} ({r['description']}): {r['detail']}" for r in bad
        ]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutants", description=__doc__)
    parser.add_argument("chapter", type=int)
    parser.add_argument("--exercise", help="only the mutants of this exercise (C.N)")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("-v", "--verbose", action="store_true", help="show every mutant")
    parser.add_argument(
        "--control", action="store_true", help="grade the reference of --exercise instead"
    )
    args = parser.parse_args(argv)
    if args.control:
        row = control(args.exercise)
        print(f"{row['exercise']} reference: {row['status']} ({row['detail']})")
        return 0 if row["status"] == "survived" else 1
    result = check_chapter(args.chapter, args.exercise)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    print(table(result))
    if args.verbose:
        for r in result["rows"]:
            print(f"{r['exercise']:<6} {r['status']:<9} {r.get('seconds', 0):6.1f}s {r['name']}: "
                  f"{r['detail']}")  # fmt: skip
    ok = all(r["status"] == "caught" for r in result["rows"])
    return 0 if ok and min(result["exercises"].values(), default=3) >= MIN_PER_EXERCISE else 1


if __name__ == "__main__":
    sys.exit(main())
