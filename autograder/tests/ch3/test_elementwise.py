"""Graded: parallel map (3.1), zip (3.2) and reduce (3.3) on the numba backend."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import minitorch
from autograder.harness import assert_close, check, graded
from autograder.strategies import laid_out, tensor_of, values
from autograder.strategies import shapes as any_shapes

from .util import data, numba_backend, run, view  # noqa: F401  (numba_backend: autouse)

shapes = st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple)
shapes_0d = st.lists(st.integers(1, 5), min_size=0, max_size=3).map(tuple)  # with 0-d tensors
views = st.sampled_from(["contiguous", "transposed", "sliced"])
seeds = st.integers(0, 2**16)

UNARY = {"neg": np.negative, "exp": np.exp, "relu": lambda x: np.maximum(x, 0)}
BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "maximum": np.maximum}

# ---------------------------------------------------------------- 3.1


@graded("3.1", points=3)
@given(shape=shapes_0d, how=views, op=st.sampled_from(sorted(UNARY)), seed=seeds, draw=st.data())
def test_map_matches_numpy_on_views(shape, how, op, seed, draw):
    x = data(shape, seed)
    got = run(op, view(x, how))
    assert_close(got, UNARY[op](x), "3.1", rtol=1e-5, atol=1e-6, op=op, x=x, view=how)
    # empty, 0-d, inf, NaN, -1e30 rows, offsets, negative steps, views of views
    x = draw.draw(values(draw.draw(any_shapes()), np.float32))
    v, base = draw.draw(laid_out(x))
    op = draw.draw(st.sampled_from(["neg", "exp"]))
    with np.errstate(all="ignore"):
        want = UNARY[op](x)
    got = run(op, tensor_of(v, base))
    assert_close(got, want, "3.1", rtol=1e-5, atol=1e-6, op=op, x=x,
                 strides=tuple(s // 4 for s in v.strides))  # fmt: skip


@graded("3.1", points=2)
@settings(max_examples=10)
@given(
    small=st.lists(st.integers(1, 4), min_size=1, max_size=2).map(tuple),
    lead=st.integers(1, 3),
    seed=seeds,
)
def test_map_broadcasts_into_out(small, lead, seed):
    """
    contract: then walk the row by adding the last dimension's stride (0 where ``a`` is broadcast).
    """
    x = data(small, seed)
    big = (lead,) + small
    got = run("neg", minitorch.tensor(x).expand(*big))
    assert_close(got, -np.broadcast_to(x, big), "3.1", x=x, out_shape=big)
    # the kernel itself broadcasts a (documented: a_shape broadcasts to out_shape), the last
    # dim included, where a's stride must not be followed
    for small, big in (((3, 1), (3, 4)), ((1,), (5,)), ((4,), (2, 4)), ((), (2, 3))):
        x = data(small, seed)
        got = _map_into("neg", big, x)
        assert_close(got, -np.broadcast_to(x, big), "3.1", x=x, out_shape=big, direct=True)
    # a lower-rank a whose shape and strides are slices of one packed int64 array: a kernel
    # reads len(a_shape) entries of them, never what lies after (here out's own shape, strides)
    meta, storage = _packed(seed)
    out = np.zeros((2, 2), np.float32)
    _kernel("3.1", "neg")(out.reshape(-1), meta[:2], meta[2:], storage, meta[:1], meta[2:3])
    assert_close(out, -np.broadcast_to(storage[::2], (2, 2)), "3.1", a=storage[::2], packed=True)


def _kernel(exercise, op):
    """Exercise 3.1's or 3.2's compiled kernel for ``op``, to call directly."""
    from minitorch.core.registry import get_op
    from minitorch.fast import compile as jit
    from minitorch.fast.scalars import scalar_for

    return jit.elementwise(exercise, op, scalar_for(get_op(op)))


def _packed(seed):
    """``meta = [2, 2, 2, 1]``: ``meta[:1]``, ``meta[2:3]`` are the shape (2,) and strides (2,)
    of ``storage[::2]``; ``meta[:2]``, ``meta[2:]`` those of a contiguous (2, 2)."""
    from minitorch.fast.indexing import as_index_array

    return as_index_array([2, 2, 2, 1]), data((4,), seed)


def _map_into(op, out_shape, x):
    """Exercise 3.1's compiled kernel called directly, ``x`` broadcast into a new ``out``."""
    from minitorch.core.registry import get_op
    from minitorch.fast import compile as jit
    from minitorch.fast.indexing import as_index_array
    from minitorch.fast.scalars import scalar_for

    kernel = jit.elementwise("3.1", op, scalar_for(get_op(op)))
    out = np.zeros(out_shape, np.float32)
    x = np.ascontiguousarray(x)
    strides = [s // x.itemsize for s in x.strides]
    kernel(out.reshape(-1), as_index_array(out.shape), as_index_array([s // 4 for s in out.strides]),
           x.reshape(-1), as_index_array(x.shape), as_index_array(strides))  # fmt: skip
    return out


@graded("3.1", points=1)
def test_map_large_contiguous_fast_path():
    """
    contract: fast path: when ``a`` and ``out`` have the same shape and strides and are contiguous, element ``k`` of both sits at ``k``
    """
    x = data((300_000,), 1)
    assert_close(run("exp", minitorch.tensor(x)), np.exp(x), "3.1", rtol=1e-5, x=x[:8])


# ---------------------------------------------------------------- 3.2


def _broadcast_pair(draw_shape, pattern):
    a, b = list(draw_shape), list(draw_shape)
    for d, p in enumerate(pattern[: len(a)]):
        if p == 1:
            a[d] = 1
        elif p == 2:
            b[d] = 1
    return tuple(a), tuple(b)


@graded("3.2", points=3)
@given(
    shape=shapes,
    pattern=st.lists(st.integers(0, 2), min_size=3, max_size=3),
    drop=st.booleans(),
    op=st.sampled_from(sorted(BINARY)),
    seed=seeds,
)
def test_zip_broadcasts_like_numpy(shape, pattern, drop, op, seed):
    sa, sb = _broadcast_pair(shape, pattern)
    if drop and len(sb) > 1:
        sb = sb[1:]  # fewer dimensions: aligned from the right
    x, y = data(sa, seed), data(sb, seed + 1)
    got = run(op, minitorch.tensor(x), minitorch.tensor(y))
    assert_close(got, BINARY[op](x, y), "3.2", op=op, a=x, b=y)


@graded("3.2", points=2)
@given(shape=shapes_0d, how_a=views, how_b=views, op=st.sampled_from(sorted(BINARY)), seed=seeds)
def test_zip_strided_views(shape, how_a, how_b, op, seed):
    """
    contract: else rows in ``prange`` with the positions computed once per row.
    """
    x, y = data(shape, seed), data(shape, seed + 7)
    got = run(op, view(x, how_a), view(y, how_b))
    assert_close(got, BINARY[op](x, y), "3.2", op=op, a=x, b=y, views=(how_a, how_b))


@graded("3.2", points=1)
def test_zip_large_contiguous_fast_path():
    """
    contract: a contiguous fast path when all three have ``out``'s shape and contiguous strides
    """
    x, y = data((200_000,), 2), data((200_000,), 3)
    assert_close(run("mul", minitorch.tensor(x), minitorch.tensor(y)), x * y, "3.2", a=x[:8])
    # out's shape and unit steps along rows, but rows padded apart (a column slice): not the
    # fast path, whichever operand it is
    base, y = data((2, 5), 4), data((2, 3), 5)
    rows = minitorch.tensor(base)[:, :3]
    for a, b, want in (
        (rows, minitorch.tensor(y), base[:, :3] + y),
        (minitorch.tensor(y), rows, y + base[:, :3]),
    ):
        assert_close(run("add", a, b), want, "3.2", base=base, b=y, sliced_rows=True)
    # a lower-rank operand whose shape and strides are slices of one packed int64 array: a
    # kernel reads len(shape) entries of them, never what lies after (here out's own)
    meta, storage = _packed(6)
    full = data((2, 2), 7)
    kernel = _kernel("3.2", "add")
    for first in (True, False):
        out = np.zeros((2, 2), np.float32)
        low = (storage, meta[:1], meta[2:3])
        high = (full.reshape(-1), meta[:2], meta[2:])
        kernel(out.reshape(-1), meta[:2], meta[2:], *(low + high if first else high + low))
        want = storage[::2] + full
        assert_close(out, want, "3.2", a=storage[::2], b=full, packed=True, lower_rank_first=first)


# ---------------------------------------------------------------- 3.3


@graded("3.3", points=3)
@given(shape=shapes, how=views, op=st.sampled_from(["sum", "max"]), axis_seed=seeds, seed=seeds)
def test_reduce_matches_numpy(shape, how, op, axis_seed, seed):
    x = data(shape, seed)
    axis = axis_seed % (len(shape) + 1) - 1  # -1 .. ndim-1, and None below
    axis = None if axis == len(shape) - 1 and axis_seed % 2 else axis
    got = run(op, view(x, how), axis=axis, keepdims=False)
    want = getattr(np, op)(x.astype(np.float64), axis=axis)
    assert_close(got, want, "3.3", rtol=1e-4, atol=1e-5, op=op, x=x, axis=axis, view=how)


@graded("3.3", points=2)
@settings(max_examples=10)
@given(rows=st.integers(1, 6), cols=st.integers(1, 9), seed=seeds)
def test_reduce_strided_axis_and_keepdims(rows, cols, seed):
    x = data((rows, cols), seed)
    t = view(x, "transposed")  # axis 0 has stride 1, axis 1 does not
    for axis in (0, 1):
        got = run("sum", t, axis=axis, keepdims=True)
        assert_close(
            got,
            x.sum(axis=axis, keepdims=True, dtype=np.float64),
            "3.3",
            rtol=1e-4,
            atol=1e-5,
            x=x,
            axis=axis,
        )
    got = run("max", t, axis=(0, 1), keepdims=False)
    check(got.shape == () and got == x.max(), "3.3", "max over both axes", x=x, got=got)


@graded("3.3", points=1)
def test_reduce_large_rows():
    x = data((64, 20_000), 4)
    got = run("sum", minitorch.tensor(x), axis=1, keepdims=False)
    assert_close(got, x.sum(axis=1, dtype=np.float64), "3.3", rtol=1e-4, atol=1e-2, x=x[:2, :5])
