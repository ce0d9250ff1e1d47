"""Graph hygiene: a topological order (exercise 5.4) and a well-formedness check (5.5)."""

from __future__ import annotations

from ..core.errors import OpError  # noqa: F401  (the error the exercises raise)
from ..exercises import exercise
from .graph import Graph, Node


@exercise("5.4")
def topological_sort(nodes: list[Node]) -> list[Node]:
    """Return ``nodes`` reordered so that every node comes after the inputs it uses.

    Inputs that are not in ``nodes`` count as already available. Among nodes
    that are ready at the same time keep the original order (so a sorted list
    stays as it is and the result is deterministic). If the nodes form a cycle,
    raise ``OpError("topological_sort", problem)`` naming a node on the cycle.

    Example:
        >>> [n.op for n in topological_sort([mul_node, add_node])]   # mul uses add
        ['add', 'mul']

    Hint: Kahn's algorithm: count each node's unmet inputs; repeatedly emit the
    first node (in original order) whose count is zero and decrement its users'.
    Use the ``inputs`` lists (a node may use the same input twice).
    """
    raise NotImplementedError("Exercise 5.4: topological_sort")


@exercise("5.5")
def verify_graph(graph: Graph) -> None:
    """Check that ``graph`` is well formed; raise ``OpError("verify", problem)`` if not.

    Check, in this order, and name the offending node (``%3 (add)``) in the message:

    1. every node's inputs are defined *earlier* in ``graph.nodes`` (topological
       order) -- "uses %5 before it is defined";
    2. every ``input`` node is listed in ``graph.inputs``, and every node in
       ``graph.inputs`` and in ``graph.outputs`` is a node of the graph;
    3. for every registry op node, ``get_op(node.op).infer(*input_specs, **node.attrs)``
       equals ``node.spec`` -- "recorded float32[2,3] but add's shape function
       gives float32[4,3]" (an ``OpError`` from ``infer`` is a failure too);
    4. a ``cond`` node: its ``true_graph`` and ``false_graph`` verify, take the
       operand specs (``node.inputs[1:]``) and both return exactly ``[node.spec]``.

    Example:
        >>> verify_graph(f.trace(x))         # fine: returns None
        >>> g.nodes.reverse(); verify_graph(g)
        OpError: verify: %1 (exp) uses %x before it is defined

    Hint: walk ``graph.nodes`` once with a set of the nodes seen so far.
    """
    raise NotImplementedError("Exercise 5.5: verify_graph")
