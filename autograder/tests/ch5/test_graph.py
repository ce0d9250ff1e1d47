"""Graded tests, chapter 5: topological order (5.4), verify (5.5), the interpreter (5.6)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minitorch
from autograder.harness import assert_close, check, graded
from minitorch import OpError, Spec
from minitorch.tracing import interpret, topological_sort, verify_graph

from .programs import programs, run_program


def _graph():
    def f(x, w):
        h = (x @ w).tanh()
        return h.sum(axis=1) + h.max(axis=1), h * 3.0

    return minitorch.jit(f).trace(minitorch.randn(2, 3), minitorch.randn(3, 4))


def _is_topological(order):
    seen = set()
    for n in order:
        if any(i not in seen for i in n.inputs if i in set(order)):
            return False
        seen.add(n)
    return True


@graded("5.4", points=3)
@given(st.integers(0, 10_000))
def test_topological_sort_orders_shuffled_nodes(seed):
    g = _graph()
    nodes = list(g.nodes)
    random.Random(seed).shuffle(nodes)
    order = topological_sort(nodes)
    check(
        sorted(map(id, order)) == sorted(map(id, nodes)),
        "5.4",
        "the result must hold every node exactly once",
        got=[repr(n) for n in order],
    )
    check(
        _is_topological(order),
        "5.4",
        "a node comes before one of its inputs",
        shuffled=[repr(n) for n in nodes],
        got=[repr(n) for n in order],
    )


@graded("5.4", points=1)
def test_topological_sort_is_stable_and_finds_cycles():
    g = _graph()
    order = topological_sort(list(g.nodes))
    check(
        order == g.nodes,
        "5.4",
        "an already sorted list must stay as it is",
        got=[repr(n) for n in order],
    )
    ops = g.ops
    check(topological_sort(ops) == ops, "5.4", "inputs outside the list count as available")
    a, b = ops[0], ops[1]  # matmul -> tanh: add a back edge tanh -> matmul
    a.inputs.append(b)
    try:
        with pytest.raises(OpError, match="cycle"):
            topological_sort(ops)
    finally:
        a.inputs.pop()


@graded("5.5", points=1)
def test_verify_accepts_traced_graphs():
    g = _graph()
    check(verify_graph(g) is None, "5.5", "verify_graph returns None on a good graph")


@graded("5.5", points=3)
def test_verify_names_the_broken_node():
    g = _graph()
    g.nodes.reverse()
    with pytest.raises(OpError, match=r"verify: %\w+ \(\w+\) uses %\w+ before it is defined"):
        verify_graph(g)

    g = _graph()
    tanh = g.ops[1]
    tanh.spec = Spec((4, 3), tanh.spec.dtype)
    with pytest.raises(OpError, match=r"%\w+ \(tanh\) recorded float32\[4,3\].*float32\[2,4\]"):
        verify_graph(g)

    g = _graph()
    g.ops[0].attrs = {"axis": (5,)}  # matmul takes no attributes
    with pytest.raises(OpError, match=r"verify: %\w+ \(matmul\)"):
        verify_graph(g)

    g = _graph()
    g.outputs.append(minitorch.tracing.Graph().add_input(Spec((1,), minitorch.float32)))
    with pytest.raises(OpError, match="verify"):
        verify_graph(g)


@graded("5.5", points=1)
def test_verify_checks_cond_branches():
    def f(x):
        return minitorch.cond(x.sum() > 0, lambda a: a * 2, lambda a: -a, x)

    g = minitorch.jit(f).trace(minitorch.randn(2, 3))
    verify_graph(g)
    node = g.ops[-1]
    node.attrs["false_graph"] = minitorch.tracing.trace_function(
        lambda a: a.sum(axis=0), [Spec((2, 3), minitorch.float32)]
    )
    with pytest.raises(OpError, match=r"\(cond\)"):
        verify_graph(g)


@graded("5.6", points=2)
def test_interpret_runs_a_graph():
    g = _graph()
    x, w = minitorch.randn(2, 3), minitorch.randn(3, 4)
    got = interpret(g, x, w)
    h = (x.numpy() @ w.numpy()).astype("float32")
    h = __import__("numpy").tanh(h)
    check(
        isinstance(got, tuple) and len(got) == 2,
        "5.6",
        "outputs are packed as traced",
        got=type(got),
    )
    assert_close(got[0].numpy(), h.sum(1) + h.max(1), "5.6", rtol=1e-5)
    assert_close(got[1].numpy(), h * 3, "5.6", rtol=1e-5)
    with pytest.raises(OpError, match="interpret"):
        interpret(g, x)


@graded("5.6", points=3)
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # nan/inf from pow, log, ... as in eager
@settings(max_examples=20)
@given(programs())
def test_interpret_equals_eager_on_every_backend(program):
    shape, arrays, steps = program
    xs = [minitorch.tensor(a) for a in arrays]
    g = minitorch.jit(lambda *a: run_program(steps, *a)).trace(*xs)
    expected = run_program(steps, *xs)
    for backend in ("numpy", "python"):
        with minitorch.use_backend(backend):
            got = interpret(g, *xs)
        for a, e in zip(got, expected):
            assert_close(
                a.numpy(), e.numpy(), "5.6", rtol=1e-5, atol=1e-6, backend=backend, steps=steps
            )


@graded("5.6", points=1)
def test_interpret_runs_cond_subgraphs():
    def f(x):
        return minitorch.cond(x.sum() > 0, lambda a: a * 2, lambda a: a - 10, x)

    g = minitorch.jit(f).trace(minitorch.ones(3))
    for v in (1.0, -1.0):
        x = minitorch.full((3,), v)
        assert_close(interpret(g, x).numpy(), f(x).numpy(), "5.6", x=x.numpy())
