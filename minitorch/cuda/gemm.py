"""The course's tuned matmul for a real GPU: shared-memory tiles with register blocking.

Exercise 4.5 gives each thread one output element, so every product needs two reads
from shared memory. Here a block of ``(bn/tn, bm/tm)`` threads owns a ``bm x bn``
output tile and each thread a ``tm x tn`` micro-tile held in registers: per step of
``k`` it reads ``tm + tn`` values from shared memory and does ``tm * tn`` multiply-adds
with them. ``k`` is walked in chunks of ``bk`` staged through shared memory. A thread's
rows are ``ty, ty + bm/tm, ...`` and its columns ``tx, tx + bn/tn, ...``, so a warp's
stores (and shared reads) fall on neighbouring columns.

Operands are (batch, rows, cols) strided views, as exercise 4.5 takes them: a transposed
view (the common case in backward) is read through its strides, without a copy; the
tile loads walk whichever axis has stride 1 fastest, so they stay coalesced either way.

An *epilogue* ``fn(acc, e)`` is applied to each element as it is stored, ``e`` being the
element of an extra operand at the same position (a bias broadcast over rows or columns,
given by its strides). The compiled-mode fusion of chapter 7 uses it for ``matmul`` or
``conv2d`` + bias + relu as one kernel (:mod:`minitorch.fusion.epilogue_cuda`). The
epilogue is compiled with ``inline="always"``: a call left in the store loop keeps the
loop rolled and the accumulators in local memory instead of registers.

The backend's ``matmul`` runs this kernel for float dtypes under ``backend.TUNED``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba
import numpy as np
from numba import cuda

from ..core.instrument import launch
from ..tensor.data import TensorData
from ..tensor.indexing import broadcast_shape
from . import backend as cb
from . import lowering


class Tiles(NamedTuple):
    bm: int  # output rows per block
    bn: int  # output columns per block
    bk: int  # k per shared-memory stage
    tm: int  # rows per thread
    tn: int  # columns per thread


SIM_TILES = Tiles(8, 8, 4, 2, 2)  # 16 threads: each simulated thread is Python
GPU_TILES = Tiles(64, 64, 16, 4, 4)  # 256 threads, 8 KiB (float32) of shared memory
SMALL_GPU_TILES = Tiles(32, 32, 8, 4, 4)  # 64 threads, for a device that allows fewer
_tiles: list = []


def tiles() -> Tiles:
    """The tile sizes for this device, read once from its properties (tiny on the simulator)."""
    if not _tiles:
        if cb.SIMULATOR:
            _tiles.append(SIM_TILES)
        else:
            dev = cuda.get_current_device()
            big = GPU_TILES
            fits = (dev.MAX_THREADS_PER_BLOCK >= (big.bm // big.tm) * (big.bn // big.tn)
                    and dev.MAX_SHARED_MEMORY_PER_BLOCK >= 8 * big.bk * (big.bm + 1 + big.bn))  # fmt: skip
            _tiles.append(big if fits else SMALL_GPU_TILES)
    return _tiles[0]


def gemm_kernel(t: Tiles, dtype, epilogue):
    """The body of a batched register-blocked matmul with tiles ``t``, computing in ``dtype``
    (a Numba type) and storing ``epilogue(acc, e)``. Signature::

        kernel(out, a, a_strides, a_offset, b, b_strides, b_offset, n, k, m, batch,
               e, e_strides, e_offset)

    ``a`` (batch, n, k) and ``b`` (batch, k, m) are strided views, ``out`` contiguous
    (batch, n, m), ``e`` the epilogue's operand as a (batch, n, m) view (strides 0 where it
    is broadcast). Blocks of ``(bn // tn, bm // tm)`` threads, a grid of
    ``(ceil(m / bn), ceil(n / bm), <= batch)`` (blocks loop over the batch).
    """
    bm, bn, bk, tm, tn = t
    tx_n, ty_n = bn // tn, bm // tm  # threads along columns, along rows
    threads = tx_n * ty_n
    bm_pad = bm + 1  # a closure constant: shared array shapes must be known when compiling
    if tx_n * tn != bn or ty_n * tm != bm:
        raise ValueError(f"gemm_kernel: tiles {t} need bm % tm == 0 and bn % tn == 0")

    def kernel(out, a, a_strides, a_offset, b, b_strides, b_offset, n, k, m, batch,
               e, e_strides, e_offset):  # fmt: skip
        # the A tile, k-major (sa[kk, row]); one padding column, so that a row-major A's
        # loads (neighbouring threads, neighbouring kk) fall in different banks
        sa = cuda.shared.array((bk, bm_pad), dtype)
        sb = cuda.shared.array((bk, bn), dtype)
        acc = cuda.local.array((tm, tn), dtype)
        ra = cuda.local.array(tm, dtype)
        rb = cuda.local.array(tn, dtype)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        tid = ty * tx_n + tx
        row0, col0 = cuda.blockIdx.y * bm, cuda.blockIdx.x * bn
        zero = dtype(0)
        a1, a2, b1, b2 = a_strides[1], a_strides[2], b_strides[1], b_strides[2]
        a_rows_fast, b_cols_fast = a1 == 1 and a2 != 1, b2 == 1 or b1 != 1
        for z in range(cuda.blockIdx.z, batch, cuda.gridDim.z):
            a_base, b_base = a_offset + z * a_strides[0], b_offset + z * b_strides[0]
            for i in range(tm):
                for j in range(tn):
                    acc[i, j] = zero
            for k0 in range(0, k, bk):
                for q in range(tid, bm * bk, threads):
                    if a_rows_fast:  # a transposed view: neighbouring rows are neighbours
                        kk, i = q // bm, q % bm
                    else:
                        i, kk = q // bk, q % bk
                    r, c = row0 + i, k0 + kk
                    sa[kk, i] = a[a_base + r * a1 + c * a2] if r < n and c < k else zero
                for q in range(tid, bk * bn, threads):
                    if b_cols_fast:
                        kk, j = q // bn, q % bn
                    else:
                        j, kk = q // bk, q % bk
                    r, c = k0 + kk, col0 + j
                    sb[kk, j] = b[b_base + r * b1 + c * b2] if r < k and c < m else zero
                cuda.syncthreads()
                for kk in range(bk):
                    for i in range(tm):
                        ra[i] = sa[kk, ty + i * ty_n]
                    for j in range(tn):
                        rb[j] = sb[kk, tx + j * tx_n]
                    for i in range(tm):
                        for j in range(tn):
                            acc[i, j] += ra[i] * rb[j]
                cuda.syncthreads()  # before the next stage overwrites the tiles
            e_base = e_offset + z * e_strides[0]
            for i in range(tm):
                r = row0 + ty + i * ty_n
                if r < n:
                    for j in range(tn):
                        c = col0 + tx + j * tx_n
                        if c < m:
                            v = e[e_base + r * e_strides[1] + c * e_strides[2]]
                            out[(z * n + r) * m + c] = epilogue(acc[i, j], v)

    return kernel


def _first(acc, e):
    return acc


_no_epilogue = cuda.jit(device=True, inline="always")(_first)
_dummy: dict = {}


def covers(dtype) -> bool:
    """The dtypes the tuned kernel serves (ints and bools keep exercise 4.5's kernel)."""
    return np.dtype(dtype).kind == "f"


def matmul(a: TensorData, b: TensorData, dtype, epilogue=None, e: TensorData | None = None):
    """``epilogue(a @ b, e)`` (or ``a @ b``) in ``dtype``, batched as numpy broadcasts,
    with the tuned kernel. ``e`` must broadcast to the result's shape."""
    dtype = np.dtype(dtype)
    batch = tuple(broadcast_shape(a.shape[:-2], b.shape[:-2]))
    a3, b3 = cb._batched(a, batch), cb._batched(b, batch)
    n, k, m = a.shape[-2], a.shape[-1], b.shape[-1]
    shape = batch + (n, m)
    result = cb._empty(shape, dtype)
    if not result.size:
        return result
    if e is None:
        fn, e3 = _no_epilogue, _zero(dtype)
    else:
        fn, e3 = epilogue, _as_batch(e, shape)
    t = tiles()
    kernel = cb.own_kernel(gemm_kernel, t, numba.from_dtype(dtype), fn)
    grid = (math.ceil(m / t.bn), math.ceil(n / t.bm), min(a3.shape[0], 65535))
    launch(
        kernel, grid, (t.bn // t.tn, t.bm // t.tm),
        result.storage, a3.storage, cb.meta(a3.strides), a3.offset,
        b3.storage, cb.meta(b3.strides), b3.offset, n, k, m, a3.shape[0],
        e3.storage, cb.meta(e3.strides), e3.offset, name="gemm",
    )  # fmt: skip
    return result


def _zero(dtype) -> TensorData:
    """A one-element operand read everywhere (strides 0) when there is no epilogue."""
    z = _dummy.get(dtype)
    if z is None:
        z = _dummy[dtype] = cb.fill((1,), dtype, 0)
    return TensorData(z.storage, (1, 1, 1), (0, 0, 0), 0)


def broadcast(e: TensorData, shape: tuple) -> TensorData:
    """``e`` as a view of ``shape``, numpy's broadcasting: stride 0 along the axes it repeats."""
    lead = len(shape) - e.ndim
    strides = (0,) * lead + tuple(0 if n == 1 else s for n, s in zip(e.shape, e.strides))
    return TensorData(e.storage, tuple(shape), strides, e.offset)


def _as_batch(e: TensorData, shape: tuple) -> TensorData:
    """``e`` broadcast to ``shape`` as a (batch, rows, cols) view (the backend's ``_batched``:
    a contiguous copy when its batch strides do not merge into one)."""
    return cb._batched(broadcast(e, shape), tuple(shape[:-2]))


# What the kernel computes in on a GPU (``python -m minitorch.cuda.lowering``).
_I64, _META = numba.int64, numba.int64[::1]


@lowering.register("gemm (register-blocked matmul)", ("float32",))
def _lowered_gemm(t):
    body = gemm_kernel(GPU_TILES, t, _no_epilogue)
    return body, (t[::1], t[::1], _META, _I64, t[::1], _META, _I64, *[_I64] * 4,
                  t[::1], _META, _I64)  # fmt: skip
