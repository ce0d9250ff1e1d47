"""Chapter 12 references: ring all-reduce (12.1, 12.2)."""

from __future__ import annotations

import numpy as np

from minitorch.core.errors import OpError

__all__ = ["ring_allreduce", "ring_chunks"]


def _whole(name: str, value, least: int) -> int:
    if type(value) not in (int, np.int32, np.int64) or value < least:
        raise OpError("ring_chunks", f"{name}={value!r} is not an int of at least {least}",
                      f"give {name} as an int >= {least}")  # fmt: skip
    return int(value)


def ring_chunks(n: int, p: int) -> list:
    n, p = _whole("n", n, 0), _whole("p", p, 1)
    size, extra = divmod(n, p)
    bounds = [0]
    for i in range(p):
        bounds.append(bounds[-1] + size + (1 if i < extra else 0))
    return bounds


SUMMABLE = (np.float32, np.float64, np.int32, np.int64)


def ring_allreduce(comm, buf):
    if not isinstance(buf, np.ndarray):
        raise OpError("ring_allreduce", f"buf is a {type(buf).__name__}, not a numpy array",
                      "pass a numpy array (np.asarray(x))")  # fmt: skip
    if buf.dtype.type not in SUMMABLE:
        raise OpError("ring_allreduce", f"buf has dtype {buf.dtype}",
                      "use float32, float64, int32 or int64")  # fmt: skip
    rank, p = comm.rank, comm.size
    out = buf.flatten()  # a contiguous copy, whatever buf's layout
    b = ring_chunks(out.size, p)
    chunk = [out[b[i] : b[i + 1]] for i in range(p)]
    scratch = np.empty_like(chunk[0])  # the first chunk is a largest one
    right, left = (rank + 1) % p, (rank - 1) % p
    for s in range(p - 1):  # reduce-scatter: rank ends owning chunk (rank + 1) % p
        send, got = chunk[(rank - s) % p], chunk[(rank - s - 1) % p]
        comm.sendrecv(send, right, scratch[: got.size], left)
        got += scratch[: got.size]
    for s in range(p - 1):  # all-gather: the finished chunks go round, copied
        send, got = chunk[(rank + 1 - s) % p], chunk[(rank - s) % p]
        comm.sendrecv(send, right, got, left)
    return out.reshape(buf.shape)
