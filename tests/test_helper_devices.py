"""Issue 26, class 10: helpers that make tensors make them on their inputs' device.

The CNN's loss built its class indices on the CPU (cuda logits failed with
"inputs are on different devices"), Adam's buffers and a compiled Adam step's
counters were CPU tensors beside cuda parameters, and the accuracy helpers put
their inputs on the CPU whatever the model's device. Each test failed before
the fix; cuda is Numba's simulator here.
"""

from __future__ import annotations

import numpy as np
import pytest
from backends_util import BACKENDS, on
from test_ch9_train import _step

import minitorch as mt
from minitorch.fast import cnn
from minitorch.nn.module import Linear, Parameter
from minitorch.nn.optim import SGD, Adam
from minitorch.nn.train import evaluate

Z = np.array([[1.0, 2.0, 0.5], [0.5, 0.1, 0.0], [-1.0, 0.0, 3.0]])
TARGETS = [1, 0, 2]


def _numpy_loss():
    logp = Z - np.log(np.exp(Z).sum(axis=1, keepdims=True))
    return -logp[np.arange(3), TARGETS].mean()


@pytest.mark.parametrize("backend", BACKENDS)
def test_cnn_cross_entropy_on_every_backend(backend):
    # cuda: "inputs are on different devices"; python has no logsumexp kernel (a fallback)
    with on(backend) as T:
        logits = T(Z, requires_grad=True)
        loss = cnn.cross_entropy(logits, T(TARGETS))
        loss.backward()
        assert loss.device == logits.device and logits.grad.device == logits.device
        assert loss.item() == pytest.approx(_numpy_loss(), rel=1e-9)
        soft = np.exp(Z) / np.exp(Z).sum(axis=1, keepdims=True)
        np.testing.assert_allclose(logits.grad.numpy(), (soft - np.eye(3)[TARGETS]) / 3, atol=1e-12)


@pytest.mark.parametrize(
    "targets, words",
    [([0, 3, 1], ["[0, 3)", "3"]), ([-1, 0, 1], ["[0, 3)", "-1"]), ([0.0, 1.0, 2.0], ["int64"])],
)
def test_cnn_cross_entropy_refuses_targets_that_are_not_classes(targets, words):
    # a target equal to the number of classes gave a loss (its one-hot row was all zeros)
    with pytest.raises(mt.OpError) as e:
        cnn.cross_entropy(mt.tensor(Z), mt.tensor(targets))
    assert e.value.op == "cross_entropy"
    assert all(w in str(e.value) for w in words), str(e.value)


X = np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32)
Y = np.array([0, 1, 2, 0, 1, 2])


def adam(m):
    return Adam(m, lr=0.1)


def momentum(m):
    return SGD(m, lr=0.1, momentum=0.9)


def _train(device: str, steps: int, compiled: bool = False, opt=adam):
    """The losses of ``steps`` optimizer steps and the parameters after them."""
    lin = Linear(4, 3, seed=0)  # small: every simulated cuda kernel launch costs milliseconds
    lin.weight = Parameter(lin.weight.numpy(), device=device)
    lin.bias = Parameter(lin.bias.numpy(), device=device)
    opt = opt(lin)
    x, y = mt.tensor(X, device=device), mt.tensor(Y, device=device)
    step = mt.compile(_step(lin, opt)) if compiled else _step(lin, opt)
    losses = [step(x, y).item() for _ in range(steps)]
    assert all(p.device == device for p in lin.parameters())
    return losses, [p.numpy() for p in lin.parameters()]


def test_optimizers_train_cuda_parameters_eager_and_compiled():
    # Adam's moment buffers (eager) and its step counters (compiled: traced on the second
    # call, once they exist) were made on the CPU. The simulator takes seconds a step:
    # one eager step per optimizer, two compiled calls.
    for opt in (adam, momentum):
        cpu_losses, cpu_params = _train("cpu", 1, opt=opt)
        losses, params = _train("cuda", 1, opt=opt)
        assert losses == pytest.approx(cpu_losses, rel=1e-6)
        for got, want in zip(params, cpu_params):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    assert _train("cuda", 2, compiled=True)[0] == pytest.approx(_train("cpu", 2)[0], rel=1e-5)


def test_accuracy_helpers_follow_the_model_device():
    # both put the numpy inputs on the CPU beside a cuda model
    model = Linear(4, 3, seed=0)
    model.weight = Parameter(model.weight.numpy(), device="cuda")
    model.bias = Parameter(model.bias.numpy(), device="cuda")
    with mt.no_grad():
        pred = model(mt.tensor(X, device="cuda")).argmax(axis=-1).numpy()
    assert cnn.accuracy(model, X, Y) == pytest.approx((pred == Y).mean())
    loss, acc = evaluate(model, X, Y)
    assert acc == pytest.approx((pred == Y).mean()) and np.isfinite(loss)
