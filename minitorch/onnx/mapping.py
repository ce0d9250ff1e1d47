"""How each registry op is written in ONNX: one emitter per op, kept on the op itself.

``@register_onnx("relu")`` stores ``emit(ctx, node, names) -> str`` as the
op's ``OpDef.onnx`` field, next to its kernels and backward rule; there is no
second op table. ``names`` are the ONNX value names of the node's inputs; the
emitter adds ONNX nodes with ``ctx.node`` and returns the name of the result.
The built-in ops use opset 18 (reductions take ``axes`` as an input there).
"""

from __future__ import annotations

import numpy as np

from ..core import dtypes as dt
from ..core.errors import OpError
from ..core.registry import get_op
from .context import OnnxContext


def register_onnx(op_name: str):
    """Decorator: ``emit(ctx, node, names) -> str`` writes ``op_name`` as ONNX nodes.

    The route for a custom op (``@minitorch.custom_op``) to become exportable.
    """

    def deco(fn):
        get_op(op_name).onnx = fn
        return fn

    return deco


# ONNX's arithmetic, ordering, reductions and MatMul take no bool (nor does onnxruntime's
# Where); these ops do. Other ops compute bools in int64 and cast back, which is exact:
# a sum of bools is their or, a product their and, the max their any.
BOOL_OK = {"Equal", "Not", "And", "Or", "Xor", "Identity", "Cast"}


def emit_in(ctx: OnnxContext, node, names, onnx_type, dtype, extra=(), result=None, **attrs) -> str:
    """``onnx_type`` on the node's inputs cast to ``dtype`` (int64 for bool where ONNX takes
    none), then ``extra`` inputs; its output (``result``, or the dtype it ran in) is cast to
    the node's dtype."""
    run = dt.int64 if dtype == dt.bool_ and onnx_type not in BOOL_OK else dtype
    args = [ctx.cast(n, i.spec.dtype, run) for n, i in zip(names, node.inputs)]
    out = ctx.node(onnx_type, [*args, *extra], **attrs)
    return ctx.cast(out, result or run, node.spec.dtype)


def _simple(op_name: str, onnx_type: str, compute_dtype=None):
    """An op that is one ONNX node; ``compute_dtype`` (comparisons: bool results) says what
    dtype minitorch computes it in, the result's otherwise."""

    def emit(ctx: OnnxContext, node, names):
        if compute_dtype is None:
            return emit_in(ctx, node, names, onnx_type, node.spec.dtype)
        return emit_in(ctx, node, names, onnx_type, compute_dtype(node), result=dt.bool_)

    get_op(op_name).onnx = emit


def _promoted(node):
    return dt.promote(*(i.spec.dtype for i in node.inputs))


UNARY = {
    "neg": "Neg",
    "abs": "Abs",
    "exp": "Exp",
    "log": "Log",
    "sqrt": "Sqrt",
    "recip": "Reciprocal",
    "tanh": "Tanh",
    "sigmoid": "Sigmoid",
    "relu": "Relu",
    "contiguous": "Identity",
    "detach": "Identity",  # a gradient stop: nothing to do at inference
    "index_check": "Identity",  # ONNX has no assertion: the ids pass through unchecked
}
BINARY = {
    "add": "Add",
    "sub": "Sub",
    "mul": "Mul",
    "div": "Div",
    "pow": "Pow",
    "maximum": "Max",
    "minimum": "Min",
    "matmul": "MatMul",
}
COMPARE = {
    "eq": "Equal",
    "lt": "Less",
    "le": "LessOrEqual",
    "gt": "Greater",
    "ge": "GreaterOrEqual",
}

for _op, _type in {**UNARY, **BINARY}.items():
    _simple(_op, _type)
for _op, _type in COMPARE.items():
    _simple(_op, _type, compute_dtype=_promoted)


@register_onnx("ne")
def _ne(ctx, node, names):
    return ctx.node("Not", [emit_in(ctx, node, names, "Equal", _promoted(node), result=dt.bool_)])


