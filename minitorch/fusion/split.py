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
eager's bit for bit. An op with ``OpDef.parts`` (``gelu``) is first written out
as those parts (:func:`written_out`), so its own ``tanh`` splits the same way.
Small groups (``SPLIT_MIN``) and groups with no fewer passes than ops stay on numpy.
"""

from __future__ import annotations

import numpy as np

from ..core.registry import OpKind, get_op
from ..core.tensor import Tensor
from ..tensor.data import TensorData
from ..tracing.graph import Graph, Node
from .runtime import ElementwiseKernel, Refuse, _c_contiguous, _probe, _sub


class _Emit:
    """``OpDef.parts``' builder: ``emit(op, *inputs)`` adds a node, ``emit.const(v)`` a constant."""

    def __init__(self, graph: Graph, dtype):
        self.graph, self.dtype = graph, dtype

    def __call__(self, op: str, *inputs: Node) -> Node:
        spec = get_op(op).infer(*[i.spec for i in inputs])
        return self.graph.add_node(op, list(inputs), {}, spec, "")

    def const(self, value) -> Node:
        return self.graph.add_const(Tensor(np.asarray(value, self.dtype)))


def _expands(n: Node) -> bool:
    dtype = np.dtype(n.spec.dtype)
    return (
        get_op(n.op).parts is not None
        and dtype in (np.float32, np.float64)
        and all(np.dtype(i.spec.dtype) == dtype for i in n.inputs)
    )


def written_out(node: Node) -> Node:
    """Fused ``node`` with each op that has ``OpDef.parts`` (in float, as its numpy kernel
    computes) written as those parts, same inputs and value; ``node`` when none has."""
    sub = _sub(node)
    if not any(_expands(n) for n in sub.ops):
        return node
    g = Graph(sub.name)
    copies = {n: g.add_input(n.spec) for n in sub.inputs}
    for n in sub.nodes:
        if n in copies:
            continue
        if n.op == "const":
            copies[n] = g.add_const(n.value)
        elif _expands(n):
            emit = _Emit(g, np.dtype(n.spec.dtype))
            copies[n] = get_op(n.op).parts(emit, *[copies[i] for i in n.inputs])
        else:
            copies[n] = g.add_node(n.op, [copies[i] for i in n.inputs], n.attrs, n.spec, n.where)
    g.set_outputs([copies[sub.outputs[0]]], ("leaf", 0))
    return Node(node.name, "fused", node.inputs, {**node.attrs, "graph": g}, node.spec)


# below this many elements the loops' calls (argument checks in Numba's dispatcher) cost
# more than the passes over memory they save: measured on GELU, equal at 4096 elements
SPLIT_MIN = 1 << 13


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
        if node.spec.size < SPLIT_MIN:
            raise Refuse(f"{node.spec.size} elements, fewer than SPLIT_MIN = {SPLIT_MIN}")
        self.node, self.sub, self.reason = node, sub, reason
        self.__name__ = node.attrs.get("name", "fused")
        attrs = {k: v for k, v in node.attrs.items() if k == "fast_math"}
        leaves, self.anchor, self.spare = set(sub.inputs), None, []
        if node.attrs.get("kind") == "epilogue":
            anchors = [n for n in sub.ops if get_op(n.op).kind == OpKind.ANCHOR]
            if len(anchors) != 1 or any(i.op != "input" for i in anchors[0].inputs):
                raise Refuse("an epilogue group holds one anchor fed by the group's inputs")
            self.anchor = a = anchors[0]
            self.anchor_kernel = kernel_for(backend)(a)
            self.anchor_writes_into = getattr(self.anchor_kernel, "writes_into", False)
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
        ops = [n for n in sub.ops if get_op(n.op).kind not in (OpKind.VIEW, OpKind.ANCHOR)]
        if len(self.stages) >= len(ops):  # numpy's ufuncs are faster than Numba's simple loops
            raise Refuse(f"{len(self.stages)} passes over memory, no fewer than {len(ops)} ops")
        # buffers are reused once their value is dead: a ufunc may write over an argument
        # that dies at it (numpy handles the overlap); a loop writes into a buffer no
        # argument of it lives in (LLVM does not vectorise a loop whose output aliases an input)
        reads = [r if r is not None else [i for i in n.inputs if i.op != "const"]
                 for n, _, r in self.stages]  # fmt: skip
        last = {i: j for j, r in enumerate(reads) for i in r}
        self.dead = [[i for i in dict.fromkeys(r) if last[i] == j] for j, r in enumerate(reads)]

    @staticmethod
    def _place(pool: list, spec):
        """A buffer of ``pool`` for a result of ``spec`` (taken out of it), or None."""
        dtype = np.dtype(spec.dtype)
        for k, b in enumerate(pool):
            if b.size == spec.size and b.dtype == dtype:
                return pool.pop(k)
        return None

    def __call__(self, *inputs, out, dest=None, **attrs):
        sub, spec = self.sub, self.node.spec
        env = dict(zip(sub.inputs, inputs))
        env.update((c, c.value._data) for c in sub.constants)
        # values in buffers this call made; buffers free again, first those the last call
        # left (a fresh large array costs a page fault per 4 KiB on first touch)
        ours, pool, self.spare = set(), self.spare, []
        if self.anchor is not None:
            a = self.anchor
            into = self._place(pool, a.spec) if self.anchor_writes_into else None
            kw = {} if into is None else {"dest": into}
            r = self.anchor_kernel(*(env[i] for i in a.inputs), out=a.spec, **a.attrs, **kw)
            if not (_c_contiguous(r) and r.offset == 0 and r.storage.size == r.size):
                r = TensorData.from_numpy(np.ascontiguousarray(r.as_numpy_view()))
            env[a] = r
            if not any(r.storage is d.storage for d in inputs):
                ours.add(a)
        final = len(self.stages) - 1
        for j, (n, kernel, reads) in enumerate(self.stages):
            size, dtype = n.spec.size, np.dtype(n.spec.dtype)
            target = dest if j == final and dest is not None else self._place(pool, n.spec)
            dying = [i for i in self.dead[j] if i in ours]
            if reads is not None:  # a generated loop
                env[n] = kernel(*(env[i] for i in reads), out=n.spec, dest=target)
            elif isinstance(kernel, np.ufunc):  # same dtype in and out (checked when built)
                if target is None:
                    same = [i for i in dying if env[i].shape == n.spec.shape]
                    target = env[same[0]].storage if same else np.empty(size, dtype)
                args = [env[i].as_numpy_view() for i in n.inputs]
                kernel(*args, out=target.reshape(n.spec.shape))
                env[n] = TensorData.contiguous(target, n.spec.shape)
            else:
                env[n] = kernel(*(env[i] for i in n.inputs), out=n.spec, **n.attrs)
                if target is not None and target is not dest:  # it allocates: back to the pool
                    pool.append(target)
            if not any(env[n].storage is d.storage for d in inputs):
                ours.add(n)
            pool += [env[i].storage for i in dying if env[i].storage is not env[n].storage]
        res = env[sub.outputs[0]]
        self.spare = [b for b in pool if b is not res.storage]
        if dest is not None and res.storage is not dest:
            np.copyto(dest.reshape(spec.shape), res.as_numpy_view(), casting="unsafe")
            return TensorData.contiguous(dest, spec.shape)
        return res
