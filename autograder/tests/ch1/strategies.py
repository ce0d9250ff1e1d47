"""Hypothesis strategies for chapter 1: shapes, and strided views of numpy arrays."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from minitorch.tensor.data import TensorData

shapes = hnp.array_shapes(min_dims=0, max_dims=4, min_side=1, max_side=4)


@st.composite
def broadcast_to(draw, big, min_side=1):
    """A shape that broadcasts to ``big``: a suffix of it, some dims replaced by 1."""
    k = draw(st.integers(0, len(big)))
    return tuple(1 if draw(st.booleans()) else n for n in big[len(big) - k :])


@st.composite
def broadcast_shapes(draw, n=1, max_dims=3, max_side=3):
    """(output shape, n input shapes that broadcast to it), each input drawn on its own."""
    big = draw(hnp.array_shapes(min_dims=0, max_dims=max_dims, min_side=1, max_side=max_side))
    return big, [draw(broadcast_to(big)) for _ in range(n)]


@st.composite
def index_in(draw, shape):
    return tuple(draw(st.integers(0, n - 1)) for n in shape)


def data_of(view: np.ndarray, base: np.ndarray) -> TensorData:
    """A TensorData that shows ``view`` (a numpy view of the 1-D ``base``)."""
    item = base.itemsize
    offset = (view.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // item
    return TensorData(base, tuple(view.shape), tuple(s // item for s in view.strides), offset)


@st.composite
def strided_views(draw, shape=None):
    """(numpy view, TensorData of it): permuted, sliced, with an offset, or contiguous."""
    shape = draw(shapes) if shape is None else shape
    # Build a bigger array, then take a permuted, stepped slice of it with the wanted shape.
    ndim = len(shape)
    order = draw(st.permutations(range(ndim))) if ndim else []
    steps = [draw(st.sampled_from([1, 1, 2, -1])) for _ in range(ndim)]
    starts = [draw(st.integers(0, 2)) for _ in range(ndim)]
    big_shape = [0] * ndim
    for d in range(ndim):
        n, step = shape[d], abs(steps[d])
        big_shape[order[d]] = starts[d] + n * step + 1
    size = int(np.prod(big_shape)) + 3
    base = np.arange(size, dtype=np.float64) * 0.5 - size / 4
    base = draw(st.sampled_from([base, base[::-1].copy()]))
    big = base[3:].reshape(big_shape) if ndim else base[3:4].reshape(())
    view = big.transpose(order) if ndim else big
    key = []
    for d in range(ndim):
        n, step = shape[d], steps[d]
        if step > 0:
            key.append(slice(starts[d], starts[d] + n * step, step))
        else:
            stop = starts[d] - 1 if starts[d] > 0 else None
            key.append(slice(starts[d] + n - 1, stop, -1))
    view = view[tuple(key)] if ndim else view
    assert view.shape == tuple(shape), (view.shape, shape)
    return view, data_of(view, base)


def empty_like_view(shape) -> TensorData:
    return TensorData.empty(tuple(shape), np.float64)
