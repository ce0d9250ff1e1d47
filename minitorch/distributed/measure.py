"""The book's ring measurements: the ring, MPI's ``Allreduce`` and a gather to one rank.

``compare`` is a rank function for ``launch.run``: on every size it times the three
all-reduces on the same buffers (the best of ``repeats``, from a barrier to a barrier,
so the time is the slowest rank's) and counts the bytes each rank sent.
"""

from __future__ import annotations

import time

import numpy as np

from .comm import CountingComm, wait_all
from .ring import ring_allreduce


def to_root_and_back(comm, buf: np.ndarray) -> np.ndarray:
    """Rank 0 takes every buffer at once (one receive posted per rank), sums, sends it back."""
    out = np.array(buf, copy=True)
    if comm.rank != 0:
        comm.sendrecv(out.copy(), 0, out, 0)
        return out
    parts = [np.empty_like(out) for _ in range(comm.size - 1)]
    wait_all([comm.irecv(part, r + 1) for r, part in enumerate(parts)])
    for part in parts:
        out += part
    wait_all([comm.isend(out, r) for r in range(1, comm.size)])
    return out


METHODS = {
    "ring": ring_allreduce,
    "MPI Allreduce": lambda comm, buf: comm.allreduce(buf),
    "gather to rank 0": to_root_and_back,
}


def compare(comm, sizes, repeats: int = 3) -> dict:
    """``{(method, n): (seconds, max bytes sent by a rank, results agree with MPI's)}``."""
    out = {}
    for n in sizes:
        buf = np.random.default_rng(comm.rank).standard_normal(n)
        want = comm.allreduce(buf)
        for name, fn in METHODS.items():
            best = float("inf")
            for _ in range(repeats):
                c = CountingComm(comm)
                comm.barrier()
                t0 = time.perf_counter()
                got = fn(c, buf)
                comm.barrier()
                best = min(best, time.perf_counter() - t0)
            sent = max(comm._c.allgather(c.bytes_sent))
            out[(name, n)] = (best, sent, bool(np.allclose(got, want, rtol=1e-12, atol=1e-9)))
    return out
