"""Chapter 12 (ring) known-wrong implementations."""

from __future__ import annotations

import numpy as np

from solutions.reference import ch12_ring as ref

from . import mutant

# ---------------------------------------------------------------- 12.1 ring_chunks


@mutant("12.1", "equal chunks of n // p, the remainder all in the last chunk")
def chunks_remainder_last(n, p):
    ref.ring_chunks(n, p)  # the same errors
    return [i * (n // p) for i in range(p)] + [n]


@mutant("12.1", "chunks of ceil(n / p), cut at n: the last ranks get little or nothing")
def chunks_ceil(n, p):
    ref.ring_chunks(n, p)
    size = -(-n // p)
    return [min(i * size, n) for i in range(p + 1)]


@mutant("12.1", "isinstance(n, int) lets a bool through")
def chunks_bool_is_int(n, p):
    if isinstance(n, int) and not isinstance(p, bool):
        n = int(n)
    return ref.ring_chunks(n, p)


@mutant("12.1", "no check of p: divmod by zero is a ZeroDivisionError, not the OpError")
def chunks_p_unchecked(n, p):
    if type(n) is not int or n < 0:
        return ref.ring_chunks(n, p)
    size, extra = divmod(n, p)
    return [0, *np.cumsum([size + (i < extra) for i in range(p)]).tolist()]


# ---------------------------------------------------------------- 12.2 ring_allreduce


def _summed_on_root(comm, flat):
    """Rank 0 receives everyone's buffer, sums, and sends the sum back."""
    if comm.rank == 0:
        scratch = np.empty_like(flat)
        for r in range(1, comm.size):
            comm.recv(scratch, r)
            flat += scratch
        for r in range(1, comm.size):
            comm.send(flat, r)
    else:
        comm.send(flat.copy(), 0)
        comm.recv(flat, 0)
    return flat


@mutant("12.2", "gather to rank 0, sum, send back: rank 0 sends (p-1) n, not 2(p-1)/p n")
def allreduce_gather_to_root(comm, buf):
    if not isinstance(buf, np.ndarray) or buf.dtype.type not in ref.SUMMABLE:
        return ref.ring_allreduce(comm, buf)
    return _summed_on_root(comm, np.array(buf, copy=True).reshape(-1)).reshape(buf.shape)


@mutant("12.2", "every rank sends its whole buffer to every other and sums: (p-1) n per rank")
def allreduce_everyone_to_everyone(comm, buf):
    if not isinstance(buf, np.ndarray) or buf.dtype.type not in ref.SUMMABLE:
        return ref.ring_allreduce(comm, buf)
    mine = np.ascontiguousarray(buf).reshape(-1)
    parts = [None] * comm.size
    for r in range(comm.size):
        if r == comm.rank:
            parts[r] = mine
            continue
        got = np.empty_like(mine)
        comm.sendrecv(mine, r, got, r)
        parts[r] = got
    out = parts[0].copy()
    for x in parts[1:]:
        out += x
    return out.reshape(buf.shape)


def _ring(comm, buf, gather_adds=False, start_at_zero=False, in_place=False, blocking=False):
    rank, p = comm.rank, comm.size
    flat = (
        np.ascontiguousarray(buf).reshape(-1) if in_place else np.array(buf, copy=True).reshape(-1)
    )
    if start_at_zero:
        flat = np.zeros(flat.size, flat.dtype) + flat  # 0.0 + -0.0 is +0.0
    b = ref.ring_chunks(flat.size, p)
    chunk = [flat[b[i] : b[i + 1]] for i in range(p)]
    scratch = np.empty(max(b[i + 1] - b[i] for i in range(p)), flat.dtype)
    right, left = (rank + 1) % p, (rank - 1) % p

    def step(send, recv):
        if blocking:
            comm.send(send, right)
            comm.recv(recv, left)
        else:
            comm.sendrecv(send, right, recv, left)

    with np.errstate(all="ignore"):
        for s in range(p - 1):
            got = chunk[(rank - s - 1) % p]
            step(chunk[(rank - s) % p], scratch[: got.size])
            got += scratch[: got.size]
        for s in range(p - 1):
            got = chunk[(rank - s) % p]
            if gather_adds:
                step(chunk[(rank + 1 - s) % p], scratch[: got.size])
                got += scratch[: got.size]
            else:
                step(chunk[(rank + 1 - s) % p], got)
    return flat.reshape(buf.shape)


def _checked(buf):
    return isinstance(buf, np.ndarray) and buf.dtype.type in ref.SUMMABLE


@mutant("12.2", "the all-gather adds the chunks it receives instead of copying them")
def allreduce_gather_adds(comm, buf):
    return _ring(comm, buf, gather_adds=True) if _checked(buf) else ref.ring_allreduce(comm, buf)


@mutant("12.2", "the sum starts from np.zeros: a sum of -0.0s comes out +0.0")
def allreduce_from_zeros(comm, buf):
    return _ring(comm, buf, start_at_zero=True) if _checked(buf) else ref.ring_allreduce(comm, buf)


@mutant("12.2", "sums in buf itself: the caller's buffer is changed")
def allreduce_in_place(comm, buf):
    return _ring(comm, buf, in_place=True) if _checked(buf) else ref.ring_allreduce(comm, buf)


@mutant("12.2", "blocking send then recv on every rank: every send waits for a receive")
def allreduce_send_then_recv(comm, buf):
    return _ring(comm, buf, blocking=True) if _checked(buf) else ref.ring_allreduce(comm, buf)


@mutant("12.2", "no check of buf: a list or a complex array gets the communicator's error or none")
def allreduce_unchecked(comm, buf):
    return _ring(comm, np.asarray(buf))
