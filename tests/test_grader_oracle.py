"""The references' recorded comparisons (``autograder/oracle.py``) decide, not the child's expected."""

import numpy as np
import pytest

from autograder import wire
from autograder.grader import judge, oracle


@pytest.fixture(scope="module")
def recorded():
    tests, why = oracle.load()
    assert tests is not None, f"{why}: run `make oracle` and commit autograder/oracle.json.gz"
    return tests


def _close_entry(recorded):
    for node, entries in recorded.items():
        for i, e in enumerate(entries):
            if e != 0 and "e" in e and judge.decode(e["e"]).size > 1:
                return node, i, e
    raise AssertionError("no recorded assert_close")


def _record(actual: np.ndarray, expected: np.ndarray, rtol=1e-5, atol=1e-6) -> dict:
    return {"event": "check", "how": "close", "error": "", "rtol": rtol, "atol": atol,
            "actual": wire.encode(actual, None), "expected": wire.encode(expected, None)}  # fmt: skip


def test_every_graded_test_and_lab_task_is_recorded_and_compares_a_value(recorded):
    """A test of bare truths alone could be forged by sending ``True`` as often as it checks."""
    from autograder.grader import manifest

    tests = [i.nodeid for c in manifest.chapters() for i in manifest.graded_items(c)
             if i.kind == "test"]  # fmt: skip
    labs = [i.nodeid for c in manifest.chapters() for i in manifest.notebook_items(c)]
    assert sorted(set(recorded) - set(labs)) == sorted(tests)
    bare = [node for node in tests if all(e == 0 for e in recorded[node])]
    assert not bare, f"{len(bare)} graded tests compare no value the oracle holds: {bare[:5]}"
    # A lab task without a recorded value cannot pass (grader/labs.py): every one has one.
    from autograder.grader.labs import valued

    unvalued = [node for node in labs if not valued(recorded.get(node))]
    assert not unvalued, f"lab tasks that compare no value the oracle holds: {unvalued}"


def test_the_reference_runs_value_is_what_counts(recorded):
    node, i, e = _close_entry(recorded)
    want = judge.decode(e["e"])
    assert oracle.judge(recorded[node], i, _record(want.copy(), want))[0]
    # A made-up comparison that agrees with itself is refused: zeros against zeros.
    zeros = np.zeros_like(want) + (1 if not want.any() else 0)
    ok, why = oracle.judge(recorded[node], i, _record(zeros, zeros))
    assert not ok and "you gave" in why and "expected" in why
    # So are loose tolerances the child asks for, and a truth where a value is compared.
    ok, _ = oracle.judge(recorded[node], i, _record(want * 1.01 + 1, want * 1.01 + 1, 1, 1))
    assert not ok
    assert not oracle.judge(recorded[node], i, {"how": "truth", "ok": True})[0]


def test_more_comparisons_than_the_reference_run_are_refused(recorded):
    node, entries = next((n, v) for n, v in recorded.items() if v)
    ok, why = oracle.judge(entries, len(entries), {"how": "truth", "ok": True})
    assert not ok and "more values than the reference run" in why


def test_a_checked_value_must_be_the_reference_runs(recorded):
    node, i, e = next(
        (n, i, e) for n, v in recorded.items() for i, e in enumerate(v) if e != 0 and "v" in e
    )
    right = judge.decode(e["v"])
    sent = {"how": "truth", "ok": True, "value": wire.encode(right.copy(), None)}
    assert oracle.judge(recorded[node], i, sent) == (True, "")
    wrong = {"how": "truth", "ok": True, "value": wire.encode(right + 1, None)}
    ok, why = oracle.judge(recorded[node], i, wrong)
    assert not ok and "you gave" in why and "the reference gives" in why
    assert not oracle.judge(recorded[node], i, {"how": "truth", "ok": True})[0]  # no value sent


def test_a_checks_tolerance_is_the_reference_runs():
    """``check(..., value=x, tol=(rtol, atol))``: the recorded tolerance, never the learner's."""
    right = np.array([1.0, 2.0, 3.0])
    want = oracle.entry({"how": "truth", "ok": True, "value": wire.encode(right, None),
                         "rtol": 1e-3, "atol": 0.0})  # fmt: skip
    assert want["rtol"] == 1e-3

    def sent(x, **tol):
        return {"how": "truth", "ok": True, "value": wire.encode(np.asarray(x), None), **tol}

    assert oracle.judge([want], 0, sent(right * (1 + 5e-4)))[0]
    assert not oracle.judge([want], 0, sent(right * (1 + 5e-3)))[0]
    assert not oracle.judge([want], 0, sent(right * (1 + 5e-3), rtol=0.05, atol=0.05))[0]
    assert not oracle.judge([oracle.entry(sent(right))], 0, sent(right * (1 + 5e-4)))[0]


def test_text_values_are_canonical():
    """``harness.text``: the same answer gives the same bytes, whatever the set's order."""
    import enum

    from autograder.harness import text

    class Why(enum.Enum):
        SPACE = "space"

    a = text((False, Why.SPACE, {"b", "a"}, {2: "x", 1: None}, np.int64(3)))
    b = text([False, Why.SPACE, {"a", "b"}, {1: None, 2: "x"}, 3])
    assert a.dtype == np.uint8 and bytes(a) == bytes(b)
    assert bytes(text((True, Why.SPACE))) != bytes(text((False, Why.SPACE)))


def test_lab_records_are_judged_by_value_kind_and_tolerance():
    from autograder.grader import labs as labcheck

    ref = [["Eq", {"l": [9, 300], "n": 2}, {"l": [9, 300], "n": 2}],
           ["Lt", "number", "number"],
           ["call", "np.allclose", {"a": [1.0, 2.0], "shape": [2]}, {"a": [1.0, 2.0], "shape": [2]},
            [1e-05, 0.01]]]  # fmt: skip
    assert labcheck.judge(ref, json_copy(ref)) == (True, "")
    near = json_copy(ref)
    near[2][2]["a"] = [1.015, 2.0]  # within twice the cell's own atol of the reference's
    assert labcheck.judge(ref, near)[0]
    far = json_copy(ref)
    far[2][2]["a"] = [1.05, 2.0]
    assert not labcheck.judge(ref, far)[0]
    same = json_copy(ref)
    same[0][1] = {"l": [{"o": "Same"}, {"o": "Same"}], "n": 2}
    assert not labcheck.judge(ref, same)[0]
    assert not labcheck.judge(ref, ref[:2])[0]
    assert not labcheck.judge(ref, [["Eq", 1], "junk", None])[0]
    assert labcheck.judge(labcheck.merge(ref, far), far)[0]  # differed between runs: not judged


def json_copy(x):
    import json

    return json.loads(json.dumps(x))
