"""Graded: the fused softmax (11.4) and layer norm (11.5) CUDA kernels, values and memory traffic.

Without a GPU they run on Numba's CUDA simulator, which counts every global and
shared memory access (``minitorch.cuda.traffic``); on a GPU machine each test
reruns itself on the simulator in a child process (chapter 4's ``rerun_on_simulator``).
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import minitorch
import minitorch.cuda  # noqa: F401  (chooses the simulator before numba.cuda loads)
from autograder.harness import assert_close, check, graded, text
from autograder.tests.ch4.util import on_device, rerun_on_simulator
from minitorch import dispatch
from minitorch.cuda import backend as cb
from minitorch.cuda.traffic import count_traffic
from minitorch.transformer import cuda as tc
from minitorch.transformer.ops import layer_norm_ref


def _softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _shape(data):
    rows = data.draw(st.integers(1, 2 * cb.MAX_BLOCKS + 1))  # more rows than blocks
    cols = data.draw(
        st.sampled_from([1, 3, tc.ROW_THREADS, tc.ROW_THREADS + 5, 3 * tc.ROW_THREADS - 1])
    )
    return rows, cols


@graded("11.4", points=1)
@settings(max_examples=8)
@given(data=st.data())
def test_fused_softmax_values(data, request):
    """contract: Return the body of a fused softmax kernel"""
    if rerun_on_simulator(request) is not None:
        return
    rows, cols = _shape(data)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x = rng.standard_normal((rows, cols)) * data.draw(st.sampled_from([1.0, 300.0]))
    got = dispatch("softmax", on_device(x), axis=-1).numpy()
    assert_close(got, _softmax(x), "11.4", rtol=1e-9, atol=1e-12, shape=x.shape)


@graded("11.4", points=1)
def test_fused_softmax_other_axis_and_float32(request):
    if rerun_on_simulator(request) is not None:
        return
    x = np.random.default_rng(1).standard_normal((3, 5, 2)).astype(np.float32)
    got = dispatch("softmax", on_device(x), axis=1).numpy()
    assert_close(got, _softmax(x.astype(np.float64), axis=1), "11.4", rtol=1e-5, atol=1e-7)
    check(got.dtype == np.float32, "11.4", "float32 in, float32 out")


SMALL = np.float32(np.log(0.9) - 24 * np.log(2.0))


@graded("11.4", points=1)
def test_fused_softmax_sums_in_float32(request):
    # exp(SMALL) is 0.9 * 2**-24, under half a unit in the last place of 1: a float32 sum of 1
    # and two of them, each meeting the 1 alone, is 1, so the maximum's output is exactly 1; a
    # float64 sum keeps them and the output is 1 - 2**-23. Row 0 spreads the terms over three
    # threads (a float64 shared array shows), row 1 gives them to thread 0 (a float64 running
    # sum shows: on the simulator math.exp is a Python float, float64).
    if rerun_on_simulator(request) is not None:
        return
    t = tc.ROW_THREADS
    x = np.full((2, 2 * t + 1), -np.inf, dtype=np.float32)
    x[0, [0, 1, 2]] = x[1, [0, t, 2 * t]] = [0.0, SMALL, SMALL]
    got = dispatch("softmax", on_device(x), axis=-1).numpy()
    check(got.dtype == np.float32, "11.4", f"float32 in should give float32, got {got.dtype}")
    check(bool((got[:, 0] == 1.0).all()), "11.4",
          "float32 rows should be reduced in float32 (shared arrays and sums of dtype)",
          value=got[:, 0], x=x)  # fmt: skip
    assert_close(got, _softmax(x.astype(np.float64)), "11.4", rtol=1e-5, atol=1e-7)


@graded("11.4", points=1)
def test_fused_softmax_subtracts_the_row_max(request):
    """contract: with ``m_r`` the row's maximum
    contract: A row of ``-inf`` gives NaN, as numpy does"""
    # exp overflows past 709: only the row's true maximum keeps every term finite. Row i has
    # 800 in column i and 0 elsewhere, so the maximum sits once in each thread's stride and at
    # each step of the block's reduction.
    if rerun_on_simulator(request) is not None:
        return
    cols = 2 * tc.ROW_THREADS + 3
    x = np.zeros((cols, cols))
    np.fill_diagonal(x, 800.0)
    got = dispatch("softmax", on_device(x), axis=-1).numpy()
    assert_close(got, _softmax(x), "11.4", rtol=1e-9, atol=1e-12, shape=x.shape)
    # every value of a row distinct and 1000 apart: any value but the maximum overflows exp
    # for the elements above it, wherever the reduction looks
    rng = np.random.default_rng(5)
    x = np.stack([rng.permutation(cols) * 1000.0 for _ in range(7)])
    got = dispatch("softmax", on_device(x), axis=-1).numpy()
    assert_close(got, _softmax(x), "11.4", rtol=1e-9, atol=1e-12, shape=x.shape)
    # rows whose values are all large and negative: a maximum started at 0 (not -inf) makes
    # every exp underflow to 0; and a row of -inf gives NaN, as numpy does
    x = np.stack([-1000.0 - rng.permutation(cols) for _ in range(3)] + [np.full(cols, -np.inf)])
    with np.errstate(invalid="ignore"):
        want = _softmax(x)
    got = dispatch("softmax", on_device(x), axis=-1).numpy()
    assert_close(got, want, "11.4", rtol=1e-9, atol=1e-12, rows=text("-1000 - a permutation; -inf"))


@graded("11.4", points=2)
def test_fused_softmax_reads_and_writes_once(request):
    if rerun_on_simulator(request) is not None:
        return
    rows, cols = cb.MAX_BLOCKS + 2, 2 * tc.ROW_THREADS + 3
    x = np.random.default_rng(2).standard_normal((rows, cols))
    tx = on_device(x)
    with count_traffic() as traffic:
        y = dispatch("softmax", tx, axis=-1)
    assert_close(y.numpy(), _softmax(x), "11.4", rtol=1e-9, atol=1e-12)
    check(traffic.reads(tx) == x.size and traffic.max_reads_per_element(tx) == 1, "11.4",
          "each element of x should be read from global memory once (cache the row in shared memory)",
          value=[traffic.reads(tx), traffic.max_reads_per_element(tx)])  # fmt: skip
    check(traffic.writes(y) == x.size, "11.4", "each output element written once",
          value=traffic.writes(y))  # fmt: skip
    check(traffic.total_global_writes == x.size, "11.4",
          "no partial results in global memory", value=traffic.total_global_writes)  # fmt: skip
    check(traffic.shared_reads >= 3 * x.size, "11.4",
          "the max, the sum and the result should read the row from shared memory",
          shared_reads=traffic.shared_reads)  # fmt: skip


@graded("11.5", points=2)
@settings(max_examples=8)
@given(data=st.data())
def test_fused_layer_norm_values(data, request):
    """contract: Return the body of a fused layer-norm kernel
    contract: Same launch as :func:`softmax_kernel`
    """
    if rerun_on_simulator(request) is not None:
        return
    rows, cols = _shape(data)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x = rng.standard_normal((rows, cols)) * data.draw(st.sampled_from([1.0, 100.0])) + 3.0
    w, b = rng.standard_normal(cols), rng.standard_normal(cols)
    eps = data.draw(st.sampled_from([1e-5, 0.5]))
    got = dispatch("layer_norm", on_device(x), on_device(w), on_device(b), eps=eps).numpy()
    assert_close(got, layer_norm_ref(x, w, b, eps), "11.5", rtol=1e-9, atol=1e-9, shape=x.shape)


@graded("11.5", points=1)
def test_fused_layer_norm_3d_float32(request):
    if rerun_on_simulator(request) is not None:
        return
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 7)).astype(np.float32)
    w, b = rng.standard_normal(7).astype(np.float32), rng.standard_normal(7).astype(np.float32)
    got = dispatch("layer_norm", on_device(x), on_device(w), on_device(b)).numpy()
    want = layer_norm_ref(x.astype(np.float64), w, b, 1e-5)
    assert_close(got, want, "11.5", rtol=1e-5, atol=1e-5)
    # float64 rows far from 0 with a small spread: the variance must be taken around the mean
    # (a one-pass sum of squares minus the squared mean loses the spread)
    x = 1e6 + rng.standard_normal((3, tc.ROW_THREADS + 5))
    w, b = np.ones(x.shape[1]), np.zeros(x.shape[1])
    got = dispatch("layer_norm", on_device(x), on_device(w), on_device(b)).numpy()
    assert_close(got, layer_norm_ref(x, w, b, 1e-5), "11.5", rtol=1e-7, atol=1e-7,
                 x=text("1e6 + N(0, 1)"))  # fmt: skip


@graded("11.5", points=1)
def test_fused_layer_norm_sums_in_float32(request):
    """contract: Compute in ``dtype``, as :func:`softmax_kernel` does"""
    # In float32, 2**-26 vanishes wherever it is added (it is under half a unit in the last place
    # of 1 and 2), so the row [1, 1, 2, 2**-26] sums to 4 and its mean is 1: with w = 1 and b = 0
    # the first two outputs are exactly 0. A float64 sum keeps 2**-26 and they are about -5e-9.
    if rerun_on_simulator(request) is not None:
        return
    x = np.array([[1.0, 1.0, 2.0, 2.0**-26], [2.0, 2.0**-26, 1.0, 1.0]], dtype=np.float32)
    w, b = np.ones(4, dtype=np.float32), np.zeros(4, dtype=np.float32)
    got = dispatch("layer_norm", on_device(x), on_device(w), on_device(b)).numpy()
    check(got.dtype == np.float32, "11.5", f"float32 in should give float32, got {got.dtype}")
    zeros = got[[0, 0, 1, 1], [0, 1, 2, 3]]
    check(bool((zeros == 0.0).all()), "11.5",
          "float32 rows should be reduced in float32 (shared arrays and sums of dtype)",
          value=zeros, x=x)  # fmt: skip
    want = layer_norm_ref(x.astype(np.float64), w, b, 1e-5)
    assert_close(got, want, "11.5", rtol=1e-5, atol=1e-5)


@graded("11.5", points=2)
def test_fused_layer_norm_reads_and_writes_once(request):
    if rerun_on_simulator(request) is not None:
        return
    rows, cols = cb.MAX_BLOCKS + 2, 2 * tc.ROW_THREADS + 3
    rng = np.random.default_rng(6)
    x, w, b = (
        rng.standard_normal((rows, cols)),
        rng.standard_normal(cols),
        rng.standard_normal(cols),
    )
    tx, tw, tb = on_device(x), on_device(w), on_device(b)
    with count_traffic() as traffic:
        y = dispatch("layer_norm", tx, tw, tb)
    assert_close(y.numpy(), layer_norm_ref(x, w, b, 1e-5), "11.5", rtol=1e-9, atol=1e-9)
    check(traffic.reads(tx) == x.size and traffic.max_reads_per_element(tx) == 1, "11.5",
          "each element of x should be read from global memory once (cache the row in shared memory)",
          value=[traffic.reads(tx), traffic.max_reads_per_element(tx)])  # fmt: skip
    check(traffic.reads(tw) <= x.size and traffic.reads(tb) <= x.size, "11.5",
          "weight and bias at most once per output element",
          reads_w=traffic.reads(tw), reads_b=traffic.reads(tb))  # fmt: skip
    check(traffic.writes(y) == x.size and traffic.total_global_writes == x.size, "11.5",
          "each output element written once, nothing else", value=traffic.total_global_writes)  # fmt: skip
    check(traffic.shared_writes >= 2 * rows * tc.ROW_THREADS, "11.5",
          "the two reductions should go through shared memory", shared_writes=traffic.shared_writes)  # fmt: skip
