"""Chapter 12 (ddp) references: gradient averaging, buckets in backward order, overlap."""

from __future__ import annotations

import numpy as np

from minitorch.core.errors import OpError
from minitorch.core.tensor import Tensor
from minitorch.nn import Parameter

__all__ = ["average_gradients", "make_buckets", "reduce_in_buckets"]


def _grad(p) -> np.ndarray:
    """This rank's gradient of ``p`` as a flat array in ``p``'s dtype (zeros when it has none)."""
    dtype = p.numpy().dtype
    if p.grad is None:
        return np.zeros(p.size, dtype)
    return np.ascontiguousarray(p.grad.numpy(), dtype=dtype).reshape(-1)


def _write_back(params, indices, total: np.ndarray, size: int) -> None:
    """Split a summed flat buffer into the parameters' ``.grad``, divided by ``size``."""
    at = 0
    for i in indices:
        p = params[i]
        part = total[at : at + p.size] / size
        p.grad = Tensor(part.reshape(p.shape))  # the buffer is in p's dtype already
        at += p.size


def _check_params(op, params):
    for i, p in enumerate(params):
        if not isinstance(p, Parameter):
            raise OpError(op, f"params[{i}] is a {type(p).__name__}, not a Parameter",
                          "pass model.parameters() (the same list on every rank)")  # fmt: skip


def _groups(params, indices):
    """``indices`` split by dtype (one buffer per dtype), keeping their order."""
    by = {}
    for i in indices:
        by.setdefault(params[i].numpy().dtype, []).append(i)
    return list(by.items())


def average_gradients(comm, params):
    _check_params("average_gradients", params)
    for _dtype, idx in _groups(params, range(len(params))):
        flat = np.concatenate([_grad(params[i]) for i in idx])  # a group is never empty
        _write_back(params, idx, comm.allreduce(flat), comm.size)


def make_buckets(params, limit_bytes, order):
    if (
        isinstance(limit_bytes, bool)
        or not isinstance(limit_bytes, (int, np.integer))
        or limit_bytes <= 0
    ):
        raise OpError("make_buckets", f"limit_bytes={limit_bytes!r} is not a positive int",
                      "give the most bytes of gradient one bucket may hold, e.g. 1 << 20")  # fmt: skip
    order = list(order)
    if sorted(order) != list(range(len(params))) or not all(
        isinstance(i, (int, np.integer)) for i in order
    ):
        raise OpError("make_buckets", f"order={order!r} is not a permutation of range({len(params)})",
                      "list every parameter's index once, as ready_order returns them")  # fmt: skip
    buckets, current, used = [], [], 0
    for i in order:
        nbytes = params[i].size * params[i].numpy().dtype.itemsize
        if current and used + nbytes > limit_bytes:
            buckets.append(current)
            current, used = [], 0
        current.append(int(i))
        used += nbytes
    if current:
        buckets.append(current)
    return buckets


def reduce_in_buckets(comm, params, buckets):
    _check_params("reduce_in_buckets", params)
    grads = {}  # index -> this backward's gradient, flat
    missing = [len(b) for b in buckets]
    where = {i: k for k, b in enumerate(buckets) for i in b}
    posted = []  # per posted bucket: (indices, request, out, buf) per dtype; buf lives till wait

    def post(k):
        sends = []
        for dtype, idx in _groups(params, buckets[k]):
            buf = np.concatenate([grads.get(i, np.zeros(params[i].size, dtype)) for i in idx])
            out = np.empty_like(buf)
            sends.append((idx, comm.iallreduce(buf, out), out, buf))
        posted.append(sends)

    def hook(i, g):
        grads[i] = np.ascontiguousarray(g.numpy()).reshape(-1)  # the hook gives p's dtype
        missing[where[i]] -= 1
        while len(posted) < len(buckets) and missing[len(posted)] == 0:
            post(len(posted))
        for sends in posted:  # MPI advances a posted collective only inside MPI calls
            for _idx, request, _out, _buf in sends:
                request.test()

    removers = [params[i].register_grad_hook(lambda g, i=i: hook(i, g)) for b in buckets for i in b]

    def finish():
        for remove in removers:
            remove()
        while len(posted) < len(buckets):
            post(len(posted))
        for sends in posted:
            for idx, request, out, _buf in sends:
                request.wait()
                _write_back(params, idx, out, comm.size)

    return finish
