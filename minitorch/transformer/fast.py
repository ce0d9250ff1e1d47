"""Chapter 11's ops on the Numba backend: compiled loops over rows (loaded on first use).

Inputs are made C-contiguous first (a copy only for strided views). The
scatter-add runs on one thread: two ids may name the same row, and a parallel
loop over ids would race on it; the gather and the row ops parallelise over rows.
Non-float inputs fall back to the numpy kernels (both backends share host memory). Ids are
checked before any kernel runs, eager or compiled (`OpDef.check`), never here.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import prange

from ..backends.numpy_backend import prepared_kernel
from ..fast.backend import _floats, runner, threads_for
from ..fusion.rows import CHUNKS, MAX_ROW, pairwise
from ..tensor.data import TensorData
from . import ops


def _c(x: TensorData) -> np.ndarray:
    return np.ascontiguousarray(x.as_numpy_view())


@numba.njit(parallel=True)
def _gather(out, weight, ids):
    for k in prange(ids.size):
        out[k, :] = weight[ids[k], :]


@numba.njit(cache=True)
def _scatter_add(out, grad, ids):
    for k in range(ids.size):
        out[ids[k], :] += grad[k, :]


@numba.njit(parallel=True)
def _layer_norm(out, x, w, b, eps):
    """numpy's kernel (``ops._layer_norm64``) row by row, with its bits: float64 inside,
    its pairwise means (:func:`~minitorch.fusion.rows.pairwise`), the same steps."""
    rows, n = x.shape
    chunks = min(rows, CHUNKS)
    for c in prange(chunks):
        d, sq = np.empty(n, np.float64), np.empty(n, np.float64)
        for r in range(c * rows // chunks, (c + 1) * rows // chunks):
            for j in range(n):
                d[j] = np.float64(x[r, j])
            mean = pairwise(d, n, 0.0) / n
            for j in range(n):
                v = d[j] - mean
                d[j] = v
                sq[j] = v * v
            sd = math.sqrt(pairwise(sq, n, 0.0) / n + eps)
            for j in range(n):
                out[r, j] = d[j] / sd * np.float64(w[j]) + np.float64(b[j])


def _exact(out) -> bool:
    """Can :func:`_layer_norm` give numpy's bits? Not for rows longer than ``MAX_ROW``
    (numpy sums those by halves) nor float16: numpy's kernel runs those."""
    return out.dtype in (np.float32, np.float64) and 1 <= out.shape[-1] <= MAX_ROW


@numba.njit(parallel=True)
def _causal(out, x, fill):
    tq, tk = x.shape[1], x.shape[2]
    for m in prange(x.shape[0]):
        for i in range(tq):
            for j in range(tk):
                out[m, i, j] = x[m, i, j] if j <= i + tk - tq else fill


def prepare_embedding(out, inputs):
    weight, ids = inputs
    if not _floats(out, weight):
        return None
    run, rows = runner(_gather, out.size), ids.size
    shapes = [weight.shape, (rows,)]
    return prepared_kernel("embedding", out, inputs, lambda t, w, i: run(t.reshape(rows, -1), w, i),
                           shapes)  # fmt: skip


def prepare_layer_norm(out, inputs):
    if not _floats(out, *inputs) or not _exact(out):
        return None
    run, n = runner(_layer_norm, out.size), out.shape[-1]
    rows = out.size // n

    def call(t, x, w, b, eps):
        run(t.reshape(rows, n), x, w, b, eps)

    return prepared_kernel("layer_norm", out, inputs, call, [(rows, n), (n,), (n,)])


def prepare_causal_mask(out, inputs):
    if not _floats(out, *inputs):
        return None
    run, lead = runner(_causal, out.size), (-1,) + out.shape[-2:]
    fill_of = out.dtype.type

    def call(t, x, fill):
        run(t.reshape(lead), x, fill_of(fill))

    return prepared_kernel("causal_mask", out, inputs, call, [lead])


def embedding(weight, ids, out):
    if not _floats(out, weight):
        return ops.embedding_numpy(weight, ids, out=out)
    i = _c(ids).reshape(-1)
    result = np.empty((i.size, out.shape[-1]), out.dtype)
    with threads_for(result.size):
        _gather(result, _c(weight), i)
    return TensorData.contiguous(result.reshape(-1), out.shape)


def embedding_grad(grad, ids, out, num_embeddings):
    if not _floats(out, grad):
        return ops.embedding_grad_numpy(grad, ids, out=out, num_embeddings=num_embeddings)
    i = _c(ids).reshape(-1)
    result = np.zeros(out.shape, out.dtype)
    _scatter_add(result, _c(grad).reshape(i.size, out.shape[-1]), i)
    return TensorData.contiguous(result.reshape(-1), out.shape)


def layer_norm(x, weight, bias, out, eps):
    if not _floats(out, x, weight, bias) or not _exact(out):
        return ops.layer_norm_numpy(x, weight, bias, out=out, eps=eps)
    rows = _c(x).reshape(-1, out.shape[-1])
    result = np.empty_like(rows)
    with threads_for(rows.size):
        _layer_norm(result, rows, _c(weight), _c(bias), eps)
    return TensorData.contiguous(result.reshape(-1), out.shape)


def causal_mask(x, out, fill):
    if not _floats(out, x):
        return ops.causal_mask_numpy(x, out=out, fill=fill)
    v = _c(x).reshape((-1,) + out.shape[-2:])
    result = np.empty_like(v)
    with threads_for(v.size):
        _causal(result, v, out.dtype.type(fill))
    return TensorData.contiguous(result.reshape(-1), out.shape)
