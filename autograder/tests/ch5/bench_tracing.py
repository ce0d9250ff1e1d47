"""Graded benchmarks, chapter 5: tracing is linear, cached calls are cheap, Python overhead.

Every figure is a ratio of two timings taken in the same run. The two sides
are measured in alternating rounds (``harness.measure`` each time) and the
best round of each is kept, so a burst of load on a shared machine hits
both sides alike.
"""

from __future__ import annotations

import gc

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


def _best(fns: dict, rounds: int = 9, repeat: int = 3) -> dict:
    best = {k: float("inf") for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            gc.collect()
            best[k] = min(best[k], measure(fn, repeat=repeat))
    return best


@benchmark(
    "5.1", points=2, metric="per_node_ratio", bands=[(3.0, 1.0), (6.0, 0.5)], higher_is_better=False
)
def bench_tracing_is_linear(report):
    x, y = minitorch.randn(4, 4), minitorch.randn(4, 4)
    small, large = minitorch.jit(_chain(50)), minitorch.jit(_chain(400))
    n_small, n_large = len(small.trace(x, y)), len(large.trace(x, y))
    t = _best({"small": lambda: small.trace(x, y), "large": lambda: large.trace(x, y)})
    per_small, per_large = t["small"] / n_small, t["large"] / n_large
    report(
        per_node_ratio=per_large / per_small,
        us_per_node_50=per_small * 1e6,
        us_per_node_400=per_large * 1e6,
    )


@benchmark(
    "5.7",
    points=2,
    metric="call_over_interpret",
    bands=[(3.0, 1.0), (6.0, 0.5)],
    higher_is_better=False,
)
def bench_cached_call_is_cheap(report):
    x, y = minitorch.randn(4, 4), minitorch.randn(4, 4)
    f = minitorch.jit(_chain(40))
    graph = f.trace(x, y)
    f(x, y)  # trace once; later calls hit the cache
    t = _best({"call": lambda: f(x, y), "interpret": lambda: interpret(graph, x, y)})
    report(
        call_over_interpret=t["call"] / t["interpret"],
        call_us=t["call"] * 1e6,
        interpret_us=t["interpret"] * 1e6,
    )


@benchmark(
    "5.6",
    points=2,
    metric="interpret_over_eager",
    bands=[(3.0, 1.0), (6.0, 0.5)],
    higher_is_better=False,
)
def bench_interpreter_overhead(report):
    x, y = minitorch.randn(2, 2), minitorch.randn(2, 2)
    fn = _chain(200)
    graph = minitorch.jit(fn).trace(x, y)
    n = len(graph)
    t = _best({"eager": lambda: fn(x, y), "interpret": lambda: interpret(graph, x, y)})
    report(
        interpret_over_eager=t["interpret"] / t["eager"],
        eager_us_per_op=t["eager"] / n * 1e6,
        interpret_us_per_op=t["interpret"] / n * 1e6,
        loop_overhead_us_per_op=(t["interpret"] - t["eager"]) / n * 1e6,
    )
