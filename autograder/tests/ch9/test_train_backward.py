"""Graded tests, chapter 9 (train): the forward values the backward keeps (9.1) and the
backward graph from the registry's VJPs (9.2)."""

from __future__ import annotations

import numpy as np
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

import minitorch
from autograder.harness import check, graded, text
from minitorch.compile import backward_graph, backward_order, saved_activations
from minitorch.core.registry import OPS, OpKind
from minitorch.tracing.graph import Graph
from minitorch.tracing.interpreter import interpret

from .remat_suite import SUITE, build
from .train_util import trace_with_grads


def _programs():
    """Small programs with shared values, broadcasting, reductions and unused inputs."""
    return [
        (lambda a, b: (a * a).sum(), [(3,), (3,)], [True, False]),
        (lambda a, b: ((a @ b).relu() * a.sum()).mean(), [(2, 3), (3, 4)], [True, True]),
        (lambda a, b: ((a + b) * (a - b)).exp().sum(), [(2, 3), (3,)], [True, True]),
        (lambda a, b: (a.tanh() * b.sigmoid() + a).max(), [(4,), (4,)], [True, True]),
        (lambda a, b: (a.detach() * b + a).sum(), [(2, 2), (2, 2)], [True, True]),
        (lambda a, b: (a.T @ a + b).log().sum(), [(3, 3), (3, 3)], [True, False]),
    ]


# ---------------------------------------------------------------- 9.1


def _is_view(n) -> bool:
    op = OPS.get(n.op)
    return op is not None and op.kind is OpKind.VIEW


def _saved(graph, k) -> list:
    """``[(position, bytes)]`` of the forward ops the backward reads (directly or through
    views), in program order: computed here from the specs, never by the learner's code."""
    nodes = graph.nodes
    owner = {}
    for n in nodes[:k]:
        if n.op in ("input", "const"):
            owner[n] = None
        elif _is_view(n):
            owner[n] = owner[n.inputs[0]]
        else:
            owner[n] = n
    read = {owner.get(x) for n in nodes[k:] for x in n.inputs} - {None}
    return [(i, n.spec.size * n.spec.dtype.itemsize) for i, n in enumerate(nodes[:k]) if n in read]


def _rows(graph, got) -> list:
    """The learner's answer as ``[(position, bytes)]`` (a key that is not a node of the graph
    is position -1), or its type's name when it is not a dict."""
    if not isinstance(got, dict):
        return [type(got).__name__]
    pos = {n: i for i, n in enumerate(graph.nodes)}
    return [
        (pos.get(n, -1), int(b) if isinstance(b, (int, np.integer)) else b) for n, b in got.items()
    ]


@graded("9.1", points=2)
def test_saved_activations_of_training_steps():
    """The suite of 9.11 (MLPs, a norm, a GLU, attention, Adam): every step, whole.
    contract: The forward values a training step keeps for its backward
    contract: Return ``{op: bytes}`` for every saved op
    """
    for name in SUITE:
        graph, k = build(name)
        before = graph.text()
        got = _rows(graph, saved_activations(graph, k))
        want = _saved(graph, k)
        check(
            got == want,
            "9.1",
            f"{name}: the saved activations (position in the graph, bytes), in program order",
            value=text(got),
            got=got,
            expected=want,
        )
        check(graph.text() == before, "9.1", f"{name}: the graph was changed")


def _example():
    """The docstring's graph: ``(graph, {name: node})``."""
    f32 = minitorch.Spec((4, 8), minitorch.float32)
    flat = minitorch.Spec((32,), minitorch.float32)
    g = Graph("example")
    x = g.add_input(f32, "x")
    e = g.add_node("exp", [x], {}, f32, "")
    r = g.add_node("reshape", [e], {"shape": (32,)}, flat, "")
    t = g.add_node("tanh", [e], {}, f32, "")
    s = g.add_node("sum", [t], {}, minitorch.Spec((), minitorch.float32), "")
    m = g.add_node("mul", [r, r], {}, flat, "")
    m2 = g.add_node("mul", [t, x], {}, f32, "")
    g.set_outputs([s, m, m2])
    return g


