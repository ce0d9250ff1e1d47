"""Two copies a max-autotune plan need not make (stage "recompute", after chapter 7's groups).

* **One op, recomputed where it is read.** Grouping recomputes a cheap op (``is_cheap``: a
  bias add of a matmul's result) inside a group when another user keeps it outside, but
  only when that user is *outside* the group: one whose path leads back into the group
  (``R.CYCLE``) keeps it materialised. In a training step that is the MLP's ``x @ w1 + b1``:
  the GELU's group recomputes it, its gradient's group reads it from a 2 MiB buffer
  written just for it. Here such an op moves into every elementwise group that reads it
  at its own size; when no other user is left it is not computed at all.
* **A matmul written in its reader's layout.** Then the permute + reshape that merges the
  heads copies nothing: the batched matmul writes each head's (T, D) block straight into
  its columns of the (B, T, H*D) result (BLAS's row stride, ``ldc``, is H*D), the
  same GEMM calls as eager's, so the same bits (fused kind ``"layout"``).
* **One copy for reshapes of one value.** Merging attention's heads is a permute then a
  reshape, which copies; backward reshapes the same permute to another shape (the rows of
  a weight gradient) and copies it again. A reshape of a value that an earlier reshape
  already holds becomes a reshape of that one: a view of the first copy.

Both keep every bit: the same operations on the same values, in the same order.
"""

from __future__ import annotations

import numpy as np

from ..backends.numpy_backend import viewer
from ..core.registry import OpKind
from ..passes.pipeline import Stage, register_stage
from ..passes.rewrite import replace_all_uses, set_input
from ..tensor.data import TensorData
from ..tensor.indexing import strides_from_shape
from ..tracing.graph import Graph, Node
from . import reasons as R
from .group import fusable_op, is_cheap, kind_of
from .ir import FUSED


def _inlinable(op: Node, fused: Node) -> bool:
    return (
        kind_of(op) in (OpKind.ELEMENTWISE, OpKind.BROADCAST)
        and fusable_op(op)
        and is_cheap(op)
        and fused.op == FUSED
        and fused.attrs.get("kind") == "elementwise"
        and op.spec.shape == fused.spec.shape  # once per iteration of the group's loop
    )


def _inline(op: Node, fused: Node) -> bool:
    """Rebuild ``fused`` computing ``op`` from ``op``'s inputs; False if it would read too many."""
    sub = fused.attrs["graph"]
    ext = [x for x in fused.inputs if x is not op]
    ext += [i for i in dict.fromkeys(op.inputs) if i not in ext]
    if len(ext) > R.MAX_INPUTS:
        return False
    new = Graph(sub.name)
    new._count = sub._count
    outer = {x: new.add_input(x.spec, x.name) for x in ext}
    env = {}
    for x, inner in zip(fused.inputs, sub.inputs):
        if x is op:
            env[inner] = new.add_node(op.op, [outer[i] for i in op.inputs], op.attrs, op.spec,
                                      where=op.where)  # fmt: skip
            env[inner].name = op.name
        else:
            env[inner] = outer[x]
    for n in sub.nodes:
        if n not in env:
            env[n] = Node(n.name, n.op, [env[i] for i in n.inputs], n.attrs, n.spec, n.where,
                          n.value, graph=new)  # fmt: skip
            for i in env[n].inputs:
                i.users.append(env[n])
            new.nodes.append(env[n])
    new.set_outputs([env[o] for o in sub.outputs], sub.out_tree)
    for x in fused.inputs:
        x.users.remove(fused)
    fused.inputs = list(ext)
    for x in ext:
        x.users.append(fused)
    fused.attrs = {**fused.attrs, "graph": new}
    return True


def recompute_cheap(graph: Graph) -> list[Node]:
    """Move cheap ops into the elementwise groups that read them; the ops no longer computed."""
    gone = []
    for op in list(graph.nodes):
        if op.op in ("input", "const", FUSED) or op in graph.outputs:
            continue
        readers = [u for u in dict.fromkeys(op.users) if _inlinable(op, u)]
        for f in readers:
            _inline(op, f)
        if readers and not op.users:
            graph.nodes.remove(op)
            for i in dict.fromkeys(op.inputs):
                i.users.remove(op)
            gone.append(op)
    return gone


def share_reshapes(graph: Graph) -> int:
    """Make each later reshape of a value a reshape of its first one; how many changed."""
    changed, at = 0, {n: k for k, n in enumerate(graph.nodes)}
    for x in graph.nodes:
        reshapes = sorted((u for u in dict.fromkeys(x.users) if u.op == "reshape"), key=at.get)
        for later in reshapes[1:]:
            set_input(later, 0, reshapes[0])
            changed += 1
    return changed


