"""Grader-owned baselines: the slow paths that benchmarks compare against.

A baseline must not call learner-editable code, or a deliberately slow
``contiguous`` or ``tensor_map`` would raise the learner's own score. These
use plain Python and numpy only.
"""

from __future__ import annotations


def _to_index(k: int, shape) -> list:
    index = [0] * len(shape)
    for d in range(len(shape) - 1, -1, -1):
        k, index[d] = divmod(k, shape[d])
    return index


def _broadcast_index(index, out_shape, shape) -> list:
    skip = len(out_shape) - len(shape)
    return [0 if n == 1 else index[skip + d] for d, n in enumerate(shape)]


def _position(index, strides, offset: int) -> int:
    return offset + sum(i * s for i, s in zip(index, strides))


def general_map(fn, out, out_shape, out_strides, a, a_shape, a_strides, a_offset=0) -> None:
    """``out = fn(a)`` elementwise by chapter 1's general path, in plain Python.

    For every output element: its index from the flat position, the input's
    index under broadcasting, and both storage positions from the strides.
    ``out`` and ``a`` are flat storages (lists or 1-D numpy arrays).
    """
    size = 1
    for n in out_shape:
        size *= n
    for k in range(size):
        index = _to_index(k, out_shape)
        src = _position(_broadcast_index(index, out_shape, a_shape), a_strides, a_offset)
        out[_position(index, out_strides, 0)] = fn(a[src])
