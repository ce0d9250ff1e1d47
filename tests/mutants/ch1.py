"""Known-wrong implementations of Chapter 1 (tensors, views, strided loops)."""

from __future__ import annotations

from minitorch.core.errors import OpError
from minitorch.tensor.indexing import broadcast_index as _broadcast_index
from minitorch.tensor.indexing import index_to_position as _index_to_position
from minitorch.tensor.indexing import shape_error
from minitorch.tensor.indexing import strides_from_shape as _strides_from_shape
from minitorch.tensor.indexing import to_index as _to_index
from minitorch.tensor.views import index_error, permute_error

from . import mutant

# ---------------------------------------------------------------- 1.1 index_to_position


@mutant("1.1", "offset ignored")
def index_to_position(index, strides, offset=0):
    return sum(i * s for i, s in zip(index, strides))


@mutant("1.1", "strides read in reverse order")
def index_to_position_reversed(index, strides, offset=0):
    return offset + sum(i * s for i, s in zip(index, reversed(tuple(strides))))


@mutant("1.1", "negative strides taken as their absolute value")
def index_to_position_abs(index, strides, offset=0):
    return offset + sum(i * abs(s) for i, s in zip(index, strides))


@mutant("1.1", "the last dimension's stride assumed to be 1")
def index_to_position_unit_last(index, strides, offset=0):
    strides = tuple(strides)[:-1] + (1,) if len(strides) else ()
    return offset + sum(i * s for i, s in zip(index, strides))


# ---------------------------------------------------------------- 1.2 to_index


@mutant("1.2", "column-major: the first dimension varies fastest")
def to_index(ordinal, shape):
    index = []
    for n in shape:
        ordinal, i = divmod(ordinal, n)
        index.append(i)
    return tuple(index)


@mutant("1.2", "off by one: divides by the next dimension's size")
def to_index_shifted(ordinal, shape):
    index = [0] * len(shape)
    for d in range(len(shape) - 1, -1, -1):
        n = shape[d - 1] if d > 0 else shape[d]
        ordinal, index[d] = divmod(ordinal, n)
    return tuple(index)


@mutant("1.2", "forgets to divide: every coordinate is ordinal % size")
def to_index_no_divide(ordinal, shape):
    return tuple(ordinal % n for n in shape)


# ---------------------------------------------------------------- 1.3 strides_from_shape


@mutant("1.3", "strides not reversed: the first dimension gets stride 1")
def strides_from_shape(shape):
    strides, run = [], 1
    for n in reversed(shape):
        strides.append(run)
        run *= n
    return tuple(strides)


@mutant("1.3", "includes the dimension's own size in its stride")
def strides_from_shape_inclusive(shape):
    strides, run = [], 1
    for n in reversed(shape):
        run *= n
        strides.append(run)
    return tuple(reversed(strides))


@mutant("1.3", "size-1 dimensions get stride 0")
def strides_from_shape_zero_ones(shape):
    strides, run = [], 1
    for n in reversed(shape):
        strides.append(0 if n == 1 else run)
        run *= n
    return tuple(reversed(strides))


@mutant("1.3", "column-major strides: the first dimension gets stride 1")
def strides_from_shape_column_major(shape):
    strides, run = [], 1
    for n in shape:
        strides.append(run)
        run *= n
    return tuple(strides)


# ---------------------------------------------------------------- 1.4 broadcast_shape


@mutant("1.4", "pads the shorter shape on the right instead of the left")
def broadcast_shape(shape_a, shape_b):
    n = max(len(shape_a), len(shape_b))
    a = tuple(shape_a) + (1,) * (n - len(shape_a))
    b = tuple(shape_b) + (1,) * (n - len(shape_b))
    out = []
    for x, y in zip(a, b):
        if x != y and x != 1 and y != 1:
            raise shape_error("broadcast", shape_a, shape_b)
        out.append(y if x == 1 else x)
    return tuple(out)


