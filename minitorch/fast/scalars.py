"""Per-element formulas that Numba can compile, one per elementwise op.

``core/ops.py`` holds each op's ``scalar`` formula. Most are plain Python
functions that Numba compiles as they are; Python builtins (``abs``, ``max``,
``operator.add``) and formulas that use ``try`` are replaced here by small
equivalents. :func:`scalar_source` says which function a kernel compiles.
"""

from __future__ import annotations

import math

from ..core.registry import OpDef


def neg(x):
    return -x


def abs_(x):
    return x if x >= 0 else -x


def add(a, b):
    return a + b


def sub(a, b):
    return a - b


def mul(a, b):
    return a * b


def pow_(a, b):
    return a**b


def exp(x):
    return math.exp(x)


def tanh(x):
    return math.tanh(x)


# op name -> replacement; ops not listed compile their own ``OpDef.scalar``
OWN = {
    "neg": neg,
    "abs": abs_,
    "exp": exp,
    "tanh": tanh,
    "add": add,
    "sub": sub,
    "mul": mul,
    "pow": pow_,
    "sum": add,  # max and min fold with their own scalar (core/ops.py's NaN-aware maximum)
}
COMPILABLE = {"relu", "sigmoid", "log", "sqrt", "recip", "div", "maximum", "minimum", "max", "min"}


def scalar_for(op: OpDef):
    """The plain Python function Numba compiles for ``op``, or None if it has none."""
    if op.name in OWN:
        return OWN[op.name]
    if op.name in COMPILABLE:
        return op.scalar
    return None
