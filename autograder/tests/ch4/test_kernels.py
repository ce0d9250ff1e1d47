"""Graded: the CUDA kernels (exercises 4.1-4.5) on small strided tensors, against numpy.

Without a GPU they run on Numba's CUDA simulator; with one, on the device at larger sizes.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import minitorch
from autograder.harness import assert_close, check, graded
from minitorch.cuda import backend as cb

from .util import BIG, SIDE, arrays, layouts, on_device, padded

UNARY = {
    "neg": np.negative,
    "exp": np.exp,
    "relu": lambda x: np.maximum(x, 0),
    "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
}
BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "maximum": np.maximum,
    "lt": np.less,
}


# ---------------------------------------------------------------- 4.1 map


@graded("4.1", points=2)
@settings(max_examples=15)
@given(data=st.data(), name=st.sampled_from(sorted(UNARY)))
def test_map_strided(data, name):
    """
    contract: Return the body of a CUDA kernel that applies the device function ``fn`` elementwise.
    """
    x = data.draw(arrays())
    t = data.draw(layouts(x))
    got = minitorch.dispatch(name, t)
    check(got.device == "cuda", "4.1", "the result should stay on the cuda device")
    assert_close(got.numpy(), UNARY[name](x), "4.1", op=name, x=x, strides=t.strides)


@graded("4.1", points=1)
def test_map_grid_stride_and_broadcast():
    """
    contract: is a strided view whose shape broadcasts to ``out_shape``
    contract: in a grid-stride loop (the launch may have fewer threads than elements)
    """
    # More elements than threads in the launch: only a grid-stride loop covers them all.
    x = np.linspace(-3, 3, BIG)
    assert_close((-on_device(x)).numpy(), -x, "4.1", n=BIG, threads=cb.THREADS)
    # The input broadcasts to the output: a (3,) row repeated into (4, 3).
    row = on_device(np.array([1.0, -2.0, 3.0]))
    out = cb.launch_map(cb.device_fn(minitorch.get_op("neg")), row._data, (4, 3), np.float64)
    got = minitorch.Tensor._make(out, "cuda").numpy()
    assert_close(got, -np.tile([1.0, -2.0, 3.0], (4, 1)), "4.1", a_shape=(3,), out_shape=(4, 3))
    # the same rank as the output, with a size-1 axis: (1, 3) repeated into (4, 3)
    row2 = on_device(np.array([[1.0, -2.0, 3.0]]))
    out = cb.launch_map(cb.device_fn(minitorch.get_op("neg")), row2._data, (4, 3), np.float64)
    got = minitorch.Tensor._make(out, "cuda").numpy()
    assert_close(got, -np.tile([1.0, -2.0, 3.0], (4, 1)), "4.1", a_shape=(1, 3), out_shape=(4, 3))
    # A 0-d tensor and a cast go through the same kernel.
    assert_close(on_device(np.array(2.0)).exp().numpy(), np.exp(2.0), "4.1", x=2.0)
    y = on_device(np.array([1.7, -2.2, 0.0]))
    assert_close(y.astype("int64").numpy(), np.array([1, -2, 0]), "4.1", cast="int64")


# ---------------------------------------------------------------- 4.2 zip


@st.composite
def broadcast_pair(draw):
    big = draw(arrays(min_dims=1, max_dims=3))
    k = draw(st.integers(1, big.ndim))
    small_shape = tuple(1 if draw(st.booleans()) else n for n in big.shape[big.ndim - k :])
    small = draw(arrays(shape=small_shape))
    return (big, small) if draw(st.booleans()) else (small, big)


@graded("4.2", points=3)
@settings(max_examples=15)
@given(data=st.data(), pair=broadcast_pair(), name=st.sampled_from(sorted(BINARY)))
def test_zip_broadcast_strided(data, pair, name):
    """
    contract: Return the body of a CUDA kernel that combines two tensors with the device function ``fn``.
    contract: ``a`` and ``b`` broadcast to ``out_shape``
    """
    a, b = pair
    ta, tb = data.draw(layouts(a)), data.draw(layouts(b))
    got = minitorch.dispatch(name, ta, tb)
    assert_close(got.numpy(), BINARY[name](a, b), "4.2", op=name, a=a, b=b)


@graded("4.2", points=1)
def test_zip_grid_stride():
    x, y = np.linspace(-1, 1, BIG), np.linspace(2, 5, BIG)
    assert_close((on_device(x) * on_device(y)).numpy(), x * y, "4.2", n=BIG)
    col = on_device(np.arange(3.0).reshape(3, 1))
    row = on_device(np.arange(4.0))
    assert_close(
        (col + row).numpy(),
        np.arange(3.0)[:, None] + np.arange(4.0),
        "4.2",
        a_shape=(3, 1),
        b_shape=(4,),
    )
    # two narrowed views (an offset, a last stride of 1, rows 5 apart): not contiguous
    x, y = np.arange(6.0).reshape(2, 3), np.arange(10.0, 16.0).reshape(2, 3)
    tx, ty = (on_device(padded(v))[..., 1:-1] for v in (x, y))
    assert_close((tx - ty).numpy(), x - y, "4.2", a=x, b=y, strides=tx.strides, layout="narrowed")


# ---------------------------------------------------------------- 4.3 block sum


@graded("4.3", points=3)
@settings(max_examples=12)
@given(n=st.integers(1, BIG), seed=st.integers(0, 100), ints=st.booleans())
def test_block_sum(n, seed, ints):
    """
    contract: Return the body of a block-level sum reduction through shared memory.
    contract: the sum of all partial sums is ``a.sum()``
    """
    rng = np.random.default_rng(seed)
    x = rng.integers(-50, 50, n) if ints else rng.standard_normal(n)
    got = on_device(x).sum()
    check(got.shape == (), "4.3", f"x.sum() should be 0-d, got shape {got.shape}", n=n)
    assert_close(got.numpy(), x.sum(), "4.3", n=n, x=x)


@graded("4.3", points=1)
def test_block_sum_one_launch():
    """
    contract: Block ``b`` writes one partial sum to ``out[b]``
    contract: the launch has ``threads`` threads per block (a power of two) and any number of blocks
    """
    # One launch of the kernel with several blocks: out[b] holds block b's partial sum.
    # threads=1 is a power of two too: the block's one thread (thread 0) writes its sum.
    n, blocks = 3 * cb.THREADS + 5, 3
    x = np.arange(n, dtype=np.float64)
    dev = on_device(x)._data.storage
    for threads in (cb.THREADS, 1):
        out = cb.cuda.device_array(blocks, dtype=np.float64)
        out.copy_to_device(np.full(blocks, np.nan))
        cb.compiled("4.3", threads, cb.numba_type(x.dtype))[blocks, threads](out, dev, n)
        partial = out.copy_to_host()
        grid = blocks * threads
        expected = [
            sum(x[i] for i in range(n) if (i % grid) // threads == b) for b in range(blocks)
        ]
        assert_close(partial, np.array(expected), "4.3", n=n, threads=threads, blocks=blocks)
    # fewer elements than one block has threads: blocks 1 and 2 have none and write 0
    x = np.array([1.5, -2.0, 4.0])
    out = cb.cuda.device_array(3, dtype=np.float64)
    out.copy_to_device(np.full(3, np.nan))
    cb.compiled("4.3", cb.THREADS, cb.numba_type(x.dtype))[3, cb.THREADS](
        out, on_device(x)._data.storage, x.size
    )
    assert_close(out.copy_to_host(), np.array([3.5, 0.0, 0.0]), "4.3", n=3, blocks=3,
                 threads=cb.THREADS, empty_blocks="write 0")  # fmt: skip


# Rounded to float32, 1 + 2**-24 is 1 (a tie, to even). In [E, 1, 0, E] each E meets the 1 before
# the other E in a tree pairing t with t + step or 2t with 2t + 1 and in a loop either way, so it
# sums to 1 in float32, to 1 + 2**-23 in float64.
E = 2.0**-24
# int64 values past 2**53, where float64 has no room for the last bits
BIG_INTS = np.array([[2**53 + 1, 2**60 + 3, -5], [-(2**53) - 3, -(2**62), 7]], dtype=np.int64)


def _check_float32_sum(got, exercise, **inputs):
    check(got.dtype == np.float32, exercise, f"float32 in should give float32, got {got.dtype}")
    check(bool((got.numpy() == 1.0).all()), exercise,
          "float32 should be added in float32: a float64 cache or accumulator keeps the 2**-24s",
          value=got.numpy(), **inputs)  # fmt: skip


def _check_exact(got, want, exercise, **inputs):
    check(got.dtype == np.int64 and bool(np.array_equal(got.numpy(), want)), exercise,
          "int64 should stay int64 and exact (through float64 it loses bits past 2**53)",
          value=got.numpy(), expected=want, **inputs)  # fmt: skip


@graded("4.3", points=1)
def test_block_sum_in_the_tensors_dtype():
    """
    contract: Everything is in ``dtype``, never float64 by default
    contract: an int64 sum stays exact
    """
    x = np.array([E, 1.0, 0.0, E], dtype=np.float32)
    _check_float32_sum(on_device(x).sum(), "4.3", x=x)
    _check_exact(on_device(BIG_INTS).sum(), BIG_INTS.sum(), "4.3", x=BIG_INTS)


# ---------------------------------------------------------------- 4.4 reduce along an axis

REDUCE = {"sum": np.sum, "max": np.max, "min": np.min, "mean": np.mean}


@graded("4.4", points=3)
@settings(max_examples=15)
@given(data=st.data(), name=st.sampled_from(sorted(REDUCE)), keepdims=st.booleans())
def test_reduce_axis(data, name, keepdims):
    """
    contract: Return the body of a kernel that folds one axis with the device function ``fn``.
    """
    x = data.draw(arrays(min_dims=1, max_dims=3))
    t = data.draw(layouts(x))
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    got = minitorch.dispatch(name, t, axis=axis, keepdims=keepdims)
    want = REDUCE[name](x, axis=axis, keepdims=keepdims)
    assert_close(got.numpy(), want, "4.4", op=name, axis=axis, keepdims=keepdims, x=x)


@graded("4.4", points=1)
def test_reduce_long_axis_and_many_outputs(monkeypatch):
    """
    contract: One *block* per output element, in a block-stride loop
    contract: ``start`` is ``fn``'s identity as a ``dtype`` scalar
    """
    # An axis longer than the block (threads stride along it) and more outputs than blocks.
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 5 * cb.REDUCE_THREADS + 3))
    t = on_device(x)
    assert_close(t.max(axis=1).numpy(), x.max(axis=1), "4.4", shape=x.shape, axis=1)
    y = rng.integers(-9, 9, (2 * cb.MAX_BLOCKS + 1, 3))
    assert_close(on_device(y).min(axis=1).numpy(), y.min(axis=1), "4.4", shape=y.shape, axis=1)
    assert_close(t.min(axis=(0, 1)).numpy(), x.min(), "4.4", shape=x.shape, axis=(0, 1))
    # rows shorter than the block, all large and negative: threads with no element hold start
    z = -1e30 * (1 + rng.random((2, 3)))
    for name, rows in (("max", z), ("min", -z)):
        got = minitorch.dispatch(name, on_device(rows), axis=1)
        assert_close(got.numpy(), getattr(rows, name)(axis=1), "4.4", op=name, x=rows, axis=1,
                     start="fn's identity")  # fmt: skip
    # max over every axis folds a flattened view with the same kernel.
    assert_close(on_device(x.T.copy()).T.max().numpy(), x.max(), "4.4", op="max", axis=None)
    # One thread per block is a power of two too: thread 0, the only one, writes each output.
    monkeypatch.setattr(cb, "REDUCE_THREADS", 1)
    assert_close(t.sum(axis=1).numpy(), x.sum(axis=1), "4.4", shape=x.shape, axis=1, threads=1)


@graded("4.4", points=1)
def test_reduce_in_the_tensors_dtype():
    """
    contract: ``a`` and ``out`` hold elements of ``dtype`` (a Numba type, as in 4.3) and the fold computes in it
    """
    x = np.array([[E, 1.0, 0.0, E], [E, 0.0, 1.0, E]], dtype=np.float32)
    _check_float32_sum(on_device(x).sum(axis=1), "4.4", x=x, axis=1)
    # max and min of int64 start from an int64, not from -inf or inf
    for name in ("sum", "max", "min"):
        got = minitorch.dispatch(name, on_device(BIG_INTS), axis=1)
        _check_exact(got, getattr(BIG_INTS, name)(axis=1), "4.4", op=name, x=BIG_INTS, axis=1)


# ---------------------------------------------------------------- 4.5 tiled matmul


@st.composite
def matmul_operands(draw):
    n, k, m = (draw(st.integers(1, SIDE + 3)) for _ in range(3))
    batch = draw(st.sampled_from([(), (2,), "broadcast"]))
    if batch == "broadcast":
        a_shape, b_shape = (2, 1, n, k), (3, k, m)
    else:
        a_shape, b_shape = batch + (n, k), batch + (k, m)
    return draw(arrays(shape=a_shape)), draw(arrays(shape=b_shape))


@graded("4.5", points=3)
@settings(max_examples=10)
@given(data=st.data(), ops=matmul_operands())
def test_matmul_tiled(data, ops):
    """
    contract: Return the body of a batched matrix multiply tiled through shared memory.
    """
    a, b = ops
    ta, tb = data.draw(layouts(a)), data.draw(layouts(b))
    got = ta @ tb
    assert_close(got.numpy(), a @ b, "4.5", rtol=1e-6, atol=1e-9, a=a, b=b, tile=cb.TILE)


@graded("4.5", points=1)
def test_matmul_shapes_around_the_tile():
    """
    contract: (0 outside the matrices)
    """
    rng = np.random.default_rng(5)
    t = cb.TILE
    for n, k, m in [(t, t, t), (t + 1, 2 * t - 1, 1), (1, 3 * t + 2, t - 1), (2 * t + 1, 1, t + 3)]:
        a, b = rng.standard_normal((n, k)), rng.standard_normal((k, m))
        got = (on_device(a) @ on_device(b)).numpy()
        assert_close(got, a @ b, "4.5", rtol=1e-6, atol=1e-9, n=n, k=k, m=m, tile=t)
    # the part of the last tile past k is zeros, not what the previous tile left there:
    # with an inf in the previous tile, a stale value times a zero would give NaN
    a, b = np.ones((2, t + 1)), np.ones((t + 1, 3))
    a[:, 1] = b[1, :] = np.inf
    with np.errstate(invalid="ignore"):
        got = (on_device(a) @ on_device(b)).numpy()
    assert_close(got, a @ b, "4.5", n=2, k=t + 1, m=3, tile=t, edge="zero-filled")
    # a NaN in a row of a, an inf meeting a zero in b: those outputs are NaN, as in numpy
    a, b = rng.standard_normal((3, t + 2)), rng.standard_normal((t + 2, 2))
    a[1, t], a[2, 0], b[0, 1] = np.nan, np.inf, 0.0
    with np.errstate(invalid="ignore"):
        got, want = (on_device(a) @ on_device(b)).numpy(), a @ b
    check(bool(np.array_equal(np.isnan(got), np.isnan(want))), "4.5",
          "NaN and inf * 0 products make NaN outputs, as numpy's a @ b does", value=got,
          expected=want, a=a, b=b)  # fmt: skip
    ints = rng.integers(-5, 5, (3, 2 * t + 1)), rng.integers(-5, 5, (2 * t + 1, 2))
    got = on_device(ints[0]) @ on_device(ints[1])
    check(got.dtype == np.int64, "4.5", f"int64 @ int64 should be int64, got {got.dtype}")
    assert_close(got.numpy(), ints[0] @ ints[1], "4.5", a=ints[0], b=ints[1])


@graded("4.5", points=1)
def test_matmul_in_the_operands_dtype():
    """
    contract: so a float32 matmul multiplies and adds float32
    contract: an int64 one stays exact
    """
    # the products E, 1, E are exact, so a fused multiply-add rounds as the plain sum does
    a, b = np.array([[E, 1.0, E]], dtype=np.float32), np.ones((3, 1), dtype=np.float32)
    _check_float32_sum(on_device(a) @ on_device(b), "4.5", a=a, b=b)
    a, b = np.array([[2**31 + 1, 3]]), np.array([[2**31 + 1], [5]])  # (2**31 + 1)**2 + 15
    _check_exact(on_device(a) @ on_device(b), a @ b, "4.5", a=a, b=b)
