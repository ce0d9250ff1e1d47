"""Device helpers the chapter's kernels call: index arithmetic on small int arrays.

They are the CUDA twins of chapter 1's ``to_index``, ``broadcast_index`` and
``index_to_position``. On the device there are no tuples to return, so each
helper writes into an index array the caller made with
``cuda.local.array(MAX_DIMS, numba.int64)`` (a few registers per thread).

Shapes and strides arrive as 1-D int64 device arrays; their length is the
number of dimensions.
"""

from __future__ import annotations

from numba import cuda

MAX_DIMS = 8  # the largest rank a kernel's local index arrays hold


@cuda.jit(device=True)
def to_index(ordinal, shape, index):
    """Write the row-major multi-index of element ``ordinal`` of ``shape`` into ``index``."""
    for d in range(len(shape) - 1, -1, -1):
        index[d] = ordinal % shape[d]
        ordinal = ordinal // shape[d]


@cuda.jit(device=True)
def index_to_position(index, strides, offset):
    """``offset + sum(index[d] * strides[d])`` over the dimensions of ``strides``."""
    pos = offset
    for d in range(len(strides)):
        pos += index[d] * strides[d]
    return pos


@cuda.jit(device=True)
def broadcast_index(big_index, big_shape, shape, out_index):
    """Map ``big_index`` (into ``big_shape``) to ``out_index`` (into ``shape``, broadcast)."""
    skip = len(big_shape) - len(shape)
    for d in range(len(shape)):
        if shape[d] == 1:
            out_index[d] = 0
        else:
            out_index[d] = big_index[skip + d]
