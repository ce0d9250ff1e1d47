"""Graded: conv2d (3.7), pooling (3.8, 3.9), softmax (3.10), logsumexp (3.11), and a CNN that trains."""

from __future__ import annotations

import numpy as np
from hypothesis import assume, given
from hypothesis import strategies as st

import minitorch
from autograder.harness import assert_close, check, graded

from .util import data, numba_backend, run, view  # noqa: F401  (numba_backend: autouse)

seeds = st.integers(0, 2**16)


def conv_oracle(x, w, stride, padding):
    """The definition, one output pixel at a time (float64)."""
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    n, _, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    out = np.zeros((n, o, oh, ow))
    for i in range(oh):
        for j in range(ow):
            patch = x[:, :, i * stride : i * stride + kh, j * stride : j * stride + kw]
            out[:, :, i, j] = np.einsum("nchw,ochw->no", patch, w)
    return out


def pool_oracle(x, k, s, fn):
    n, c, h, w = x.shape
    oh, ow = (h - k[0]) // s[0] + 1, (w - k[1]) // s[1] + 1
    out = np.zeros((n, c, oh, ow), dtype=np.float64)
    for i in range(oh):
        for j in range(ow):
            out[:, :, i, j] = fn(
                x[:, :, i * s[0] : i * s[0] + k[0], j * s[1] : j * s[1] + k[1]], axis=(2, 3)
            )
    return out


# ---------------------------------------------------------------- 3.7


@graded("3.7", points=3)
@given(
    n=st.integers(1, 2),
    c=st.integers(1, 3),
    o=st.integers(1, 3),
    h=st.integers(1, 8),
    w=st.integers(1, 8),
    k=st.integers(1, 3),
    stride=st.integers(1, 3),
    padding=st.integers(0, 2),
    seed=seeds,
)
def test_conv2d_matches_definition(n, c, o, h, w, k, stride, padding, seed):
    """
    contract: where positions outside ``x`` read 0 (zero padding).
    """
    assume(h + 2 * padding >= k and w + 2 * padding >= k)
    x, wt = data((n, c, h, w), seed), data((o, c, k, k), seed + 1)
    got = run("conv2d", minitorch.tensor(x), minitorch.tensor(wt), stride=stride, padding=padding)
    assert_close(
        got,
        conv_oracle(x, wt, stride, padding),
        "3.7",
        rtol=1e-4,
        atol=1e-4,
        x_shape=x.shape,
        w_shape=wt.shape,
        stride=stride,
        padding=padding,
    )


@graded("3.7", points=1)
def test_conv2d_strided_input_view():
    x, wt = data((2, 3, 9, 7), 5), data((4, 3, 3, 3), 6)
    got = run("conv2d", view(x, "transposed"), minitorch.tensor(wt), stride=2, padding=1)
    assert_close(got, conv_oracle(x, wt, 2, 1), "3.7", rtol=1e-4, atol=1e-4, x_shape=x.shape)
    # a kernel taller than wide: KH and KW are separate dimensions of w
    x, wt = data((1, 2, 6, 7), 7), data((3, 2, 3, 2), 8)
    got = run("conv2d", minitorch.tensor(x), minitorch.tensor(wt), stride=1, padding=1)
    assert_close(
        got,
        conv_oracle(x, wt, 1, 1),
        "3.7",
        rtol=1e-4,
        atol=1e-4,
        x_shape=x.shape,
        w_shape=wt.shape,
    )


# ---------------------------------------------------------------- 3.8, 3.9


@graded("3.8", points=2)
@given(
    h=st.integers(1, 7), w=st.integers(1, 7), k=st.integers(1, 3), s=st.integers(1, 3), seed=seeds
)
def test_max_pool2d_matches_numpy(h, w, k, s, seed):
    assume(h >= k and w >= k)
    x = data((2, 3, h, w), seed)
    got = run("max_pool2d", minitorch.tensor(x), kernel_size=k, stride=s)
    assert_close(got, pool_oracle(x, (k, k), (s, s), np.max), "3.8", x=x, kernel_size=k, stride=s)


@graded("3.8", points=1)
def test_max_pool2d_rectangular_windows_and_negatives():
    x = -np.abs(data((1, 2, 6, 9), 3)) - 1.0  # every value negative: a 0 start would be wrong
    x[0, 1, 2, 4] = np.nan  # inside a window, not its first element: the max is NaN, as numpy's
    got = run("max_pool2d", minitorch.tensor(x), kernel_size=(2, 3), stride=(2, 3))
    assert_close(got, pool_oracle(x, (2, 3), (2, 3), np.max), "3.8", x=x)


