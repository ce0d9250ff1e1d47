"""Chapter 3's row ops on the ``cuda`` backend: softmax, logsumexp and argmax, over any axis
and rows of any length.

A *row* is the line of elements along the op's axis, read in place through the input's
strides (no transposing copy). How a row is reduced depends on its length:

* a row of at most ``SHORT_ROW`` elements takes one thread, which folds it in registers:
  no shared memory and no ``syncthreads`` (on the simulator each one costs milliseconds
  per block; on a GPU a block per short row would leave most of its threads idle);
* a longer row takes a block (a block-stride loop over rows): each thread folds the
  elements ``t, t + threads, ...``, then the block combines the partial results in a tree
  in shared memory typed with the op's dtype, so float32 stays float32.

Chapter 11 replaces softmax with its fused kernel (exercise 11.4) where a row fits in shared
memory and calls :func:`softmax` here otherwise; its long-row layer norm reuses these helpers.
Under ``backend.TUNED`` (a real GPU) softmax and logsumexp take the online kernel below.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import cuda

from ..core.instrument import launch
from ..core.registry import get_op, register_kernel
from ..tensor.data import TensorData
from . import backend as cb
from . import lowering
from . import reduce as fr
from .device import MAX_DIMS, index_to_position, to_index
from .reduce import FULL, WARP

SHORT_ROW = 256 if cb.SIMULATOR else 32  # longest row that one thread folds alone
SUM, MAX = 0, 1  # the folds of tree()
REDUCE_CACHE = {
    True: cb.REDUCE_THREADS,
    False: 1,
}  # a kernel's shared cache: a block per row or not


@cuda.jit(device=True)
def nan_max(a, b):
    """numpy's maximum: NaN wins, from either side."""
    return b if b > a or b != b else a


@cuda.jit(device=True)
def row_start(r, lead_shape, lead_strides, offset):
    """Storage position of element 0 of row ``r`` (rows are numbered row-major over the lead dims)."""
    if len(lead_shape) == 1:  # the usual case (rows_of merges dims): no int64 division,
        return offset + r * lead_strides[0]  # which a GPU runs as a loop of dozens of instructions
    index = cuda.local.array(MAX_DIMS, numba.int64)
    to_index(r, lead_shape, index)
    return index_to_position(index, lead_strides, offset)


@cuda.jit(device=True)
def lanes(block):
    """(first row, row step, first column, column step) of this thread."""
    if block:
        return cuda.blockIdx.x, cuda.gridDim.x, cuda.threadIdx.x, cuda.blockDim.x
    return cuda.grid(1), cuda.gridsize(1), 0, 1


@cuda.jit(device=True)
def tree(cache, t, n, v, fold):
    """Combine the values ``v`` of a block's ``n`` threads (a power of two) with ``fold`` (SUM
    or MAX); every thread gets the result. With ``n == 1`` (a thread per row) it is ``v``."""
    if n == 1:
        return v
    cache[t] = v
    step = n // 2
    while step > 0:
        cuda.syncthreads()
        if t < step:
            if fold == SUM:
                cache[t] += cache[t + step]
            else:
                cache[t] = nan_max(cache[t], cache[t + step])
        step //= 2
    cuda.syncthreads()
    result = cache[0]
    cuda.syncthreads()  # nobody refills the cache before everyone has read it
    return result


def rows_of(x: TensorData, axis: int, like: TensorData | None = None) -> tuple:
    """Kernel arguments for ``x``'s rows along ``axis``: (lead shape, lead strides, offset, stride).

    The lead dims (all but ``axis``) are merged where their strides allow it, in ``x`` and in
    ``like`` (a tensor of the same shape whose rows the kernel numbers alike), so that a
    contiguous tensor's rows have one lead dim and ``row_start`` divides nothing."""
    shape, strides = [], []
    for d in (d for d in range(x.ndim) if d != axis and x.shape[d] != 1):
        n, both = x.shape[d], (x,) if like is None else (x, like)
        if shape and all(strides[-1][i] == t.strides[d] * n for i, t in enumerate(both)):
            shape[-1] *= n
            strides[-1] = [t.strides[d] for t in both]
        else:
            shape.append(n)
            strides.append([t.strides[d] for t in both])
    return (cb.meta(tuple(shape) or (1,)), cb.meta(tuple(s[0] for s in strides) or (0,)),
            x.offset, x.strides[axis])  # fmt: skip


