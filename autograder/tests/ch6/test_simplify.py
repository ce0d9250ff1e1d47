"""Graded tests, chapter 6: the pattern mechanism (6.5), identity rules (6.6), view pairs (6.7)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import minitorch
from autograder.harness import check, graded, text
from minitorch import Spec
from minitorch.passes import SAFE, Pattern, apply_patterns, compose_views, identity_operand
from minitorch.tracing import Graph

from .util import cases, check_pass, const, node, outputs, same_outputs

F32 = np.dtype("float32")


def _which(n, got):
    """Which of ``n``'s inputs ``got`` is (its slot), or what else it is."""
    if got is None:
        return None
    slots = [k for k, i in enumerate(n.inputs) if i is got]
    return slots[0] if slots else "another node"


def _graph(shape=(2, 3), dtype=F32):
    g = Graph("g")
    return g, g.add_input(Spec(shape, np.dtype(dtype)), "x")


# ---------------------------------------------------------------- 6.5


@graded("6.5", points=2)
def test_apply_patterns_first_match_counts_and_sweeps():
    """
    contract: Apply ``patterns`` to ``graph`` until none matches; return ``{pattern name: count}``.
    contract: One sweep offers each live node of ``graph.nodes`` (one with users, or an output), in graph order, to the patterns whose ``op`` is the node's op, in table order; the first that returns something wins and the rest are not tried for that node
    contract: Dead nodes are never offered.
    contract: Only patterns that matched appear in the result.
    """
    g, x = _graph()
    a = node(g, "neg", node(g, "neg", x))
    b = node(g, "mul", a, const(g, 1.0))
    g.set_outputs([b])
    counts = apply_patterns(g, SAFE)
    check(g.outputs == [x], "6.5", "neg(neg(x)) * 1 must become x", got=g.outputs, graph=str(g))
    want = {"neg_neg": 1, "identity": 1}
    check(
        counts == want,
        "6.5",
        "wrong counts per pattern",
        value=text(counts),
        got=counts,
        expected=want,
    )

    seen = []
    first = Pattern("first", "exp", lambda n: seen.append("first") or n)
    second = Pattern("second", "exp", lambda n: seen.append("second") or n)
    g2, x2 = _graph()
    e = node(g2, "exp", x2)
    node(g2, "exp", x2)  # dead: never looked at
    g2.set_outputs([e])
    counts = apply_patterns(g2, [first, second], max_sweeps=3)
    check(
        seen == ["first"] * 3,
        "6.5",
        "try patterns in table order, stop at the first match, skip dead nodes, "
        "and sweep again while something changed (at most max_sweeps times)",
        value=text(seen),
        calls=seen,
    )
    check(counts == {"first": 3}, "6.5", "count every change", value=text(counts), got=counts)
    # a pattern that declines (returns None) passes the node on to the next one in the table
    tried = []
    decline = Pattern("decline", "exp", lambda n: tried.append("decline") or None)
    take = Pattern("take", "exp", lambda n: tried.append("take") or n)
    counts = apply_patterns(g2, [decline, take], max_sweeps=2)
    check(
        counts == {"take": 2} and tried == ["decline", "take"] * 2,
        "6.5",
        "a pattern that returns None does not win: offer the node to the next pattern",
        value=text((counts, tried)),
        got=counts,
        calls=tried,
    )
    # a sweep in which nothing matched is the fixed point: no second sweep
    tried.clear()
    counts = apply_patterns(g2, [decline])
    check(
        counts == {} and tried == ["decline"],
        "6.5",
        "stop after a sweep that changed nothing (the live exp node is offered once)",
        value=text(tried),
        calls=tried,
    )
    # a pattern that always rewrites in place never reaches a fixed point: max_sweeps=10 bounds it
    counts = apply_patterns(g2, [first])
    check(
        counts == {"first": 10},
        "6.5",
        "at most max_sweeps sweeps, 10 by default (one live exp node, rewritten once a sweep)",
        value=text(counts),
        got=counts,
    )
    none = Pattern("never", "tanh", lambda n: None)
    counts = apply_patterns(g2, [none])
    check(
        counts == {},
        "6.5",
        "patterns that never match are not listed",
        value=text(counts),
    )


