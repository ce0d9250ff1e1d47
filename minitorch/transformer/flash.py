"""Tiled attention with an online softmax (exercises 11.19, 11.20), as FlashAttention does.

Plain attention (11.3) writes the ``(Tq, Tk)`` scores, masks them, takes their softmax
(another ``(Tq, Tk)`` matrix) and multiplies: memory and traffic grow with ``T**2``.
Here a query walks the keys a tile at a time and keeps only a running maximum, a
running sum of exponentials and a running weighted sum of values; when the maximum
grows, what was summed so far is rescaled by ``exp(old - new)``. Nothing of size
``Tq * Tk`` exists. ``flash_attention`` runs the Numba kernel (11.19) for cpu tensors
and the CUDA kernel (11.20) for cuda ones.

Forward only: it is not registered as an op and has no backward rule, so it refuses
inputs that require gradients (train with :func:`attention`; a backward would recompute
the scores tile by tile, as FlashAttention's does).
"""

from __future__ import annotations

import math

import numpy as np

from ..core import dtypes as dt
from ..core.errors import OpError
from ..core.tensor import Tensor, is_grad_enabled
from ..exercises import exercise, implementation
from ..tensor.data import TensorData
from ..tensor.indexing import broadcast_shape

TILE = 16  # keys per tile of the cpu kernel (a cache-sized block of k and v rows)


@exercise("11.19")
def flash_rows(out, q, k, v, keep, causal, scale, tile):
    """Fill ``out`` with causal, key-masked attention, visiting the keys ``tile`` at a time.

    Arrays (C-contiguous, Numba compiles this with ``parallel=True``): ``q`` is
    ``(B, Tq, D)``, ``k`` is ``(B, Tk, D)``, ``v`` is ``(B, Tk, Dv)``, ``keep`` is a
    ``(B, Tk)`` bool array, ``out`` is ``(B, Tq, Dv)``; ``q``, ``k``, ``v`` and ``out``
    share one float dtype. ``scale`` is a float, ``tile >= 1`` an int; ``Tq <= Tk``
    when ``causal``.

    ``out[b, i]`` must equal ``attention(q[b], k[b], v[b], causal, key_mask)`` of
    exercise 11.3 with the score ``scale * (q[b, i] . k[b, j])``: key ``j`` is seen by
    query ``i`` when ``keep[b, j]`` and, if ``causal``, ``j <= i + Tk - Tq`` (the
    queries are the last ``Tq`` positions). A query that sees no key gets a row of NaN,
    as the plain softmax of a row of ``-inf`` does; so does a row whose seen scores
    hold a NaN or ``+inf``. It returns None: the result is written into ``out``.

    Hint 1: per query keep three things across tiles: the largest score seen so far,
    the sum of ``exp(score - that maximum)`` and the matching weighted sum of ``v`` rows.
    Hint 2: when a tile raises the maximum, what was summed under the old one is worth
    ``exp(old - new)`` times as much now. A tile with no seen key, or whose seen scores
    are all ``-inf``, adds nothing (``exp(-inf - -inf)`` is NaN, not 0).
    Hint 3: Numba divides as Python does (``0.0 / 0.0`` raises): decide the empty row
    before dividing. ``prange`` over the ``B * Tq`` rows: each writes its own ``out`` row.
    """
    raise NotImplementedError("Exercise 11.19: flash_rows")


@exercise("11.20")
def flash_kernel(tile: int, max_d: int, dtype):
    """Return the body of a tiled attention kernel:
    ``kernel(out, q, k, v, keep, batch, tq, tk, d, dv, causal, scale)``.

    Same arrays and the same result as :func:`flash_rows`, stored as 1-D device arrays
    (``q`` row ``(b, i)`` starts at ``(b * tq + i) * d``); ``keep`` holds ``batch * tk``
    bools; ``d, dv <= max_d``; ``scale`` is of ``dtype``. The launch has ``tile`` threads
    per block and may have fewer blocks than work: the work is ``batch * ceil(tq / tile)``
    query blocks, and launched block ``n`` takes query blocks ``n, n + gridDim.x, ...``;
    in the query block whose first query is ``first``, thread ``t`` owns query
    ``i = first + t`` (none when ``i >= tq``).

    The point is memory traffic. The block's threads load a tile of ``tile`` key rows,
    their value rows and ``keep`` flags into shared memory
    (``cuda.shared.array(size, dtype)``, ``size = tile * max_d`` computed in the builder:
    a shared array's size is a constant), sync, and every query of the block reads them
    there. So ``q`` is read from global memory once, each element of ``k``
    and ``v`` at most once per query block, and ``out`` is the only thing written
    (once per element): no scores in global memory. Under ``causal`` a query block
    loads no tile that starts past the last key its last query sees.

    Hint 1: a thread without a query still loads its part of each tile and reaches
    every ``cuda.syncthreads()``: a barrier waits for the whole block.
    Hint 2: keep the query row and the running sum of values in
    ``cuda.local.array(max_d, dtype)``; sync again before the next tile overwrites
    the shared arrays.
    Hint 3: start the maximum at ``dtype(-math.inf)`` and the sums at ``dtype(0)``.
    """
    raise NotImplementedError("Exercise 11.20: flash_kernel")


# ---------------------------------------------------------------- running them

_cpu: dict = {}


def _cpu_kernel():
    import numba  # first use only: the cpu kernel compiles with its backend

    impl = implementation("11.19")
    kernel = _cpu.get(impl)
    if kernel is None:
        kernel = _cpu[impl] = numba.njit(parallel=True)(impl)
    return kernel


