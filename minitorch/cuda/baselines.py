"""Baseline kernels the chapter compares its exercises against (framework code, not exercises).

``naive_matmul`` is the matrix multiply without shared memory: each thread reads
a whole row of ``a`` and a whole column of ``b`` from global memory, so every
element is read ``n`` (or ``m``) times. The tiled kernel of exercise 4.5 cuts
that by the tile size; the traffic counter measures both.
"""

from __future__ import annotations

import functools

from numba import cuda

from ..core.tensor import Tensor
from . import backend as cb


@functools.cache
def _naive(acc):
    """The naive kernel accumulating in the Numba type ``acc`` (as the tiled one does)."""

    @cuda.jit
    def kernel(out, a, a_strides, a_offset, b, b_strides, b_offset, n, k, m):
        col = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        row = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
        z = cuda.blockIdx.z
        if row < n and col < m:
            pa = a_offset + z * a_strides[0] + row * a_strides[1]
            pb = b_offset + z * b_strides[0] + col * b_strides[2]
            total = acc(0)
            for j in range(k):
                total += a[pa + j * a_strides[2]] * b[pb + j * b_strides[1]]
            out[(z * n + row) * m + col] = total

    return kernel


def naive_matmul(a: Tensor, b: Tensor, block: int | None = None) -> Tensor:
    """``a @ b`` on the cuda device with one thread per output and no shared memory."""
    block = block or cb.TILE
    out = cb.launch_matmul(_naive(cb.matmul_type(a.dtype)), a._data, b._data, block, a.dtype)
    return Tensor._make(out, "cuda")


def tiled_matmul(a: Tensor, b: Tensor, tile: int | None = None) -> Tensor:
    """``a @ b`` with exercise 4.5's kernel built for ``tile`` (the backend uses ``cb.TILE``)."""
    tile = tile or cb.TILE
    kernel = cb.compiled("4.5", tile, cb.matmul_type(a.dtype))
    return Tensor._make(cb.launch_matmul(kernel, a._data, b._data, tile, a.dtype), "cuda")
