"""The fused node: a higher-order node holding its group as a subgraph.

``graph.add_node("fused", inputs, attrs={"graph": sub, "kind": kind, "name": name}, spec)``
where ``sub.inputs`` match ``inputs`` one for one (same specs) and ``sub.outputs``
is one value of the node's spec (a row group may hold several, one after the other in
a flat buffer: ``rows.py``). Like ``cond``, everything that walks graphs
handles it by looking inside: the text form, ``verify``, DOT, the interpreter
and, until a code generator registers a kernel, ``kernel_for`` (which then
interprets the subgraph, so a fused graph always runs and gives eager's answer).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..core.errors import OpError
from ..core.tensor import Tensor
from ..tensor.data import TensorData
from ..tracing.graph import Graph, Node

FUSED = "fused"
KINDS = ("elementwise", "reduce", "epilogue", "row", "slices", "layout")

# backend name -> maker(node) -> kernel. Code generators (chapter 7's codegen) register
# here; a backend without a maker interprets the subgraph.
KERNEL_MAKERS: dict[str, Callable[[Node], Callable]] = {}


def subgraph(node: Node) -> Graph:
    return node.attrs["graph"]


def fused_kernel(node: Node, backend: str) -> Callable:
    """The kernel that runs the fused ``node`` on ``backend``."""
    maker = KERNEL_MAKERS.get(backend)
    if maker is not None:
        return maker(node)
    return interpreted_kernel(node)


def interpreted_kernel(node: Node) -> Callable:
    """Run the subgraph op by op through ``dispatch``: slow, but always eager's answer."""
    from ..tracing.interpreter import interpret

    sub, device = subgraph(node), node.spec.device

    def fused(*inputs, out, **attrs):
        result = interpret(sub, *(Tensor._make(d, device) for d in inputs))
        if len(sub.outputs) > 1:  # packed, one after the other
            flat = np.concatenate([t.numpy().reshape(-1) for t in result])
            return TensorData.contiguous(flat, (flat.size,))
        return result._data

    fused.__name__ = node.attrs.get("name", FUSED)
    return fused


def check_fused(node: Node) -> None:
    """A fused node is well formed: its subgraph verifies and matches its inputs and spec."""
    label = f"%{node.name} ({node.attrs.get('name', FUSED)})"
    sub = node.attrs.get("graph")
    if not isinstance(sub, Graph):
        raise OpError("verify", f"{label} has no subgraph in attrs['graph']")
    if node.attrs.get("kind") not in KINDS:
        raise OpError("verify", f"{label}: kind {node.attrs.get('kind')!r} is not one of {KINDS}")
    sub.verify()
    got, want = [str(i.spec) for i in sub.inputs], [str(i.spec) for i in node.inputs]
    if got != want:
        raise OpError("verify", f"{label}: its graph takes {got} but the node's inputs are {want}")
    if len(sub.outputs) > 1:  # a row group's outputs, one after the other in one buffer
        size = sum(o.spec.size for o in sub.outputs)
        if node.attrs["kind"] != "row" or node.spec.shape != (size,):
            raise OpError(
                "verify", f"{label}: {len(sub.outputs)} outputs, not packed in {node.spec}"
            )
    elif [o.spec for o in sub.outputs] != [node.spec]:
        outs = [str(o.spec) for o in sub.outputs]
        raise OpError("verify", f"{label}: its graph returns {outs}, the node says {node.spec}")


def inline_fused(graph: Graph) -> Graph:
    """A copy of ``graph`` with every fused node replaced by its subgraph's nodes (unfused).

    Each inlined node keeps its name; the copy of a fused node's output keeps the
    fused node's name, so the result reads like the graph before fusion.
    """
    new = Graph(graph.name)
    new._count = graph._count
    copies: dict[Node, Node] = {}
    packed: dict[Node, dict] = {}  # a row group with several outputs: offset -> output

    def get(user: Node, i: Node) -> Node:
        if i not in copies:
            raise OpError("verify", f"%{user.name} ({user.op}) uses %{i.name} before it is defined")
        return copies[i]

    def copy(n: Node, inputs) -> Node:
        c = Node(n.name, n.op, inputs, n.attrs, n.spec, n.where, n.value, new)
        for i in c.inputs:
            i.users.append(c)
        new.nodes.append(c)
        return c

    for n in graph.nodes:
        if n.op == FUSED:
            sub = subgraph(n)
            inner = {s: get(n, i) for s, i in zip(sub.inputs, n.inputs)}
            for m in sub.nodes:
                if m.op == "input":
                    continue
                inner[m] = copy(m, [inner[i] for i in m.inputs])
            copies[n] = inner[sub.outputs[0]]
            if len(sub.outputs) > 1:  # packed: each part's view reads its output
                starts = np.cumsum([0] + [o.spec.size for o in sub.outputs])
                packed[n] = {int(a): inner[o] for a, o in zip(starts, sub.outputs)}
        elif n.op == "getitem" and n.inputs[0] in packed:
            o = packed[n.inputs[0]][n.attrs["key"][0].start]
            copies[n] = copy(Node(n.name, "reshape", [], {"shape": n.spec.shape}, n.spec), [o])
        else:
            copies[n] = copy(n, [get(n, i) for i in n.inputs])
    new.inputs = [copies[n] for n in graph.inputs]
    for o in graph.outputs:
        if o not in copies:
            raise OpError("verify", f"output %{o.name} is not a node of the graph")
    new.outputs = [copies[n] for n in graph.outputs]
    new.out_tree = graph.out_tree
    return new


def unfuse(graph: Graph, which: Callable[[Node], bool]) -> list[Node]:
    """Replace, in ``graph`` itself, each one-output fused node that ``which`` picks by its
    subgraph's nodes: what a backend with no kernel for a group runs, as steps of their own
    (each result then gets its own place in chapter 8's arena, instead of a temporary that
    the group's interpreter allocates). Names already taken get a fresh one. Returns the
    fused nodes replaced."""
    taken = {n.name for n in graph.nodes}
    done = []
    for n in list(graph.nodes):
        if n.op != FUSED or len(subgraph(n).outputs) != 1 or not which(n):
            continue
        sub = subgraph(n)
        inner: dict = dict(zip(sub.inputs, n.inputs))
        made = []
        for m in sub.nodes:
            if m.op == "input":
                continue
            name = m.name
            if name in taken:
                name, graph._count = f"u{graph._count}", graph._count + 1
            taken.add(name)
            c = Node(name, m.op, [inner[i] for i in m.inputs], m.attrs, m.spec, m.where,
                     m.value, graph)  # fmt: skip
            for i in c.inputs:
                i.users.append(c)
            inner[m] = c
            made.append(c)
        out = inner[sub.outputs[0]]
        for u in n.users:  # one entry per use: each becomes a use of the inlined output
            u.inputs[u.inputs.index(n)] = out
            out.users.append(u)
        for i in n.inputs:
            i.users.remove(n)
        at = graph.nodes.index(n)
        graph.nodes[at : at + 1] = made
        graph.outputs = [out if o is n else o for o in graph.outputs]
        done.append(n)
    return done


def verify_with_fused(graph: Graph, verify_graph: Callable[[Graph], None]) -> None:
    """``verify`` for a graph holding fused nodes: each node's subgraph and interface,
    then the whole program with every group inlined (so the chapter-5 checks apply)."""
    inline = [n for n in graph.nodes if n.op == FUSED]
    for n in inline:
        check_fused(n)
    verify_graph(inline_fused(graph))