def _refuse(problem: str, hint: str):
    raise OpError("flash_attention", problem, hint=hint)


def _check(q: Tensor, k: Tensor, v: Tensor, causal, key_mask) -> None:
    for name, x in (("q", q), ("k", k), ("v", v)):
        if x.ndim < 2:
            _refuse(f"{name} needs 2+ dims (..., T, D), got shape {x.shape}", "reshape to (1, D)")
        if x.dtype not in (dt.float32, dt.float64) or x.dtype != q.dtype:
            _refuse(f"{name} is {x.dtype.name}, q is {q.dtype.name}",
                    "q, k and v share one dtype, float32 or float64: cast with .float()")  # fmt: skip
        if x.device != q.device:
            _refuse(f"{name} is on {x.device}, q on {q.device}", "use .to(device)")
        if is_grad_enabled() and x.requires_grad:
            _refuse(f"{name} requires grad; flash_attention has no backward",
                    "train with attention(q, k, v), or wrap in minitorch.no_grad()")  # fmt: skip
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        _refuse(f"q {q.shape}, k {k.shape}, v {v.shape} do not fit",
                "q and k share D, k and v share Tk")  # fmt: skip
    if causal and q.shape[-2] > k.shape[-2]:
        _refuse(f"causal with {q.shape[-2]} queries but {k.shape[-2]} keys",
                "the queries are the last Tq of the Tk positions: Tq <= Tk")  # fmt: skip
    if key_mask is not None:
        if key_mask.dtype != dt.bool_:
            _refuse(f"key_mask must be bool, got {key_mask.dtype.name}", "mask == 1")
        if key_mask.ndim == 0 or key_mask.shape[-1] != k.shape[-2]:
            _refuse(f"key_mask {key_mask.shape} has no axis of the {k.shape[-2]} keys",
                    "one flag per key, last: (..., 1, Tk)")  # fmt: skip
        if key_mask.ndim >= 2 and key_mask.shape[-2] != 1:
            _refuse(f"key_mask {key_mask.shape} differs between queries",
                    "a key mask is (..., 1, Tk); use attention for any other mask")  # fmt: skip


def _flat(x: TensorData, lead: tuple, copy) -> TensorData:
    """``x`` broadcast to ``lead + x.shape[-2:]``, as a contiguous ``(B, T, D)``."""
    shape = lead + x.shape[-2:]
    pad = len(shape) - x.ndim
    strides = [0] * pad + [0 if n == 1 and m != 1 else s
                           for n, m, s in zip(x.shape, shape[pad:], x.strides)]  # fmt: skip
    view = TensorData(x.storage, shape, tuple(strides), x.offset)
    if not (view.is_contiguous() and view.offset == 0):
        view = copy(view)
    return TensorData.contiguous(view.storage, (math.prod(lead),) + shape[-2:])


def flash_attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = True, key_mask=None) -> Tensor:
    """Attention as :func:`attention` computes it, tiled over the keys (forward only).

    ``key_mask`` hides keys: a bool tensor broadcasting to ``(..., 1, Tk)``. Leading
    dims broadcast. On cpu it runs exercise 11.19, on cuda exercise 11.20.
    """
    _check(q, k, v, causal, key_mask)
    tq, tk, d, dv = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    mask_lead = () if key_mask is None else key_mask.shape[:-2]
    lead = broadcast_shape(broadcast_shape(q.shape[:-2], k.shape[:-2]), v.shape[:-2])
    lead = tuple(broadcast_shape(lead, mask_lead))
    b = math.prod(lead)
    keep = np.ones((b, tk), bool)
    if key_mask is not None:
        keep = np.broadcast_to(key_mask.numpy(), lead + (1, tk)).reshape(b, tk).copy()
    scale = 1.0 / math.sqrt(d) if d else 1.0
    if q.device == "cuda":
        from . import flash_cuda

        out = flash_cuda.run(q._data, k._data, v._data, keep, lead, causal, scale)
        return Tensor._make(out, "cuda")
    qa, ka, va = (_flat(x._data, lead, lambda t: TensorData.wrap(t.to_numpy())).as_numpy_view()
                  for x in (q, k, v))  # fmt: skip
    out = np.empty((b, tq, dv), q.dtype)
    if out.size:
        _cpu_kernel()(out, qa, ka, va, keep, bool(causal), scale, TILE)
    return Tensor._make(TensorData.wrap(out.reshape(lead + (tq, dv))), q.device)


# ---------------------------------------------------------------- measuring (the book's table)


def peak_kib(ts=(64, 128, 256, 512), heads: int = 4, d: int = 16, seed: int = 0) -> list[tuple]:
    """(T, plain KiB, tiled KiB, one score matrix KiB) per ``T``: the peak of numpy's allocations
    (``tracemalloc``) during causal attention of ``heads`` heads of size ``d`` on cpu, plain
    (11.3) against tiled (11.19). The Numba kernel's scratch (``tile + d`` floats per thread, made
    by Numba's allocator) is not traced; the inputs exist before either call."""
    from ..compile.capstone import _peak
    from .attention import attention

    rng = np.random.default_rng(seed)
    rows = []
    for t in ts:
        q, k, v = (Tensor(rng.standard_normal((heads, t, d))) for _ in range(3))
        flash_attention(q, k, v)  # compile and warm outside the measured call
        plain = _peak(lambda a=(q, k, v): attention(*a))
        tiled = _peak(lambda a=(q, k, v): flash_attention(*a))
        rows.append((t, plain, tiled, heads * t * t * 8 / 1024))
    return rows
