"""Shared hypothesis strategies for graded tests: the extremes are in by default.

A learner's code that is right on small friendly numbers can still be wrong on
the inputs below, and tests that never draw them cannot tell. Every strategy
here draws them unless told not to:

* ``values(shape)``: floats mixed with ``SPECIAL`` (inf, -inf, NaN, -0.0, a
  denormal, the largest float) and, per array, one ``FAMILIES`` row kind: all
  large and negative (a running maximum started at 0 is wrong), huge with a
  small spread (a one-pass variance loses every digit), denormals (a float32
  accumulator flushes them), ordinary quarters.
* ``shapes()``: empty (a side of 0) and 0-d shapes included.
* ``laid_out(array)``: a numpy view equal to ``array`` over a bigger 1-D
  storage: contiguous, with an offset, negative steps, transposed, strided, or
  a view of a view; ``tensor_data(view, base)`` wraps it as a ``TensorData``,
  ``tensor_of(view, base)`` as a ``minitorch.Tensor`` with that very layout.
* ``dynamic_family(ndim)``: shapes of one rank in which every axis takes at
  least two sizes (a shape guard or a cache keyed on the first axis only fails).

They are plain hypothesis strategies: the grading profile (``harness``,
derandomised, no database, no constants drawn from loaded modules) makes each
test draw the same examples on every run.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

DENORMAL = 5e-324  # the smallest positive float64
SPECIAL = (math.inf, -math.inf, math.nan, -0.0, DENORMAL, 1.7976931348623157e308)
FAMILIES = ("quarters", "large_negative", "huge_small_spread", "denormal")


def shapes(min_dims=0, max_dims=3, min_side=0, max_side=3):
    """Shapes from 0-d up to ``max_dims``; a side of 0 (an empty array) unless ``min_side``."""
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims,
                            min_side=min_side, max_side=max_side)  # fmt: skip


def family_elements(family: str):
    """Finite floats of one row kind (see the module docstring)."""
    k = st.integers(-16, 16)
    if family == "quarters":
        return k.map(lambda i: i / 4)
    if family == "large_negative":  # every value in [-1e30, -1e29]
        return st.integers(1, 10).map(lambda i: -1e29 * i)
    if family == "huge_small_spread":  # 1e8 plus a few eighths: the spread is 1e-8 of the mean
        return k.map(lambda i: 1e8 + i / 8)
    if family == "denormal":
        return st.integers(-8, 8).map(lambda i: i * DENORMAL)
    raise ValueError(f"family_elements: unknown family {family!r}; use one of {FAMILIES}")


@st.composite
def values(draw, shape, dtype=np.float64, special=True, families=FAMILIES):
    """An array of ``shape``: one drawn family's values, and ``SPECIAL`` ones if ``special``.

    ``special=False`` keeps every value finite (for a contract that is only
    about finite inputs); ``families`` narrows the row kinds.
    """
    elements = family_elements(draw(st.sampled_from(families)))
    if special:
        elements = st.one_of(elements, st.sampled_from(SPECIAL))
    out = draw(hnp.arrays(np.float64, shape, elements=elements))
    with np.errstate(over="ignore"):  # the largest float64 is inf in float32: meant
        return out.astype(dtype)


@st.composite
def laid_out(draw, array, layouts=None):
    """(view, base): ``view`` equals ``array`` (values and shape) and is a numpy view of
    the 1-D ``base``, laid out in a drawn way; ``layouts`` narrows the choice."""
    array = np.asarray(array)
    choices = ["contiguous", "offset"]
    if array.ndim:
        choices += ["reversed", "strided", "view_of_view"]
    if array.ndim >= 2:
        choices.append("transposed")
    layout = draw(st.sampled_from([c for c in choices if layouts is None or c in layouts]))
    return _lay(array, layout, draw)


def _lay(array, layout, draw):
    junk = np.float64(-7.25).astype(array.dtype)  # what a wrong offset or stride reads
    if layout in ("contiguous", "offset"):
        pad = 0 if layout == "contiguous" else draw(st.integers(1, 3))
        base = np.full(array.size + pad + 1, junk, dtype=array.dtype)
        base[pad : pad + array.size] = array.reshape(-1)
        return base[pad : pad + array.size].reshape(array.shape), base
    if layout == "reversed":  # stored backwards (axis 0, others drawn), read with -1 steps
        flip = tuple(slice(None, None, -1) if d == 0 or draw(st.booleans()) else slice(None)
                     for d in range(array.ndim))  # fmt: skip
        stored, base = _lay(np.ascontiguousarray(array[flip]), "offset", draw)
        return stored[flip], base
    if layout == "strided":  # every other element along one axis, from an offset
        d = draw(st.integers(0, array.ndim - 1))
        big = np.repeat(array, 2, axis=d)
        big[(slice(None),) * d + (slice(0, None, 2),)] = junk
        stored, base = _lay(big, "offset", draw)
        return stored[(slice(None),) * d + (slice(1, None, 2),)], base
    if layout == "transposed":  # stored with the axes in another order
        order = draw(st.permutations(range(array.ndim)))
        back = tuple(int(i) for i in np.argsort(order))
        stored, base = _lay(np.ascontiguousarray(array.transpose(order)), "offset", draw)
        return stored.transpose(back), base
    # view_of_view: a strided view, itself reversed along axis 0
    inner, base = _lay(np.ascontiguousarray(array[::-1]), "strided", draw)
    return inner[::-1], base


def tensor_data(view: np.ndarray, base: np.ndarray):
    """The chapter 1 ``TensorData`` showing ``view`` over the storage ``base``."""
    from minitorch.tensor.data import TensorData

    item = base.itemsize
    offset = (view.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // item
    return TensorData(base, tuple(view.shape), tuple(s // item for s in view.strides), offset)


def tensor_of(view: np.ndarray, base: np.ndarray):
    """A ``minitorch.Tensor`` (cpu) with ``view``'s layout over the storage ``base``."""
    from minitorch.core.tensor import Tensor

    return Tensor._make(tensor_data(view, base))


@st.composite
def dynamic_family(draw, ndim, count=3, max_side=4):
    """``count`` (at least ndim + 1) shapes of rank ``ndim`` whose every axis takes two sizes
    or more (``max_side`` at least 2)."""
    first = tuple(draw(st.integers(1, max_side)) for _ in range(ndim))
    family = [first]
    for d in range(ndim):  # one member per axis that differs from the first there
        other = draw(st.integers(1, max_side).filter(lambda n, d=d: n != first[d]))
        family.append(first[:d] + (other,) + first[d + 1 :])
    while len(family) < count:
        family.append(tuple(draw(st.integers(1, max_side)) for _ in range(ndim)))
    return family
