"""Graded tests, chapter 7 grouping: the merge rules can_fuse (7.1), reduce_rule (7.3),
anchor_rule (7.4), on small named graphs with the expected reasons."""

from __future__ import annotations

from autograder.harness import check, graded, text
from minitorch.fusion import Group, mark_unfusable
from minitorch.fusion import anchor_rule as _anchor_rule
from minitorch.fusion import can_fuse as _can_fuse
from minitorch.fusion import reasons as R
from minitorch.fusion import reduce_rule as _reduce_rule

from .group_cases import const, deciding_only, graph, node

# Each call also checks "Nothing is changed": the rules only decide.
can_fuse = deciding_only(_can_fuse, "7.1")
reduce_rule = deciding_only(_reduce_rule, "7.3")
anchor_rule = deciding_only(_anchor_rule, "7.4")


def _grown(root, *members):
    g = Group(root)
    for m in members:
        g.add(m)
    return g


# ---------------------------------------------------------------- 7.1


@graded("7.1", points=1)
def test_can_fuse_allows_a_chain_and_a_diamond():
    """
    contract: May ``producer`` join ``group`` (through its member ``consumer``)?
    contract: Nothing is changed: neither the graph nor the group.
    """
    g, (x, y) = graph((4, 5), (4, 5))
    s = node(g, "sub", x, y)
    e = node(g, "exp", s)
    m = node(g, "mul", e, s)  # s is read twice: a diamond
    g.set_outputs([m])
    group = Group(m)
    got = can_fuse(e, m, group)
    check(got == (True, None), "7.1", "exp -> mul is a plain chain", got=got, value=text(got))
    group.add(e)
    got = can_fuse(s, e, group)
    check(
        got == (True, None),
        "7.1",
        "both users of sub are in the group (diamond)",
        got=got,
        value=text(got),
    )


@graded("7.1", points=1)
def test_can_fuse_refuses_unfusable_ops_first():
    """
    contract: when several apply, return the first
    contract: ``fusable_op(producer)`` is false -> ``R.UNFUSABLE``
    """
    g, (x,) = graph((4, 5))
    sm = node(g, "softmax", x)  # opaque
    c = node(g, "cast", x, dtype="float64")  # no scalar formula
    mean = node(g, "mean", x, axis=1, keepdims=True)  # a reduction without a fold formula
    t = node(g, "tanh", x)
    out = node(g, "add", node(g, "add", node(g, "mul", sm, t), c), mean)
    g.set_outputs([out, sm])  # softmax is also an output: the op reason comes first
    for p in (sm, c, mean):
        user = p.users[0]
        got = can_fuse(p, user, Group(user))
        check(
            got == (False, R.UNFUSABLE),
            "7.1",
            f"{p.op} cannot be in a loop body",
            got=got,
            value=text(got),
        )
    mul = sm.users[0]
    mark_unfusable("tanh")
    try:
        got = can_fuse(t, mul, Group(mul))
    finally:
        mark_unfusable("tanh", False)
    check(
        got == (False, R.UNFUSABLE),
        "7.1",
        "an op marked unfusable stays out",
        got=got,
        value=text(got),
    )


@graded("7.1", points=1)
def test_can_fuse_iteration_space():
    """
    contract: the producer is not computed once per iteration of every member that reads it
    """
    g, (x, b, z) = graph((4, 5), (5,), (0, 5))
    eb = node(g, "exp", b)  # 5 values, broadcast to 20
    a = node(g, "add", x, eb)
    ez = node(g, "exp", b)
    a0 = node(g, "add", z, ez)  # a size-0 loop
    r = node(g, "reshape", node(g, "exp", x), shape=(20,))
    m = node(g, "mul", r, const(g, 2.0))
    g.set_outputs([a, a0, m])
    got = can_fuse(eb, a, Group(a))
    check(
        got == (False, R.SPACE),
        "7.1",
        "a broadcast producer has another iteration space",
        got=got,
        value=text(got),
    )
    got = can_fuse(ez, a0, Group(a0))
    check(got == (False, R.SPACE), "7.1", "5 values feeding a loop of 0", got=got, value=text(got))
    got = can_fuse(r, m, Group(m))
    check(
        got == (True, None),
        "7.1",
        "a reshape keeps the element count: same space",
        got=got,
        value=text(got),
    )
    got = can_fuse(r.inputs[0], r, _grown(m, r))
    check(
        got == (True, None),
        "7.1",
        "a view is an index map, not a new space",
        got=got,
        value=text(got),
    )


