"""A small convolutional network for the 8x8 digits, built on the chapter-3 ops.

``Conv2d`` and the pools are thin modules over the registered ops
``conv2d``, ``max_pool2d`` and ``avg_pool2d``; their gradients come from the
ops' backward rules (``minitorch/core/conv_ops.py``), so the chapter-2
autograd engine trains the network without knowing what a convolution is.
"""

from __future__ import annotations

import math
import time

import numpy as np

from .. import backends
from ..core import dtypes as dt
from ..core.creation import arange
from ..core.errors import OpError
from ..core.registry import dispatch, get_op
from ..core.tensor import Tensor, no_grad
from ..nn.data import DataLoader, load_digits
from ..nn.module import Linear, Module, Parameter, device_of
from ..nn.optim import Adam


class Conv2d(Module):
    """``conv2d(x, weight) + bias`` with ``weight`` of shape (out, in, k, k), seeded uniform init."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int = 1,
        padding: int = 0,
        seed: int = 0,
        dtype=dt.float32,
    ):
        rng = np.random.default_rng(seed)
        bound = 1 / math.sqrt(in_channels * kernel_size * kernel_size)
        shape = (out_channels, in_channels, kernel_size, kernel_size)
        self.weight = Parameter(rng.uniform(-bound, bound, shape), dtype=dtype)
        self.bias = Parameter(rng.uniform(-bound, bound, (1, out_channels, 1, 1)), dtype=dtype)
        self.stride, self.padding = stride, padding

    def forward(self, x: Tensor) -> Tensor:
        y = dispatch("conv2d", x, self.weight, stride=self.stride, padding=self.padding)
        return y + self.bias


class MaxPool2d(Module):
    def __init__(self, kernel_size: int = 2, stride: int | None = None):
        self.kernel_size, self.stride = kernel_size, stride

    def forward(self, x: Tensor) -> Tensor:
        return dispatch("max_pool2d", x, kernel_size=self.kernel_size, stride=self.stride)


class AvgPool2d(MaxPool2d):
    def forward(self, x: Tensor) -> Tensor:
        return dispatch("avg_pool2d", x, kernel_size=self.kernel_size, stride=self.stride)


class DigitsCNN(Module):
    """(N, 1, 8, 8) -> conv 3x3 -> relu -> max pool -> conv 3x3 -> relu -> avg pool -> [linear -> relu] -> linear."""

    def __init__(self, channels: tuple[int, int] = (16, 32), hidden: int = 64, seed: int = 0):
        c1, c2 = channels
        self.conv1 = Conv2d(1, c1, 3, padding=1, seed=seed)
        self.pool1 = MaxPool2d(2)
        self.conv2 = Conv2d(c1, c2, 3, padding=1, seed=seed + 1)
        self.pool2 = AvgPool2d(2)
        self.fc1 = Linear(4 * c2, hidden, seed=seed + 2) if hidden else None
        self.fc2 = Linear(hidden or 4 * c2, 10, seed=seed + 3)

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim == 2:
            x = x.reshape(x.shape[0], 1, 8, 8)
        x = self.pool1(self.conv1(x).relu())
        x = self.pool2(self.conv2(x).relu())
        x = x.reshape(x.shape[0], -1)
        return self.fc2(self.fc1(x).relu() if self.fc1 is not None else x)


def cross_entropy(logits: Tensor, targets: Tensor) -> Tensor:
    """Mean of ``logsumexp(logits) - logits[target]`` (the stable form, via the logsumexp op)."""
    if logits.ndim != 2 or targets.shape != logits.shape[:1]:
        raise OpError(
            "cross_entropy",
            f"logits {logits.shape} and targets {targets.shape} do not match",
            hint="logits (N, C) and int targets (N,)",
        )
    n, c = logits.shape
    if targets.dtype != dt.int64:
        raise OpError(
            "cross_entropy",
            f"targets must be int64 class indices, got {targets.dtype.name}",
            hint="pass targets.astype('int64') if they hold whole numbers",
        )
    # a step of the graph, so that a compiled loss checks each call's targets as eager does
    targets = dispatch("index_check", targets, size=c, caller="cross_entropy", what="targets",
                       hint=f"the logits have {c} classes, numbered from 0")  # fmt: skip
    classes = arange(c, device=logits.device)  # on the logits' device, cuda included
    onehot = (targets.reshape(n, 1) == classes.reshape(1, c)).astype(logits.dtype)
    picked = (logits * onehot).sum(axis=1)
    return (_logsumexp_rows(logits) - picked).mean()


def _logsumexp_rows(logits: Tensor) -> Tensor:
    """The logsumexp op, or the same stable sum from elementwise ops and reductions on a
    backend without its kernel (python)."""
    try:
        backends.current(logits.device).kernel(get_op("logsumexp"))
    except OpError:
        m = logits.detach().max(axis=1, keepdims=True)
        return (logits - m).exp().sum(axis=1).log() + m.reshape(logits.shape[0])
    return dispatch("logsumexp", logits, axis=1)


def accuracy(model: Module, x: np.ndarray, y: np.ndarray) -> float:
    with no_grad():
        xt = Tensor(x, dtype=dt.float32, device=device_of(model))
        pred = model(xt).argmax(axis=-1).numpy()
    return float((pred == y).mean())


def train_digits_cnn(
    epochs: int = 12,
    lr: float = 0.01,
    decay: float = 0.3,
    settle: int = 3,
    batch_size: int = 32,
    channels=(16, 32),
    hidden: int = 64,
    seed: int = 0,
):
    """Train :class:`DigitsCNN` with Adam on the current backend; return ``(model, history)``.

    Large steps first; over the last ``settle`` epochs the learning rate
    shrinks by ``decay`` per epoch so the weights settle instead of jumping
    around a minimum.
    """
    x_train, y_train, x_test, y_test = load_digits(seed=seed)
    model = DigitsCNN(channels, hidden, seed=seed)
    loader = DataLoader(x_train, y_train, batch_size=batch_size, seed=seed)
    optimizer = Adam(model, lr=lr)
    history = {"epoch": [], "loss": [], "test_acc": [], "seconds": []}
    start = time.perf_counter()
    for epoch in range(epochs):
        optimizer.defaults["lr"] = lr * decay ** max(0, epoch - (epochs - settle) + 1)
        losses = []
        for x, y in loader:
            loss = cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        history["epoch"].append(epoch + 1)
        history["loss"].append(float(np.mean(losses)))
        history["test_acc"].append(accuracy(model, x_test, y_test))
        history["seconds"].append(time.perf_counter() - start)
    return model, history
