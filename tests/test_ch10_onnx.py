"""Chapter 10 framework: ONNX emitters on the registry's ops, export options and error paths."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import minitorch
from minitorch import OpError
from minitorch.fast.cnn import DigitsCNN
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
        export(lambda x: x[-3::-1], minitorch.randn(3, 2), dynamic_axes={"input0": {0: "b"}})
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


# ---------------------------------------------------------------- issue 26: dynamic dims, dtypes

BATCH = {"input0": {0: "batch"}}


def _matches_at(model, fn, sizes, tail=(3,)):
    for n in sizes:
        x = minitorch.randn(n, *tail)
        want = fn(x)
        want = want if isinstance(want, tuple) else (want,)
        for got, w in zip(_run(model, x), want):
            np.testing.assert_allclose(got, w.numpy(), rtol=1e-5, atol=1e-6, err_msg=f"batch {n}")


def test_a_value_computed_from_a_dynamic_dim_follows_it():
    # exported at batch 4, x.sum(0) / x.shape[0] divided by 4 at every batch size
    for f in (
        lambda x: x.sum(0) / x.shape[0],
        lambda x: x + (x.shape[0] - 1),
        lambda x: x.sum() / x.numel(),
        lambda x: (x > 0).astype("int64") * x.shape[0],
    ):
        model = export(f, minitorch.randn(4, 3), dynamic_axes=BATCH)
        _matches_at(model, f, (1, 4, 8))
    assert "Shape" in [n.op_type for n in model.graph.node]


def _refusal(f, *words, x=None):
    with pytest.raises(OpError) as e:
        export(f, minitorch.randn(4, 3) if x is None else x, dynamic_axes=BATCH)
    message = str(e.value)
    assert e.value.op == "onnx.export", message
    for word in ("test_ch10_onnx.py:", *words):
        assert word in message, f"{word!r} not in {message!r}"
    return message


def test_what_depends_on_a_dynamic_dim_is_refused_with_its_line():
    _refusal(lambda x: x * (1.0 / x.shape[0]), "0.25", "'batch'", "4, 5, 11, 1")
    _refusal(lambda x: x * 2.0 if x.shape[0] > 4 else x * 3.0, "branch")  # the same ops
    _refusal(lambda x: x.relu() if x.shape[0] > 4 else x.exp(), "relu", "exp")
    _refusal(lambda x: x[0] if x.shape[0] == 1 else x.sum(0), "at size 1")
    _refusal(lambda x: x[: x.shape[0] - 1], "key=")
    _refusal(lambda x: x * minitorch.ones(x.shape[0], 1), "shape [4, 1]")

    def rows(x):
        y = x[0]
        for i in range(1, x.shape[0]):
            y = y + x[i]
        return y

    _refusal(rows, "more nodes")


def test_size_free_indexing_of_a_dynamic_dim_exports():
    # x[-1] was written as row 3 of the example; slices of a dynamic dim were refused
    def f(x):
        return x[-1], x[-2], x[1:], x[:-1], x[::-1], x[::2], x[-2:], x[:, -1]

    _matches_at(export(f, minitorch.randn(4, 3), dynamic_axes=BATCH), f, (2, 4, 9))


def test_every_comparison_and_op_on_bools_exports():
    a = minitorch.tensor([[True, False, True], [False, False, True]])
    b = minitorch.tensor([[False, False, True], [True, False, False]])

    def f(a, b):
        return (
            a < b, a <= b, a > b, a >= b, a == b, a != b,
            a + b, a * b, minitorch.dispatch("maximum", a, b), minitorch.dispatch("minimum", a, b),
            a.abs(), a.relu(),
            a.max(axis=0), a.min(axis=1), a.argmax(axis=1), a @ b.permute(1, 0),
            minitorch.where(a, a, b), a.sum(axis=0),
        )  # fmt: skip

    model = export(f, (a, b))
    for got, want in zip(_run(model, a, b), f(a, b)):
        np.testing.assert_array_equal(got, want.numpy())


def test_eager_special_cases_survive_export():
    nan = float("nan")
    x = minitorch.tensor([[0.0, nan, 1.0], [2.0, 1.0, 0.0]])
    outs = _run(export(lambda x: (x.max(axis=1), x.min(), x.argmax(axis=1)), x), x)
    np.testing.assert_array_equal(outs[0], [nan, 2.0])  # NaN wins, as in numpy
    assert np.isnan(outs[1]) and list(outs[2]) == [1, 0]
    empty = minitorch.zeros(0, 3)
    mean, flat = _run(export(lambda e: (e.mean(), e.reshape(3, 0)), empty), empty)
    assert np.isnan(mean) and flat.shape == (3, 0)


def test_float64_convolutions_run_in_onnxruntime():
    # onnxruntime has no float64 Conv or AveragePool kernel: export writes them another way
    x = minitorch.randn(2, 2, 5, 5, dtype="float64")
    w = minitorch.randn(3, 2, 3, 3, dtype="float64")

    def f(x, w):
        y = minitorch.dispatch("conv2d", x, w, stride=2, padding=1)
        return y, minitorch.dispatch("avg_pool2d", x, kernel_size=(2, 2), stride=(2, 1))

    model = export(f, (x, w), dynamic_axes={"input0": {0: "n"}})
    x = minitorch.randn(4, 2, 5, 5, dtype="float64")
    for got, want in zip(_run(model, x, w), f(x, w)):
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("opset", range(minitorch.onnx.OPSET, minitorch.onnx.MAX_OPSET + 1))
def test_every_accepted_opset_runs(opset):
    cnn = DigitsCNN(channels=(2, 3), hidden=4, seed=0)
    model = export(cnn, minitorch.randn(2, 1, 8, 8), dynamic_axes=BATCH, opset=opset)
    assert model.opset_import[0].version == opset
    x = minitorch.randn(5, 1, 8, 8)
    with minitorch.no_grad():
        np.testing.assert_allclose(_run(model, x)[0], cnn(x).numpy(), rtol=1e-5, atol=1e-5)
    a, b = minitorch.tensor([True, False, False]), minitorch.tensor([False, False, True])
    got = _run(export(lambda a, b: a >= b, (a, b), opset=opset), a, b)[0]
    assert list(got) == [True, True, False]


def test_export_of_cuda_inputs_with_a_dynamic_batch():
    # the second trace's inputs were made on the CPU
    lin = minitorch.nn.Linear(3, 2, seed=0)
    lin.weight = minitorch.nn.Parameter(lin.weight.numpy(), device="cuda")
    lin.bias = minitorch.nn.Parameter(lin.bias.numpy(), device="cuda")
    model = export(lin, minitorch.randn(4, 3).to("cuda"), dynamic_axes=BATCH)
    x = minitorch.randn(6, 3)
    with minitorch.no_grad():
        want = lin(x.to("cuda")).numpy()
    np.testing.assert_allclose(_run(model, x)[0], want, rtol=1e-5, atol=1e-6)


def test_an_empty_backward_slice_stays_empty():
    # slice.indices() says start -1 for "before the first element"; ONNX read the last
    x = minitorch.tensor([[0.0, 1.0, 2.0]])

    def f(x):
        return x[0, -4::-1], x[:, -5:-9:-1]

    for got, want in zip(_run(export(f, x), x), f(x)):
        assert got.shape == want.shape == (0,) or got.shape == want.shape == (1, 0)
