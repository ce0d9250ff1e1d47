"""Graded: the blocked, batched matmul (3.4) on the numba backend."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import minitorch
from autograder.harness import assert_close, graded

from .util import data, numba_backend, run, view  # noqa: F401  (numba_backend: autouse)

BATCHES = [((), ()), ((2,), ()), ((), (3,)), ((2,), (2,)), ((2, 1), (1, 3)), ((1,), (2,))]


@graded("3.4", points=3)
@given(
    n=st.integers(1, 9),
    k=st.integers(1, 9),
    m=st.integers(1, 9),
    batch=st.sampled_from(BATCHES),
    seed=st.integers(0, 2**16),
)
def test_matmul_batched_broadcast(n, k, m, batch, seed):
    a, b = data(batch[0] + (n, k), seed), data(batch[1] + (k, m), seed + 1)
    got = run("matmul", minitorch.tensor(a), minitorch.tensor(b))
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    assert_close(got, want, "3.4", rtol=1e-4, atol=1e-5, a=a, b=b)


@graded("3.4", points=2)
def test_matmul_crosses_block_edges_and_views():
    # sizes that are not multiples of the 4 x 4 tile or of the 128 x 1024 panel
    # (columns and depth), and a transposed operand
    a, b = data((9, 70), 1), data((300, 70), 2)
    got = run("matmul", minitorch.tensor(a), view(b.T.copy(), "transposed"))
    assert_close(got, a.astype(np.float64) @ b.T, "3.4", rtol=1e-4, atol=1e-4, a=a[:2, :4])
    a, b = data((3, 257, 5), 3), data((5, 513), 4)
    got = run("matmul", minitorch.tensor(a), minitorch.tensor(b))
    assert_close(got, a.astype(np.float64) @ b, "3.4", rtol=1e-4, atol=1e-4, a=a[0, :2])
    a, b = data((6, 1030), 5), data((1030, 7), 6)
    got = run("matmul", minitorch.tensor(a), minitorch.tensor(b))
    assert_close(got, a.astype(np.float64) @ b, "3.4", rtol=1e-4, atol=1e-3, a=a[:2, :4])
