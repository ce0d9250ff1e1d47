"""Softmax and logsumexp over rows in three passes with numpy's bits: ``max-autotune``
variants (chapter 9 times them beside the backends' kernels and keeps the fastest).

numpy's softmax makes five passes over memory (max, subtract, exp, sum, divide). Here
the maximum and the subtraction are one Numba pass, numpy's own ``exp`` another, and the
row's sum with the division a third, each in the result's buffer (no temporary). The result is numpy's: a maximum does not depend on
the order (a row with a NaN is NaN, as numpy's), and the sum adds the row in numpy's
pairwise order (:func:`.rows.pairwise`). Rows longer than :data:`.rows.MAX_ROW`, another
axis or another dtype run numpy's steps. Logsumexp (the loss's) is the same three passes:
the shift (the row's maximum where finite, else 0, as numpy's kernel), numpy's ``exp``,
then each row's pairwise sum, whose ``log`` numpy takes before adding the shift back.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..backends.numpy_backend import prepared_kernel
from ..core.conv_ops import _softmax_into as numpy_softmax_into
from ..core.conv_ops import logsumexp_numpy
from ..core.registry import Spec, register_variant
from ..tensor.data import TensorData
from .rows import MAX_ROW, max_lanes, pairwise

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


@njit(error_model="numpy")
def _row_max(row, n):
    # eight running maxima a vector (LLVM leaves a max reduction scalar). They skip a NaN:
    # harmless, a row with a NaN sums to NaN and so is NaN everywhere, as numpy's (whose
    # maximum is the NaN); of +0.0 and -0.0 either may win: x - m is the same for both
    best, start = row[0], 1
    if n >= 8:
        start = n - n % 8
        r0, r1, r2, r3, r4, r5, r6, r7 = max_lanes(row, start)
        best = max(max(max(r0, r1), max(r2, r3)), max(max(r4, r5), max(r6, r7)))
    for j in range(start, n):
        best = max(best, row[j])
    return best


@njit(error_model="numpy")
def _shift(x, e):
    """``e = x - max(x)`` row by row: the row is read twice while it is in cache."""
    for r in range(x.shape[0]):
        row, out = x[r], e[r]
        m = _row_max(row, x.shape[1])
        for j in range(x.shape[1]):
            out[j] = row[j] - m


@njit(error_model="numpy")
def _divide_by_sum(e, zero):
    """Each row of ``e`` divided by its pairwise sum, in place."""
    for r in range(e.shape[0]):
        row = e[r]
        s = pairwise(row, e.shape[1], zero)
        for j in range(e.shape[1]):
            row[j] = row[j] / s


def _softmax_into(target, x, axis):
    n = x.shape[-1] if x.ndim else 1
    if axis % max(x.ndim, 1) != x.ndim - 1 or not 1 < n <= MAX_ROW or x.dtype not in _FLOATS:
        return numpy_softmax_into(target, x, axis)
    out = target.reshape(-1, n)  # every pass writes here: no temporary (2 MiB fresh pages)
    _shift(x.reshape(-1, n), out)
    np.exp(out, out=out)  # numpy's exp: its SIMD bits, which a Numba loop would not give
    _divide_by_sum(out, x.dtype.type(0))


@register_variant("softmax", "rows")
def softmax_rows(x, out, axis):
    result = np.empty(out.shape, out.dtype)
    with np.errstate(all="ignore"):
        _softmax_into(result, np.ascontiguousarray(x.as_numpy_view()), axis)
    return TensorData.from_numpy(result)


softmax_rows.prepare = lambda out, inputs: (
    prepared_kernel("softmax", out, inputs, _softmax_into) if inputs[0].dtype == out.dtype else None
)


@njit(error_model="numpy")
def _finite_shift(x, e, shift, zero):
    """``e = x - s`` with ``s`` the row's maximum if finite, else 0 (kept in ``shift``)."""
    for r in range(x.shape[0]):
        row, out = x[r], e[r]
        m = _row_max(row, x.shape[1])
        s = m if np.isfinite(m) else zero
        shift[r] = s
        for j in range(x.shape[1]):
            out[j] = row[j] - s


@njit(error_model="numpy")
def _row_sums(e, sums, zero):
    for r in range(e.shape[0]):
        sums[r] = pairwise(e[r], e.shape[1], zero)


def _logsumexp_into(target, x, axis, keepdims):
    n = x.shape[-1] if x.ndim else 1
    if axis % max(x.ndim, 1) != x.ndim - 1 or not 1 < n <= MAX_ROW or x.dtype not in _FLOATS:
        d, spec = TensorData.from_numpy(x), Spec(target.shape, target.dtype)
        np.copyto(
            target, logsumexp_numpy(d, out=spec, axis=axis, keepdims=keepdims).as_numpy_view()
        )
        return
    rows, zero = x.reshape(-1, n), x.dtype.type(0)
    e, shift = np.empty_like(rows), np.empty(rows.shape[0], x.dtype)
    _finite_shift(rows, e, shift, zero)
    np.exp(e, out=e)  # numpy's exp, as its kernel
    sums = target.reshape(-1)
    _row_sums(e, sums, zero)
    np.log(sums, out=sums)
    np.add(sums, shift, out=sums)


@register_variant("logsumexp", "rows")
def logsumexp_rows(x, out, axis, keepdims):
    result = np.empty(out.shape, out.dtype)
    with np.errstate(all="ignore"):
        _logsumexp_into(result, np.ascontiguousarray(x.as_numpy_view()), axis, keepdims)
    return TensorData.from_numpy(result)


logsumexp_rows.prepare = lambda out, inputs: (
    prepared_kernel("logsumexp", out, inputs, _logsumexp_into)
    if inputs[0].dtype == out.dtype
    else None
)
