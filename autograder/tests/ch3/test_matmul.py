"""Graded: the matmul in three stages: loop order (3.4), the register tile (3.5), the blocked kernel (3.6).

Small products go through the backend to the simple kernel (3.4), large ones to
the blocked kernel (3.6), which calls the tile (3.5). The tile is also tested
on its own, called directly on a 4 x 4 block of a larger ``out``.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from numba import njit

import minitorch
from autograder.harness import assert_close, check, graded
from minitorch import exercises
from minitorch.fast import compile as jit
from minitorch.fast.backend import simple_matmul

from .util import data, numba_backend, run, view  # noqa: F401  (numba_backend: autouse)

BATCHES = [((), ()), ((2,), ()), ((), (3,)), ((2,), (2,)), ((2, 1), (1, 3)), ((1,), (2,))]


def _oracle(a, b):
    return np.matmul(a.astype(np.float64), b.astype(np.float64))


# ---------------------------------------------------------------- 3.4 matmul_simple


@graded("3.4", points=1)
@given(
    n=st.integers(1, 9),
    k=st.integers(1, 9),
    m=st.integers(1, 9),
    batch=st.sampled_from(BATCHES),
    seed=st.integers(0, 2**16),
)
def test_matmul_simple_batched_broadcast(n, k, m, batch, seed):
    a, b = data(batch[0] + (n, k), seed), data(batch[1] + (k, m), seed + 1)
    got = run("matmul", minitorch.tensor(a), minitorch.tensor(b))  # small: the simple kernel
    assert_close(got, _oracle(a, b), "3.4", rtol=1e-4, atol=1e-5, a=a, b=b)


@graded("3.4", points=1)
def test_matmul_simple_overwrites_out():
    # called directly on an out full of NaN: every element must be written, a
    # depth of 0 gives zeros, and a transposed operand seen through a view works
    kernel = jit.compiled("3.4", fastmath=True)
    for (bs, n, k, m), seed in [((2, 3, 5, 7), 1), ((1, 4, 0, 3), 2), ((3, 1, 6, 1), 3)]:
        a, b = data((bs, n, k), seed), data((1, k, m), seed + 1)
        out = np.full((bs, n, m), np.nan, dtype=np.float32)
        kernel(out, a, b)
        assert_close(out, _oracle(a, b), "3.4", rtol=1e-4, atol=1e-5, a_shape=a.shape, b=b)
    a, b = data((5, 6), 4), data((7, 6), 5)
    got = run("matmul", minitorch.tensor(a), view(b.T.copy(), "transposed"))
    assert_close(got, _oracle(a, b.T), "3.4", rtol=1e-4, atol=1e-5, a=a, b_transposed=b)


# ---------------------------------------------------------------- 3.5 matmul_tile

_tiles: dict = {}


def _tile():
    impl = exercises.implementation("3.5")
    if impl not in _tiles:
        _tiles[impl] = njit(fastmath=True)(impl)
    return _tiles[impl]


@graded("3.5", points=2)
@given(
    n=st.integers(4, 9),
    m=st.integers(4, 9),
    k=st.integers(0, 13),
    pick=st.tuples(*[st.integers(0, 2**16)] * 4),
    seed=st.integers(0, 2**16),
)
def test_matmul_tile_adds_one_block(n, m, k, pick, seed):
    """
    contract: and touch nothing else (the caller guarantees
    """
    i, j = pick[0] % (n - 3), pick[1] % (m - 3)
    k0 = pick[2] % (k + 1)
    k1 = k0 + pick[3] % (k - k0 + 1)
    a, bt, before = data((n, k), seed), data((m, k), seed + 1), data((n, m), seed + 2)
    out = before.copy()
    _tile()(out, a, bt, i, j, k0, k1)
    want = before.astype(np.float64)
    want[i : i + 4, j : j + 4] += _oracle(a[i : i + 4, k0:k1], bt[j : j + 4, k0:k1].T)
    assert_close(out, want, "3.5", rtol=1e-4, atol=1e-5, out_before=before, a=a, bt=bt,
                 i=i, j=j, k0=k0, k1=k1)  # fmt: skip
    # float64 stays float64: sums of +-(1e8 plus eighths) are exact in float64 in any order,
    # and a float32 sum loses the eighths (its spacing at 1e8 is 8)
    a64 = 1e8 + np.round(a.astype(np.float64) * 8) / 8
    bt64 = np.where(bt > 0, 1.0, -1.0)
    before64 = np.full((n, m), -7.5)
    out = before64.copy()
    _tile()(out, a64, bt64, i, j, k0, k1)
    want = before64.copy()
    want[i : i + 4, j : j + 4] += a64[i : i + 4, k0:k1] @ bt64[j : j + 4, k0:k1].T
    assert_close(out, want, "3.5", rtol=1e-15, atol=0.0, dtype="float64", a=a64, bt=bt64,
                 i=i, j=j, k0=k0, k1=k1)  # fmt: skip


@graded("3.5", points=1)
def test_matmul_tile_in_the_blocked_kernel():
    # the tile as the blocked matmul (reference 3.6) uses it: across k-blocks of 1024
    kernel = jit.composed("3.6", "3.5", "out, a, b")
    for (bs, n, k, m), seed in [((1, 8, 1100, 8), 6), ((2, 36, 40, 36), 8)]:
        a, b = data((bs, n, k), seed), data((1, k, m), seed + 1)
        out = np.empty((bs, n, m), dtype=np.float32)
        kernel(out, a, b)
        assert_close(
            out, _oracle(a, b), "3.5", rtol=1e-4, atol=1e-3, a_shape=a.shape, b_shape=b.shape
        )


# ---------------------------------------------------------------- 3.6 matmul


def _blocked(a, b):
    """The blocked kernel (3.6) called directly: the backend sends only large products there."""
    batch = max(a.shape[0], b.shape[0])
    out = np.full((batch, a.shape[1], b.shape[2]), np.nan, dtype=np.float32)
    jit.composed("3.6", "3.5", "out, a, b")(out, a, b)
    return out


@graded("3.6", points=1)
@given(
    n=st.integers(1, 70),
    k=st.integers(1, 40),
    m=st.integers(1, 70),
    batch=st.sampled_from([(1, 1), (2, 1), (1, 3), (2, 2)]),
    seed=st.integers(0, 2**16),
)
def test_matmul_blocked_batched_broadcast(n, k, m, batch, seed):
    a, b = data((batch[0], n, k), seed), data((batch[1], k, m), seed + 1)
    got = _blocked(a, b)  # out starts as NaN: every element must be written
    assert_close(got, _oracle(a, b), "3.6", rtol=1e-4, atol=1e-4, a_shape=a.shape, b_shape=b.shape)


@graded("3.6", points=1)
def test_matmul_blocked_crosses_block_edges():
    # sizes that are not multiples of the 4 x 4 tile, of the 64-row group or of
    # the 128 x 1024 panel (columns and depth)
    """
    contract: edges: rows and columns left over from the 4 x 4 tiles take a plain dot product per element (over the same k-block).
    """
    for (sa, sb), seed in [
        (((1, 9, 70), (1, 70, 300)), 1),
        (((3, 257, 5), (1, 5, 513)), 3),
        (((1, 6, 1030), (1, 1030, 7)), 5),
        (((2, 130, 33), (2, 33, 131)), 7),
    ]:
        a, b = data(sa, seed), data(sb, seed + 1)
        got = _blocked(a, b)
        assert_close(got, _oracle(a, b), "3.6", rtol=1e-4, atol=1e-3, a_shape=sa, b_shape=sb)


@graded("3.6", points=1)
def test_matmul_uses_the_blocked_kernel_for_large_products():
    # through the backend: a large product reaches 3.6, with a transposed operand
    check(not simple_matmul(160, 160, 160), "3.6", "160^3 should take the blocked kernel")
    a, b = data((160, 160), 9), data((160, 160), 10)
    got = run("matmul", minitorch.tensor(a), view(b.T.copy(), "transposed"))
    assert_close(got, _oracle(a, b.T), "3.6", rtol=1e-4, atol=1e-3, a=a[:2, :4])
