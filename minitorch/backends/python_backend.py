"""The ``python`` backend: every kernel runs through the chapter-1 loops.

Elementwise ops map or zip their scalar formula; reductions fold one axis at a
time; matmul is a zip (multiply) followed by a reduce (sum). Slow on purpose:
it is the reference point that shows what compiled kernels buy.
"""

from __future__ import annotations

import operator

import numpy as np

from ..core.registry import OpDef, OpKind, register_kernel
from ..tensor.data import TensorData
from ..tensor.indexing import (
    broadcast_index,
    broadcast_shape,
    index_to_position,
    strides_from_shape,
    to_index,
)
from ..tensor.loops import map_contiguous, tensor_map, tensor_reduce, tensor_zip
from .base import Backend, register_backend


def _map(fn, a: TensorData, out) -> TensorData:
    result = TensorData.empty(out.shape, out.dtype)
    if a.is_contiguous() and a.shape == out.shape:
        map_contiguous(fn, result, a)
    else:
        tensor_map(fn, result, a)
    return result


def _zip(fn, a: TensorData, b: TensorData, out) -> TensorData:
    result = TensorData.empty(out.shape, out.dtype)
    tensor_zip(fn, result, a, b)
    return result


def _fold(fn, start, a: TensorData, axis, dtype) -> TensorData:
    """Reduce ``axis`` (a tuple) one dimension at a time, keeping dims; always a fresh contiguous result."""
    if not axis:  # nothing to fold, but callers read the result as contiguous: copy the view
        result = TensorData.empty(a.shape, dtype)
        tensor_map(lambda x: x, result, a)
        return result
    for ax in axis:
        shape = tuple(1 if d == ax else n for d, n in enumerate(a.shape))
        result = TensorData.empty(shape, dtype)
        tensor_reduce(fn, start, result, a, ax)
        a = result
    return a


class PythonBackend(Backend):
    name = "python"

    def generic(self, op: OpDef):
        fn = op.scalar
        if fn is None:
            return None
        if op.kind is OpKind.ELEMENTWISE:
            return lambda a, out: _map(fn, a, out)
        if op.kind is OpKind.BROADCAST and op.num_inputs == 2:
            return lambda a, b, out: _zip(fn, a, b, out)
        start = {"sum": 0, "max": float("-inf"), "min": float("inf")}.get(op.name)
        if op.kind is OpKind.REDUCE and start is not None:

            def reduce_kernel(a, out, axis, keepdims):
                if a.size == 0:  # an empty sum: nothing to fold
                    return _map(lambda x: x, _const(start, out), out)
                r = _fold(fn, start, a, axis, out.dtype)
                return TensorData(r.storage, out.shape, _strides(out.shape), 0)

            return reduce_kernel
        return None

    def copy(self, data: TensorData) -> TensorData:
        result = TensorData.empty(data.shape, data.dtype)
        tensor_map(lambda x: x, result, data)
        return result


def _const(value, spec) -> TensorData:
    return TensorData(np.full(1, value, dtype=spec.dtype), spec.shape, (0,) * len(spec.shape), 0)


def _strides(shape):
    return tuple(strides_from_shape(shape))


register_backend(PythonBackend())


@register_kernel("cast", "python")
def cast(a, out, dtype):
    conv = {"b": bool, "i": int, "f": float}[dtype.kind]
    return _map(conv, a, out)


@register_kernel("mean", "python")
def mean(a, out, axis, keepdims):
    count = 1
    for d in axis:
        count *= a.shape[d]
    total = _fold(operator.add, 0.0, a, axis, out.dtype)
    total = TensorData(total.storage, out.shape, _strides(out.shape), 0)
    return _map(lambda x: x / count if count else float("nan"), total, out)


@register_kernel("where", "python")
def where(c, a, b, out):
    # A three-input zip, written out with the chapter's index helpers.
    result = TensorData.empty(out.shape, out.dtype)
    for k in range(result.size):
        idx = to_index(k, out.shape)
        pos = [
            index_to_position(broadcast_index(idx, out.shape, x.shape), x.strides, x.offset)
            for x in (c, a, b)
        ]
        pick = a.storage[pos[1]] if c.storage[pos[0]] else b.storage[pos[2]]
        result.storage[k] = pick
    return result


@register_kernel("argmax", "python")
def argmax(a, out, axis, keepdims):
    (ax,) = axis
    n, step = a.shape[ax], a.strides[ax]
    shape = tuple(1 if d == ax else m for d, m in enumerate(a.shape))
    result = TensorData.empty(shape, out.dtype)
    for k in range(result.size):
        pos = index_to_position(to_index(k, shape), a.strides, a.offset)
        best, best_i = a.storage[pos], 0
        for i in range(1, n):
            pos += step
            v = a.storage[pos]
            if v > best or (v != v and best == best):  # the first NaN wins, as in numpy
                best, best_i = v, i
        result.storage[k] = best_i
    return TensorData(result.storage, out.shape, _strides(out.shape), 0)


@register_kernel("matmul", "python")
def matmul(a, b, out):
    # (..., n, k, 1) * (..., 1, k, m) summed over k: a zip and a reduce.
    a3 = TensorData(a.storage, a.shape + (1,), a.strides + (0,), a.offset)
    b3 = TensorData(
        b.storage,
        b.shape[:-2] + (1,) + b.shape[-2:],
        b.strides[:-2] + (0,) + b.strides[-2:],
        b.offset,
    )
    prod_shape = broadcast_shape(a3.shape, b3.shape)
    prod = TensorData.empty(prod_shape, out.dtype)
    tensor_zip(operator.mul, prod, a3, b3)
    summed = _fold(operator.add, 0, prod, (len(prod_shape) - 2,), out.dtype)
    return TensorData(summed.storage, out.shape, _strides(out.shape), 0)
