"""Reference solutions, Chapter 1 (Tensors). Same names and signatures as the stubs."""

from __future__ import annotations

from minitorch.tensor.indexing import broadcast_index as _broadcast_index
from minitorch.tensor.indexing import index_to_position as _index_to_position
from minitorch.tensor.indexing import shape_error
from minitorch.tensor.indexing import strides_from_shape as _strides_from_shape
from minitorch.tensor.indexing import to_index as _to_index
from minitorch.tensor.views import index_error, permute_error


def index_to_position(index, strides, offset=0):
    pos = offset
    for i, s in zip(index, strides):
        pos += i * s
    return pos


def to_index(ordinal, shape):
    index = [0] * len(shape)
    for d in range(len(shape) - 1, -1, -1):
        ordinal, index[d] = divmod(ordinal, shape[d])
    return tuple(index)


def strides_from_shape(shape):
    strides, run = [], 1
    for n in reversed(shape):
        strides.append(run)
        run *= n
    return tuple(reversed(strides))


def broadcast_shape(shape_a, shape_b):
    n = max(len(shape_a), len(shape_b))
    a = (1,) * (n - len(shape_a)) + tuple(shape_a)
    b = (1,) * (n - len(shape_b)) + tuple(shape_b)
    out = []
    for x, y in zip(a, b):
        if x != y and x != 1 and y != 1:
            raise shape_error("broadcast", shape_a, shape_b)
        out.append(y if x == 1 else x)
    return tuple(out)


def broadcast_index(big_index, big_shape, shape):
    skip = len(big_shape) - len(shape)
    return tuple(0 if n == 1 else big_index[skip + d] for d, n in enumerate(shape))


def permute_view(shape, strides, order):
    order = tuple(order)
    if sorted(order) != list(range(len(shape))):
        raise permute_error(order, len(shape))
    return tuple(shape[d] for d in order), tuple(strides[d] for d in order)


def reshape_view(shape, strides, new_shape):
    expected = _strides_from_shape(shape)
    if all(s == e or n == 1 for s, e, n in zip(strides, expected, shape)):
        return _strides_from_shape(new_shape)
    return None


def slice_view(shape, strides, offset, key):
    new_shape, new_strides = [], []
    for d, k in enumerate(key):
        size, stride = shape[d], strides[d]
        if isinstance(k, slice):
            start, stop, step = k.indices(size)
            new_shape.append(len(range(start, stop, step)))
            new_strides.append(stride * step)
            offset += start * stride
        else:
            i = k + size if k < 0 else k
            if not 0 <= i < size:
                raise index_error(k, d, size)
            offset += i * stride
    rest = len(key)
    return (
        tuple(new_shape) + tuple(shape[rest:]),
        tuple(new_strides) + tuple(strides[rest:]),
        offset,
    )


def tensor_map(fn, out, a):
    a_store, o_store = a.storage, out.storage
    for k in range(out.size):
        idx = _to_index(k, out.shape)
        a_idx = _broadcast_index(idx, out.shape, a.shape)
        o_store[_index_to_position(idx, out.strides, out.offset)] = fn(
            a_store[_index_to_position(a_idx, a.strides, a.offset)]
        )


def tensor_zip(fn, out, a, b):
    for k in range(out.size):
        idx = _to_index(k, out.shape)
        pa = _index_to_position(_broadcast_index(idx, out.shape, a.shape), a.strides, a.offset)
        pb = _index_to_position(_broadcast_index(idx, out.shape, b.shape), b.strides, b.offset)
        out.storage[_index_to_position(idx, out.strides, out.offset)] = fn(
            a.storage[pa], b.storage[pb]
        )


def tensor_reduce(fn, start, out, a, axis):
    n, step = a.shape[axis], a.strides[axis]
    for k in range(out.size):
        idx = _to_index(k, out.shape)
        pos = _index_to_position(idx, a.strides, a.offset)
        acc = start
        for _ in range(n):
            acc = fn(acc, a.storage[pos])
            pos += step
        out.storage[_index_to_position(idx, out.strides, out.offset)] = acc


def map_contiguous(fn, out, a):
    n = out.size
    values = a.storage[a.offset : a.offset + n].tolist()
    out.storage[out.offset : out.offset + n] = [fn(x) for x in values]
