"""Chapter 12, exercises 12.3-12.5: data-parallel training.

Every rank holds the same model and runs it on its own shard of the batch; after
backward, each parameter's gradient is averaged over the ranks, so every rank
takes the same optimizer step that one process would take on the whole batch.
Averaging one parameter at a time waits for the whole backward and then sends many
small messages; buckets of parameters, in the order their gradients become ready
(``Parameter.register_grad_hook``, chapter 2), are sent as one message each, started
while the rest of backward still runs.
"""

from __future__ import annotations

from typing import Callable

from ..exercises import exercise


def shard(n: int, rank: int, size: int) -> slice:
    """Rank ``rank``'s rows of an ``n``-row batch: contiguous, the first ``n % size`` ranks one more."""
    if not (isinstance(n, int) and n >= 0 and 0 <= rank < size):
        raise ValueError(f"shard: n={n!r}, rank={rank!r}, size={size!r}; "
                         "want n >= 0 and 0 <= rank < size")  # fmt: skip
    base, extra = divmod(n, size)
    start = rank * base + min(rank, extra)
    return slice(start, start + base + (rank < extra))


def shard_scale(n: int, rank: int, size: int) -> float:
    """What a rank multiplies its shard's *mean* loss by, so that the ranks' losses average
    to the whole batch's mean (``count * size / n``; 1 when shards are equal, 0 when empty)."""
    s = shard(n, rank, size)
    return (s.stop - s.start) * size / n if n else 0.0


def ready_order(params, loss) -> list[int]:
    """The indices of ``params`` in the order ``loss.backward()`` finishes their gradients.

    Runs that backward (``.grad`` accumulates as usual: zero it afterwards). A parameter
    that gets no gradient is left out.
    """
    order: list[int] = []
    removers = [p.register_grad_hook(lambda g, i=i: order.append(i)) for i, p in enumerate(params)]
    try:
        loss.backward()
    finally:
        for remove in removers:
            remove()
    return order


@exercise("12.3")
def average_gradients(comm, params: list) -> None:
    """Replace every parameter's ``.grad`` by its average over the ranks of ``comm``.

    ``params`` lists the model's ``Parameter`` s in one order on every rank (their shapes
    and dtypes agree). Afterwards each ``.grad`` holds the sum of the ranks' gradients divided by
    ``comm.size``, in the parameter's dtype, and is the same on every rank. A parameter
    whose ``.grad`` is ``None`` on this rank takes part as zeros, so every parameter ends
    with a ``.grad``. Gradients travel in their parameter's dtype (a float32 one as 4 bytes
    an element). It returns ``None`` (the parameters hold the result).

    Uneven shards: averaging equals training on the whole batch only when each rank's
    loss is its shard's mean loss times ``count * size / n`` (``shard_scale``): a plain
    mean over a shorter shard would weigh its rows more.

    An element of ``params`` that is not a ``Parameter`` raises ``OpError`` naming
    ``average_gradients`` and its index.

    Hint: ``comm.allreduce`` sums a contiguous numpy array across the ranks.

    Hint: one message per parameter is correct; one message for all of them (a flat
    buffer) is faster, and is what 12.5 builds on.
    """
    raise NotImplementedError("Exercise 12.3: average_gradients")


@exercise("12.4")
def make_buckets(params: list, limit_bytes: int, order: list) -> list[list[int]]:
    """Group the indices of ``params`` into buckets to all-reduce, in backward order.

    ``order`` lists every index of ``params`` once, in the order their gradients become
    ready (``ready_order``). Walk it, adding each index to the current bucket while the
    bucket's gradient bytes (``p.size * itemsize`` of each parameter's dtype) stay at most
    ``limit_bytes``; otherwise start a new bucket. A parameter larger than the limit is a
    bucket on its own. Returns a new list of lists: concatenated, they are ``order``.

    ``limit_bytes`` that is not a positive int raises ``OpError`` naming ``limit_bytes``;
    an ``order`` that is not a permutation of ``range(len(params))`` raises ``OpError``
    naming ``order``.

    Example:
        >>> ps = [Parameter(np.zeros(n, np.float32)) for n in (4, 4, 8)]   # 16, 16, 32 bytes
        >>> make_buckets(ps, 32, [2, 1, 0])
        [[2], [1, 0]]
    """
    raise NotImplementedError("Exercise 12.4: make_buckets")


@exercise("12.5")
def reduce_in_buckets(comm, params: list, buckets: list) -> Callable[[], None]:
    """Average gradients bucket by bucket, each bucket sent while backward still runs.

    Call it before ``loss.backward()``; it registers a grad hook on every parameter of
    ``buckets`` and returns ``finish``. During backward, once a bucket's last gradient is
    ready, concatenate its gradients (flattened, in the bucket's order) into one buffer and
    start its non-blocking all-reduce (``comm.iallreduce``). Buckets are posted in their
    list order, on every rank alike: a bucket that is ready waits for the ones before it.

    ``finish()`` posts the buckets not posted yet (a gradient that never came counts as
    zeros), waits for every bucket, and writes each parameter's average (sum over ranks /
    ``comm.size``, in its dtype, its shape) into its ``.grad``; it removes the hooks, so the
    next step calls ``reduce_in_buckets`` again. The result equals ``average_gradients``.

    An element of ``params`` that is not a ``Parameter`` raises ``OpError`` naming
    ``reduce_in_buckets`` and its index, before any hook is registered.

    Hint: keep, per bucket, how many of its gradients are still missing.

    Hint: ``comm.iallreduce(buf, out)`` returns a request; neither buffer may be touched
    until ``request.wait()``.

    Hint: MPI moves a posted collective forward only inside MPI calls; calling ``test()``
    on the posted requests in each hook lets them progress while backward runs.
    """
    raise NotImplementedError("Exercise 12.5: reduce_in_buckets")
