"""Chapter 12 (compile) known-wrong implementations of 12.7 and 12.8: each must lose points.

12.8 is open: any valid bucketing is an answer. Its mutants are the invalid ones (out of
order, a gradient twice or missing, an empty bucket, the inputs changed) and weak ones that
reach only some tiers, or none.
"""

from __future__ import annotations

import math

from minitorch.core.errors import OpError
from solutions.reference import ch12_compile as ref

from . import mutant

# ---------------------------------------------------------------- 12.6


@mutant("12.6", "keeps program order: nothing issued early or waited late")
def overlap_order(deps, starts, waits):
    return list(range(len(deps)))


@mutant("12.6", "moves each start after its last input, but not what it needs before it")
def overlap_order(deps, starts, waits):  # noqa: F811
    rest = [i for i in range(len(deps)) if i not in set(starts)]
    for s in starts:
        last = max(deps[s], default=-1)
        rest.insert(rest.index(last) + 1 if last >= 0 else 0, s)
    return rest


@mutant("12.6", "every wait at the very end, after the nodes that read it")
def overlap_order(deps, starts, waits):  # noqa: F811
    order = ref.overlap_order(deps, starts, waits)
    return [i for i in order if i not in set(waits)] + list(waits)


@mutant("12.6", "the tail built from the first wait: a node needing two waits goes too early")
def overlap_order(deps, starts, waits):  # noqa: F811
    return (
        ref.overlap_order(deps, starts, waits[::-1])
        if len(waits) > 1
        else ref.overlap_order(deps, starts, waits)
    )


@mutant("12.6", "sorts each node's deps in place, latest first")
def overlap_order(deps, starts, waits):  # noqa: F811
    for d in deps:
        d.sort(reverse=True)
    return ref.overlap_order(deps, starts, waits)


@mutant("12.6", "what a start needs in the order found (a walk), not in program order")
def overlap_order(deps, starts, waits):  # noqa: F811
    placed, head = set(), []

    def need(i):
        if i not in placed:
            placed.add(i)
            for d in reversed(deps[i]):
                need(d)
            head.append(i)

    for s in starts:
        need(s)
    rest = ref.overlap_order(deps, [], waits)
    return head + [i for i in rest if i not in placed]


# ---------------------------------------------------------------- 12.7


@mutant("12.7", "a ring round sends the whole buffer (nbytes, not nbytes / p)")
def allreduce_time(algorithm, nbytes, p, latency, bandwidth):
    if algorithm == "ring" and p > 1 and nbytes:
        return 2 * (p - 1) * (latency + nbytes / bandwidth)
    return ref.allreduce_time(algorithm, nbytes, p, latency, bandwidth)


@mutant("12.7", "a ring of p - 1 rounds: the all-gather forgotten")
def allreduce_time(algorithm, nbytes, p, latency, bandwidth):  # noqa: F811
    t = ref.allreduce_time(algorithm, nbytes, p, latency, bandwidth)
    return t / 2 if algorithm == "ring" else t


@mutant("12.7", "the tree's depth rounded down (log2 of 3 ranks is 1 round)")
def allreduce_time(algorithm, nbytes, p, latency, bandwidth):  # noqa: F811
    if algorithm == "tree" and p > 1 and nbytes:
        return 2 * int(math.log2(p)) * (latency + nbytes / bandwidth)
    return ref.allreduce_time(algorithm, nbytes, p, latency, bandwidth)


@mutant("12.7", "an empty buffer still pays the latency of every round")
def allreduce_time(algorithm, nbytes, p, latency, bandwidth):  # noqa: F811
    if nbytes == 0 and p > 1:
        return ref.allreduce_time(algorithm, 1e-300, p, latency, bandwidth)
    return ref.allreduce_time(algorithm, nbytes, p, latency, bandwidth)


