"""Chapter 7 (plan) known-wrong implementations of 7.11: each must lose points.

Exercise 7.11 is open: any legal plan is an answer. These are the invalid ones (an
illegal group, nodes of another graph, the graph changed) and two weak ones that
reach only the tiers the greedy fuser reaches, or none.
"""

from __future__ import annotations

from minitorch.core.registry import OpKind
from minitorch.fusion.fuse import fuse
from minitorch.fusion.group import find_groups, fusable_op, is_compute, kind_of
from minitorch.passes.rewrite import clone_graph

from . import mutant


def _components(graph, fusable):
    """Connected pieces of the ops ``fusable`` accepts (edges between two of them)."""
    piece = {}
    for n in graph.ops:
        if fusable(n):
            piece[n] = {n}
    for n in graph.ops:
        for i in n.inputs:
            if n in piece and i in piece and piece[n] is not piece[i]:
                merged = piece[n] | piece[i]
                for m in merged:
                    piece[m] = merged
    seen, out = set(), []
    for n in graph.ops:
        if n in piece and id(piece[n]) not in seen:
            seen.add(id(piece[n]))
            out.append(sorted(piece[n], key=graph.nodes.index))
    return [g for g in out if sum(1 for m in g if is_compute(m)) > 1]


@mutant("7.11", "one group per connected chain of fusable ops, ignoring the rules")
def choose_groups(graph):
    return _components(graph, fusable_op)


@mutant("7.11", "groups chains of elementwise ops, but lets a reduction join two groups")
def choose_groups(graph):  # noqa: F811
    plan = []
    for r in graph.ops:
        if kind_of(r) not in (OpKind.ELEMENTWISE, OpKind.BROADCAST, OpKind.REDUCE):
            continue
        if not fusable_op(r) or (len(r.users) == 1 and r not in graph.outputs):
            continue  # not a root: its only user takes it
        members, todo = [r], [r]
        while todo:
            for i in todo.pop().inputs:
                if i.op not in ("input", "const") and fusable_op(i) and i not in members:
                    if kind_of(i) is not OpKind.ANCHOR:
                        members.append(i)
                        todo.append(i)
        if len(members) > 1:
            plan.append(members)
    return plan


@mutant("7.11", "plans on a copy of the graph and returns the copy's nodes")
def choose_groups(graph):  # noqa: F811
    copy = clone_graph(graph)
    groups, _, _ = find_groups(copy)
    return [list(g.members) for g in groups if g.num_ops > 1]


@mutant("7.11", "fuses the graph itself with the greedy pass, then plans nothing")
def choose_groups(graph):  # noqa: F811
    fuse(graph)
    return []


@mutant("7.11", "the greedy fuser's groups, mapped back: valid, but no better than 7.2")
def choose_groups(graph):  # noqa: F811
    copy = clone_graph(graph)
    same = dict(zip(copy.nodes, graph.nodes))
    groups, _, recomputed = find_groups(copy)
    back = {c: same[o] for o, c in recomputed}  # a recomputed copy is its original again
    plan = []
    for g in groups:
        if g.num_ops > 1:
            plan.append([back.get(m, same.get(m)) for m in g.members])
    return plan


@mutant("7.11", "no plan at all: every op its own kernel")
def choose_groups(graph):  # noqa: F811
    return []


# ---------------------------------------------------------------- issue 43


@mutant("7.11", "each group also lists the inputs and constants its members read")
def choose_groups(graph):  # noqa: F811
    from solutions.reference.ch7_plan import choose_groups as ref

    out = []
    for group in ref(graph):
        leaves = [i for m in group for i in m.inputs if i.op in ("input", "const")]
        out.append(list(dict.fromkeys(leaves)) + list(group))
    return out


@mutant("7.11", "chains of elementwise ops by kind alone: an op marked unfusable is grouped too")
def choose_groups(graph):  # noqa: F811
    kinds = (OpKind.ELEMENTWISE, OpKind.BROADCAST)
    return _components(graph, lambda n: kind_of(n) in kinds and n.op not in ("pow",))


@mutant("7.11", "the last op of the graph starts the plan: a graph with no ops raises")
def choose_groups(graph):  # noqa: F811
    from solutions.reference.ch7_plan import choose_groups as ref

    graph.ops[-1]  # noqa: B018  (the learner's start; IndexError on a graph of inputs only)
    return ref(graph)
