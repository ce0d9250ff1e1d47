"""Recompute or save: chapter 9's open exercise (9.11), graded on peak memory.

In a traced training step (9.2-9.4) a value the forward computes and the backward reads
is a *saved activation*: it stays alive from its forward op to its last backward use,
across the whole step, and those values are what makes a training step's memory peak.
Instead of keeping one, the backward may compute it again from values it keeps anyway:
less memory, more work. :func:`choose_recompute` says which forward ops to recompute;
:func:`rematerialize` builds that choice on a copy of the graph (a copy of each chosen
op placed just before the first backward op that reads it, the backward reading the
copies); :func:`peak_bytes` and :func:`recompute_work` are what a choice is graded on.

The step graphs here are in program order: ``graph.nodes[:backward_start]`` is the
forward (inputs, parameters and constants included), the rest the backward and the
update. :func:`split_step` finds ``backward_start`` for a compiled step's entry.
"""

from __future__ import annotations

from ..core.errors import OpError
from ..core.registry import OPS, OpKind
from ..exercises import exercise
from ..passes.rewrite import clone_graph
from ..tracing.graph import Graph, Node

WORK_BUDGET = 0.25  # the recomputation may cost at most this share of the forward's work


def is_view(node: Node) -> bool:
    """Does ``node`` only name its first input's values again (no buffer of its own)?"""
    op = OPS.get(node.op)
    return op is not None and op.kind is OpKind.VIEW


def node_bytes(node: Node) -> int:
    return node.spec.size * node.spec.dtype.itemsize


def node_work(node: Node) -> int:
    """What computing ``node`` costs, in element operations: a matmul ``m*n*k``
    multiply-adds; a view nothing; any other op the elements of its largest operand
    or result. Inputs and constants cost nothing."""
    if node.op in ("input", "const") or is_view(node):
        return 0
    if node.op == "matmul":
        return node.spec.size * node.inputs[0].spec.shape[-1]
    return max([node.spec.size] + [i.spec.size for i in node.inputs])


def forward_work(graph: Graph, backward_start: int) -> int:
    """The work of the forward's ops (:func:`node_work`)."""
    return sum(node_work(n) for n in graph.nodes[:backward_start])


def recompute_work(graph: Graph) -> int:
    """The work of the copies :func:`rematerialize` added (``node.attrs`` are shared; the
    copies are the nodes it recorded in ``graph.recomputed``)."""
    return sum(node_work(c) for c in getattr(graph, "recomputed", ()))


def peak_bytes(graph: Graph) -> int:
    """The most bytes of values computed by ``graph``'s ops alive at once, in node order.

    Each op that is not a view holds ``size * itemsize`` bytes from its own position to
    the last node that reads it or a view of it (a view's bytes are its base's); a graph
    output's bytes stay alive to the end. Inputs and constants (parameters, the batch:
    the caller's) are not counted.
    """
    nodes = graph.nodes
    pos = {n: i for i, n in enumerate(nodes)}
    base: dict[Node, Node | None] = {}
    end: dict[Node, int] = {}
    for i, n in enumerate(nodes):
        if n.op in ("input", "const"):
            base[n] = None
        elif is_view(n):
            base[n] = base.get(n.inputs[0]) if n.inputs else None
        else:
            base[n] = n
            end[n] = i
        for x in n.inputs:
            b = base.get(x)
            if b is not None:
                end[b] = max(end[b], i)
    last = len(nodes)
    for o in graph.outputs:
        b = base.get(o)
        if b is not None:
            end[b] = last
    delta = [0] * (last + 2)
    for b, e in end.items():
        delta[pos[b]] += node_bytes(b)
        delta[e + 1] -= node_bytes(b)
    live = peak = 0
    for d in delta:
        live += d
        peak = max(peak, live)
    return peak


def split_step(entry) -> tuple[Graph, int]:
    """A compiled step's traced graph and where its backward starts (``entry.phases``)."""
    graph = entry.compiled.traced
    seen = 0
    for i, n in enumerate(graph.nodes):
        if n.op not in ("input", "const"):
            if seen == entry.phases["forward"]:
                return graph, i
            seen += 1
    return graph, len(graph.nodes)