def count_rows(x: TensorData, axis: int) -> int:
    return math.prod(n for d, n in enumerate(x.shape) if d != axis)


def launch_rows(builder, nrows: int, cols: int, dtype, *args, name: str) -> None:
    """Launch ``builder(dtype, block)``'s kernel over ``nrows`` rows of ``cols`` elements."""
    if not nrows:
        return
    block = cols > SHORT_ROW
    kernel = cb.own_kernel(builder, np.dtype(dtype), block)
    if block:  # a power of two for the tree, no more than the row needs
        threads = min(cb.REDUCE_THREADS, 1 << (cols - 1).bit_length())
        grid = min(cb.MAX_BLOCKS, nrows)
    else:
        threads = min(cb.THREADS, nrows)
        grid = cb._blocks(nrows, threads)
    launch(kernel, grid, threads, *args, name=name)


# ---------------------------------------------------------------- softmax, logsumexp


def _softmax_kernel(dtype, block):
    nbtype, size = cb.numba_type(dtype), REDUCE_CACHE[block]

    def kernel(out, o_strides, o_step, x, lead_shape, lead_strides, offset, step, rows, cols,
               zero, lowest):  # fmt: skip
        cache = cuda.shared.array(size, nbtype)
        r, rstep, t, nt = lanes(block)
        while r < rows:
            base = row_start(r, lead_shape, lead_strides, offset)
            obase = row_start(r, lead_shape, o_strides, 0)
            m = lowest
            for j in range(t, cols, nt):
                m = nan_max(m, x[base + j * step])
            m = tree(cache, t, nt, m, MAX)
            s = zero
            for j in range(t, cols, nt):
                s += math.exp(x[base + j * step] - m)
            s = tree(cache, t, nt, s, SUM)
            for j in range(t, cols, nt):
                out[obase + j * o_step] = math.exp(x[base + j * step] - m) / s
            r += rstep

    return kernel


def softmax(x: TensorData, out, axis: int) -> TensorData:
    """numpy's softmax along ``axis`` (a NaN or +inf in a row, or a row of -inf, gives NaN)."""
    if tuned_for(x, out):
        return online(x, out, axis, log=False)
    result = cb._empty(out.shape, out.dtype)
    _, o_strides, _, o_step = rows_of(result, axis, like=x)
    nrows, cols = count_rows(x, axis), x.shape[axis]
    launch_rows(_softmax_kernel, nrows if result.size else 0, cols, out.dtype,
                result.storage, o_strides, o_step, x.storage, *rows_of(x, axis, like=result),
                nrows, cols, out.dtype.type(0), out.dtype.type(-np.inf),
                name="softmax")  # fmt: skip
    return result


def _logsumexp_kernel(dtype, block):
    nbtype, size = cb.numba_type(dtype), REDUCE_CACHE[block]

    def kernel(out, x, lead_shape, lead_strides, offset, step, rows, cols, zero, lowest):
        cache = cuda.shared.array(size, nbtype)
        r, rstep, t, nt = lanes(block)
        while r < rows:
            base = row_start(r, lead_shape, lead_strides, offset)
            m = lowest
            for j in range(t, cols, nt):
                m = nan_max(m, x[base + j * step])
            m = tree(cache, t, nt, m, MAX)
            if math.isfinite(m):  # the same m in every thread of a block: a uniform branch
                s = zero
                for j in range(t, cols, nt):
                    s += math.exp(x[base + j * step] - m)
                m += math.log(tree(cache, t, nt, s, SUM))  # s >= 1: its maximum gives exp(0)
            # else numpy's answer is m: NaN, +inf (a +inf element) or -inf (a row of -inf)
            if t == 0:
                out[r] = m
            r += rstep

    return kernel


def _per_row(builder, x: TensorData, out, axis: int, dtype, *extra, name: str) -> TensorData:
    """One value per row of ``x`` along ``axis`` (the kernel's ``out[r]``), shaped like ``out``."""
    result = cb._empty(out.shape, out.dtype)
    launch_rows(builder, result.size, x.shape[axis], dtype, result.storage, x.storage,
                *rows_of(x, axis), result.size, x.shape[axis], *extra, name=name)  # fmt: skip
    return result