@graded("6.5", points=2)
@settings(max_examples=20)
@given(cases(redundancy=True))
def test_safe_patterns_keep_outputs_bit_for_bit(case):
    graph, inputs = case
    g, counts = check_pass("6.5", graph, inputs, lambda g: apply_patterns(g, SAFE))
    check(counts.get("identity", 0) >= 3, "6.5", "the planted identities were missed", got=counts)
    check(apply_patterns(g, SAFE) == {}, "6.5", "not at a fixed point: a second call still matched")


# ---------------------------------------------------------------- 6.6


@graded("6.6", points=2)
def test_identity_operand_cases():
    """
    contract: Return the operand ``x`` when the *other* operand is a constant made only of the identity value
    contract: mul and add match on either side, sub and div only on the right (``0 - x`` is ``-x``).
    contract: Also required: ``x.spec == node.spec`` (the constant must not broadcast ``x`` to a bigger shape or promote its dtype).
    contract: In every other case return None.
    contract: The graph is not changed.
    """
    g, x = _graph()
    gi, xi = _graph(dtype="int64")
    gb, xb = _graph(shape=(3,))
    hits = [
        node(g, "mul", x, const(g, 1.0)),
        node(g, "mul", const(g, 1.0), x),
        node(g, "mul", x, const(g, np.ones((2, 3)))),
        node(g, "div", x, const(g, 1.0)),
        node(g, "sub", x, const(g, 0.0)),
        node(g, "add", x, const(g, -0.0)),
        node(g, "add", const(g, -0.0), x),
        node(gi, "add", xi, const(gi, 0, dtype=np.int64)),
    ]
    for n in hits:
        got = _answer(n)
        check(
            got is n.inputs[0 if n.inputs[0].op == "input" else 1],
            "6.6",
            "this is an identity",
            value=text(_which(n, got)),
            node=n.format(),
        )
    misses = [
        node(g, "div", const(g, 1.0), x),  # 1 / x
        node(g, "sub", const(g, 0.0), x),  # 0 - x is -x
        node(g, "add", x, const(g, 0.0)),  # -0.0 + 0.0 is +0.0
        node(g, "mul", x, const(g, [1.0, 2.0, 1.0])),  # not all ones
        node(g, "mul", x, const(g, 0.0)),  # x * 0 is not 0 for inf and NaN
        node(gb, "mul", xb, const(gb, np.ones((2, 3)))),  # broadcasts x to a bigger shape
        node(gi, "mul", xi, const(gi, 1.0)),  # promotes int64 to float
        node(g, "mul", x, g.add_const(minitorch.ones(1, requires_grad=True))),  # a parameter
    ]
    for n in misses:
        got = _answer(n)
        check(
            got is None,
            "6.6",
            "not an identity: keep the node",
            value=text(_which(n, got)),
            node=n.format(),
            got=got,
        )


def _answer(n):
    """identity_operand(n), checking that it leaves the graph as it was."""
    before = _state(n.graph)
    got = identity_operand(n)
    check(_state(n.graph) == before, "6.6", "identity_operand only answers: the graph (nodes, "
          "inputs, users, attributes, outputs) is not changed", node=n.format())  # fmt: skip
    return got


def _state(g):
    """What a pattern that only answers leaves as it was."""
    nodes = [(n, n.op, list(n.inputs), list(n.users), dict(n.attrs)) for n in g.nodes]
    return nodes, list(g.outputs)


