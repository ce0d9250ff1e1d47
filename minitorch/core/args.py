"""Shared argument normalisation: ints, sizes, axes and flags, checked once for every op.

Each helper names the op and the argument it rejects and says what would work,
so a float where an int is needed (``reshape(2.9, 3)``) or a string axis fails
at the call, not deep inside a kernel.
"""

from __future__ import annotations

import numpy as np

from .errors import OpError


def as_int(op: str, name: str, value) -> int:
    """``value`` as a Python int; bools, floats and strings are refused (no silent truncation)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise OpError(
            op,
            f"{name} must be an int, got {value!r} ({type(value).__name__})",
            hint=f"pass whole numbers, e.g. int({value!r})" if _is_number(value) else None,
        )
    return int(value)


def as_ints(op: str, name: str, values) -> tuple[int, ...]:
    if not isinstance(values, (tuple, list)):
        values = (values,)
    return tuple(as_int(op, name, v) for v in values)


def as_sizes(op: str, name: str, values, allow_minus_one: bool = False) -> tuple[int, ...]:
    """A shape: non-negative ints (and ``-1`` for one inferred size where ``allow_minus_one``)."""
    sizes = as_ints(op, name, values)
    for n in sizes:
        if n < 0 and not (allow_minus_one and n == -1):
            raise OpError(
                op,
                f"{name} {sizes} has a negative size {n}",
                hint="sizes are >= 0" + ("; -1 (once) infers one size" if allow_minus_one else ""),
            )
    return sizes


def as_bool(op: str, name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise OpError(op, f"{name} must be True or False, got {value!r}")
    return bool(value)


def as_axis(op: str, axis: int, ndim: int) -> int:
    """One axis in ``[-ndim, ndim)`` made non-negative; a 0-d tensor takes 0 or -1 (as PyTorch)."""
    axis = as_int(op, "axis", axis)
    top = max(ndim, 1)
    if not -top <= axis < top:
        raise OpError(
            op,
            f"axis {axis} is out of range for a tensor with {ndim} dimension(s)",
            hint=f"use an axis in [-{top}, {top - 1}]",
        )
    return axis % top if ndim else 0


def _is_number(value) -> bool:
    return isinstance(value, (float, np.floating))
