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
    side-effecting ops run even if unused), or an input of a live node. Afterwards
    ``graph.nodes`` holds exactly the live nodes, in their original order, and no
    ``users`` list mentions a removed node. A second run removes nothing.

    Performance (graded): time linear in the size of the graph (the benchmark
    compares the cost per node of the default pipeline at 1000 and 8000 nodes).

    Example:
        >>> print(g)     # %1 = exp(%x) ; %2 = neg(%x) ; return (%2)
        >>> dead_code_elimination(g)
        1
        >>> print(g)     # %2 = neg(%x) ; return (%2)

    Hints: book chapter 6, "The exercises".
    """
    raise NotImplementedError("Exercise 6.2: dead_code_elimination")


@exercise("6.3")
def common_subexpressions(graph: Graph) -> int:
    """Merge nodes that compute the same value; return how many were merged.

    Two ``const`` nodes compute the same value when their ``const_key`` is equal.
    Two other nodes do when they have the same op, the same input nodes (the same
    objects, in the same order; in any order for the ``COMMUTATIVE`` ops only:
    ``a - b`` is not ``b - a``), equal attributes (``attrs_key``) and the same
    spec. ``input`` nodes and impure nodes (``is_pure``) are never merged: two
    random draws are two different values even with equal inputs.

    Every later duplicate hands all its uses to the earliest equal node
    (``replace_all_uses``) and is left dead for DCE. One call merges whole
    duplicated chains (``exp(a)`` twice, then ``neg`` of each). Count a merge only
    when it changed at least one use, so a second run returns 0.

    Example:
        >>> print(g)   # %1 = exp(%x) ; %2 = exp(%x) ; %3 = add(%1, %2)
        >>> common_subexpressions(g)
        1
        >>> print(g)   # %1 = exp(%x) ; %2 = exp(%x) ; %3 = add(%1, %1)

    Hints: book chapter 6, "The exercises".
    """
    raise NotImplementedError("Exercise 6.3: common_subexpressions")
