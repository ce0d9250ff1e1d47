"""Graded tests, chapter 5: topological order (5.4), verify (5.5), the interpreter (5.6)."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minitorch
from autograder.harness import assert_close, check, graded, text
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


def _positions(order, nodes):
    """Where each entry of ``order`` sits in ``nodes`` (-1 for a stranger), by identity."""
    where = {id(n): k for k, n in enumerate(nodes)}
    return [where.get(id(n), -1) for n in order]


def _edges_respected(order, nodes):
    """For each edge (input -> user) among ``nodes``, in ``nodes`` order: does ``order``
    put the input first? Every valid order gives all True, whichever of them it is."""
    at = {id(n): k for k, n in enumerate(order)}
    members = {id(n) for n in nodes}
    return [
        at.get(id(i), len(order)) < at.get(id(n), -1)
        for n in nodes
        for i in n.inputs
        if id(i) in members
    ]


def _label(e):
    """The first ``%name (op)`` in an error message: the node it names."""
    m = re.search(r"%\w+ \(\w+\)", str(e.value))
    return m.group() if m else None


@graded("5.4", points=3)
@given(st.integers(0, 10_000))
def test_topological_sort_orders_shuffled_nodes(seed):
    """
    contract: Return ``nodes`` reordered so that every node comes after the inputs it uses.
    contract: the result is deterministic).
    """
    g = _graph()
    nodes = list(g.nodes)
    random.Random(seed).shuffle(nodes)
    order = topological_sort(nodes)
    again = topological_sort(list(nodes))
    check(again == order, "5.4", "the result is deterministic: the same list sorts the same way",
          value=_positions(again, order))  # fmt: skip
    check(
        sorted(map(id, order)) == sorted(map(id, nodes)),
        "5.4",
        "the result must hold every node exactly once",
        value=sorted(_positions(order, g.nodes)),
        got=[repr(n) for n in order],
    )
    check(
        _is_topological(order),
        "5.4",
        "a node comes before one of its inputs",
        value=_edges_respected(order, g.nodes),
        shuffled=[repr(n) for n in nodes],
        got=[repr(n) for n in order],
    )


@graded("5.4", points=1)
def test_topological_sort_is_stable_and_finds_cycles():
    """
    contract: Inputs that are not in ``nodes`` count as already available.
    contract: Among nodes that are ready at the same time keep the original order (so a sorted list stays as it is
    contract: If the nodes form a cycle, raise ``OpError("topological_sort", problem)`` naming a node on the cycle.
    """
    g = _graph()
    order = topological_sort(list(g.nodes))
    check(
        order == g.nodes,
        "5.4",
        "an already sorted list must stay as it is",
        value=_positions(order, g.nodes),
        got=[repr(n) for n in order],
    )
    ops = g.ops
    got = topological_sort(ops)
    check(
        got == ops,
        "5.4",
        "inputs outside the list count as available",
        value=_positions(got, ops),
    )
    a, b = ops[0], ops[1]  # matmul -> tanh: add a back edge tanh -> matmul
    a.inputs.append(b)
    try:
        with pytest.raises(OpError, match="cycle") as e:
            topological_sort(ops)
    finally:
        a.inputs.pop()
    check(
        e.value.op == "topological_sort",
        "5.4",
        'a cycle raises OpError("topological_sort", ...)',
        value=text(e.value.op),
    )
    # a cycle further down (tanh <-> sum), after a node that is not on it
    tanh, total = ops[1], ops[2]
    tanh.inputs.append(total)
    try:
        # sorted, and unsorted: the first node left over may be one after the cycle; and a
        # list that is only the cycle, where every node waits on exactly one input
        for given in (ops, ops[::-1], [tanh, total]):
            with pytest.raises(OpError, match="cycle") as e:
                topological_sort(given)
            named = set(re.findall(r"%(\w+)", str(e.value)))
            check(
                bool(named & {tanh.name, total.name}),
                "5.4",
                f"name a node on the cycle (%{tanh.name} or %{total.name}), not one before or "
                "after it",
                value=text([e.value.op, bool(named & {tanh.name, total.name})]),
                got=str(e.value),
                nodes=[repr(n) for n in given],
            )
    finally:
        tanh.inputs.pop()
    # the first node left over two steps after the cycle: walk back until a node repeats
    g = minitorch.jit(lambda x: -(x.tanh().sum(axis=0)).exp()).trace(minitorch.randn(2, 3))
    tanh, total, exp, neg = g.ops
    tanh.inputs.append(total)
    try:
        with pytest.raises(OpError, match="cycle") as e:
            topological_sort([neg, exp, total, tanh])
    finally:
        tanh.inputs.pop()
    named = set(re.findall(r"%(\w+)", str(e.value)))
    check(bool(named & {tanh.name, total.name}) and not named & {exp.name, neg.name}, "5.4",
          f"name a node on the cycle (%{tanh.name} or %{total.name}), not %{exp.name} or "
          f"%{neg.name} that only wait on it", value=text(bool(named & {tanh.name, total.name})),
          got=str(e.value))  # fmt: skip


@graded("5.5", points=1)
def test_verify_accepts_traced_graphs():
    """
    contract: Check that ``graph`` is well formed;
    """
    g = _graph()
    before = [(n, list(n.inputs), n.spec, dict(n.attrs)) for n in g.nodes]
    got = verify_graph(g)
    check([(n, list(n.inputs), n.spec, dict(n.attrs)) for n in g.nodes] == before, "5.5",
          "verify_graph only checks: the graph's nodes, their order, inputs, specs and attributes "
          "stay as they were")  # fmt: skip
    shuffled = _graph()
    shuffled.nodes.reverse()
    order = list(shuffled.nodes)
    with pytest.raises(OpError):
        verify_graph(shuffled)
    check(shuffled.nodes == order, "5.5", "a graph that fails is left as it was too (not sorted)")
    check(
        got is None,
        "5.5",
        "verify_graph returns None on a good graph",
        value=text([got, [[n.op, str(n.spec)] for n in g.nodes]]),  # and leaves it as it was
    )


@graded("5.5", points=3)
def test_verify_names_the_broken_node():
    """
    contract: raise ``OpError("verify", problem)`` if not.
    contract: every node's inputs are defined *earlier* in ``graph.nodes``
    contract: equals ``node.spec`` -- "recorded float32[2,3] but add's shape function gives float32[4,3]" (an ``OpError`` from ``infer`` is a failure too);
    """
    g = _graph()
    g.nodes.reverse()
    with pytest.raises(OpError, match=r"verify: %\w+ \(\w+\) uses %\w+ before it is defined") as e:
        verify_graph(g)
    check(  # reversed, the first node walked that uses an undefined value is the last op
        isinstance(e.value, OpError),
        "5.5",
        "name the first node that uses a value before it is defined",
        value=text(_label(e)),
    )

    g = _graph()
    tanh = g.ops[1]
    tanh.spec = Spec((4, 3), tanh.spec.dtype)
    with pytest.raises(
        OpError, match=r"%\w+ \(tanh\) recorded float32\[4,3\].*float32\[2,4\]"
    ) as e:
        verify_graph(g)
    check(e.value.op == "verify", "5.5", "name the tanh node", value=text(_label(e)))

    # the whole spec is compared: a wrong dtype or device fails as a wrong shape does
    for dtype, device in [(minitorch.float64, "cpu"), (minitorch.float32, "cuda")]:
        g = _graph()
        tanh = g.ops[1]
        tanh.spec = Spec(tanh.spec.shape, dtype, device)
        with pytest.raises(OpError, match=r"%\w+ \(tanh\) recorded") as e:
            verify_graph(g)
        check(e.value.op == "verify", "5.5", f"a tanh recorded as {tanh.spec} (eager gives "
              "float32[2,4] on cpu) must fail, naming the node", value=text(_label(e)))  # fmt: skip

    # shape inference that itself raises OpError is a failure of verify's own
    g = _graph()
    w = g.inputs[1]
    w.spec = Spec((5, 4), w.spec.dtype)  # x (2, 3) @ w (5, 4) no longer fits
    with pytest.raises(OpError) as e:
        verify_graph(g)
    check(e.value.op == "verify" and _label(e) is not None and "(matmul)" in _label(e), "5.5",
          f'raise OpError("verify", ...) naming the matmul node, got OpError({e.value.op!r}): '
          f"{e.value}", value=text([e.value.op, _label(e)]))  # fmt: skip

    g = _graph()
    g.ops[0].attrs = {"axis": (5,)}  # matmul takes no attributes
    with pytest.raises(OpError, match=r"verify: %\w+ \(matmul\)") as e:
        verify_graph(g)
    check(e.value.op == "verify", "5.5", "name the matmul node", value=text(_label(e)))

    g = _graph()
    g.outputs.append(minitorch.tracing.Graph().add_input(Spec((1,), minitorch.float32)))
    with pytest.raises(OpError, match=r"verify: .*%\w+") as e:  # names the output
        verify_graph(g)
    check(
        e.value.op == "verify",
        "5.5",
        'a foreign output raises OpError("verify", ...) naming it',
        value=text(e.value.op),
    )


@graded("5.5", points=1)
def test_verify_checks_cond_branches():
    """
    contract: every ``input`` node is listed in ``graph.inputs``, and every node in ``graph.inputs`` and in ``graph.outputs`` is a node of the graph;
    contract: a ``cond`` node: its ``true_graph`` and ``false_graph`` verify, take the operand specs (``node.inputs[1:]``) and both return exactly ``[node.spec]``.
    """

    def f(x):
        return minitorch.cond(x.sum() > 0, lambda a: a * 2, lambda a: -a, x)

    g = minitorch.jit(f).trace(minitorch.randn(2, 3))
    verify_graph(g)
    node = g.ops[-1]
    node.attrs["false_graph"] = minitorch.tracing.trace_function(
        lambda a: a.sum(axis=0), [Spec((2, 3), minitorch.float32)]
    )
    with pytest.raises(OpError, match=r"\(cond\)") as e:
        verify_graph(g)
    check(
        e.value.op == "verify",
        "5.5",
        "name the cond node whose branch does not fit",
        value=text([e.value.op, _label(e)]),
    )
    # a branch that takes other specs than the operands, though it returns the right one
    g = minitorch.jit(f).trace(minitorch.randn(2, 3))
    g.ops[-1].attrs["false_graph"] = minitorch.tracing.trace_function(
        lambda a: a.T, [Spec((3, 2), minitorch.float32)]
    )
    with pytest.raises(OpError, match=r"\(cond\)") as e:
        verify_graph(g)
    check(e.value.op == "verify", "5.5", "a branch must take the operands' specs",
          value=text([e.value.op, _label(e)]))  # fmt: skip
    # a branch that returns two values, the first of which fits: exactly [node.spec] is wanted
    g = minitorch.jit(f).trace(minitorch.randn(2, 3))
    g.ops[-1].attrs["false_graph"] = minitorch.tracing.trace_function(
        lambda a: (-a, a), [Spec((2, 3), minitorch.float32)]
    )
    with pytest.raises(OpError, match=r"\(cond\)") as e:
        verify_graph(g)
    check(e.value.op == "verify", "5.5", "a branch that returns two values must fail",
          value=text([e.value.op, _label(e)]))  # fmt: skip
    # a branch that is broken inside (its nodes out of order) though its signature fits
    g = minitorch.jit(f).trace(minitorch.randn(2, 3))
    g.ops[-1].attrs["true_graph"].nodes.reverse()
    with pytest.raises(OpError, match="verify") as e:
        verify_graph(g)
    check(e.value.op == "verify", "5.5", "each branch is verified too",
          value=text(e.value.op))  # fmt: skip
    # an input node that is not among graph.inputs
    g = _graph()
    w = g.inputs.pop()
    with pytest.raises(OpError, match="verify") as e:
        verify_graph(g)
    check(e.value.op == "verify", "5.5", "every input node is listed in graph.inputs",
          value=text(e.value.op))  # fmt: skip
    check(_label(e) == f"%{w.name} (input)", "5.5", "name the input node missing from "
          "graph.inputs", value=text(_label(e)), got=str(e.value))  # fmt: skip
    # a graph input that is not a node of the graph
    g = _graph()
    g.inputs.append(minitorch.tracing.Graph().add_input(Spec((1,), minitorch.float32), "alien"))
    with pytest.raises(OpError, match="verify") as e:
        verify_graph(g)
    check(
        e.value.op == "verify" and "%alien" in str(e.value),
        "5.5",
        'a foreign graph input raises OpError("verify", ...) naming it (%alien)',
        value=text([e.value.op, "%alien" in str(e.value)]),
        got=str(e.value),
    )
    # the nodes after a cond node are checked too
    g = minitorch.jit(lambda x: f(x) * 2).trace(minitorch.randn(2, 3))
    mul = g.ops[-1]
    mul.spec = Spec((3, 2), mul.spec.dtype)
    with pytest.raises(OpError, match="verify") as e:
        verify_graph(g)
    check(
        e.value.op == "verify" and _label(e) == f"%{mul.name} (mul)",
        "5.5",
        "check every node after a cond node too: name the mul whose spec is wrong",
        value=text([e.value.op, _label(e)]),
        got=str(e.value),
    )


@graded("5.6", points=2)
def test_interpret_runs_a_graph():
    """
    contract: Run ``graph`` on concrete tensors and return its outputs, packed as traced.
    contract: raise ``OpError("interpret", problem)`` if the number of inputs is wrong, the problem naming how many the graph takes and how many it got);
    """
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
    with pytest.raises(OpError, match="interpret") as e:
        interpret(g, x)
    counts = set(re.findall(r"\d+", str(e.value.problem)))
    check(
        e.value.op == "interpret" and {"1", "2"} <= counts,
        "5.6",
        'a wrong number of inputs raises OpError("interpret", problem), the problem naming '
        "how many the graph takes (2) and how many it got (1)",
        value=text([e.value.op, {"1", "2"} <= counts]),
        got=str(e.value),
    )


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