@graded("7.1", points=1)
def test_can_fuse_outside_value_and_cycle():
    """
    contract: a user of the producer outside the group reaches the group
    contract: a user of the producer is outside the group, or the producer is a graph output
    """
    g, (x, y) = graph((3, 4), (3, 4))
    p = node(g, "mul", x, y)
    sm = node(g, "softmax", p)  # an outside (opaque) user that feeds the group
    c = node(g, "add", p, sm)
    q = node(g, "sub", x, y)
    d = node(g, "exp", q)
    g.set_outputs([c, d, q])
    got = can_fuse(p, c, Group(c))
    check(
        got == (False, R.CYCLE),
        "7.1",
        "p -> softmax -> add: the group would need itself",
        got=got,
        value=text(got),
    )
    got = can_fuse(q, d, Group(d))
    check(
        got == (False, R.OUTSIDE),
        "7.1",
        "a graph output is needed outside",
        got=got,
        value=text(got),
    )
    g2, (u, v) = graph((3,), (3,))
    s = node(g2, "add", u, v)
    e = node(g2, "exp", s)
    n = node(g2, "neg", s)
    g2.set_outputs([e, n])
    got = can_fuse(s, e, Group(e))
    check(
        got == (False, R.OUTSIDE),
        "7.1",
        "neg (another group) needs add's value",
        got=got,
        value=text(got),
    )


@graded("7.1", points=1)
def test_can_fuse_size_limits():
    """
    contract: the group would hold more than ``R.MAX_OPS`` compute ops (views are free)
    contract: the reason either returns
    """
    g, xs = graph(*[(3,)] * 18, names=[f"x{k}" for k in range(18)])
    v = node(g, "neg", xs[0])
    chain = [v]
    for _ in range(R.MAX_OPS):
        v = node(g, "neg", v)
        chain.append(v)
    g.set_outputs([v])
    group = _grown(chain[-1], *reversed(chain[1:-1]))  # MAX_OPS ops
    got = can_fuse(chain[0], chain[1], group)
    check(
        got == (False, R.LIMIT),
        "7.1",
        f"at most {R.MAX_OPS} ops per group",
        got=got,
        value=text(got),
    )
    group2 = _grown(chain[-1], *reversed(chain[-4:-1]))  # 4 ops: fine
    got = can_fuse(chain[-5], chain[-4], group2)
    check(got == (True, None), "7.1", "a small group may grow", got=got, value=text(got))
    # 16 inputs read by the group; a producer bringing two more is refused
    acc = xs[0]
    for k in range(1, 16):
        acc = node(g, "add", acc, xs[k])
    p = node(g, "mul", xs[16], xs[17])
    top = node(g, "add", acc, p)
    g.set_outputs([top])
    adds = [n for n in g.ops if n.op == "add"]
    group3 = _grown(top, *reversed(adds[:-1]))
    got = can_fuse(p, top, group3)
    check(
        got == (False, R.LIMIT),
        "7.1",
        f"at most {R.MAX_INPUTS} inputs per group",
        got=got,
        value=text(got),
    )
    q = node(g, "mul", xs[0], xs[1])  # inputs the group already reads: no new input
    top2 = node(g, "add", acc, q)
    g.set_outputs([top2])
    got = can_fuse(q, top2, _grown(top2, *reversed(adds[:-1])))
    check(
        got == (True, None),
        "7.1",
        "inputs already read do not count twice",
        got=got,
        value=text(got),
    )
    # views are free: MAX_OPS - 1 compute ops and as many views still take one more op
    g2, (x,) = graph((3,))
    v = first = node(g2, "neg", x)
    for k in range(R.MAX_OPS - 1):
        v = node(g2, "neg", node(g2, "reshape", v, shape=(1, 3) if k % 2 == 0 else (3,)))
    g2.set_outputs([v])
    group4 = _grown(v, *[n for n in reversed(g2.ops) if n is not v and n is not first])
    got = can_fuse(first, first.users[0], group4)
    check(got == (True, None), "7.1", "views do not count toward the op limit",
          got=got, value=text(got))  # fmt: skip
    # the checks come in the documented order: a full group refuses with LIMIT even when
    # the producer is also needed outside (OUTSIDE is checked last)
    g3, (x,) = graph((3,))
    v = first = node(g3, "neg", x)
    for _ in range(R.MAX_OPS):
        v = node(g3, "neg", v)
    g3.set_outputs([v, first])
    group5 = _grown(v, *[n for n in reversed(g3.ops) if n is not v and n is not first])
    got = can_fuse(first, first.users[0], group5)
    check(got == (False, R.LIMIT), "7.1", "the size limit is checked before outside uses",
          got=got, value=text(got))  # fmt: skip
    # a matmul read before and after a reduction: both rules object; the anchor rule is asked first
    g, (x, w) = graph((4, 6), (6, 5))
    mm = node(g, "matmul", x, w)
    e = node(g, "exp", mm)
    s = node(g, "sum", e, axis=1, keepdims=True)
    d = node(g, "sub", mm, s)
    g.set_outputs([d])
    group = _grown(d, s, e)
    got = can_fuse(mm, e, group)
    check(got == (False, R.ANCHOR), "7.1", "anchor_rule first, then reduce_rule",
          got=got, value=text(got))  # fmt: skip


