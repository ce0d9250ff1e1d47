"""Run a test on every backend: ``on(backend)`` is a context in which ``T(values)`` makes tensors there.

The three CPU backends are chosen with ``use_backend``; ``cuda`` (Numba's
simulator in tests) is a device, so its tensors are made with ``device="cuda"``.
"""

from __future__ import annotations

import contextlib

import numpy as np

import minitorch as mt

BACKENDS = ["python", "numpy", "numba", "cuda"]


@contextlib.contextmanager
def on(backend: str):
    """Yield a tensor factory for ``backend``."""
    device = "cuda" if backend == "cuda" else "cpu"

    def make(values, dtype=None, requires_grad=False):
        array = np.asarray(values)
        if dtype is None and array.dtype.kind == "f":
            dtype = array.dtype.name
        return mt.tensor(array, dtype=dtype, requires_grad=requires_grad, device=device)

    if backend == "cuda":
        yield make
    else:
        with mt.use_backend(backend):
            yield make
