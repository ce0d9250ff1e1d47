"""Ring all-reduce from point-to-point messages (exercises 12.1 and 12.2).

Each of ``p`` ranks holds a buffer of ``n`` elements and all want the sum. Sending
everything to one rank and back costs that rank ``2 (p - 1) n`` elements; the ring
costs every rank ``2 (p - 1) / p * n``, the least any all-reduce can, whatever ``p``:
cut the buffer into ``p`` chunks, pass partial sums around the ring until each rank
owns one finished chunk (reduce-scatter), then pass the finished chunks around
(all-gather). Horovod and NCCL are built on it.
"""

from __future__ import annotations

import numpy as np  # noqa: F401  (what exercise 12.2 returns)

from ..core.errors import OpError  # noqa: F401  (what the exercises raise)
from ..exercises import exercise


@exercise("12.1")
def ring_chunks(n: int, p: int) -> list:
    """Where each of the ring's ``p`` chunks of a buffer of ``n`` elements starts and ends.

    Returns a new list of ``p + 1`` ints ``b`` with ``b[0] == 0`` and ``b[p] == n``:
    chunk ``i`` is ``buf[b[i]:b[i + 1]]``. The first ``n % p`` chunks hold
    ``n // p + 1`` elements and the others ``n // p``, so no rank's share is more
    than one element larger than another's; when ``n < p`` the last chunks are empty.

    Raises ``OpError("ring_chunks", problem, hint)`` naming ``n`` when it is not an int
    of at least 0, and naming ``p`` when it is not an int of at least 1 (a bool is not
    an int here).

    Example:
        >>> ring_chunks(10, 4)
        [0, 3, 6, 8, 10]

    Hint: ``divmod`` gives both the common size and how many chunks get one more.
    """
    raise NotImplementedError("Exercise 12.1: ring_chunks")


@exercise("12.2")
def ring_allreduce(comm, buf):
    """The elementwise sum of every rank's ``buf``, on every rank, by the ring algorithm.

    ``comm`` is a communicator (``Comm`` over MPI, or ``ThreadComm``): use only its
    point-to-point messages (``send``, ``recv``, ``sendrecv``, ``isend``, ``irecv``),
    never its collectives. With ``p = comm.size``, cut the flattened buffer into the
    chunks of ``ring_chunks(n, p)``. Reduce-scatter: in each of ``p - 1`` steps every
    rank sends one chunk to rank ``(rank + 1) % p`` and adds the chunk it receives from
    rank ``(rank - 1) % p`` into its own copy, so that each rank ends owning one fully
    summed chunk. All-gather: ``p - 1`` more steps pass the summed chunks around the
    ring, copied, not added.

    Returns a new array of ``buf``'s shape and dtype (``buf`` may be any shape, or a
    view); ``buf`` itself is not changed. Every rank returns the same bits. The ranks
    together send exactly ``2 (p - 1) n`` elements, each rank within 1% of the bound
    ``2 (p - 1) / p * n`` for large ``n``, in at most ``2 (p - 1)`` messages. With one
    rank it returns a copy and sends nothing. Any ``n`` works: not divisible by ``p``,
    smaller than ``p``, or 0.

    Raises ``OpError("ring_allreduce", problem, hint)`` naming ``buf`` and its type when it
    is not a numpy array, and ``buf`` and its dtype when that is not float32, float64, int32
    or int64.

    Example:
        >>> # on 3 ranks, each with buf = np.full(4, comm.rank + 1.0)
        >>> ring_allreduce(comm, buf)
        array([6., 6., 6., 6.])

    Hint: work on a contiguous flat copy and receive into a scratch array the size of
    the largest chunk. Which chunk a rank sends at step ``s`` is a function of its rank
    and ``s`` only; draw the ring for ``p = 3`` and follow one chunk. Blocking ``send``
    on every rank before any ``recv`` waits forever: a send completes only when its
    receive is posted.
    """
    raise NotImplementedError("Exercise 12.2: ring_allreduce")
