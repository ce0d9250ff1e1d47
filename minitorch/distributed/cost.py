"""A cost model of gradient all-reduces (12.7) and the bucket choice it grades (12.8).

A message of ``n`` bytes between two ranks costs ``latency + n / bandwidth`` seconds
(``measure_link`` fits both numbers on the machine it runs on). :func:`allreduce_time`
turns that into the time of one all-reduce; :func:`step_time` plays a backward whose
gradients become ready at given times, reducing buckets one after another on one link
as soon as each bucket's last gradient is ready, and says when the step can update.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..core.errors import OpError
from ..exercises import exercise

ALGORITHMS = ("ring", "tree", "naive")


@exercise("12.7")
def allreduce_time(
    algorithm: str, nbytes: float, p: int, latency: float, bandwidth: float
) -> float:
    """Seconds one all-reduce of ``nbytes`` bytes takes on ``p`` ranks, modelled.

    Each message of ``m`` bytes costs ``latency + m / bandwidth``; a rank sends one
    message at a time, and messages of one round travel at once. The algorithms:

    * ``"ring"``: reduce-scatter then all-gather around the ring, ``2 (p - 1)``
      rounds, each sending ``nbytes / p`` bytes (exactly, as a float);
    * ``"tree"``: a binomial tree reduces to rank 0 in ``ceil(log2 p)`` rounds, then
      broadcasts back in as many; every round sends the whole buffer;
    * ``"naive"``: every other rank sends its whole buffer to rank 0, which receives
      them one after another, sums, and sends the sum to each in turn:
      ``2 (p - 1)`` whole-buffer messages through rank 0.

    Returns the modelled time as a float. One rank (``p == 1``) or an empty buffer (``nbytes == 0``) sends
    nothing and costs ``0.0``. Raises ``OpError("allreduce_time", ...)`` naming the
    argument for an unknown ``algorithm``, ``nbytes < 0``, ``p`` that is not an int of
    at least 1 (a bool is not), ``latency < 0`` or ``bandwidth <= 0``. The error's problem
    shows the value that was given (``p=2.0``), and its hint says what would work.

    Example:
        >>> allreduce_time("ring", 4e6, 4, 1e-5, 1e9)   # 6 rounds of 1 MB
        0.00606
        >>> round(allreduce_time("naive", 4e6, 4, 1e-5, 1e9), 9)  # 6 messages of 4 MB
        0.02406

    Hints: count rounds, then what one round sends; ``math.ceil(math.log2(p))`` is a
    tree's depth. Check the arguments before the cases that return early.
    """
    raise NotImplementedError("Exercise 12.7: allreduce_time")


@dataclass(frozen=True)
class LinkModel:
    """A network for the cost model: ``p`` ranks joined by links of ``latency`` seconds a
    message and ``bandwidth`` bytes a second, reducing with ``algorithm``."""

    p: int
    latency: float
    bandwidth: float
    algorithm: str = "ring"

    def allreduce(self, nbytes: float) -> float:
        return allreduce_time(self.algorithm, nbytes, self.p, self.latency, self.bandwidth)


def check_buckets(buckets, n: int, who: str = "step_time") -> list[list[int]]:
    """``buckets`` as lists of ints; OpError unless they cover ``0 .. n - 1`` once each, in
    order: each bucket a run of consecutive gradients, the buckets one after another."""
    if not isinstance(buckets, (list, tuple)):
        raise OpError(who, f"buckets is a {type(buckets).__name__}",
                      "give a list of buckets, each a list of gradient indices")  # fmt: skip
    out, nxt = [], 0
    for k, b in enumerate(buckets):
        if not isinstance(b, (list, tuple)) or not b:
            raise OpError(who, f"bucket {k} is {b!r}, not a non-empty list of indices",
                          "drop empty buckets; each bucket lists gradient indices")  # fmt: skip
        for i in b:
            if not isinstance(i, (int, np.integer)) or isinstance(i, bool) or i != nxt:
                raise OpError(who, f"bucket {k} holds {i!r} where gradient {nxt} comes next",
                              "buckets take the gradients in backward order (the order they "
                              "are ready), each exactly once: [[0, 1], [2], [3, 4]]")  # fmt: skip
            nxt += 1
        out.append([int(i) for i in b])
    if nxt != n:
        raise OpError(who, f"the buckets hold {nxt} gradients of {n}",
                      "every gradient goes in exactly one bucket")  # fmt: skip
    return out


def step_time(buckets, sizes, ready_times, model: LinkModel, backward_end=None) -> float:
    """When the optimizer can update, seconds from the backward's start.

    Gradient ``i`` (``sizes[i]`` bytes) is ready at ``ready_times[i]`` (non-decreasing:
    backward order). A bucket's all-reduce starts when its last gradient is ready and the
    previous bucket's has ended (one link), and lasts ``model.allreduce(bytes)``. The
    update waits for the backward (``backward_end``, by default the last ready time)
    and every reduce. ``step_time(...) - backward_end`` is the exposed communication.
    """
    buckets = check_buckets(buckets, len(sizes))
    if len(ready_times) != len(sizes):
        raise OpError("step_time", f"{len(ready_times)} ready times for {len(sizes)} gradients",
                      "give one ready time per gradient")  # fmt: skip
    end = 0.0
    for b in buckets:
        end = max(end, ready_times[b[-1]]) + model.allreduce(sum(sizes[i] for i in b))
    last = ready_times[-1] if len(ready_times) else 0.0
    return max(end, last if backward_end is None else backward_end)


def measure_link(comm, sizes=(8, 1 << 20), repeats: int = 20) -> tuple[float, float]:
    """``(latency, bandwidth)`` between ranks 0 and 1, fitted from ping-pongs of two sizes.

    Rank 0 sends ``n`` bytes to rank 1, which sends them back, ``repeats`` times per
    size; the fastest round trip of each (load only ever adds time) is two messages.
    The line through the two sizes gives the latency (its value at 0 bytes) and the
    bandwidth (one over its slope). Every rank returns rank 0's figures; ranks past 1 wait.
    """
    if comm.size < 2:
        raise OpError("measure_link", f"the communicator has {comm.size} rank",
                      "start at least 2 ranks (minitorch.distributed.run(2, ...))")  # fmt: skip
    best = []
    for n in sizes:
        buf = np.zeros(max(1, n // 8), np.float64)
        fastest = float("inf")
        for _ in range(repeats):
            comm.barrier()
            t0 = time.perf_counter()
            if comm.rank == 0:
                comm.send(buf, 1)
                comm.recv(buf, 1)
            elif comm.rank == 1:
                comm.recv(buf, 0)
                comm.send(buf, 0)
            fastest = min(fastest, (time.perf_counter() - t0) / 2)
        best.append((buf.nbytes, fastest))
    (n0, t0), (n1, t1) = best
    slope = max((t1 - t0) / (n1 - n0), 1e-15)
    return comm.bcast_object((max(t0 - slope * n0, 0.0), 1.0 / slope))


@exercise("12.8")
def choose_buckets(sizes, ready_times, model: LinkModel) -> list[list[int]]:
    """Group a backward's gradients into all-reduce buckets: the open task of chapter 12.

    ``sizes[i]`` is gradient ``i``'s bytes and ``ready_times[i]`` when the backward makes
    it ready (non-decreasing); ``model`` is a :class:`LinkModel`. Return a list of
    buckets, each a non-empty list of gradient indices, that takes every gradient exactly
    once, in backward order: ``[[0, 1, 2], [3], [4, 5]]`` (:func:`check_buckets` says
    what is valid). Decide only: leave ``sizes`` and ``ready_times`` unchanged.

    Graded on a frozen suite of the course's models (an MLP, the digits CNN, TinyGPT)
    on three networks each: the lower :func:`step_time` of your buckets, the more
    points. One bucket waits for the whole backward; one bucket per gradient pays the
    latency once per gradient; the best choice lies between and depends on the network.

    Example:
        >>> m = LinkModel(p=2, latency=1e-3, bandwidth=1e6)
        >>> choose_buckets([4000, 8, 8], [0.0, 0.006, 0.006], m)  # the small ones together
        [[0], [1, 2]]

    Hints: book chapter 12, "Choosing buckets (12.8)". The time the last bucket ends
    depends only on when the one before it ended and on what it holds.
    """
    raise NotImplementedError("Exercise 12.8: choose_buckets")


def _naive_allreduce(comm, buf: np.ndarray) -> np.ndarray:
    """Gather to rank 0, sum, send the sum back to each rank: the baseline the model's
    ``"naive"`` describes (every message through rank 0)."""
    out = buf.copy()
    if comm.rank == 0:
        part = np.empty_like(buf)
        for r in range(1, comm.size):
            out += comm.recv(part, r)
        for r in range(1, comm.size):
            comm.send(out, r)
    else:
        comm.send(buf, 0)
        comm.recv(out, 0)
    return out


def measure_reductions(comm, sizes, repeats: int = 10) -> dict:
    """The book's measurement, run on every rank: the link (:func:`measure_link`) and the
    fastest time of MPI's ``Allreduce`` and of the naive reduction for each float64
    buffer of ``sizes`` bytes. Rank 0's times: ``{"link": (latency, bandwidth), "mpi":
    [...], "naive": [...]}``; the results are checked against the sum on every rank."""
    link = measure_link(comm)
    times = {"mpi": [], "naive": []}
    for n in sizes:
        buf = np.full(max(1, n // 8), comm.rank + 1.0)
        want = comm.size * (comm.size + 1) / 2
        for name, fn in (("mpi", comm.allreduce), ("naive", lambda b: _naive_allreduce(comm, b))):
            fastest = float("inf")
            for _ in range(repeats):
                comm.barrier()
                t0 = time.perf_counter()
                out = fn(buf)
                fastest = min(fastest, time.perf_counter() - t0)
                if not np.all(out == want):
                    raise AssertionError(f"{name} all-reduce of {n} bytes gave {out[:3]}")
            times[name].append(comm.bcast_object(fastest))
    return {"link": link, **times}
