"""The built-in op set: one registration per op, with its shape and dtype rule.

Elementwise ops carry a ``scalar`` formula: the python backend maps it over
strided loops, the Numba backend compiles it, the code generator (chapter 7)
fuses chains of them, and constant folding (chapter 6) evaluates it.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from ..tensor.indexing import broadcast_shape
from ..tensor.views import index_error, permute_error
from . import dtypes as dt
from .errors import OpError
from .registry import REQUIRED, OpKind, Spec, register_op

# ---------------------------------------------------------------- elementwise


def _unary_infer(result: str):
    def infer(a: Spec) -> Spec:
        dtype = a.dtype
        if result == "float" and not dt.is_float(dtype):
            dtype = dt.float32
        return Spec(a.shape, dtype, a.device)

    return infer


def _relu(x):
    return x if x > 0 else 0.0 * x


def _sigmoid(x):
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def _log(x):
    return math.log(x) if x > 0 else (-math.inf if x == 0 else math.nan)


def _sqrt(x):
    return math.sqrt(x) if x >= 0 else math.nan


def _recip(x):
    return 1.0 / x if x != 0 else math.copysign(math.inf, x)


UNARY = {
    # name: (scalar formula, numpy function, result dtype rule)
    "neg": (operator.neg, np.negative, "same"),
    "abs": (abs, np.abs, "same"),
    "exp": (math.exp, np.exp, "float"),
    "log": (_log, np.log, "float"),
    "sqrt": (_sqrt, np.sqrt, "float"),
    "recip": (_recip, np.reciprocal, "float"),
    "tanh": (math.tanh, np.tanh, "float"),
    "sigmoid": (_sigmoid, None, "float"),
    "relu": (_relu, None, "same"),
}

for _name, (_scalar, _np, _rule) in UNARY.items():
    register_op(_name, OpKind.ELEMENTWISE, 1, _unary_infer(_rule), scalar=_scalar)


def _cast_infer(a: Spec, dtype) -> Spec:
    return Spec(a.shape, dtype, a.device)


register_op(
    "cast",
    OpKind.ELEMENTWISE,
    1,
    _cast_infer,
    attrs={"dtype": REQUIRED},
    normalize=lambda a, dtype: {"dtype": dt.as_dtype(dtype, "cast")},
)

# ---------------------------------------------------------------- broadcasting


def _broadcast_specs(name: str, *specs: Spec) -> tuple[int, ...]:
    devices = {s.device for s in specs}
    if len(devices) > 1:
        raise OpError(
            name,
            f"inputs are on different devices {sorted(devices)}",
            hint="move them to one device first with .to(device)",
        )
    shape = specs[0].shape
    for s in specs[1:]:
        try:
            shape = broadcast_shape(shape, s.shape)
        except OpError as e:
            raise OpError(name, e.problem, e.hint) from None
    return shape


def _binary_infer(name: str, result: str):
    def infer(a: Spec, b: Spec) -> Spec:
        shape = _broadcast_specs(name, a, b)
        if result == "bool":
            dtype = dt.bool_
        else:
            dtype = dt.promote(a.dtype, b.dtype)
            if result == "float" and not dt.is_float(dtype):
                dtype = dt.float32
        return Spec(shape, dtype, a.device)

    return infer


def _div(a, b):
    if b == 0:
        return math.nan if a == 0 or a != a else math.copysign(math.inf, a) * math.copysign(1, b)
    return a / b


def _pow(a, b):
    try:
        return a**b
    except (ZeroDivisionError, OverflowError, ValueError):
        return math.nan


BINARY = {
    "add": (operator.add, np.add, "same"),
    "sub": (operator.sub, np.subtract, "same"),
    "mul": (operator.mul, np.multiply, "same"),
    "div": (_div, np.divide, "float"),
    "pow": (_pow, np.power, "same"),
    "maximum": (max, np.maximum, "same"),
    "minimum": (min, np.minimum, "same"),
    "eq": (operator.eq, np.equal, "bool"),
    "ne": (operator.ne, np.not_equal, "bool"),
    "lt": (operator.lt, np.less, "bool"),
    "le": (operator.le, np.less_equal, "bool"),
    "gt": (operator.gt, np.greater, "bool"),
    "ge": (operator.ge, np.greater_equal, "bool"),
}

for _name, (_scalar, _np, _rule) in BINARY.items():
    register_op(_name, OpKind.BROADCAST, 2, _binary_infer(_name, _rule), scalar=_scalar)


def _where_infer(c: Spec, a: Spec, b: Spec) -> Spec:
    return Spec(_broadcast_specs("where", c, a, b), dt.promote(a.dtype, b.dtype), a.device)


register_op("where", OpKind.BROADCAST, 3, _where_infer, scalar=lambda c, a, b: a if c else b)

NUMPY_FUNCS = {n: f for n, (_, f, _) in {**UNARY, **BINARY}.items() if f is not None}

# ---------------------------------------------------------------- reductions


def normalize_axis(op: str, axis, ndim: int) -> tuple[int, ...]:
    """``None`` means every axis; negative axes count from the end; sorted, no repeats."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = []
    for ax in axes:
        if not -ndim <= ax < max(ndim, 1) or (ndim == 0 and ax not in (0, -1)):
            raise OpError(
                op,
                f"axis {ax} is out of range for a tensor with {ndim} dimension(s)",
                hint=f"use an axis in [-{ndim}, {ndim - 1}]"
                if ndim
                else "a 0-d tensor takes axis=None",
            )
        ax = ax % ndim if ndim else 0
        if ax in out:
            raise OpError(op, f"axis {ax} is repeated in {axes}")
        out.append(ax)
    return tuple(sorted(out)) if ndim else ()


