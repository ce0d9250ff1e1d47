"""An eager training loop and the chapter's digits classifier."""

from __future__ import annotations

import time

import numpy as np

from ..core.tensor import Tensor, no_grad
from . import functional as F
from .data import DataLoader, load_digits, progress
from .module import Linear, Module, ReLU, Sequential, device_of
from .optim import Adam


def mlp(sizes: list[int], seed: int = 0) -> Sequential:
    """``Linear -> ReLU -> ... -> Linear`` through ``sizes`` (seeded, one seed per layer)."""
    layers: list[Module] = []
    for i, (n, m) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(Linear(n, m, seed=seed + i))
        if i < len(sizes) - 2:
            layers.append(ReLU())
    return Sequential(*layers)


def evaluate(model: Module, x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """``(mean loss, accuracy)`` of ``model`` on arrays ``x, y``, without recording a graph."""
    model.eval()
    with no_grad():
        device = device_of(model)
        logits = model(Tensor(x, dtype="float32", device=device))
        target = Tensor(y, dtype="int64", device=device)
        loss = F.cross_entropy(logits, target).item()
        acc = F.accuracy(logits, target)
    model.train()
    return loss, acc


def fit(
    model: Module,
    loader: DataLoader,
    optimizer,
    epochs: int,
    test=None,
    show_progress: bool | None = None,
) -> dict:
    """Train with cross-entropy; return a history of per-epoch losses and accuracies.

    ``test`` is an optional ``(x, y)`` pair evaluated after every epoch.
    """
    history = {
        "epoch": [],
        "train_loss": [],
        "train_acc": [],
        "test_loss": [],
        "test_acc": [],
        "seconds": [],
    }
    start = time.perf_counter()
    for epoch in range(epochs):
        losses, correct, seen = [], 0, 0
        for x, y in progress(
            loader, total=len(loader), desc=f"epoch {epoch + 1}", enabled=show_progress
        ):
            logits = model(x)
            loss = F.cross_entropy(logits, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            correct += int((logits.argmax(axis=-1) == y).astype("int64").sum().item())
            seen += len(y)
        history["epoch"].append(epoch + 1)
        history["train_loss"].append(float(np.mean(losses)))
        history["train_acc"].append(correct / seen)
        if test is not None:
            tl, ta = evaluate(model, *test)
            history["test_loss"].append(tl)
            history["test_acc"].append(ta)
        history["seconds"].append(time.perf_counter() - start)
    return history


def train_digits(
    epochs: int = 12,
    hidden: int = 64,
    lr: float = 5e-3,
    batch_size: int = 32,
    seed: int = 0,
    show_progress: bool | None = None,
):
    """Train a 64-``hidden``-10 MLP with Adam on the 8x8 digits; return ``(model, history)``."""
    x_train, y_train, x_test, y_test = load_digits(seed=seed)
    model = mlp([64, hidden, 10], seed=seed)
    loader = DataLoader(x_train, y_train, batch_size=batch_size, seed=seed)
    optimizer = Adam(model, lr=lr)
    history = fit(
        model, loader, optimizer, epochs, test=(x_test, y_test), show_progress=show_progress
    )
    return model, history
