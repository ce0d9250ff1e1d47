"""Graded benchmark without a GPU: global-memory reads saved by tiling, counted on the simulator."""

from __future__ import annotations

import numpy as np

from autograder.harness import assert_close, benchmark
from minitorch.cuda.baselines import naive_matmul, tiled_matmul
from minitorch.cuda.traffic import count_traffic

from .util import on_device, rerun_on_simulator


@benchmark("4.5", points=2, metric="read_reduction", bands=[(3.5, 1.0), (2.0, 0.5), (1.3, 0.25)])
def bench_matmul_global_reads(report, request):
    figures = rerun_on_simulator(request)  # on a GPU machine: counted in a child process
    if figures is not None:
        report(**figures)
        return
    n, tile = 16, 4
    rng = np.random.default_rng(2)
    a, b = on_device(rng.standard_normal((n, n))), on_device(rng.standard_normal((n, n)))
    with count_traffic() as naive:
        want = naive_matmul(a, b, block=tile)
    with count_traffic() as tiled:
        got = tiled_matmul(a, b, tile=tile)
    assert_close(got.numpy(), want.numpy(), "4.5", n=n, tile=tile)
    naive_reads = naive.reads(a) + naive.reads(b)
    tiled_reads = tiled.reads(a) + tiled.reads(b)
    report(
        read_reduction=naive_reads / max(tiled_reads, 1),
        naive_reads=naive_reads,
        tiled_reads=tiled_reads,
        tiled_shared_reads=tiled.shared_reads,
    )
