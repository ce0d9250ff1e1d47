"""What graded tests and benchmarks import: ``graded``, ``benchmark``, ``check``, ``compare``.

A graded test::

    @graded("1.4", points=2)
    def test_broadcast_shape_matches_numpy():
        ...

A graded benchmark (partial credit by bands on one figure the parent computes)::

    @benchmark("1.12", points=2, metric="speedup", bands=[(8, 1.0), (3, 0.5)],
               formula="slow / fast", baseline=("slow",))
    def bench_fast_path(report):
        t = compare({"fast": run_fast, "slow": grader_owned_baseline})
        report(**t.figures_ms())  # shown, not graded

The parent runs a benchmark twice: with the learner's code, which times the
sides not named in ``baseline``, and on the course's own code in reference
mode, which times the baseline sides and computes what every other side must
return. It times every sample itself (the child's CPU clock, read from
outside), interleaving the two processes round by round, and computes
``formula`` from each side's fastest sample (see ``autograder/grader/bench.py``).

The grader finds these decorators by reading the files (it never imports
learner code in its own process), runs them in child processes with the
exercise in focus, and scores from its own list.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, settings

from . import wire
from .timing import Timings, compare, fresh, one_thread, perturb  # noqa: F401 - the tests' API

_HONEST_TRUTH = (bool, np.bool_, int, float, str, tuple, list, dict, set, type(None))

settings.register_profile(
    "grading",
    derandomize=True,
    deadline=None,
    database=None,
    max_examples=25,
    print_blob=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    # No explain phase: after a failure it traces the test line by line (sys.settrace),
    # which doubled the time a stub's failing tests take and adds little to the message.
    phases=[p for p in Phase if p is not Phase.explain],
)
settings.load_profile("grading")


def _no_local_constants() -> None:
    """Hypothesis also draws constants it finds in every loaded module that is not a
    library (the learner's code, the tests): its examples would then depend on what the
    learner wrote and on which tests were imported first, and the references' recorded
    comparisons would not meet the same inputs. Only its own global constants stay."""
    from hypothesis.internal.conjecture import providers

    empty = providers.Constants()
    providers._get_local_constants = lambda: empty


_no_local_constants()


def graded(exercise: str, points: float) -> pytest.MarkDecorator:
    """Mark a test as worth ``points`` towards ``exercise`` ("C.N")."""
    return pytest.mark.graded(exercise=exercise, points=points, kind="test")


def benchmark(
    exercise: str,
    points: float,
    metric: str,
    bands: list[tuple[float, float]],
    higher_is_better: bool = True,
    needs: str | None = None,
    formula: str | None = None,
    baseline: tuple[str, ...] = (),
) -> pytest.MarkDecorator:
    """Mark a benchmark. ``bands`` is ``[(threshold, fraction), ...]``, best first.

    ``formula`` computes the graded figure from the sides' seconds per call
    (``"numpy / fused"``; ``+ - * /``, numbers, ``min`` and ``max``), over every
    ``compare`` the benchmark makes; side names are unique within one benchmark.
    ``baseline`` names the sides timed on the course's own code. Without a
    ``formula`` the figure is the one the benchmark reports (not a timing:
    memory, traffic). The score is ``points * fraction`` of the first band the
    figure reaches. ``needs="gpu"`` leaves it out of the total without a GPU.
    """
    return pytest.mark.graded(
        exercise=exercise,
        points=points,
        kind="benchmark",
        metric=metric,
        bands=[tuple(b) for b in bands],
        higher_is_better=higher_is_better,
        needs=needs,
        formula=formula,
        baseline=tuple(baseline),
    )


_NO_VALUE = object()


def check(
    ok: bool,
    exercise: str,
    message: str,
    value=_NO_VALUE,
    tol: tuple[float, float] | None = None,
    **inputs,
) -> None:
    """Assert with a message that names the exercise and shows a small failing input.

    ``ok`` must be a ``bool`` (or numpy's), or a builtin value whose truth is
    honest (``check(len(x), ...)``): an object of another class could be true
    whatever it holds. The parent scores from the record this sends.

    ``value``: numbers the check is about whose right value is unique (the
    strides it compares, not an order of which many are right). It travels
    with the record and the parent compares it with what the references sent
    at that place (:mod:`autograder.oracle`): a made-up record must then
    carry the right answer.

    ``tol=(rtol, atol)``: floats in ``value`` that a correct implementation may
    compute another way (a sum in another order, a fused kernel) are compared
    with this tolerance; the parent takes it from the reference run's record,
    never from the learner's.
    """
    good = type(ok) in _HONEST_TRUTH
    sent, why = (None, "") if value is _NO_VALUE else wire.plain(value)
    error = "" if good else f"check() got a {type(ok).__name__}, not a bool"
    extra = {} if tol is None or sent is None else {"rtol": float(tol[0]), "atol": float(tol[1])}
    shown = _shown(inputs) if sent is not None else ""
    wire.send_check("truth", ok=bool(ok) if good else False, value=sent, inputs=shown,
                    error=error or (why and f"the checked value is {why}"), **extra)  # fmt: skip
    if good and ok:
        return
    if not good:
        message = f"{message} (the check's value is a {type(ok).__name__}, not a bool)"
    shown = shown or _shown(inputs)
    diff = (
        _first_difference(inputs["got"], inputs["expected"])
        if {"got", "expected"} <= set(inputs)
        else None
    )
    shown += f"\n  first difference: {diff}" if diff else ""
    raise AssertionError(f"Exercise {exercise}: {message}" + (f"\n{shown}" if shown else ""))


def _shown(inputs: dict) -> str:
    return "\n".join(f"  {k} = {_short(v)}" for k, v in inputs.items())


def _first_difference(got, expected, path: str = "") -> str | None:
    """Where two nested lists, tuples or dicts first differ, in words: a long structure
    shown whole hides the one place that is wrong."""
    try:
        if isinstance(got, (list, tuple)) and isinstance(expected, (list, tuple)):
            for i, (g, e) in enumerate(zip(got, expected)):
                found = _first_difference(g, e, f"{path}[{i}]")
                if found:
                    return found
            if len(got) != len(expected):
                n, m = len(got), len(expected)
                more = (
                    f"extra {_short(got[m], 80)}" if n > m else f"missing {_short(expected[n], 80)}"
                )
                return f"at {path or 'the top'}: {n} items, expected {m} ({more} at [{min(n, m)}])"
            return None
        if isinstance(got, dict) and isinstance(expected, dict):
            for k in expected:
                if k not in got:
                    return f"at {path}[{k!r}]: missing"
                found = _first_difference(got[k], expected[k], f"{path}[{k!r}]")
                if found:
                    return found
            extra = [k for k in got if k not in expected]
            return f"at {path}[{extra[0]!r}]: not expected" if extra else None
        if isinstance(got, np.ndarray) or isinstance(expected, np.ndarray):
            return None  # assert_close words arrays
        if path and got != expected:  # at the top, got and expected are shown already
            return f"at {path}: got {_short(got, 80)}, expected {_short(expected, 80)}"
    except Exception:  # noqa: BLE001 - a learner's object whose == raises: no diff, the rest shows
        return None
    return None


def text(x) -> np.ndarray:
    """``x`` (names, flags, nested lists and dicts, enums) as bytes a ``check`` can carry.

    ``check(got == (False, R.SPACE), ..., value=text(got))`` sends the answer
    itself, not only whether it was right. Sets are sorted and other objects
    written with ``str``, so the same answer always gives the same bytes; keep
    out what differs between correct implementations (ids, addresses, messages).
    """

    def norm(v):
        if isinstance(v, (set, frozenset)):
            return sorted((norm(i) for i in v), key=repr)
        if isinstance(v, (list, tuple)):
            return [norm(i) for i in v]
        if isinstance(v, dict):
            return [[norm(k), norm(i)] for k, i in sorted(v.items(), key=lambda kv: repr(kv[0]))]
        if isinstance(v, np.generic):
            return v.item()
        return v if type(v) in (bool, int, float, str, type(None)) else str(v)

    return np.frombuffer(json.dumps(norm(x)).encode(), dtype=np.uint8).copy()


def assert_close(actual, expected, exercise: str, rtol=1e-5, atol=1e-6, **inputs) -> None:
    """Compare arrays with a message naming the exercise, the inputs and the first mismatch.

    Both sides travel to the parent as plain bytes (dtype, shape, data), which
    decides with its own numpy (``runner.decide``); the local comparison below
    only words the message.
    """
    a, a_err = wire.plain(actual)
    e, e_err = wire.plain(expected)
    wire.send_check("close", actual=a, expected=e, rtol=rtol, atol=atol, inputs=_shown(inputs),
                    error=a_err and f"the result is {a_err}" or e_err and f"expected is {e_err}")  # fmt: skip
    if a_err:
        check(False, exercise, f"the result is {a_err}, not a plain array or number", **inputs)
    actual, expected = a, e if e is not None else np.asarray(expected)
    if actual.shape != expected.shape:
        check(False, exercise, f"shape {actual.shape}, expected {expected.shape}", **inputs)
    if not np.allclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True):
        bad = np.argwhere(~np.isclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True))
        where = tuple(int(i) for i in bad[0]) if bad.size and actual.ndim else ()
        check(
            False,
            exercise,
            f"values differ at index {where}: got {actual[where]!r}, expected {expected[where]!r}",
            **inputs,
            got=actual,
            expected=expected,
        )


def _short(v, limit: int = 300) -> str:
    s = np.array2string(v, threshold=50) if isinstance(v, np.ndarray) else repr(v)
    return s if len(s) <= limit else s[:limit] + " ..."
