"""Graded tests, chapter 9 (train): the backward graph from the registry's VJPs (9.1, 9.2)."""

from __future__ import annotations

import numpy as np
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

import minitorch
from autograder.harness import check, graded, text
from minitorch.compile import backward_graph, backward_order
from minitorch.tracing.interpreter import interpret

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


@graded("9.1", points=2)
def test_order_is_reverse_topological_and_complete():
    for fn, shapes, needs in _programs():
        tracer, stt, xs, out = trace_with_grads(fn, shapes, needs)
        order = backward_order(out.node, stt.grad_nodes)
        check(order and order[0] is out.node, "9.1", "the loss comes first", order=order)
        check(len(set(order)) == len(order), "9.1", "each node once (x * x uses x twice)")
        pos = {n: k for k, n in enumerate(order)}
        for n in order:
            check(n in stt.grad_nodes, "9.1", "a node that needs no grad was visited", node=n)
            for i in n.inputs:
                if i in pos:
                    check(pos[i] > pos[n], "9.1", "a node came after one of its inputs", node=n)
        # every node the loss reaches through grad-requiring nodes is there
        want, stack = set(), [out.node]
        while stack:
            n = stack.pop()
            if n in want or n not in stt.grad_nodes:
                continue
            want.add(n)
            stack.extend(n.inputs)
        check(
            set(order) == want,
            "9.1",
            "missing or extra nodes",
            value=len(order),
            got=len(order),
            want=len(want),
        )
        for x, g in zip(xs, needs):
            check(
                (x.node in pos) == g,
                "9.1",
                "an input's presence is wrong",
                value=x.node in pos,
                input=x.node,
            )


@graded("9.1", points=1)
def test_order_of_a_value_without_grad_is_empty_and_deep_graphs_work():
    tracer, stt, xs, out = trace_with_grads(lambda a: (a * 2).sum(), [(2,)], [False])
    check(backward_order(out.node, stt.grad_nodes) == [], "9.1", "no grad needed: []")

    def deep(a):
        for _ in range(3000):
            a = a * 1.0
        return a.sum()

    tracer, stt, xs, out = trace_with_grads(deep, [(2,)], [True])
    order = backward_order(out.node, stt.grad_nodes)
    check(
        len(order) == 3002 and order[-1] is xs[0].node,
        "9.1",
        "a deep chain",
        value=len(order),
        got=len(order),
    )


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
