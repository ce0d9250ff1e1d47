"""Row groups (``fusion/rows.py``, max-autotune) and the exact row kernels (softmax's
"rows" variant, the Numba layer norm): eager's bits, NaN, infinities and -0.0 included."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit

import minitorch as mt
from minitorch.core.conv_ops import logsumexp_numpy, softmax_numpy
from minitorch.core.registry import Spec, dispatch
from minitorch.fusion import rows
from minitorch.fusion.row_kernels import logsumexp_rows, softmax_rows
from minitorch.passes import CompileOptions
from minitorch.tensor.data import TensorData
from minitorch.transformer import fast, ops

jit_module = importlib.import_module(
    "minitorch.tracing.jit"
)  # the module: the package exports jit()

pytestmark = pytest.mark.usefixtures("reference_mode")  # tests/conftest.py

AUTOTUNE = CompileOptions(fuse=True, memory=True, keep=True, mode="max-autotune")
SPECIAL = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-42, 3e38]


def same_bits(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    nan = np.isnan(a)
    return bool((nan == np.isnan(b)).all() and np.array_equal(a[~nan].view(np.uint32),
                                                               b[~nan].view(np.uint32)))  # fmt: skip


def values(rng, shape, specials: int):
    x = (rng.standard_normal(shape) * 10.0 ** rng.uniform(-3, 3, shape[:-1] + (1,))).astype(
        np.float32
    )
    for _ in range(specials):
        x[tuple(rng.integers(0, n) for n in shape)] = SPECIAL[rng.integers(len(SPECIAL))]
    return x


@settings(max_examples=40, derandomize=True, deadline=None)
@given(st.integers(1, 128), st.integers(0, 2**31), st.sampled_from([np.float32, np.float64]))
def test_pairwise_is_numpys_row_sum(n, seed, dtype):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((20, n)) * 10.0 ** rng.uniform(-4, 4, (20, 1))).astype(dtype)
    got = np.array([rows.pairwise(r, n, dtype(0.0)) for r in x])  # contiguous: the vector path
    assert np.array_equal(got, x.sum(axis=-1))
    strided = np.repeat(x, 2, axis=-1)[:, ::2]  # eight scalar accumulators
    assert np.array_equal([rows.pairwise(r, n, dtype(0.0)) for r in strided], x.sum(axis=-1))


@njit
def _max_lanes(a, m):
    return rows.max_lanes(a, m)


@settings(max_examples=30, derandomize=True, deadline=None)
@given(st.integers(1, 16), st.integers(0, 2**31), st.sampled_from([np.float32, np.float64]))
def test_max_lanes_are_the_maxima_of_every_eighth(blocks, seed, dtype):
    x = np.random.default_rng(seed).standard_normal(8 * blocks + 3).astype(dtype)
    x[-3:] = 100.0  # past m: never read
    m, want = 8 * blocks, [x[k : 8 * blocks : 8].max() for k in range(8)]
    assert list(_max_lanes(x, m)) == want  # contiguous: one vector max a block
    assert list(_max_lanes(np.repeat(x, 2)[::2], m)) == want  # strided: eight scalars
    assert list(rows.max_lanes(x, m)) == want  # from Python


def test_pairwise_keeps_nan_inf_and_signed_zero():
    for dtype in (np.float32, np.float64):
        for x in ([np.nan] + [1.0] * 9, [np.inf] * 8 + [-np.inf], [-0.0] * 8, [-0.0] * 17):
            x = np.array(x, dtype)
            assert same_bits(dtype(rows.pairwise(x, x.size, dtype(0.0))), x.sum())


def _ln_backward(x, g, w):
    # layer norm's backward as exercise 11.2 writes it: four means of each row
    mean = x.mean(axis=-1, keepdims=True)
    xc = x - mean
    inv = ((xc * xc).mean(axis=-1, keepdims=True) + 1e-5).sqrt().recip()
    xhat = xc * inv
    gh = g * w
    gx = gh - gh.mean(axis=-1, keepdims=True) - xhat * (gh * xhat).mean(axis=-1, keepdims=True)
    return gx * inv, (g * xhat).sum(axis=(0, 1))


def _softmax_backward(p, g, w):
    return p * (g - (p * g).sum(axis=-1, keepdims=True)) + w


def _mixed(x, y, w):
    s = ((x - x.mean(axis=-1, keepdims=True)) * y).sum(axis=-1, keepdims=True)
    return s / (y.abs().mean(axis=-1, keepdims=True) + 1.0) * x + w, s


def _jit(fn, options=AUTOTUNE):
    """A jit of its own: jit returns one object per function and shares traces per code."""
    jit_module._STORES.clear()
    return mt.jit(lambda x, y, w: fn(x, y, w), options=options)


def _row_nodes(jf) -> list:
    graphs = [t.compiled.graph for t in jf.cache.values()]
    return [n for g in graphs for n in g.nodes if n.op == "fused" and n.attrs["kind"] == "row"]


@settings(max_examples=12, derandomize=True, deadline=None)
@given(
    st.sampled_from([_ln_backward, _softmax_backward, _mixed]),
    st.integers(8, 140),
    st.integers(0, 3),
    st.integers(0, 2**31),
)
def test_row_groups_give_eagers_bits(fn, cols, specials, seed):
    rng = np.random.default_rng(seed)
    shape = (8, 64, cols)
    x, y = (mt.tensor(values(rng, shape, specials)) for _ in range(2))
    w = mt.tensor(values(rng, (cols,), 0))
    jf = _jit(fn)
    for _ in range(2):  # the second call runs the bound plan
        got = jf(x, y, w)
    want = fn(x, y, w)
    grouped = _row_nodes(jf)
    assert bool(grouped) == (cols <= rows.MAX_ROW), [n.attrs["name"] for n in grouped]
    if grouped:  # longer rows: chapter 7's reduce groups, which sum in float64 (chapter 9)
        for a, b in zip(got, want):
            assert same_bits(a.numpy(), b.numpy())


def test_a_row_group_replaces_layer_norms_dozen_kernels():
    rng = np.random.default_rng(0)
    x, g = (mt.tensor(values(rng, (32, 1, 64, 64), 0)) for _ in range(2))
    w = mt.tensor(values(rng, (64,), 0))
    jf = _jit(_ln_backward)
    jf(x, g, w)
    made = _row_nodes(jf)
    # one node: the gradient for x and g * xhat (the weight's gradient sums it over the
    # batch and rows, axes (0, 1): not every row, so outside), from the same four means
    # of each row, both in one buffer
    assert len(made) == 1
    sub = made[0].attrs["graph"]
    assert sum(n.op == "mean" for n in sub.ops) == 4
    assert [o.spec.shape for o in sub.outputs] == [(32, 1, 64, 64)] * 2
    assert made[0].spec.shape == (2 * 32 * 64 * 64,)
    default = _jit(_ln_backward, CompileOptions(fuse=True, memory=True, keep=True))
    default(x, g, w)
    assert not _row_nodes(default)  # chapter 7's groups as they were, outside max-autotune
    assert "Row groups (1)" in str(mt.explain(_jit(_ln_backward))(x, g, w))


def test_an_input_out_of_c_order_runs_op_by_op_with_the_same_bits():
    rng = np.random.default_rng(1)
    x = mt.tensor(values(rng, (64, 8, 64), 2))
    y = mt.tensor(values(rng, (8, 64, 64), 0))

    def fn(x, y):
        return _softmax_backward(x, y.permute(1, 0, 2), mt.tensor(np.float32(0.5)))

    jf = mt.jit(fn, options=AUTOTUNE)
    got = [jf(x, y) for _ in range(2)][-1]
    assert same_bits(got.numpy(), fn(x, y).numpy())


# ---------------------------------------------------------------- softmax, layer norm


@pytest.mark.parametrize("shape", [(7, 64), (3, 5, 128), (4, 1), (9, 13), (6, 129), (2, 3)])
@pytest.mark.parametrize("specials", [0, 1, 4])
def test_softmax_rows_and_numba_layer_norm_are_numpys(shape, specials):
    rng = np.random.default_rng(len(shape) * 10 + specials)
    x = values(rng, shape, specials)
    if specials == 4:
        x.reshape(-1, x.shape[-1])[0] = -np.inf  # a row masked out whole: 0/0
        x.reshape(-1, x.shape[-1])[-1, x.shape[-1] // 2] = (
            np.nan
        )  # not first: a vector max drops it
    data, spec = TensorData.from_numpy(x), Spec(shape, np.dtype(np.float32), "cpu")
    want = softmax_numpy(data, out=spec, axis=-1).as_numpy_view()
    assert same_bits(softmax_rows(data, out=spec, axis=-1).as_numpy_view(), want)
    prepared = softmax_rows.prepare(spec, [spec])
    assert same_bits(prepared(data, out=spec, axis=-1).as_numpy_view(), want)
    w, b = (TensorData.from_numpy(values(rng, shape[-1:], 0)) for _ in range(2))
    want = ops.layer_norm_numpy(data, w, b, out=spec, eps=1e-5).as_numpy_view()
    assert same_bits(fast.layer_norm(data, w, b, out=spec, eps=1e-5).as_numpy_view(), want)


@pytest.mark.parametrize("shape", [(7, 60), (3, 5, 128), (4, 1), (9, 13), (6, 129)])
@pytest.mark.parametrize("keepdims", [True, False])
def test_logsumexp_rows_is_numpys(shape, keepdims):
    """The loss's logsumexp: rows of NaN, of +inf and of -inf (the shift is then 0, as
    numpy's kernel), and a row whose maximum overflows ``exp``."""
    rng = np.random.default_rng(len(shape))
    x = values(rng, shape, 4)
    rows_ = x.reshape(-1, shape[-1])
    rows_[0], rows_[-1, -1] = -np.inf, np.inf
    if rows_.shape[0] > 2:
        rows_[1, 0], rows_[2] = np.nan, 100.0
    data = TensorData.from_numpy(x)
    out = Spec(shape[:-1] + ((1,) if keepdims else ()), np.dtype(np.float32), "cpu")
    want = logsumexp_numpy(data, out=out, axis=len(shape) - 1, keepdims=keepdims).as_numpy_view()
    got = logsumexp_rows(data, out=out, axis=len(shape) - 1, keepdims=keepdims)
    assert same_bits(got.as_numpy_view(), want)
    prepared = logsumexp_rows.prepare(out, [Spec(shape, np.dtype(np.float32), "cpu")])
    got = prepared(data, out=out, axis=len(shape) - 1, keepdims=keepdims)
    assert same_bits(got.as_numpy_view(), want)
    if len(shape) == 3:  # another axis: numpy's steps
        out = Spec((3, 128), np.dtype(np.float32), "cpu")
        want = logsumexp_numpy(data, out=out, axis=1, keepdims=False).as_numpy_view()
        assert same_bits(
            logsumexp_rows(data, out=out, axis=1, keepdims=False).as_numpy_view(), want
        )


