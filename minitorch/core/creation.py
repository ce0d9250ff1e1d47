"""Making tensors: from data, filled, ranges and seeded random numbers."""

from __future__ import annotations

import numpy as np

from . import dtypes as dt
from .args import as_sizes
from .errors import OpError
from .registry import dispatch
from .tensor import Tensor

_rng = [np.random.default_rng(0)]


def manual_seed(seed: int) -> None:
    """Seed the generator behind :func:`rand` and :func:`randn` (default seed: 0)."""
    _rng[0] = np.random.default_rng(seed)


def _shape(shape, op: str) -> tuple[int, ...]:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return as_sizes(op, "shape", shape)


def tensor(data, dtype=None, requires_grad: bool = False, device: str = "cpu") -> Tensor:
    """A tensor holding a copy of ``data`` (numbers, nested lists or a numpy array).

    Floats default to float32, ints to int64, bools to bool; a float64 numpy
    array stays float64.
    """
    return Tensor(data, dtype=dtype, requires_grad=requires_grad, device=device)


def full(shape, value, dtype=None, requires_grad=False, device="cpu") -> Tensor:
    dtype = dt.as_dtype(dtype, "full")
    return Tensor(
        np.full(_shape((shape,), "full"), value, dtype=dtype),
        requires_grad=requires_grad,
        device=device,
    )


def zeros(*shape, dtype=None, requires_grad=False, device="cpu") -> Tensor:
    return full(_shape(shape, "zeros"), 0, dtype, requires_grad, device)


def ones(*shape, dtype=None, requires_grad=False, device="cpu") -> Tensor:
    return full(_shape(shape, "ones"), 1, dtype, requires_grad, device)


def zeros_like(x: Tensor) -> Tensor:
    return zeros(x.shape, dtype=x.dtype, device=x.device)


def ones_like(x: Tensor) -> Tensor:
    return ones(x.shape, dtype=x.dtype, device=x.device)


def arange(start, stop=None, step=1, dtype=None, device="cpu") -> Tensor:
    """Like ``numpy.arange``; int arguments give int64 unless ``dtype`` says otherwise."""
    if stop is None:
        start, stop = 0, start
    for name, v in (("start", start), ("stop", stop), ("step", step)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.number)):
            raise OpError("arange", f"{name} must be a number, got {v!r}")
    if step == 0 or step != step:
        raise OpError("arange", f"step must be non-zero, got {step!r}", hint="e.g. step=1")
    values = np.arange(start, stop, step)
    if dtype is None:
        dtype = dt.int64 if values.dtype.kind in "iu" else dt.float32
    return Tensor(values, dtype=dtype, device=device)


def rand(*shape, dtype=None, requires_grad=False, device="cpu") -> Tensor:
    """Uniform on [0, 1), from the seeded generator (see :func:`manual_seed`)."""
    values = _rng[0].random(_shape(shape, "rand"))
    return Tensor(
        values, dtype=dt.as_dtype(dtype, "rand"), requires_grad=requires_grad, device=device
    )


def randn(*shape, dtype=None, requires_grad=False, device="cpu") -> Tensor:
    """Standard normal, from the seeded generator (see :func:`manual_seed`)."""
    values = _rng[0].standard_normal(_shape(shape, "randn"))
    return Tensor(
        values, dtype=dt.as_dtype(dtype, "randn"), requires_grad=requires_grad, device=device
    )


def where(condition: Tensor, a, b) -> Tensor:
    """``a`` where ``condition`` holds, else ``b`` (broadcasting all three)."""
    like = a if isinstance(a, Tensor) else b if isinstance(b, Tensor) else condition
    a, b = like._lift(a), like._lift(b)
    common = dt.promote(a.dtype, b.dtype)
    cond = condition if condition.dtype == dt.bool_ else condition != 0
    return dispatch("where", cond, a.astype(common), b.astype(common))