@register_kernel("logsumexp", "cuda")
def logsumexp(x, out, axis, keepdims):
    if tuned_for(x, out):
        return online(x, out, axis, log=True)
    zero, lowest = out.dtype.type(0), out.dtype.type(-np.inf)
    return _per_row(_logsumexp_kernel, x, out, axis, out.dtype, zero, lowest, name="logsumexp")


# ---------------------------------------------------------------- tuned: online softmax
# Under ``backend.TUNED`` (a real GPU) a row takes a warp or a block (reduce.row_launch) and
# one pass finds its maximum and the sum of exponentials together (the sum rescaled whenever
# the maximum grows), combined across lanes with warp shuffles; softmax reads the row once
# more to write it. Rows of any length, no shared row cache.


@cuda.jit(device=True)
def merge(m, s, m2, s2, zero):
    """(max, sum of exp(x - max)) of two parts of a row (an element ``v``: ``(v, 1)``) joined.
    A NaN maximum stays NaN; a part whose maximum is -inf adds nothing (then ``m2 - m`` is NaN
    or -inf), so a row of -inf keeps ``s == 0``."""
    if m != m or m2 != m2:
        return m + m2, s
    if m2 > m:
        m, s, m2, s2 = m2, s2, m, s
    d = m2 - m
    if d <= zero:
        s += s2 * math.exp(d)
    return m, s


