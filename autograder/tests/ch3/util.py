"""Shared helpers of the chapter-3 graded tests: data, views and the numba backend."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch
from minitorch.core.registry import dispatch


@pytest.fixture(autouse=True, scope="module")
def numba_backend():
    with minitorch.use_backend("numba"):
        yield


def data(shape, seed: int, scale: float = 1.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def view(x: np.ndarray, how: str):
    """A minitorch tensor showing ``x`` through a view that is (or is not) contiguous.

    ``contiguous``: x itself; ``transposed``: a permuted copy seen back in x's
    order; ``sliced``: every other element of a larger storage.
    """
    if how == "contiguous" or x.ndim == 0:
        return minitorch.tensor(x)
    if how == "transposed":
        order = tuple(reversed(range(x.ndim)))
        return minitorch.tensor(np.ascontiguousarray(x.transpose(order))).permute(*order)
    big = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), dtype=x.dtype)
    big[..., ::2] = x
    return minitorch.tensor(big)[(slice(None),) * (x.ndim - 1) + (slice(None, None, 2),)]


def run(op: str, *inputs, **attrs) -> np.ndarray:
    return dispatch(op, *inputs, **attrs).numpy()
