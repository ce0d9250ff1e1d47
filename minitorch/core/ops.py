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
from .args import as_axis, as_bool, as_int, as_ints, as_sizes
from .errors import OpError
from .registry import REQUIRED, OpKind, Spec, get_op, register_kernel, register_op

# ---------------------------------------------------------------- elementwise


def _unary_infer(name: str, result: str):
    def infer(a: Spec) -> Spec:
        if name == "neg" and a.dtype == dt.bool_:
            raise OpError("neg", "cannot negate a bool tensor", hint="use x == False (logical not)")
        dtype = a.dtype
        if result == "float" and not dt.is_float(dtype):
            dtype = dt.float32
        return Spec(a.shape, dtype, a.device)

    return infer


def _relu(x):
    # 0.0, not 0.0 * x: that is NaN at x = -inf. NaN stays NaN, as in numpy.maximum(x, 0).
    return x if (x > 0 or x != x) else 0.0


def _exp(x):
    # math.exp raises OverflowError where IEEE (and every other backend) gives inf.
    return math.inf if x > 709.782712893384 else math.exp(x)


def _sigmoid(x):
    x = x * 1.0  # a bool or int input computes in float (numpy's -True is an error)
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
    "exp": (_exp, np.exp, "float"),
    "log": (_log, np.log, "float"),
    "sqrt": (_sqrt, np.sqrt, "float"),
    "recip": (_recip, np.reciprocal, "float"),
    "tanh": (math.tanh, np.tanh, "float"),
    "sigmoid": (_sigmoid, None, "float"),
    "relu": (_relu, None, "same"),
}

# ``scalar`` as one inline expression for chapter 7's generated loops (exactly ``scalar``;
# ``tests/test_ch7_codegen.py`` checks each): arguments are {0}, {1}...; {zero}, {one}
# are typed constants. Ops without one are called by name from the generated module.
EXPR = {
    "neg": "(-{0})",
    "abs": "({0} if {0} >= 0 else -{0})",
    "add": "({0} + {1})",
    "sub": "({0} - {1})",
    "mul": "({0} * {1})",
    "div": "({0} / {1})",  # IEEE with error_model="numpy": x/0 = +-inf, 0/0 = nan
    "maximum": "({0} if ({0} >= {1} or {0} != {0}) else {1})",
    "minimum": "({0} if ({0} <= {1} or {0} != {0}) else {1})",
    "relu": "({0} if ({0} > 0 or {0} != {0}) else {zero})",  # a typed 0 keeps SIMD
    "sqrt": "math.sqrt({0})",  # LLVM's sqrt instruction (vectorises); nan below 0 under numpy errors
    "recip": "({one} / {0})",
    "eq": "({0} == {1})",
    "ne": "({0} != {1})",
    "lt": "({0} < {1})",
    "le": "({0} <= {1})",
    "gt": "({0} > {1})",
    "ge": "({0} >= {1})",
    "where": "({1} if {0} else {2})",
    "cast": "{0}",  # the statement's cast to the node's dtype does the work
}
# Numba computes these with a scalar libm call (no SVML in pip's llvmlite): a loop over
# them does not vectorise, numpy's ufuncs do; chapter 7's cost model keeps them on numpy.
TRANSCENDENTAL = ("exp", "log", "tanh", "sigmoid", "pow")
# ...except these three in float32, which fusion/vecmath.py computes with vector instructions
VECTOR = {"exp": "vexp", "tanh": "vtanh", "sigmoid": "vsigmoid"}

for _name, (_scalar, _np, _rule) in UNARY.items():
    register_op(
        _name, OpKind.ELEMENTWISE, 1, _unary_infer(_name, _rule), scalar=_scalar, numpy=_np,
        expr=EXPR.get(_name), transcendental=_name in TRANSCENDENTAL, vector=VECTOR.get(_name),
    )  # fmt: skip


def _cast_infer(a: Spec, dtype) -> Spec:
    return Spec(a.shape, dtype, a.device)


