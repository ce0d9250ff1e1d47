"""Exercise 10.7's keys: the graded suite and the programs run with a dynamic batch.

``SUITE`` maps a name to ``(key, shape, dtype)``: ``pad_slice(values, key, shape)`` with
``values`` shaped like ``zeros(shape)[key]``. It covers a block, integer indices
(negative too, and one before a reversed dim), strides that do and do not divide the size,
negative steps, a window
that ends past the data (clamped), an empty window, the whole tensor, 0-d values, and
the dtypes float32, float64, int64 and bool, and one bigger tensor (a
constant table of its size would show). Float values hold NaN, inf, -inf and -0.0.
``DYNAMIC`` are programs exported with one dynamic dim (keyed ``slice(None)``): the batch
(dim 0), or dim 1 after a strided dim 0.
"""

from __future__ import annotations

import numpy as np

import minitorch
from minitorch.autograd import pad_slice

SUITE = {
    "rows": ((slice(1, 3),), (7, 4), "float32"),
    "column": ((slice(None), 2), (5, 6), "float32"),
    "last_column": ((slice(None), -1), (5, 6), "float64"),
    "element": ((2, -3), (4, 5), "float32"),
    "every_other": ((slice(None, None, 2),), (8, 3), "float32"),
    "every_third": ((slice(1, None, 3), slice(None, 4)), (10, 6), "float32"),
    "reversed": ((slice(None, None, -1),), (6,), "float32"),
    "reversed_strided": ((slice(5, 0, -3), 1), (7, 4), "float32"),
    "index_then_reversed": ((-2, slice(None, None, -1)), (3, 5), "float32"),
    "window_4d": ((slice(None), slice(1, 3), slice(0, 4, 2), -1), (2, 3, 5, 4), "float32"),
    "past_the_end": ((slice(2, 50), slice(-2, None)), (5, 4), "float64"),
    "empty": ((slice(3, 3),), (4, 5), "float32"),
    "whole": ((slice(None),), (3, 3), "float32"),
    "ints": ((slice(1, None, 2), slice(None, None, -2)), (6, 5), "int64"),
    "bools": ((slice(None), slice(2, 5)), (3, 6), "bool"),
    "big": ((slice(3, 60, 5), slice(None, None, -1)), (64, 48), "float32"),
}


def values(key, shape, dtype: str, k: int = 0) -> np.ndarray:
    """Deterministic values shaped like ``zeros(shape)[key]``: NaN, inf, -inf and -0.0
    among the floats, negatives and zeros among the ints, both bools."""
    window = np.zeros(shape)[key].shape
    n = int(np.prod(window))
    a = np.sin(np.arange(n, dtype=np.float64) * 0.7 + k) * 3.0
    if dtype == "bool":
        return (a > 0).reshape(window)
    if dtype == "int64":
        return np.round(a).astype(np.int64).reshape(window)
    a = a.astype(dtype)
    a[1::7], a[2::11], a[3::13], a[::5] = np.nan, np.inf, -np.inf, -0.0
    return a.reshape(window)


def program(key, shape):
    """``v -> pad_slice(v, key, shape)`` traced as a one-op graph."""

    def fn(v):
        return pad_slice(v, key, shape)

    return fn


def crop_grad(x):
    """Rows of ``x`` cropped and strided, their square scattered back (the gradient of
    ``(x[:, 1:6:2] ** 2).sum()`` written out), then reduced."""
    g = x[:, 1:6:2] * x[:, 1:6:2] * 2.0
    return pad_slice(g, (slice(None), slice(1, 6, 2)), (x.shape[0], x.shape[1])) + x


def flipped_grad(x):
    """A reversed, integer-indexed window of a 3-d batch, scattered back."""
    g = x[:, ::-1, 2].exp()
    return pad_slice(g, (slice(None), slice(None, None, -1), 2), tuple(x.shape)) * 0.5


def strided_rows(x):
    """Every other row of ``x`` (a strided dim 0) scattered back; dim 1 is the dynamic one."""
    g = x[1:6:2] * 2.0
    return pad_slice(g, (slice(1, 6, 2), slice(None)), tuple(x.shape)) - x


# name: (program, traced shape, the dynamic dim)
DYNAMIC = {
    "crop_grad": (crop_grad, (6, 8), 0),
    "flipped_grad": (flipped_grad, (4, 5, 3), 0),
    "strided_rows": (strided_rows, (7, 4), 1),
}
BATCHES = (1, 4, 9)


def dynamic_input(shape, batch: int, k: int = 0, dim: int = 0) -> np.ndarray:
    """``shape`` with dim ``dim`` set to ``batch``."""
    shape = shape[:dim] + (batch,) + shape[dim + 1 :]
    n = int(np.prod(shape))
    return (np.cos(np.arange(n) * 0.3 + k) * 2.0).astype(np.float32).reshape(shape)


__all__ = ["BATCHES", "DYNAMIC", "SUITE", "dynamic_input", "minitorch", "program", "values"]
