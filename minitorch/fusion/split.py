"""The cost model's road for a group holding ``exp``, ``log``, ``tanh``, ``sigmoid`` or ``pow``.

Numba computes those with a scalar libm call per element, numpy with SIMD (see
:mod:`.runtime`). Instead of running the whole group op by op on numpy (one
pass over memory per op), :class:`SplitKernel` runs each such op as numpy's
ufunc and everything between them as generated loops: a loop computes the
op's argument into a temporary, the ufunc runs over it in place, and a last
loop computes the group's value from the inputs and those results, writing
its destination. A GELU backward after its matmul (19 ops around one ``tanh``)
is then three passes instead of nineteen. Each loop recomputes the cheap ops it
needs from the group's inputs rather than reading another temporary. Every
op is still computed in the group's dtype, in eager's order, so the result is
eager's bit for bit.
"""

from __future__ import annotations

import numpy as np

from ..core.registry import OpKind, get_op
from ..tensor.data import TensorData
from ..tracing.graph import Graph, Node
from .runtime import ElementwiseKernel, Refuse, _c_contiguous, _probe, _sub


def _piece(target: Node, leaves: set, name: str, attrs: dict) -> tuple[Node, list]:
    """A fused node computing ``target`` from ``leaves`` (values already at hand),
    with copies of the ops between; and the leaves it reads, in its inputs' order."""
    g, copies, reads = Graph(name), {}, []

    def copy(n: Node) -> Node:
        if n not in copies:
            if n in leaves:
                copies[n] = g.add_input(n.spec)
                reads.append(n)
            elif n.op == "const":
                copies[n] = g.add_const(n.value)
            else:
                copies[n] = g.add_node(n.op, [copy(i) for i in n.inputs], n.attrs, n.spec, n.where)
        return copies[n]

    g.set_outputs([copy(target)], ("leaf", 0))
    if not g.ops or all(get_op(n.op).kind == OpKind.VIEW for n in g.ops):
        raise Refuse(f"{target.op} reads a view, not a computed value")
    node = Node(name, "fused", [], {**attrs, "graph": g, "kind": "elementwise", "name": name},
                target.spec)  # fmt: skip
    k = ElementwiseKernel(node)
    _probe(k)
    return k, reads


class SplitKernel:
    """A fused elementwise or epilogue group with its slow ops (``slow``, in graph
    order) run as numpy kernels between generated loops; see the module's doc."""

    writes_into = True

    def __init__(self, node: Node, slow: list, backend: str | None, reason: str):
        from ..passes.plan import kernel_for

        sub = _sub(node)
        self.node, self.sub, self.reason = node, sub, reason
        self.__name__ = node.attrs.get("name", "fused")
        attrs = {k: v for k, v in node.attrs.items() if k == "fast_math"}
        leaves, self.anchor = set(sub.inputs), None
        if node.attrs.get("kind") == "epilogue":
            anchors = [n for n in sub.ops if get_op(n.op).kind == OpKind.ANCHOR]
            if len(anchors) != 1 or any(i.op != "input" for i in anchors[0].inputs):
                raise Refuse("an epilogue group holds one anchor fed by the group's inputs")
            self.anchor = a = anchors[0]
            self.anchor_kernel = kernel_for(backend)(a)
            leaves.add(a)
        self.stages = []  # (node, loop kernel and the leaves it reads) or (node, numpy kernel)
        for k, t in enumerate(slow):
            for i in t.inputs:
                if i not in leaves and i.op != "const":
                    self.stages.append((i, *_piece(i, leaves, f"{self.__name__}_arg{k}", attrs)))
            fn = get_op(t.op).numpy
            same = all(i.spec.dtype == t.spec.dtype for i in t.inputs)
            ufunc = fn if isinstance(fn, np.ufunc) and same else None
            self.stages.append((t, ufunc or kernel_for("numpy")(t), None))
            leaves.add(t)
        out = sub.outputs[0]
        if out not in leaves:
            self.stages.append((out, *_piece(out, leaves, f"{self.__name__}_out", attrs)))

    def __call__(self, *inputs, out, dest=None, **attrs):
        sub, spec = self.sub, self.node.spec
        env = dict(zip(sub.inputs, inputs))
        env.update((c, c.value._data) for c in sub.constants)
        scratch = set()  # a slow op's argument: it dies at that op, which may write over it
        if self.anchor is not None:
            a = self.anchor
            r = self.anchor_kernel(*(env[i] for i in a.inputs), out=a.spec, **a.attrs)
            if not (_c_contiguous(r) and r.offset == 0 and r.storage.size == r.size):
                r = TensorData.from_numpy(np.ascontiguousarray(r.as_numpy_view()))
            env[a] = r
        last = len(self.stages) - 1
        for j, (n, kernel, reads) in enumerate(self.stages):
            if reads is not None:  # a generated loop
                target = dest if j == last else None
                if target is None and j == last and self.anchor is not None:
                    r = env[self.anchor]  # in place over the product, as the epilogue does
                    target = r.storage if r.dtype == spec.dtype and r.shape == spec.shape else None
                env[n] = kernel(*(env[i] for i in reads), out=n.spec, dest=target)
                if j != last:
                    scratch.add(n)
            elif isinstance(kernel, np.ufunc):
                args = [env[i].as_numpy_view() for i in n.inputs]
                own = [i for i in n.inputs if i in scratch and env[i].shape == n.spec.shape]
                if j == last and dest is not None:
                    res = TensorData.contiguous(dest, n.spec.shape)
                elif own:  # same dtype as the result: the ufunc computes in it
                    res = env[own[0]]
                else:
                    res = TensorData.contiguous(np.empty(n.spec.size, n.spec.dtype), n.spec.shape)
                kernel(*args, out=res.as_numpy_view())
                env[n] = res
            else:
                env[n] = kernel(*(env[i] for i in n.inputs), out=n.spec, **n.attrs)
        res = env[sub.outputs[0]]
        if dest is not None and res.storage is not dest:
            np.copyto(dest.reshape(spec.shape), res.as_numpy_view(), casting="unsafe")
            return TensorData.contiguous(dest, spec.shape)
        return res
