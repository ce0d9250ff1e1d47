"""The rewrite API every pass uses (exercise 6.1), and the facts passes ask about a node.

Passes never delete a node directly: they point its users somewhere else
(:func:`replace_all_uses`) and let dead-code elimination sweep up what no
output needs. That keeps every pass linear and ``verify`` true after each one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.registry import OPS, get_op
from ..exercises import exercise
from ..tracing.graph import Graph, Node


def mark_impure(op_name: str) -> None:
    """Declare ``op_name`` random or side-effecting (``OpDef.pure``): passes never merge,
    fold or drop a call to it. A ``custom_op`` of numpy code starts impure."""
    get_op(op_name).pure = False


def mark_pure(op_name: str) -> None:
    """Declare an op (a custom one) free of side effects and deterministic."""
    get_op(op_name).pure = True


def is_pure(node: Node) -> bool:
    """True when computing ``node`` twice gives the same value and does nothing else
    (a node outside the registry, such as ``cond``, is not)."""
    if node.op in ("input", "const"):
        return True
    op = OPS.get(node.op)
    return op is not None and op.pure


def is_frozen(node: Node) -> bool:
    """A constant whose value can never change: not a parameter (``requires_grad``).

    An optimizer replaces a parameter's data between calls, so a pass may neither
    compute with a parameter's current value nor merge two parameters by value.
    """
    return node.op == "const" and not node.value.requires_grad


def freeze(value: Any) -> Any:
    """A hashable stand-in for an attribute value (lists, slices and dtypes included)."""
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(freeze(v) for v in value))
    if isinstance(value, slice):
        return ("slice", value.start, value.stop, value.step)
    if isinstance(value, np.dtype):
        return ("dtype", value.str)
    if isinstance(value, Graph):
        return ("graph", id(value))
    try:
        hash(value)
    except TypeError:
        return ("repr", repr(value))
    return (type(value).__name__, value)


def attrs_key(attrs: dict) -> tuple:
    """A hashable, order-independent key for a node's attributes."""
    return tuple(sorted((k, freeze(v)) for k, v in attrs.items()))


@exercise("6.1")
def replace_all_uses(old: Node, new: Node) -> int:
    """Make every use of ``old`` a use of ``new``; return how many uses changed.

    A use is one slot ``user.inputs[k] is old`` (``add(%x, %x)`` uses ``%x``
    twice) or one entry of ``old.graph.outputs``. Afterwards ``old.users`` is
    empty and ``new.users`` lists each new user once per slot, so the users
    lists stay consistent with the inputs lists. ``old`` itself stays in the
    graph (dead-code elimination removes it later). Replacing a node by itself
    changes nothing and returns 0.

    Example:
        >>> g = f.trace(x)          # %1 = mul(%x, c0) ; %2 = add(%1, %1) ; return (%2)
        >>> replace_all_uses(g.nodes[2], g.inputs[0])   # %1 -> %x
        2
        >>> print(g)                # %2 = add(%x, %x)

    Hints: book chapter 6, "The exercises".
    """
    raise NotImplementedError("Exercise 6.1: replace_all_uses")


def set_input(node: Node, k: int, new: Node) -> None:
    """Make ``node.inputs[k]`` be ``new`` (a local rewrite, users kept consistent)."""
    old = node.inputs[k]
    old.users.remove(node)
    node.inputs[k] = new
    new.users.append(node)


def make_const(node: Node, value) -> None:
    """Turn ``node`` into a ``const`` node holding the tensor ``value``, in place."""
    for i in node.inputs:
        i.users.remove(node)
    node.op, node.inputs, node.attrs, node.value = "const", [], {}, value


def clone_graph(graph: Graph) -> Graph:
    """A structural copy (new nodes, same constant tensors) that passes may rewrite."""
    new = Graph(graph.name)
    new._count = graph._count
    copies: dict[Node, Node] = {}
    for n in graph.nodes:
        c = Node(n.name, n.op, [copies[i] for i in n.inputs], n.attrs, n.spec, n.where, n.value)
        c.graph = new
        for i in c.inputs:
            i.users.append(c)
        copies[n] = c
        new.nodes.append(c)
    new.inputs = [copies[n] for n in graph.inputs]
    new.outputs = [copies[n] for n in graph.outputs]
    new.out_tree = graph.out_tree
    return new
