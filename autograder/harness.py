"""What graded tests and benchmarks import: ``graded``, ``benchmark``, ``measure``, ``check``.

A graded test::

    @graded("1.4", points=2)
    def test_broadcast_shape_matches_numpy():
        ...

A graded benchmark (partial credit by bands on one measured figure)::

    @benchmark("1.12", points=2, metric="speedup", bands=[(8, 1.0), (3, 0.5)])
    def bench_fast_path(report):
        slow, fast = measure(run_slow), measure(run_fast)
        report(speedup=slow / fast, slow_ms=slow * 1e3, fast_ms=fast * 1e3)

The grader finds these decorators by reading the files (it never imports
learner code in its own process), runs them in a child process with the
exercise in focus, and scores from its own list.
"""

from __future__ import annotations

import gc
import statistics
import time
from typing import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "grading",
    derandomize=True,
    deadline=None,
    database=None,
    max_examples=25,
    print_blob=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("grading")


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
) -> pytest.MarkDecorator:
    """Mark a benchmark. ``bands`` is ``[(threshold, fraction), ...]``, best first.

    The score is ``points * fraction`` of the first band the figure reaches.
    ``needs="gpu"`` leaves it out of the total when no GPU is present.
    """
    return pytest.mark.graded(
        exercise=exercise,
        points=points,
        kind="benchmark",
        metric=metric,
        bands=[tuple(b) for b in bands],
        higher_is_better=higher_is_better,
        needs=needs,
    )


def band_fraction(value: float, bands, higher_is_better: bool = True) -> float:
    for threshold, fraction in bands:
        if (value >= threshold) if higher_is_better else (value <= threshold):
            return float(fraction)
    return 0.0


def measure(
    fn: Callable[[], object], repeat: int = 7, warmup: int = 1, min_time: float = 0.005
) -> float:
    """Median seconds per call of ``fn`` after ``warmup`` calls.

    Each sample loops ``fn`` until it has run for ``min_time``, so tiny
    functions are timed over many calls.
    """
    for _ in range(warmup):
        fn()
    n, t = 1, 0.0
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        t = time.perf_counter() - t0
        if t >= min_time or n >= 1 << 20:
            break
        n *= 2
    samples = [t / n]
    gc_was = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeat - 1):
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            samples.append((time.perf_counter() - t0) / n)
    finally:
        if gc_was:
            gc.enable()
    return statistics.median(samples)


def check(ok: bool, exercise: str, message: str, **inputs) -> None:
    """Assert with a message that names the exercise and shows a small failing input."""
    if ok:
        return
    shown = "\n".join(f"  {k} = {_short(v)}" for k, v in inputs.items())
    raise AssertionError(f"Exercise {exercise}: {message}" + (f"\n{shown}" if shown else ""))


def assert_close(actual, expected, exercise: str, rtol=1e-5, atol=1e-6, **inputs) -> None:
    """Compare arrays with a message naming the exercise, the inputs and the first mismatch."""
    actual, expected = np.asarray(actual), np.asarray(expected)
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
