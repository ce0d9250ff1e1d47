"""Shared strategies and gradient checks for the chapter-2 graded tests."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import minitorch
from autograder.harness import assert_close, check
from minitorch.autograd.check import numerical_grad

shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=3)


def values(shape, lo=-2.0, hi=2.0):
    return hnp.arrays(np.float64, shape, elements=st.floats(lo, hi, allow_nan=False, width=64))


def away_from_zero(shape, lo=0.2, hi=2.0):
    """Floats with |x| in [lo, hi] and either sign (no kinks of relu/abs within eps)."""
    return st.tuples(values(shape, lo, hi), hnp.arrays(np.bool_, shape)).map(
        lambda t: np.where(t[1], t[0], -t[0])
    )


def backward_grads(fn, *arrays):
    """Gradients of ``fn(*leaves).sum()`` through ``backward``, as arrays (zeros where none)."""
    leaves = [minitorch.tensor(np.asarray(a, dtype=np.float64), requires_grad=True) for a in arrays]
    fn(*leaves).sum().backward()
    return [
        np.zeros(np.shape(a)) if t.grad is None else t.grad.numpy() for t, a in zip(leaves, arrays)
    ]


def check_against_finite_differences(exercise, fn, *arrays, rtol=1e-5, atol=1e-6, **shown):
    got = backward_grads(fn, *arrays)
    want = numerical_grad(fn, *arrays)
    for i, (g, w) in enumerate(zip(got, want)):
        check(
            g.shape == w.shape,
            exercise,
            f"input {i}: gradient of shape {g.shape}, expected {w.shape}",
            **shown,
        )
        assert_close(g, w, exercise, rtol=rtol, atol=atol, input_index=i, **shown)


def t64(a, requires_grad=False):
    return minitorch.tensor(np.asarray(a, dtype=np.float64), requires_grad=requires_grad)