register_op(
    "cast",
    OpKind.ELEMENTWISE,
    1,
    _cast_infer,
    attrs={"dtype": REQUIRED},
    normalize=lambda a, dtype: {"dtype": dt.as_dtype(dtype, "cast")},
    expr=EXPR["cast"],
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
        if name == "pow" and a.dtype == b.dtype == dt.bool_:
            raise OpError("pow", "cannot raise a bool tensor to a bool power", hint="cast to int64")
        if name == "sub" and a.dtype == b.dtype == dt.bool_:
            raise OpError(
                "sub", "cannot subtract bool tensors", hint="use ne() for xor, or cast to int64"
            )
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
        r = a**b
    except (OverflowError, ZeroDivisionError):  # IEEE says +-inf (10.0**400, 0.0**-1)
        with np.errstate(all="ignore"):
            return float(np.power(np.float64(a), np.float64(b)))
    return math.nan if isinstance(r, complex) else r  # (-8.0) ** 0.5 is complex in Python


def _maximum(a, b):
    # NaN wins, as in numpy.maximum (the builtin max drops it depending on the order).
    return a if (a >= b or a != a) else b


def _minimum(a, b):
    return a if (a <= b or a != a) else b


BINARY = {
    "add": (operator.add, np.add, "same"),
    "sub": (operator.sub, np.subtract, "same"),
    "mul": (operator.mul, np.multiply, "same"),
    "div": (_div, np.divide, "float"),
    "pow": (_pow, np.power, "same"),
    "maximum": (_maximum, np.maximum, "same"),
    "minimum": (_minimum, np.minimum, "same"),
    "eq": (operator.eq, np.equal, "bool"),
    "ne": (operator.ne, np.not_equal, "bool"),
    "lt": (operator.lt, np.less, "bool"),
    "le": (operator.le, np.less_equal, "bool"),
    "gt": (operator.gt, np.greater, "bool"),
    "ge": (operator.ge, np.greater_equal, "bool"),
}

for _name, (_scalar, _np, _rule) in BINARY.items():
    register_op(
        _name, OpKind.BROADCAST, 2, _binary_infer(_name, _rule), scalar=_scalar, numpy=_np,
        expr=EXPR.get(_name), transcendental=_name in TRANSCENDENTAL,
    )  # fmt: skip


def _pow_check(a, b) -> None:
    # An int64 result cannot hold 2 ** -1; numpy refuses, Python would give a float.
    if not dt.is_float(a.dtype) and not dt.is_float(b.dtype) and b.size and (b.numpy() < 0).any():
        raise OpError(
            "pow",
            f"an integer tensor ({a.dtype.name}) to a negative integer power",
            hint="cast the base to float first: x.float() ** -1",
        )


get_op("pow").check = _pow_check
# only integer ** integer can refuse: float pow stays fusable and runs unchecked in plans
get_op("pow").check_if = lambda a, b: not dt.is_float(a.dtype) and not dt.is_float(b.dtype)


def _where_infer(c: Spec, a: Spec, b: Spec) -> Spec:
    return Spec(_broadcast_specs("where", c, a, b), dt.promote(a.dtype, b.dtype), a.device)


register_op(
    "where", OpKind.BROADCAST, 3, _where_infer, scalar=lambda c, a, b: a if c else b,
    expr=EXPR["where"],
)  # fmt: skip

# ---------------------------------------------------------------- reductions


def normalize_axis(op: str, axis, ndim: int) -> tuple[int, ...]:
    """``None`` means every axis; negative axes count from the end; sorted, no repeats.

    A 0-d tensor accepts axis 0 or -1 (as numpy and PyTorch do): there is nothing to fold.
    """
    if axis is None:
        return tuple(range(ndim))
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    out = []
    for ax in axes:
        ax = as_axis(op, ax, ndim)
        if ax in out and ndim:
            raise OpError(op, f"axis {ax} is repeated in {axes}", hint="name each axis once")
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
        return {
            "axis": normalize_axis(name, axis, a.ndim),
            "keepdims": as_bool(name, "keepdims", keepdims),
        }

    return normalize


REDUCE = {
    # name: (fold formula, start value, numpy function, result dtype rule)
    "sum": (operator.add, 0, np.sum, "same"),
    "max": (_maximum, -math.inf, np.max, "same"),
    "min": (_minimum, math.inf, np.min, "same"),
    "mean": (None, 0.0, np.mean, "float"),  # a sum, divided: no fold formula of its own
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
        numpy=_np,
        identity=_start,
    )


def _argmax_normalize(a: Spec, axis, keepdims):
    if isinstance(axis, tuple) and len(axis) == 1:  # normalised already: a traced node run again
        axis = axis[0]
    if axis is None or isinstance(axis, (tuple, list)):
        raise OpError(
            "argmax",
            f"axis must be one int, got {axis!r}",
            hint="pass axis=-1, or reshape(-1) first to search every element",
        )
    if a.ndim == 0:
        raise OpError("argmax", "needs at least one dimension", hint="reshape(1) first")
    return {
        "axis": normalize_axis("argmax", axis, a.ndim),
        "keepdims": as_bool("argmax", "keepdims", keepdims),
    }


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
    order = as_ints("permute", "order", order)
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
    shape = as_sizes("reshape", "shape", shape, allow_minus_one=True)
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
    shape = as_sizes("expand", "shape", shape)
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

# ---------------------------------------------------------------- index checks


def in_range(values: np.ndarray, size: int) -> bool:
    """Are all ``values`` (indices) in ``[0, size)``?"""
    return not values.size or (values.min() >= 0 and values.max() < size)


def check_range(op: str, what: str, values: np.ndarray, size: int, hint: str) -> None:
    """Refuse ``values`` (indices) outside ``[0, size)``, naming ``op`` and the first bad one."""
    if not in_range(values, size):
        bad = int(values.min()) if values.min() < 0 else int(values.max())
        raise OpError(op, f"{what} holds {bad}, outside [0, {size})", hint=hint)


def _index_check_infer(ids: Spec, size, caller, what, hint) -> Spec:
    if ids.dtype != dt.int64:
        raise OpError(caller, f"{what} must be int64 indices, got {ids.dtype.name}",
                      hint="make them with minitorch.tensor(values, dtype='int64')")  # fmt: skip
    return ids


def _index_check_normalize(ids: Spec, size, caller, what, hint) -> dict:
    size = as_int("index_check", "size", size)
    if size < 1:
        raise OpError("index_check", f"size must be >= 1, got {size}")
    for name, v in (("caller", caller), ("what", what), ("hint", hint)):
        if not isinstance(v, str):
            raise OpError("index_check", f"{name} must be a str, got {v!r}")
    return {"size": size, "caller": caller, "what": what, "hint": hint}


# ``index_check(ids, size=, caller=, what=, hint=)``: ``ids`` unchanged, once every value is
# in [0, size). A composite that reads indices (a loss's targets, a model's positions) calls
# it so that the check is a step of its graph: compiled plans run it too (OpDef.check).
register_op(
    "index_check",
    OpKind.OPAQUE,
    1,
    _index_check_infer,
    attrs={"size": REQUIRED, "caller": "index_check", "what": "ids", "hint": ""},
    normalize=_index_check_normalize,
    check=lambda ids, size, caller, what, hint: check_range(
        caller, what, ids.numpy(), size, hint or f"{what} index {size} entries, from 0"
    ),
)


@register_kernel("index_check", "*")
def _index_check_kernel(ids, out, **attrs):
    return ids  # the values, unchanged: the check ran before the kernel


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
