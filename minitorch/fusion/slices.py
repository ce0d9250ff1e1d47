"""Slice assembly (in ``max-autotune``): the gradient of a tensor that was cut into slices,
written slice by slice into one buffer.

A transformer cuts its fused projection into q, k and v (``getitem`` on the head axis).
Backward puts each slice's gradient back with ``pad_slice`` (zeros of the whole shape, the
slice written in) and sums the three, then permutes and reshapes the sum back to the
projection's ``(B * T, 3 * C)``: three zero-filled tensors, two additions and a copy, five
passes over memory for what is one write per element. Here that region becomes one
``fused`` node of kind ``slices``: each gradient is written into its window of the final
buffer, seen through the permutation, and the rest (when the slices do not cover it)
is zero.

The bits are eager's: the slices are disjoint, so each element is one gradient plus
zeros, which IEEE addition makes ``g + 0`` (``-0`` becomes ``+0``; nothing else changes),
and the kernel computes exactly that.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..backends.numpy_backend import viewer
from ..passes.pipeline import Stage, register_stage
from ..passes.rewrite import replace_all_uses
from ..tensor.data import TensorData
from ..tensor.indexing import strides_from_shape
from ..tracing.graph import Graph, Node
from .ir import FUSED
from .rows import _subgraph


def _ranges(key, shape) -> list | None:
    """``key``'s window as one ``(start, stop)`` per axis, when it is plain slices (step 1)."""
    if not isinstance(key, tuple) or len(key) > len(shape):
        return None
    out = []
    for k, n in zip(key + (slice(None),) * (len(shape) - len(key)), shape):
        if not isinstance(k, slice):
            return None
        start, stop, step = k.indices(n)
        if step != 1:
            return None
        out.append((start, max(start, stop)))
    return out


def _disjoint(a: list, b: list) -> bool:
    return any(s1 >= e2 or s2 >= e1 for (s1, e1), (s2, e2) in zip(a, b))


def _chain(root: Node, pads: list, adds: list) -> bool:
    """Collect the ``pad_slice`` leaves of a tree of ``add``s, each used once inside it."""
    for n in root.inputs:
        if len(n.users) != 1 or n.spec != root.spec:
            return False
        if n.op == "add":
            adds.append(n)
            if not _chain(n, pads, adds):
                return False
        elif n.op == "pad_slice":
            pads.append(n)
        else:
            return False
    return True


def _match(root: Node, outputs: set) -> tuple | None:
    """``(region, out)`` for a sum of disjoint slices at ``root``, with the permute and
    reshape that follow it when they do; None when ``root`` is no such sum."""
    spec = root.spec
    if root.op != "add" or spec.device != "cpu" or np.dtype(spec.dtype).kind != "f":
        return None
    pads, adds = [], [root]
    if not _chain(root, pads, adds) or len(pads) < 2:
        return None
    if len({id(p.inputs[0]) for p in pads}) != len(pads):  # one value in two windows
        return None
    windows = [_ranges(p.attrs["key"], spec.shape) for p in pads]
    if None in windows or any(
        _disjoint(a, b) is False for i, a in enumerate(windows) for b in windows[i + 1 :]
    ):
        return None
    region, out = set(pads) | set(adds), root
    users = root.users
    if root not in outputs and len(users) == 1 and users[0].op == "permute":
        perm = users[0]
        if perm not in outputs and len(perm.users) == 1 and perm.users[0].op == "reshape":
            region |= {perm, perm.users[0]}
            out = perm.users[0]
    return region, out


def slice_groups(graph: Graph) -> list[Node]:
    """Replace each sum of disjoint slices of ``graph`` by a ``fused`` node of kind ``slices``."""
    made, outputs = [], set(graph.outputs)
    for root in [n for n in reversed(graph.nodes) if n.op == "add"]:  # a tree from its top
        if root not in graph.nodes:
            continue
        found = _match(root, outputs)
        if found is None or any(n is not found[1] and n in outputs for n in found[0]):
            continue
        made.append(_build(graph, *found, f"slices_{len(made)}"))
    return made


