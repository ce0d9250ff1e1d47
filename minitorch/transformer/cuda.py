"""Chapter 11 on the ``cuda`` backend: fused softmax and layer norm (exercises 11.4, 11.5) and
the gather, scatter-add and causal mask kernels (loaded with the cuda backend, on the simulator
without a GPU).

Softmax written with chapter 4's kernels is five launches (max, subtract, exp,
sum, divide), each reading its input from global memory and writing a result
there: about five reads and four writes per element. A *fused* kernel gives a
row to one block, loads it into shared memory once, reduces the maximum and the
sum in shared memory and writes each result once: one read and one write per
element. ``minitorch.cuda.traffic`` counts both on the simulator (see the tests
in ``autograder/tests/ch11/test_fused.py``).

A row longer than a block caches (``MAX_COLS``) goes to chapter 4's softmax of any row
length (:mod:`minitorch.cuda.rows`), and layer norm to a kernel written the same way
(a thread or a block per row, sums in the output's dtype), which also takes mixed dtypes.
Under ``backend.TUNED`` (a real GPU) softmax and layer norm of any row length take the tuned
kernels (the online softmax of :mod:`minitorch.cuda.rows`, a Welford layer norm here).
"""

from __future__ import annotations

import math  # math.exp and math.sqrt inside kernel bodies

import numpy as np

from ..cuda import backend as cb  # first: it chooses the simulator before numba.cuda loads
from ..cuda import lowering
from ..cuda import reduce as fr
from ..cuda import rows as cr
from ..cuda.reduce import FULL, WARP

# isort: split
import numba
from numba import cuda

from ..exercises import exercise
from ..profiler.core import launch
from ..tensor.data import TensorData
from ..tensor.indexing import strides_from_shape

# Threads per block of the row kernels (a power of two: the tree reductions halve it)
# and the longest row a block caches in shared memory.
ROW_THREADS = 16 if cb.SIMULATOR else 128
MAX_COLS = 256 if cb.SIMULATOR else 2048
u64 = numba.uint64  # a position that cannot be negative: Numba wraps no unsigned index


@exercise("11.4")
def softmax_kernel(threads: int, max_cols: int, dtype):
    """Return the body of a fused softmax kernel: ``kernel(out, x, rows, cols)``.

    ``x`` and ``out`` are contiguous ``(rows, cols)`` matrices of ``dtype``
    (``numba.float32`` or ``numba.float64``) stored as 1-D device arrays;
    ``out[r, j] = exp(x[r, j] - m_r) / sum_j exp(x[r, j] - m_r)``
    with ``m_r`` the row's maximum. The launch has ``threads`` threads per
    block (a power of two) and fewer blocks than rows: block ``b`` handles rows
    ``b, b + gridDim.x, ...``; its threads split the row's columns
    (``j = threadIdx.x, threadIdx.x + threads, ...``). ``cols <= max_cols``.

    The point is memory traffic. Per row:

    * read each element of ``x`` from global memory **once**, into a row
      cache ``cuda.shared.array(max_cols, dtype)``;
    * reduce the maximum, then the sum of exponentials, across the block in a
      ``cuda.shared.array(threads, dtype)`` (a tree: ``cuda.syncthreads()``
      between levels);
    * write each element of ``out`` once.

    Everything is in ``dtype``, as in chapter 4's reductions (consumer GPUs run
    float64 at 1/32-1/64 of the float32 rate): start the maximum at
    ``dtype(-math.inf)`` and the sum at ``dtype(0)``, since a literal is float64 in
    Numba; ``math.exp`` of a float32 is float32 on the device.

    A row of ``-inf`` gives NaN, as numpy does. Sync before the next row
    overwrites the shared arrays.

    Example (what the backend does with it)::

        k = cuda.jit(softmax_kernel(16, 256, numba.float32))
        k[4, 16](out, x, rows, cols)
    """
    raise NotImplementedError("Exercise 11.4: softmax_kernel")


