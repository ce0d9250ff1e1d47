"""Rank functions of tests/test_ch12_ddp.py: the course's three models trained data-parallel."""

from __future__ import annotations

import numpy as np

import minitorch
from minitorch.distributed import (
    average_gradients,
    make_buckets,
    ready_order,
    reduce_in_buckets,
    shard,
    shard_scale,
)
from minitorch.nn.optim import SGD

ROWS, STEPS = 10, 3  # 10 rows: 5+5 on two ranks, 3+3+2+2 on four


def model_and_data(name: str):
    """``(model, loss(model, rows), rows)``: seeded, small, the same on every rank."""
    if name == "mlp":
        from minitorch.nn import functional as F
        from minitorch.nn.data import load_digits
        from minitorch.nn.train import mlp

        x, y = load_digits()[:2]
        return mlp([64, 16, 10], seed=0), lambda m, s: F.cross_entropy(
            m(minitorch.tensor(x[s])), minitorch.tensor(y[s])
        )
    if name == "cnn":  # the capstone's CNN (minitorch/compile/capstone.py), narrower
        from minitorch.fast.cnn import DigitsCNN, cross_entropy
        from minitorch.nn.data import load_digits

        x, y = load_digits()[:2]
        return DigitsCNN((4, 8), 16, seed=0), lambda m, s: cross_entropy(
            m(minitorch.tensor(x[s])), minitorch.tensor(y[s])
        )
    if name == "gpt":
        from minitorch.transformer.model import TinyGPT, lm_loss

        t, vocab = 6, 13
        ids = np.random.default_rng(1).integers(0, vocab, (ROWS, 1, t + 1))
        pos = minitorch.tensor(np.arange(t).reshape(1, 1, t))

        def loss(m, s):
            tokens = ids[s]
            logits = m(minitorch.tensor(tokens[..., :-1]), pos)
            targets = minitorch.tensor(tokens[..., 1:, None])
            return lm_loss(logits, targets, minitorch.ones(targets.shape))

        return TinyGPT(vocab, context=8, width=16, heads=2, layers=1, seed=0), loss
    raise ValueError(name)


def train(comm, name: str, how: str, limit: int = 2048) -> dict:
    """STEPS SGD steps; ``how``: "one" (this process, whole batch), "average" (12.3) or
    "buckets" (12.5 with buckets of at most ``limit`` bytes). Losses are the whole batch's."""
    model, loss_of = model_and_data(name)
    params = model.parameters()
    opt = SGD(params, lr=0.1, momentum=0.9)
    s = slice(0, ROWS) if how == "one" else shard(ROWS, comm.rank, comm.size)
    scale = 1.0 if how == "one" else shard_scale(ROWS, comm.rank, comm.size)
    losses, buckets = [], None
    for _ in range(STEPS):
        opt.zero_grad()
        loss = loss_of(model, s) * scale
        if how == "buckets":
            if buckets is None:
                buckets = make_buckets(params, limit, ready_order(params, loss))
                opt.zero_grad()
                loss = loss_of(model, s) * scale
            finish = reduce_in_buckets(comm, params, buckets)
            loss.backward()
            finish()
        else:
            loss.backward()
            if how == "average":
                average_gradients(comm, params)
        opt.step()
        total = (
            loss.item() if how == "one" else comm.allreduce(np.array([loss.item()]))[0] / comm.size
        )
        losses.append(float(total))
    return {"losses": losses, "params": [p.numpy() for p in params], "buckets": buckets}


def every_model(comm, cases: list) -> list:
    return [train(comm, *case) for case in cases]