@mutant("1.4", "takes the larger size: (0, 1) broadcasts to 1, and no error")
def broadcast_shape_max(shape_a, shape_b):
    n = max(len(shape_a), len(shape_b))
    a = (1,) * (n - len(shape_a)) + tuple(shape_a)
    b = (1,) * (n - len(shape_b)) + tuple(shape_b)
    return tuple(max(x, y) for x, y in zip(a, b))


@mutant("1.4", "size 1 against size 0 gives 1")
def broadcast_shape_zero(shape_a, shape_b):
    n = max(len(shape_a), len(shape_b))
    a = (1,) * (n - len(shape_a)) + tuple(shape_a)
    b = (1,) * (n - len(shape_b)) + tuple(shape_b)
    out = []
    for x, y in zip(a, b):
        if x != y and x != 1 and y != 1:
            raise shape_error("broadcast", shape_a, shape_b)
        out.append(max(x, y))
    return tuple(out)


@mutant("1.4", "raises a plain ValueError instead of OpError")
def broadcast_shape_valueerror(shape_a, shape_b):
    n = max(len(shape_a), len(shape_b))
    a = (1,) * (n - len(shape_a)) + tuple(shape_a)
    b = (1,) * (n - len(shape_b)) + tuple(shape_b)
    out = []
    for x, y in zip(a, b):
        if x != y and x != 1 and y != 1:
            raise ValueError(f"cannot broadcast {shape_a} and {shape_b}")
        out.append(y if x == 1 else x)
    return tuple(out)


# ---------------------------------------------------------------- 1.5 broadcast_index


@mutant("1.5", "returns the big index unchanged: broadcasting ignored")
def broadcast_index(big_index, big_shape, shape):
    return tuple(big_index)


@mutant("1.5", "keeps the leading coordinates instead of the trailing ones")
def broadcast_index_leading(big_index, big_shape, shape):
    return tuple(0 if n == 1 else big_index[d] for d, n in enumerate(shape))


@mutant("1.5", "drops the leading dims but forgets size-1 dims")
def broadcast_index_no_ones(big_index, big_shape, shape):
    skip = len(big_shape) - len(shape)
    return tuple(big_index[skip:])


# ---------------------------------------------------------------- 1.6 permute_view


@mutant("1.6", "applies the inverse permutation")
def permute_view(shape, strides, order):
    order = tuple(order)
    if sorted(order) != list(range(len(shape))):
        raise permute_error(order, len(shape))
    inverse = [0] * len(order)
    for i, d in enumerate(order):
        inverse[d] = i
    return tuple(shape[d] for d in inverse), tuple(strides[d] for d in inverse)


@mutant("1.6", "permutes the shape but not the strides")
def permute_view_shape_only(shape, strides, order):
    order = tuple(order)
    if sorted(order) != list(range(len(shape))):
        raise permute_error(order, len(shape))
    return tuple(shape[d] for d in order), tuple(strides)


@mutant("1.6", "does not check the order is a permutation")
def permute_view_no_check(shape, strides, order):
    order = tuple(order)
    return tuple(shape[d] for d in order), tuple(strides[d] for d in order)


@mutant("1.6", "checks only the length of the order; a repeated axis is an IndexError or no error")
def permute_view_length_only(shape, strides, order):
    order = tuple(order)
    if len(order) != len(shape):
        raise permute_error(order, len(shape))
    return tuple(shape[d] for d in order), tuple(strides[d] for d in order)


@mutant("1.6", "the error shows the order but not the number of dimensions")
def permute_view_terse_error(shape, strides, order):
    order = tuple(order)
    if sorted(order) != list(range(len(shape))):
        raise OpError("permute", f"bad order {order}")
    return tuple(shape[d] for d in order), tuple(strides[d] for d in order)


# ---------------------------------------------------------------- 1.7 reshape_view


@mutant("1.7", "always returns row-major strides, even for a transposed tensor")
def reshape_view(shape, strides, new_shape):
    return _strides_from_shape(new_shape)


@mutant("1.7", "refuses every view whose size-1 dims have an unusual stride")
def reshape_view_strict(shape, strides, new_shape):
    if tuple(strides) == tuple(_strides_from_shape(shape)):
        return _strides_from_shape(new_shape)
    return None


@mutant("1.7", "never makes a view")
def reshape_view_never(shape, strides, new_shape):
    return None