@exercise("11.5")
def layer_norm_kernel(threads: int, max_cols: int, dtype):
    """Return the body of a fused layer-norm kernel: ``kernel(out, x, w, b, rows, cols, eps)``.

    ``x`` and ``out`` are contiguous ``(rows, cols)`` matrices (1-D device
    arrays), ``w`` and ``b`` have ``cols`` elements, all of ``dtype`` (``numba.float32``
    or ``numba.float64``), and so is the scalar ``eps``:
    ``out[r, j] = (x[r, j] - mean_r) / sqrt(var_r + eps) * w[j] + b[j]``, with
    the row's mean and its variance without Bessel's correction.
    Same launch as :func:`softmax_kernel`: ``threads`` threads per block, a
    block per row in a grid-stride loop over rows, ``cols <= max_cols``.

    Traffic: each element of ``x`` is read from global memory once (cache the
    row in shared memory), each element of ``out`` written once, ``w`` and
    ``b`` read at most once per output element; the two reductions (the
    sum, then the sum of squared deviations) go through shared memory.

    Compute in ``dtype``, as :func:`softmax_kernel` does: shared arrays and sums of
    ``dtype``, and divide by ``dtype(cols)``, not ``cols`` (a float32 divided by an
    int64 is float64 in Numba), ``dtype(1) / math.sqrt(...)``, not ``1.0 / ...``.

    Example::

        k = cuda.jit(layer_norm_kernel(16, 256, numba.float32))
        k[4, 16](out, x, w, b, rows, cols, np.float32(1e-5))
    """
    raise NotImplementedError("Exercise 11.5: layer_norm_kernel")


# ---------------------------------------------------------------- launching the row kernels


def _contiguous(x: TensorData) -> TensorData:
    return x if x.is_contiguous() and x.offset == 0 else cb._BACKEND.copy(x)


def _moved_last(x: TensorData, axis: int) -> TensorData:
    order = [d for d in range(x.ndim) if d != axis] + [axis]
    view = TensorData(
        x.storage,
        tuple(x.shape[d] for d in order),
        tuple(x.strides[d] for d in order),
        x.offset,
    )
    return _contiguous(view)


def _blocks(rows: int) -> int:
    return max(1, min(cb.MAX_BLOCKS, rows))


def softmax(x, out, axis):
    if cr.tuned_for(x, out):  # a real GPU: the online softmax of any row length
        return cr.online(x, out, axis, log=False)
    rows_shape = tuple(n for d, n in enumerate(x.shape) if d != axis) + (x.shape[axis],)
    cols = x.shape[axis]
    if cols > MAX_COLS:  # longer than a block caches: chapter 4's softmax, any row length
        return cr.softmax(x, out, axis)
    src = _moved_last(x, axis)
    result = cb._empty(rows_shape, out.dtype)
    rows = result.size // cols if cols else 0
    if result.size:
        k = cb.compiled("11.4", ROW_THREADS, MAX_COLS, cb.numba_type(out.dtype))
        launch(k, _blocks(rows), ROW_THREADS, result.storage, src.storage, rows, cols,
               name="softmax")  # fmt: skip
    if axis == x.ndim - 1:
        return result
    back = list(range(x.ndim - 1))
    back.insert(axis, x.ndim - 1)
    strides = strides_from_shape(rows_shape)
    view = TensorData(result.storage, out.shape, tuple(strides[d] for d in back), 0)
    return cb._BACKEND.copy(view)


def layer_norm(x, weight, bias, out, eps):
    cols = out.shape[-1]
    same = all(t.dtype == out.dtype for t in (x, weight, bias))
    if cb.TUNED and same and out.dtype.name in ("float32", "float64"):
        return layer_norm_tuned(x, weight, bias, out, eps)
    if cols > MAX_COLS or not same:
        return layer_norm_rows(x, weight, bias, out, eps)
    src, w, b = (_contiguous(t) for t in (x, weight, bias))
    result = cb._empty(out.shape, out.dtype)
    rows = result.size // cols
    if rows:
        k = cb.compiled("11.5", ROW_THREADS, MAX_COLS, cb.numba_type(out.dtype))
        launch(k, _blocks(rows), ROW_THREADS, result.storage, src.storage, w.storage, b.storage,
               rows, cols, out.dtype.type(eps), name="layer_norm")  # fmt: skip
    return result


def _layer_norm_kernel(dtype, block):
    nbtype, size = cb.numba_type(dtype), cr.REDUCE_CACHE[block]

    def kernel(out, x, lead_shape, lead_strides, offset, step, w, w_step, w_offset, b, b_step,
               b_offset, nrows, cols, n, eps, zero):  # fmt: skip
        cache = cuda.shared.array(size, nbtype)
        r, rstep, t, nt = cr.lanes(block)
        while r < nrows:
            base = cr.row_start(r, lead_shape, lead_strides, offset)
            s = zero
            for j in range(t, cols, nt):
                s += x[base + j * step]
            mean = cr.tree(cache, t, nt, s, cr.SUM) / n
            q = zero
            for j in range(t, cols, nt):
                d = x[base + j * step] - mean
                q += d * d
            sd = math.sqrt(cr.tree(cache, t, nt, q, cr.SUM) / n + eps)
            for j in range(t, cols, nt):
                y = (x[base + j * step] - mean) / sd
                out[r * cols + j] = y * w[w_offset + j * w_step] + b[b_offset + j * b_step]
            r += rstep

    return kernel


