"""Chapter 7 grouping, beyond the graded tests: the fused node IR in every tool that
walks graphs (text, DOT, verify, interpreter, plan, autograd), the pipeline stage,
its dump and explain lines, the book's numbers."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minitorch
from autograder.tests.ch5.programs import programs, run_program
from autograder.tests.ch7.group_cases import all_nodes, const, graph, node, users_consistent
from minitorch import Spec
from minitorch.fusion import (
    FUSED,
    REASONS,
    Group,
    build_fused_node,
    fuse,
    inline_fused,
    mark_unfusable,
    report,
)
from minitorch.fusion import reasons as R
from minitorch.passes import CompileOptions, clone_graph
from minitorch.tracing import interpret

FUSE = CompileOptions(fuse=True)


def _fused_chain():
    g, (x, y) = graph((4, 5), (5,))
    s = node(g, "sub", x, y)
    e = node(g, "exp", s)
    m = node(g, "mul", e, const(g, 2.0))
    g.set_outputs([m])
    fuse(g)
    return g


def _rand(*shape, seed=0):
    return minitorch.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def test_text_form_shows_the_group_and_its_subgraph():
    g = _fused_chain()
    text = str(g)
    assert "= fused(%x, %y, %c" in text and "kind=elementwise, name=fused_0" in text
    assert "    graph fused_0(%x: float32[4,5], %y: float32[5]" in text
    assert "      %0 = sub(%x, %y)" in text and "return (%3)" in text


def test_dot_draws_a_cluster():
    dot = _fused_chain().to_dot()
    assert 'subgraph "cluster_' in dot and "fused_0 (elementwise)" in dot
    assert dot.count("{") == dot.count("}")


def test_verify_checks_the_fused_node():
    g = _fused_chain()
    g.verify()
    f = next(n for n in g.nodes if n.op == FUSED)
    f.spec = Spec((4, 4), f.spec.dtype)
    with pytest.raises(minitorch.OpError, match="returns"):
        g.verify()
    g = _fused_chain()
    f = next(n for n in g.nodes if n.op == FUSED)
    f.attrs["graph"].inputs[1].spec = Spec((4, 5), f.spec.dtype)
    with pytest.raises(minitorch.OpError, match="verify"):
        g.verify()
    g = _fused_chain()
    f = next(n for n in g.nodes if n.op == FUSED)
    f.attrs["kind"] = "magic"
    with pytest.raises(minitorch.OpError, match="kind"):
        g.verify()
    g = _fused_chain()
    g.nodes.reverse()
    with pytest.raises(minitorch.OpError, match="before it is defined"):
        g.verify()


def test_inline_fused_undoes_fusion():
    g = _fused_chain()
    flat = inline_fused(g)
    assert [n.op for n in flat.ops] == ["sub", "exp", "mul"]
    flat.verify()
    x, y = _rand(4, 5), _rand(5, seed=1)
    np.testing.assert_array_equal(interpret(flat, x, y)[0].numpy(), interpret(g, x, y)[0].numpy())


def test_compiled_plan_runs_fused_nodes_and_keeps_autograd():
    def f(x, w, b):
        return ((x @ w + b).relu() * 2.0).sum(1)

    x, w, b = _rand(3, 4), _rand(4, 5, seed=1), _rand(5, seed=2)
    compiled = minitorch.jit(f).trace(x, w, b).compile(options=FUSE)
    # the reduction takes the elementwise chain first: the matmul is left alone
    assert [n.attrs["kind"] for n in compiled.fusion.groups] == ["reduce"]
    assert [s.node.op for s in compiled.plan.steps] == ["matmul", "fused"]
    np.testing.assert_array_equal(compiled(x, w, b).numpy(), f(x, w, b).numpy())
    xg = minitorch.tensor(x.numpy(), requires_grad=True)
    compiled(xg, w, b).sum().backward()
    xe = minitorch.tensor(x.numpy(), requires_grad=True)
    f(xe, w, b).sum().backward()
    np.testing.assert_allclose(xg.grad.numpy(), xe.grad.numpy(), rtol=1e-6)


def test_fusion_is_off_by_default_and_idempotent():
    def f(x):
        return (x.exp() + 1.0).tanh()

    x = _rand(3, 4)
    plain = minitorch.jit(f).trace(x).compile()
    assert plain.fusion is None and "fused" not in plain.graph.op_names()
    g = minitorch.jit(f).trace(x)
    once = clone_graph(g)
    assert len(fuse(once).groups) == 1
    text = str(once)
    again = fuse(once)
    assert again.groups == [] and str(once) == text


def test_dump_and_explain_show_groups_and_reasons(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MINITORCH_DUMP_GRAPH", str(tmp_path))

    def softmaxish(x):
        e = (x - x.max(1, keepdims=True)).exp()
        return e / e.sum(1, keepdims=True)

    x = _rand(3, 4)
    minitorch.jit(softmaxish).trace(x).compile(options=FUSE)
    folders = [d for d in os.listdir(tmp_path) if (tmp_path / d).is_dir()]
    (folder,) = [d for d in folders if any("fused" in f for f in os.listdir(tmp_path / d))]
    files = sorted(f for f in os.listdir(tmp_path / folder) if (tmp_path / folder / f).is_file())
    fused = [f for f in files if f.endswith("-fused.txt")]
    assert fused == [f"{len(files) - 2:02d}-fused.txt"], files  # after the passes, before plan.txt
    text = (tmp_path / folder / fused[0]).read_text()
    assert "kind=elementwise" in text and R.REDUCTION in text and R.OUTSIDE in text
    monkeypatch.delenv("MINITORCH_DUMP_GRAPH")
    out = minitorch.explain(minitorch.jit(softmaxish, options=FUSE))(x)
    assert out.fusion is not None and "Fusion:" in capsys.readouterr().out
    assert set(out.fusion.reasons()) <= set(REASONS)
    assert minitorch.explain(softmaxish)(x).fusion is None


def test_recomputation_is_recorded_and_correct():
    def f(x, y):
        p = x * y
        return (p + 1.0).exp(), p

    x, y = _rand(3, 4), _rand(3, 4, seed=1)
    g = minitorch.jit(f).trace(x, y)
    work = clone_graph(g)
    rep = fuse(work)
    assert [(a.op, c.op) for a, c in rep.recomputed] == [("mul", "mul")]
    assert "recomputed %" in str(rep)
    for a, b in zip(interpret(work, x, y), f(x, y)):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_mark_unfusable():
    def f(x):
        return (x.tanh() * 2.0).exp()

    x = _rand(3, 4)
    g = minitorch.jit(f).trace(x)
    mark_unfusable("tanh")
    try:
        rep = fuse(clone_graph(g))
    finally:
        mark_unfusable("tanh", False)
    assert [(r.producer.op, r.reason) for r in rep.refusals] == [("tanh", R.UNFUSABLE)]


def test_lone_anchor_is_reported():
    def f(x, w):
        return (x @ w).sum()

    g = minitorch.jit(f).trace(_rand(3, 4), _rand(4, 2, seed=1))
    rep = fuse(g)
    assert [(r.producer.op, r.reason) for r in rep.refusals] == [("matmul", R.ANCHOR)]


def test_build_fused_node_on_empty_tensors():
    g, (x,) = graph((0, 3))
    e = node(g, "exp", x)
    n = node(g, "neg", e)
    g.set_outputs([n])
    grp = Group(n)
    grp.add(e)
    build_fused_node(g, grp, "fused_0")
    g.verify()
    (out,) = interpret(g, minitorch.tensor(np.zeros((0, 3), np.float32)))
    assert out.shape == (0, 3)


def test_book_numbers_come_from_code():
    r = report.worked_example(n=8, d=4)
    assert r["kernels_after"] < r["kernels_before"] and r["bytes_after"] < r["bytes_before"]
    assert report.kernels(r["before"]) == r["kernels_before"] == 8
    rows = report.refusal_rows(r["report"])
    assert rows and all(any(reason in row[2] for reason in REASONS) for row in rows)


@settings(max_examples=30, derandomize=True, deadline=None)
@given(programs(max_len=10), st.booleans())
def test_random_programs_compiled_with_fusion_equal_eager(case, strided):
    shape, arrays, steps = case
    xs = [minitorch.tensor(a) for a in arrays]
    if strided:  # the same values as negative-stride, non-contiguous views
        xs = [minitorch.tensor(np.ascontiguousarray(a[::-1, ::-1]))[::-1, ::-1] for a in arrays]
    compiled = minitorch.jit(lambda *t: run_program(steps, *t)).trace(*xs).compile(options=FUSE)
    assert users_consistent(compiled.graph)
    copies = {c.name for _, c in compiled.fusion.recomputed}
    names = [n.name for n in all_nodes(compiled.graph) if n.op not in ("input", "const", FUSED)]
    assert len(names) == len(set(names)) and not copies - set(names)
    for a, b in zip(compiled(*xs), run_program(steps, *xs)):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_onnx_export_refuses_a_fused_node_and_takes_it_inlined():
    from minitorch.onnx.export import graph_to_onnx

    g = minitorch.jit(lambda x: (x.exp() + 1.0).relu()).trace(_rand(2, 3))
    fuse(g)
    with pytest.raises(minitorch.OpError, match="inline_fused"):
        graph_to_onnx(g, {})
    model = graph_to_onnx(inline_fused(g), {})
    assert [n.op_type for n in model.graph.node] == ["Exp", "Add", "Relu", "Identity"]


def test_refusals_say_which_case_of_the_rule():
    rep = report.worked_example(n=4, d=3)["report"]
    details = {(r.producer.op, r.reason): r.detail for r in rep.refusals}
    assert details[("sum", R.REDUCTION)] == "its result is broadcast back over its input"
    assert (
        details[("exp", R.CYCLE)].startswith("%") and "(sum) reads it" in details[("exp", R.CYCLE)]
    )
    assert details[("exp", R.OUTSIDE)].endswith("(div)")
    g, (x, b) = graph((4, 5), (5,))
    m = node(g, "mul", x, node(g, "exp", b))
    s = node(g, "softmax", m)
    out = node(g, "add", s, node(g, "cast", x, dtype="float32"))
    g.set_outputs([out])
    got = {r.producer.op: (r.reason, r.detail) for r in fuse(g).refusals}
    assert got["exp"] == (R.SPACE, "5 value(s) for a loop of 20")
    assert got["softmax"] == (R.UNFUSABLE, "opaque op")
    assert got["cast"] == (R.UNFUSABLE, "no scalar formula in the registry")