@mutant("1.7", "keeps the old strides when the number of dims matches")
def reshape_view_keeps(shape, strides, new_shape):
    expected = _strides_from_shape(shape)
    if all(s == e or n == 1 for s, e, n in zip(strides, expected, shape)):
        if len(new_shape) == len(shape):
            return tuple(strides)
        return _strides_from_shape(new_shape)
    return None


@mutant("1.7", "contiguous judged by the last stride alone: a row slice reshapes as a view")
def reshape_view_last_stride(shape, strides, new_shape):
    if not shape or strides[-1] == 1 or shape[-1] == 1:
        return _strides_from_shape(new_shape)
    return None


@mutant("1.7", "contiguous judged by strides decreasing: every other element reshapes as a view")
def reshape_view_decreasing(shape, strides, new_shape):
    kept = [s for s, n in zip(strides, shape) if n != 1]
    if all(a >= b > 0 for a, b in zip(kept, kept[1:] + [1])):
        return _strides_from_shape(new_shape)
    return None


# ---------------------------------------------------------------- 1.8 slice_view


def _slice(shape, strides, offset, key, negative=True, check=True, step_stride=True):
    new_shape, new_strides = [], []
    for d, k in enumerate(key):
        size, stride = shape[d], strides[d]
        if isinstance(k, slice):
            start, stop, step = k.indices(size)
            new_shape.append(len(range(start, stop, step)))
            new_strides.append(stride * step if step_stride else stride)
            offset += start * stride
        else:
            i = k + size if (k < 0 and negative) else k
            if check and not 0 <= i < size:
                raise index_error(k, d, size)
            offset += i * stride
    rest = len(key)
    return (
        tuple(new_shape) + tuple(shape[rest:]),
        tuple(new_strides) + tuple(strides[rest:]),
        offset,
    )


@mutant("1.8", "negative integer indices not wrapped")
def slice_view(shape, strides, offset, key):
    return _slice(shape, strides, offset, key, negative=False, check=False)


@mutant("1.8", "step not multiplied into the stride")
def slice_view_step(shape, strides, offset, key):
    return _slice(shape, strides, offset, key, step_stride=False)


@mutant("1.8", "no bounds check on integer indices")
def slice_view_unchecked(shape, strides, offset, key):
    return _slice(shape, strides, offset, key, check=False)


@mutant("1.8", "the view's own offset is dropped")
def slice_view_no_offset(shape, strides, offset, key):
    s, st, o = _slice(shape, strides, offset, key)
    return s, st, o - offset


