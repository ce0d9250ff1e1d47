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

What the simulator cannot show, the machine code does (``python -m minitorch.cuda.lowering
--sass``), and three choices here come from it. Each thread's share of a tile load is the
same in every stage, so its positions are worked out once, before the loop over ``k``. The
next stage's values are fetched into registers before this stage's multiply-adds, so the
loads are in flight while they run. And the inner loop indexes shared memory with unsigned
integers that it only adds to: Numba wraps a negative *signed* index around (a compare and
a select per access). Written plainly, the k loop took 60 instructions for 16 multiply-adds
and a thread 202 registers (one block per multiprocessor); now 62 for 32, and 94 registers.

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
    # closure constants: shared array shapes must be known when compiling
    sa_n, sb_n, bm_pad = bk * (bm + 1), bk * bn, bm + 1
    la, lb = bm * bk // threads, bk * bn // threads  # tile elements each thread loads
    if tx_n * tn != bn or ty_n * tm != bm or la * threads != bm * bk or lb * threads != bk * bn:
        raise ValueError(f"gemm_kernel: tiles {t} need bm % tm == 0 and bn % tn == 0, "
                         "and each tile a whole number of loads per thread")  # fmt: skip
    u32, u64 = numba.uint32, numba.uint64

    def kernel(out, a, a_strides, a_offset, b, b_strides, b_offset, n, k, m, batch,
               e, e_strides, e_offset):  # fmt: skip
        # the A tile k-major (sa[kk * (bm + 1) + row]), with one padding column, so that a
        # row-major A's stores (neighbouring threads, neighbouring kk) fall in different banks
        sa = cuda.shared.array(sa_n, dtype)
        sb = cuda.shared.array(sb_n, dtype)
        acc = cuda.local.array((tm, tn), dtype)
        ra, rb = cuda.local.array(tm, dtype), cuda.local.array(tn, dtype)
        # this thread's loads, the same in every stage: where each goes in shared memory,
        # its offset in the operand, its k (k itself where the row or column is past the end,
        # so that it never loads), and the value fetched for the next stage
        a_sh, b_sh = cuda.local.array(la, numba.int64), cuda.local.array(lb, numba.int64)
        a_at, b_at = cuda.local.array(la, numba.int64), cuda.local.array(lb, numba.int64)
        a_kk, b_kk = cuda.local.array(la, numba.int64), cuda.local.array(lb, numba.int64)
        va, vb = cuda.local.array(la, dtype), cuda.local.array(lb, dtype)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        tid = ty * tx_n + tx
        row0, col0 = cuda.blockIdx.y * bm, cuda.blockIdx.x * bn
        zero = dtype(0)
        a1, a2, b1, b2 = a_strides[1], a_strides[2], b_strides[1], b_strides[2]
        a_rows_fast, b_cols_fast = a1 == 1 and a2 != 1, b2 == 1 or b1 != 1
        for s in range(la):  # a warp's loads walk the operand's stride-1 axis
            q = tid + s * threads
            i, kk = (q % bm, q // bm) if a_rows_fast else (q // bk, q % bk)
            a_sh[s], a_at[s] = kk * bm_pad + i, (row0 + i) * a1 + kk * a2
            a_kk[s] = kk if row0 + i < n else k
        for s in range(lb):
            q = tid + s * threads
            j, kk = (q % bn, q // bn) if b_cols_fast else (q // bk, q % bk)
            b_sh[s], b_at[s] = kk * bn + j, kk * b1 + (col0 + j) * b2
            b_kk[s] = kk if col0 + j < m else k
        for z in range(cuda.blockIdx.z, batch, cuda.gridDim.z):
            a_base, b_base = a_offset + z * a_strides[0], b_offset + z * b_strides[0]
            for i in range(tm):
                for j in range(tn):
                    acc[i, j] = zero
            for s in range(la):  # stage 0's values
                va[s] = a[u64(a_base + a_at[s])] if a_kk[s] < k else zero
            for s in range(lb):
                vb[s] = b[u64(b_base + b_at[s])] if b_kk[s] < k else zero
            for k0 in range(0, k, bk):
                for s in range(la):
                    sa[u32(a_sh[s])] = va[s]
                for s in range(lb):
                    sb[u32(b_sh[s])] = vb[s]
                cuda.syncthreads()
                k1 = k0 + bk  # the next stage's loads are in flight while this one computes
                for s in range(la):
                    va[s] = a[u64(a_base + a_at[s] + k1 * a2)] if a_kk[s] + k1 < k else zero
                for s in range(lb):
                    vb[s] = b[u64(b_base + b_at[s] + k1 * b1)] if b_kk[s] + k1 < k else zero
                pa, pb = u32(ty), u32(tx)  # unsigned: Numba wraps no negative index
                for _ in range(bk):
                    for i in range(tm):
                        ra[i] = sa[pa + u32(i * ty_n)]
                    for j in range(tn):
                        rb[j] = sb[pb + u32(j * tx_n)]
                    for i in range(tm):
                        for j in range(tn):
                            acc[i, j] += ra[i] * rb[j]
                    pa += u32(bm_pad)
                    pb += u32(bn)
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
