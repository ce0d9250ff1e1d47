"""The parent decides: check records are plain bytes, judged with the grader's own numpy."""

import ast
import base64

import numpy as np
import pytest

from autograder import wire
from autograder.grader import judge
from autograder.grader.manifest import Item, min_checks
from autograder.grader.protocol import score

NODE = "autograder/tests/ch1/test_indexing.py::test_strides_from_shape"


def enc(arr):
    arr = np.ascontiguousarray(arr)
    return {"dtype": arr.dtype.str, "shape": list(arr.shape),
            "data": base64.b64encode(arr.tobytes()).decode()}  # fmt: skip


def close(actual, expected, rtol=1e-5, atol=1e-6, **extra):
    return {"event": "check", "nodeid": NODE, "how": "close", "error": "",
            "actual": enc(actual), "expected": enc(expected), "rtol": rtol, "atol": atol,
            "sampled": False, **extra}  # fmt: skip


def test_the_parent_compares_values_itself():
    x = np.array([[1.0, np.nan], [3.0, 4.0]])
    assert judge.decide(close(x, x.copy()))[0]
    assert judge.decide(close(np.arange(3), np.arange(3.0)))[0]
    assert not judge.decide(close(x, x + 1))[0]
    assert "shape" in judge.decide(close(x, x.T.reshape(4)))[1]
    assert not judge.decide(close(np.zeros(0), np.zeros(1)))[0]


@pytest.mark.parametrize(
    "rec",
    [
        close([1.0], [2.0], rtol=1e9),  # a tolerance the test never asked for is capped
        close([1.0], [1.0], rtol=-1.0),
        close([1.0], [1.0], rtol=float("inf")),
        close([1.0], [1.0], error="the result is a Foo"),
        {**close([1.0], [1.0]), "actual": {"dtype": "|O", "shape": [1], "data": "AAAAAAAAAAA="}},
        {**close([1.0], [1.0]), "actual": {"dtype": "<f8", "shape": [2], "data": "AAAAAAAAAAA="}},
        {**close([1.0], [1.0]), "actual": {"dtype": "<f8", "shape": [-1], "data": ""}},
        {**close([1.0], [1.0]), "actual": "a pickle"},
        {**close([1.0], [1.0]), "how": "always"},
        {"event": "check", "nodeid": NODE, "how": "truth", "ok": "yes", "error": ""},
        {"event": "check", "nodeid": NODE, "how": "truth", "ok": False, "error": ""},
    ],
)
def test_bad_or_false_records_never_hold(rec):
    ok, why = judge.decide(rec)
    assert not ok and why


def test_only_the_data_of_learner_values_travels():
    class Eq(int):
        def __eq__(self, other):
            return True

        __hash__ = int.__hash__

    class Sub(np.ndarray):
        def __array_function__(self, *args, **kwargs):
            return True

    assert wire.plain((1, 2.5, np.float32(3)))[1] == ""
    assert wire.plain(np.arange(4)[::-2])[0].flags.c_contiguous
    arr, _ = wire.plain(np.arange(3).view(Sub))
    assert type(arr) is np.ndarray and arr.tolist() == [0, 1, 2]
    eq, _ = wire.plain(Eq(5))
    assert type(eq) is np.ndarray and eq.dtype.kind == "i" and int(eq.sum()) == 5
    for bad in [object(), [[1], [2, 3]], "12", None, {"a": 1}]:
        arr, why = wire.plain(bad)
        assert arr is None and why, bad


def test_a_pass_needs_the_checks_the_test_makes():
    item = Item(NODE, "1.3", 2, checks=1)
    ev = {"outcome": "passed", "duration": 0.1, "figures": {}}
    assert score(item, ev, (3, "")).score == 2
    assert score(item, ev, (0, "")).score == 0  # a bare pass record
    failed = score(item, ev, (3, "values differ"))
    assert failed.score == 0 and failed.message == "values differ"


def test_min_checks_counts_only_calls_that_surely_run():
    src = """
def helper(x):
    assert_close(x, x, "1.1")
def test_a():
    helper(1)
def test_b():
    if cond:
        check(ok, "1.1", "m")
def test_c():
    try:
        f()
    except E:
        pass
    else:
        check(False, "1.1", "should raise")
def test_d():
    check(got == want, "1.1", "m")
CASES = [(1, 2)]
def test_e():
    for a, b in CASES:
        check(a < b, "1.1", "m")
def test_f():
    with pytest.raises(E):
        check(f() == 1, "1.1", "m")
def test_g():
    with one_thread():
        assert_close(x, y, "1.1")
def test_h():
    def verify(name, result):
        assert_close(result, 1, "1.1")
    for x in items:
        check(x, "1.1", "m")
"""
    module = ast.parse(src)
    fns = {f.name: f for f in module.body if isinstance(f, ast.FunctionDef)}
    names = "test_a test_b test_c test_d test_e test_f test_g test_h".split()
    got = [min_checks(fns[n], module) for n in names]
    assert got == [1, 0, 0, 1, 1, 0, 1, 0]


