"""Exercise 7.11's programs: the graded suite (plans better than the greedy fuser's exist) and traps.

``SUITE`` is what the outcome is counted on: each program has a better plan than the
greedy grouping of 7.2 (a chain recomputed in the two groups that read it, the cut
between an anchor's epilogue and a reduction's prologue put where the value is small,
a cheap op *not* recomputed into four groups), except ``mlp``, where greedy is best.
``TRAPS`` are programs on which a careless plan proposes an illegal group or loses a
value: graph outputs inside chains, opaque ops, an anchor's computed operands, two
reductions in a row, integers, views. Inputs hold NaN, inf and -0.0 where a value
can take them.
"""

from __future__ import annotations

import numpy as np

import minitorch
from minitorch import dispatch


def data(shape, k=0):
    """Deterministic float32 values in about [-2, 2], different for each ``k``."""
    n = int(np.prod(shape))
    return (
        (np.sin(np.arange(n, dtype=np.float64) * 0.7 + k) * 2.0).astype(np.float32).reshape(shape)
    )


def hard(shape, k=0):
    """Like :func:`data` with NaN, inf, -inf and -0.0 in place of some values."""
    a = data(shape, k).reshape(-1)
    a[3::17], a[5::19], a[7::23], a[11::29] = np.nan, np.inf, -np.inf, -0.0
    return a.reshape(shape)


# ---------------------------------------------------------------- the suite


def softmax(x):
    e = (x - x.max(1, keepdims=True)).exp()  # read by the sum and by the division
    return e / e.sum(1, keepdims=True)


def log_softmax(x):
    d = x - x.max(1, keepdims=True)  # read by the exp's sum and by the result
    return d - d.exp().sum(1, keepdims=True).log()


def layer_norm(x, g, b):
    n = 1.0 / x.shape[1]
    d = x - x.sum(1, keepdims=True) * n  # read by the variance and by the result
    var = (d * d).sum(1, keepdims=True) * n
    return d / (var + 1e-5).sqrt() * g + b


def two_heads(x, a, b):
    y = x * a + b  # a chain read by two outputs
    return y.sigmoid(), y.tanh()


def attention(q, k, v):
    s = (q @ k.permute(1, 0)) * 0.125
    e = (s - s.max(1, keepdims=True)).exp()
    return (e / e.sum(1, keepdims=True)) @ v


def active_units(x, w, b):
    return ((x @ w + b) > 0.0).sum(1)  # cut after the comparison: a bool is a quarter of a float


def residual_norm(x, w):
    h = (x @ w).relu() + x  # the epilogue reads x, which the matmul reads anyway
    return (h * h).sum(1)


def fan_out(x, y):
    p = x + y  # cheap, and read by four groups: recomputing it reads x and y four times
    return (p * 2.0).exp(), (p * 3.0).exp(), (p * 0.5).exp(), (p * -1.0).exp()


def mlp(x, w1, b1, w2, b2):
    return ((x @ w1 + b1).relu() @ w2 + b2).relu()  # greedy is already best


R, C = 48, 40  # rows, columns

SUITE = {
    "softmax": (softmax, (data((R, C)),)),
    "log_softmax": (log_softmax, (data((R, C), 1),)),
    "layer_norm": (layer_norm, (data((R, C), 2), data((C,), 3), data((C,), 4))),
    "two_heads": (two_heads, (data((R, C), 5), data((C,), 6), data((C,), 7))),
    "attention": (attention, (data((R, 16), 8), data((R, 16), 9), data((R, 16), 10))),
    "active_units": (active_units, (data((R, C), 11), data((C, C), 12), data((C,), 13))),
    "residual_norm": (residual_norm, (data((R, C), 14), data((C, C), 15) * 0.25)),
    "fan_out": (fan_out, (data((R, C), 16), data((R, C), 17))),
    "mlp": (
        mlp,
        (data((R, C), 18), data((C, C), 19), data((C,), 20), data((C, 8), 21), data((8,), 22)),
    ),
}


# ---------------------------------------------------------------- traps


def outputs_inside(x, y):
    a = (x * y).exp()  # an output, and read by the chain below
    b = (a + 1.0).log()
    return b * a, a, (b - y).abs()


def opaque_between(x):
    h = (x * 2.0).exp()
    s = dispatch("softmax", h, axis=1)  # opaque: never in a group
    return (s * h + 1.0).sqrt(), (s - x).relu()


def anchor_operands(x, w):
    xs = (x * 0.5).tanh()  # the matmul's operand: stays in memory
    h = (xs @ w + xs.sum(1, keepdims=True)).relu()
    return h * xs[:, :8].sum(1, keepdims=True), xs


def two_reductions(x):
    m = x.max(1, keepdims=True)
    s = (x - m).exp().sum(1, keepdims=True)
    t = (s * 2.0).sum(0)  # a reduction of a reduction
    return s.log() + m, t, (x / s).min(0)


def integers(n, m, c):
    a = n * m + 3
    big = minitorch.where(c, a, -a).abs()
    return big.sum(1), (big > 5).sum(0), big.max(1, keepdims=True) - a


def views(x, y):
    t = (x.permute(1, 0) * 2.0).exp()  # a permuted read
    u = t.reshape(4, -1).sum(1)
    w = (y.expand(3, 10, 8) + t.reshape(10, 8)).relu()
    return u, w[:, ::2].sum(2), t[1:4].permute(1, 0)


def broadcast_back(x):
    s = x.sum(1, keepdims=True)
    m = x.max(1, keepdims=True)
    return (x / s) * m - (x - m).exp(), s.sqrt()


TRAPS = {
    "outputs_inside": (outputs_inside, (hard((6, 8)), hard((6, 8), 1))),
    "opaque_between": (opaque_between, (hard((6, 8), 2),)),
    "anchor_operands": (anchor_operands, (hard((6, 12), 3), data((12, 12), 4))),
    "two_reductions": (two_reductions, (hard((6, 8), 5),)),
    "integers": (
        integers,
        (
            np.arange(-24, 24, dtype=np.int64).reshape(6, 8),
            np.resize(np.array([3, -1, 0, 7], np.int64), (6, 8)),
            np.arange(48).reshape(6, 8) % 3 == 0,
        ),
    ),
    "views": (views, (hard((8, 10), 6), hard((10, 8), 7))),
    "broadcast_back": (broadcast_back, (hard((6, 8), 8),)),
}
