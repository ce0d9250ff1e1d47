"""Grader-owned baselines: the slow paths that benchmarks compare against.

A baseline must not call learner-editable code, or a deliberately slow
``contiguous`` or ``tensor_map`` would raise the learner's own score. These
use plain Python and numpy only.
"""

from __future__ import annotations


def strided_map(fn, storage: list, shape: tuple, strides: tuple, offset: int = 0) -> list:
    """``fn`` of every element of a strided view, in row-major order, one at a time.

    The general path of an interpreter: for each output index, work out the
    input's position from the shape and strides. Pure Python on purpose.
    """
    size = 1
    for n in shape:
        size *= n
    out = [0.0] * size
    dims = range(len(shape) - 1, -1, -1)
    for k in range(size):
        rest, pos = k, offset
        for d in dims:
            rest, i = divmod(rest, shape[d])
            pos += i * strides[d]
        out[k] = fn(storage[pos])
    return out