def test_softmax_rows_on_another_axis_is_numpys():
    x = values(np.random.default_rng(3), (4, 6, 5), 1)
    data, spec = TensorData.from_numpy(x), Spec(x.shape, np.dtype(np.float32), "cpu")
    for axis in (0, 1):
        want = softmax_numpy(data, out=spec, axis=axis).as_numpy_view()
        assert same_bits(softmax_rows(data, out=spec, axis=axis).as_numpy_view(), want)


def test_max_autotune_times_the_rows_variant():
    from minitorch.compile import autotune

    x = mt.tensor(values(np.random.default_rng(4), (16, 64, 64), 0))
    jf = mt.jit(lambda x: dispatch("softmax", x, axis=-1) * 2.0, options=AUTOTUNE)
    jf(x)
    plan = next(iter(jf.cache.values())).compiled.plan
    step = next(s for s in plan.steps if s.node is not None and s.node.op == "softmax")
    variants = autotune._variants(step)
    assert "rows" in variants and getattr(variants["rows"], "writes_into", False)


def test_a_sum_over_every_row_is_added_row_by_row_in_the_group():
    rng = np.random.default_rng(2)
    x, g = (mt.tensor(values(rng, (16, 64, 64), 3)) for _ in range(2))
    w = mt.tensor(values(rng, (64,), 0))
    jf = _jit(_ln_backward)  # (g * xhat).sum(axis=(0, 1)): every row of a 3-d x
    got = [jf(x, g, w) for _ in range(2)][-1]
    for a, b in zip(got, _ln_backward(x, g, w)):
        assert same_bits(a.numpy(), b.numpy())
    (made,) = _row_nodes(jf)
    assert sorted(o.spec.shape for o in made.attrs["graph"].outputs) == [(16, 64, 64), (64,)]
    source = rows.row_source(made.attrs["graph"], (16, 64, 64), "parallel")
    assert "col1[j] = " in source and "prange" not in source  # rows in order: one thread


