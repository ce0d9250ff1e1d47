"""The seed's table for the learner's framework: eager against compiled training on the digits.

Each row trains one model twice from the same seed on the same batches, once
eagerly and once through ``minitorch.compile``, and measures: step time (the
median of back-to-back pairs on one batch, after training), peak memory of one step (numpy's
allocations, seen by ``tracemalloc``), the first call (trace + compile + run)
and the test accuracy each run reaches. Used by the chapter 9 book page.
"""

from __future__ import annotations

import statistics
import time
import tracemalloc
from dataclasses import dataclass, field

import numpy as np

from ..core.tensor import Tensor, no_grad


@dataclass
class Row:
    model: str
    eager_ms: float
    compiled_ms: float
    eager_peak_kib: float
    compiled_peak_kib: float
    first_call_s: float
    second_first_call_s: float
    eager_acc: float
    compiled_acc: float
    eager_losses: list = field(default_factory=list)
    compiled_losses: list = field(default_factory=list)

    @property
    def speedup(self) -> float:
        return self.eager_ms / self.compiled_ms


def _peak(fn, step=None) -> float:
    """Peak bytes numpy allocates during one call of ``fn`` (KiB), plus the arena the
    compiled ``step`` keeps between calls (allocated before this call, but its memory)."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        fn()
        return (tracemalloc.get_traced_memory()[1] + _kept_bytes(step)) / 1024
    finally:
        tracemalloc.stop()


def _kept_bytes(step) -> int:
    """Bytes of the arena the plan ``step`` ran last keeps between calls (0 without one)."""
    runner = getattr(getattr(getattr(step, "last", None), "compiled", None), "runner", None)
    arena = getattr(runner, "arena", None) if getattr(runner, "keep", False) else None
    return 0 if arena is None else arena.nbytes


def _accuracy(model, x, y) -> float:
    with no_grad():
        pred = model(Tensor(x)).argmax(axis=-1).numpy()
    return float((pred == y).mean())


def training_step(model, opt, loss_fn):
    """The step every row trains with: ``zero_grad``, forward, ``backward``, ``step``."""

    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def train_row(
    name, make_model, loss_fn, epochs, lr, mode="default", batch_size=32, seed=0, pairs=40
):
    """Train ``make_model()`` eagerly and compiled with SGD (momentum 0.9): one :class:`Row`."""
    from .. import compile as compile_
    from ..nn.data import DataLoader, load_digits
    from ..nn.optim import SGD

    x_train, y_train, x_test, y_test = load_digits(seed=seed)
    runs, steps = {}, {}
    for compiled in (False, True):
        model = make_model()
        step = training_step(model, SGD(model, lr=lr, momentum=0.9), loss_fn)
        f = steps[compiled] = compile_(step, mode=mode) if compiled else step
        loader = DataLoader(x_train, y_train, batch_size=batch_size, seed=seed)
        losses, first = [], None
        for _ in range(epochs):
            for x, y in loader:
                t0 = time.perf_counter()
                loss = f(x, y)
                dt = time.perf_counter() - t0
                if first is None:
                    first = dt
                losses.append(float(loss.item()))
        xb, yb = Tensor(x_train[:batch_size]), Tensor(y_train[:batch_size])
        f(xb, yb)
        peak = _peak(lambda f=f, xb=xb, yb=yb: f(xb, yb), f)
        second = None
        if compiled:  # a second model of the same shapes: what a fresh compile costs now
            other = make_model()
            step2 = training_step(other, SGD(other, lr=lr, momentum=0.9), loss_fn)
            t0 = time.perf_counter()
            compile_(step2, mode=mode)(xb, yb)
            second = time.perf_counter() - t0
        runs[compiled] = (
            None,
            peak,
            first,
            second,
            _accuracy(model, x_test, y_test),
            losses,
        )
    e, c = runs[False], runs[True]
    # step times: back-to-back pairs on one batch, so load on a shared machine hits both alike
    te, tc = [], []
    for k in range(pairs):
        order = (False, True) if k % 2 == 0 else (True, False)
        for compiled in order:
            t0 = time.perf_counter()
            steps[compiled](xb, yb)
            (tc if compiled else te).append(time.perf_counter() - t0)
    eager_ms, compiled_ms = statistics.median(te) * 1e3, statistics.median(tc) * 1e3
    return Row(name, eager_ms, compiled_ms, e[1], c[1], c[2], c[3], e[4], c[4], e[5], c[5])


def digits_table(epochs_mlp=15, epochs_cnn=20, mode="default") -> list[Row]:
    """The two rows of the book's table: a 64-128-10 MLP and the chapter 3 CNN."""
    from ..fast.cnn import DigitsCNN
    from ..fast.cnn import cross_entropy as cnn_loss
    from ..nn import functional as F
    from ..nn.train import mlp

    rows = [
        train_row(
            "MLP 64-128-10",
            lambda: mlp([64, 128, 10], seed=0),
            F.cross_entropy,
            epochs_mlp,
            0.1,
            mode,
        ),
        train_row(
            "CNN (8, 16) ch",
            lambda: DigitsCNN((8, 16), 32, seed=0),
            cnn_loss,
            epochs_cnn,
            0.1,  # 0.05 stopped at 96.9% after 20 epochs (and 30)
            mode,
        ),
    ]
    return rows


