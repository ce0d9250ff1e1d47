"""Hypothesis strategies for hard inputs: odd shapes, special values and awkward memory layouts.

``values(shape, dtype)`` draws arrays whose float entries are quarters in
[-4, 4] (sums and products are exact in float32, so backends may only differ
where the math does) mixed with the special values ±0, ±inf and NaN.
``laid_out(T, array)`` then builds a tensor holding exactly ``array`` through
a layout drawn at random: contiguous, a negative-step view, a strided slice
with an offset, a transposed view, or a stride-0 expand where the values allow.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

SPECIAL = [0.0, -0.0, math.inf, -math.inf, math.nan]
FLOATS = ["float32", "float64"]


def shapes(min_dims=0, max_dims=3, min_side=0, max_side=3):
    return hnp.array_shapes(
        min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side
    )


@st.composite
def values(draw, shape, dtype, special=True, domain=None):
    """An array of ``shape`` and ``dtype``; ``domain`` ("positive", "nonzero", "unique") narrows floats."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return draw(hnp.arrays(np.bool_, shape))
    if dtype.kind == "i":
        low = 0 if domain == "positive" else -5
        return draw(hnp.arrays(np.int64, shape, elements=st.integers(low, 5)))
    if domain == "unique":  # distinct values away from kinks (finite differences, argmax)
        n = math.prod(shape)
        picks = draw(st.permutations(range(-64, 65)))[:n]
        return (np.array(picks, dtype=np.float64) * 0.0625 + 0.01).reshape(shape).astype(dtype)
    quarters = st.integers(-16, 16).map(lambda k: k / 4)
    if domain == "positive":
        quarters = st.integers(1, 16).map(lambda k: k / 4)
    elif domain == "nonzero":
        quarters = quarters.filter(lambda v: v != 0)
    elements = st.one_of(quarters, st.sampled_from(SPECIAL)) if special else quarters
    return draw(hnp.arrays(dtype, shape, elements=elements))


@st.composite
def laid_out(draw, make, array):
    """A tensor (made with ``make(ndarray)``) equal to ``array`` but laid out in memory at random."""
    layouts = ["contiguous", "offset"]
    if array.ndim:
        layouts += ["reversed", "strided"]
    if array.ndim >= 2:
        layouts.append("transposed")
    if array.ndim and array.size:
        # stride 0: only if one axis repeats its values, so make it so
        layouts.append("expand")
    layout = draw(st.sampled_from(layouts))
    if layout == "contiguous":
        return make(array), array
    if layout == "offset":  # the values sit after one junk element of storage
        base = np.concatenate([np.zeros(1, array.dtype), array.reshape(-1)])
        return make(base)[1:].reshape(array.shape), array
    if layout == "reversed":  # stored backwards along some axes, read with negative steps
        flip = tuple(
            slice(None, None, -1) if draw(st.booleans()) else slice(None) for _ in array.shape
        )
        flip = (slice(None, None, -1),) + flip[1:]
        return make(np.ascontiguousarray(array[flip]))[flip], array
    if layout == "strided":  # every other element of a larger array, from an offset
        d = draw(st.integers(0, array.ndim - 1))
        big = np.repeat(array, 2, axis=d)
        key = (slice(None),) * d + (slice(1, None, 2),)
        big[key] = array  # the picked half holds the values; the other half is junk
        return make(big)[key], array
    if layout == "transposed":
        return make(np.ascontiguousarray(array.T)).T, array
    d = draw(st.integers(0, array.ndim - 1))
    one = np.take(array, [0], axis=d)
    array = np.broadcast_to(one, array.shape).copy()
    return make(one).expand(*array.shape), array
