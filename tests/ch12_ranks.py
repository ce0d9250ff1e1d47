"""Rank functions the chapter-12 launcher tests start under mpiexec."""

import time

import numpy as np

from minitorch.distributed import CountingComm


def ring_shift(comm):
    """Each rank sends its rank to the next one; returns what it got and the bytes it sent."""
    c = CountingComm(comm)
    got = np.empty(3, np.float32)
    c.sendrecv(np.full(3, c.rank, np.float32), (c.rank + 1) % c.size, got, (c.rank - 1) % c.size)
    return got.tolist(), c.bytes_sent, c.messages_sent, c.size


def sleeps_on_rank_1(comm):
    if comm.rank == 1:
        time.sleep(120)
    return comm.rank


def raises_on_rank_1(comm):
    if comm.rank == 1:
        raise ValueError("rank one fails")
    comm.barrier()  # the others wait for it: the launcher must stop them
    return comm.rank


def mpi_allreduce(comm, n):
    return comm.allreduce(np.full(n, comm.rank + 1, np.float64)).tolist()


def ring_against_mpi(comm, ns):
    """The reference ring and MPI's Allreduce on the same buffers: per n, both sums and bytes sent."""
    import solutions.reference.ch12_ring as ref
    from minitorch.distributed import CountingComm

    out = []
    for n in ns:
        x = np.random.default_rng(comm.rank).integers(-9, 9, n).astype(np.float64)
        c = CountingComm(comm)
        out.append((ref.ring_allreduce(c, x), comm.allreduce(x), c.bytes_sent))
    return out
