"""Shared helpers for the chapter 7 grouping tests: hand-built graphs and checks."""

from __future__ import annotations

from collections import Counter

import numpy as np

import minitorch
from autograder.harness import check
from minitorch import Spec
from minitorch.fusion import FUSED
from minitorch.tracing import Graph, interpret

F32 = np.dtype("float32")


def graph(*shapes, names="xyzwv"):
    """A graph with one float32 input per shape, named x, y, z..."""
    g = Graph("g")
    return g, [g.add_input(Spec(tuple(s), F32), n) for s, n in zip(shapes, names)]


def node(g, op, *inputs, **attrs):
    """Append a registry op node (attrs bound, spec inferred)."""
    d = minitorch.get_op(op)
    specs = [i.spec for i in inputs]
    attrs = d.bind(attrs, specs)
    return g.add_node(op, list(inputs), attrs, d.infer(*specs, **attrs), where="")


def const(g, value):
    return g.add_const(minitorch.tensor(np.asarray(value, dtype=np.float32)))


def users_consistent(graph) -> bool:
    want: dict = {n: Counter() for n in graph.nodes}
    for n in graph.nodes:
        for i in n.inputs:
            want.setdefault(i, Counter())[id(n)] += 1
    return all(Counter(id(u) for u in n.users) == want[n] for n in graph.nodes)


def all_nodes(graph):
    """Every node of ``graph`` and of its fused subgraphs (inputs of subgraphs excluded)."""
    out = []
    for n in graph.nodes:
        out.append(n)
        if n.op == FUSED:
            out += [m for m in all_nodes(n.attrs["graph"]) if m.op != "input"]
    return out


def inputs_for(graph, seed=0):
    rng = np.random.default_rng(seed)
    return [
        minitorch.tensor(rng.standard_normal(n.spec.shape).astype(n.spec.dtype))
        for n in graph.inputs
    ]


def outputs(graph, xs) -> list[np.ndarray]:
    out = interpret(graph, *xs)
    out = out if isinstance(out, (tuple, list)) else [out]
    return [o.numpy() for o in out]


def same(before, after) -> bool:
    return len(before) == len(after) and all(
        a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)
        for a, b in zip(before, after)
    )


def check_fused_graph(ex, g, before, xs, original):
    """``g`` (fused) verifies, keeps users consistent, computes ``before`` and holds
    every op of ``original`` (names) exactly once."""
    try:
        g.verify()
    except minitorch.OpError as e:
        check(False, ex, f"the fused graph does not verify: {e}", after=str(g))
    check(users_consistent(g), ex, "users lists disagree with inputs lists", after=str(g))
    check(same(before, outputs(g, xs)), ex, "the fused graph computes something else", g=str(g))
    names = Counter(n.name for n in all_nodes(g) if n.op not in ("input", "const", FUSED))
    twice = [k for k in original if names[k] != 1]
    check(not twice, ex, "every op must appear exactly once", ops=twice, after=str(g))