def _build(graph: Graph, region: set, out: Node, name: str) -> Node:
    members = [n for n in graph.nodes if n in region]
    sub, ext = _subgraph(graph, [out], region, name)  # ext: the slices' values
    node = graph.add_node(FUSED, ext, {"graph": sub, "kind": "slices", "name": name}, out.spec,
                          where=out.where)  # fmt: skip
    graph.nodes.pop()  # add_node appended it; it belongs where the output is
    graph.nodes.insert(graph.nodes.index(out), node)
    replace_all_uses(out, node)
    for n in reversed(members):  # nothing reads them any more
        graph.nodes.remove(n)
        for i in n.inputs:
            if n in i.users:
                i.users.remove(n)
    return node


@njit(cache=True)
def _put(out, g, zero):
    """``out[...] = g + zero`` over two 4-D views, the last axis innermost (numpy's ``add``
    walks a window of 16 contiguous floats per inner call: twice as slow)."""
    n0, n1, n2, n3 = g.shape
    for a in range(n0):
        for b in range(n1):
            for c in range(n2):
                o, x = out[a, b, c], g[a, b, c]
                for d in range(n3):
                    o[d] = x[d] + zero


def put(window: np.ndarray, g: np.ndarray, zero) -> None:
    """``window[...] = g + zero``, walking ``window`` in its memory order."""
    if g.ndim > 4 or g.size == 0:
        np.add(g, zero, out=window)
        return
    order = sorted(range(g.ndim), key=lambda k: -abs(window.strides[k]))
    lead = (None,) * (4 - g.ndim)  # size-1 axes in front: views, never copies
    _put(window.transpose(order)[lead], g.transpose(order)[lead], zero)


class SliceKernel:
    """The plan kernel of a ``slices`` node: each input into its window of the result."""

    writes_into = True

    def __init__(self, node: Node):
        sub = node.attrs["graph"]
        self.node, self.spec = node, node.spec
        pads = {n.inputs[0]: n for n in sub.ops if n.op == "pad_slice"}
        self.keys = [pads[i].attrs["key"] for i in sub.inputs]
        summed = next(iter(pads.values())).spec
        perm = [n for n in sub.ops if n.op == "permute"]
        # the sum as a view of the result: the permuted shape, permuted back
        self.order = tuple(perm[0].attrs["order"]) if perm else None
        self.shape = perm[0].spec.shape if perm else summed.shape
        covered = sum(p.inputs[0].spec.size for p in pads.values())
        self.fill = covered != summed.size
        self.zero = np.dtype(summed.dtype).type(0)
        self.views = [viewer(i.spec) for i in sub.inputs]
        self.strides = tuple(strides_from_shape(node.spec.shape))
        self.__name__ = node.attrs.get("name", "slices")

    def describe(self) -> str:
        how = f"permuted by {self.order}, " if self.order else ""
        return (f"# {self.__name__}: {len(self.keys)} slices written into one buffer, {how}"
                f"{'the rest zero' if self.fill else 'covering it'}; g + 0 per element\n")  # fmt: skip

    def __call__(self, *inputs, out, dest=None, **attrs):
        spec = self.spec
        t = dest if dest is not None else np.empty(spec.size, spec.dtype)
        whole = t.reshape(self.shape)
        if self.order is not None:
            whole = whole.transpose(np.argsort(self.order))
        if self.fill:
            t.fill(0)
        for d, view, key in zip(inputs, self.views, self.keys):
            put(whole[key], view(d), self.zero)  # -0 -> +0, as the zeros' sum gives
        return TensorData(t, spec.shape, self.strides, 0)


def _run(unit) -> None:
    unit.slices = slice_groups(unit.graph)


def _explain(unit) -> list[str]:
    made = getattr(unit, "slices", None) or []
    lines = [f"Slice assembly ({len(made)}): gradients of slices written into one buffer"]
    return lines + [f"  {n.attrs['name']}: {n.spec}" for n in made] if made else []


register_stage(
    Stage(
        "slices",
        18,  # before the row groups and chapter 7's groups
        _run,
        wanted=lambda options: options.fuse and options.mode == "max-autotune",
        explain=_explain,
        rewrites=True,
    )
)