@register_onnx("where")
def _where(ctx, node, names):
    c, a, b = names
    run = dt.int64 if node.spec.dtype == dt.bool_ else node.spec.dtype  # see BOOL_OK
    a = ctx.cast(a, node.inputs[1].spec.dtype, run)
    b = ctx.cast(b, node.inputs[2].spec.dtype, run)
    out = ctx.node("Where", [ctx.cast(c, node.inputs[0].spec.dtype, dt.bool_), a, b])
    return ctx.cast(out, run, node.spec.dtype)


@register_onnx("cast")
def _cast(ctx, node, names):
    return ctx.node("Cast", names, to=ctx.onnx_dtype(node.spec.dtype))


def _nan_wins(ctx, node, x: str, out: str, axes: list, keep: int, argmax=False) -> str:
    """Eager's max and min of a slice holding NaN are NaN, its argmax the first NaN's index;
    onnxruntime skips NaN. The NaN mask's max finds those slices."""
    mask = ctx.node("Cast", [ctx.node("IsNaN", [x])], to=ctx.onnx_dtype(dt.int64))
    any_nan = ctx.node("ReduceMax", [mask, ctx.const(np.array(axes, np.int64))], keepdims=keep)
    if argmax:
        nan = ctx.node("ArgMax", [mask], axis=axes[0], keepdims=keep)
    else:
        nan = ctx.const(np.array(np.nan, node.spec.dtype))
    return ctx.node("Where", [ctx.cast(any_nan, dt.int64, dt.bool_), nan, out])


def _reduce(onnx_type: str):
    def emit(ctx, node, names):
        axes = node.attrs.get("axis")
        axes = list(range(node.inputs[0].spec.ndim)) if axes is None else list(np.atleast_1d(axes))
        if not axes:  # reducing over no axis is the identity (ONNX would reduce all)
            return emit_in(ctx, node, names, "Identity", node.spec.dtype)
        keep = int(bool(node.attrs.get("keepdims", False)))
        at = [ctx.const(np.array(axes, np.int64))]
        out = emit_in(ctx, node, names, onnx_type, node.spec.dtype, at, keepdims=keep)
        if onnx_type in ("ReduceMax", "ReduceMin") and dt.is_float(node.spec.dtype):
            out = _nan_wins(ctx, node, names[0], out, axes, keep)
        return out

    return emit


for _op, _type in {
    "sum": "ReduceSum",
    "max": "ReduceMax",
    "min": "ReduceMin",
    "logsumexp": "ReduceLogSumExp",
}.items():
    get_op(_op).onnx = _reduce(_type)


@register_onnx("mean")
def _mean(ctx, node, names):
    """The sum over the count: onnxruntime's ReduceMean of no elements is 0, eager's is NaN."""
    spec = node.inputs[0].spec
    axes = node.attrs.get("axis")
    axes = range(spec.ndim) if axes is None else [int(a) for a in np.atleast_1d(axes)]
    dyn = [a for a in axes if a in ctx.dims(node.inputs[0])]
    count = int(np.prod([spec.shape[a] for a in axes if a not in dyn]))
    if count and not dyn:
        return _reduce("ReduceMean")(ctx, node, names)
    total = _reduce("ReduceSum")(ctx, node, names)
    n = ctx.const(np.array(count, node.spec.dtype))
    if dyn:  # the dynamic sizes, read from the input at run time
        at = ctx.const(np.array(dyn, np.int64))
        sizes = ctx.node("Gather", [ctx.node("Shape", [names[0]]), at], axis=0)
        sizes = ctx.cast(ctx.node("ReduceProd", [sizes], keepdims=0), dt.int64, node.spec.dtype)
        n = ctx.node("Mul", [n, sizes])
    return ctx.node("Div", [total, n])


@register_onnx("argmax")
def _argmax(ctx, node, names):
    (axis,) = node.attrs["axis"]
    keep = int(bool(node.attrs["keepdims"]))
    dtype = node.inputs[0].spec.dtype
    out = emit_in(ctx, node, names, "ArgMax", dtype, result=dt.int64, axis=int(axis), keepdims=keep)
    if dt.is_float(dtype):
        out = _nan_wins(ctx, node, names[0], out, [int(axis)], keep, argmax=True)
    return out


