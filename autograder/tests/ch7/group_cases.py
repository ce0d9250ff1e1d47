"""Shared helpers for the chapter 7 grouping tests: hand-built graphs and checks."""

from __future__ import annotations

from collections import Counter

import numpy as np
from hypothesis import strategies as st

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


def snapshot(graph, group) -> tuple:
    """What deciding must leave as it was: the graph's nodes with their inputs and users,
    and the group's members, sides, reduction and anchor (by identity)."""
    nodes = [(id(n), tuple(map(id, n.inputs)), tuple(map(id, n.users))) for n in graph.nodes]
    side = sorted((id(n), s) for n, s in group.side.items())
    return nodes, [id(m) for m in group.members], side, id(group.reduce), id(group.anchor)


def deciding_only(rule, exercise):
    """``rule`` (can_fuse, reduce_rule, anchor_rule), checked on every call to change nothing."""

    def decide(producer, consumer, group):
        before = snapshot(producer.graph, group)
        got = rule(producer, consumer, group)
        check(snapshot(producer.graph, group) == before, exercise,
              f"{rule.__name__}(%{producer.name}, %{consumer.name}, group) changed the graph or "
              "the group: the docstring says nothing is changed (it only decides)",
              group=repr(group), graph=str(producer.graph))  # fmt: skip
        return got

    return decide


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
    after = outputs(g, xs)
    check(
        same(before, after),
        ex,
        "the fused graph computes something else",
        g=str(g),
        # every output, flattened into one array; a fused kernel may round differently
        value=np.concatenate([np.ravel(a).astype(np.float64) for a in after] or [np.zeros(0)]),
        tol=(1e-4, 1e-5),
    )
    names = Counter(n.name for n in all_nodes(g) if n.op not in ("input", "const", FUSED))
    twice = [k for k in original if names[k] != 1]
    check(not twice, ex, "every op must appear exactly once", ops=twice, after=str(g))


UNARY = ["neg", "exp", "tanh", "relu", "abs", "sigmoid"]
BINARY = ["add", "sub", "mul", "maximum", "div"]


@st.composite
def fusion_programs(draw, max_len: int = 8):
    """(input arrays, steps) over a (rows, cols) space, rows possibly 0: inputs of
    broadcastable shapes, elementwise chains, reductions, views, values used twice."""
    rows, cols = draw(st.integers(0, 3)), draw(st.integers(1, 4))
    shapes = draw(
        st.lists(
            st.sampled_from([(rows, cols), (rows, 1), (1, cols), (cols,), ()]),
            min_size=1,
            max_size=3,
        )
    )
    shapes[0] = (rows, cols)
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    if draw(st.booleans()) and arrays[0].size:
        arrays[0].reshape(-1)[0] = np.nan
    steps = []
    for _ in range(draw(st.integers(1, max_len))):
        kind = draw(st.sampled_from(["unary", "binary", "binary", "reduce", "view"]))
        i = draw(st.integers(0, len(arrays) + len(steps) - 1))
        j = draw(st.integers(0, len(arrays) + len(steps) - 1))
        name = {
            "unary": st.sampled_from(UNARY),
            "binary": st.sampled_from(BINARY),
            "reduce": st.sampled_from(["sum", "max"] if rows else ["sum"]),
            "view": st.sampled_from(["T", "expand", "flat"]),
        }[kind]
        steps.append((kind, draw(name), i, j))
    return arrays, steps


def run_fusion_program(steps, *xs):
    """Eager on Tensors, recorded on tracer values; every value is kept broadcastable
    to the (rows, cols) space of ``xs[0]``; returns the last value and one earlier."""
    space = xs[0].shape
    vals = list(xs)
    for kind, name, i, j in steps:
        a = vals[i]
        if kind == "unary":
            out = minitorch.dispatch(name, a)
        elif kind == "binary":
            out = minitorch.dispatch(name, a, vals[j])
        elif kind == "reduce":
            full = a.expand(space) if a.shape != space else a
            out = getattr(full, name)(axis=j % 2, keepdims=True)
        elif name == "T":
            full = a.expand(space) if a.shape != space else a
            out = full.T.T  # two permutes: an index map each
        elif name == "expand":
            out = a.expand(space)
        else:
            full = a.expand(space) if a.shape != space else a
            out = full.reshape(-1).reshape(space)
        vals.append(out)
    return vals[-1], vals[(len(xs) + len(vals)) // 2]