def reduced_shape(shape, axis, keepdims):
    if keepdims:
        return tuple(1 if d in axis else n for d, n in enumerate(shape))
    return tuple(n for d, n in enumerate(shape) if d not in axis)


def _reduce_infer(name: str, result: str):
    def infer(a: Spec, axis, keepdims) -> Spec:
        if name in ("max", "min", "argmax") and any(a.shape[d] == 0 for d in axis):
            raise OpError(name, f"cannot reduce an empty dimension of shape {a.shape}")
        dtype = {
            "same": a.dtype,
            "float": a.dtype if dt.is_float(a.dtype) else dt.float32,
            "int": dt.int64,
        }[result]
        if name == "sum" and a.dtype == dt.bool_:
            dtype = dt.int64
        return Spec(reduced_shape(a.shape, axis, keepdims), dtype, a.device)

    return infer


def _reduce_normalize(name: str):
    def normalize(a: Spec, axis, keepdims):
        return {"axis": normalize_axis(name, axis, a.ndim), "keepdims": bool(keepdims)}

    return normalize


REDUCE = {
    # name: (fold formula, start value, numpy function, result dtype rule)
    "sum": (operator.add, 0, np.sum, "same"),
    "max": (max, -math.inf, np.max, "same"),
    "min": (min, math.inf, np.min, "same"),
    "mean": (None, None, np.mean, "float"),
}
for _name, (_fold, _start, _np, _rule) in REDUCE.items():
    register_op(
        _name,
        OpKind.REDUCE,
        1,
        _reduce_infer(_name, _rule),
        attrs={"axis": None, "keepdims": False},
        normalize=_reduce_normalize(_name),
        scalar=_fold,
    )
    NUMPY_FUNCS[_name] = _np


def _argmax_normalize(a: Spec, axis, keepdims):
    if axis is None:
        raise OpError("argmax", "needs an axis", hint="pass axis=-1, or reshape(-1) first")
    return {"axis": normalize_axis("argmax", axis, a.ndim)[:1], "keepdims": bool(keepdims)}


register_op(
    "argmax",
    OpKind.REDUCE,
    1,
    _reduce_infer("argmax", "int"),
    attrs={"axis": REQUIRED, "keepdims": False},
    normalize=_argmax_normalize,
)

# ---------------------------------------------------------------- views


def _permute_normalize(a: Spec, order):
    order = tuple(int(o) for o in order)
    if sorted(order) != list(range(a.ndim)):
        raise permute_error(order, a.ndim)
    return {"order": order}


register_op(
    "permute",
    OpKind.VIEW,
    1,
    lambda a, order: Spec(tuple(a.shape[d] for d in order), a.dtype, a.device),
    attrs={"order": REQUIRED},
    normalize=_permute_normalize,
)


