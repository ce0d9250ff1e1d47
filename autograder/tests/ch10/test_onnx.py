"""Graded tests, chapter 10: dynamic dims from two traces (10.5), writing ONNX (10.6).

The exported models are checked with ``onnx.checker`` and run with onnxruntime;
their outputs must equal minitorch's on the course's MLP and CNN at several
batch sizes.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import minitorch
from autograder.harness import assert_close, check, graded, text
from minitorch import OpError, Spec
from minitorch.fast.cnn import DigitsCNN
from minitorch.nn.train import mlp
from minitorch.onnx import dynamic_dims, export, graph_to_onnx, trace_for_export
from minitorch.tracing import Graph

F32 = np.dtype("float32")


def _run(model: onnx.ModelProto, *xs):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {f"input{k}": x.numpy() for k, x in enumerate(xs)})


def _dims_value(dims) -> list[int]:
    """``dynamic_dims``'s answer as numbers for ``check(value=...)``: each node's dims as a
    bit mask, sorted (node names and order are the tracer's, so they are left out)."""
    try:
        return sorted(sum(1 << int(d) for d in v) for v in dims.values())
    except Exception:  # noqa: BLE001 - a malformed answer: its check fails on its own
        return []


def _eager(model, x):
    with minitorch.no_grad():
        return model(x).numpy()


@graded("10.5", points=2)
def test_dynamic_dims_of_the_mlp_and_cnn():
    m = mlp([6, 5, 3], seed=1)
    a = trace_for_export(m, (minitorch.randn(4, 6),))
    b = trace_for_export(m, (minitorch.randn(7, 6),))
    got = dynamic_dims(a, b)
    want = {n.name: (0,) for n in a.nodes if n.op != "const"}
    check(
        got == want,
        "10.5",
        "every value of the MLP has a dynamic batch dim",
        value=_dims_value(got),
        got=got,
        expected=want,
    )
    cnn = DigitsCNN(channels=(2, 3), hidden=4)
    a = trace_for_export(cnn, (minitorch.randn(2, 1, 8, 8),))
    b = trace_for_export(cnn, (minitorch.randn(3, 1, 8, 8),))
    got = dynamic_dims(a, b)
    check(
        all(v == (0,) for v in got.values()),
        "10.5",
        "only dim 0 changes",
        value=_dims_value(got),
        got=got,
    )
    check(
        len(got) == len([n for n in a.nodes if n.op != "const"]),
        "10.5",
        "every non-constant",
        value=len(got),
    )


@graded("10.5", points=2)
def test_dynamic_dims_several_dims_and_inputs():
    """contract: Which dims of which values change
    contract: Return ``{node.name: dims}`` for every node (inputs and constants included)
    """

    def f(x, y):
        return (x.permute(1, 0) @ y).sum(axis=0, keepdims=True), y * 2.0

    a = minitorch.jit(f).trace(minitorch.randn(3, 4), minitorch.randn(3, 5))
    b = minitorch.jit(f).trace(minitorch.randn(6, 4), minitorch.randn(6, 7))
    got = dynamic_dims(a, b)
    names = [n.name for n in a.nodes]
    want = {names[0]: (0,), names[1]: (0, 1)}  # x: dim 0, y: dims 0 and 1
    for n in a.ops:
        if n.op == "permute":
            want[n.name] = (1,)
        elif n.op == "matmul" or n.op == "sum":
            want[n.name] = (1,)
        elif n.op == "mul":
            want[n.name] = (0, 1)
    check(
        got == want,
        "10.5",
        "wrong dynamic dims",
        value=_dims_value(got),
        got=got,
        expected=want,
        graph=a.text(),
    )


@graded("10.5", points=2)
def test_dynamic_dims_refuses_shape_dependent_programs():
    """contract: The two must be the same program
    contract: Raise ``OpError("onnx.export", problem, hint)`` when
    """

    def branchy(x):
        return x.relu() if x.shape[0] < 5 else x.tanh()

    a = minitorch.jit(branchy).trace(minitorch.randn(4, 2))
    b = minitorch.jit(branchy).trace(minitorch.randn(5, 2))
    with pytest.raises(OpError, match="onnx.export") as e:
        dynamic_dims(a, b)
    check(
        isinstance(e.value, OpError) and bool(e.value.problem) and bool(e.value.hint),
        "10.5",
        'the program branches on the batch size: OpError("onnx.export", problem, hint)',
        value=text(e.value.op),
    )

    def longer(x):
        for _ in range(x.shape[0]):
            x = x + 1.0
        return x

    a = minitorch.jit(longer).trace(minitorch.randn(2))
    b = minitorch.jit(longer).trace(minitorch.randn(3))
    with pytest.raises(OpError, match="onnx.export") as e:
        dynamic_dims(a, b)
    check(
        isinstance(e.value, OpError) and bool(e.value.problem) and bool(e.value.hint),
        "10.5",
        'a loop runs once per row: refuse with OpError("onnx.export", ...)',
        value=text(e.value.op),
    )

    def squeezed(x):  # the same ops, but a rank that depends on the batch size
        return x.sum(axis=1, keepdims=x.shape[0] < 5)

    a = minitorch.jit(squeezed).trace(minitorch.randn(4, 2))
    b = minitorch.jit(squeezed).trace(minitorch.randn(5, 2))
    with pytest.raises(OpError, match="onnx.export") as e:
        dynamic_dims(a, b)
    check(
        isinstance(e.value, OpError) and bool(e.value.problem) and bool(e.value.hint),
        "10.5",
        'a rank that depends on the batch size: refuse with OpError("onnx.export", ...)',
        value=text(e.value.op),
    )

    def counted(x):
        return x * minitorch.arange(x.shape[0]).astype(x.dtype)

    a = minitorch.jit(counted).trace(minitorch.randn(3))
    b = minitorch.jit(counted).trace(minitorch.randn(4))
    with pytest.raises(OpError, match="onnx.export") as e:
        dynamic_dims(a, b)
    check(
        isinstance(e.value, OpError) and bool(e.value.problem) and bool(e.value.hint),
        "10.5",
        'a constant was built from the batch size: refuse with OpError("onnx.export", ...)',
        value=text(e.value.op),
    )


def _chain(batch, steps):
    """A hand-built graph: input ``x`` of shape (batch, 2), then ``(name, op, shape)`` steps,
    each reading the one before."""
    g = Graph("g")
    prev = g.add_input(Spec((batch, 2), F32), "x")
    for name, op, shape in steps:
        prev = g.add_node(op, [prev], {}, Spec(shape, F32), where="")
        prev.name = name
    g.set_outputs([prev])
    return g


@graded("10.5", points=1)
def test_dynamic_dims_names_the_first_node_that_differs():
    # the op of h_first differs (exp, then tanh), and so does the op of h_second after it
    a = _chain(
        4, [("h_relu", "relu", (4, 2)), ("h_first", "exp", (4, 2)), ("h_second", "neg", (4, 2))]
    )
    b = _chain(
        5, [("h_relu", "relu", (5, 2)), ("h_first", "tanh", (5, 2)), ("h_second", "abs", (5, 2))]
    )
    with pytest.raises(OpError, match="onnx.export") as e:
        dynamic_dims(a, b)
    named = "h_first" in str(e.value)
    check(
        named and bool(e.value.problem) and bool(e.value.hint),
        "10.5",
        "an op that differs: name the first node that differs (h_first), with a hint",
        value=text([e.value.op, named]),
        err=str(e.value),
    )
    # the same ops, but the rank of h_kept differs (keepdims chosen from the batch size)
    a = _chain(
        4, [("h_relu", "relu", (4, 2)), ("h_kept", "sum", (4, 1)), ("h_last", "neg", (4, 1))]
    )
    b = _chain(5, [("h_relu", "relu", (5, 2)), ("h_kept", "sum", (5,)), ("h_last", "neg", (5,))])
    with pytest.raises(OpError, match="onnx.export") as e:
        dynamic_dims(a, b)
    named = "h_kept" in str(e.value)
    check(
        named and bool(e.value.problem) and bool(e.value.hint),
        "10.5",
        "a rank that differs: name the first node that differs (h_kept), with a hint",
        value=text([e.value.op, named]),
        err=str(e.value),
    )


def _matches_at_several_batch_sizes(model, shape):
    proto = export(model, minitorch.randn(4, *shape), dynamic_axes={"input0": {0: "batch"}})
    onnx.checker.check_model(proto, full_check=True)
    dim = proto.graph.input[0].type.tensor_type.shape.dim[0]
    check(dim.dim_param == "batch", "10.6", "the batch dim of the input must be symbolic", dim=dim)
    n_params = len(model.parameters())
    check(
        len(proto.graph.initializer) >= n_params,
        "10.6",
        "every parameter is an initializer",
        initializers=[i.name for i in proto.graph.initializer],
    )
    for batch in (1, 4, 9):
        x = minitorch.randn(batch, *shape)
        (got,) = _run(proto, x)
        assert_close(got, _eager(model, x), "10.6", rtol=1e-5, atol=1e-5, batch=batch)


@graded("10.6", points=2)
def test_exported_mlp_matches_minitorch_at_several_batch_sizes():
    _matches_at_several_batch_sizes(mlp([64, 32, 10], seed=3), (64,))


@graded("10.6", points=2)
def test_exported_cnn_matches_minitorch_at_several_batch_sizes():
    _matches_at_several_batch_sizes(DigitsCNN(channels=(4, 8), hidden=16, seed=3), (1, 8, 8))


@graded("10.6", points=2)
def test_many_ops_and_several_outputs():
    x = minitorch.randn(2, 3, 4)
    y = minitorch.randn(4)

    def f(x, y):
        h = (x * y - 1.0).exp() / (x.abs() + 1.0)
        return (
            h.sum(axis=1, keepdims=True),
            h.max(axis=-1),
            h.mean(),
            h.argmax(axis=1),
            h.permute(2, 0, 1).reshape(4, 6),
            x[0, 1:3, ::2],
            minitorch.where(x > 0, x, y.sqrt()),
            (x != 0.5).sum(axis=2),
            minitorch.nn.functional.softmax(x, 1),
            (-x.sigmoid().tanh()).relu(),
        )

    proto = graph_to_onnx(minitorch.jit(f).trace(x, y), {})
    onnx.checker.check_model(proto, full_check=True)
    check(
        len(proto.graph.output) == 10,
        "10.6",
        "one ONNX output per returned tensor",
        value=len(proto.graph.output),
    )
    outs = _run(proto, x, y)
    for k, (got, want) in enumerate(zip(outs, f(x, y))):
        want = want.numpy()
        check(got.dtype == want.dtype, "10.6", f"output {k} has the wrong dtype", got=got.dtype)
        assert_close(got, want, "10.6", rtol=1e-5, atol=1e-6, output=k)


@graded("10.6", points=2)
def test_constants_are_initializers_and_outputs_are_named():
    w = minitorch.randn(3, 2)
    proto = graph_to_onnx(minitorch.jit(lambda x: (x @ w) * 2.0).trace(minitorch.randn(5, 3)), {})
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in proto.graph.initializer}
    check(
        any(a.shape == (3, 2) and np.array_equal(a, w.numpy()) for a in inits.values()),
        "10.6",
        "the weight must be stored as an initializer",
        initializers=list(inits),
    )
    graph = minitorch.jit(lambda x: (x @ w) * 2.0).trace(minitorch.randn(5, 3))
    want = sorted(f"const_{c.name}" for c in graph.constants)
    check(sorted(inits) == want, "10.6", "each constant is the initializer const_<node name>",
          value=text(sorted(inits)), got=sorted(inits), expected=want)  # fmt: skip
    check(proto.producer_name == "minitorch", "10.6", 'producer_name="minitorch"',
          got=proto.producer_name)  # fmt: skip
    check(proto.graph.name == graph.name, "10.6", "the ONNX graph is named graph.name",
          value=text(proto.graph.name), expected=graph.name)  # fmt: skip
    check([i.name for i in proto.graph.input] == ["input0"], "10.6", "inputs are input0, ...")
    check([o.name for o in proto.graph.output] == ["output0"], "10.6", "outputs are output0, ...")
    check(
        proto.opset_import[0].version == 18,
        "10.6",
        "opset 18 by default",
        value=proto.opset_import[0].version,
    )
    (got,) = _run(proto, minitorch.ones(5, 3))
    assert_close(got, (np.ones((5, 3), np.float32) @ w.numpy()) * 2, "10.6", rtol=1e-5)


