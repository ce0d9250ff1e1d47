"""Launching the tiled attention kernel (exercise 11.20) on the cuda backend.

Loaded by :func:`minitorch.transformer.flash.flash_attention` for cuda tensors only, so
that importing chapter 11 does not load numba.cuda.
"""

from __future__ import annotations

import numpy as np

from ..cuda import backend as cb  # first: it chooses the simulator before numba.cuda loads
from ..cuda import lowering

# isort: split
import numba

from ..core.errors import OpError
from ..profiler.core import launch
from ..tensor.data import TensorData
from .flash import _flat, flash_kernel

# Queries per block (= threads) and the largest head size a block caches: on a GPU two
# float64 tiles of 32 x 64 are 32 KiB, under the 48 KiB of static shared memory a block may
# have. On the simulator every thread is Python: a few threads, blocks enough to show the
# grid-stride loop.
FLASH_TILE = 4 if cb.SIMULATOR else 32
MAX_D = 64


def run(q: TensorData, k: TensorData, v: TensorData, keep: np.ndarray, lead, causal, scale):
    tq, tk, d, dv = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    if max(d, dv) > MAX_D:
        raise OpError("flash_attention", f"head size {max(d, dv)} is over {MAX_D} on cuda",
                      hint="split the heads further, or use attention")  # fmt: skip
    qd, kd, vd = (_flat(x, tuple(lead), cb._BACKEND.copy) for x in (q, k, v))
    b = keep.shape[0]
    out = cb._empty((b, tq, dv), q.dtype)
    work = b * -(-tq // FLASH_TILE)
    if out.size:
        keep_d = cb._BACKEND.from_numpy(keep)
        kernel = cb.compiled("11.20", FLASH_TILE, MAX_D, cb.numba_type(q.dtype))
        launch(kernel, max(1, min(cb.MAX_BLOCKS, work)), FLASH_TILE, out.storage, qd.storage,
               kd.storage, vd.storage, keep_d.storage, b, tq, tk, d, dv, bool(causal),
               q.dtype.type(scale), name="flash_attention")  # fmt: skip
    return TensorData.contiguous(out.storage, tuple(lead) + (tq, dv))


@lowering.register("11.20 flash_kernel", ("float32",))
def _lowered(t):
    i = numba.int64
    return flash_kernel(FLASH_TILE, MAX_D, t), (t[::1], t[::1], t[::1], t[::1],
                                                numba.boolean[::1], i, i, i, i, i, numba.boolean, t)  # fmt: skip
