"""The numbers of the dynamic-shapes and parallel-scheduling section, computed when the book builds."""

from __future__ import annotations

import statistics
import time

import numpy as np

from ..core.creation import tensor
from ..core.tensor import no_grad
from ..passes.options import CompileOptions
from ..passes.plan import run_plan
from ..tracing.jit import jit
from . import parallel


def _t(a) -> object:
    return tensor(np.asarray(a, dtype=np.float32))


def trace_for(jf, *args):
    """The cached trace a call of ``jf`` on ``args`` runs (traces are shared per code)."""
    names, values, _ = jf._binder.flatten(args, {})
    bucket = jf.store.entries[jf._key(values)]
    return next(t for t in reversed(bucket) if not t.check(jf.fn, values))


def epoch_report(n: int = 1000, batch: int = 64, seed: int = 0) -> dict:
    """One epoch of a small MLP's loss over batches of ``batch`` (the last one smaller).

    Returns the number of traces without and with dynamic shapes, the largest
    difference from eager, and what the first call at a new size costs (median over
    16 sizes): a trace and a compile, or re-inference over the graph and a compile.
    """
    rng = np.random.default_rng(seed)
    data = rng.standard_normal((n, 64)).astype(np.float32)
    labels = rng.integers(0, 10, n)
    w1, w2 = _t(rng.standard_normal((64, 128)) * 0.1), _t(rng.standard_normal((128, 10)) * 0.1)

    def loss(x, onehot):
        h = (x @ w1).relu() @ w2
        return ((h - onehot) ** 2).mean()

    out = {"batches": -(-n // batch), "last": n - (n // batch) * batch or batch}
    for name, options in (("static", None), ("dynamic", CompileOptions(dynamic=True))):
        f = jit(lambda x, y: loss(x, y), options=options)
        worst = 0.0
        for start in range(0, n, batch):  # the last batch is smaller
            x, y = _t(data[start : start + batch]), _t(np.eye(10)[labels[start : start + batch]])
            with no_grad():
                worst = max(worst, abs(float(f(x, y).numpy()) - float(loss(x, y).numpy())))
        # a second epoch over 7 fewer samples: a new last batch, a new size
        for start in range(0, n - 7, batch):
            stop = min(start + batch, n - 7)
            x, y = _t(data[start:stop]), _t(np.eye(10)[labels[start:stop]])
            with no_grad():
                worst = max(worst, abs(float(f(x, y).numpy()) - float(loss(x, y).numpy())))
        out[f"{name}_traces"] = f.trace_count
        out[f"{name}_error"] = worst
        if name == "dynamic":
            out["sizes_compiled"] = sum(e.compiled_sizes for e in f.dynamic)
            out["dims"] = [x for e in f.dynamic for x in e.lines]
    # what a new size costs: a trace and a compile, or re-inference and a compile
    for name, options in (("static", None), ("dynamic", CompileOptions(dynamic=True))):
        f = jit(lambda x, y: loss(x, y), options=options, cache_limit=100)
        costs = []
        for b in range(20, 36):
            x, y = _t(data[:b]), _t(np.eye(10)[labels[:b]])
            t0 = time.perf_counter()
            with no_grad():
                f(x, y)
            costs.append(time.perf_counter() - t0)
        out[f"{name}_new_size_ms"] = statistics.median(costs[2:]) * 1e3
    return out


def two_branch(n: int = 192, depth: int = 3, seed: int = 0):
    """A model with two independent branches of ``depth`` matmuls each, joined at the end."""
    rng = np.random.default_rng(seed)
    ws = [_t(rng.standard_normal((n, n)) / np.sqrt(n)) for _ in range(2 * depth)]

    def model(x):
        a, b = x, x
        for k in range(depth):
            a = (a @ ws[2 * k]).tanh()
            b = (b @ ws[2 * k + 1]).relu()
        return a + b

    return model


def parallel_report(n: int = 192, batch: int = 192, rounds: int = 15, threads: int = 1) -> dict:
    """Wall-clock time of the two-branch model: sequential plan vs the thread-pool runner.

    BLAS runs on ``threads`` thread(s) per call (one by default, so that the two
    runners use the same cores: the pool's two threads against one); the best of
    ``rounds`` interleaved runs after a warm-up, since load only ever adds time. The schedule's width (steps per
    level) bounds the speedup with two workers.
    """
    from threadpoolctl import threadpool_limits

    model = two_branch(n)
    x = _t(np.random.default_rng(1).standard_normal((batch, n)))
    f = jit(model, options=CompileOptions(parallel=True))
    f(x)
    entry = trace_for(f, x)
    plan, runner = entry.compiled.plan, entry.compiled.runner
    inputs = [t._data for t in entry.inputs(f.fn, [x])]
    seq, par = [], []
    with threadpool_limits(limits=threads):
        for _ in range(3):
            run_plan(plan, inputs), runner(plan, inputs)
        for _ in range(rounds):
            for fn, times in ((run_plan, seq), (runner, par)):
                t0 = time.perf_counter()
                fn(plan, inputs)
                times.append(time.perf_counter() - t0)
    same = all(
        np.array_equal(a.to_numpy(), b.to_numpy())
        for a, b in zip(run_plan(plan, inputs), runner(plan, inputs))
    )
    s = parallel.schedule(plan)
    ms_seq, ms_par = min(seq) * 1e3, min(par) * 1e3  # load only ever adds time: best round
    return {
        **s,
        "sequential_ms": ms_seq,
        "parallel_ms": ms_par,
        "speedup": ms_seq / ms_par,
        "workers": parallel.WORKERS,
        "identical": same,
    }