def layer_norm_rows(x, weight, bias, out, eps):
    """Layer norm of rows of any length and mixed input dtypes, in the output's dtype (the
    fused exercise caches a row in shared memory and takes one dtype)."""
    result = cb._empty(out.shape, out.dtype)
    cols, dtype = out.shape[-1], out.dtype.type
    nrows = result.size // cols
    cr.launch_rows(_layer_norm_kernel, nrows, cols, out.dtype, result.storage, x.storage,
                   *cr.rows_of(x, x.ndim - 1), weight.storage, weight.strides[0], weight.offset,
                   bias.storage, bias.strides[0], bias.offset, nrows, cols, dtype(cols),
                   dtype(eps), dtype(0), name="layer_norm")  # fmt: skip
    return result


# ---------------------------------------------------------------- tuned layer norm
# Under ``backend.TUNED`` (a real GPU): a warp or a block per row (reduce.row_launch), the
# mean and the sum of squared deviations in one pass (Welford's update per element, Chan's
# rule to join lanes through warp shuffles) of the row less its first element: a row of large
# values with a small spread keeps its digits without a second reading pass; a second pass
# writes the row.


@cuda.jit(device=True)
def chan(n, mean, m2, n2, mean2, m22):
    """(count, mean, sum of squared deviations) of two parts joined."""
    if n2 == n2 - n2:  # the other part is empty (a literal 0 would widen float32)
        return n, mean, m2
    if n == n - n:
        return n2, mean2, m22
    total = n + n2
    d = mean2 - mean
    w = n2 / total
    return total, mean + d * w, m2 + m22 + d * d * n * w


@cuda.jit(device=True)
def chan_lanes(n, mean, m2, per_warp, slots):
    """``chan`` over a row's lanes (its warp, or its block through ``slots``, 3 x 32 shared
    values); every lane gets lane 0's result."""
    t = cuda.threadIdx.x
    lane, zero = t % WARP, n - n
    for rnd in range(2 - per_warp):  # a warp: once; a block: its warps, then their results
        d = WARP // 2
        while d > 0:
            n2 = cuda.shfl_down_sync(FULL, n, d)
            mean2 = cuda.shfl_down_sync(FULL, mean, d)
            m22 = cuda.shfl_down_sync(FULL, m2, d)
            n, mean, m2 = chan(n, mean, m2, n2, mean2, m22)
            d //= 2
        n = cuda.shfl_sync(FULL, n, 0)
        mean, m2 = cuda.shfl_sync(FULL, mean, 0), cuda.shfl_sync(FULL, m2, 0)
        if rnd == 0 and not per_warp:
            if lane == 0:
                w = t // WARP
                slots[0, w], slots[1, w], slots[2, w] = n, mean, m2
            cuda.syncthreads()
            n, mean, m2 = zero, zero, zero
            if lane < cuda.blockDim.x // WARP:
                n, mean, m2 = slots[0, lane], slots[1, lane], slots[2, lane]
            cuda.syncthreads()  # all read before the next row writes
    return n, mean, m2


def _welford_kernel(dtype, per_warp):
    nbtype, shape = cb.numba_type(dtype), (3, WARP)  # a shared array's shape: a constant

    def kernel(out, x, lead_shape, lead_strides, offset, step, w, w_step, w_offset, b, b_step,
               b_offset, nrows, cols, eps, zero, one):  # fmt: skip
        slots = cuda.shared.array(shape, nbtype)
        r, rstep, first, stride = fr.groups(per_warp)
        while r < nrows:
            base = cr.row_start(r, lead_shape, lead_strides, offset)
            shift = x[base]  # x - shift is exact near it: a large mean costs no digits
            n, mean, m2 = zero, zero, zero
            for j in range(first, cols, stride):  # unsigned positions: no wraparound test
                v = x[u64(base + j * step)] - shift
                n += one
                d = v - mean
                mean += d / n
                m2 += d * (v - mean)
            n, mean, m2 = chan_lanes(n, mean, m2, per_warp, slots)
            rstd = one / math.sqrt(m2 / n + eps)
            for j in range(first, cols, stride):
                y = (x[u64(base + j * step)] - shift - mean) * rstd
                wj, bj = w[u64(w_offset + j * w_step)], b[u64(b_offset + j * b_step)]
                out[u64(r * cols + j)] = y * wj + bj
            r += rstep

    return kernel


