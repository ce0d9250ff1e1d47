"""``exp``, ``tanh`` and ``sigmoid`` for float32 that LLVM can vectorise (chapter 7).

Numba compiles ``math.exp`` to a call into the C library, one element at a time:
pip's llvmlite has no SVML, so a loop calling it cannot use SIMD. These versions
use only arithmetic, ``floor``, ``min``/``max`` and one bit cast, all of which
LLVM vectorises once the function is inlined into the generated loop.

``exp`` is the textbook range reduction: ``x = k ln2 + r`` with ``|r| <= ln2/2``,
``e^r`` from a degree-6 polynomial, ``2^k`` built directly as a float's exponent
bits (split in two factors so that subnormal results and overflow to inf come out
right). Measured error against float64 ``exp``: at most about 2 ulp; NaN, +-inf
and -0 behave as numpy's do. ``tanh`` uses ``1 - 2/(e^{2|x|}+1)`` away from 0
and its odd Taylor series near 0, where that form would cancel.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from ..core.registry import get_op

VERSION = 1  # part of every generated module that uses these: a change recompiles them

# The ops whose ``OpDef.vector`` names a function here: a float32 generated kernel calls it
# instead of the scalar libm one.


@intrinsic
def _f32_from_bits(typingctx, bits):
    """Reinterpret an int32's bits as a float32 (LLVM ``bitcast``, no conversion)."""
    if bits != types.int32:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.FloatType())

    return types.float32(types.int32), codegen


_F = np.float32
_LOG2E = _F(1.4426950408889634)
_LN2_HI, _LN2_LO = _F(0.693359375), _F(-2.12194440e-4)  # ln 2 split: k * _LN2_HI is exact
_LO, _HI = _F(-104.0), _F(89.0)  # beyond these exp is 0 or inf in float32
_ONE, _TWO, _HALF = _F(1.0), _F(2.0), _F(0.5)
_C2, _C3, _C4, _C5, _C6 = _F(1 / 2), _F(1 / 6), _F(1 / 24), _F(1 / 120), _F(1 / 720)
# tanh near 0: x - x^3/3 + 2x^5/15 - 17x^7/315 + 62x^9/2835 - 1382x^11/155925
_T3, _T5, _T7 = _F(-1 / 3), _F(2 / 15), _F(-17 / 315)
_T9, _T11 = _F(62 / 2835), _F(-1382 / 155925)
_TANH_SMALL = _F(0.4)  # below this the series is used (next term < 1e-7 relative)


@njit(error_model="numpy", fastmath={"contract"})
def vexp(x):
    c = min(max(x, _LO), _HI)
    k = np.floor(c * _LOG2E + _HALF)
    r = c - k * _LN2_HI - k * _LN2_LO
    p = _ONE + r * (_ONE + r * (_C2 + r * (_C3 + r * (_C4 + r * (_C5 + r * _C6)))))
    ki = np.int32(k)
    h = ki >> 1  # 2^k = 2^h * 2^(k-h): each factor is a normal float
    s1 = _f32_from_bits(np.int32((h + 127) << 23))
    s2 = _f32_from_bits(np.int32((ki - h + 127) << 23))
    e = p * s1 * s2
    return x if x != x else e


@njit(error_model="numpy", fastmath={"contract"})
def vtanh(x):
    a = abs(x)
    big = _ONE - _TWO / (vexp(_TWO * a) + _ONE)
    big = big if x >= 0 else -big
    x2 = x * x
    small = x * (_ONE + x2 * (_T3 + x2 * (_T5 + x2 * (_T7 + x2 * (_T9 + x2 * _T11)))))  # keeps -0
    return small if a < _TANH_SMALL else big


@njit(error_model="numpy", fastmath={"contract"})
def vsigmoid(x):
    return _ONE / (_ONE + vexp(-x))


def usable(sub) -> bool:
    """May a generated kernel for group ``sub`` call these (every such op float32 in, out)?"""
    for n in sub.ops:
        if get_op(n.op).vector:
            dtypes = {np.dtype(n.spec.dtype)} | {np.dtype(i.spec.dtype) for i in n.inputs}
            if dtypes != {np.dtype(np.float32)}:
                return False
    return True