@graded("10.6", points=2)
def test_an_op_without_mapping_names_it_and_the_custom_op_route():
    """contract: has no emitter raises ``OpError("onnx.export", problem, hint)`` naming the op"""
    name = "ch10_graded_softplus"
    if name in minitorch.OPS:
        fn = _softplus[0]
    else:

        @minitorch.custom_op(name, infer=lambda a: a)
        def fn(x):
            return np.logaddexp(0, x)

        _softplus.append(fn)
    graph = minitorch.jit(lambda x: fn(x * 2.0)).trace(minitorch.randn(3))
    with pytest.raises(OpError, match=name) as info:
        graph_to_onnx(graph, {})
    check(
        "register_onnx" in str(info.value) and bool(info.value.problem),
        "10.6",
        "a problem that names the op, and a hint that names register_onnx",
        value=text([info.value.op, name in str(info.value), "register_onnx" in str(info.value)]),
        err=info.value,
    )
    # an op that is not in the registry at all (cond) is refused the same way, not a KeyError
    graph = minitorch.jit(
        lambda x: minitorch.cond(x.sum() > 0, lambda x: x, lambda x: -x, x)
    ).trace(minitorch.randn(3))
    try:
        graph_to_onnx(graph, {})
    except OpError as e:
        check(e.op == "onnx.export" and "cond" in str(e), "10.6", "name the op (cond)",
              value=text([e.op, "cond" in str(e)]), err=e)  # fmt: skip
    else:
        check(False, "10.6", 'a cond node must raise OpError("onnx.export", ...)')


@graded("10.6", points=1)
def test_a_cond_node_is_refused_with_a_hint():
    graph = minitorch.jit(
        lambda x: minitorch.cond(x.sum() > 0, lambda x: x.exp(), lambda x: -x, x)
    ).trace(minitorch.randn(3))
    with pytest.raises(OpError, match="onnx.export") as e:
        graph_to_onnx(graph, {})
    named, hinted = "cond" in e.value.problem, bool(e.value.hint)
    check(
        named and hinted,
        "10.6",
        'an op not in the registry (cond): OpError("onnx.export", problem naming it, hint)',
        value=text([e.value.op, named, hinted]),
        err=str(e.value),
    )


_softplus: list = []