@register_onnx("softmax")
def _softmax(ctx, node, names):
    return ctx.node("Softmax", names, axis=int(node.attrs["axis"]))


@register_onnx("permute")
def _permute(ctx, node, names):
    return ctx.node("Transpose", names, perm=[int(d) for d in node.attrs["order"]])


@register_onnx("reshape")
def _reshape(ctx, node, names):
    """Dynamic dims become 0 (copy the input's dim at that position) or one -1 (inferred)."""
    shape = list(node.spec.shape)
    dyn_out, dyn_in = ctx.dims(node), ctx.dims(node.inputs[0])
    free = []
    for d, sym in dyn_out.items():
        if dyn_in.get(d) == sym:
            shape[d] = 0
        else:
            free.append(d)
    if len(free) > 1:
        raise OpError(
            "onnx.export",
            f"reshape %{node.name} ({node.where}) to {node.spec.shape} moves {len(free)} "
            "dynamic dims",
            hint="keep dynamic dims in place when reshaping, or export without dynamic_axes",
        )
    if free:
        shape[free[0]] = -1
    empty = [d for d, n in enumerate(node.spec.shape) if n == 0 and d not in dyn_out]
    if empty and dyn_out:
        raise OpError(
            "onnx.export",
            f"reshape %{node.name} ({node.where}) to {node.spec.shape} has a size-0 dim "
            "beside dynamic ones: ONNX Reshape cannot write both",
            hint="export without dynamic_axes, or avoid the empty reshape",
        )
    attrs = {"allowzero": 1} if empty else {}  # a 0 in the shape means size 0, not "copy"
    return ctx.node("Reshape", [names[0], ctx.const(np.array(shape, np.int64))], **attrs)


@register_onnx("expand")
def _expand(ctx, node, names):
    shape = list(node.spec.shape)
    dyn_in = ctx.dims(node.inputs[0])
    pad = node.spec.ndim - node.inputs[0].spec.ndim
    for d in ctx.dims(node):
        if (d - pad) not in dyn_in:
            raise OpError(
                "onnx.export",
                f"expand %{node.name} ({node.where}) broadcasts to the dynamic dim {d}",
                hint="broadcast through an elementwise op instead, or export without dynamic_axes",
            )
        shape[d] = 1  # Expand broadcasts both ways: 1 keeps the input's (dynamic) size
    return ctx.node("Expand", [names[0], ctx.const(np.array(shape, np.int64))])


END = 2**62  # a Slice bound past any dim: "to the end" (negated: "before the first")


def _bounds(k, size: int, dynamic: bool, node, d: int) -> tuple[int, int, int]:
    """Slice bounds for ``k`` on a dim: resolved for a static dim, as written for a dynamic one
    (ONNX resolves negative bounds at run time as Python does, but clamps a negative-step
    start below ``-size`` to the first element, where Python yields nothing)."""
    if not isinstance(k, slice):
        k = int(k)
        if not dynamic:
            k %= size
        return k, k + 1 if k != -1 else END, 1
    if not dynamic:
        start, stop, step = k.indices(size)
        if not range(start, stop, step):
            return 0, 0, 1  # indices() says -1 for "before the first", ONNX reads the last
        return start, stop if stop >= 0 or step > 0 else -END, step
    step = 1 if k.step is None else k.step
    if step < 0 and k.start is not None and k.start < -1:
        raise OpError(
            "onnx.export",
            f"getitem %{node.name} ({node.where}) steps backwards from {k.start} on the "
            f"dynamic dim {d}: Python gives nothing once the dim is shorter than {-k.start}, "
            "ONNX would start at the first element",
            hint="reverse first and slice forwards (x[::-1][1:]), or drop that dim from "
            "dynamic_axes",
        )
    start = k.start if k.start is not None else 0 if step > 0 else END
    stop = k.stop if k.stop is not None else END if step > 0 else -END
    return start, stop, step