@graded("3.9", points=2)
@given(
    h=st.integers(1, 7), w=st.integers(1, 7), k=st.integers(1, 3), s=st.integers(1, 3), seed=seeds
)
def test_avg_pool2d_matches_numpy(h, w, k, s, seed):
    assume(h >= k and w >= k)
    x = data((2, 3, h, w), seed)
    got = run("avg_pool2d", minitorch.tensor(x), kernel_size=k, stride=s)
    assert_close(
        got,
        pool_oracle(x, (k, k), (s, s), np.mean),
        "3.9",
        rtol=1e-5,
        atol=1e-6,
        x=x,
        kernel_size=k,
        stride=s,
    )


@graded("3.9", points=1)
def test_avg_pool2d_rectangular():
    x = data((2, 1, 5, 8), 9)
    got = run("avg_pool2d", minitorch.tensor(x), kernel_size=(1, 4), stride=(2, 2))
    assert_close(got, pool_oracle(x, (1, 4), (2, 2), np.mean), "3.9", rtol=1e-5, atol=1e-6, x=x)


# ---------------------------------------------------------------- 3.10, 3.11


def _np_softmax(x, axis):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _np_lse(x, axis):
    x = x.astype(np.float64)
    m = x.max(axis=axis, keepdims=True)
    return np.squeeze(m + np.log(np.exp(x - m).sum(axis=axis, keepdims=True)), axis=axis)


shapes = st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple)


@graded("3.10", points=2)
@given(shape=shapes, axis_seed=seeds, scale=st.sampled_from([1.0, 30.0, 1000.0]), seed=seeds)
def test_softmax_matches_numpy_and_is_stable(shape, axis_seed, scale, seed):
    """
    contract: Row-wise softmax of a 2-D C-contiguous ``x`` into ``out`` (same shape), numerically stable.
    contract: subtracting it changes nothing mathematically but keeps ``exp`` from overflowing
    """
    x = data(shape, seed, scale)
    axis = axis_seed % len(shape) - (axis_seed % 2) * len(shape)  # positive and negative axes
    got = run("softmax", minitorch.tensor(x), axis=axis)
    check(np.isfinite(got).all(), "3.10", "non-finite output (did exp overflow?)", x=x, axis=axis)
    assert_close(got, _np_softmax(x, axis), "3.10", rtol=1e-4, atol=1e-6, x=x, axis=axis)


@graded("3.10", points=1)
def test_softmax_huge_equal_logits():
    """
    contract: Example: ``[[1000.0, 1000.0]]`` gives ``[[0.5, 0.5]]`` (not nan).
    """
    got = run("softmax", minitorch.tensor([[1000.0, 1000.0], [-1000.0, -1000.0]]), axis=1)
    assert_close(got, np.full((2, 2), 0.5), "3.10", x="[[1000, 1000], [-1000, -1000]]")


@graded("3.11", points=2)
@given(shape=shapes, axis_seed=seeds, scale=st.sampled_from([1.0, 30.0, 1000.0]), seed=seeds)
def test_logsumexp_matches_numpy_and_is_stable(shape, axis_seed, scale, seed):
    x = data(shape, seed, scale)
    axis = axis_seed % len(shape)
    got = run("logsumexp", minitorch.tensor(x), axis=axis)
    assert_close(got, _np_lse(x, axis), "3.11", rtol=1e-5, atol=1e-4, x=x, axis=axis)


@graded("3.11", points=1)
def test_logsumexp_infinite_rows():
    x = np.array(
        [[-np.inf, -np.inf], [np.inf, 0.0], [1000.0, 1000.0], [np.nan, np.nan], [1.0, np.nan]],
        dtype=np.float32,
    )
    got = run("logsumexp", minitorch.tensor(x), axis=1)
    assert_close(got, [-np.inf, np.inf, 1000.0 + np.log(2), np.nan, np.nan], "3.11", x=x)


# ---------------------------------------------------------------- training


@graded("3.7", points=3)
def test_cnn_trains_on_digits():
    from minitorch.fast.cnn import DigitsCNN, train_digits_cnn
    from minitorch.nn.data import load_digits

    _, history = train_digits_cnn(seed=0)
    acc = history["test_acc"][-1]
    check(
        acc >= 0.97,
        "3.7",
        f"the CNN reached {acc:.1%} test accuracy, expected at least 97%",
        accuracy_per_epoch=[round(a, 3) for a in history["test_acc"]],
    )
    # The untrained network's logits on a few test digits are fixed by its seeded
    # weights; only the order of the float32 sums may differ between correct kernels.
    x = load_digits(seed=0)[2][:16]
    logits = DigitsCNN(seed=0)(minitorch.Tensor(x, dtype=minitorch.float32)).numpy()
    check(
        logits.shape == (16, 10) and bool(np.isfinite(logits).all()),
        "3.7",
        "the untrained CNN's logits on 16 test digits",
        value=logits,
        tol=(1e-4, 1e-5),
        shape=logits.shape,
    )