def test_learner_results_that_could_fool_a_comparison_are_refused():
    import collections
    from typing import NamedTuple

    from minitorch.exercises import _plain_result

    class Step(NamedTuple):
        a: int

    class Eq(int):
        def __eq__(self, other):
            return True

        __hash__ = int.__hash__

    class Iter(tuple):
        def __iter__(self):
            return iter([Eq(1)])

    class Sub(np.ndarray):
        pass

    fine = (1, 2.0, np.float32(3), np.arange(3), [Step(1)], collections.defaultdict(int), None)
    assert _plain_result("1.3", fine) is fine
    for bad in [Eq(1), [(Eq(1),)], Iter(), np.arange(3).view(Sub), {"k": Step(Eq(2))}]:
        with pytest.raises(TypeError, match="Exercise 1.3 returned a"):
            _plain_result("1.3", bad)


def test_check_takes_builtin_truth_only():
    from autograder.harness import check

    class AlwaysTrue:
        def __bool__(self):
            return True

    check(True, "1.1", "m")
    check(np.True_, "1.1", "m")
    check(3, "1.1", "m")  # check(len(x), ...) keeps working
    with pytest.raises(AssertionError, match="not a bool"):
        check(AlwaysTrue(), "1.1", "m")
    with pytest.raises(AssertionError):
        check([], "1.1", "m")


def test_a_failed_check_points_at_the_first_difference_of_a_structure():
    from autograder.harness import check

    got = [("layers.0.weight", (3, 2)), ("layers.0.bias", (3,)), ("layers.2.bias", (1,))]
    want = [("layers.0.weight", (3, 2)), ("layers.0.bias", (3,)), ("layers.2.weight", (1, 3))]
    with pytest.raises(AssertionError) as e:
        check(False, "2.11", "wrong names", got=got, expected=want)
    assert "first difference: at [2][0]: got 'layers.2.bias', expected 'layers.2.weight'" in str(
        e.value
    )
    with pytest.raises(AssertionError) as e:
        check(False, "6.1", "counts", got={"add": 2, "mul": 1}, expected={"add": 2, "mul": 3})
    assert "first difference: at ['mul']: got 1, expected 3" in str(e.value)
    with pytest.raises(AssertionError) as e:
        check(False, "11.6", "batches", got=[[0, 1]], expected=[[0, 1], [2]])
    assert "first difference: at the top: 1 items, expected 2 (missing [2] at [1])" in str(e.value)
    with pytest.raises(AssertionError) as e:  # scalars: got and expected already say it
        check(False, "1.1", "wrong position", got=4, expected=5)
    assert "first difference" not in str(e.value)


def test_a_figure_short_of_full_credit_is_seen_before_every_side_is_timed():
    from autograder.grader.bench import Bench, figure

    formula = "min(blas_512 / numba_512, blas_1024 / numba_1024)"
    assert figure(formula, {"blas_512": 1.0, "numba_512": 4.0}, partial=True) == 0.25
    with pytest.raises(KeyError):
        figure(formula, {"blas_512": 1.0, "numba_512": 4.0})
    item = Item("x::bench_b", "3.6", 2, kind="benchmark", metric="f",
                bands=[(0.3, 1.0), (0.15, 0.5)], formula=formula)  # fmt: skip
    bench = Bench(item, None, None, None, None, None)
    assert bench._short({"blas_512": [1.0], "numba_512": [4.0, 5.0]})  # 0.25 < 0.3
    assert not bench._short({"blas_512": [1.0], "numba_512": [4.0, 3.0]})  # fastest: 0.33
    assert not bench._short({"blas_512": [1.0]})  # nothing to judge yet
    lower = Item("x::bench_c", "5.6", 2, kind="benchmark", metric="r",
                 bands=[(3.0, 1.0)], higher_is_better=False, formula="a / b")  # fmt: skip
    assert Bench(lower, None, None, None, None, None)._short({"a": [4.0], "b": [1.0]})


def test_a_benchmark_result_is_read_whole_from_the_childs_memory():
    """A benchmark's result travels as its address; the parent reads every value. A kept
    result was once wrong only at 32 of 8M places, and only 4096 sampled values were compared."""
    import os

    expected = np.arange(1 << 20, dtype=np.float32)
    wrong = expected.copy()
    wrong[12345] += 1  # a place the even sample of 4096 values never looks at
    assert 12345 not in wire.sample_index(wrong.size)
    where = {"dtype": wrong.dtype.str, "shape": [1 << 20], "address": wrong.ctypes.data}
    got = judge.read_array(os.getpid(), where)
    ok, why = judge.close(got, expected, 1e-5, 1e-6)
    assert not ok and "(12345,)" in why and "1 of 1048576 differ" in why
    assert judge.close(judge.read_array(os.getpid(), {**where, "address": expected.ctypes.data}),
                       expected, 1e-5, 1e-6) == (True, "")  # fmt: skip
    for bad in ({**where, "address": 0}, {**where, "dtype": "|O"}, {**where, "shape": [1 << 40]}):
        with pytest.raises(ValueError):
            judge.read_array(os.getpid(), bad)
    # given the course's result, another shape is refused before anything is read
    like = np.zeros((1 << 10, 1 << 10), dtype=np.float32)
    assert (
        judge.read_array(os.getpid(), {**where, "shape": [1 << 10, 1 << 10]}, like).shape
        == like.shape
    )
    with pytest.raises(ValueError, match=r"shape \(1048576,\) of float32, expected \(1024, 1024\)"):
        judge.read_array(os.getpid(), {**where, "address": 1}, like)  # never read: no such address
