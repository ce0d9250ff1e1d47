"""Graded tests, chapter 7 grouping: growing groups (7.2), building fused nodes (7.5),
and random programs fused and interpreted giving eager's answer."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings

import minitorch
from autograder.harness import check, graded, text
from minitorch.fusion import FUSED, Group, build_fused_node, fuse, grow_group
from minitorch.fusion import reasons as R
from minitorch.passes import CompileOptions, clone_graph
from minitorch.tracing import interpret

from ..ch5.programs import programs, run_program
from .group_cases import (
    check_fused_graph,
    const,
    fusion_programs,
    graph,
    inputs_for,
    node,
    outputs,
    run_fusion_program,
    users_consistent,
)


def _grow(root):
    group, refusals, recomputed = Group(root), [], []
    grow_group(group, refusals, recomputed)
    return group, refusals, recomputed


def _ops(group):
    return sorted(m.op for m in group.members)


# ---------------------------------------------------------------- 7.2


@graded("7.2", points=1)
def test_grow_group_takes_a_chain_with_views():
    """
    contract: Members added make new candidates; stop when none is left.
    """
    g, (x, y) = graph((4, 5), (5, 4))
    t = node(g, "permute", y, order=(1, 0))
    s = node(g, "sub", x, t)
    e = node(g, "exp", s)
    r = node(g, "reshape", e, shape=(20,))
    m = node(g, "mul", r, const(g, 2.0))
    g.set_outputs([m])
    group, refusals, _ = _grow(m)
    got = _ops(group)
    check(
        got == ["exp", "mul", "permute", "reshape", "sub"],
        "7.2",
        "the whole chain",
        got=got,
        value=text(got),
    )
    check(refusals == [], "7.2", "nothing was refused", got=refusals, value=len(refusals))


@graded("7.2", points=1)
def test_grow_group_diamond_latest_first():
    """
    contract: Each candidate is decided once, always the one latest in ``graph.nodes`` first
    """
    g, (x,) = graph((3, 4))
    p = node(g, "mul", x, x)
    u = node(g, "exp", p)
    c = node(g, "add", p, u)  # p is read by c directly and through u
    g.set_outputs([c])
    group, refusals, _ = _grow(c)
    check(
        _ops(group) == ["add", "exp", "mul"],
        "7.2",
        "decide exp (later) before mul, or mul looks needed outside",
        got=_ops(group),
        refusals=[str(r) for r in refusals],
        value=text(_ops(group)),
    )


@graded("7.2", points=1)
def test_grow_group_records_refusals():
    """
    contract: ``consumer`` being the producer's first user in the group
    contract: otherwise ``Refusal(producer, consumer, reason)`` is appended to ``refusals``
    """
    g, (x, b) = graph((4, 5), (5,))
    s = node(g, "sub", x, x)
    e = node(g, "exp", s)  # also a graph output
    eb = node(g, "tanh", b)  # broadcast
    m = node(g, "mul", e, eb)
    g.set_outputs([m, e])
    group, refusals, _ = _grow(m)
    got = sorted((r.producer.op, r.consumer.op, r.reason) for r in refusals)
    want = sorted([("exp", "mul", R.OUTSIDE), ("tanh", "mul", R.SPACE)])
    check(
        got == want,
        "7.2",
        "one refusal per candidate, with both nodes and the reason",
        got=got,
        expected=want,
        value=text(got),
    )
    check(_ops(group) == ["mul"], "7.2", "nothing joined", got=_ops(group), value=text(_ops(group)))
    g2, (x2, b2) = graph((4, 5), (5,))
    t = node(g2, "tanh", b2)
    a = node(g2, "add", x2, t)
    n = node(g2, "neg", a)
    g2.set_outputs([n])
    group2, refusals2, _ = _grow(n)
    got = [(r.producer, r.consumer, r.reason) for r in refusals2]
    check(
        got == [(t, a, R.SPACE)],
        "7.2",
        "the consumer is the member that reads it",
        got=got,
        value=text([(r.producer.name, r.consumer.name, r.reason) for r in refusals2]),
    )
    # a refused producer read by two members: the consumer is the first of them in the graph
    g3, (x3, b3) = graph((4, 5), (5,))
    t3 = node(g3, "tanh", b3)
    a3 = node(g3, "add", x3, t3)
    m3 = node(g3, "mul", a3, t3)
    g3.set_outputs([m3])
    group3, refusals3, _ = _grow(m3)
    got = [(r.producer, r.consumer, r.reason) for r in refusals3]
    check(
        got == [(t3, a3, R.SPACE)],
        "7.2",
        "the consumer is the producer's first user in the group (graph order)",
        got=got,
        value=text([(r.producer.name, r.consumer.name, r.reason) for r in refusals3]),
    )


@graded("7.2", points=1)
def test_grow_group_recomputes_a_cheap_value():
    """
    contract: A copy (same op, inputs, attrs, spec, ``where``) is put in ``graph.nodes`` right after the producer
    contract: (users lists kept consistent)
    """
    g, (x, y) = graph((3, 4), (3, 4))
    p = node(g, "add", x, y)  # one op on inputs: cheap
    q = node(g, "mul", p, p)
    r = node(g, "neg", q)
    g.set_outputs([r, p])
    before = outputs(g, inputs_for(g))
    group, refusals, recomputed = _grow(r)
    check(
        len(recomputed) == 1 and recomputed[0][0] is p,
        "7.2",
        "record (original, copy)",
        got=recomputed,
    )
    copy = recomputed[0][1]
    check(copy in group and p not in group, "7.2", "the copy is in the group, p stays out")
    check(
        copy in g.nodes and g.nodes.index(copy) == g.nodes.index(p) + 1,
        "7.2",
        "the copy goes right after the original",
        nodes=g.nodes,
    )
    check(
        q.inputs == [copy, copy] and g.outputs[1] is p,
        "7.2",
        "the group reads the copy; the output stays p",
        got=q.inputs,
    )
    check(
        copy.spec == p.spec and copy.op == p.op and copy.inputs == p.inputs,
        "7.2",
        "the copy computes the same thing",
    )
    check(users_consistent(g) and refusals == [], "7.2", "users lists must stay consistent")
    g.verify()
    after = outputs(g, inputs_for(g))
    check(
        all(np.array_equal(a, b) for a, b in zip(before, after)),
        "7.2",
        "same answer",
        value=after,
    )
    # a view (cheap too) with attributes and a source location: the copy keeps both
    g, (x, y) = graph((4, 3), (3, 4))
    p = node(g, "permute", x, order=(1, 0))
    p.where = "model.py:7"
    r = node(g, "neg", node(g, "mul", p, y))
    g.set_outputs([r, p])
    group, refusals, recomputed = _grow(r)
    copy = recomputed[0][1] if len(recomputed) == 1 else None
    check(
        copy is not None and copy.attrs == p.attrs and copy.where == p.where,
        "7.2",
        "the copy has the original's attrs and where (same op, inputs, attrs, spec, where)",
        value=text(None if copy is None else [copy.op, copy.attrs, copy.where]),
        original=[p.op, p.attrs, p.where],
    )


@graded("7.2", points=1)
def test_grow_group_never_fuses_into_an_anchor_prologue():
    """
    contract: except the operands of the group's anchor (an anchor's operands are never fused into it)
    contract: The candidates are the inputs of members that are ops (not ``input`` or ``const``)
    """
    g, (x, w, b) = graph((4, 6), (6, 5), (5,))
    ex = node(g, "exp", x)
    mm = node(g, "matmul", ex, w)
    a = node(g, "add", mm, b)
    r = node(g, "relu", a)
    g.set_outputs([r])
    group, refusals, _ = _grow(r)
    check(
        _ops(group) == ["add", "matmul", "relu"] and group.kind == "epilogue",
        "7.2",
        "matmul + bias + relu, without the matmul's operand",
        got=_ops(group),
        value=text([_ops(group), group.kind]),
    )
    check(
        refusals == [],
        "7.2",
        "an anchor's operands are not merge candidates",
        got=[str(r) for r in refusals],
        value=len(refusals),
    )


@graded("7.2", points=1)
def test_grow_group_leaves_an_anchor_operand_that_the_epilogue_also_reads():
    # a @ a + a: `a` is read by the matmul and by the add; it cannot run before the
    # matmul inside the matmul's kernel, so it stays outside the group (issue 26, class 6)
    g, (x,) = graph((2, 2))
    a = node(g, "mul", x, const(g, 0.5))
    mm = node(g, "matmul", a, a)
    s = node(g, "add", mm, a)
    g.set_outputs([s])
    group, _, _ = _grow(s)
    check(
        _ops(group) == ["add", "matmul"],
        "7.2",
        "the matmul's operand is not pulled in through the epilogue",
        got=_ops(group),
        value=text(_ops(group)),
    )


# ---------------------------------------------------------------- 7.5


def _chain_graph():
    g, (x, y) = graph((4, 5), (5,))
    s = node(g, "sub", x, y)
    e = node(g, "exp", s)
    m = node(g, "mul", e, y)  # y is read twice by the group: one input
    n = node(g, "neg", x)  # not in the group
    g.set_outputs([m, n])
    return g, [s, e, m]


@graded("7.5", points=2)
def test_build_fused_node_structure():
    """
    contract: Replace the members of ``group`` in ``graph`` by one ``"fused"`` node; return it.
    contract: one input per external input, in the same order, named like the outside node
    contract: one output, the root's copy, with ``out_tree`` ``("leaf", 0)``
    contract: the members are gone from ``graph.nodes`` and from their inputs' ``users``
    """
    g, (s, e, m) = _chain_graph()
    xs = inputs_for(g)
    before = outputs(g, xs)
    for k, member in enumerate((s, e, m)):
        member.where = f"model.py:{k + 1}"  # where each op came from, for errors and explain
    group = Group(m)
    group.add(e)
    group.add(s)
    pos = g.nodes.index(m)
    f = build_fused_node(g, group, "fused_7")
    check(
        f.op == FUSED and f.attrs["name"] == "fused_7" and f.attrs["kind"] == "elementwise",
        "7.5",
        "op 'fused' with attrs name and kind",
        got=f.format(),
    )
    check(
        f.spec == m.spec and f.inputs == g.inputs,
        "7.5",
        "the node's inputs are the outside values, in order of first use, once each",
        got=f.inputs,
    )
    check(
        g.nodes.index(f) == pos - 2,
        "7.5",
        "the node takes the root's place",
        value=g.nodes.index(f),
        nodes=g.nodes,
    )
    check(not ({s, e, m} & set(g.nodes)), "7.5", "the members leave the graph", nodes=g.nodes)
    check(g.outputs[0] is f and users_consistent(g), "7.5", "uses of the root now read the node")
    check(
        all(m not in i.users for i in g.inputs for m in (s, e)),
        "7.5",
        "members are no longer users of the outside values",
    )
    sub = f.attrs["graph"]
    check(
        [n.op for n in sub.ops] == ["sub", "exp", "mul"],
        "7.5",
        "members in graph order",
        got=sub.op_names(),
    )
    check(
        [i.spec for i in sub.inputs] == [i.spec for i in f.inputs],
        "7.5",
        "subgraph inputs match the node's inputs",
    )
    names = [sub.name, *(i.name for i in sub.inputs)]
    check(names == ["fused_7", "x", "y"], "7.5",
          "sub = Graph(name), one input per outside value named like it", value=text(names))  # fmt: skip
    wheres = [f.where, *(n.where for n in sub.ops)]
    check(wheres == ["model.py:3", "model.py:1", "model.py:2", "model.py:3"], "7.5",
          "the node has the root's where, each copy its member's", value=text(wheres))  # fmt: skip
    check(len(sub.outputs) == 1 and sub.outputs[0].spec == f.spec, "7.5", "one output")
    check(
        interpret(sub, *xs).shape == f.spec.shape,
        "7.5",
        "interpreting the subgraph gives one tensor (out_tree leaf 0)",
    )
    g.verify()
    after = outputs(g, xs)
    check(all(np.array_equal(a, b) for a, b in zip(before, after)), "7.5", "same answer")


@graded("7.5", points=1)
def test_build_fused_node_anchor_first():
    """
    contract: in ``graph.nodes`` order except that an anchor comes first
    """
    g, (b, x, w) = graph((5,), (4, 6), (6, 5))
    bb = node(g, "mul", b, b)
    bb2 = node(g, "add", node(g, "reshape", bb, shape=(1, 5)), const(g, 1.0))
    mm = node(g, "matmul", x, w)
    a = node(g, "add", mm, node(g, "expand", bb2, shape=(4, 5)))
    r = node(g, "relu", a)
    g.set_outputs([r])
    group = Group(r)
    for n in (a, mm):
        group.add(n)
    f = build_fused_node(g, group, "fused_0")
    sub = f.attrs["graph"]
    check(
        sub.ops[0].op == "matmul" and f.attrs["kind"] == "epilogue",
        "7.5",
        "an epilogue subgraph starts with its anchor",
        got=sub.op_names(),
        value=text([[n.op for n in sub.ops], f.attrs["kind"]]),
    )
    g.verify()


@graded("7.5", points=1)
def test_build_fused_node_refuses_bad_groups():
    """
    contract: a refused group leaves the graph exactly as it was
    contract: message says "would create a cycle" when a path leaves the group and comes back
    """
    g, (x, y) = graph((3, 4), (3, 4))
    p = node(g, "mul", x, y)
    sm = node(g, "softmax", p)
    c = node(g, "add", p, sm)
    g.set_outputs([c])
    group = Group(c)
    group.add(p)  # p -> softmax -> c leaves the group and comes back
    before = str(g)
    try:
        build_fused_node(g, group, "bad")
        raised, op = "", None
    except minitorch.OpError as e:
        raised, op = str(e), e.op
    check(
        "cycle" in raised and op == "fuse",
        "7.5",
        "a group that would need itself is refused",
        got=raised,
        value=text(op),  # OpError("fuse", problem)
    )
    check(
        str(g) == before,
        "7.5",
        "and the graph is left as it was",
        after=str(g),
        value=text([n.op for n in g.nodes]),
    )
    g2, (u,) = graph((3,))
    e = node(g2, "exp", u)
    n = node(g2, "neg", e)
    g2.set_outputs([n, e])
    grp = Group(n)
    grp.add(e)
    try:
        build_fused_node(g2, grp, "bad")
        raised, op = "", None
    except minitorch.OpError as err:
        raised, op = str(err), err.op
    check(
        "outside" in raised and op == "fuse",
        "7.5",
        'a member needed outside is refused with OpError("fuse", ...)',
        got=raised,
        value=text(op),
    )


@graded("7.5", points=1)
def test_build_fused_node_refuses_a_member_read_outside():
    """
    contract: then "value needed outside the group" when a member other than ``group.root`` has a user outside the group
    """
    # %e = exp(%x) feeds the group's root and a user outside it: not an output, no cycle
    g, (x,) = graph((3,))
    e = node(g, "exp", x)
    n = node(g, "neg", e)
    t = node(g, "tanh", e)
    g.set_outputs([n, t])
    group = Group(n)
    group.add(e)
    before = str(g)
    try:
        build_fused_node(g, group, "bad")
        raised, op = "", None
    except minitorch.OpError as err:
        raised, op = str(err), err.op
    check(
        "outside" in raised and op == "fuse",
        "7.5",
        'a member with a user outside the group is refused with OpError("fuse", ...)',
        got=raised,
        value=text([op, "outside" in raised]),
    )
    check(
        str(g) == before,
        "7.5",
        "and the graph is left as it was",
        after=str(g),
        value=text([n.op for n in g.nodes]),
    )


# ---------------------------------------------------------------- the whole fuser


def _traced(shape, arrays, steps):
    tensors = [minitorch.tensor(a) for a in arrays]
    g = minitorch.jit(lambda *xs: run_program(steps, *xs)).trace(*tensors)
    return g, tensors


def _fuse_check(ex, g, xs):
    before = outputs(g, xs)
    work = clone_graph(g)
    original = [n.name for n in work.ops]
    report = fuse(work)
    copies = {c.name for _, c in report.recomputed}
    check_fused_graph(ex, work, before, xs, [k for k in original if k not in copies])
    return work, report


def _traced_fusion(arrays, steps):
    tensors = [minitorch.tensor(a) for a in arrays]
    g = minitorch.jit(lambda *xs: run_fusion_program(steps, *xs)).trace(*tensors)
    return g, tensors


@graded("7.2", points=1)
@settings(max_examples=15)
@given(programs(max_len=8))
def test_random_programs_fused_and_interpreted_equal_eager_72(case):
    _fuse_check("7.2", *_traced(*case))


@graded("7.2", points=1)
@settings(max_examples=25)
@given(fusion_programs())
def test_broadcast_reduce_view_programs_fused_equal_eager_72(case):
    _fuse_check("7.2", *_traced_fusion(*case))


@graded("7.5", points=1)
@settings(max_examples=15)
@given(programs(max_len=8))
def test_random_programs_fused_and_interpreted_equal_eager_75(case):
    _fuse_check("7.5", *_traced(*case))


@graded("7.5", points=1)
@settings(max_examples=25)
@given(fusion_programs())
def test_broadcast_reduce_view_programs_fused_equal_eager_75(case):
    _fuse_check("7.5", *_traced_fusion(*case))


@graded("7.5", points=1)
def test_jit_with_fuse_gives_eager_on_strided_and_empty_inputs():
    def f(x, y, b):
        a = ((x - y.T) * 2.0).exp()
        s = (a - a.max(1, keepdims=True)).exp().sum(1)
        return (x @ y + b).relu(), s / 3.0, (x.T.reshape(-1) * 2 + 1).tanh()

    rng = np.random.default_rng(3)
    for n in (4, 0):
        x = minitorch.tensor(rng.standard_normal((n, 5)).astype(np.float32))
        big = minitorch.tensor(rng.standard_normal((10, 2 * n)).astype(np.float32))
        y = big[::-2, ::2]  # a negative-stride, non-contiguous view (5, n)
        b = minitorch.tensor(rng.standard_normal(n).astype(np.float32))
        opts = CompileOptions(fuse=True)
        compiled = minitorch.jit(f, options=opts).trace(x, y, b).compile(options=opts)
        kinds = sorted(n.attrs["kind"] for n in compiled.graph.nodes if n.op == FUSED)
        check(
            kinds == ["elementwise", "elementwise", "epilogue", "reduce"],
            "7.5",
            "compile(options=CompileOptions(fuse=True)) must fuse",
            got=str(compiled.graph),
            value=text(kinds),
        )
        got = compiled(x, y, b)
        want = f(x, y, b)
        for o, w in zip(got, want):
            check(
                np.array_equal(o.numpy(), w.numpy(), equal_nan=True),
                "7.5",
                "fused and compiled differs from eager",
                n=n,
                value=o.numpy(),
                tol=(1e-4, 1e-5),  # eager and a fused kernel may round differently
            )
