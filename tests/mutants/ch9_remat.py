"""Chapter 9 (remat) known-wrong implementations of 9.11: each must lose points.

Exercise 9.11 is open: any list of forward ops within the work budget is an answer. These
are the invalid ones (inputs, backward nodes, nodes of another graph, the graph changed),
one over the budget, and weak ones that reach only some tiers, or none.
"""

from __future__ import annotations

from minitorch.passes.rewrite import clone_graph
from solutions.reference import ch9_remat as ref

from . import mutant


def _forward(graph, backward_start):
    return [n for n in graph.nodes[:backward_start] if n.op not in ("input", "const")]


def _saved(graph, backward_start):
    """Forward ops a backward node reads."""
    late = set(graph.nodes[backward_start:])
    return [n for n in _forward(graph, backward_start) if any(u in late for u in n.users)]


@mutant("9.11", "recomputes the whole forward, matmuls included: as much work again")
def choose_recompute(graph, backward_start):
    return _forward(graph, backward_start)


@mutant("9.11", "recomputes the parameters too (graph inputs: the caller holds them)")
def choose_recompute(graph, backward_start):  # noqa: F811
    return [n for n in graph.nodes[:backward_start] if n.op != "const"]


@mutant("9.11", "recomputes every cheap op of the step, the backward's included")
def choose_recompute(graph, backward_start):  # noqa: F811
    return [n for n in graph.ops if n.op != "matmul"]


@mutant("9.11", "chooses on a copy of the graph and returns the copy's nodes")
def choose_recompute(graph, backward_start):  # noqa: F811
    copy = clone_graph(graph)
    return [n for n in _saved(copy, backward_start) if n.op != "matmul"]


@mutant("9.11", "moves the saved activations to the end of the forward instead of choosing")
def choose_recompute(graph, backward_start):  # noqa: F811
    for n in [n for n in _saved(graph, backward_start) if n.op != "matmul"]:
        graph.nodes.remove(n)  # later is shorter-lived... but the graph is not its to change
        graph.nodes.insert(backward_start - 1, n)
    return []


@mutant("9.11", "saves everything: no op recomputed")
def choose_recompute(graph, backward_start):  # noqa: F811
    return []


@mutant("9.11", "recomputes every cheap activation the backward reads, whatever it keeps alive")
def choose_recompute(graph, backward_start):  # noqa: F811
    return [n for n in _saved(graph, backward_start) if n.op != "matmul"]


@mutant(
    "9.11", "cleans the graph first: a forward op nobody reads is removed from the caller's graph"
)
def choose_recompute(graph, backward_start):  # noqa: F811
    dead = [
        n
        for n in graph.nodes[:backward_start]
        if n.op not in ("input", "const") and not n.users and n not in graph.outputs
    ]
    for n in dead:
        graph.nodes.remove(n)
        for i in n.inputs:
            i.users.remove(n)
    return ref.choose_recompute(graph, backward_start - len(dead))
