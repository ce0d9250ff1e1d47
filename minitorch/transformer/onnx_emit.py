"""How chapter 11's ops are written in ONNX (opset 18), given to ``register_op(onnx=...)``.

Each emitter has chapter 10's signature ``emit(ctx, node, names) -> str``; none
needs the ``onnx`` package itself (``ctx`` builds the nodes), so registering
them costs nothing at import. ``embedding_grad`` is training-only and has none:
exporting it fails with chapter 10's error naming the op.
"""

from __future__ import annotations

import math

import numpy as np


def embedding(ctx, node, names):
    return ctx.node("Gather", names, axis=0)


def layer_norm(ctx, node, names):
    """Two passes written out, as every backend computes them (onnxruntime's own
    LayerNormalization differs from them by about 3e-12 in float64)."""
    want = node.spec.dtype
    x, w, b = (ctx.cast(n, i.spec.dtype, want) for n, i in zip(names, node.inputs))
    last = ctx.const(np.array([-1], np.int64))
    xc = ctx.node("Sub", [x, ctx.node("ReduceMean", [x, last], keepdims=1)])
    var = ctx.node("ReduceMean", [ctx.node("Mul", [xc, xc]), last], keepdims=1)
    den = ctx.node("Sqrt", [ctx.node("Add", [var, ctx.const(np.array(node.attrs["eps"], want))])])
    return ctx.node("Add", [ctx.node("Mul", [ctx.node("Div", [xc, den]), w]), b])


def gelu(ctx, node, names):
    """``0.5 x (1 + tanh(c (x + 0.044715 x^3)))``: ONNX's own Gelu arrives only in opset 20."""
    dtype = node.spec.dtype
    x = ctx.cast(names[0], node.inputs[0].spec.dtype, dtype)

    def const(v):
        return ctx.const(np.array(v, dtype))

    cube = ctx.node("Mul", [ctx.node("Mul", [x, x]), x])
    inner = ctx.node("Add", [x, ctx.node("Mul", [cube, const(0.044715)])])
    t = ctx.node("Tanh", [ctx.node("Mul", [inner, const(math.sqrt(2.0 / math.pi))])])
    half_x = ctx.node("Mul", [x, const(0.5)])
    return ctx.node("Mul", [half_x, ctx.node("Add", [t, const(1.0)])])


def causal_mask(ctx, node, names):
    """Trilu keeps the lower triangle shifted by ``k = Tk - Tq``, computed from the shape at run time."""
    x = names[0]
    dtype = node.spec.dtype
    shape = ctx.node("Shape", [x])
    tk = ctx.node("Gather", [shape, ctx.const(np.array(-1, np.int64))], axis=0)
    tq = ctx.node("Gather", [shape, ctx.const(np.array(-2, np.int64))], axis=0)
    ones = ctx.node("ConstantOfShape", [shape], value=_tensor(np.array([1.0], np.float32)))
    keep = ctx.node("Trilu", [ones, ctx.node("Sub", [tk, tq])], upper=0)
    mask = ctx.node("Cast", [keep], to=ctx.onnx_dtype(np.bool_))
    fill = ctx.const(np.array(node.attrs["fill"], dtype))
    return ctx.node("Where", [mask, x, fill])


def _tensor(array):
    from onnx import numpy_helper  # only while exporting

    return numpy_helper.from_array(array)
