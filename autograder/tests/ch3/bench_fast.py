"""Graded benchmarks of chapter 3: each figure is a ratio measured in this run."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap

import numba
import numpy as np
from numba import njit
from threadpoolctl import threadpool_limits

import minitorch
from autograder.harness import benchmark, check, measure
from minitorch import exercises
from minitorch.core.registry import dispatch


def _both(fn, backends=("numba", "numpy"), **kw):
    times = []
    for name in backends:
        with minitorch.use_backend(name):
            times.append(measure(fn, **kw))
    return times


@benchmark("3.1", points=2, metric="speedup", bands=[(100, 1.0), (30, 0.5)])
def bench_map_vs_python_backend(report):
    x = minitorch.rand(128, 128).T  # a strided view: both backends take their general path
    fast, slow = _both(lambda: -x, ("numba", "python"), repeat=3)
    report(speedup=slow / fast, numba_us=fast * 1e6, python_ms=slow * 1e3)


@benchmark("3.2", points=2, metric="ratio", bands=[(0.6, 1.0), (0.3, 0.5)])
def bench_zip_vs_numpy(report):
    a, b = minitorch.rand(1 << 22), minitorch.rand(1 << 22)
    fast, base = _both(lambda: a + b)
    report(ratio=base / fast, numba_ms=fast * 1e3, numpy_ms=base * 1e3)


@benchmark("3.3", points=2, metric="ratio", bands=[(0.4, 1.0), (0.2, 0.5)])
def bench_reduce_vs_numpy(report):
    x = minitorch.rand(1024, 4096)
    fast, base = _both(lambda: x.sum(axis=1))
    report(ratio=base / fast, numba_ms=fast * 1e3, numpy_ms=base * 1e3)


@benchmark("3.4", points=3, metric="fraction_of_blas", bands=[(0.3, 1.0), (0.15, 0.5)])
def bench_matmul_vs_blas_single_thread(report):
    figures = {}
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        for n in (512, 1024):
            a, b = minitorch.rand(n, n), minitorch.rand(n, n)
            with threadpool_limits(1):
                fast, blas = _both(lambda a=a, b=b: a @ b, repeat=5)
            figures[f"fraction_{n}"] = blas / fast
            figures[f"numba_gflops_{n}"] = 2 * n**3 / fast / 1e9
            figures[f"blas_gflops_{n}"] = 2 * n**3 / blas / 1e9
    finally:
        numba.set_num_threads(threads)
    report(fraction_of_blas=min(figures["fraction_512"], figures["fraction_1024"]), **figures)


@njit(cache=True)
def _naive_conv(out, x, w, stride, padding):
    # The definition as a loop nest: one output element at a time, bounds checked innermost.
    n_b, n_o, oh_n, ow_n = out.shape
    for n in range(n_b):
        for o in range(n_o):
            for oh in range(oh_n):
                for ow in range(ow_n):
                    total = 0.0
                    for c in range(x.shape[1]):
                        for kh in range(w.shape[2]):
                            for kw in range(w.shape[3]):
                                ih = oh * stride - padding + kh
                                iw = ow * stride - padding + kw
                                if 0 <= ih < x.shape[2] and 0 <= iw < x.shape[3]:
                                    total += w[o, c, kh, kw] * x[n, c, ih, iw]
                    out[n, o, oh, ow] = total


@benchmark("3.5", points=2, metric="speedup", bands=[(5.0, 1.0), (2.0, 0.5)])
def bench_conv2d_vs_naive_loops(report):
    x = np.random.default_rng(0).standard_normal((8, 16, 32, 32)).astype(np.float32)
    w = np.random.default_rng(1).standard_normal((32, 16, 3, 3)).astype(np.float32)
    out = np.empty((8, 32, 32, 32), dtype=np.float32)
    tx, tw = minitorch.tensor(x), minitorch.tensor(w)
    with minitorch.use_backend("numba"):
        got = dispatch("conv2d", tx, tw, stride=1, padding=1).numpy()
        fast = measure(lambda: dispatch("conv2d", tx, tw, stride=1, padding=1), repeat=5)
    _naive_conv(out, x, w, 1, 1)
    check(np.allclose(got, out, rtol=1e-3, atol=1e-3), "3.5", "conv2d differs from the loop nest")
    naive = measure(lambda: _naive_conv(out, x, w, 1, 1), repeat=5)
    report(speedup=naive / fast, numba_ms=fast * 1e3, naive_ms=naive * 1e3)


_FIRST_CALL = textwrap.dedent(
    """
    import time
    import numpy as np
    from numba import njit, prange
    import minitorch

    @njit(parallel=True)
    def warm(x):  # start the thread pool outside the timing
        for i in prange(x.size):
            x[i] += 1

    warm(np.zeros(4))
    minitorch.set_backend("numba")
    a = minitorch.rand(64, 64)
    t = time.perf_counter()
    (a @ a).numpy()
    print(time.perf_counter() - t)
    """
)


@benchmark("3.4", points=2, metric="ratio", bands=[(5.0, 1.0), (2.0, 0.5)])
def bench_cached_first_call(report):
    mode, focus = exercises.get_mode()
    with tempfile.TemporaryDirectory() as cache:
        env = dict(
            os.environ,
            NUMBA_CACHE_DIR=cache,
            MINITORCH_MODE=mode,
            MINITORCH_FOCUS=",".join(sorted(focus)),
        )
        times = []
        for _ in range(2):  # first process compiles and writes the cache, second loads it
            run = subprocess.run(
                [sys.executable, "-c", _FIRST_CALL],
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            check(run.returncode == 0, "3.4", "the child process failed", stderr=run.stderr[-800:])
            times.append(float(run.stdout.strip().splitlines()[-1]))
    report(ratio=times[0] / times[1], uncached_s=times[0], cached_s=times[1])