@graded("9.1", points=1)
def test_saved_activations_boundaries_views_and_errors():
    """contract: is *saved* when a node at ``backward_start`` or later reads its buffer
    contract: Raise ``ValueError`` naming ``backward_start`` and the number of nodes
    """
    g = _example()
    for k, want in [(5, [(1, 128), (3, 128)]), (4, [(1, 128), (3, 128)]), (3, [(1, 128)]),
                    (2, [(1, 128)]), (1, []), (0, []), (len(g.nodes), [])]:  # fmt: skip
        got = _rows(g, saved_activations(g, k))
        check(
            got == want,
            "9.1",
            f"the docstring's graph split at {k} (a view of an op is its op; inputs save nothing;"
            " the node at backward_start is in the backward)",
            value=text(got),
            got=got,
            expected=want,
        )
    # views of views of an input, a value read twice, float64 and int64 values
    f64, i64 = minitorch.Spec((3, 2), minitorch.float64), minitorch.Spec((6,), minitorch.int64)
    g = Graph("views")
    x = g.add_input(f64, "x")
    v = g.add_node("reshape", [g.add_node("permute", [x], {"order": (1, 0)},
                                          minitorch.Spec((2, 3), minitorch.float64), "")],
                   {"shape": (6,)}, minitorch.Spec((6,), minitorch.float64), "")  # fmt: skip
    a = g.add_node("neg", [x], {}, f64, "")
    c = g.add_node("argmax", [x], {"axis": None}, minitorch.Spec((), minitorch.int64), "")
    idx = g.add_node("cast", [v], {"dtype": minitorch.int64}, i64, "")
    k = len(g.nodes)
    b1 = g.add_node("mul", [a, a], {}, f64, "")
    b2 = g.add_node("add", [v, idx], {}, minitorch.Spec((6,), minitorch.float64), "")
    b3 = g.add_node("mul", [c, b1], {}, f64, "")
    g.set_outputs([b2, b3])
    got = _rows(g, saved_activations(g, k))
    want = [(3, 48), (4, 8), (5, 48)]
    check(got == want, "9.1", "views of an input, a value read twice, 8-byte dtypes",
          value=text(got), got=got, expected=want)  # fmt: skip
    for bad in (-1, len(g.nodes) + 1):
        try:
            saved_activations(g, bad)
        except ValueError as e:
            named = str(bad) in str(e) and str(len(g.nodes)) in str(e)
            check(
                named,
                "9.1",
                "the ValueError must name backward_start and the number of nodes",
                value=bad,
                error=str(e),
            )
        else:
            check(False, "9.1", "no ValueError for a backward_start outside the graph", value=bad)


# ---------------------------------------------------------------- 9.2


def _grads_by_graph(fn, arrays, needs):
    shapes = [a.shape for a in arrays]
    tracer, stt, xs, out = trace_with_grads(fn, shapes, needs)
    order = backward_order(out.node, stt.grad_nodes)
    with minitorch.no_grad(), tracer:
        grads = backward_graph(order, minitorch.ones(()), tracer.proxy, stt.grad_nodes)
        outs = [grads.get(x.node) for x, g in zip(xs, needs) if g]
    tracer.graph.set_outputs([tracer.lift(g) for g in outs])
    got = interpret(tracer.graph, *(minitorch.tensor(a) for a in arrays))
    return [g.numpy() for g in got], grads, order


def _grads_eager(fn, arrays, needs):
    xs = [minitorch.tensor(a, requires_grad=g) for a, g in zip(arrays, needs)]
    fn(*xs).backward()
    return [x.grad.numpy() for x, g in zip(xs, needs) if g]


@graded("9.2", points=3)
@settings(max_examples=12, phases=[Phase.generate])  # no shrinking
@given(st.integers(0, 5), st.integers(0, 2**16))
def test_backward_graph_gives_eager_gradients(k, seed):
    """contract: are leaves: they only receive
    contract: Every other node passes its gradient ``g`` to its inputs
    """
    fn, shapes, needs = _programs()[k]
    rng = np.random.default_rng(seed)
    arrays = [rng.uniform(0.5, 2.0, s).astype(np.float32) for s in shapes]
    got, _, _ = _grads_by_graph(fn, arrays, needs)
    want = _grads_eager(fn, arrays, needs)
    for g, w in zip(got, want):
        check(
            g.shape == w.shape and np.allclose(g, w, rtol=1e-4, atol=1e-5),
            "9.2",
            "a gradient differs from eager autograd's",
            value=g,  # sums of VJPs in another order: the check's own tolerance
            tol=(1e-4, 1e-5),
            program=k,
            got=g,
            want=w,
        )