@graded("6.6", points=2)
@settings(max_examples=25)
@given(st.sampled_from(["mul1", "div1", "sub0", "addm0", "add0", "mul0"]), st.integers(0, 99))
def test_compiled_identities_match_eager_on_special_values(rule, seed):
    values = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.5, -2.0, 1e-40], dtype=np.float32)
    x = minitorch.tensor(np.random.default_rng(seed).permutation(values))
    fn = {
        "mul1": lambda x: x * 1.0,
        "div1": lambda x: x / 1.0,
        "sub0": lambda x: x - 0.0,
        "addm0": lambda x: x + (-0.0),
        "add0": lambda x: x + 0.0,
        "mul0": lambda x: x * 0.0,
    }[rule]
    want = fn(x).numpy()
    compiled = minitorch.jit(fn).trace(x).compile()
    got = compiled(x).numpy()
    ops = len(compiled.graph)
    check(
        ops == (1 if rule in ("add0", "mul0") else 0),
        "6.6",
        f"{rule}: only x*1, x/1, x-0 and x+(-0.0) are identities",
        value=ops,
        graph=str(compiled.graph),
    )
    same = np.array_equal(got, want, equal_nan=True) and np.array_equal(
        np.signbit(got), np.signbit(want)
    )
    check(
        same,
        "6.6",
        f"{rule}: compiled differs from eager (sign of zero, inf, NaN)",
        x=x.numpy(),
        got=got,
        expected=want,
    )


# ---------------------------------------------------------------- 6.7


@graded("6.7", points=2)
def test_compose_views_cases():
    """
    contract: Collapse two stacked views of the same kind into one.
    contract: ``reshape(reshape(x, s1), s2)``: if ``x.spec == node.spec`` the pair does nothing: return ``x``.
    contract: If it is the identity, return ``x``; otherwise change the node in place into that single permute of ``x``
    contract: anything else (the inner node is not the same op, e.g. a permute of a reshape): None, graph unchanged.
    """
    g, x = _graph(shape=(2, 3, 4))
    t = node(g, "permute", node(g, "permute", x, order=(1, 0, 2)), order=(1, 0, 2))
    check(compose_views(t) is x, "6.7", "transpose of transpose is x", node=t.format())
    p = node(g, "permute", node(g, "permute", x, order=(1, 2, 0)), order=(1, 2, 0))
    got = compose_views(p)
    check(got is p and p.inputs == [x], "6.7", "two permutes become one permute of x", got=got)
    check(
        p.attrs["order"] == (2, 0, 1),
        "6.7",
        "wrong composed order",
        value=p.attrs["order"],
        got=p.attrs["order"],
    )
    r = node(g, "reshape", node(g, "reshape", x, shape=(6, 4)), shape=(4, 6))
    got = compose_views(r)
    check(got is r and r.inputs == [x], "6.7", "reshape of reshape reads x directly", got=got)
    r2 = node(g, "reshape", node(g, "reshape", x, shape=(24,)), shape=(2, 3, 4))
    check(compose_views(r2) is x, "6.7", "a reshape pair back to x's shape is x")
    mixed = node(g, "permute", node(g, "reshape", x, shape=(4, 6)), order=(1, 0))
    before = _state(g)
    check(compose_views(mixed) is None, "6.7", "a permute of a reshape is not one view")
    check(_state(g) == before, "6.7", "no match (a permute of a reshape): the graph is unchanged")
    check(
        x.users.count(r) == 1 and x.users.count(p) == 1, "6.7", "use set_input: users must follow"
    )


@graded("6.7", points=2)
@settings(max_examples=20)
@given(st.permutations([0, 1, 2]), st.permutations([0, 1, 2]), st.integers(0, 99))
def test_permute_pairs_compile_to_eager(p, q, seed):
    x = minitorch.tensor(np.random.default_rng(seed).standard_normal((2, 3, 4)).astype(np.float32))

    def fn(x):
        return x.permute(*p).permute(*q).reshape(-1).reshape(4, 6)

    g = minitorch.jit(fn).trace(x)
    before = outputs(g, [x])
    compiled = g.compile(passes=["simplify", "dce"])
    got = compiled(x).numpy()
    check(same_outputs(before, [got]), "6.7", "compiled differs from eager", value=got, p=p, q=q)
    n_perm = compiled.graph.op_names().count("permute")
    check(n_perm <= 1, "6.7", "two permutes must become at most one", graph=str(compiled.graph))
    n_reshape = compiled.graph.op_names().count("reshape")
    check(n_reshape == 1, "6.7", "two reshapes must become one", value=n_reshape)
