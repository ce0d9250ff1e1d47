"""Chapter 7's planned grouping (7.11's pass): legal plans are built, illegal ones refused
with the rule's reason and the graph left as it was, members needed outside recomputed."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch as mt
from minitorch.fusion import PLANNED, bytes_moved, fuse, fuse_planned, try_plan
from minitorch.fusion import reasons as R
from minitorch.passes import CompileOptions, clone_graph, optimize


@pytest.fixture(autouse=True)
def _reference():
    old = mt.get_mode()
    mt.set_mode("reference")
    yield
    mt.set_mode(old[0], ",".join(old[1]))  # as it was: the tests after these run in it


def _softmax(x):
    e = (x - x.max(1, keepdims=True)).exp()
    return e / e.sum(1, keepdims=True)


def _graph(fn, *arrays):
    g = mt.jit(fn).trace(*[mt.tensor(a) for a in arrays])
    optimize(g)
    return g


X = np.linspace(-2, 2, 48, dtype=np.float32).reshape(6, 8)


def _ops(g, *names):
    """The ops of ``g`` with these op names, in graph order (one list per name)."""
    return [n for name in names for n in g.ops if n.op == name]


def test_duplicated_chain_is_built_and_moves_fewer_bytes():
    g = _graph(_softmax, X)
    mx, sub, exp, sm, div = _ops(g, "max", "sub", "exp", "sum", "div")
    greedy = clone_graph(g)
    fuse(greedy)
    fused, report = try_plan(g, [[sub, exp, sm], [sub, exp, div]])
    assert len(report.groups) == 2 and len(report.recomputed) == 2
    assert bytes_moved(fused) < bytes_moved(greedy) < bytes_moved(g)
    fused.verify()
    out = mt.jit(_softmax, options=PLANNED)(mt.tensor(X)).numpy()
    assert np.allclose(out, _softmax(mt.tensor(X)).numpy(), rtol=1e-6)


@pytest.mark.parametrize(
    "case, why",
    [
        ("two reductions", R.REDUCTION),
        ("broadcast back", R.REDUCTION),
        ("reduction needed outside", R.OUTSIDE),
        ("anchor operand", R.ANCHOR),
        ("input", "a group holds ops"),
        ("foreign node", "not in the graph"),
        ("disconnected", "read by no member"),
        ("taken whole", "taken whole"),
    ],
)
def test_illegal_groups_are_refused_and_the_graph_kept(case, why):
    g = _graph(_softmax, X)
    mx, sub, exp, sm, div = _ops(g, "max", "sub", "exp", "sum", "div")
    plans = {
        "broadcast back": [[sm, div]],
        "input": [[g.inputs[0], mx, sub]],
        "foreign node": [[sub, clone_graph(g).ops[2]]],
        "disconnected": [[mx, exp, div]],
    }
    if case == "two reductions":
        g = _graph(lambda x: (x.exp().sum(1) * 2.0).sum(0), X)
        plans[case] = [g.ops]
    if case == "reduction needed outside":
        g = _graph(lambda x: (x.sum(1) * 2.0, x.sum(1).exp()), X)
        plans[case] = [g.ops[:2]]  # the sum and the mul; the exp reads the sum too
    if case == "anchor operand":
        g = _graph(lambda x, w: (x.exp() @ w).relu(), X, X.T.copy())
        plans[case] = [g.ops]
    if case == "taken whole":  # the later group takes exp and mul whole: none left for the first
        g = _graph(lambda x: (x.exp() * 2.0).relu(), X)
        plans[case] = [g.ops[:2], g.ops]
    before = g.text()
    with pytest.raises(mt.OpError, match=why):
        fuse_planned(g, plans[case])
    assert g.text() == before


def test_grouping_option_is_checked_and_shown():
    with pytest.raises(mt.OpError, match="grouping"):
        CompileOptions(fuse=True, grouping="best")
    assert "grouping=planned" in str(PLANNED)
    assert CompileOptions(fuse=True) != PLANNED  # part of jit's cache key
