"""Compiled mode on cuda: a matmul or conv2d followed by a bias add and relu is one plan step that
runs the tuned matmul with the epilogue applied at store (minitorch/fusion/epilogue_cuda.py).
On the simulator, under ``tuned(True)``: the same values as eager and fewer kernel launches;
a compiled training step through the same layers gives eager's gradients."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch as mt
from minitorch import profiler
from minitorch.cuda import backend as cb
from minitorch.fast import cnn
from minitorch.nn.module import Linear
from minitorch.passes import CompileOptions

RNG = np.random.default_rng(7)
FUSE = CompileOptions(fuse=True)


def _cuda(shape, dtype="float32"):
    return mt.tensor(RNG.standard_normal(shape).astype(dtype), device="cuda")


def _launches(fn, *args):
    with profiler.profile() as prof:
        out = fn(*args).numpy()
    return out, [e.name for e in prof.events if e.cat == "kernel"]


def conv_bias_relu(x, w, b):
    return (mt.dispatch("conv2d", x, w, stride=2, padding=1) + b).relu()


def linear_relu(x, w, b):
    return (x @ w + b).relu()


CASES = {  # name: (function, input shapes, dtype, launches of the compiled call)
    "conv-f32": (conv_bias_relu, [(2, 3, 7, 6), (5, 3, 3, 3), (1, 5, 1, 1)], "float32", 2),
    "conv-f64-full-bias": (
        conv_bias_relu,
        [(1, 2, 5, 5), (3, 2, 2, 2), (1, 3, 3, 3)],
        "float64",
        2,
    ),
    "conv-no-channels": (conv_bias_relu, [(1, 0, 4, 4), (2, 0, 3, 3), (1, 2, 1, 1)], "float32", 1),
    "linear-f32": (linear_relu, [(9, 13), (13, 10), (10,)], "float32", 1),
    "linear-f64-batched": (linear_relu, [(2, 5, 6), (6, 3), (5, 1)], "float64", 1),
    "linear-empty-k": (linear_relu, [(4, 0), (0, 3), (3,)], "float32", 1),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_compiled_epilogue_is_one_kernel_with_eager_values(case):
    fn, shapes, dtype, launches = CASES[case]
    args = [_cuda(s, dtype) for s in shapes]
    want = fn(*[mt.tensor(a.numpy()) for a in args]).numpy()  # the CPU's answer
    compiled = mt.compile(fn)
    with cb.tuned(True):
        eager, eager_names = _launches(fn, *args)
        compiled(*args)  # trace and plan
        got, names = _launches(compiled, *args)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got, eager, rtol=1e-5, atol=1e-6)
    assert len(names) == launches < len(eager_names) and names[-1] == "gemm", (names, eager_names)


def test_explain_shows_the_group_as_one_cuda_kernel(capsys):
    args = [_cuda(s) for s in [(4, 6), (6, 5), (5,)]]
    with cb.tuned(True):
        out = mt.explain(mt.jit(linear_relu, options=FUSE))(*args)
    text = capsys.readouterr().out
    assert (
        "[epilogue] %3: matmul add relu" in text and "one cuda kernel: the tuned matmul" in text
    ), text
    np.testing.assert_allclose(out.out.numpy(), linear_relu(*args).numpy(), rtol=1e-5, atol=1e-6)


def test_a_group_it_cannot_take_runs_op_by_op(capsys):
    def two_operands(x, w, b, c):
        return (x @ w + b).relu() * c

    args = [_cuda(s) for s in [(4, 6), (6, 5), (5,), (4, 5)]]
    with cb.tuned(True):
        out = mt.explain(mt.jit(two_operands, options=FUSE))(*args)
        want = two_operands(*args).numpy()
    text = " ".join(capsys.readouterr().out.split())  # explain folds long lines
    # no kernel for it: the fuse stage gives its ops back as planned steps, and says why
    assert "unfused: its ops run as steps on cuda (the epilogue reads more than one operand" in text
    np.testing.assert_allclose(out.out.numpy(), want, rtol=1e-5, atol=1e-6)


def test_untuned_runs_the_learners_matmul_then_the_epilogue():
    args = [_cuda(s) for s in [(5, 4), (4, 3), (3,)]]
    compiled = mt.compile(linear_relu)
    compiled(*args)
    got, names = _launches(compiled, *args)
    assert "gemm" not in names and "matmul" in names
    np.testing.assert_allclose(got, linear_relu(*args).numpy(), rtol=1e-5, atol=1e-6)


class ConvNet(mt.nn.Module):
    def __init__(self):
        self.conv = cnn.Conv2d(2, 3, 3, padding=1, seed=1)
        self.fc = Linear(3 * 4 * 4, 4, seed=2)

    def forward(self, x):
        h = self.conv(x).relu()
        return self.fc(h.reshape(x.shape[0], 3 * 4 * 4)).relu()


def _train(device, compiled, steps=2):
    model = ConvNet().to(device)
    opt = mt.nn.optim.SGD(model, lr=0.1)
    x = mt.tensor(np.linspace(-1, 1, 2 * 2 * 4 * 4, dtype=np.float32).reshape(2, 2, 4, 4))
    x = x.to(device)

    def step(x):
        opt.zero_grad()
        loss = (model(x) ** 2.0).sum()
        loss.backward()
        opt.step()
        return loss

    run = mt.compile(step) if compiled else step
    with profiler.profile() as prof:
        losses = [run(x).item() for _ in range(steps)]
    launches = sum(e.cat == "kernel" for e in prof.events)
    assert "gemm" in {e.name for e in prof.events} or not cb.TUNED
    return losses, [p.numpy() for p in model.parameters()], launches


def test_training_step_compiled_on_cuda_matches_eager_forward_and_backward():
    # In a training step the backward reads the pre-activation (relu's rule), so the fuser
    # recomputes the bias add where it is read and the anchor keeps its own step; the step
    # still runs the tuned matmul everywhere and gives eager's losses and parameters.
    want_losses, want_params, _ = _train("cpu", False)
    with cb.tuned(True):
        losses, params, eager_launches = _train("cuda", False)
        closses, cparams, compiled_launches = _train("cuda", True)
    np.testing.assert_allclose(losses, want_losses, rtol=1e-5)
    np.testing.assert_allclose(closses, want_losses, rtol=1e-5)
    for got, cgot, want in zip(params, cparams, want_params):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(cgot, want, rtol=1e-4, atol=1e-6)
    assert compiled_launches < eager_launches


@pytest.mark.parametrize("layout", ["channel", "row", "transposed", "scalar"])
def test_conv_epilogue_reads_the_bias_through_its_strides(layout):
    from minitorch.cuda import conv, gemm

    x, w = _cuda((2, 2, 5, 4), "float64"), _cuda((3, 2, 2, 2), "float64")
    shape = {"channel": (3, 1, 1), "row": (1, 1, 6, 1), "transposed": (2, 3, 6, 5), "scalar": ()}
    e = RNG.standard_normal(shape[layout])
    if layout == "transposed":  # (OH, OW) not one axis: copied once, then one axis
        ev = mt.tensor(np.ascontiguousarray(np.swapaxes(e, 2, 3)), device="cuda").transpose(2, 3)
    else:
        ev = mt.tensor(e, device="cuda")
    out = mt.dispatch("conv2d", x, w, stride=1, padding=1)
    fn = gemm.cuda.jit(device=True, inline="always")(_add_relu)
    with cb.tuned(True):
        got = conv.conv2d_epilogue(x._data, w._data, out._data, 1, 1, fn, ev._data)
    want = np.maximum(out.numpy() + e, 0)
    np.testing.assert_allclose(cb._BACKEND.to_numpy(got), want, rtol=1e-12, atol=1e-12)


def _add_relu(acc, e):
    v = acc + e
    return v if v > 0 else v * 0


def test_nan_inf_and_a_constant_bias_as_eager():
    bias = _cuda((6,))  # read from the closure: a constant of the traced graph

    def layer(x, w):
        return (x @ w - bias).relu()

    x = RNG.standard_normal((5, 4)).astype("float32")
    x[1, 2], x[3, 0] = np.nan, np.inf
    args = [mt.tensor(x, device="cuda"), _cuda((4, 6))]
    compiled = mt.compile(layer)
    with cb.tuned(True):
        compiled(*args)
        got, names = _launches(compiled, *args)
        want = layer(*args).numpy()
    assert names == ["gemm"], names
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