# ---------------------------------------------------------------- 7.3


@graded("7.3", points=1)
def test_reduce_rule_prologue_and_epilogue():
    """
    contract: Otherwise None (a value read on one side only is fine)
    contract: A group holds at most one reduction
    """
    g, (x, m) = graph((4, 5), (4, 1))
    d = node(g, "sub", x, m)
    e = node(g, "exp", d)
    s = node(g, "sum", e, axis=1)
    q = node(g, "div", s, const(g, 3.0))
    g.set_outputs([q])
    got = reduce_rule(s, q, Group(q))
    check(
        got is None, "7.3", "a reduction may take an elementwise epilogue", got=got, value=text(got)
    )
    group = _grown(q, s)
    got = reduce_rule(e, s, group)
    check(got is None, "7.3", "and an elementwise prologue", got=got, value=text(got))
    got = reduce_rule(d, e, _grown(q, s, e))
    check(got is None, "7.3", "a longer prologue is fine", got=got, value=text(got))
    got = reduce_rule(e, q, Group(q))
    check(got is None, "7.3", "no reduction involved: no objection", got=got, value=text(got))


@graded("7.3", points=1)
def test_reduce_rule_broadcast_back():
    """
    contract: or if the reduction's result would be broadcast back
    """
    g, (x,) = graph((4, 5))
    mx = node(g, "max", x, axis=1, keepdims=True)
    d = node(g, "sub", x, mx)
    g.set_outputs([d])
    got = reduce_rule(mx, d, Group(d))
    check(
        got == R.REDUCTION,
        "7.3",
        "x - x.max(1): the result is broadcast back",
        got=got,
        value=text(got),
    )
    g2, (y,) = graph((4, 1))
    s = node(g2, "sum", y, axis=1, keepdims=True)  # folds a size-1 axis: same size
    e = node(g2, "exp", s)
    g2.set_outputs([e])
    got = reduce_rule(s, e, Group(e))
    check(
        got is None,
        "7.3",
        "a reduction over a size-1 axis keeps the size",
        got=got,
        value=text(got),
    )


@graded("7.3", points=1)
def test_reduce_rule_one_reduction_per_group():
    """
    contract: ``R.REDUCTION`` if the group already has a reduction or an anchor
    """
    g, (x, w) = graph((4, 5), (5, 4))
    s1 = node(g, "sum", x, axis=1, keepdims=True)  # (4, 1)
    e = node(g, "exp", s1)
    s2 = node(g, "max", e, axis=0)  # (1,)
    g.set_outputs([s2])
    got = reduce_rule(s1, e, _grown(s2, e))
    check(got == R.REDUCTION, "7.3", "a second reduction in one group", got=got, value=text(got))
    g, (a, b, y) = graph((4, 6), (6, 1), (4, 3))
    mm = node(g, "matmul", a, b)  # (4, 1)
    s3 = node(g, "sum", node(g, "exp", y), axis=1, keepdims=True)  # (4, 1): same size
    relu = node(g, "relu", mm)
    t = node(g, "mul", relu, s3)  # an epilogue reading a reduction
    g.set_outputs([t])
    got = reduce_rule(s3, t, _grown(t, relu, mm))
    check(got == R.REDUCTION, "7.3", "no reduction in an anchor's group", got=got, value=text(got))