@mutant("1.8", "slice length computed as (stop - start) // step")
def slice_view_length(shape, strides, offset, key):
    new_shape, new_strides = [], []
    for d, k in enumerate(key):
        size, stride = shape[d], strides[d]
        if isinstance(k, slice):
            start, stop, step = k.indices(size)
            new_shape.append(max(0, (stop - start) // step))
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


@mutant("1.8", "slice bounds by hand: a missing start is 0 and a missing stop the size, any step")
def slice_view_by_hand(shape, strides, offset, key):
    new_shape, new_strides = [], []
    for d, k in enumerate(key):
        size, stride = shape[d], strides[d]
        if isinstance(k, slice):
            step = 1 if k.step is None else k.step
            start = (
                0
                if k.start is None
                else min(max(k.start + size if k.start < 0 else k.start, 0), size)
            )
            stop = (
                size
                if k.stop is None
                else min(max(k.stop + size if k.stop < 0 else k.stop, 0), size)
            )
            n = len(range(start, stop, step))
            new_shape.append(n)
            new_strides.append(stride * step)
            offset += (start if n else 0) * stride
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


# ---------------------------------------------------------------- 1.9 tensor_map


@mutant("1.9", "broadcasting ignored: reads a at the output's index")
def tensor_map(fn, out, a):
    for k in range(out.size):
        idx = _to_index(k, out.shape)
        p = _index_to_position(idx[len(idx) - len(a.shape) :], a.strides, a.offset)
        out.storage[_index_to_position(idx, out.strides, out.offset)] = fn(a.storage[p])


@mutant("1.9", "the output written as if contiguous")
def tensor_map_contiguous_out(fn, out, a):
    for k in range(out.size):
        idx = _to_index(k, out.shape)
        a_idx = _broadcast_index(idx, out.shape, a.shape)
        out.storage[out.offset + k] = fn(a.storage[_index_to_position(a_idx, a.strides, a.offset)])


@mutant("1.9", "a's offset ignored")
def tensor_map_no_offset(fn, out, a):
    for k in range(out.size):
        idx = _to_index(k, out.shape)
        a_idx = _broadcast_index(idx, out.shape, a.shape)
        out.storage[_index_to_position(idx, out.strides, out.offset)] = fn(
            a.storage[_index_to_position(a_idx, a.strides, 0)]
        )


@mutant("1.9", "a read in storage order (ignores its strides)")
def tensor_map_storage_order(fn, out, a):
    for k in range(out.size):
        idx = _to_index(k, out.shape)
        out.storage[_index_to_position(idx, out.strides, out.offset)] = fn(
            a.storage[a.offset + k % max(a.size, 1)]
        )


# ---------------------------------------------------------------- 1.10 tensor_zip


@mutant("1.10", "b read at a's position (assumes both have the same layout)")
def tensor_zip(fn, out, a, b):
    for k in range(out.size):
        idx = _to_index(k, out.shape)
        pa = _index_to_position(_broadcast_index(idx, out.shape, a.shape), a.strides, a.offset)
        pb = _index_to_position(_broadcast_index(idx, out.shape, b.shape), a.strides, b.offset)
        out.storage[_index_to_position(idx, out.strides, out.offset)] = fn(
            a.storage[pa], b.storage[pb]
        )


@mutant("1.10", "arguments swapped: fn(b, a)")
def tensor_zip_swapped(fn, out, a, b):
    for k in range(out.size):
        idx = _to_index(k, out.shape)
        pa = _index_to_position(_broadcast_index(idx, out.shape, a.shape), a.strides, a.offset)
        pb = _index_to_position(_broadcast_index(idx, out.shape, b.shape), b.strides, b.offset)
        out.storage[_index_to_position(idx, out.strides, out.offset)] = fn(
            b.storage[pb], a.storage[pa]
        )


@mutant("1.10", "b's offset ignored")
def tensor_zip_no_offset(fn, out, a, b):
    for k in range(out.size):
        idx = _to_index(k, out.shape)
        pa = _index_to_position(_broadcast_index(idx, out.shape, a.shape), a.strides, a.offset)
        pb = _index_to_position(_broadcast_index(idx, out.shape, b.shape), b.strides, 0)
        out.storage[_index_to_position(idx, out.strides, out.offset)] = fn(
            a.storage[pa], b.storage[pb]
        )


@mutant("1.10", "only a is broadcast; b read at the output index")
def tensor_zip_b_not_broadcast(fn, out, a, b):
    for k in range(out.size):
        idx = _to_index(k, out.shape)
        pa = _index_to_position(_broadcast_index(idx, out.shape, a.shape), a.strides, a.offset)
        pb = _index_to_position(idx[len(idx) - len(b.shape) :], b.strides, b.offset)
        out.storage[_index_to_position(idx, out.strides, out.offset)] = fn(
            a.storage[pa], b.storage[pb]
        )


# ---------------------------------------------------------------- 1.11 tensor_reduce


@mutant("1.11", "the accumulator is set once, not reset for each output element")
def tensor_reduce(fn, start, out, a, axis):
    n, step = a.shape[axis], a.strides[axis]
    acc = start
    for k in range(out.size):
        idx = _to_index(k, out.shape)
        pos = _index_to_position(idx, a.strides, a.offset)
        for _ in range(n):
            acc = fn(acc, a.storage[pos])
            pos += step
        out.storage[_index_to_position(idx, out.strides, out.offset)] = acc


@mutant("1.11", "steps along the axis with stride 1 instead of the axis stride")
def tensor_reduce_unit_step(fn, start, out, a, axis):
    n = a.shape[axis]
    for k in range(out.size):
        idx = _to_index(k, out.shape)
        pos = _index_to_position(idx, a.strides, a.offset)
        acc = start
        for _ in range(n):
            acc = fn(acc, a.storage[pos])
            pos += 1
        out.storage[_index_to_position(idx, out.strides, out.offset)] = acc


@mutant("1.11", "off by one: the last element along the axis is skipped")
def tensor_reduce_short(fn, start, out, a, axis):
    n, step = a.shape[axis], a.strides[axis]
    for k in range(out.size):
        idx = _to_index(k, out.shape)
        pos = _index_to_position(idx, a.strides, a.offset)
        acc = start
        for _ in range(n - 1):
            acc = fn(acc, a.storage[pos])
            pos += step
        out.storage[_index_to_position(idx, out.strides, out.offset)] = acc


@mutant("1.11", "the output written as if contiguous")
def tensor_reduce_contiguous_out(fn, start, out, a, axis):
    n, step = a.shape[axis], a.strides[axis]
    for k in range(out.size):
        idx = _to_index(k, out.shape)
        pos = _index_to_position(idx, a.strides, a.offset)
        acc = start
        for _ in range(n):
            acc = fn(acc, a.storage[pos])
            pos += step
        out.storage[out.offset + k] = acc


@mutant("1.11", "output elements enumerated with a's shape instead of out's")
def tensor_reduce_a_shape(fn, start, out, a, axis):
    n, step = a.shape[axis], a.strides[axis]
    for k in range(out.size):
        idx = _to_index(k, a.shape)
        pos = _index_to_position(idx, a.strides, a.offset)
        acc = start
        for _ in range(n):
            acc = fn(acc, a.storage[pos])
            pos += step
        out.storage[_index_to_position(_to_index(k, out.shape), out.strides, out.offset)] = acc


def _fold(fn, start, out, a, axis, first=False, backward=False, zero=False):
    """The reference's fold with one mistake switched on."""
    n, step = a.shape[axis], a.strides[axis]
    for k in range(out.size):
        idx = _to_index(k, out.shape)
        pos = _index_to_position(idx, a.strides, a.offset)
        items = [a.storage[pos + j * step] for j in range(n)]
        items = items[::-1] if backward else items
        acc = 0.0 if zero else start
        if first and items:
            acc, items = items[0], items[1:]
        for x in items:
            acc = fn(acc, x)
        out.storage[_index_to_position(idx, out.strides, out.offset)] = acc


@mutant("1.11", "starts from the first element along the axis, not from start")
def tensor_reduce_from_first(fn, start, out, a, axis):
    _fold(fn, start, out, a, axis, first=True)


@mutant("1.11", "folds from the last element along the axis back to the first")
def tensor_reduce_backward(fn, start, out, a, axis):
    _fold(fn, start, out, a, axis, backward=True)


@mutant("1.11", "the accumulator starts at 0.0 whatever start is")
def tensor_reduce_zero_start(fn, start, out, a, axis):
    _fold(fn, start, out, a, axis, zero=True)


# ---------------------------------------------------------------- 1.12 map_contiguous


@mutant("1.12", "a's offset ignored")
def map_contiguous(fn, out, a):
    n = out.size
    values = a.storage[:n].tolist()
    out.storage[out.offset : out.offset + n] = [fn(x) for x in values]


@mutant("1.12", "writes the whole output storage from position 0")
def map_contiguous_no_out_offset(fn, out, a):
    n = out.size
    values = a.storage[a.offset : a.offset + n].tolist()
    out.storage[:n] = [fn(x) for x in values]


@mutant("1.12", "off by one: the last element is not written")
def map_contiguous_short(fn, out, a):
    n = out.size - 1
    values = a.storage[a.offset : a.offset + n].tolist()
    out.storage[out.offset : out.offset + n] = [fn(x) for x in values]


@mutant("1.12", "maps the whole storage tail, writing past the output")
def map_contiguous_overrun(fn, out, a):
    values = a.storage[a.offset :].tolist()
    n = min(len(values), len(out.storage) - out.offset)
    out.storage[out.offset : out.offset + n] = [fn(x) for x in values[:n]]