def _merge(r: Node) -> Node | None:
    """``reshape(permute(matmul(a, b)))`` whose matmul and permute feed only it, where the
    permute keeps the matrices' last axis last (BLAS can write rows with a stride)."""
    p = r.inputs[0]
    m = p.inputs[0] if p.op == "permute" else None
    if m is None or m.op != "matmul" or p.users != [r] or m.users != [p]:
        return None
    if m in m.graph.outputs or p in m.graph.outputs:
        return None
    a, b = m.inputs
    order = tuple(p.attrs["order"])
    if order[-1] != len(order) - 1 or not 3 <= a.spec.ndim == b.spec.ndim == m.spec.ndim:
        return None
    if m.spec.device != "cpu" or np.dtype(m.spec.dtype) not in _BLAS:
        return None
    return m


_BLAS = (np.dtype(np.float32), np.dtype(np.float64))


def write_in_layout(graph: Graph) -> list[Node]:
    """Replace each such matmul-permute-reshape by one ``"layout"`` node; the new nodes."""
    made = []
    for r in [n for n in graph.nodes if n.op == "reshape"]:
        m = _merge(r)
        if m is None:
            continue
        p, name = r.inputs[0], f"layout_{len(made)}"
        sub = Graph(name)
        ins = [sub.add_input(i.spec, i.name) for i in m.inputs]
        sm = sub.add_node("matmul", ins, m.attrs, m.spec, where=m.where)
        sp = sub.add_node("permute", [sm], p.attrs, p.spec, where=p.where)
        sr = sub.add_node("reshape", [sp], r.attrs, r.spec, where=r.where)
        for x, n in ((sm, m), (sp, p), (sr, r)):
            x.name = n.name
        sub.set_outputs([sr], ("leaf", 0))
        attrs = {"graph": sub, "kind": "layout", "name": name}
        node = graph.add_node(FUSED, list(m.inputs), attrs, r.spec, where=r.where)
        graph.nodes.remove(node)
        graph.nodes.insert(graph.nodes.index(r), node)
        replace_all_uses(r, node)
        for dead in (r, p, m):
            graph.nodes.remove(dead)
            for i in dict.fromkeys(dead.inputs):
                i.users.remove(dead)
        made.append(node)
    return made


class LayoutKernel:
    """The plan kernel of a ``"layout"`` node: ``np.matmul`` into a permuted view of the result."""

    writes_into = True

    def __init__(self, node: Node):
        mm, perm, _ = node.attrs["graph"].ops
        self.spec, self.shape = node.spec, perm.spec.shape
        self.back = tuple(int(k) for k in np.argsort(perm.attrs["order"]))
        self.order = tuple(perm.attrs["order"])
        self.views = [viewer(i.spec) for i in node.inputs]
        self.strides = tuple(strides_from_shape(node.spec.shape))
        self.__name__ = node.attrs.get("name", "layout")

    def describe(self) -> str:
        return (f"# {self.__name__}: matmul written permuted by {self.order} into the "
                "result's memory (BLAS's row stride): no copy\n")  # fmt: skip

    def __call__(self, a, b, out, dest=None, **attrs):
        spec = self.spec
        t = dest if dest is not None else np.empty(spec.size, spec.dtype)
        np.matmul(
            self.views[0](a), self.views[1](b), out=t.reshape(self.shape).transpose(self.back)
        )
        return TensorData(t, spec.shape, self.strides, 0)


def _run(unit) -> None:
    unit.shared_reshapes = share_reshapes(unit.graph)  # first: a permute then has one reader
    unit.layouts = write_in_layout(unit.graph)
    unit.recomputed_ops = recompute_cheap(unit.graph)


def _explain(unit) -> list[str]:
    gone, shared = getattr(unit, "recomputed_ops", []), getattr(unit, "shared_reshapes", 0)
    layouts = getattr(unit, "layouts", [])
    if not gone and not shared and not layouts:
        return []
    names = ", ".join(f"%{n.name} ({n.op})" for n in gone)
    return [f"Matmuls written in their reader's layout ({len(layouts)})",
            f"Recomputed in the groups that read them, never stored ({len(gone)}): {names}",
            f"Reshapes reading an earlier reshape's result ({shared})"]  # fmt: skip


register_stage(
    Stage(
        "recompute",
        22,  # after chapter 7's groups (20), before lowering (30)
        _run,
        wanted=lambda options: options.fuse and options.mode == "max-autotune",
        explain=_explain,
        rewrites=True,
    )
)