@graded("7.3", points=1)
def test_reduce_rule_both_sides():
    """
    contract: (one loop cannot be on both sides)
    """
    g, (x,) = graph((4, 1))
    p = node(g, "exp", x)  # (4, 1)
    r = node(g, "sum", p, axis=1)  # (4,): same number of elements
    v = node(g, "reshape", p, shape=(4,))
    a = node(g, "add", r, v)  # the epilogue reads p too
    g.set_outputs([a])
    group = _grown(a, v, r)
    got = reduce_rule(p, r, group)
    check(
        got == R.REDUCTION,
        "7.3",
        "read by the reduction and by its epilogue",
        got=got,
        value=text(got),
    )
    g2, (y,) = graph((4, 1))
    p2 = node(g2, "exp", y)
    r2 = node(g2, "sum", p2, axis=1)
    a2 = node(g2, "add", r2, const(g2, 1.0))
    g2.set_outputs([a2])
    got = reduce_rule(p2, r2, _grown(a2, r2))
    check(got is None, "7.3", "read only by the reduction: prologue", got=got, value=text(got))
    g3, (z,) = graph((4, 1))
    p3 = node(g3, "exp", z)
    q3 = node(g3, "mul", p3, const(g3, 2.0))  # a prologue member reads p3
    r3 = node(g3, "sum", q3, axis=1)
    a3 = node(g3, "add", r3, node(g3, "reshape", p3, shape=(4,)))  # and the epilogue does
    g3.set_outputs([a3])
    group = _grown(a3, a3.inputs[1], r3, q3)
    w = node(g3, "exp", node(g3, "reshape", z, shape=(4,)))
    b3 = node(g3, "mul", a3, w)  # w is read by the epilogue only: fine
    got = reduce_rule(w, b3, _grown(b3, a3, a3.inputs[1], r3, q3))
    check(got is None, "7.3", "read only by the epilogue", got=got, value=text(got))
    got = reduce_rule(p3, q3, group)
    check(got == R.REDUCTION, "7.3", "read by a prologue member and by the epilogue",
          got=got, value=text(got), sides=text(sorted(group.side[u] for u in p3.users)))  # fmt: skip


# ---------------------------------------------------------------- 7.4


@graded("7.4", points=1)
def test_anchor_rule_bias_relu_epilogue():
    """
    contract: the fuser only appends an elementwise epilogue to it
    """
    g, (x, w, b) = graph((4, 6), (6, 5), (5,))
    mm = node(g, "matmul", x, w)
    a = node(g, "add", mm, b)
    r = node(g, "relu", a)
    g.set_outputs([r])
    got = anchor_rule(mm, a, _grown(r, a))
    check(got is None, "7.4", "matmul + bias + relu is an epilogue", got=got, value=text(got))
    got = anchor_rule(a, r, Group(r))
    check(got is None, "7.4", "not an anchor: no objection", got=got, value=text(got))
    g2, (im, k) = graph((1, 2, 5, 5), (3, 2, 3, 3))
    cv = node(g2, "conv2d", im, k)
    rl = node(g2, "relu", cv)
    g2.set_outputs([rl])
    got = anchor_rule(cv, rl, Group(rl))
    check(got is None, "7.4", "conv2d + relu (the seed's example)", got=got, value=text(got))


@graded("7.4", points=1)
def test_anchor_rule_needs_an_elementwise_reader():
    """
    contract: if a member reading it is not elementwise/broadcast
    """
    g, (x, w) = graph((4, 6), (6, 4))
    mm = node(g, "matmul", x, w)
    t = node(g, "permute", mm, order=(1, 0))
    r = node(g, "relu", t)
    g.set_outputs([r])
    got = anchor_rule(mm, t, _grown(r, t))
    check(got == R.ANCHOR, "7.4", "a view right after the anchor", got=got, value=text(got))
    mm2 = node(g, "matmul", x, w)
    s = node(g, "sum", mm2, axis=1)
    g.set_outputs([s])
    got = anchor_rule(mm2, s, Group(s))
    check(got == R.ANCHOR, "7.4", "a reduction after the anchor", got=got, value=text(got))


@graded("7.4", points=1)
def test_anchor_rule_one_anchor_and_same_space():
    """
    contract: ``R.ANCHOR`` if the group already has an anchor or a reduction
    contract: ``R.SPACE`` if it is not read once per output element
    """
    g, (x, w, z) = graph((4, 6), (6, 1), (4, 5))
    mm = node(g, "matmul", x, w)  # (4, 1)
    a = node(g, "add", mm, z)  # broadcast to (4, 5)
    g.set_outputs([a])
    got = anchor_rule(mm, a, Group(a))
    check(got == R.SPACE, "7.4", "the anchor's output is broadcast", got=got, value=text(got))
    g2, (p, q) = graph((4, 4), (4, 4))
    m1 = node(g2, "matmul", p, q)
    m2 = node(g2, "matmul", q, p)
    s = node(g2, "add", m1, m2)
    g2.set_outputs([s])
    got = anchor_rule(m1, s, _grown(s, m2))
    check(got == R.ANCHOR, "7.4", "one anchor per group", got=got, value=text(got))


@graded("7.4", points=1)
def test_anchor_rule_not_after_a_reduction():
    g, (x, w) = graph((4, 4), (4, 4))
    mm = node(g, "matmul", x, w)
    e = node(g, "exp", mm)
    s = node(g, "sum", e, axis=1)
    g.set_outputs([s])
    got = anchor_rule(mm, e, _grown(s, e))
    check(
        got == R.ANCHOR,
        "7.4",
        "an anchor joins no group holding a reduction",
        got=got,
        value=text(got),
    )
