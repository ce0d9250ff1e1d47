"""The book's measurements of data-parallel steps (chapter 12): per-rank timelines and the
communication a step waits for, with and without buckets overlapped with backward.

Run on every rank (``run(n, "minitorch.distributed.timeline:measure", ...)``). Times are
``time.perf_counter()`` on each rank, relative to that rank's step start; ranks start each
step together (a barrier), so their lanes line up to within the barrier's skew.
"""

from __future__ import annotations

import os
import time

import numpy as np

from .comm import CountingComm
from .ddp import average_gradients, make_buckets, ready_order, reduce_in_buckets, shard, shard_scale


def _model(width: int, depth: int, rows: int, seed: int = 0):
    """An MLP of ``depth`` square layers (its gradients are the bytes to send) and a batch."""
    import minitorch
    from minitorch.nn import functional as F
    from minitorch.nn.train import mlp

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, width)).astype(np.float32)
    y = rng.integers(0, 10, rows)
    model = mlp([width] * depth + [10], seed=seed)
    return model, lambda s: F.cross_entropy(model(minitorch.tensor(x[s])), minitorch.tensor(y[s]))


def measure(comm, limits: list, width: int = 256, depth: int = 6, rows: int = 64,
            steps: int = 5) -> dict:  # fmt: skip
    """For each bucket limit in ``limits`` (``None``: no overlap, one all-reduce after backward),
    ``steps`` steps on this rank's shard; per limit, the step whose exposed communication
    (end of backward to gradients averaged) is the median, with its timeline."""
    model, loss_of = _model(width, depth, rows)
    params = model.parameters()
    s, scale = shard(rows, comm.rank, comm.size), shard_scale(rows, comm.rank, comm.size)
    order = ready_order(params, loss_of(s) * scale)
    out = {
        "cores": os.cpu_count(),
        "ranks": comm.size,
        "grad_bytes": sum(p.size * 4 for p in params),
    }
    for limit in limits:
        buckets = None if limit is None else make_buckets(params, limit, order)
        runs = []
        for _ in range(steps + 1):  # the first warms up
            model.zero_grad()
            c = CountingComm(comm)
            comm.barrier()
            t0 = time.perf_counter()
            loss = loss_of(s) * scale
            t_fwd = time.perf_counter()
            finish = None if buckets is None else reduce_in_buckets(c, params, buckets)
            loss.backward()
            t_bwd = time.perf_counter()
            if finish is None:
                average_gradients(c, params)
            else:
                finish()
            t_end = time.perf_counter()
            runs.append({"forward": (0.0, t_fwd - t0), "backward": (t_fwd - t0, t_bwd - t0),
                         "wait": (t_bwd - t0, t_end - t0), "exposed": t_end - t_bwd,
                         "step": t_end - t0, "buckets": 1 if buckets is None else len(buckets),
                         "messages": [(m.start - t0, (m.end or t_end) - t0, m.nbytes) for m in c.log]})  # fmt: skip
        runs = sorted(runs[1:], key=lambda r: r["exposed"])
        out[limit] = runs[len(runs) // 2]
    model.zero_grad()  # one more step's averaged gradient: the same on 1, 2 or 4 ranks
    loss = loss_of(s) * scale
    loss.backward()
    average_gradients(comm, params)
    out["loss"] = float(comm.allreduce(np.array([loss.item()]))[0]) / comm.size
    out["grad"] = np.concatenate([p.grad.numpy().reshape(-1) for p in params])
    return out


def lanes(results: list[dict], limit) -> list[tuple]:
    """``(lane, start_s, end_s, label)`` records of one schedule: per rank, a lane of compute
    (forward, backward, waiting) and a lane of all-reduces (posted to completed)."""
    out = []
    for r, res in enumerate(results):
        run_ = res[limit]
        for part in ("forward", "backward", "wait"):
            out.append((f"rank {r}", *run_[part], part))
        for k, (start, end, nbytes) in enumerate(run_["messages"]):
            out.append((f"rank {r} all-reduce", start, end, f"b{k} {nbytes // 1024} KiB"))
    return out


def chrome_events(results: list[dict], limit) -> tuple[list, dict]:
    """The same timeline as chapter 10's profiler events, one thread (lane) per rank:
    ``chrome_trace(events, [], threads)`` writes it for Perfetto."""
    from ..profiler.core import Event

    events, threads = [], {}
    for lane, start, end, label in lanes(results, limit):
        tid = threads.setdefault(lane, len(threads))
        cat = "range" if "all-reduce" not in lane else "kernel"
        events.append(Event(label, cat, tid, int(start * 1e9), int(end * 1e9)))
    return events, {tid: lane for lane, tid in threads.items()}
