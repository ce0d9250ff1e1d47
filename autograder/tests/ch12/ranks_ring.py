"""What each rank does in chapter 12's ring tests: many cases per start of the ranks.

The ranks are threads (``run_threads``): the grader's sandbox starts no processes,
and the learner's function is installed in the test's process only.
"""

from __future__ import annotations

import numpy as np

from minitorch import OpError
from minitorch.distributed import CountingComm, ring_allreduce


def extremes(n: int, dtype, rank: int, p: int) -> np.ndarray:
    """Columns whose sums are inf, NaN (inf - inf, a NaN), -0.0, denormal, huge, exact."""
    info = np.finfo(dtype)
    cols = [
        np.inf if rank == 0 else 1.0,
        np.inf if rank == 0 else (-np.inf if rank == 1 else 2.0),
        np.nan if rank == p - 1 else 3.0,
        -0.0,
        info.smallest_subnormal,
        1e30 * (rank + 1),
        info.max if rank == 0 else 0.0,
        -info.max / 8,
    ]
    return np.resize(np.array(cols, dtype), n)


def buffer(shape, dtype: str, kind: str, rank: int, p: int, seed: int) -> np.ndarray:
    n = int(np.prod(shape))
    if kind == "extreme":
        return extremes(n, np.dtype(dtype), rank, p).reshape(shape)
    rng = np.random.default_rng(1000 * seed + rank)
    if kind == "ints":
        return rng.integers(-50, 50, n).astype(dtype).reshape(shape)
    if kind == "view":  # a transposed view of a larger array: not contiguous
        return rng.standard_normal((shape[1] + 1, shape[0])).astype(dtype)[1:].T
    return rng.standard_normal(n).astype(dtype).reshape(shape)


def allreduce_cases(comm, cases):
    """Per case ``(shape, dtype, kind)``: what went in and came out, and the traffic."""
    out = []
    for seed, (shape, dtype, kind) in enumerate(cases):
        buf = buffer(shape, dtype, kind, comm.rank, comm.size, seed)
        before = buf.copy()
        c = CountingComm(comm)
        got = ring_allreduce(c, buf)
        out.append({
            "buf": before,
            "got": np.array(got, copy=True) if isinstance(got, np.ndarray) else got,
            "new": isinstance(got, np.ndarray) and not np.shares_memory(got, buf),
            "unchanged": bool(np.array_equal(buf, before, equal_nan=True)),
            "sent": c.bytes_sent,
            "messages": c.messages_sent,
            "kinds": sorted({m.kind for m in c.log}),
        })  # fmt: skip
    return out


def errors(comm, bufs):
    """``(op, problem, hint)`` of the error each bad ``buf`` raises, or what happened instead."""
    out = []
    for buf in bufs:
        try:
            ring_allreduce(comm, buf)
            out.append(("", "no error", ""))
        except OpError as e:
            out.append((e.op, str(e.problem), e.hint or ""))
        except Exception as e:  # noqa: BLE001 - the wrong kind of error
            out.append(("", f"{type(e).__name__}: {e}", ""))
    return out