@graded("9.2", points=2)
def test_value_used_twice_accumulates_and_order_0_gets_the_seed():
    """contract: Inputs not in ``needs_grad`` get no gradient
    contract: Return ``{node: gradient}`` for every node that got one
    contract: The gradient of ``order[0]`` (seeded with ``seed``)
    """
    got, grads, order = _grads_by_graph(
        lambda a: (a * a * a).sum(), [np.array([2.0, -1.0], np.float32)], [True]
    )
    check(
        np.allclose(got[0], [12.0, 3.0]),
        "9.2",
        "d(a*a*a)/da = 3a^2: add every use",
        value=got[0],
        got=got,
    )
    check(order[0] in grads, "9.2", "the first node's gradient is the seed")
    # seeded with 3: every gradient three times as large
    arrays = [np.array([2.0, -1.0], np.float32)]
    tracer, stt, xs, out = trace_with_grads(lambda a: (a * a * a).sum(), [(2,)], [True])
    order3 = backward_order(out.node, stt.grad_nodes)
    with minitorch.no_grad(), tracer:
        g3 = backward_graph(order3, minitorch.ones(()) * 3.0, tracer.proxy, stt.grad_nodes)
        tracer.graph.set_outputs([tracer.lift(g3[xs[0].node])])
    (got3,) = interpret(tracer.graph, minitorch.tensor(arrays[0]))
    check(np.allclose(got3.numpy(), [36.0, 9.0]), "9.2", "seeded with 3: 3 * 3a^2",
          value=got3.numpy())  # fmt: skip
    # an infinite gradient (sqrt at 0) stays inf: nothing multiplies it by 0
    arrays = [np.array([0.0, 1.0, 4.0], np.float32)]
    fn = lambda x: (x.sqrt() * 2.0).sum()  # noqa: E731
    (got_inf,), _, _ = _grads_by_graph(fn, arrays, [True])
    check(bool(np.array_equal(got_inf, _grads_eager(fn, arrays, [True])[0])), "9.2",
          "d(2 sqrt(x))/dx at x = [0, 1, 4] is [inf, 1, 0.5], as eager gives",
          value=got_inf)  # fmt: skip
    for n, g in grads.items():
        check(tuple(g.shape) == n.spec.shape, "9.2", "a gradient of the wrong shape", node=n)
    # an input that needs no grad gets none, even when its neighbour does
    tracer, stt, xs, out = trace_with_grads(lambda a, b: (a * b).sum(), [(2,), (2,)], [True, False])
    order = backward_order(out.node, stt.grad_nodes)
    with minitorch.no_grad(), tracer:
        grads = backward_graph(order, minitorch.ones(()), tracer.proxy, stt.grad_nodes)
    check(xs[0].node in grads and xs[1].node not in grads, "9.2",
          "skip inputs not in needs_grad", value=text([xs[1].node in grads]))  # fmt: skip
    # a rule may return None for an input: that input gets no gradient from it
    import minitorch.core.registry as reg

    half = "ch9_halfgrad"
    if half not in reg.OPS:
        reg.register_op(half, reg.OpKind.ELEMENTWISE, 2, lambda a, b: a, doc="test")
        reg.register_kernel(half, "*")(lambda a, b, out: a)
        reg.register_vjp(half)(lambda g, out, a, b: (g, None))
    tracer, stt, xs, out = trace_with_grads(
        lambda a, b: minitorch.dispatch(half, a, b).sum(), [(2,), (2,)], [True, True]
    )
    order = backward_order(out.node, stt.grad_nodes)
    with minitorch.no_grad(), tracer:
        grads = backward_graph(order, minitorch.ones(()), tracer.proxy, stt.grad_nodes)
    check(xs[0].node in grads and xs[1].node not in grads and all(g is not None for g in grads.values()), "9.2",
          "a None gradient is skipped", value=text([xs[1].node in grads]))  # fmt: skip


@graded("9.2", points=1)
def test_no_rule_and_bad_shapes_raise():
    """contract: Raise ``RuntimeError`` naming the op when it has no rule"""
    import minitorch.core.registry as reg

    name = "ch9_norule"
    if name not in reg.OPS:
        reg.register_op(name, reg.OpKind.ELEMENTWISE, 1, lambda a: a, doc="test")
        reg.register_kernel(name, "*")(lambda a, out: a)
    tracer, stt, xs, out = trace_with_grads(
        lambda a: minitorch.dispatch(name, a).sum(), [(2,)], [True]
    )
    order = backward_order(out.node, stt.grad_nodes)
    try:
        with minitorch.no_grad(), tracer:
            backward_graph(order, minitorch.ones(()), tracer.proxy, stt.grad_nodes)
    except RuntimeError as e:
        named = name if name in str(e) else None  # the part of the message the contract fixes
        check(name in str(e), "9.2", "name the op without a rule", value=text(named), error=str(e))
    else:
        check(False, "9.2", "an op without a VJP must raise RuntimeError")
    # a rule that returns a gradient of the wrong shape is refused, naming the op
    bad = "ch9_badshape"
    if bad not in reg.OPS:
        reg.register_op(bad, reg.OpKind.ELEMENTWISE, 1, lambda a: a, doc="test")
        reg.register_kernel(bad, "*")(lambda a, out: a)
        reg.register_vjp(bad)(lambda g, out, a: (g.sum(),))
    tracer, stt, xs, out = trace_with_grads(
        lambda a: minitorch.dispatch(bad, a).sum(), [(2,)], [True]
    )
    order = backward_order(out.node, stt.grad_nodes)
    try:
        with minitorch.no_grad(), tracer:
            backward_graph(order, minitorch.ones(()), tracer.proxy, stt.grad_nodes)
    except RuntimeError as e:
        named = bad if bad in str(e) else None
        check(bad in str(e), "9.2", "name the op whose rule gave a wrong shape",
              value=text(named), error=str(e))  # fmt: skip
    else:
        check(False, "9.2", "a gradient whose shape is not its input's must raise RuntimeError")
