"""Chapter 12 (ddp) known-wrong implementations: 12.3-12.5."""

from __future__ import annotations

import numpy as np

from solutions.reference import ch12_ddp as ref

from . import mutant

# ---------------------------------------------------------------- 12.3 average_gradients


def _average(comm, params, *, divide=True, dtype=None, skip_none=False, check=True):
    if check:
        ref._check_params("average_gradients", params)
    for p in params:
        if p.grad is None and skip_none:
            continue
        g = ref._grad(p)
        total = comm.allreduce(g if dtype is None else g.astype(dtype))
        ref._write_back([p], [0], total, comm.size if divide else 1)


@mutant("12.3", "the sum over the ranks, never divided by their number")
def average_gradients_sum(comm, params):
    _average(comm, params, divide=False)


@mutant("12.3", "one float32 buffer for every dtype: float64 gradients lose their last digits")
def average_gradients_float32(comm, params):
    _average(comm, params, dtype=np.float32)


@mutant("12.3", "a parameter without a gradient is skipped and keeps None")
def average_gradients_skip_none(comm, params):
    _average(comm, params, skip_none=True)


@mutant("12.3", "params not checked: a plain tensor is averaged like a parameter")
def average_gradients_unchecked(comm, params):
    _average(comm, params, check=False)


# ---------------------------------------------------------------- 12.4 make_buckets


def _buckets(params, limit_bytes, order, *, fits=lambda used, limit: used <= limit, itemsize=None,
             add_first=False):  # fmt: skip
    buckets, current, used = [], [], 0
    for i in order:
        nbytes = params[i].size * (itemsize or params[i].numpy().dtype.itemsize)
        if add_first:  # the limit checked after adding: the bucket that crosses it keeps i
            current.append(i)
            used += nbytes
            if used > limit_bytes:
                buckets.append(current)
                current, used = [], 0
            continue
        if current and not fits(used + nbytes, limit_bytes):
            buckets.append(current)
            current, used = [], 0
        current.append(i)
        used += nbytes
    return buckets + ([current] if current else [])


def _checked(params, limit_bytes, order):
    ref.make_buckets(params, limit_bytes, order)  # the errors, as the reference raises them


@mutant("12.4", "a bucket exactly at the limit is closed early (< for <=)")
def make_buckets_strict(params, limit_bytes, order):
    _checked(params, limit_bytes, order)
    return _buckets(params, limit_bytes, order, fits=lambda used, limit: used < limit)


@mutant("12.4", "every gradient counted as 4 bytes: float64 buckets hold twice the limit")
def make_buckets_itemsize4(params, limit_bytes, order):
    _checked(params, limit_bytes, order)
    return _buckets(params, limit_bytes, order, itemsize=4)


@mutant("12.4", "the parameters' order, not backward's")
def make_buckets_param_order(params, limit_bytes, order):
    _checked(params, limit_bytes, order)
    return _buckets(params, limit_bytes, sorted(order))


@mutant("12.4", "the limit checked after adding: the bucket that crosses it goes over")
def make_buckets_check_after(params, limit_bytes, order):
    _checked(params, limit_bytes, order)
    return _buckets(params, limit_bytes, order, add_first=True)


@mutant("12.4", "no checks: a zero limit gives a bucket per parameter, a short order fewer buckets")
def make_buckets_unchecked(params, limit_bytes, order):
    return _buckets(params, limit_bytes, order)


# ---------------------------------------------------------------- 12.5 reduce_in_buckets


def _reducer(comm, params, buckets, *, at_finish=False, any_order=False, early=0, divide=True):
    ref._check_params("reduce_in_buckets", params)
    grads, posted, done = {}, [], set()
    missing = [len(b) - early for b in buckets]
    where = {i: k for k, b in enumerate(buckets) for i in b}

    def post(k):
        done.add(k)
        for dtype, idx in ref._groups(params, buckets[k]):
            buf = np.concatenate(
                [grads.get(i, np.zeros(params[i].size, dtype)) for i in idx] or [np.zeros(0, dtype)]
            )
            out = np.empty_like(buf)
            posted.append((idx, comm.iallreduce(buf, out), out, buf))

    def hook(i, g):
        grads[i] = np.ascontiguousarray(g.numpy(), dtype=params[i].numpy().dtype).reshape(-1)
        missing[where[i]] -= 1
        if at_finish:
            return
        if any_order:
            if missing[where[i]] <= 0 and where[i] not in done:
                post(where[i])
            return
        while len(done) < len(buckets) and missing[len(done)] <= 0:
            post(len(done))

    removers = [params[i].register_grad_hook(lambda g, i=i: hook(i, g)) for b in buckets for i in b]

    def finish():
        for r in removers:
            r()
        for k in range(len(buckets)):
            if k not in done:
                post(k)
        for idx, request, out, _buf in posted:
            request.wait()
            ref._write_back(params, idx, out, comm.size if divide else 1)

    return finish


@mutant("12.5", "every bucket posted in finish(): right values, no overlap with backward")
def reduce_in_buckets_at_finish(comm, params, buckets):
    return _reducer(comm, params, buckets, at_finish=True)


@mutant("12.5", "a ready bucket posted at once, before the buckets listed ahead of it")
def reduce_in_buckets_any_order(comm, params, buckets):
    return _reducer(comm, params, buckets, any_order=True)


@mutant("12.5", "a bucket posted one gradient early: its last gradient is sent as zeros")
def reduce_in_buckets_early(comm, params, buckets):
    return _reducer(comm, params, buckets, early=1)


@mutant("12.5", "the bucket's sum written back, not divided by the number of ranks")
def reduce_in_buckets_sum(comm, params, buckets):
    return _reducer(comm, params, buckets, divide=False)
