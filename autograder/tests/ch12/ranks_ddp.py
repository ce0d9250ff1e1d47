"""Rank functions the ddp graded tests (12.3, 12.5) start under ``mpiexec``, and what the
test's own process compares them with: the same training on one process, whole batch."""

from __future__ import annotations

import importlib
import importlib.util
import sys

import numpy as np

import minitorch
from minitorch import exercises, nn
from minitorch.distributed import CountingComm, ready_order, shard, shard_scale
from minitorch.nn import functional as F

N, FEATURES, CLASSES, STEPS = 11, 6, 3, 3  # 11 rows: shards of 6+5 and 3+3+3+2


class Net(nn.Module):
    """A small MLP, and a parameter no loss uses (its gradient never comes)."""

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(7)
        self.l1 = nn.Linear(FEATURES, 8)
        self.l2 = nn.Linear(8, CLASSES)
        for p in self.parameters():
            p.assign_(minitorch.tensor(rng.normal(0, 0.5, p.shape).astype(np.float32)))
        self.unused = nn.Parameter(np.ones(2, np.float32))

    def forward(self, x):
        return self.l2(self.l1(x).relu())


def data():
    rng = np.random.default_rng(3)
    return rng.normal(size=(N, FEATURES)).astype(np.float32), rng.integers(0, CLASSES, N)


def spec(ex_id: str) -> tuple | None:
    """The implementation of ``ex_id`` the test's process runs, as ``(module, name, file)``
    when it is found by that name (a reference, a known-wrong one the mutant runners
    installed; the file for a module the rank cannot import by name); else ``None``: the
    rank's own exercise mechanism (same mode, same code) picks it."""
    fn = exercises.implementation(ex_id)
    module = sys.modules.get(fn.__module__)
    if module is None or getattr(module, fn.__qualname__, None) is not fn:
        return None
    return fn.__module__, fn.__qualname__, getattr(module, "__file__", None)


def _resolve(found: tuple | None, fallback):
    if found is None:
        return fallback
    name, attr, path = found
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError:  # written to a file and loaded by path (tests/mutation)
        where = importlib.util.spec_from_file_location(name, path)
        module = sys.modules[name] = importlib.util.module_from_spec(where)
        where.loader.exec_module(module)
    return getattr(module, attr)


def single_process() -> tuple[list[float], list[np.ndarray]]:
    """Losses and final parameters of STEPS steps on the whole batch, one process."""
    model, (x, y) = Net(), data()
    opt = nn.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = F.cross_entropy(model(minitorch.tensor(x)), minitorch.tensor(y))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [p.numpy() for p in model.parameters()]


def _chunks(order, per):
    return [order[i : i + per] for i in range(0, len(order), per)]


def train(comm, how: str, impl: tuple | None, cases: list) -> list[dict]:
    """Each case trains ``Net`` for STEPS steps on this rank's shard and returns the global
    losses, the final parameters and (``how="buckets"``) what the message log saw."""
    import minitorch.distributed as dist

    fn = _resolve(impl, dist.average_gradients if how == "average" else dist.reduce_in_buckets)
    x, y = data()
    s = shard(N, comm.rank, comm.size)
    out = []
    for case in cases:
        c = CountingComm(comm)
        model = Net()
        params = model.parameters()
        opt = nn.optim.SGD(params, lr=0.2, momentum=0.9)
        losses, posted_at = [], []
        for step in range(STEPS):
            opt.zero_grad()
            loss = F.cross_entropy(model(minitorch.tensor(x[s])), minitorch.tensor(y[s]))
            loss = loss * shard_scale(N, comm.rank, comm.size)
            if how == "average":
                loss.backward()
                fn(c, params)
            else:
                if step == 0:  # buckets from this step's order; its backward is done again below
                    used = ready_order(params, loss)  # the unused parameter: its own bucket, last
                    opt.zero_grad()
                    loss = F.cross_entropy(model(minitorch.tensor(x[s])), minitorch.tensor(y[s]))
                    loss = loss * shard_scale(N, comm.rank, comm.size)
                    per, layout = case
                    unused = [len(params) - 1]
                    buckets = {
                        "ready": _chunks(used + unused, per),  # unused shares the last bucket
                        "no unused": _chunks(used, per),  # every bucket completes in backward
                        "reversed": _chunks(used, per)[::-1] + [unused],
                        "unused first": [unused] + _chunks(used, per),  # all left for finish
                    }[layout]
                start = len(c.log)
                finish = fn(c, params, buckets)
                seen = []  # after each gradient's hook: allreduces posted so far this step
                removers = [p.register_grad_hook(lambda g, i=i, seen=seen, log=c.log, start=start:
                                                 seen.append((i, len(log) - start)))
                            for i, p in enumerate(params)]  # fmt: skip
                loss.backward()
                during = len(c.log) - start
                finish()
                for r in removers:
                    r()
                posted_at.append({"seen": seen, "during": during,
                                  "sizes": [m.nbytes for m in c.log[start:] if m.kind == "allreduce"],
                                  "buckets": buckets})  # fmt: skip
            unused = model.unused.grad
            opt.step()
            total = comm.allreduce(np.array([loss.item()], np.float64))
            losses.append(float(total[0]) / comm.size)
        out.append({"losses": losses, "params": [p.numpy() for p in params], "posted": posted_at,
                    "unused": None if unused is None else unused.numpy().tolist()})  # fmt: skip
    return out


SHAPES = [((), "float64"), ((0,), "float64"), ((2, 3), "float64"), ((4,), "float64"),
          ((3,), "float32"), ((2,), "float32")]  # fmt: skip
NO_GRAD = (3, 5)


def average_direct(comm, impl: tuple | None) -> list:
    """12.3 on hand-made gradients: rank r holds ``1 + r * 1e-9`` (lost in float32) times a
    pattern; a 0-d and an empty parameter, float32 ones (one given a float64 gradient) and
    one of each dtype without a gradient. Returns what it returned, the bytes it all-reduced
    and every ``.grad``."""
    import minitorch.distributed as dist

    fn = _resolve(impl, dist.average_gradients)
    params = [nn.Parameter(np.zeros(sh, dtype)) for sh, dtype in SHAPES]
    for k, p in enumerate(params):
        if k not in NO_GRAD:
            g = (1 + comm.rank * 1e-9) * np.arange(1, p.size + 1).reshape(p.shape) * 10.0**k
            p.grad = minitorch.tensor(np.asarray(g), dtype=minitorch.float64)
    c = CountingComm(comm)
    returned = fn(c, params)
    sent = sum(m.nbytes for m in c.log if m.kind == "allreduce")
    return [returned is None, sent] + [None if p.grad is None else (str(p.grad.numpy().dtype),
            p.grad.shape, p.grad.numpy().tolist()) for p in params]  # fmt: skip
