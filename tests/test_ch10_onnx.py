"""Chapter 10 framework: ONNX emitters on the registry's ops, export options and error paths."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import minitorch
from minitorch import OpError
from minitorch.nn.train import mlp
from minitorch.onnx import export, register_onnx


def _run(model, *xs):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {f"input{k}": x.numpy() for k, x in enumerate(xs)})


def test_the_mapping_lives_on_the_ops():
    ops = minitorch.OPS
    assert ops["matmul"].onnx is not None and ops["conv2d"].onnx is not None
    assert ops["conv2d_grad_input"].onnx is None  # training-only ops are not exported


def test_export_writes_a_checked_file(tmp_path):
    model = mlp([5, 4, 2], seed=0)
    path = tmp_path / "m.onnx"
    export(model, minitorch.randn(3, 5), path, dynamic_axes={0: [0]})
    loaded = onnx.load(path)
    onnx.checker.check_model(loaded)
    assert loaded.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "input0_dim0"
    assert loaded.graph.output[0].type.tensor_type.shape.dim[0].dim_param == "input0_dim0"
    x = minitorch.randn(7, 5)
    with minitorch.no_grad():
        np.testing.assert_allclose(_run(loaded, x)[0], model(x).numpy(), rtol=1e-5, atol=1e-6)


def test_dynamic_reshape_and_slicing():
    def f(x):
        y = x.reshape(x.shape[0], 3, 4)
        return y[:, ::-1, 1:3].reshape(x.shape[0], -1).sum(axis=1)

    model = export(f, minitorch.randn(2, 12), dynamic_axes={"input0": {0: "n"}})
    for n in (1, 5):
        x = minitorch.randn(n, 12)
        np.testing.assert_allclose(_run(model, x)[0], f(x).numpy(), rtol=1e-5, atol=1e-5)


def test_negative_step_slices_and_int_indices():
    def f(x):
        return x[::-1, 2], x[1, ::-2], x[-1:0:-1]

    x = minitorch.randn(4, 5)
    outs = _run(export(f, x), x)
    for got, want in zip(outs, f(x)):
        np.testing.assert_array_equal(got, want.numpy())


def test_export_refusals_name_the_problem():
    with pytest.raises(OpError, match="not an input"):
        export(lambda x: x.relu(), minitorch.randn(2), dynamic_axes={"input3": {0: "b"}})
    with pytest.raises(OpError, match="dynamic dim"):
        export(lambda x: x[1:], minitorch.randn(3, 2), dynamic_axes={"input0": {0: "b"}})
    with pytest.raises(OpError, match="expand"):
        export(
            lambda x, y: y.expand(x.shape[0], 3),
            (minitorch.randn(2, 3), minitorch.randn(1, 3)),
            dynamic_axes={"input0": {0: "b"}},
        )
    with pytest.raises(OpError, match="cond"):
        export(
            lambda x: minitorch.cond(x.sum() > 0, lambda x: x, lambda x: -x, x),
            minitorch.randn(3),
        )


def test_a_custom_op_exports_once_it_has_an_emitter():
    name = "ch10_test_softplus"

    @minitorch.custom_op(name, infer=lambda a: a)
    def softplus(x):
        return np.logaddexp(0, x)

    x = minitorch.randn(6)
    with pytest.raises(OpError, match=f"{name}.*register_onnx"):
        export(softplus, x)

    @register_onnx(name)
    def _emit(ctx, node, names):
        return ctx.node("Softplus", names)

    np.testing.assert_allclose(_run(export(softplus, x), x)[0], softplus(x).numpy(), rtol=1e-6)