@cuda.jit(device=True)
def merge_lanes(m, s, per_warp, slot_m, slot_s, zero, lowest):
    """``merge`` over a row's lanes (its warp, or its block through 32 shared slots); every lane
    gets lane 0's result, so all of them write with the same maximum and sum."""
    t = cuda.threadIdx.x
    lane = t % WARP
    for rnd in range(2 - per_warp):  # a warp: once; a block: its warps, then their results
        d = WARP // 2
        while d > 0:
            m2 = cuda.shfl_down_sync(FULL, m, d)
            s2 = cuda.shfl_down_sync(FULL, s, d)
            m, s = merge(m, s, m2, s2, zero)
            d //= 2
        m, s = cuda.shfl_sync(FULL, m, 0), cuda.shfl_sync(FULL, s, 0)
        if rnd == 0 and not per_warp:
            if lane == 0:
                slot_m[t // WARP], slot_s[t // WARP] = m, s
            cuda.syncthreads()
            m, s = lowest, zero
            if lane < cuda.blockDim.x // WARP:
                m, s = slot_m[lane], slot_s[lane]
            cuda.syncthreads()  # all read before the next row writes
    return m, s


def _online_kernel(dtype, log, per_warp):
    nbtype = cb.numba_type(dtype)

    def kernel(out, o_strides, o_step, x, lead_shape, lead_strides, offset, step, rows, cols,
               zero, one, lowest, nan):  # fmt: skip
        slot_m = cuda.shared.array(WARP, nbtype)
        slot_s = cuda.shared.array(WARP, nbtype)
        r, rstep, first, stride = fr.groups(per_warp)
        while r < rows:
            base = row_start(r, lead_shape, lead_strides, offset)
            m, s = lowest, zero
            for j in range(first, cols, stride):  # unsigned positions: no wraparound test
                m, s = merge(m, s, x[numba.uint64(base + j * step)], one, zero)
            m, s = merge_lanes(m, s, per_warp, slot_m, slot_s, zero, lowest)
            if log:  # numpy's answer is m itself when m is NaN or +-inf
                if first == 0:
                    out[r] = m + math.log(s) if math.isfinite(m) else m
            else:
                obase = row_start(r, lead_shape, o_strides, 0)
                scale = one / s
                for j in range(first, cols, stride):
                    y = math.exp(x[numba.uint64(base + j * step)] - m) * scale
                    out[numba.uint64(obase + j * o_step)] = y if math.isfinite(m) else nan
            r += rstep

    return kernel


def tuned_for(x: TensorData, out) -> bool:
    """Whether the tuned kernel serves this softmax or logsumexp (``backend.TUNED``, one float
    dtype in and out)."""
    return cb.TUNED and x.dtype == out.dtype and out.dtype.name in ("float32", "float64")


def online(x: TensorData, out, axis: int, log: bool) -> TensorData:
    """Softmax (or, with ``log``, logsumexp) along ``axis`` with the tuned kernel."""
    result = cb._empty(out.shape, out.dtype)
    nrows, cols = count_rows(x, axis), x.shape[axis]
    if log:  # one value a row, row-major: the output's strides along the row do not matter
        o_strides, o_step, like = cb.meta((1,)), 0, None
    else:
        (_, o_strides, _, o_step), like = rows_of(result, axis, like=x), result
    if result.size and nrows:
        t = out.dtype.type
        fr.row_launch(_online_kernel, (out.dtype, log), nrows, cols, result.storage, o_strides,
                      o_step, x.storage, *rows_of(x, axis, like), nrows, cols, t(0), t(1),
                      t(-np.inf), t(np.nan), name="logsumexp" if log else "softmax")  # fmt: skip
    return result


# ---------------------------------------------------------------- argmax


@cuda.jit(device=True)
def beats(v, i, w, k):
    """Does value ``v`` at index ``i`` win over ``w`` at ``k``? numpy's rule: the first NaN,
    else the largest value, the first of equals. An index below 0 is no candidate."""
    if i < 0:
        return False
    if k < 0:
        return True
    if w != w:
        return v != v and i < k
    return v != v or v > w or (v == w and i < k)


def _argmax_kernel(dtype, block):
    nbtype, size = cb.numba_type(dtype), REDUCE_CACHE[block]

    def kernel(out, x, lead_shape, lead_strides, offset, step, rows, cols):
        values = cuda.shared.array(size, nbtype)
        where = cuda.shared.array(size, numba.int64)
        r, rstep, t, nt = lanes(block)
        while r < rows:
            base = row_start(r, lead_shape, lead_strides, offset)
            best, at = x[base], -1
            for j in range(t, cols, nt):
                v = x[base + j * step]
                if beats(v, j, best, at):
                    best, at = v, j
            if nt > 1:  # a block per row: the same contest in a tree
                values[t], where[t] = best, at
                half = nt // 2
                while half > 0:
                    cuda.syncthreads()
                    if t < half and beats(values[t + half], where[t + half], values[t], where[t]):
                        values[t], where[t] = values[t + half], where[t + half]
                    half //= 2
                cuda.syncthreads()
                at = where[0]
                cuda.syncthreads()
            if t == 0:
                out[r] = at
            r += rstep

    return kernel


@register_kernel("argmax", "cuda")
def argmax(a, out, axis, keepdims):
    return _per_row(_argmax_kernel, a, out, axis[0], a.dtype, name="argmax")


# Chapter 11 registers its fused softmax for cuda when minitorch loads, before this backend
# (it calls softmax() above for long rows): this kernel serves only without it.
get_op("softmax").kernels.setdefault("cuda", softmax)


# What the row kernels compute in on a GPU (``python -m minitorch.cuda.lowering``).
_I64, _META = numba.int64, numba.int64[::1]
_ROWS = (_META, _META, _I64, _I64)  # lead shape, lead strides, offset, stride
for _block, _how in ((False, "a thread"), (True, "a block")):

    @lowering.register(f"rows softmax ({_how} per row)", ("float32",))
    def _(t, block=_block):
        body = _softmax_kernel(np.dtype(str(t)), block)
        return body, (t[::1], _META, _I64, t[::1], *_ROWS, _I64, _I64, t, t)

    @lowering.register(f"rows logsumexp ({_how} per row)", ("float32",))
    def _(t, block=_block):
        return _logsumexp_kernel(np.dtype(str(t)), block), (
            t[::1],
            t[::1],
            *_ROWS,
            _I64,
            _I64,
            t,
            t,
        )

    @lowering.register(
        f"tuned online softmax ({_how.replace('thread', 'warp')} per row)", ("float32",)
    )
    def _(t, block=_block):
        body = _online_kernel(np.dtype(str(t)), False, not block)
        return body, (t[::1], _META, _I64, t[::1], *_ROWS, _I64, _I64, t, t, t, t)

    @lowering.register(
        f"tuned online logsumexp ({_how.replace('thread', 'warp')} per row)", ("float32",)
    )
    def _(t, block=_block):
        body = _online_kernel(np.dtype(str(t)), True, not block)
        return body, (t[::1], _META, _I64, t[::1], *_ROWS, _I64, _I64, t, t, t, t)

    @lowering.register(f"rows argmax ({_how} per row)", ("float32", "int64", "bool"))
    def _(t, block=_block):
        return _argmax_kernel(np.dtype(str(t)), block), (_META, t[::1], *_ROWS, _I64, _I64)
