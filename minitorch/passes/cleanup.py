"""Dead-code elimination (exercise 6.2) and common-subexpression elimination (6.3)."""

from __future__ import annotations

import numpy as np

from ..exercises import exercise
from ..tracing.graph import Graph
from .rewrite import attrs_key, is_frozen, is_pure, replace_all_uses  # noqa: F401  (used by the solutions)

# Ops whose result does not depend on the order of their two inputs (exactly, in
# IEEE arithmetic too). ``sub``, ``div``, ``pow``, ``lt``... are not among them.
COMMUTATIVE = frozenset({"add", "mul", "maximum", "minimum", "eq", "ne"})

# Constants up to this many elements are merged by value (``x * 2.0`` twice makes
# two const nodes holding equal tensors); larger ones only by identity.
CONST_MERGE_LIMIT = 64


def const_key(node) -> tuple:
    """What makes two const nodes interchangeable: spec and exact bits (so -0.0 != 0.0);
    a parameter only matches itself."""
    if not is_frozen(node) or node.spec.size > CONST_MERGE_LIMIT:
        return ("const", id(node.value))
    a = node.value.numpy()
    return ("const", node.spec, np.ascontiguousarray(a).tobytes())


@exercise("6.2")
def dead_code_elimination(graph: Graph) -> int:
    """Remove the nodes no output depends on; return how many were removed.

    A node is *live* if it is an output, an ``input`` node (inputs are the
    graph's signature and always stay), impure (``not is_pure(node)``: random or
    side-effecting ops run even if unused), or an input of a live node. Remove
    every other node from ``graph.nodes`` (keep the order of the rest) and from
    the ``users`` lists of the nodes that remain.

    Example:
        >>> print(g)     # %1 = exp(%x) ; %2 = neg(%x) ; return (%2)
        >>> dead_code_elimination(g)
        1
        >>> print(g)     # %2 = neg(%x) ; return (%2)

    Hint: one backward walk over ``graph.nodes`` finds the live set (a node's
    users come after it); then rebuild the lists once. Removing nodes one by one
    with ``list.remove`` would make the pass quadratic.
    """
    raise NotImplementedError("Exercise 6.2: dead_code_elimination")


@exercise("6.3")
def common_subexpressions(graph: Graph) -> int:
    """Merge nodes that compute the same value; return how many were merged.

    Walk ``graph.nodes`` in order with a dict from key to the first node seen:

    * skip ``input`` nodes and impure nodes (``is_pure``): two random draws are
      two different values even with equal inputs;
    * a ``const`` node's key is ``const_key(node)``;
    * any other node's key is ``(op, input identities, attrs_key(attrs), spec)``,
      where the input identities are ``tuple(id(i) for i in node.inputs)``,
      sorted for the ``COMMUTATIVE`` ops only (``a - b`` is not ``b - a``);
    * on a hit, ``replace_all_uses(node, first)``; the duplicate becomes dead.
      Count a merge only when that changed at least one use (a duplicate left
      dead by an earlier run is not a new merge, so a second run returns 0).

    Example:
        >>> print(g)   # %1 = exp(%x) ; %2 = exp(%x) ; %3 = add(%1, %2)
        >>> common_subexpressions(g)
        1
        >>> print(g)   # %1 = exp(%x) ; %2 = exp(%x) ; %3 = add(%1, %1)

    Hint: because nodes are in execution order, the inputs of a node are already
    merged when you reach it, so one walk catches whole duplicated chains.
    """
    raise NotImplementedError("Exercise 6.3: common_subexpressions")
