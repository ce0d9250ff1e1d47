"""A fused epilogue group on ``cuda``: the anchor's matmul with the epilogue applied as it stores.

Chapter 7's fuser hands an anchor (``matmul``, ``conv2d``) its elementwise consumers as one
``"epilogue"`` group, e.g. ``relu(conv2d(x, w) + b)``. On the CPU the anchor runs, then a
generated loop runs over its result in place. Here the epilogue becomes a CUDA device
function ``epilogue(acc, e)`` (the group's statements, from exercise 7.7) that the tuned
matmul (:mod:`minitorch.cuda.gemm`) applies to each element before storing it: one kernel
for matmul + bias + relu (after the im2col gather, for a convolution), and the anchor's
result never goes through memory. ``e`` is the group's one operand besides the anchor's
(the bias), read at each output position through its broadcast strides.

A group this cannot take (two operands or more, a view inside, an anchor with another
dtype, or int/bool) runs op by op; so does every group while the backend's tuned kernels
are off (``backend.TUNED``, off on the simulator unless a test turns it on).
"""

from __future__ import annotations

from ..core.registry import OpKind, get_op
from ..cuda import lowering
from ..tracing.graph import Node
from . import cache
from .codegen import body_lines, structure_key
from .codegen_cuda import _HEADER
from .exprs import calls, generatable

ANCHORS = ("matmul", "conv2d")


class CudaEpilogue:
    """The plan kernel of one fused epilogue node on ``cuda`` (see the module's docstring)."""

    def __init__(self, node: Node, fallback):
        import numpy as np

        self.node, self.fallback = node, fallback
        sub = node.attrs["graph"]
        anchors = [n for n in sub.ops if get_op(n.op).kind is OpKind.ANCHOR]
        a = anchors[0] if len(anchors) == 1 else None
        if a is None or a.op not in ANCHORS or any(i.op != "input" for i in a.inputs):
            raise ValueError("an epilogue group of one matmul or conv2d fed by the group's inputs")
        if a.spec.shape != node.spec.shape or a.spec.dtype != node.spec.dtype:
            raise ValueError("the epilogue changes the anchor's shape or dtype")
        if np.dtype(node.spec.dtype).kind != "f":
            raise ValueError("ints and bools keep the backend's matmul")
        if not all(generatable(get_op(n.op)) for n in sub.ops if n is not a):
            raise ValueError("an op of the epilogue has no per-element formula")
        big = [c for c in sub.constants if c.spec.size != 1]
        leaves = [i for i in sub.inputs if any(u is not a for u in i.users)] + big
        if len(leaves) > 1:
            raise ValueError("the epilogue reads more than one operand besides the anchor")
        self.anchor, self.leaf = a, (leaves[0] if leaves else None)
        self.anchor_args = [list(sub.inputs).index(i) for i in a.inputs]
        names = {a: "acc"}
        if self.leaf is not None:
            names[self.leaf] = "e"
        lines = body_lines(sub, names)
        key = structure_key(sub, ["cuda"] * len(sub.inputs))
        binds = [f'_f_{op} = device_scalar("{op}")' for op in calls(sub)]
        body = ["def epilogue(acc, e):", *(f"    {line}" for line in lines),
                f"    return {names[sub.outputs[0]]}"]  # fmt: skip
        decorator = '@cuda.jit(device=True, inline="always")'  # the accumulators stay in registers
        self.key = f"{key}_cuda_epilogue"
        self.source = "\n".join([_HEADER.format(key=self.key), *binds, "", decorator, *body]) + "\n"
        self.fn = None

    def __call__(self, *inputs, out, **attrs):
        from ..cuda import backend as cb
        from ..cuda import conv, gemm

        if not cb.TUNED:
            return self.fallback(*inputs, out=out, **attrs)
        if self.fn is None:
            self.fn = cache.load(self.key, self.source).epilogue
        a, spec = self.anchor, self.node.spec
        x, w = (inputs[k] for k in self.anchor_args)
        if self.leaf is None:
            e = gemm._zero(spec.dtype)
        elif self.leaf.op == "const":
            e = self.leaf.value._data
        else:
            e = inputs[list(self.node.attrs["graph"].inputs).index(self.leaf)]
        if a.op == "conv2d":
            return conv.conv2d_epilogue(x, w, spec, a.attrs["stride"], a.attrs["padding"],
                                        self.fn, e)  # fmt: skip
        return gemm.matmul(x, w, spec.dtype, self.fn, e)


def epilogue_kernel(node: Node, fallback):
    """``CudaEpilogue(node)``, or ``fallback`` (op by op) for a group it cannot take; the
    choice and its reason are shown by ``explain`` (chapter 7's Kernels lines)."""
    from .runtime import DECISIONS

    try:
        k = CudaEpilogue(node, fallback)
    except ValueError as e:
        DECISIONS[id(node)] = [node, f"op by op on cuda ({e})", []]
        return fallback
    how = "one cuda kernel: the tuned matmul applies the epilogue at store"
    DECISIONS[id(node)] = [node, f"{how} (op by op while backend.TUNED is off)", []]
    return k


# What the fused kernel computes in on a GPU:
# ``python -m minitorch.cuda.lowering minitorch.fusion.epilogue_cuda``
@lowering.register("gemm + bias + relu (a fused epilogue)", ("float32",))
def _lowered_fused(t):
    """The gemm with the epilogue generated for ``relu(x @ w + b)`` (the fuser's exercises)."""
    import minitorch as mt
    from minitorch.cuda import gemm

    from .fuse import fuse

    specs = [(4, 6), (6, 5), (5,)]
    graph = mt.jit(lambda x, w, b: (x @ w + b).relu()).trace(
        *[mt.zeros(s, dtype=str(t)) for s in specs]
    )
    (node,) = fuse(graph).groups
    k = CudaEpilogue(node, None)
    fn = cache.load(k.key, k.source).epilogue
    _, argtypes = gemm._lowered_gemm(t)
    return gemm.gemm_kernel(gemm.GPU_TILES, t, fn), argtypes
