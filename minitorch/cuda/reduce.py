"""Reductions tuned for a GPU (issue 42): sum, max and min of a dense tensor (contiguous, or
its dims permuted, as a transpose), over every element, the last axes or leading/middle ones,
with warp shuffles and launch sizes read from the device.

The reduced axes must be one run of dims in storage order (size-1 dims aside), so the input
reads as ``(A, R, C)`` with ``R`` reduced:

* ``C == 1`` (the last axes, or all of them): rows of ``R`` contiguous elements. A row takes
  a warp (short rows) or a block (long ones); each thread folds ``j = t, t + step, ...`` in
  registers, then the warp combines its lanes with ``shfl_down_sync`` and a block its warps'
  results through 32 shared slots. When the rows are fewer than the blocks the device keeps
  busy (every element: one row), each row is cut into ``P`` chunks folded by blocks of their
  own, and a second small launch folds the ``P`` partials: no atomics, so the result does
  not depend on which block finishes first;
* ``C > 1``: each thread owns a column and walks down the rows (a warp reads 32 neighbouring
  columns of one row: coalesced), a block's ``threads / 32`` walkers of a column meet in
  shared memory.

Everything folds in the result's dtype (float32 stays float32, int64 stays exact); max and
min let NaN win, as numpy does. The backend takes this path only under ``backend.TUNED``
(a real GPU); on the simulator tests switch it on with ``backend.tuned(True)``.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numba
import numpy as np
from numba import cuda

from ..core.instrument import launch
from ..tensor.data import TensorData
from . import backend as cb
from . import lowering

WARP, FULL = 32, 0xFFFFFFFF  # lanes of a warp; a shuffle mask naming all of them
SUM, MAX, MIN = 0, 1, 2
FOLDS = {"sum": SUM, "max": MAX, "min": MIN}
DTYPES = ("float32", "float64", "int32", "int64")  # what a shuffle moves (not bool)


class Limits(NamedTuple):
    threads: int  # per block, a multiple of the warp
    blocks: int  # that keep every multiprocessor full
    warp_row: int  # longest row a warp folds alone


@functools.cache
def limits() -> Limits:
    """Launch sizes: the device's own on a GPU (read once), tiny on the simulator, where each
    thread runs in Python (two warps a block, so blocks still combine warps)."""
    if cb.SIMULATOR:
        return Limits(threads=2 * WARP, blocks=4, warp_row=2 * WARP)
    dev = cuda.get_current_device()
    if dev.WARP_SIZE != WARP:
        raise RuntimeError(f"minitorch.cuda.reduce: warps of {dev.WARP_SIZE} lanes, not {WARP}")
    threads = min(256, dev.MAX_THREADS_PER_BLOCK)
    per_sm = dev.MAX_THREADS_PER_MULTIPROCESSOR // threads  # blocks resident on one SM
    return Limits(threads=threads, blocks=dev.MULTIPROCESSOR_COUNT * per_sm, warp_row=1024)


@cuda.jit(device=True)
def fold(kind, a, b):
    """``a + b``, or numpy's maximum/minimum (NaN wins from either side)."""
    if kind == SUM:
        return a + b
    if kind == MAX:
        return a if a >= b or a != a else b
    return a if a <= b or a != a else b


@cuda.jit(device=True)
def warp_fold(kind, v):
    """``v`` of the warp's 32 lanes folded; the result is lane 0's."""
    d = WARP // 2
    while d > 0:
        v = fold(kind, v, cuda.shfl_down_sync(FULL, v, d))
        d //= 2
    return v


