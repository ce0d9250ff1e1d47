"""Index helpers compiled by Numba, for use *inside* kernels.

They mirror chapter 1's ``index_to_position``, ``to_index`` and
``broadcast_index`` but write into preallocated ``int64`` arrays instead of
building tuples, because a kernel must not allocate in its inner loop. They
are framework code (not exercises): a Numba kernel cannot call the chapter-1
exercise wrappers, which are plain Python.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(inline="always", cache=True)
def index_to_position(index, strides) -> int:
    """``sum(index[d] * strides[d])``: where a multi-index sits in storage."""
    pos = 0
    for d in range(len(index)):
        pos += index[d] * strides[d]
    return pos


@njit(inline="always", cache=True)
def to_index(ordinal, shape, out_index) -> None:
    """Write the row-major multi-index of element ``ordinal`` of ``shape`` into ``out_index``."""
    rest = ordinal + 0  # a copy: the caller's loop index must not change
    for d in range(len(shape) - 1, -1, -1):
        n = shape[d]
        out_index[d] = rest % n
        rest = rest // n


@njit(inline="always", cache=True)
def broadcast_index(big_index, big_shape, shape, out_index) -> None:
    """Write the index into ``shape`` that broadcasting maps ``big_index`` to (aligned right)."""
    skip = len(big_shape) - len(shape)
    for d in range(len(shape)):
        out_index[d] = 0 if shape[d] == 1 else big_index[skip + d]


def as_index_array(values) -> np.ndarray:
    """Shapes and strides travel into kernels as int64 arrays."""
    return np.asarray(values, dtype=np.int64).reshape(len(values))