def table_text(rows: list[Row]) -> str:
    """One line per model, under 100 characters (the book's column): times in ms, peaks in KiB,
    first calls in s, accuracy eager/compiled."""
    head = (
        f"{'model':16} {'eager ms':>8} {'comp ms':>8} {'speedup':>7} {'peak KiB e':>10} "
        f"{'peak KiB c':>10} {'1st s':>6} {'2nd s':>6} {'acc e/c':>11}"
    )
    lines = [head]
    for r in rows:
        lines.append(
            f"{r.model:16} {r.eager_ms:8.2f} {r.compiled_ms:8.2f} {r.speedup:6.2f}x "
            f"{r.eager_peak_kib:10.0f} {r.compiled_peak_kib:10.0f} {r.first_call_s:6.2f} "
            f"{r.second_first_call_s:6.2f} {r.eager_acc:5.3f}/{r.compiled_acc:.3f}"
        )
    return "\n".join(lines)


def curves_agree(row: Row, steps: int = 20, rtol: float = 1e-5) -> bool:
    a, b = np.array(row.eager_losses[:steps]), np.array(row.compiled_losses[:steps])
    return bool(np.allclose(a, b, rtol=rtol, atol=1e-6))


# Chapter 9's table on the cuda device (``capstone_cuda.py``): name -> rows(quick) ->
# (make model, make step, batch as numpy arrays, PyTorch twin or None). Later chapters
# add their models (chapter 11: ``transformer/gpu_row.py``, TinyGPT).
GPU_ROWS: dict = {}
# ``vs_torch``'s extra rows: name -> (minitorch_sides(name), torch_sides(name, use_compile)).
# Kept here, not in vs_torch, which runs as ``__main__`` (chapter 11: ``transformer/torch_row.py``).
TORCH_ROWS: dict = {}


def _cnn_gpu_row(quick: bool) -> tuple:
    from ..fast.cnn import DigitsCNN
    from ..fast.cnn import cross_entropy as cnn_loss
    from ..nn.data import load_digits
    from .vs_torch import torch_cnn

    x, y, _, _ = load_digits(seed=0)
    # the simulator runs every CUDA thread in Python: tiny models there
    b, channels, hidden = (4, (2, 3), 0) if quick else (32, (8, 16), 32)
    return (
        lambda: DigitsCNN(channels, hidden, seed=0),
        lambda m, o: training_step(m, o, cnn_loss),
        (x[:b].astype(np.float32), y[:b].astype(np.int64)),
        None if quick else torch_cnn,
    )


GPU_ROWS["capstone CNN"] = _cnn_gpu_row
