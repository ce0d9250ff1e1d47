"""Chapter 12 (compile) references: the cost model (12.7) and the bucket choice (12.8)."""

from __future__ import annotations

import math

from minitorch.core.errors import OpError
from minitorch.distributed.cost import ALGORITHMS


def allreduce_time(algorithm, nbytes, p, latency, bandwidth):
    def bad(arg, problem, hint):
        return OpError("allreduce_time", f"{arg}={problem}", hint)

    if algorithm not in ALGORITHMS:
        raise bad("algorithm", repr(algorithm), "use 'ring', 'tree' or 'naive'")
    if isinstance(p, bool) or not isinstance(p, int) or p < 1:
        raise bad("p", f"{p!r} is not a number of ranks", "give an int of at least 1")
    if not nbytes >= 0:
        raise bad("nbytes", f"{nbytes!r} is not a size", "give a number of bytes, 0 or more")
    if not latency >= 0:
        raise bad("latency", f"{latency!r} is negative", "give seconds per message, 0 or more")
    if not bandwidth > 0:
        raise bad("bandwidth", f"{bandwidth!r} is not positive", "give bytes per second, above 0")
    if p == 1 or nbytes == 0:
        return 0.0
    if algorithm == "ring":
        return 2 * (p - 1) * (latency + nbytes / p / bandwidth)
    if algorithm == "tree":
        return 2 * math.ceil(math.log2(p)) * (latency + nbytes / bandwidth)
    return 2 * (p - 1) * (latency + nbytes / bandwidth)


def choose_buckets(sizes, ready_times, model):
    """Exact, by dynamic programming over where the last bucket starts: the end of a
    bucket's reduce only grows with the end of the one before, so the best first ``j``
    gradients end earliest when their own buckets do."""
    n = len(sizes)
    best, cut = [0.0] + [math.inf] * n, [0] * (n + 1)
    for j in range(1, n + 1):
        nbytes = 0
        for i in range(j - 1, -1, -1):  # the last bucket is i .. j-1
            nbytes += sizes[i]
            end = max(best[i], ready_times[j - 1]) + model.allreduce(nbytes)
            if end < best[j]:
                best[j], cut[j] = end, i
    buckets, j = [], n
    while j > 0:
        buckets.append(list(range(cut[j], j)))
        j = cut[j]
    return buckets[::-1]


def overlap_order(deps, starts, waits):
    n = len(deps)
    users = [[] for _ in range(n)]
    for i, ds in enumerate(deps):
        for d in ds:
            users[d].append(i)

    def closure(root, edges):
        seen, todo = {root}, [root]
        while todo:
            for j in edges[todo.pop()]:
                if j not in seen:
                    seen.add(j)
                    todo.append(j)
        return seen

    placed, head = set(), []
    for s in starts:
        new = sorted(closure(s, deps) - placed)
        head += new
        placed.update(new)
    tail = []
    for w in reversed(waits):
        new = sorted(closure(w, users) - placed)
        tail = new + tail  # the wait is the first of them: it needs nothing among them
        placed.update(new)
    return head + [i for i in range(n) if i not in placed] + tail
