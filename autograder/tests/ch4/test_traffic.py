"""Graded: memory traffic of the kernels, counted per access on the CUDA simulator.

Global memory is slow and shared memory fast: these tests check that each kernel
reads global memory as little as its design promises (see minitorch/cuda/traffic.py).
"""

from __future__ import annotations

import math

import numpy as np

from autograder.harness import assert_close, check, graded
from minitorch.cuda import backend as cb
from minitorch.cuda.traffic import count_traffic

from .util import on_device, rerun_on_simulator

# On a GPU machine each test reruns itself in a child process on the simulator.


@graded("4.1", points=1)
def test_map_reads_and_writes_each_element_once(request):
    """
    contract: Each input element that is needed is read from global memory once per output element
    """
    if rerun_on_simulator(request) is not None:
        return
    x = np.linspace(-1, 1, 150)
    t = on_device(x)
    with count_traffic() as traffic:
        y = t.exp()
    assert_close(y.numpy(), np.exp(x), "4.1", n=150)
    check(
        traffic.reads(t) == 150 and traffic.max_reads_per_element(t) == 1,
        "4.1",
        "each input element should be read from global memory exactly once",
        reads=traffic.reads(t),
        max_per_element=traffic.max_reads_per_element(t),
    )
    check(
        traffic.writes(y) == 150,
        "4.1",
        "each output element should be written once",
        writes=traffic.writes(y),
    )


@graded("4.3", points=2)
def test_block_sum_uses_shared_memory(request):
    """
    contract: Every element of ``a`` is read from global memory exactly once; the additions of step 3 only touch shared memory
    """
    if rerun_on_simulator(request) is not None:
        return
    n = 2 * cb.THREADS * cb.MAX_BLOCKS - 7
    x = np.arange(n, dtype=np.float64) % 13
    t = on_device(x)
    with count_traffic() as traffic:
        s = t.sum()
    assert_close(s.numpy(), x.sum(), "4.3", n=n)
    blocks = min(cb.MAX_BLOCKS, math.ceil(n / cb.THREADS))
    check(
        traffic.reads(t) == n and traffic.max_reads_per_element(t) == 1,
        "4.3",
        "each element should be read from global memory exactly once",
        reads=traffic.reads(t),
        n=n,
    )
    check(
        traffic.shared_writes >= blocks * cb.THREADS and traffic.shared_reads > 0,
        "4.3",
        "the tree reduction should happen in shared memory (cuda.shared.array)",
        shared_reads=traffic.shared_reads,
        shared_writes=traffic.shared_writes,
    )
    # One partial per block, then the final value: no partial sums kept in global memory.
    check(
        traffic.total_global_writes == blocks + 1,
        "4.3",
        "only thread 0 of each block should write its block's sum to global memory",
        global_writes=traffic.total_global_writes,
        expected=blocks + 1,
    )
    most = math.ceil(n / (blocks * cb.THREADS))
    check(
        traffic.max_per_thread("global_reads") <= most + 4,
        "4.3",
        "every thread should load its share (grid-stride), not one thread all of it",
        max_reads_by_one_thread=traffic.max_per_thread("global_reads"),
        fair_share=most,
    )


@graded("4.4", points=1)
def test_reduce_axis_reads_once_and_uses_shared_memory(request):
    """
    contract: then the block combines the ``threads`` values with a tree reduction
    """
    if rerun_on_simulator(request) is not None:
        return
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 2 * cb.REDUCE_THREADS + 1))
    t = on_device(x)
    with count_traffic() as traffic:
        m = t.max(axis=1)
    assert_close(m.numpy(), x.max(axis=1), "4.4", shape=x.shape)
    check(
        traffic.max_reads_per_element(t) == 1 and traffic.reads(t) == x.size,
        "4.4",
        "each element should be read from global memory once",
        reads=traffic.reads(t),
        size=x.size,
    )
    check(
        traffic.shared_writes >= 3 * cb.REDUCE_THREADS and traffic.shared_reads > 0,
        "4.4",
        "the block should combine its threads' values in shared memory",
        shared_reads=traffic.shared_reads,
        shared_writes=traffic.shared_writes,
    )
    check(traffic.writes(m) == 3, "4.4", "one write per output element", writes=traffic.writes(m))


@graded("4.5", points=3)
def test_matmul_reads_each_element_n_over_tile_times(request):
    """
    contract: So each global element is read ``ceil(n / tile)`` or ``ceil(m / tile)`` times, not ``n`` or ``m`` times
    """
    if rerun_on_simulator(request) is not None:
        return
    n, tile = 4 * cb.TILE, cb.TILE
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    ta, tb = on_device(a), on_device(b)
    with count_traffic() as traffic:
        c = ta @ tb
    assert_close(c.numpy(), a @ b, "4.5", n=n)
    most = n // tile
    for name, t in (("a", ta), ("b", tb)):
        check(
            traffic.max_reads_per_element(t) <= most,
            "4.5",
            f"each element of {name} should be read about n / TILE times (tiles in shared memory)",
            n=n,
            tile=tile,
            max_reads_per_element=traffic.max_reads_per_element(t),
            limit=most,
        )
        check(
            traffic.reads(t) <= n * n * most,
            "4.5",
            f"too many global reads of {name}",
            reads=traffic.reads(t),
            limit=n * n * most,
        )
    check(
        traffic.shared_reads >= 2 * n**3,
        "4.5",
        "the products should read their operands from the shared tiles",
        shared_reads=traffic.shared_reads,
        expected_at_least=2 * n**3,
    )
    check(
        traffic.writes(c) == n * n,
        "4.5",
        "each output element should be written once",
        writes=traffic.writes(c),
    )
