"""Chapter 1, exercises 1.9-1.12: strided map, zip, reduce and the contiguous fast path."""

import functools
import math
import operator

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import minitorch as mt
from autograder.harness import assert_close, check, graded
from autograder.strategies import laid_out, tensor_data, values
from minitorch.tensor import loops
from minitorch.tensor.data import TensorData

from .strategies import broadcast_shapes, shapes, strided_views


@st.composite
def out_view(draw, shape):
    """An output that is itself a strided view, to catch code that assumes contiguity."""
    view, td = draw(strided_views(shape))
    return view, td


@graded("1.9", points=3)
@given(st.data())
def test_map_strided_and_broadcast(data):
    """
    contract: both may be any strided view (use their ``strides`` and ``offset``, never assume contiguity).
    """
    big, (small,) = data.draw(broadcast_shapes(n=1))
    a, ta = data.draw(strided_views(small))
    o, to = data.draw(out_view(big))
    loops.tensor_map(lambda x: 2 * x - 1, to, ta)
    expected = np.broadcast_to(2 * a - 1, big)
    assert_close(to.to_numpy(), expected, "1.9", a=a, a_strides=ta.strides, out_strides=to.strides)


@graded("1.10", points=3)
@given(st.data())
def test_zip_strided_and_broadcast(data):
    big, (sa, sb) = data.draw(broadcast_shapes(n=2))
    a, ta = data.draw(strided_views(sa))
    b, tb = data.draw(strided_views(sb))
    o, to = data.draw(out_view(big))
    loops.tensor_zip(lambda x, y: x * 10 - y, to, ta, tb)
    want = np.broadcast_to(a * 10 - b, big)
    assert_close(to.to_numpy(), want, "1.10", a=a, b=b, out_strides=to.strides)


@graded("1.11", points=3)
@given(st.data())
def test_reduce_one_axis(data):
    """
    contract: Fold dimension ``axis`` of ``a`` with ``fn``, starting from ``start``.
    """
    a, ta = data.draw(
        strided_views(data.draw(hnp.array_shapes(min_dims=1, max_dims=3, max_side=4)))
    )
    axis = data.draw(st.integers(0, a.ndim - 1))
    _, out = data.draw(out_view(tuple(1 if d == axis else n for d, n in enumerate(a.shape))))
    loops.tensor_reduce(operator.add, 0.0, out, ta, axis)
    assert_close(out.to_numpy(), a.sum(axis=axis, keepdims=True), "1.11", a=a, axis=axis)
    loops.tensor_reduce(max, -math.inf, out, ta, axis)
    assert_close(out.to_numpy(), a.max(axis=axis, keepdims=True), "1.11", a=a, axis=axis)
    # The fold in the docstring's order, from a start that is no identity, over extremes
    # (inf, NaN, rows near -1e30) in a drawn layout: python's max keeps the first of a NaN pair.
    x = data.draw(values(a.shape))
    xv, base = data.draw(laid_out(x))
    start = data.draw(st.sampled_from([0.5, -math.inf, -1e30, math.nan]))
    rows = np.moveaxis(x, axis, -1)
    for fn in (max, _halve_then_add):
        with np.errstate(all="ignore"):  # inf - inf and overflow are part of the test
            loops.tensor_reduce(fn, start, out, tensor_data(xv, base), axis)
            want = [functools.reduce(fn, row, start) for row in rows.reshape(-1, rows.shape[-1])]
        want = np.expand_dims(np.array(want).reshape(rows.shape[:-1]), axis)
        assert_close(out.to_numpy(), want, "1.11", a=x, axis=axis, start=start, fn=fn.__name__,
                     a_strides=tuple(s // 8 for s in xv.strides))  # fmt: skip


def _halve_then_add(acc, x):
    return 0.5 * acc + x


@graded("1.12", points=2)
@given(shapes, st.integers(0, 3), st.integers(0, 3))
def test_map_contiguous(shape, a_offset, out_offset):
    n = int(np.prod(shape))
    a_store = np.arange(n + a_offset + 3, dtype=np.float64) - 3  # more storage than elements
    ta = TensorData(a_store, shape, TensorData.contiguous(a_store, shape).strides, a_offset)
    o_store = np.full(n + out_offset + 2, 99.0)
    to = TensorData(o_store, shape, ta.strides, out_offset)
    loops.map_contiguous(lambda x: x * x, to, ta)
    assert_close(
        to.to_numpy(),
        ta.to_numpy() ** 2,
        "1.12",
        shape=shape,
        a_offset=a_offset,
        out_offset=out_offset,
    )
    check(
        o_store[:out_offset].tolist() == [99.0] * out_offset
        and o_store[-2:].tolist() == [99.0] * 2,
        "1.12",
        "wrote outside the output's elements",
        shape=shape,
        out_offset=out_offset,
    )


@graded("1.9", points=1)
def test_python_backend_unary_ops():
    x = np.array([[-1.5, 0.0, 2.0], [3.0, -4.0, 0.5]])
    with mt.use_backend("python"):
        t = mt.tensor(x, dtype="float64").T  # a transposed view: the strided loop
        got = (-t).exp().numpy()
    assert_close(got, np.exp(-x.T), "1.9", x=x.T)


@graded("1.10", points=1)
def test_python_backend_broadcast_arithmetic():
    a, b = np.arange(6.0).reshape(2, 3), np.array([10.0, 20.0, 30.0])
    with mt.use_backend("python"):
        got = (mt.tensor(a) * mt.tensor(b) + 1).numpy()
    assert_close(got, a * b + 1, "1.10", a=a, b=b)


@graded("1.11", points=1)
def test_python_backend_reductions_and_matmul():
    empty, out = TensorData.empty((2, 0, 3), np.float64), TensorData.empty((2, 1, 3), np.float64)
    loops.tensor_reduce(max, -math.inf, out, empty, 1)  # nothing to fold: the start value
    assert_close(out.to_numpy(), np.full((2, 1, 3), -math.inf), "1.11", shape=(2, 0, 3), axis=1)
    a = np.arange(24.0).reshape(2, 3, 4) / 7
    with mt.use_backend("python"):
        t = mt.tensor(a, dtype="float64")
        s = t.sum(axis=(0, 2), keepdims=True).numpy()
        m = t.max(axis=1).numpy()
        mm = (t @ t.transpose()).numpy()
    assert_close(s, a.sum(axis=(0, 2), keepdims=True), "1.11", a=a)
    assert_close(m, a.max(axis=1), "1.11", a=a)
    assert_close(mm, a @ a.transpose(0, 2, 1), "1.11", a=a)
