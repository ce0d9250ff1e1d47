"""Exercise 6.11's programs: the graded suite (redundancies the built-in passes keep) and traps.

Every input holds the values that break careless rules: NaN, inf, -inf, -0.0,
numbers near float32's overflow, a subnormal; int64's extremes and 2**53 + 1
(not a float64). ``SUITE`` is what the outcome is counted on; ``TRAPS`` are
programs where a rule that looks right changes some output bit.
"""

from __future__ import annotations

import numpy as np

import minitorch

F32 = np.array(
    [np.nan, np.inf, -np.inf, -0.0, 0.0, 3e38, -3e38, 1e-45, -2.5, 0.1, 1.0, -1.0], np.float32
)
I64 = np.array(
    [np.iinfo(np.int64).min, np.iinfo(np.int64).max, -1, 0, 1, 2**53 + 1]
    + [-(2**53) - 1, 7, -7, 2, 3, -3],
    np.int64,
)


def floats(shape, k=0):
    """The hard float32 values, rolled by ``k`` (so two inputs differ), repeated to ``shape``."""
    return np.resize(np.roll(F32, k), shape)


def ints(shape, k=0):
    return np.resize(np.roll(I64, k), shape)


def bools(shape, k=0):
    return np.resize(np.arange(12) % (2 + k) == 0, shape)


def weights(shape):
    """Moderate values (a weight matrix of hard values would make every output NaN)."""
    return np.linspace(-1.5, 2.0, int(np.prod(shape)), dtype=np.float32).reshape(shape)


def mlp(x, w, b):
    h = (x @ w + b).relu().relu()  # relu is idempotent
    m = h.maximum(h)  # maximum(h, h) is h
    return (m * -1.0) * -1.0  # x * -1 is neg(x), exactly: then neg(neg(x))


def l1_loss(x, y):
    d = x - (-y)  # x - (-y) is x + y, exactly
    return (-d).abs().abs().sum()  # abs(neg(d)) is abs(d); abs is idempotent


def masked(x, y, c):
    keep = minitorch.where(c, x, x)  # both branches the same
    true = minitorch.tensor(np.ones((3, 4), bool))  # a constant: where(all true, a, b) is a
    pick = minitorch.where(true, keep, y)
    return pick * y


def casts(x, n):
    there_and_back = x.astype(minitorch.float64).astype(minitorch.float32)  # float64 holds f32
    mask = (n > 0).astype(minitorch.int64).astype(minitorch.bool_)  # int64 holds bool
    return there_and_back * mask


def reductions(x, n):
    m = x.max(axis=1, keepdims=True)  # over a size-1 axis: a copy, bits included
    s = n.sum(axis=1, keepdims=True)  # integer sums are exact
    return m + s


def signs(x, y):
    p = (-x) * (-y)  # the signs cancel, exactly (rounding is symmetric)
    q = (x * -1.0).abs()  # abs(neg(x))
    return p + q


def views(x):
    a = x.permute(0, 1).abs().relu()  # an identity permute; relu(abs(x)) is abs(x) for floats
    return a.minimum(a) @ minitorch.tensor(weights((4, 3)))


# name -> (function, its inputs as numpy arrays)
SUITE = {
    "mlp": (mlp, (floats((3, 4)), weights((4, 5)), floats((5,), 3))),
    "l1_loss": (l1_loss, (floats((3, 4)), floats((3, 4), 5))),
    "masked": (masked, (floats((3, 4)), floats((3, 4), 7), bools((3, 4)))),
    "casts": (casts, (floats((3, 4)), ints((3, 4)))),
    "reductions": (reductions, (floats((3, 1, 4)), ints((3, 1, 4), 2))),
    "signs": (signs, (floats((3, 4)), floats((3, 4), 1))),
    "views": (views, (floats((3, 4)),)),
}


# ---------------------------------------------------------------- traps
# Each returns several outputs; a careless rule changes at least one bit of one of them.

F64 = np.array([0.1, 1e300, -1e-310, np.nan, -0.0, 2.0**60 + 1, -np.inf, 1 / 3], np.float64)
# Casting NaN, inf or a value out of int64's range to int64 is undefined (x86 and ARM differ):
# the casts to int64 get values that fit.
FINITE = np.array([0.5, -2.5, 1e10, -0.0, 3.7, -1e-45, 7.0, -0.75], np.float32)
BIG = np.array([2**53 + 1, -(2**53) - 1, 2**62 + 1, -7, 0, 3], np.int64)


def half_equal(shape):
    """Equal to ``floats(shape)`` at every other place (x - y is then +0.0 or NaN there)."""
    return np.where(
        np.arange(int(np.prod(shape))).reshape(shape) % 2, floats(shape), floats(shape, 3)
    )


def float64s(shape):
    return np.resize(F64, shape)


def cancel(x, n):
    return x - x, x * 0.0, 0.0 * x, x / x, n - n  # NaN and inf: not 0 (n - n is, for ints)


def lossy_casts(x, n, d, y):
    f32 = minitorch.float32
    a = y.astype(minitorch.int64).astype(f32)  # drops fractions and the sign of -0.0
    b = n.astype(minitorch.float64).astype(minitorch.int64)  # 2**53 + 1 is not a float64
    c = d.astype(f32).astype(minitorch.float64)  # 0.1 in float64 is not a float32
    return a, b, c, x.astype(minitorch.bool_).astype(f32)


def inverses(x):
    return x.log().exp(), x.exp().log(), (x * x).sqrt(), x.sqrt() * x.sqrt()


def reassociate(x):
    return (x * 2.0) * 0.5, (x + 1.0) - 1.0, (x * 0.1) * 3.0


def signed_zero(x, y):
    return -(x - y), 0.0 - x, x + 0.0, x - (-0.0), (x - y) + (y - x)


def int_extremes(n, m):
    return n.abs().relu(), (-n) / (-m), n * -1.0, n.abs().abs()


def float_sums(x):
    return x.sum(axis=1, keepdims=True), x.mean(axis=1, keepdims=True), x.sum(axis=1)


def broadcasts(x, c):
    return minitorch.where(c, x, x), x.maximum(x) + minitorch.zeros(2, 3, 4), x * 1.0


def same_spec_views(s):
    return s.permute(1, 0), s[::-1], s.T.T.permute(1, 0)


def nan_compares(x):
    return x == x, x.maximum(x.relu()), x.relu().abs(), x.abs().relu()


TRAPS = {
    "cancel": (cancel, (floats((3, 4)), ints((3, 4)))),
    "lossy_casts": (
        lossy_casts,
        (floats((3, 4)), np.resize(BIG, (3, 4)), float64s((3, 4)), np.resize(FINITE, (3, 4))),
    ),
    "inverses": (inverses, (floats((3, 4), 2),)),
    "reassociate": (reassociate, (floats((3, 4), 4),)),
    "signed_zero": (signed_zero, (floats((3, 4)), half_equal((3, 4)))),
    "int_extremes": (
        int_extremes,
        (ints((3, 4)), np.resize(np.array([1, -1, 2], np.int64), (3, 4))),
    ),
    "float_sums": (float_sums, (floats((3, 1, 4)),)),
    "broadcasts": (broadcasts, (floats((3, 4)), bools((2, 3, 4)))),
    "same_spec_views": (same_spec_views, (floats((4, 4)),)),
    "nan_compares": (nan_compares, (floats((3, 4), 6),)),
}