@exercise("9.11")
def choose_recompute(graph: Graph, backward_start: int) -> list[Node]:
    """Which forward ops of a training step the backward recomputes instead of keeping.

    ``graph`` is a traced step in program order: ``graph.nodes[:backward_start]`` is the
    forward, the rest the backward and the update. Return a list of forward ops (nodes
    of ``graph`` before ``backward_start``, never an input or a constant). For each one,
    :func:`rematerialize` places a copy just before the first backward node that reads
    it (and copies the chosen ops that copy reads, recursively); the backward reads the
    copies, so the original dies after its last forward use. Any choice is allowed and
    gives the same values; ``[]`` keeps every activation (save everything). Decide
    only: leave ``graph`` unchanged.

    Graded on a fixed suite of training steps: :func:`peak_bytes` of the rematerialized
    graph over the graph's own (the lower, the more points), provided the copies cost
    at most :data:`WORK_BUDGET` of the forward's work (:func:`recompute_work`,
    :func:`forward_work`: a matmul is expensive, an elementwise op cheap).

    Example:
        >>> # forward: %1 = matmul(x, w) ; %2 = add(%1, b) ; %3 = relu(%2) ; ...
        >>> # backward reads %2 (relu's mask) and %3 (the next matmul's gradient)
        >>> choose_recompute(g, k)   # keep %2; relu(%2) again in the backward
        [%3]

    Hints: book chapter 9, "An open problem: recompute or save (9.11)".
    """
    raise NotImplementedError("Exercise 9.11: choose_recompute")


# ---------------------------------------------------------------- the pass that builds a choice


def _refuse(why: str) -> OpError:
    return OpError("rematerialize", why)


def check_choice(graph: Graph, backward_start: int, recompute) -> list[Node]:
    """The chosen nodes, each once in program order; OpError for a choice that is none."""
    if not isinstance(recompute, (list, tuple, set, frozenset)):
        raise _refuse(f"a choice is a list of nodes, got {type(recompute).__name__}")
    pos = {n: i for i, n in enumerate(graph.nodes)}
    chosen = []
    for n in recompute:
        if not isinstance(n, Node):
            raise _refuse(f"{n!r} is not a node (a choice is a list of nodes)")
        if n not in pos:
            raise _refuse(f"%{n.name} ({n.op}) is not a node of this graph")
        if n.op in ("input", "const"):
            raise _refuse(f"%{n.name} is a graph {n.op}: the caller holds it, nothing to recompute")
        if pos[n] >= backward_start:
            raise _refuse(
                f"%{n.name} ({n.op}) is not in the forward: only forward ops are recomputed"
            )
        chosen.append(n)
    return sorted(set(chosen), key=pos.__getitem__)


def rematerialize(graph: Graph, backward_start: int, recompute) -> Graph:
    """A copy of ``graph`` where the backward recomputes the ops of ``recompute``.

    ``graph`` is left as it was. In the copy, each backward node (position
    ``backward_start`` or later) that reads a chosen op reads a copy of it instead,
    made just before the first backward node that needs it; the copy reads copies of
    the chosen ops among its own inputs (made first) and the originals of the others.
    Graph outputs keep reading the originals. The copies are listed in
    ``result.recomputed``. An OpError names a choice that is not a list of forward ops.
    """
    chosen = check_choice(graph, backward_start, recompute)
    new = clone_graph(graph)
    same = dict(zip(graph.nodes, new.nodes))
    redo = {same[n] for n in chosen}
    backward = new.nodes[backward_start:]
    forward = new.nodes[:backward_start]
    copies: dict[Node, Node] = {}
    out: list[Node] = list(forward)

    def copy_of(n: Node) -> Node:
        todo = [(n, False)]
        while todo:  # producers first, without recursion (a chain may be long)
            m, ready = todo.pop()
            if m in copies:
                continue
            if not ready:
                todo.append((m, True))
                todo += [(i, False) for i in m.inputs if i in redo and i not in copies]
                continue
            c = Node(m.name + "_r", m.op, [copies.get(i, i) for i in m.inputs], m.attrs,
                     m.spec, m.where, m.value)  # fmt: skip
            c.graph = new
            for i in c.inputs:
                i.users.append(c)
            copies[m] = c
            out.append(c)
        return copies[n]

    for b in backward:
        for j, i in enumerate(b.inputs):
            if i in redo:
                c = copy_of(i)
                i.users.remove(b)
                b.inputs[j] = c
                c.users.append(b)
        out.append(b)
    new.nodes = out
    new.recomputed = list(copies.values())
    return new