@mutant("12.7", "one rank returns the int 0")
def allreduce_time(algorithm, nbytes, p, latency, bandwidth):  # noqa: F811
    t = ref.allreduce_time(algorithm, nbytes, p, latency, bandwidth)
    return 0 if p == 1 else t


@mutant("12.7", "returns 0.0 for one rank before checking the other arguments")
def allreduce_time(algorithm, nbytes, p, latency, bandwidth):  # noqa: F811
    if p == 1 or nbytes == 0:
        return 0.0
    return ref.allreduce_time(algorithm, nbytes, p, latency, bandwidth)


@mutant("12.7", "accepts p=True (a bool is an int in Python)")
def allreduce_time(algorithm, nbytes, p, latency, bandwidth):  # noqa: F811
    return ref.allreduce_time(algorithm, nbytes, int(p) if isinstance(p, bool) else p, latency,
                              bandwidth)  # fmt: skip


@mutant("12.7", "a zero bandwidth divides by zero instead of raising OpError")
def allreduce_time(algorithm, nbytes, p, latency, bandwidth):  # noqa: F811
    if bandwidth == 0:
        return 2 * (p - 1) * (latency + nbytes / p / bandwidth)
    return ref.allreduce_time(algorithm, nbytes, p, latency, bandwidth)


@mutant("12.7", "an unknown algorithm's error names no argument")
def allreduce_time(algorithm, nbytes, p, latency, bandwidth):  # noqa: F811
    if algorithm not in ("ring", "tree", "naive"):
        raise OpError("allreduce_time", "unknown", "use ring, tree or naive")
    return ref.allreduce_time(algorithm, nbytes, p, latency, bandwidth)


# ---------------------------------------------------------------- 12.8


@mutant("12.8", "one bucket: every reduce waits for the whole backward")
def choose_buckets(sizes, ready_times, model):
    return [list(range(len(sizes)))] if sizes else []


@mutant("12.8", "one bucket per gradient: the latency paid once per gradient")
def choose_buckets(sizes, ready_times, model):  # noqa: F811
    return [[i] for i in range(len(sizes))]


@mutant("12.8", "a fixed size limit of half the gradients' bytes, whatever the network")
def choose_buckets(sizes, ready_times, model):  # noqa: F811
    out, acc = [], 0
    for i, n in enumerate(sizes):
        if not out or acc >= sum(sizes) / 2:
            out.append([])
            acc = 0
        out[-1].append(i)
        acc += n
    return out


@mutant("12.8", "buckets in forward order (the first layer's gradients first)")
def choose_buckets(sizes, ready_times, model):  # noqa: F811
    return [b[::-1] for b in ref.choose_buckets(sizes, ready_times, model)[::-1]]


@mutant("12.8", "the largest gradients first: sorted by size")
def choose_buckets(sizes, ready_times, model):  # noqa: F811
    order = sorted(range(len(sizes)), key=lambda i: -sizes[i])
    return [order[k : k + 2] for k in range(0, len(order), 2)]


@mutant("12.8", "an empty bucket left at the end of the list")
def choose_buckets(sizes, ready_times, model):  # noqa: F811
    return ref.choose_buckets(sizes, ready_times, model) + [[]]


@mutant("12.8", "the last gradient forgotten (range(len(sizes) - 1))")
def choose_buckets(sizes, ready_times, model):  # noqa: F811
    return [b for b in ([i for i in c if i < len(sizes) - 1]
                        for c in ref.choose_buckets(sizes, ready_times, model)) if b]  # fmt: skip


@mutant("12.8", "sorts sizes in place while deciding")
def choose_buckets(sizes, ready_times, model):  # noqa: F811
    out = ref.choose_buckets(sizes, ready_times, model)
    sizes.sort()
    return out


@mutant("12.8", "indices as floats (from numpy arithmetic)")
def choose_buckets(sizes, ready_times, model):  # noqa: F811
    return [[float(i) for i in b] for b in ref.choose_buckets(sizes, ready_times, model)]