@register_onnx("getitem")
def _getitem(ctx, node, names):
    """Basic indexing: one Slice for every axis, then Squeeze the integer-indexed axes."""
    src = node.inputs[0].spec
    dyn = ctx.dims(node.inputs[0])
    starts, ends, axes, steps, squeeze = [], [], [], [], []
    for d, k in enumerate(node.attrs["key"]):
        if k == slice(None):
            continue
        start, stop, step = _bounds(k, src.shape[d], d in dyn, node, d)
        starts.append(start), ends.append(stop), steps.append(step), axes.append(d)
        if not isinstance(k, slice):
            squeeze.append(d)
    out = names[0]
    if axes:
        arrays = [np.array(v, np.int64) for v in (starts, ends, axes, steps)]
        out = ctx.node("Slice", [out, *map(ctx.const, arrays)])
    if squeeze:
        out = ctx.node("Squeeze", [out, ctx.const(np.array(squeeze, np.int64))])
    return out if out != names[0] else ctx.node("Identity", [out])


def _patches(ctx, node, x: str, k: tuple[int, int], s: tuple[int, int], p: int) -> str:
    """(N, C, kh*kw, OH, OW): every window offset as one strided Slice of the padded input."""
    spec = node.inputs[0].spec
    if {2, 3} & set(ctx.dims(node.inputs[0])):
        raise OpError(
            "onnx.export",
            f"{node.op} %{node.name} ({node.where}) in float64 with a dynamic height or width: "
            "onnxruntime has no float64 kernel, and its window form needs static sizes",
            hint="export the model in float32, or keep height and width static",
        )
    if p:
        x = ctx.node("Pad", [x, ctx.const(np.array([0, 0, p, p, 0, 0, p, p], np.int64))])
    h, w = spec.shape[2] + 2 * p, spec.shape[3] + 2 * p
    oh, ow = (h - k[0]) // s[0] + 1, (w - k[1]) // s[1] + 1
    at = ctx.const(np.array([2], np.int64))
    parts = []
    for i in range(k[0]):
        for j in range(k[1]):
            bounds = [[i, j], [i + (oh - 1) * s[0] + 1, j + (ow - 1) * s[1] + 1], [2, 3], s]
            window = ctx.node("Slice", [x, *(ctx.const(np.array(b, np.int64)) for b in bounds)])
            parts.append(ctx.node("Unsqueeze", [window, at]))
    return ctx.node("Concat", parts, axis=2)


@register_onnx("conv2d")
def _conv2d(ctx, node, names):
    s, p = int(node.attrs["stride"]), int(node.attrs["padding"])
    x, w = (ctx.cast(n, i.spec.dtype, node.spec.dtype) for n, i in zip(names, node.inputs))
    if node.spec.dtype != dt.float64:
        return ctx.node("Conv", [x, w], strides=[s, s], pads=[p, p, p, p])
    # onnxruntime has no float64 Conv: the same sums as one MatMul over the windows
    _, _, kh, kw = node.inputs[1].spec.shape
    _, _, oh, ow = node.spec.shape
    cols = _patches(ctx, node, x, (kh, kw), (s, s), p)
    cols = ctx.node("Reshape", [cols, ctx.const(np.array([0, -1, oh * ow], np.int64))])
    w = ctx.node("Reshape", [w, ctx.const(np.array([0, -1], np.int64))])
    out = ctx.node("MatMul", [w, cols])  # (O, C*kh*kw) @ (N, C*kh*kw, OH*OW)
    return ctx.node("Reshape", [out, ctx.const(np.array([0, 0, oh, ow], np.int64))])


def _pool(onnx_type: str):
    def emit(ctx, node, names):
        k, s = node.attrs["kernel_size"], node.attrs["stride"]
        if onnx_type == "AveragePool" and node.spec.dtype == dt.float64:
            # onnxruntime has no float64 AveragePool: the mean over the windows
            cols = _patches(ctx, node, names[0], tuple(k), tuple(s), 0)
            axis = ctx.const(np.array([2], np.int64))
            return ctx.node("ReduceMean", [cols, axis], keepdims=0)
        return ctx.node(onnx_type, names, kernel_shape=list(k), strides=list(s))

    return emit


get_op("max_pool2d").onnx = _pool("MaxPool")
get_op("avg_pool2d").onnx = _pool("AveragePool")