@pytest.mark.parametrize("shape", [(64, 64), (16, 8, 64), (4, 1, 32, 256)])
def test_a_sum_over_every_row_alone_is_numpys(shape):
    """A bias's gradient: zero, then each row added in order, as numpy's reduction (a
    column of -0.0 sums to +0.0; NaN and infinities as numpy gives them)."""
    rng = np.random.default_rng(len(shape))
    x = values(rng, shape, 3)
    x.reshape(-1, shape[-1])[:, 1] = -0.0
    x.reshape(-1, shape[-1])[:, 2] = np.inf
    x.reshape(-1, shape[-1])[0, 2] = -np.inf
    axes = tuple(range(len(shape) - 1))
    jit_module._STORES.clear()
    jf = mt.jit(lambda x: x.sum(axis=axes) * 1.0, options=AUTOTUNE)
    t = mt.tensor(x)
    got = [jf(t) for _ in range(2)][-1].numpy()
    assert same_bits(got, x.sum(axis=axes))
    assert [n.attrs["graph"].ops[0].op for n in _row_nodes(jf)] == ["sum"]


def test_a_sum_over_every_row_of_another_output_is_a_row_group():
    """A bias's gradient taken from a row group's output (layer norm's input gradient, read
    back from the packed buffer): a column sum of its own, not numpy's axis reduction."""
    rng = np.random.default_rng(5)
    x, g = (mt.tensor(values(rng, (16, 64, 64), 2)) for _ in range(2))
    w = mt.tensor(values(rng, (64,), 0))

    def fn(x, g, w):
        dx, dw = _ln_backward(x, g, w)
        return dx, dw, dx.sum(axis=(0, 1))

    jf = _jit(fn)
    got = [jf(x, g, w) for _ in range(2)][-1]
    for a, b in zip(got, fn(x, g, w)):
        assert same_bits(a.numpy(), b.numpy())
    graph = [t.compiled.graph for t in jf.cache.values()][-1]
    assert not [n for n in graph.nodes if n.op == "sum"], "a column sum left to numpy"
