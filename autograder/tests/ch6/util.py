"""Shared helpers for the chapter 6 graded tests: programs with planted redundancy, checks."""

from __future__ import annotations

from collections import Counter

import numpy as np
from hypothesis import strategies as st

import minitorch
from autograder.harness import check
from minitorch.passes import clone_graph
from minitorch.tracing import interpret

from ..ch5.programs import programs, run_program


def planted(steps, *xs):
    """A program written naively: duplicated chains, dead values and identity ops."""
    out1, out2 = run_program(steps, *xs)
    again, _ = run_program(steps, *xs)  # the same chain twice: CSE merges it
    (xs[0] * 3.0).exp()  # dead
    ident = ((again * 1.0) / 1.0 - 0.0).T.T  # identities
    negated = -ident
    same = -negated  # neg(neg(x))
    flat = out2.reshape(-1).reshape(out2.shape) + (-0.0)
    return out1 + same, flat * 1.0


@st.composite
def cases(draw, redundancy=True, consts=False):
    """(graph, runtime inputs as Tensors): a random program, optionally with planted
    redundancy, optionally with some inputs turned into constants (constant subgraphs)."""
    shape, arrays, steps = draw(programs(max_len=8))
    tensors = [minitorch.tensor(a) for a in arrays]
    fn = planted if redundancy else run_program
    g = minitorch.jit(lambda *xs: fn(steps, *xs)).trace(*tensors)
    keep = list(range(len(tensors)))
    if consts:
        mask = draw(st.lists(st.booleans(), min_size=len(tensors), max_size=len(tensors)))
        for k, node in enumerate(list(g.inputs)):
            if mask[k]:
                node.op, node.value = "const", tensors[k]
                g.inputs.remove(node)
                keep.remove(k)
    return g, [tensors[k] for k in keep]


def outputs(graph, inputs) -> list[np.ndarray]:
    out = interpret(graph, *inputs)
    out = out if isinstance(out, (tuple, list)) else [out]
    return [o.numpy() for o in out]


def same_outputs(before: list, after: list) -> bool:
    """Bit-for-bit equal values (NaN equal to NaN), same shapes and dtypes."""
    return len(before) == len(after) and all(
        a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)
        for a, b in zip(before, after)
    )


# The oracle's tolerance for those values: all your code (make grade MODE=integrated) may
# sum in another order than the references' kernels, a last-bit difference that a
# cancellation makes larger; the test's own comparison stays bit for bit.
MODES_TOL = (1e-4, 1e-5)


def flat(arrays: list) -> np.ndarray:
    """The outputs as one float64 vector: what a check's ``value`` carries to the oracle.

    Every correct pass keeps the outputs bit for bit, so every correct run sends the
    eager values (the oracle allows a last-bit difference between machines)."""
    parts = [np.asarray(a, dtype=np.float64).reshape(-1) for a in arrays]
    return np.concatenate(parts) if parts else np.zeros(0)


def users_consistent(graph) -> bool:
    """Every node's users list holds each user once per input slot that reads the node."""
    want: dict = {n: Counter() for n in graph.nodes}
    for n in graph.nodes:
        for i in n.inputs:
            want.setdefault(i, Counter())[id(n)] += 1
    return all(Counter(id(u) for u in n.users) == want[n] for n in graph.nodes)


def check_pass(ex: str, graph, inputs, run) -> object:
    """Run ``run(copy)``; the copy must verify, keep users consistent and give the same outputs."""
    before = outputs(graph, inputs)
    g = clone_graph(graph)
    result = run(g)
    try:
        g.verify()
    except minitorch.OpError as e:
        check(False, ex, f"the graph no longer verifies: {e}", graph=str(graph), after=str(g))
    check(users_consistent(g), ex, "users lists disagree with inputs lists", after=str(g))
    after = outputs(g, inputs)
    check(
        same_outputs(before, after),
        ex,
        "the rewritten graph computes something else",
        value=flat(after),
        tol=MODES_TOL,
        graph=str(graph),
        after=str(g),
    )
    return g, result


def node(g, op, *inputs, **attrs):
    """Append a registry op node to a hand-built graph (attrs bound, spec inferred)."""
    d = minitorch.get_op(op)
    specs = [i.spec for i in inputs]
    attrs = d.bind(attrs, specs)
    return g.add_node(op, list(inputs), attrs, d.infer(*specs, **attrs), where="")


def const(g, value, dtype=None):
    return g.add_const(minitorch.tensor(np.asarray(value, dtype=dtype or np.float32)))
