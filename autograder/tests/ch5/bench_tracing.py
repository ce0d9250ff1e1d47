"""Graded benchmarks, chapter 5: tracing is linear, cached calls are cheap, Python overhead.

Every figure is a ratio of two timings the grader takes in the same run, in
interleaved rounds on CPU time (``harness.compare``), so load on a shared
machine hits both sides alike. Baselines (eager, the interpreter) run on the
course's own code, and every result timed is compared with the course's.
"""

from __future__ import annotations

import numpy as np

import minitorch
from autograder.harness import assert_close, benchmark, check, compare, perturb
from minitorch.tracing import interpret


def _alternate(n: int) -> list[int]:
    return [k % 2 for k in range(n // 2)]


def _chain(n: int, kinds: list[int] | None = None):
    """A function of ``n`` tiny ops (no constants: the cost is all recording); ``kinds[k]``
    says which pair step ``k`` records (read when it runs: a benchmark may change it)."""
    kinds = _alternate(n) if kinds is None else kinds

    def f(x, y):
        for k in range(n // 2):
            x = (x * y).tanh() if kinds[k] else (x + y).relu()
        return x

    return f


def _numpy_chain(n: int, x: np.ndarray, y: np.ndarray, kinds: list[int] | None = None):
    kinds = _alternate(n) if kinds is None else kinds
    for k in range(n // 2):
        x = np.tanh(x * y) if kinds[k] else np.maximum(x + y, 0)
    return x


def _inputs(*shape):
    rng = np.random.default_rng(0)
    xn, yn = (
        rng.standard_normal(shape, dtype=np.float32),
        rng.standard_normal(shape, dtype=np.float32),
    )
    return xn, yn, minitorch.tensor(xn), minitorch.tensor(yn)


def _verify(exercise: str, want: dict, ops: dict | None = None, inputs=()):
    """Check every timed result: ``want[name]`` (an array, or a function of the inputs as they
    are now) as a tensor, or (with ``ops``) a graph of ``ops[name]`` ops that computes it on
    ``inputs``."""

    def verify(name, result):
        if ops is not None:
            n = ops[name]
            check(len(result) == n, exercise, f"the trace has {len(result)} ops, expected {n}")
            result = interpret(result, *inputs)
        expected = want[name]() if callable(want[name]) else want[name]
        assert_close(result.numpy(), expected, exercise, rtol=1e-4, atol=1e-5, timed=name)

    return verify


@benchmark(
    "5.1",
    points=2,
    metric="per_node_ratio",
    bands=[(3.0, 1.0), (6.0, 0.5)],
    higher_is_better=False,
    formula="(large / n_large) / (small / n_small)",
    baseline=("small",),
)
def bench_tracing_is_linear(report):
    # small is the course's trace (timed on its code): a learner's, padded, would divide
    # the learner's per-node cost and lower it. So a linear tracer 3x slower per node than
    # the course's still has full marks, a quadratic one (8x at 400 ops) none. Which op each
    # step records is drawn again before every sample: a graph kept from an earlier trace
    # computes the wrong thing (values alone would not do: a trace depends on shapes).
    xn, yn, x, y = _inputs(4, 4)
    kinds = {50: _alternate(50), 400: _alternate(400)}
    small, large = minitorch.jit(_chain(50, kinds[50])), minitorch.jit(_chain(400, kinds[400]))
    n_small, n_large = len(small.trace(x, y)), len(large.trace(x, y))

    def redraw(rng):
        for k in kinds.values():
            k[:] = rng.integers(0, 2, len(k)).tolist()

    want = {"small": lambda: _numpy_chain(50, xn, yn, kinds[50]),
            "large": lambda: _numpy_chain(400, xn, yn, kinds[400])}  # fmt: skip
    ops = {"small": n_small, "large": n_large}
    check(n_large == 8 * n_small, "5.1", f"traces of 50 and 400 ops have {n_small} and {n_large}")
    t = compare(
        {"small": lambda: small.trace(x, y), "large": lambda: large.trace(x, y)},
        rounds=9,
        verify=_verify("5.1", want, ops, inputs=(x, y)),
        output=lambda graph: interpret(graph, x, y).numpy(),
        tol=(1e-4, 1e-5),
        constants={"n_small": n_small, "n_large": n_large},
        vary=redraw,
    )
    report(us_per_node_50=t.best["small"] / n_small * 1e6,
           us_per_node_400=t.best["large"] / n_large * 1e6)  # fmt: skip


@benchmark(
    "5.7",
    points=2,
    metric="call_over_interpret",
    bands=[(3.0, 1.0), (6.0, 0.5)],
    higher_is_better=False,
    formula="call / interpret",
    baseline=("interpret",),
)
def bench_cached_call_is_cheap(report):
    xn, yn, x, y = _inputs(4, 4)
    f = minitorch.jit(_chain(40))
    graph = f.trace(x, y)
    f(x, y)  # trace once; later calls hit the cache
    want = dict.fromkeys(("call", "interpret"), lambda: _numpy_chain(40, x.numpy(), y.numpy()))
    t = compare(
        {"call": lambda: f(x, y), "interpret": lambda: interpret(graph, x, y)},
        rounds=9,
        verify=_verify("5.7", want),
        tol=(1e-4, 1e-5),
        vary=perturb(x._data.storage, y._data.storage),  # a call's result kept is then wrong
    )
    report(call_us=t.best["call"] * 1e6, interpret_us=t.best["interpret"] * 1e6)


@benchmark(
    "5.6",
    points=2,
    metric="interpret_over_eager",
    bands=[(3.0, 1.0), (6.0, 0.5)],
    higher_is_better=False,
    formula="interpret / eager",
    baseline=("eager",),
)
def bench_interpreter_overhead(report):
    xn, yn, x, y = _inputs(2, 2)
    fn = _chain(200)
    graph = minitorch.jit(fn).trace(x, y)
    n = len(graph)
    want = dict.fromkeys(("eager", "interpret"), lambda: _numpy_chain(200, x.numpy(), y.numpy()))
    t = compare(
        {"eager": lambda: fn(x, y), "interpret": lambda: interpret(graph, x, y)},
        rounds=9,
        verify=_verify("5.6", want),
        tol=(1e-4, 1e-5),
        vary=perturb(x._data.storage, y._data.storage),
    )
    t = t.best
    report(
        eager_us_per_op=t["eager"] / n * 1e6,
        interpret_us_per_op=t["interpret"] / n * 1e6,
        loop_overhead_us_per_op=(t["interpret"] - t["eager"]) / n * 1e6,
    )
