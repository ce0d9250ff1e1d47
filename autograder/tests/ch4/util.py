"""Shared strategies for the chapter-4 graded tests: small strided tensors on the cuda device."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import minitorch
from minitorch.cuda import backend as cb

# The simulator runs one Python thread per CUDA thread: keep it tiny there.
SIDE = 6 if cb.SIMULATOR else 64
# More elements than the simulator launches threads, so grid-stride loops matter.
BIG = 4 * cb.THREADS * cb.MAX_BLOCKS // 3 if cb.SIMULATOR else 1 << 20


@st.composite
def arrays(draw, min_dims=1, max_dims=3, shape=None, dtype=np.float64, positive=False):
    """A numpy array (from a drawn seed) of a drawn or given shape."""
    if shape is None:
        ndim = draw(st.integers(min_dims, max_dims))
        shape = tuple(draw(st.integers(1, SIDE)) for _ in range(ndim))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    if dtype == np.int64:
        return rng.integers(-9, 10, size=shape)
    x = rng.standard_normal(shape)
    return np.abs(x) + 0.1 if positive else x


@st.composite
def layouts(draw, array):
    """``array`` on the cuda device as a strided view: as is, transposed or sliced."""
    kind = draw(st.sampled_from(["contiguous", "transposed", "sliced"]))
    if kind == "transposed" and array.ndim >= 2:
        t = minitorch.tensor(np.ascontiguousarray(array.T)).to("cuda").T
    elif kind == "sliced":
        wide = np.repeat(array[..., None], 2, axis=-1).reshape(array.shape[:-1] + (-1,))
        t = minitorch.tensor(wide).to("cuda")[..., ::2]
    else:
        t = minitorch.tensor(array).to("cuda")
    assert t.shape == array.shape
    return t


def on_device(array) -> minitorch.Tensor:
    return minitorch.tensor(array).to("cuda")
