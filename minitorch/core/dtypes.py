"""The four dtypes and the promotion rule.

Python scalars are "weak": ``x_float32 * 2.0`` stays float32, as in JAX and PyTorch.
"""

from __future__ import annotations

import numpy as np

from .errors import OpError

float32 = np.dtype("float32")
float64 = np.dtype("float64")
int64 = np.dtype("int64")
bool_ = np.dtype("bool")

DTYPES = {"float32": float32, "float64": float64, "int64": int64, "bool": bool_}
_RANK = {bool_: 0, int64: 1, float32: 2, float64: 3}
default_float = float32


def as_dtype(dtype, op: str = "tensor") -> np.dtype:
    """Normalise ``dtype`` (a name, a numpy dtype or a minitorch dtype)."""
    if dtype is None:
        return default_float
    try:
        d = np.dtype(dtype)
    except TypeError:
        d = None
    if d not in _RANK:
        raise OpError(
            op,
            f"unsupported dtype {dtype!r}",
            hint=f"use one of {', '.join(DTYPES)}",
        )
    return d


def promote(*dtypes: np.dtype) -> np.dtype:
    """The widest of ``dtypes`` (bool < int64 < float32 < float64)."""
    return max(dtypes, key=_RANK.__getitem__)


def is_float(dtype: np.dtype) -> bool:
    return dtype in (float32, float64)


def scalar_dtype(value) -> np.dtype:
    if isinstance(value, (bool, np.bool_)):
        return bool_
    if isinstance(value, (int, np.integer)):
        return int64
    return float64 if isinstance(value, np.float64) else float32
