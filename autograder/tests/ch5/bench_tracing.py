"""Graded benchmarks, chapter 5: tracing is linear, cached calls are cheap, Python overhead.

Every figure is a ratio of two timings taken in the same run.
"""

from __future__ import annotations

import minitorch
from autograder.harness import benchmark, measure
from minitorch.tracing import interpret


def _chain(n: int):
    """A function of ``n`` tiny ops (no constants: the cost is all recording)."""

    def f(x, y):
        for k in range(n // 2):
            x = (x * y).tanh() if k % 2 else (x + y).relu()
        return x

    return f


@benchmark("5.1", points=2, metric="per_node_ratio", bands=[(2.0, 1.0), (4.0, 0.5)],
           higher_is_better=False)
def bench_tracing_is_linear(report):
    x, y = minitorch.randn(4, 4), minitorch.randn(4, 4)
    small, large = minitorch.jit(_chain(50)), minitorch.jit(_chain(400))
    n_small, n_large = len(small.trace(x, y)), len(large.trace(x, y))
    t_small = measure(lambda: small.trace(x, y), repeat=5) / n_small
    t_large = measure(lambda: large.trace(x, y), repeat=5) / n_large
    report(per_node_ratio=t_large / t_small, us_per_node_50=t_small * 1e6,
           us_per_node_400=t_large * 1e6)


@benchmark("5.7", points=2, metric="call_over_interpret", bands=[(2.0, 1.0), (4.0, 0.5)],
           higher_is_better=False)
def bench_cached_call_is_cheap(report):
    x, y = minitorch.randn(4, 4), minitorch.randn(4, 4)
    f = minitorch.jit(_chain(40))
    graph = f.trace(x, y)
    f(x, y)  # trace once; later calls hit the cache
    t_call = measure(lambda: f(x, y))
    t_interp = measure(lambda: interpret(graph, x, y))
    report(call_over_interpret=t_call / t_interp, call_us=t_call * 1e6,
           interpret_us=t_interp * 1e6)


@benchmark("5.6", points=2, metric="interpret_over_eager", bands=[(2.0, 1.0), (4.0, 0.5)],
           higher_is_better=False)
def bench_interpreter_overhead(report):
    x, y = minitorch.randn(2, 2), minitorch.randn(2, 2)
    fn = _chain(200)
    graph = minitorch.jit(fn).trace(x, y)
    n = len(graph)
    t_eager = measure(lambda: fn(x, y), repeat=5)
    t_interp = measure(lambda: interpret(graph, x, y), repeat=5)
    report(interpret_over_eager=t_interp / t_eager, eager_us_per_op=t_eager / n * 1e6,
           interpret_us_per_op=t_interp / n * 1e6,
           loop_overhead_us_per_op=(t_interp - t_eager) / n * 1e6)
