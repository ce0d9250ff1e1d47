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


def _simple(op_name: str, onnx_type: str, compute_dtype=None):
    """An op that is one ONNX node; inputs are cast to the dtype the ONNX op computes in."""

    def emit(ctx: OnnxContext, node, names):
        want = compute_dtype(node) if compute_dtype else node.spec.dtype
        args = [ctx.cast(n, i.spec.dtype, want) for n, i in zip(names, node.inputs)]
        return ctx.node(onnx_type, args)

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
    want = _promoted(node)
    args = [ctx.cast(n, i.spec.dtype, want) for n, i in zip(names, node.inputs)]
    return ctx.node("Not", [ctx.node("Equal", args)])


@register_onnx("where")
def _where(ctx, node, names):
    c, a, b = names
    want = node.spec.dtype
    a = ctx.cast(a, node.inputs[1].spec.dtype, want)
    b = ctx.cast(b, node.inputs[2].spec.dtype, want)
    return ctx.node("Where", [ctx.cast(c, node.inputs[0].spec.dtype, dt.bool_), a, b])


@register_onnx("cast")
def _cast(ctx, node, names):
    return ctx.node("Cast", names, to=ctx.onnx_dtype(node.spec.dtype))


def _reduce(onnx_type: str):
    def emit(ctx, node, names):
        axes = node.attrs.get("axis")
        axes = list(range(node.inputs[0].spec.ndim)) if axes is None else list(np.atleast_1d(axes))
        x = ctx.cast(names[0], node.inputs[0].spec.dtype, node.spec.dtype)
        if not axes:  # reducing over no axis is the identity (ONNX would reduce all)
            return ctx.node("Identity", [x])
        keep = int(bool(node.attrs.get("keepdims", False)))
        return ctx.node(onnx_type, [x, ctx.const(np.array(axes, np.int64))], keepdims=keep)

    return emit


for _op, _type in {
    "sum": "ReduceSum",
    "max": "ReduceMax",
    "min": "ReduceMin",
    "mean": "ReduceMean",
    "logsumexp": "ReduceLogSumExp",
}.items():
    get_op(_op).onnx = _reduce(_type)


@register_onnx("argmax")
def _argmax(ctx, node, names):
    (axis,) = node.attrs["axis"]
    return ctx.node("ArgMax", names, axis=int(axis), keepdims=int(bool(node.attrs["keepdims"])))


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
            f"reshape %{node.name} to {node.spec.shape} moves {len(free)} dynamic dims",
            hint="keep dynamic dims in place when reshaping, or export without dynamic_axes",
        )
    if free:
        shape[free[0]] = -1
    return ctx.node("Reshape", [names[0], ctx.const(np.array(shape, np.int64))])


@register_onnx("expand")
def _expand(ctx, node, names):
    shape = list(node.spec.shape)
    dyn_in = ctx.dims(node.inputs[0])
    pad = node.spec.ndim - node.inputs[0].spec.ndim
    for d in ctx.dims(node):
        if (d - pad) not in dyn_in:
            raise OpError(
                "onnx.export",
                f"expand %{node.name} broadcasts to the dynamic dim {d}",
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


@register_onnx("conv2d")
def _conv2d(ctx, node, names):
    s, p = int(node.attrs["stride"]), int(node.attrs["padding"])
    args = [ctx.cast(n, i.spec.dtype, node.spec.dtype) for n, i in zip(names, node.inputs)]
    return ctx.node("Conv", args, strides=[s, s], pads=[p, p, p, p])


def _pool(onnx_type: str):
    def emit(ctx, node, names):
        k, s = node.attrs["kernel_size"], node.attrs["stride"]
        return ctx.node(onnx_type, names, kernel_shape=list(k), strides=list(s))

    return emit


get_op("max_pool2d").onnx = _pool("MaxPool")
get_op("avg_pool2d").onnx = _pool("AveragePool")
