"""Graded tests, chapter 5: the tracer (5.1) and shape inference (5.2, 5.3)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minitorch
from autograder.harness import assert_close, check, graded, text
from minitorch import OpError, Spec, get_op
from minitorch.tracing import Tracer, infer_matmul, infer_reduce, record_op

from .programs import programs, run_program

F32, F64, I64, B = minitorch.float32, minitorch.float64, minitorch.int64, minitorch.bool_


@graded("5.1", points=1)
def test_record_op_appends_one_node():
    """
    contract: record one op call and return the Proxy of its result.
    contract: the node's attributes are the complete, normalised ones eager's kernel would get
    """
    t = Tracer("demo")
    x = t.input(Spec((2, 3), F32), "x")
    y = record_op(t, get_op("sum"), (x,), {"axis": -1})
    check(isinstance(y, minitorch.Proxy), "5.1", "record_op must return a Proxy", got=type(y))
    check(
        y.shape == (2,) and y.dtype == F32,
        "5.1",
        "wrong spec for x.sum(axis=-1)",
        value=y.shape,
        got=str(y.spec),
    )
    node = y.node
    check(t.graph.op_names() == ["sum"], "5.1", "expected one 'sum' node", ops=t.graph.op_names())
    check(node.inputs == [x.node], "5.1", "the node's input must be x's node")
    check(
        node.attrs == {"axis": (1,), "keepdims": False},
        "5.1",
        "attributes must be bound and normalised with op.bind",
        attrs=node.attrs,
    )
    check(node in x.node.users, "5.1", "add the node with graph.add_node (it sets users)")
    # after a graph break: the node goes into the current graph, its inputs lifted into it
    v = minitorch.tensor([[1.0, 2.0, 3.0]])
    t = Tracer("brk", concrete=[v])
    with t:
        y = t.input(v.spec, "x") * 2
        if y.sum() > 0:  # a break: graph "brk_1" starts
            z = record_op(t, get_op("add"), (y, minitorch.ones(3)), {})
    ops = [g.op_names() for g in t.graphs]
    check(ops[1:] == [["add"]], "5.1", "record into tracer.graph, the current graph", ops=ops)
    ins = [i.op for i in z.node.inputs]
    check(
        z.node.graph is t.graph and ins == ["input", "const"],
        "5.1",
        "inputs must be nodes of the current graph: y crosses the break as an input, "
        "a plain tensor becomes a const (tracer.lift)",
        inputs=ins,
    )


@graded("5.1", points=1)
def test_tracing_records_without_computing():
    """
    contract: its spec (shape, dtype, device) is what eager's result would have, inferred statically: a bad call raises eager's ``OpError`` at trace time;
    """

    @minitorch.jit
    def f(x, w):
        h = (x @ w).relu()
        return (h * 2.0).sum(axis=0), h

    x, w = minitorch.randn(2, 3), minitorch.randn(3, 4)
    g = f.trace(x, w)
    check(
        g.op_names() == ["matmul", "relu", "mul", "sum"],
        "5.1",
        "wrong op sequence",
        ops=g.op_names(),
    )
    check(
        [str(o.spec) for o in g.outputs] == ["float32[4]", "float32[2,4]"],
        "5.1",
        "wrong output specs",
        got=[str(o.spec) for o in g.outputs],
    )
    check(
        len(g.constants) == 1 and g.constants[0].value.item() == 2.0,
        "5.1",
        "the Python scalar 2.0 must become one const node",
        value=len(g.constants),
        consts=len(g.constants),
    )
    check(
        all(n.where.startswith("test_tracer.py:") for n in g.ops),
        "5.1",
        "nodes must carry the user's source location",
        where=[n.where for n in g.ops],
    )
    # shape errors surface at trace time, from the registry's infer, naming the op
    with pytest.raises(OpError, match="matmul"):
        f.trace(x, minitorch.randn(4, 4))


@graded("5.1", points=2)
@settings(max_examples=20)
@given(programs())
def test_traced_programs_equal_eager(program):
    shape, arrays, steps = program
    xs = [minitorch.tensor(a) for a in arrays]
    expected = run_program(steps, *xs)
    f = minitorch.jit(lambda *args: run_program(steps, *args), fullgraph=True)
    got = f(*xs)
    for g, e in zip(got, expected):
        assert_close(g.numpy(), e.numpy(), "5.1", rtol=1e-5, atol=1e-6, steps=steps)
    # the cached graph on new values of the same shapes
    ys = [x * 0.5 + 1 for x in xs]
    before = f.trace_count  # 0 when an earlier example traced the same program already
    again = f(*ys)
    for g, e in zip(again, run_program(steps, *ys)):
        assert_close(g.numpy(), e.numpy(), "5.1", rtol=1e-5, atol=1e-6, steps=steps)
    check(
        f.trace_count == before <= 1,
        "5.1",
        "the second call must reuse the cached graph",
        traces=f.trace_count,
    )


shapes = st.lists(st.integers(1, 4), min_size=0, max_size=4).map(tuple)
dtypes = st.sampled_from([F32, F64, I64])


def _outcome(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except OpError as e:
        return ("OpError", e.op)


@graded("5.2", points=3)
@given(shapes, shapes, dtypes, dtypes, st.booleans())
def test_infer_matmul_matches_registry(sa, sb, da, db, compatible):
    """
    contract: the leading (batch) dimensions ``a.shape[:-2]`` and ``b.shape[:-2]`` broadcast together
    """
    if compatible and len(sa) >= 2 and len(sb) >= 2:
        sb = sb[:-2] + (sa[-1], sb[-1])
    a, b = Spec(sa, np.dtype(da)), Spec(sb, np.dtype(db))
    expected = _outcome(get_op("matmul").infer, a, b)
    got = _outcome(infer_matmul, a, b)
    check(
        got == expected,
        "5.2",
        "infer_matmul disagrees with the registry",
        value=getattr(got, "shape", -1),  # -1: an OpError, as the registry raised
        a=str(a),
        b=str(b),
        got=got,
        expected=expected,
    )


@graded("5.2", points=1)
def test_infer_matmul_examples():
    """
    contract: both inputs need at least 2 dimensions and ``a.shape[-1] == b.shape[-2]``, otherwise raise ``OpError("matmul", problem, hint)`` naming both shapes;
    contract: re-raise its error as an ``OpError("matmul", ...)`` that keeps its problem, which names the two batch shapes);
    """
    got = infer_matmul(Spec((5, 2, 3), F32), Spec((3, 4), F64))
    check(
        got == Spec((5, 2, 4), F64),
        "5.2",
        "batched matmul",
        value=getattr(got, "shape", None),
        got=got,
    )
    got = infer_matmul(Spec((2, 3), F64), Spec((3, 1), I64))
    check(got == Spec((2, 1), F64), "5.2", "the dtype promotes both inputs' dtypes (float64 @ "
          "int64 is float64)", value=getattr(got, "shape", None), got=got)  # fmt: skip
    got = infer_matmul(Spec((2, 3), F32), Spec((3, 4), F32))
    check(got == Spec((2, 4), F32), "5.2", "float32 @ float32 is float32 (promote(a.dtype, "
          "b.dtype))", value=text(str(got)), got=got)  # fmt: skip
    got = infer_matmul(Spec((2, 3), F32, "cuda"), Spec((3, 4), F32, "cuda"))
    check(got == Spec((2, 4), F32, "cuda"), "5.2", "the result is on a.device",
          value=text(getattr(got, "device", None)), got=got)  # fmt: skip
    with pytest.raises(OpError, match=r"^matmul: .*\(2, 3\).*\(2, 3\)") as e:
        infer_matmul(Spec((2, 3), F32), Spec((2, 3), F32))
    check(e.value.op == "matmul" and bool(e.value.hint), "5.2", 'incompatible shapes raise '
          'OpError("matmul", problem, hint): the hint says what would work',
          value=text([e.value.op, bool(e.value.hint)]))  # fmt: skip
    with pytest.raises(OpError, match="^matmul: ") as e:
        infer_matmul(Spec((2, 2, 3), F32), Spec((3, 3, 4), F32))
    msg = str(e.value)
    check("(2,)" in msg and "(3,)" in msg, "5.2", "batch dimensions that do not broadcast: "
          "keep broadcast_shape's problem, which names the batch shapes (2,) and (3,)",
          value=text(["(2,)" in msg, "(3,)" in msg]), got=msg)  # fmt: skip


axes = st.one_of(
    st.none(), st.integers(-5, 4), st.lists(st.integers(-4, 3), min_size=1, max_size=3).map(tuple)
)


@graded("5.3", points=3)
@given(shapes, st.sampled_from([F32, I64, B]), axes, st.booleans())
def test_infer_reduce_matches_registry(shape, dtype, axis, keepdims):
    """
    contract: an axis outside ``[-ndim, ndim)`` or a repeated axis raises
    """
    a = Spec(shape, np.dtype(dtype))
    op = get_op("sum")

    def registry(a, axis, keepdims):
        return op.infer(a, **op.bind({"axis": axis, "keepdims": keepdims}, [a]))

    expected = _outcome(registry, a, axis, keepdims)
    got = _outcome(infer_reduce, a, axis, keepdims)
    if shape == () and axis is not None:
        return  # the registry accepts axis 0/-1 on 0-d tensors; not part of the exercise
    check(
        got == expected,
        "5.3",
        "infer_reduce disagrees with the registry",
        value=getattr(got, "shape", -1),  # -1: an OpError, as the registry raised
        a=str(a),
        axis=axis,
        keepdims=keepdims,
        got=got,
        expected=expected,
    )


@graded("5.3", points=1)
def test_infer_reduce_examples():
    """
    contract: an axis outside ``[-ndim, ndim)`` or a repeated axis raises ``OpError("sum", problem, hint)`` naming the axis and the number of dims;
    """
    a = Spec((2, 3, 4), F32)
    check(
        infer_reduce(a, (0, -1)).shape == (3,),
        "5.3",
        "axis=(0, -1)",
        value=infer_reduce(a, (0, -1)).shape,
    )
    check(
        infer_reduce(a, 1, keepdims=True).shape == (2, 1, 4),
        "5.3",
        "keepdims",
        value=infer_reduce(a, 1, keepdims=True).shape,
    )
    check(infer_reduce(Spec((3,), B), None) == Spec((), I64), "5.3", "sum of bools is int64")
    with pytest.raises(OpError, match="axis 7") as e:  # the message names the 3 dims too
        infer_reduce(a, 7)
    check("3" in str(e.value.problem) + str(e.value.hint), "5.3", "an axis out of range: name "
          f"the axis (7) and the number of dims (3), got: {e.value}")  # fmt: skip
    with pytest.raises(OpError, match="axis 3") as e:
        infer_reduce(a, 3)
    check(e.value.op == "sum" and bool(e.value.hint), "5.3", "an axis out of range raises "
          'OpError("sum", problem, hint): the hint says which axes would work',
          value=text([e.value.op, bool(e.value.hint)]))  # fmt: skip
    with pytest.raises(OpError, match="repeated") as e:
        infer_reduce(a, (1, -2))
    check(e.value.op == "sum" and bool(e.value.hint) and "2" in e.value.problem, "5.3",
          'a repeated axis raises OpError("sum", problem, hint) naming the number of dims',
          value=text([e.value.op, bool(e.value.hint), "2" in e.value.problem]))  # fmt: skip
    got = infer_reduce(Spec((2, 3), F32, "cuda"), 1)
    check(got == Spec((2,), F32, "cuda"), "5.3", "the result stays on a.device",
          value=text(getattr(got, "device", None)), got=got)  # fmt: skip
