"""Graded tests, chapter 5: cache keys (5.7), guards (5.8), cond (5.9), graph breaks."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch
from autograder.harness import assert_close, check, graded
from minitorch import OpError
from minitorch.tracing import GraphBreakError, cache_key, guard_failures


@graded("5.7", points=2)
def test_cache_key_describes_arguments():
    x = minitorch.ones(2, 3)
    key = cache_key((x, 0.5, [1, [2, 3]], "relu", True))
    expected = (
        ("tensor", (2, 3), "float32", "cpu"),
        ("static", "float", 0.5),
        ("static", "list", (1, (2, 3))),
        ("static", "str", "relu"),
        ("static", "bool", True),
    )
    check(key == expected, "5.7", "wrong cache key", got=key, expected=expected)
    check(hash(key) is not None, "5.7", "the key must be hashable")
    same = cache_key((minitorch.zeros(2, 3), 0.5, [1, [2, 3]], "relu", True))
    check(same == key, "5.7", "tensor values must not matter, only shape/dtype/device")
    check(cache_key((1,)) != cache_key((True,)), "5.7", "True and 1 must give different keys")
    with pytest.raises(OpError, match="argument 1"):
        cache_key((x, [x]))
    with pytest.raises(OpError, match="argument 0"):
        cache_key(({"a": 1},))


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
        traces=len(calls),
    )
    assert_close(f(b, 2.0).numpy(), b.numpy() * 2, "5.7")
    f(b, 3.0)
    f(minitorch.randn(4, 3), 3.0)
    f(a.double(), 3.0)
    check(
        len(calls) == 4, "5.7", "a new static value, shape or dtype must retrace", traces=len(calls)
    )


@graded("5.8", points=2)
def test_guard_failures_messages():
    t = ("tensor", (2, 3), "float32", "cpu")
    check(guard_failures(["x"], (t,), (t,)) == [], "5.8", "equal keys fail no guard")
    got = guard_failures(
        ["x", "n"],
        (t, ("static", "int", 3)),
        (("tensor", (4, 3), "float64", "cpu"), ("static", "int", 4)),
    )
    expected = [
        "x.shape changed from (2, 3) to (4, 3)",
        "x.dtype changed from float32 to float64",
        "n changed from 3 to 4",
    ]
    check(got == expected, "5.8", "wrong messages", got=got, expected=expected)
    got = guard_failures(
        ["x", "n"], (t, ("static", "int", 3)), (("static", "float", 1.0), ("static", "float", 3.0))
    )
    expected = ["x changed from a tensor to a static float", "n changed type from int to float"]
    check(got == expected, "5.8", "wrong messages", got=got, expected=expected)
    got = guard_failures(["x"], (("static", "str", "a"),), (t,))
    check(got == ["x changed from a static str to a tensor"], "5.8", "static -> tensor", got=got)
    got = guard_failures(["x", "y"], (t,), (t, t))
    check(got == ["the number of arguments changed from 1 to 2"], "5.8", "arity", got=got)


@graded("5.8", points=2)
def test_every_retrace_says_why():
    f = minitorch.jit(lambda x, k: x.sum(axis=k))
    f(minitorch.ones(2, 3), 0)
    f(minitorch.ones(4, 3), 0)
    f(minitorch.ones(4, 3), 1)
    expected = ["x.shape changed from (2, 3) to (4, 3)", "k changed from 0 to 1"]
    check(
        f.recompiles == expected,
        "5.8",
        "wrong retrace reasons",
        got=f.recompiles,
        expected=expected,
    )
    g = minitorch.jit(lambda x: x + 1)
    with pytest.warns(RuntimeWarning, match="cache limit"):
        for n in range(1, 11):
            assert_close(g(minitorch.ones(n)).numpy(), np.full(n, 2.0), "5.8")
    check(
        g.trace_count == 8 and len(g.recompiles) == 7,
        "5.8",
        "after 8 signatures the function runs eagerly",
        traces=g.trace_count,
    )


def _branchy(x):
    return minitorch.cond(x.sum() > 0, lambda a: (a * 2).exp(), lambda a: a.tanh() - 1, x)


@graded("5.9", points=3)
def test_cond_records_one_node_with_both_branches():
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
        spec=str(node.spec),
    )
    for v in (0.5, -0.5):
        x = minitorch.full((2, 3), v)
        assert_close(f(x).numpy(), _branchy(x).numpy(), "5.9", x=x.numpy())
    check(f.trace_count == 1, "5.9", "both branch outcomes run from one graph")


@graded("5.9", points=2)
def test_cond_rejects_mismatched_branches():
    def bad(x):
        return minitorch.cond(x.sum() > 0, lambda a: a, lambda a: a.sum(axis=0), x)

    with pytest.raises(OpError, match=r"cond.*float32\[2,3\].*float32\[3\]"):
        minitorch.jit(bad).trace(minitorch.ones(2, 3))

    def bad_dtype(x):
        return minitorch.cond(x.sum() > 0, lambda a: a, lambda a: a.double(), x)

    with pytest.raises(OpError, match=r"cond.*float64"):
        minitorch.jit(bad_dtype).trace(minitorch.ones(2))

    def bad_pred(x):
        return minitorch.cond(x > 0, lambda a: a, lambda a: -a, x)

    with pytest.raises(OpError, match=r"cond.*one element"):
        minitorch.jit(bad_pred).trace(minitorch.ones(2))


def _two_breaks(x, n):
    y = x * 2
    if y.sum() > 0:  # break 1
        y = y + 1
    for _ in range(n):
        y = y.tanh()
    while y.max() > 0.5:  # break 2 (and more, per loop test)
        y = y * 0.5
    return y - 1


@graded("5.1", points=2)
def test_graph_breaks_split_the_function_and_match_eager():
    x = minitorch.tensor([[0.5, 1.0, 2.0]])
    out = minitorch.explain(_two_breaks)(x, 2)
    assert_close(out.out.numpy(), _two_breaks(x, 2).numpy(), "5.1", x=x.numpy())
    check(
        out.graph_break_count == 3,
        "5.1",
        "bool() on a traced value is a break each time",
        breaks=[str(b) for b in out.break_reasons],
    )
    check(out.graph_count == 4, "5.1", "each break ends one graph", graphs=out.graph_count)
    check(
        all("bool()" in b.reason and b.where.startswith("test_jit.py:") for b in out.break_reasons),
        "5.1",
        "each break names its reason and line",
        breaks=[str(b) for b in out.break_reasons],
    )
    f = minitorch.jit(_two_breaks)
    for v in (1.0, -3.0):
        x = minitorch.full((1, 3), v)
        assert_close(f(x, 1).numpy(), _two_breaks(x, 1).numpy(), "5.1", x=x.numpy())
    with pytest.raises(GraphBreakError, match=r"test_jit.py:\d+.*cond"):
        minitorch.jit(_two_breaks, fullgraph=True)(x, 1)
