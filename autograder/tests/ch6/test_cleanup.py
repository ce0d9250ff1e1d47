"""Graded tests, chapter 6: the rewrite API (6.1), DCE (6.2), CSE (6.3), constant folding (6.4)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings

import minitorch
from autograder.harness import check, graded
from minitorch import Spec
from minitorch.passes import (
    common_subexpressions,
    constant_fold,
    dead_code_elimination,
    is_pure,
    mark_impure,
    replace_all_uses,
)
from minitorch.tracing import Graph

from .util import cases, check_pass, const, node, users_consistent

F32 = np.dtype("float32")


def _noise_op():
    """A random custom op: two calls on equal inputs differ, so no pass may merge or drop it."""
    if "ch6_noise" not in minitorch.OPS:

        @minitorch.custom_op("ch6_noise", infer=lambda a: a)
        def noise(x):
            noise = np.random.default_rng()  # unseeded: two calls must differ
            return x + noise.standard_normal(x.shape).astype(x.dtype)

        mark_impure("ch6_noise")
    return "ch6_noise"


def _small_graph():
    g = Graph("g")
    x = g.add_input(Spec((2, 3), F32), "x")
    y = g.add_input(Spec((2, 3), F32), "y")
    return g, x, y


# ---------------------------------------------------------------- 6.1


@graded("6.1", points=2)
def test_replace_all_uses_rewires_users_and_outputs():
    """
    contract: Make every use of ``old`` a use of ``new``; return how many uses changed.
    contract: Afterwards ``old.users`` is empty and ``new.users`` lists each new user once per slot, so the users lists stay consistent with the inputs lists.
    contract: Replacing a node by itself changes nothing and returns 0.
    """
    g, x, y = _small_graph()
    m = node(g, "mul", x, y)
    a = node(g, "add", m, m)  # two uses in one node
    e = node(g, "exp", m)
    g.set_outputs([a, m, e])
    n = replace_all_uses(m, y)
    check(
        n == 4, "6.1", "count every input slot and every output entry", value=n, got=n, expected=4
    )
    check(a.inputs == [y, y] and e.inputs == [y], "6.1", "users must read the new node", g=str(g))
    check(g.outputs == [a, y, e], "6.1", "graph outputs must be replaced too", got=g.outputs)
    check(m.users == [], "6.1", "the old node must have no users left", users=m.users)
    check(m in g.nodes, "6.1", "the old node stays in the graph (DCE removes it)")
    check(users_consistent(g), "6.1", "users lists disagree with inputs lists", g=str(g))
    k = replace_all_uses(a, a)
    check(k == 0, "6.1", "replacing a node by itself changes nothing", value=k)
    check(
        users_consistent(g) and g.outputs == [a, y, e], "6.1", "self-replacement changed the graph"
    )


@graded("6.1", points=2)
@settings(max_examples=15)
@given(cases(redundancy=False))
def test_replace_all_uses_keeps_graphs_valid(case):
    graph, inputs = case

    def run(g):
        # replace every node by an earlier node with the same spec and same value: itself
        # through a no-op chain is not available, so merge exact duplicates by hand
        ops = g.ops
        for k, n in enumerate(ops):
            for m in ops[:k]:
                if m.op == n.op and m.inputs == n.inputs and m.attrs == n.attrs and m.users:
                    replace_all_uses(n, m)
                    break

    check_pass("6.1", graph, inputs, run)


# ---------------------------------------------------------------- 6.2


@graded("6.2", points=2)
def test_dce_removes_dead_keeps_inputs_and_impure():
    """
    contract: A node is *live* if it is an output, an ``input`` node (inputs are the graph's signature and always stay), impure (``not is_pure(node)``: random or side-effecting ops run even if unused), or an input of a live node.
    """
    g, x, y = _small_graph()
    dead1 = node(g, "exp", x)
    node(g, "neg", dead1)  # dead chain
    noisy = node(g, _noise_op(), x)  # unused but random: stays
    out = node(g, "tanh", x)
    g.set_outputs([out])
    n = dead_code_elimination(g)
    check(n == 2, "6.2", "two nodes are dead", value=n, got=n, graph=str(g))
    check(g.op_names() == [noisy.op, "tanh"], "6.2", "wrong nodes kept", got=g.op_names())
    check(y in g.nodes, "6.2", "an unused input is part of the signature and stays")
    check(users_consistent(g), "6.2", "users lists still mention removed nodes", x_users=x.users)
    again = dead_code_elimination(g)
    check(again == 0, "6.2", "a second run must find nothing", value=again)
    # an impure node that is kept keeps what it reads, even a chain nothing else uses
    g, x, y = _small_graph()
    feed = node(g, "exp", node(g, "neg", x))
    noisy = node(g, _noise_op(), feed)
    g.set_outputs([node(g, "tanh", y)])
    n = dead_code_elimination(g)
    check(n == 0, "6.2", "an impure node's inputs are live", value=n, got=g.op_names())
    check(g.op_names() == ["neg", "exp", noisy.op, "tanh"], "6.2", "wrong nodes kept",
          got=g.op_names())  # fmt: skip


@graded("6.2", points=2)
@settings(max_examples=20)
@given(cases(redundancy=True))
def test_dce_preserves_outputs_and_leaves_no_dead_node(case):
    """
    contract: Remove the nodes no output depends on; return how many were removed.
    """
    graph, inputs = case
    order = {n.name: k for k, n in enumerate(graph.nodes)}
    g, removed = check_pass("6.2", graph, inputs, dead_code_elimination)
    keys = [order[n.name] for n in g.nodes]
    check(keys == sorted(keys), "6.2", "the remaining nodes must keep their order")
    live = set(g.outputs)
    for n in reversed(g.nodes):
        if n in live:
            live.update(n.inputs)
    dead = [n for n in g.ops if n not in live and is_pure(n)]
    check(not dead, "6.2", "dead nodes remain", dead=dead, graph=str(g))
    check(
        removed == len(graph.nodes) - len(g.nodes),
        "6.2",
        "wrong count returned",
        value=removed,
        got=removed,
    )


# ---------------------------------------------------------------- 6.3


@graded("6.3", points=2)
def test_cse_merges_only_what_is_equal():
    """
    contract: Two ``const`` nodes compute the same value when their ``const_key`` is equal.
    contract: Two other nodes do when they have the same op, the same input nodes (the same objects, in the same order; in any order for the ``COMMUTATIVE`` ops only: ``a - b`` is not ``b - a``), equal attributes (``attrs_key``) and the same spec.
    contract: ``input`` nodes and impure nodes (``is_pure``) are never merged: two random draws are two different values even with equal inputs.
    contract: Every later duplicate hands all its uses to the earliest equal node (``replace_all_uses``) and is left dead for DCE.
    """
    g, x, y = _small_graph()
    a1, a2 = node(g, "add", x, y), node(g, "add", y, x)  # commutative: equal
    s1, s2 = node(g, "sub", x, y), node(g, "sub", y, x)  # not equal
    r1, r2 = node(g, "sum", x, axis=0), node(g, "sum", x, axis=1)  # attrs differ
    n1, n2 = node(g, _noise_op(), x), node(g, _noise_op(), x)  # random: never merged
    c1, c2 = const(g, 2.0), const(g, 2.0)  # equal small constants
    z1, z2 = const(g, 0.0), const(g, -0.0)  # -0.0 is not 0.0
    m1, m2 = node(g, "mul", x, c1), node(g, "mul", x, c2)
    p1, p2 = node(g, "add", x, z1), node(g, "add", x, z2)
    w1, w2 = minitorch.ones(2, 3, requires_grad=True), minitorch.ones(2, 3, requires_grad=True)
    q1, q2 = node(g, "mul", x, g.add_const(w1)), node(g, "mul", x, g.add_const(w2))  # parameters
    outs = [a1, a2, s1, s2, r1, r2, n1, n2, m1, m2, p1, p2, q1, q2]
    g.set_outputs(outs)
    n = common_subexpressions(g)
    want = [a1, a1, s1, s2, r1, r2, n1, n2, m1, m1, p1, p2, q1, q2]
    check(g.outputs == want, "6.3", "wrong merges", got=g.outputs, expected=want, graph=str(g))
    check(
        n == 3, "6.3", "three nodes merge (add, const 2.0, the mul that reads it)", value=n, got=n
    )
    check(users_consistent(g), "6.3", "users lists disagree with inputs lists")


@graded("6.3", points=2)
@settings(max_examples=20)
@given(cases(redundancy=True))
def test_cse_preserves_outputs_and_is_idempotent(case):
    """
    contract: Merge nodes that compute the same value; return how many were merged.
    contract: Count a merge only when it changed at least one use, so a second run returns 0.
    """
    graph, inputs = case
    g, merged = check_pass("6.3", graph, inputs, common_subexpressions)
    check(merged > 0, "6.3", "the planted duplicate chain was not merged", graph=str(graph))
    again = common_subexpressions(g)
    check(
        again == 0,
        "6.3",
        "a second run still merged nodes: one walk must catch chains",
        value=again,
        n=again,
    )


# ---------------------------------------------------------------- 6.4


@graded("6.4", points=2)
def test_fold_respects_limit_parameters_and_purity():
    """
    contract: A node is foldable when it is a registry op (not in ``SPECIAL``), pure (``is_pure``), has at least one input, all its inputs are frozen constants (``is_frozen``: a parameter's value changes between calls), and its result has at most ``limit`` elements (``node.spec.size``).
    contract: A folded node becomes a ``const`` in place (same node, so its users keep reading it) whose value is exactly what eager computes for that op, bit for bit
    contract: Folding is complete in one call: a node whose inputs fold is folded too, and a second run returns 0.
    """
    g, x, y = _small_graph()
    c = const(g, 2.0)
    e = node(g, "exp", c)
    big = node(g, "expand", e, shape=(64, 64))  # 4096 elements: over the limit
    small = node(g, "add", node(g, "mul", e, c), c)
    w = g.add_const(minitorch.ones(3, requires_grad=True))
    from_param = node(g, "exp", w)
    rnd = node(g, _noise_op(), c)
    g.set_outputs([node(g, "mul", x, small), big, from_param, rnd])
    n = constant_fold(g, limit=1024)
    check(n == 3, "6.4", "exp, mul, add fold (in one walk)", value=n, got=n, graph=str(g))
    check(e.op == "const" and small.op == "const", "6.4", "small constant nodes must fold")
    got = float(small.value.numpy())
    want = float(np.float32(np.exp(np.float32(2.0))) * np.float32(2.0) + np.float32(2.0))
    check(got == want, "6.4", "folded value differs from eager", value=got, got=got, expected=want)
    check(big.op == "expand", "6.4", "a result over the size limit must not be folded")
    check(from_param.op == "exp", "6.4", "a parameter may change: never fold it")
    check(rnd.op == _noise_op(), "6.4", "a random op must not be folded")
    check(not c.users or users_consistent(g), "6.4", "users lists disagree with inputs lists")
    again = constant_fold(g, limit=1024)
    check(again == 0, "6.4", "a second run must find nothing", value=again)
    # the limit is inclusive: a result of exactly ``limit`` elements folds, one more does not
    for limit, folds in ((1023, False), (1024, True), (1025, True)):
        g, x, y = _small_graph()
        at = node(g, "expand", const(g, 2.0), shape=(32, 32))  # 1024 elements
        g.set_outputs([at])
        n = constant_fold(g, limit=limit)
        check((at.op == "const") == folds and n == int(folds), "6.4",
              "fold a result of at most `limit` elements", value=(limit, n), limit=limit, got=n)  # fmt: skip
    # a pure op with no inputs is not folded (foldable nodes have at least one input)
    import minitorch.core.registry as reg

    if "ch6_ramp" not in reg.OPS:
        reg.register_op("ch6_ramp", reg.OpKind.ELEMENTWISE, 0, lambda: Spec((3,), F32), doc="test")
        reg.register_kernel("ch6_ramp", "*")(lambda out: minitorch.tensor([0.0, 1.0, 2.0])._data)
    g, x, y = _small_graph()
    ramp = g.add_node("ch6_ramp", [], {}, Spec((3,), F32))
    g.set_outputs([ramp])
    n = constant_fold(g)
    check(n == 0 and ramp.op == "ch6_ramp", "6.4", "a node without inputs is not foldable",
          value=n)  # fmt: skip
    # the default limit is 1024 elements: (32, 32) folds, (5, 205) does not
    for shape, folds in (((32, 32), True), ((5, 205), False)):
        g, x, y = _small_graph()
        at = node(g, "expand", const(g, 2.0), shape=shape)
        g.set_outputs([at])
        n = constant_fold(g)
        check((at.op == "const") == folds, "6.4", "the default limit is 1024 elements",
              value=n, shape=shape)  # fmt: skip


@graded("6.4", points=2)
@settings(max_examples=20)
@given(cases(redundancy=True, consts=True))
def test_fold_preserves_outputs(case):
    """
    contract: Replace every foldable node by a ``const`` holding its value; return how many.
    """
    graph, inputs = case
    g, n = check_pass("6.4", graph, inputs, lambda g: constant_fold(g, limit=10_000))
    left = [
        m
        for m in g.ops
        if m.inputs and all(i.op == "const" for i in m.inputs) and m.op not in ("cond",)
    ]
    check(not left, "6.4", "ops with constant inputs remain unfolded", left=left, graph=str(g))
