"""Graded tests, chapter 5: cache keys (5.7), splitting at graph breaks (5.8), cond (5.9)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import minitorch
from autograder.harness import assert_close, check, graded, text
from minitorch import OpError
from minitorch.nn.module import Parameter
from minitorch.tracing import GraphBreakError, Tracer, cache_key, split_at_break
from minitorch.tracing.tracer import flatten_output


@graded("5.7", points=2)
def test_cache_key_describes_arguments():
    """
    contract: ``("tensor", (2, 3), "float32", "cpu")`` (values do not matter);
    contract: a Tensor inside a list/tuple, or a value that cannot be hashed, raises ``OpError("jit", problem, hint)`` naming the argument's position.
    """
    x = minitorch.ones(2, 3)
    key = cache_key((x, 0.5, [1, [2, 3]], "relu", True))
    expected = (
        ("tensor", (2, 3), "float32", "cpu"),
        ("static", "float", 0.5),
        ("static", "list", (1, (2, 3))),
        ("static", "str", "relu"),
        ("static", "bool", True),
    )
    check(key == expected, "5.7", "wrong cache key", value=text(key), got=key, expected=expected)
    check(hash(key) is not None, "5.7", "the key must be hashable")
    same = cache_key((minitorch.zeros(2, 3), 0.5, [1, [2, 3]], "relu", True))
    check(same == key, "5.7", "tensor values must not matter, only shape/dtype/device")
    check(cache_key((1,)) != cache_key((True,)), "5.7", "True and 1 must give different keys")
    with pytest.raises(OpError, match="argument 1") as e:
        cache_key((x, [x]))
    check(
        e.value.op == "jit",
        "5.7",
        "a Tensor in a list names its argument",
        value=text([e.value.op, re.search(r"argument \d+", str(e.value)).group()]),
    )
    check(bool(e.value.hint), "5.7", 'a Tensor in a list raises OpError("jit", problem, hint): '
          "the hint says what would work", value=text(bool(e.value.hint)))  # fmt: skip
    with pytest.raises(OpError, match="argument 0") as e:
        cache_key(({"a": 1},))
    check(
        e.value.op == "jit",
        "5.7",
        "an unhashable static names its argument",
        value=text([e.value.op, re.search(r"argument \d+", str(e.value)).group()]),
    )
    check(bool(e.value.hint), "5.7", 'an unhashable static raises OpError("jit", problem, '
          'hint): the hint says what would work', value=text(bool(e.value.hint)))  # fmt: skip


@graded("5.7", points=2)
def test_jit_caches_per_signature():
    calls = []

    @minitorch.jit
    def f(x, scale):
        calls.append(1)
        return x * scale

    a, b = minitorch.randn(2, 3), minitorch.randn(2, 3)
    f(a, 2.0)
    f(b, 2.0)
    check(
        len(calls) == 1,
        "5.7",
        "same shapes and static values must hit the cache",
        value=len(calls),
        traces=len(calls),
    )
    assert_close(f(b, 2.0).numpy(), b.numpy() * 2, "5.7")
    f(b, 3.0)
    f(minitorch.randn(4, 3), 3.0)
    f(a.double(), 3.0)
    check(
        len(calls) == 4,
        "5.7",
        "a new static value, shape or dtype must retrace",
        value=len(calls),
        traces=len(calls),
    )


def _branchy(x):
    return minitorch.cond(x.sum() > 0, lambda a: (a * 2).exp(), lambda a: a.tanh() - 1, x)


@graded("5.9", points=3)
def test_cond_records_one_node_with_both_branches():
    """
    contract: (nodes from ``tracer.lift``) and return ``tracer.proxy(node)``.
    """
    f = minitorch.jit(_branchy, fullgraph=True)
    g = f.trace(minitorch.ones(2, 3))
    check(
        g.op_names() == ["sum", "gt", "cond"],
        "5.9",
        "one cond node after the predicate",
        ops=g.op_names(),
    )
    node = g.ops[-1]
    tg, fg = node.attrs["true_graph"], node.attrs["false_graph"]
    check(
        tg.op_names() == ["mul", "exp"] and fg.op_names() == ["tanh", "sub"],
        "5.9",
        "both branches must be traced",
        true=tg.op_names(),
        false=fg.op_names(),
    )
    check(
        str(node.spec) == "float32[2,3]" and len(node.inputs) == 2,
        "5.9",
        "the node takes the predicate and the operands",
        value=len(node.inputs),
        spec=str(node.spec),
    )
    for v in (0.5, -0.5):
        x = minitorch.full((2, 3), v)
        assert_close(f(x).numpy(), _branchy(x).numpy(), "5.9", x=x.numpy())
    check(
        f.trace_count == 1,
        "5.9",
        "both branch outcomes run from one graph",
        value=f.trace_count,
    )


@graded("5.9", points=2)
def test_cond_rejects_mismatched_branches():
    """
    contract: ``pred`` must hold exactly one element, else ``OpError("cond", problem, hint)``;
    contract: the two output specs (shape, dtype, device) must be equal, else raise ``OpError("cond", problem, hint)`` showing both
    """

    def bad(x):
        return minitorch.cond(x.sum() > 0, lambda a: a, lambda a: a.sum(axis=0), x)

    with pytest.raises(OpError, match=r"cond.*float32\[2,3\].*float32\[3\]") as e:
        minitorch.jit(bad).trace(minitorch.ones(2, 3))
    check(
        e.value.op == "cond" and bool(e.value.hint),
        "5.9",
        'mismatched shapes raise OpError("cond", problem, hint)',
        value=text([e.value.op, bool(e.value.hint)]),
    )

    def bad_dtype(x):
        return minitorch.cond(x.sum() > 0, lambda a: a, lambda a: a.double(), x)

    with pytest.raises(OpError, match=r"cond.*float64") as e:
        minitorch.jit(bad_dtype).trace(minitorch.ones(2))
    check(
        e.value.op == "cond",
        "5.9",
        'mismatched dtypes raise OpError("cond", ...)',
        value=text(e.value.op),
    )

    def bad_pred(x):
        return minitorch.cond(x > 0, lambda a: a, lambda a: -a, x)

    with pytest.raises(OpError, match=r"cond.*one element") as e:
        minitorch.jit(bad_pred).trace(minitorch.ones(2))
    check(
        e.value.op == "cond" and bool(e.value.hint),
        "5.9",
        'a predicate of several elements raises OpError("cond", problem, hint)',
        value=text([e.value.op, bool(e.value.hint)]),
    )

    def two_outputs(x):  # trace_branch names the branch it was given: "false" here
        return minitorch.cond(x.sum() > 0, lambda a: a, lambda a: (a, a), x)

    with pytest.raises(OpError, match="false branch") as e:
        minitorch.jit(two_outputs).trace(minitorch.ones(2))
    check(e.value.op == "cond", "5.9", 'trace each branch with its name: trace_branch(false_fn, '
          'operands, "false")', value=text(e.value.op))  # fmt: skip

    def two_outputs_true(x):  # and "true" for the true branch
        return minitorch.cond(x.sum() > 0, lambda a: (a, a), lambda a: a, x)

    with pytest.raises(OpError, match="true branch") as e:
        minitorch.jit(two_outputs_true).trace(minitorch.ones(2))
    check(e.value.op == "cond", "5.9", 'trace each branch with its name: trace_branch(true_fn, '
          'operands, "true")', value=text(e.value.op))  # fmt: skip


def _two_breaks(x, n):
    y = x * 2
    if y.sum() > 0:  # break 1
        y = y + 1
    for _ in range(n):
        y = y.tanh()
    while y.max() > 0.5:  # break 2 (and more, per loop test)
        y = y * 0.5
    return y - 1


@graded("5.8", points=2)
def test_graph_breaks_split_the_function_and_match_eager():
    """
    contract: so that one call yields a sequence of graphs that together compute what eager computes.
    """
    x = minitorch.tensor([[0.5, 1.0, 2.0]])
    out = minitorch.explain(_two_breaks)(x, 2)
    assert_close(out.out.numpy(), _two_breaks(x, 2).numpy(), "5.8", x=x.numpy())
    check(
        out.graph_break_count == 3,
        "5.8",
        "bool() on a traced value is a break each time",
        value=out.graph_break_count,
        breaks=[str(b) for b in out.break_reasons],
    )
    check(
        out.graph_count == 4,
        "5.8",
        "each break ends one graph",
        value=out.graph_count,
        graphs=out.graph_count,
    )
    check(
        all("bool()" in b.reason and b.where.startswith("test_jit.py:") for b in out.break_reasons),
        "5.8",
        "each break names its reason and line",
        breaks=[str(b) for b in out.break_reasons],
    )
    f = minitorch.jit(_two_breaks)
    for v in (1.0, -3.0):
        x = minitorch.full((1, 3), v)
        assert_close(f(x, 1).numpy(), _two_breaks(x, 1).numpy(), "5.8", x=x.numpy())
    with pytest.raises(GraphBreakError, match=r"test_jit.py:\d+.*cond"):
        minitorch.jit(_two_breaks, fullgraph=True)(x, 1)


def _trace_with_breaks(x):
    """Trace ``f`` by hand on a concrete x: three graphs, values crossing both breaks."""

    def f(v):
        y = v * 2
        z = v + 1
        if y.sum() > 0:  # break 1: y and z cross into graph 1
            w = z * y + y
        else:
            w = z - y
        if w.max() > 100:  # break 2: y crosses again, into graph 2
            w = w * 0.5
        return w - y

    t = Tracer("f", concrete=[x])
    with t:
        out = f(t.input(x.spec, "x"))
        leaves, _ = flatten_output(t, out)
        value = t.evaluate(leaves[0])
        t.finish(leaves)
    return t, value, f(x)


@graded("5.8", points=2)
def test_split_at_break_cuts_graphs_and_carries_values():
    """
    contract: Return the concrete value of ``p`` and leave the tracer recording into a fresh graph
    contract: the value: ``tracer.evaluate(node)`` computes any node from the call's real inputs (memoised); return ``p``'s value as a Tensor;
    contract: the cut: the ops after the break go into a new ``Graph`` named ``f"{tracer.name}_{k}"`` with ``k`` its position in ``tracer.graphs`` (append it there and make it ``tracer.graph``).
    contract: A value of an older graph that a later op uses enters the new graph as an input, once per graph
    """
    x = minitorch.tensor([[0.5, -1.0, 2.0]])
    t, got, want = _trace_with_breaks(x)
    assert_close(got.numpy(), want.numpy(), "5.8", x=x.numpy())
    names = [g.name for g in t.graphs]
    check(names == ["f", "f_1", "f_2"], "5.8", "one new graph per break, named f_<k>", got=names)
    check(t.graph is t.graphs[-1], "5.8", "tracer.graph must be the newest graph")
    ops = [g.op_names() for g in t.graphs]
    want_ops = [["mul", "add", "sum", "gt"], ["mul", "add", "max", "gt"], ["sub"]]
    check(ops == want_ops, "5.8", "each graph holds the ops between two breaks", got=ops)
    check(
        [b.reason.split()[0] for b in t.breaks] == ["bool()", "bool()"],
        "5.8",
        "one Break per break, with its reason",
        breaks=[str(b) for b in t.breaks],
    )
    for g in t.graphs:
        for n in g.nodes:
            check(
                all(i.graph is g for i in n.inputs),
                "5.8",
                "a node reads a node of another graph: values must cross a break as inputs "
                "of the new graph (tracer.crossing describes the current graph only)",
                graph=g.name,
                node=n.name,
            )
    counts = [len(g.inputs) for g in t.graphs]
    check(
        counts == [1, 2, 2],
        "5.8",
        "each crossing value enters a graph once",
        value=counts,
        inputs=counts,
    )
    first = t.graphs[0]
    check(
        any(o.op == "gt" for o in first.outputs),
        "5.8",
        "the value Python read at the break must be an output of its graph (tracer.broken)",
        outputs=[o.name for o in first.outputs],
    )
    for g in t.graphs:
        g.verify()
    # split_at_break itself: p's value, as a Tensor, and a fresh graph to record into
    t = Tracer("g", concrete=[x])
    with t:
        p = t.input(x.spec, "x") * 2
        first = t.graph
        v = split_at_break(t, p, "test", "here")
    check(isinstance(v, minitorch.Tensor), "5.8", "split_at_break returns p's value as a "
          f"Tensor, got a {type(v).__name__}", got=type(v).__name__)  # fmt: skip
    if isinstance(v, minitorch.Tensor):
        assert_close(v.numpy(), x.numpy() * 2, "5.8", x=x.numpy(), p="x * 2")
    check(t.graph is not first and t.graphs == [first, t.graph], "5.8",
          "after the break the tracer records into a fresh graph, appended to tracer.graphs")  # fmt: skip


@graded("5.8", points=2)
def test_values_before_a_break_are_computed_before_python_goes_on():
    """
    contract: Every value of the graph being closed must already be what eager computed before that code ran.
    """
    x = minitorch.tensor([1.0, 2.0, 3.0])
    w = Parameter(minitorch.ones(3))  # a tensor from outside the call: a constant of the graph
    t = Tracer("step", concrete=[x])
    with t:
        p = t.input(x.spec, "x")
        z = p * w  # uses w before the break
        if p.sum() > 0:
            w.assign_(minitorch.full((3,), 2.0))  # Python updates w in place after the break
        got = t.evaluate(z.node).numpy()
    check(
        np.array_equal(w.numpy(), [2.0, 2.0, 2.0]),
        "5.8",
        "the update ran",
        value=w.numpy(),
        w=w.numpy(),
    )
    check(
        np.array_equal(got, [1.0, 2.0, 3.0]),
        "5.8",
        "x * w was computed with w after the update: every value of the closed graph must "
        "be computed at the break, as eager did",
        value=got,
        got=got,
    )
    y = minitorch.tensor([[0.5, 1.0, 2.0]])
    with pytest.raises(GraphBreakError, match="fullgraph"):
        minitorch.jit(lambda v: v * 2 if v.sum() > 0 else v, fullgraph=True)(y)