@cuda.jit(device=True)
def block_fold(kind, v, slots, start):
    """``v`` of the block's threads folded (``blockDim.x`` a multiple of 32, ``slots`` 32 shared
    values); the result is thread 0's. Every thread of the block must call it."""
    t = cuda.threadIdx.x
    lane, w = t % WARP, t // WARP
    v = warp_fold(kind, v)
    if lane == 0:
        slots[w] = v
    cuda.syncthreads()
    if w == 0:
        v = warp_fold(kind, slots[lane] if lane < cuda.blockDim.x // WARP else start)
    cuda.syncthreads()  # the slots are free again for the next row
    return v


@cuda.jit(device=True)
def groups(per_warp):
    """(first row, row step, first column, column step) of this thread when a row takes a warp
    (``per_warp``) or a block. A row's threads share its index: shuffles and barriers inside
    the row loop see every lane."""
    t = cuda.threadIdx.x
    if per_warp:
        warps = cuda.blockDim.x // WARP
        return cuda.blockIdx.x * warps + t // WARP, cuda.gridDim.x * warps, t % WARP, WARP
    return cuda.blockIdx.x, cuda.gridDim.x, t, cuda.blockDim.x


def row_launch(builder, compile_args: tuple, rows: int, cols: int, *args, name: str) -> None:
    """Launch ``builder(*compile_args, per_warp)``'s kernel over ``rows`` rows of ``cols``: a warp
    a row up to ``limits().warp_row`` elements, a block a row beyond."""
    lim = limits()
    per_warp = cols <= lim.warp_row
    grid = math.ceil(rows / (lim.threads // WARP)) if per_warp else rows
    kernel = cb.own_kernel(builder, *compile_args, per_warp)
    launch(kernel, max(1, min(lim.blocks, grid)), lim.threads, *args, name=name)


def _rows_kernel(kind, dtype, per_warp):
    nbtype = cb.numba_type(dtype)

    def kernel(out, x, offset, rows, parts, length, chunk, start):
        # row r = (a, p): chunk p of segment a, elements [p * chunk, min(length, (p+1) * chunk))
        slots = cuda.shared.array(WARP, nbtype)
        r, step, first, stride = groups(per_warp)
        while r < rows:  # uniform across a warp (a block): shuffles and barriers see all lanes
            a, p = r // parts, r % parts
            base = offset + a * length + p * chunk
            acc = start
            j, stop = base + first, base + min(chunk, length - p * chunk)
            while j < stop:  # simpler than range(): no step sign to test
                acc = fold(kind, acc, x[numba.uint64(j)])
                j += stride
            if per_warp:
                acc = warp_fold(kind, acc)
            else:
                acc = block_fold(kind, acc, slots, start)
            if first == 0:
                out[r] = acc
            r += step

    return kernel


def _cols_kernel(kind, dtype, walkers):
    nbtype, size = cb.numba_type(dtype), walkers * WARP  # a shared array's size: a constant

    def kernel(out, x, offset, outer, rows, cols, parts, chunk, start):
        # out[p, a, c] = fold of x[a, i, c] over the rows i of chunk p; a block: 32 columns of
        # one chunk, ``walkers`` threads down each column
        cache = cuda.shared.array(size, nbtype)
        t = cuda.threadIdx.x
        lane, y = t % WARP, t // WARP
        tiles = (cols + WARP - 1) // WARP
        g = cuda.blockIdx.x
        while g < parts * outer * tiles:
            p, a = g // (outer * tiles), g // tiles % outer
            c = (g % tiles) * WARP + lane
            acc = start
            if c < cols:
                base = offset + a * rows * cols + c
                i, stop = base + (p * chunk + y) * cols, base + min(rows, (p + 1) * chunk) * cols
                while i < stop:
                    acc = fold(kind, acc, x[numba.uint64(i)])
                    i += walkers * cols
            cache[t] = acc
            cuda.syncthreads()
            if y == 0 and c < cols:
                for k in range(1, walkers):
                    acc = fold(kind, acc, cache[k * WARP + lane])
                out[(p * outer + a) * cols + c] = acc
            cuda.syncthreads()
            g += cuda.gridDim.x

    return kernel


def split(x, axis) -> tuple | None:
    """``(A, R, C)`` of ``x``'s elements in storage order, when ``x`` is dense (no gaps, its dims
    in any order), the reduced ``axis`` are one run of dims in that order and the kept dims keep
    theirs (so the results come out row-major), size-1 dims aside; else None."""
    big = sorted((d for d in range(x.ndim) if x.shape[d] != 1), key=lambda d: -x.strides[d])
    run = 1
    for d in reversed(big):
        if x.strides[d] != run:
            return None
        run *= x.shape[d]
    kept = [d for d in big if d not in axis]
    marks = [d in axis for d in big]
    if kept != sorted(kept):
        return None
    if True not in marks:  # only size-1 dims reduced: each element is its own result
        return 1, 1, x.size
    lo = marks.index(True)
    hi = len(marks) - marks[::-1].index(True)
    if not all(marks[lo:hi]):
        return None
    a, r, c = (
        math.prod(x.shape[d] for d in big[s])
        for s in (slice(0, lo), slice(lo, hi), slice(hi, None))
    )
    return a, r, c


def covers(op, a, axis, dtype) -> bool:
    """Whether :func:`reduce` serves this reduction (the backend folds it otherwise)."""
    return (
        op.name in FOLDS
        and np.dtype(dtype).name in DTYPES
        and a.size > 0
        and split(a, axis) is not None
    )


def reduce(op, a, axis, dtype):
    """Fold ``axis`` of ``a`` (already in ``dtype``; :func:`covers` it): the result's elements,
    row-major, as a 1-D tensor."""
    outer, rows, cols = split(a, axis)
    kind, start = FOLDS[op.name], cb._start(op, np.dtype(dtype))
    out = cb.device_empty(outer * cols, dtype)
    if cols == 1:
        _fold_rows(kind, start, a.storage, a.offset, outer, rows, out)
    else:
        _fold_cols(kind, start, a.storage, a.offset, outer, rows, cols, out)
    return TensorData.contiguous(out, (out.size,))


def _fold_cols(kind, start, x, offset, outer, rows, cols, out) -> None:
    """``out[a, c]`` = fold of ``x[offset + (a * rows + i) * cols + c]`` for ``i < rows``."""
    lim = limits()
    walkers, tiles = lim.threads // WARP, outer * math.ceil(cols / WARP)
    # column tiles too few to fill the device: the rows in `parts` chunks, then their partials
    parts = max(1, min(lim.blocks // tiles, rows // (16 * walkers)))
    chunk = math.ceil(rows / parts)
    target = out if parts == 1 else cb.device_empty(parts * outer * cols, out.dtype)
    k = cb.own_kernel(_cols_kernel, kind, out.dtype, walkers)
    launch(k, max(1, min(lim.blocks, parts * tiles)), lim.threads, target, x, offset, outer,
           rows, cols, parts, chunk, start, name="reduce_cols")  # fmt: skip
    if parts > 1:  # the partials as (1, parts, outer * cols): fold the parts, in a fixed order
        _fold_cols(kind, start, target, 0, 1, parts, outer * cols, out)


def _fold_rows(kind, start, x, offset, nrows, length, out) -> None:
    """``out[r]`` = fold of ``x[offset + r * length + j]`` for ``j < length``."""
    lim = limits()
    # rows too few to fill the device: each in `parts` chunks of at least 8 elements a thread
    parts = max(1, min(lim.blocks // nrows, length // (8 * lim.threads)))
    chunk = math.ceil(length / parts)
    target = out if parts == 1 else cb.device_empty(nrows * parts, out.dtype)
    row_launch(_rows_kernel, (kind, out.dtype), nrows * parts, chunk, target, x, offset, nrows * parts, parts,
               length, chunk, start, name="reduce_rows")  # fmt: skip
    if parts > 1:  # the second, small launch: each row's partials, in a fixed order
        _fold_rows(kind, start, target, 0, nrows, parts, out)


# What the tuned reductions compute in on a GPU (``python -m minitorch.cuda.lowering``).
_I64 = numba.int64
for _name, _kind in FOLDS.items():
    for _warp, _how in ((True, "a warp"), (False, "a block")):

        @lowering.register(f"tuned reduce rows ({_name}, {_how} per row)", ("float32", "int64"))
        def _(t, kind=_kind, per_warp=_warp):
            body = _rows_kernel(kind, np.dtype(str(t)), per_warp)
            return body, (t[::1], t[::1], _I64, _I64, _I64, _I64, _I64, t)

    @lowering.register(f"tuned reduce cols ({_name})", ("float32", "int64"))
    def _(t, kind=_kind):
        body = _cols_kernel(kind, np.dtype(str(t)), 8)
        return body, (t[::1], t[::1], _I64, _I64, _I64, _I64, _I64, _I64, t)
