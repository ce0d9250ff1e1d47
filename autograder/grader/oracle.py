"""The expected values of every graded test, computed by the references, not by learner code.

A graded test runs in the learner's process, and so does the ``expected``
it computes: learner code could change it (a patched ``hypothesis`` drawing
trivial inputs) or send made-up comparisons through the grader's own sender.
So the parent holds each test's comparisons as the references made them
(``make oracle`` runs the references and records them here): for every
``assert_close`` the expected array and tolerances, for every ``check`` its
place and, where the test names one, its value. Grading a submission, the
parent compares each ``actual`` the child sends with the reference run's
``expected`` at the same place, and a pass counts only with exactly the
comparisons the reference run made, in order. Tests draw their inputs with
fixed seeds (hypothesis ``derandomize=True``), so a correct submission meets
the same inputs and sends the same sequence.

A ``check`` without a ``value`` carries only a truth value, which learner
code could send made up: so every graded test makes at least one comparison
whose value the oracle holds (``tests/test_grader_oracle.py``), and a check's
``tol=`` (floats a correct implementation computes another way) is taken from
the reference run's record. Benchmarks are not recorded: their outputs are
compared with what the course's own code returns beside them (``bench.py``).
It also holds each lab task's comparison records from the reference
notebooks (``labs.py``), under the task's node id.

The file never enters a grading tree, and the student release has none (its
values are answers). ``inputs`` names the grader files it was made from; a
stale oracle is not used (``tests/test_grader_oracle.py`` fails).
"""

from __future__ import annotations

import gzip
import hashlib
import json

import numpy as np

from .. import config
from .judge import decide, decode, short

ROOT = config.ROOT

PATH = ROOT / "autograder" / "oracle.json.gz"
# Floats are recorded on one machine and compared on another, whose numpy may take
# another SIMD path for exp or log (a last-bit difference): the parent's comparison
# with the recording allows this much. The test's own, exact comparison still runs
# in the child, against the expected value it computed on the learner's machine.
FLOOR = config.FLOOR  # rtol, atol
SOURCES = (
    "autograder/tests/",
    "solutions/",
    "autograder/harness.py",
    "autograder/plugin.py",
    "autograder/wire.py",
    "autograder/strategies.py",
    "autograder/labkernel.py",
    "autograder/labrun.py",
    "autograder/grader/labs.py",
)


def inputs_digest() -> str:
    """sha256 over the grader files the recorded comparisons depend on (benchmarks are
    not recorded, so tuning one leaves the oracle as it is)."""
    from ..tools.integrity import current

    files = sorted((rel, h) for rel, h in current().items()
                   if rel.startswith(SOURCES) and not rel.rsplit("/", 1)[-1].startswith("bench_"))  # fmt: skip
    text = json.dumps([files, config.SAMPLE])
    return hashlib.sha256(text.encode()).hexdigest()


def entry(ev: dict):
    """What the oracle keeps of one check record of the reference run: 0 for a bare
    ``check``, ``{"v": value}`` for one with a value, ``{"e": expected, ...}`` for a close."""
    if ev.get("how") != "close":
        if "value" not in ev:
            return 0
        tol = {k: ev[k] for k in ("rtol", "atol") if k in ev}
        return {"v": ev["value"], **tol}
    return {"e": ev.get("expected"), "rtol": ev.get("rtol"), "atol": ev.get("atol")}


def _kind(x) -> str:
    if isinstance(x, dict) and "how" in x:  # a record
        return "e" if x.get("how") == "close" else ("v" if "value" in x else "t")
    return "t" if x == 0 else ("v" if "v" in x else "e")


def write(records: dict[str, list]) -> None:
    data = {"inputs": inputs_digest(), "tests": dict(sorted(records.items()))}
    PATH.write_bytes(gzip.compress(json.dumps(data, separators=(",", ":")).encode(), mtime=0))


def load() -> tuple[dict[str, list] | None, str]:
    """``(node id -> entries, "")``, or ``(None, why not)`` when missing or stale."""
    try:
        data = json.loads(gzip.decompress(PATH.read_bytes()))
    except (OSError, ValueError, EOFError):
        return None, f"{PATH.relative_to(ROOT)} is missing or unreadable (run `make oracle`)"
    if data.get("inputs") != inputs_digest():
        return None, "the tests or references changed since `make oracle` ran"
    return data["tests"], ""


def first_difference(a: list, b: list) -> str:
    """Where two recordings of one test's comparisons first differ, in words."""
    if len(a) != len(b):
        return f"{len(a)} comparisons, then {len(b)}"
    index = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
    return "" if index is None else f"comparison {index + 1} differs"


def judge(entries: list, index: int, ev: dict) -> tuple[bool, str]:
    """Does check record ``ev``, the ``index``-th of its test, agree with the reference run's?

    The reason, when it does not, is in the learner's terms: the value they computed,
    the reference's, and the test's input as the test shows it."""
    where = f"comparison {index + 1} of the test"
    shown = ev.get("inputs") if isinstance(ev.get("inputs"), str) else ""
    inputs = f"\n{shown}" if shown else ""
    if index >= len(entries):
        return False, (f"the test compared more values than the reference run does "
                       f"({len(entries)}): {where} has no counterpart{inputs}")  # fmt: skip
    want = entries[index]
    if _kind(want) != _kind(ev):
        names = {"t": "a yes/no check", "v": "a check of a value", "e": "an array comparison"}
        return False, (f"{where} is {names[_kind(ev)]} where the reference run makes "
                       f"{names[_kind(want)]}: the test took another path{inputs}")  # fmt: skip
    if want == 0:
        return True, ""
    if "v" in want:
        try:
            got, right = decode(ev["value"]), decode(want["v"])
        except (ValueError, TypeError, KeyError):
            return False, f"{where}: an unreadable checked value"
        if got.dtype.kind == "f" or right.dtype.kind == "f":
            rtol = min(max(want.get("rtol", 0), FLOOR[0]), config.TOL_CAP)  # the reference's tol=
            atol = min(max(want.get("atol", 0), FLOOR[1]), config.TOL_CAP)
            same = got.shape == right.shape and np.allclose(got, right, rtol, atol, True)
        else:
            same = got.shape == right.shape and bool((got == right).all())
        if not same:
            return False, (f"{where}: you gave {short(got)}, the reference gives "
                           f"{short(right)}{inputs}")  # fmt: skip
        return True, ""
    rtol, atol = want["rtol"], want["atol"]
    if isinstance(want["e"], dict) and "f" in str(want["e"].get("dtype")):
        rtol, atol = max(rtol, FLOOR[0]), max(atol, FLOOR[1])
    rec = {"how": "close", "actual": ev.get("actual"), "expected": want["e"],
           "rtol": rtol, "atol": atol}  # fmt: skip
    ok, why = decide(rec)
    if not ok:
        try:
            got, right = decode(ev.get("actual")), decode(want["e"])
            values = f"; you gave {short(got)}, expected {short(right)}"
        except (ValueError, TypeError, KeyError):
            values = ""
        return False, f"{where}: {why}{values}{inputs}"
    return True, ""
