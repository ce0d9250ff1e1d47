"""Issue 39: the capstone CNN and TinyGPT train on the cuda device, eagerly and compiled in every
mode, with the CPU's losses and parameters over three steps (Numba's simulator here: tiny
models, since every simulated launch costs milliseconds)."""

from __future__ import annotations

import numpy as np
import pytest
from test_ch9_train import _step  # zero_grad, cross-entropy, backward, step

import minitorch as mt
from minitorch.fast import cnn
from minitorch.nn.data import load_digits
from minitorch.nn.optim import Adam
from minitorch.transformer import TinyGPT, generate, make_batch
from minitorch.transformer.measure import make_step

MODES = [None, "default", "reduce-overhead", "max-autotune"]
STEPS = 3


def _digits():
    x, y, _, _ = load_digits(seed=0)
    return x[:4].astype(np.float32).reshape(4, 1, 8, 8), y[:4].astype(np.int64)


def _gpt_batch():
    rng = np.random.default_rng(3)
    return make_batch([rng.integers(0, 7, n) for n in (5, 4)], 4)


def _train(make_model, make_step_fn, batch, device, mode):
    """Losses of ``STEPS`` Adam steps on ``batch`` and the parameters after them."""
    model = make_model().to(device)
    step = make_step_fn(model, Adam(model, lr=0.01))
    if mode is not None:
        step = mt.compile(step, mode=mode)
    inputs = [mt.tensor(np.asarray(b.numpy() if hasattr(b, "numpy") else b), device=device)
              for b in batch]  # fmt: skip
    losses = [step(*inputs).item() for _ in range(STEPS)]
    assert all(p.device == device for p in model.parameters())
    return losses, [p.numpy() for p in model.parameters()]


MODELS = {
    "cnn": (lambda: cnn.DigitsCNN(channels=(2, 3), hidden=0, seed=0), _step, _digits),
    "tinygpt": (
        lambda: TinyGPT(7, context=4, width=8, heads=2, layers=1, seed=0),
        make_step,
        _gpt_batch,
    ),
}
_cpu: dict = {}


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m or "eager")
@pytest.mark.parametrize("name", sorted(MODELS))
def test_trains_on_cuda_as_on_the_cpu(name, mode):
    make_model, make_step_fn, data = MODELS[name]
    if name not in _cpu:
        _cpu[name] = _train(make_model, make_step_fn, data(), "cpu", None)
    want_losses, want_params = _cpu[name]
    losses, params = _train(make_model, make_step_fn, data(), "cuda", mode)
    np.testing.assert_allclose(losses, want_losses, rtol=1e-5)
    for got, want in zip(params, want_params):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


def test_module_to_moves_parameters_in_place():
    model = cnn.DigitsCNN(channels=(2, 3), hidden=0, seed=0)
    before = model.parameters()
    values = [p.numpy() for p in before]
    assert model.to("cuda") is model
    assert all(a is b and a.device == "cuda" for a, b in zip(before, model.parameters()))
    assert all(np.array_equal(p.numpy(), v) for p, v in zip(model.parameters(), values))
    model.to("cpu")
    assert all(p.device == "cpu" and p.requires_grad for p in model.parameters())
    for bad in ("float64", "tpu"):
        with pytest.raises(mt.OpError, match=f"'{bad}' is not a device.*'cpu' or 'cuda'"):
            model.to(bad)
    assert all(p.device == "cpu" and p.dtype == np.float32 for p in model.parameters())


def test_generation_on_cuda_matches_the_cpu():
    make = MODELS["tinygpt"][0]
    want = generate(make(), [1, 2], 3, temperature=0)
    assert generate(make().to("cuda"), [1, 2], 3, temperature=0) == want
