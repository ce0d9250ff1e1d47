"""Chapter 1 benchmarks: views cost nothing, and the contiguous fast path pays."""

import numpy as np

import minitorch as mt
from autograder.harness import benchmark, measure
from minitorch.tensor import loops
from minitorch.tensor.data import TensorData


@benchmark("1.6", points=2, metric="copy_over_view", bands=[(20, 1.0), (5, 0.5)])
def bench_view_is_free(report):
    x = mt.rand(1000, 1000)  # 4 MB of float32
    view = measure(lambda: x.permute(1, 0))
    copy = measure(lambda: x.permute(1, 0).contiguous())
    report(copy_over_view=copy / view, view_us=view * 1e6, copy_us=copy * 1e6)


@benchmark("1.12", points=2, metric="speedup", bands=[(8, 1.0), (3, 0.5)])
def bench_contiguous_fast_path(report):
    n = 4096
    a = TensorData.from_numpy(np.random.default_rng(0).random(n))
    out = TensorData.empty((n,), np.float64)

    def fn(x):
        return x * 0.5 + 1.0

    strided = measure(lambda: loops.tensor_map(fn, out, a), repeat=3, min_time=0.0)
    fast = measure(lambda: loops.map_contiguous(fn, out, a), repeat=5)
    report(
        speedup=strided / fast,
        strided_us_per_elem=strided / n * 1e6,
        fast_us_per_elem=fast / n * 1e6,
    )