def layer_norm_tuned(x, weight, bias, out, eps):
    """Layer norm of rows of any length and layout (all inputs of the output's dtype)."""
    result = cb._empty(out.shape, out.dtype)
    cols, dtype = out.shape[-1], out.dtype.type
    nrows = result.size // cols if cols else 0
    if nrows:
        fr.row_launch(_welford_kernel, (out.dtype,), nrows, cols, result.storage, x.storage,
                      *cr.rows_of(x, x.ndim - 1), weight.storage, weight.strides[0], weight.offset,
                      bias.storage, bias.strides[0], bias.offset, nrows, cols, dtype(eps),
                      dtype(0), dtype(1), name="layer_norm")  # fmt: skip
    return result


# ---------------------------------------------------------------- gather, scatter-add, mask


def _gather(out, weight, ids, n, cols):
    i = cuda.grid(1)
    while i < n:
        out[i] = weight[ids[i // cols] * cols + i % cols]
        i += cuda.gridsize(1)


def _scatter_add(out, grad, ids, n, cols):
    i = cuda.grid(1)
    while i < n:
        cuda.atomic.add(out, ids[i // cols] * cols + i % cols, grad[i])  # two ids may share a row
        i += cuda.gridsize(1)


def _causal(out, x, n, tq, tk, fill):
    e = cuda.grid(1)
    while e < n:
        i, j = (e // tk) % tq, e % tk
        out[e] = x[e] if j <= i + tk - tq else fill
        e += cuda.gridsize(1)


def _launch(fn, n, *args, name):
    launch(cb.own_kernel(fn), cb._blocks(n, cb.THREADS), cb.THREADS, *args, name=name)


def embedding(weight, ids, out):
    result = cb._empty(out.shape, out.dtype)
    if result.size:
        w, i = _contiguous(weight), _contiguous(ids)
        _launch(_gather, result.size, result.storage, w.storage, i.storage, result.size,
                out.shape[-1], name="embedding")  # fmt: skip
    return result


def embedding_grad(grad, ids, out, num_embeddings):
    result = cb.fill(out.shape, out.dtype, 0)
    if grad.size:
        g, i = _contiguous(grad), _contiguous(ids)
        _launch(_scatter_add, g.size, result.storage, g.storage, i.storage, g.size,
                out.shape[-1], name="embedding_grad")  # fmt: skip
    return result


def causal_mask(x, out, fill):
    result = cb._empty(out.shape, out.dtype)
    if result.size:
        src = _contiguous(x)
        tq, tk = out.shape[-2:]
        _launch(_causal, result.size, result.storage, src.storage, result.size, tq, tk,
                out.dtype.type(fill), name="causal_mask")  # fmt: skip
    return result


# What the row kernels compute in on a GPU (``python -m minitorch.cuda.lowering`` with this module).
_ROW = numba.int64


@lowering.register("11.4 softmax_kernel", ("float32",))
def _lowered_softmax(t):
    return softmax_kernel(ROW_THREADS, MAX_COLS, t), (t[::1], t[::1], _ROW, _ROW)


@lowering.register("11.5 layer_norm_kernel", ("float32",))
def _lowered_layer_norm(t):
    body = layer_norm_kernel(ROW_THREADS, MAX_COLS, t)
    return body, (t[::1], t[::1], t[::1], t[::1], _ROW, _ROW, t)


for _block, _how in ((False, "a thread"), (True, "a block")):

    @lowering.register(f"rows layer_norm ({_how} per row)", ("float32",))
    def _(t, block=_block):
        body, meta = _layer_norm_kernel(np.dtype(str(t)), block), _ROW[::1]
        rows = (meta, meta, _ROW, _ROW)
        return body, (t[::1], t[::1], *rows, t[::1], _ROW, _ROW, t[::1], _ROW, _ROW, _ROW, _ROW,
                      t, t, t)  # fmt: skip


for _warp, _how in ((True, "a warp"), (False, "a block")):

    @lowering.register(f"tuned layer_norm ({_how} per row)", ("float32",))
    def _(t, per_warp=_warp):
        body, meta = _welford_kernel(np.dtype(str(t)), per_warp), _ROW[::1]
        return body, (t[::1], t[::1], meta, meta, _ROW, _ROW, t[::1], _ROW, _ROW, t[::1], _ROW,
                      _ROW, _ROW, _ROW, t, t, t)  # fmt: skip


__all__ = ["MAX_COLS", "ROW_THREADS", "layer_norm_kernel", "softmax_kernel"]