def _reshape_normalize(a: Spec, shape):
    shape = tuple(int(n) for n in shape)
    if shape.count(-1) > 1:
        raise OpError("reshape", f"only one dimension can be -1, got {shape}")
    known = int(np.prod([n for n in shape if n != -1], dtype=np.int64))
    if -1 in shape:
        if known == 0 or a.size % known:
            raise OpError(
                "reshape",
                f"cannot infer -1 in {shape} for a tensor of shape {a.shape} ({a.size} elements)",
            )
        shape = tuple(a.size // known if n == -1 else n for n in shape)
    if any(n < 0 for n in shape) or int(np.prod(shape, dtype=np.int64)) != a.size:
        raise OpError(
            "reshape",
            f"cannot reshape a tensor of shape {a.shape} ({a.size} elements) to {shape}",
            hint="the new shape must have the same number of elements; use -1 for one inferred size",
        )
    return {"shape": shape}


register_op(
    "reshape",
    OpKind.VIEW,
    1,
    lambda a, shape: Spec(shape, a.dtype, a.device),
    attrs={"shape": REQUIRED},
    normalize=_reshape_normalize,
)


def _expand_normalize(a: Spec, shape):
    shape = tuple(int(n) for n in shape)
    ok = len(shape) >= a.ndim and all(
        n == m or m == 1 for n, m in zip(shape[len(shape) - a.ndim :], a.shape)
    )
    if not ok:
        raise OpError(
            "expand",
            f"cannot expand shape {a.shape} to {shape}",
            hint="only dimensions of size 1 (or new leading ones) can grow",
        )
    return {"shape": shape}


register_op(
    "expand",
    OpKind.VIEW,
    1,
    lambda a, shape: Spec(shape, a.dtype, a.device),
    attrs={"shape": REQUIRED},
    normalize=_expand_normalize,
)


def _getitem_infer(a: Spec, key) -> Spec:
    shape = []
    for d, k in enumerate(key):
        if isinstance(k, slice):
            shape.append(len(range(*k.indices(a.shape[d]))))
        elif not -a.shape[d] <= k < a.shape[d]:
            raise index_error(k, d, a.shape[d])
    return Spec(tuple(shape) + a.shape[len(key) :], a.dtype, a.device)


def _getitem_normalize(a: Spec, key):
    if not isinstance(key, tuple):
        key = (key,)
    if any(k is Ellipsis for k in key):
        i = key.index(Ellipsis)
        key = key[:i] + (slice(None),) * (a.ndim - len(key) + 1) + key[i + 1 :]
    for k in key:
        if not isinstance(k, (slice, int, np.integer)) or isinstance(k, bool):
            raise OpError(
                "getitem",
                f"unsupported index {k!r}",
                hint="use ints, slices and ... (basic indexing); use where() to select by mask",
            )
    if len(key) > a.ndim:
        raise OpError("getitem", f"too many indices ({len(key)}) for shape {a.shape}")
    return {"key": tuple(k if isinstance(k, slice) else int(k) for k in key)}


register_op(
    "getitem",
    OpKind.VIEW,
    1,
    _getitem_infer,
    attrs={"key": REQUIRED},
    normalize=_getitem_normalize,
)

register_op("contiguous", OpKind.VIEW, 1, lambda a: a)

# ---------------------------------------------------------------- anchors


def _matmul_infer(a: Spec, b: Spec) -> Spec:
    if a.ndim < 2 or b.ndim < 2 or a.shape[-1] != b.shape[-2]:
        raise OpError(
            "matmul",
            f"cannot multiply shapes {a.shape} and {b.shape}",
            hint="both need 2+ dims and a.shape[-1] == b.shape[-2]; "
            "reshape a vector to (n, 1) or (1, n)",
        )
    batch = _broadcast_specs(
        "matmul", Spec(a.shape[:-2], a.dtype, a.device), Spec(b.shape[:-2], b.dtype, b.device)
    )
    return Spec(batch + (a.shape[-2], b.shape[-1]), dt.promote(a.dtype, b.dtype), a.device)


register_op("matmul", OpKind.ANCHOR, 2, _matmul_infer)
