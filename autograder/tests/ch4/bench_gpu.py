"""Graded benchmarks on a real GPU (left out of the total without one, ``needs="gpu"``).

Times are taken with CUDA events after a warm-up, as medians of several runs:
launches are asynchronous, so host timers would measure only the queueing, and
device time is not slowed by load on the host. Each benchmark checks the
answer of what it timed against numpy before reporting a figure.
"""

from __future__ import annotations

import statistics

import numpy as np
import pytest

import minitorch
from autograder.harness import assert_close, benchmark
from minitorch.cuda import backend as cb

N = 1 << 24  # elements of the bandwidth tests (64 MiB per float32 array)


def _need_gpu():
    if cb.SIMULATOR:
        pytest.skip("no GPU: the simulator has no timing")


def cuda_seconds(fn, repeat: int = 7, warmup: int = 2) -> float:
    """Median seconds of ``fn()`` on the device, timed with CUDA events."""
    for _ in range(warmup):
        fn()
    cb.cuda.synchronize()
    samples = []
    for _ in range(repeat):
        start, end = cb.cuda.event(), cb.cuda.event()
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(cb.cuda.event_elapsed_time(start, end) / 1e3)
    return statistics.median(samples)


def _copy_bandwidth(src, dst) -> float:
    """Bytes per second of a device-to-device copy (read + write), the card's practical peak."""
    t = cuda_seconds(lambda: dst.copy_to_device(src))
    return 2 * src.nbytes / t


@benchmark(
    "4.1", points=2, metric="bandwidth_fraction", bands=[(0.5, 1.0), (0.25, 0.5)], needs="gpu"
)
def bench_map_bandwidth(report):
    _need_gpu()
    x = minitorch.rand(N).to("cuda")
    copy_bw = _copy_bandwidth(x._data.storage, cb.cuda.device_array(N, dtype=np.float32))
    t = cuda_seconds(lambda: x.exp())
    sample = slice(0, N, 4099)  # the answer checked at a spread of elements
    assert_close(x.exp().numpy()[sample], np.exp(x.numpy()[sample]), "4.1", rtol=1e-5)
    map_bw = 2 * N * 4 / t
    report(bandwidth_fraction=map_bw / copy_bw, map_gb_s=map_bw / 1e9, copy_gb_s=copy_bw / 1e9)


@benchmark(
    "4.2", points=2, metric="bandwidth_fraction", bands=[(0.5, 1.0), (0.25, 0.5)], needs="gpu"
)
def bench_zip_bandwidth(report):
    _need_gpu()
    x, y = minitorch.rand(N).to("cuda"), minitorch.rand(N).to("cuda")
    copy_bw = _copy_bandwidth(x._data.storage, cb.cuda.device_array(N, dtype=np.float32))
    t = cuda_seconds(lambda: x + y)
    sample = slice(0, N, 4099)
    assert_close((x + y).numpy()[sample], x.numpy()[sample] + y.numpy()[sample], "4.2")
    zip_bw = 3 * N * 4 / t
    report(bandwidth_fraction=zip_bw / copy_bw, zip_gb_s=zip_bw / 1e9, copy_gb_s=copy_bw / 1e9)


@benchmark(
    "4.5", points=3, metric="fraction_of_cublas", bands=[(0.1, 1.0), (0.03, 0.5)], needs="gpu"
)
def bench_matmul_vs_cublas(report):
    _need_gpu()
    cupy = pytest.importorskip("cupy", reason="cupy (cuBLAS) is not installed: no vendor baseline")
    n = 1024
    rng = np.random.default_rng(0)
    a, b = (
        rng.standard_normal((n, n), dtype=np.float32),
        rng.standard_normal((n, n), dtype=np.float32),
    )
    ta, tb = minitorch.tensor(a).to("cuda"), minitorch.tensor(b).to("cuda")
    ca, cb_ = cupy.asarray(a), cupy.asarray(b)
    assert_close((ta @ tb).numpy(), a @ b, "4.5", rtol=1e-3, atol=1e-2)
    ours = cuda_seconds(lambda: ta @ tb)
    vendor = cuda_seconds(lambda: ca @ cb_)
    report(
        fraction_of_cublas=vendor / ours,
        ours_ms=ours * 1e3,
        cublas_ms=vendor * 1e3,
        ours_gflops=2 * n**3 / ours / 1e9,
    )
