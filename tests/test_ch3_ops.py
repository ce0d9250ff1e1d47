"""Chapter 3 internals: op errors, backward rules (finite differences), backend plumbing."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch
from minitorch.core.errors import OpError
from minitorch.core.registry import dispatch


@pytest.fixture(params=["numpy", "numba"])
def backend(request):
    with minitorch.use_backend(request.param):
        yield request.param


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _grad_check(op, arrays, attrs, which=0, eps=1e-6):
    """d(sum(r * op(...)))/d(arrays[which]) by autograd vs central differences (float64)."""
    r = _rand(*dispatch(op, *[minitorch.tensor(a) for a in arrays], **attrs).shape, seed=42)
    tensors = [minitorch.tensor(a, requires_grad=True) for a in arrays]
    (dispatch(op, *tensors, **attrs) * minitorch.tensor(r)).sum().backward()
    got = tensors[which].grad.numpy()
    want = np.zeros_like(arrays[which])
    for idx in np.ndindex(*arrays[which].shape):
        values = []
        for sign in (1, -1):
            moved = [a.copy() for a in arrays]
            moved[which][idx] += sign * eps
            out = dispatch(op, *[minitorch.tensor(a) for a in moved], **attrs).numpy()
            values.append((out * r).sum())
        want[idx] = (values[0] - values[1]) / (2 * eps)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("stride,padding", [(1, 0), (2, 1), (3, 2)])
def test_conv2d_gradients(backend, stride, padding):
    x, w = _rand(2, 2, 6, 5), _rand(3, 2, 3, 2, seed=1)
    attrs = {"stride": stride, "padding": padding}
    _grad_check("conv2d", [x, w], attrs, which=0)
    _grad_check("conv2d", [x, w], attrs, which=1)


@pytest.mark.parametrize("op", ["max_pool2d", "avg_pool2d"])
def test_pool_gradients(backend, op):
    _grad_check(op, [_rand(2, 2, 5, 7)], {"kernel_size": (2, 3), "stride": (1, 2)})


def test_softmax_and_logsumexp_gradients(backend):
    _grad_check("softmax", [_rand(3, 4)], {"axis": 0})
    _grad_check("logsumexp", [_rand(3, 4)], {"axis": 1, "keepdims": False})
    _grad_check("logsumexp", [_rand(2, 3, 2)], {"axis": 1, "keepdims": True})


def test_backends_agree_on_chapter_ops():
    x, w = minitorch.tensor(_rand(2, 3, 7, 6)), minitorch.tensor(_rand(4, 3, 3, 3, seed=3))
    calls = [
        ("conv2d", (x, w), {"stride": 2, "padding": 1}),
        ("max_pool2d", (x,), {"kernel_size": 2}),
        ("avg_pool2d", (x,), {"kernel_size": 3, "stride": 1}),
        ("softmax", (x,), {"axis": 2}),
        ("logsumexp", (x,), {"axis": 3, "keepdims": True}),
    ]
    for op, inputs, attrs in calls:
        with minitorch.use_backend("numpy"):
            want = dispatch(op, *inputs, **attrs).numpy()
        with minitorch.use_backend("numba"):
            got = dispatch(op, *inputs, **attrs).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=op)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_backends_agree_on_gradient_ops(dtype):
    """The compiled kernels of fast/conv.py (the Numba gradient kernels, the im2col
    convolution) give the numpy kernels' answers: ties and NaN in a max-pool window,
    overlapping windows, a transposed input, ``dest=``."""
    from minitorch.backends import get_backend
    from minitorch.core.registry import OPS, Spec, get_op
    from minitorch.tensor.data import TensorData

    x = _rand(3, 2, 7, 9).astype(dtype)
    x[0, 0, :2, :2], x[1, 1, 2, 3] = 1.0, np.nan  # a tie, and a NaN that never wins
    xt = np.ascontiguousarray(x.transpose(0, 1, 3, 2)).transpose(0, 1, 3, 2)  # strided view
    w = _rand(4, 2, 3, 2, seed=3).astype(dtype)
    pool = {"kernel_size": (3, 2), "stride": (2, 1)}  # overlapping rows
    calls = [
        ("max_pool2d_grad", (_rand(3, 2, 3, 8, seed=5), x), pool, x.shape),
        ("max_pool2d_grad", (_rand(3, 2, 3, 8, seed=5), xt), pool, x.shape),
        ("avg_pool2d_grad", (_rand(3, 2, 3, 8, seed=5), x), pool, x.shape),
        ("conv2d_grad_input", (_rand(3, 4, 4, 5, seed=6), w),
         {"stride": 2, "padding": 1, "input_hw": (7, 9)}, x.shape),
        ("conv2d_grad_weight", (xt, _rand(3, 4, 4, 5, seed=6)),
         {"stride": 2, "padding": 1, "kernel_hw": (3, 2)}, w.shape),
        ("conv2d", (xt, w), {"stride": 2, "padding": 1}, (3, 4, 4, 5)),
        ("conv2d", (x[:, :, 1:, :4], w), {"stride": 1, "padding": 0}, (3, 4, 4, 3)),
        ("conv2d", ("expanded", w), {"stride": 1, "padding": 1}, (3, 4, 7, 10)),
        ("conv2d_grad_weight", ("expanded", _rand(3, 4, 7, 10, seed=6)),
         {"stride": 1, "padding": 1, "kernel_hw": (3, 2)}, w.shape),
    ]  # fmt: skip
    first = TensorData.from_numpy(x[:1].astype(dtype))
    # x's first image repeated along the batch axis (stride 0): a read-only numpy view
    expanded = TensorData(first.storage, x.shape, (0, *first.strides[1:]), 0)
    for op, arrays, attrs, shape in calls:
        args = [
            expanded if isinstance(a, str) else TensorData.from_numpy(a.astype(dtype))
            for a in arrays
        ]
        out = Spec(shape, np.dtype(dtype), "cpu")
        want = get_backend("numpy").kernel(get_op(op))(*args, out=out, **attrs).as_numpy_view()
        kernel = OPS[op].variants.get("im2col") or get_backend("numba").kernel(get_op(op))
        dest = np.full(int(np.prod(shape)), 7.0, dtype)
        got = kernel(*args, out=out, dest=dest, **attrs).as_numpy_view()
        assert np.shares_memory(got, dest), op
        tol = 1e-5 if dtype == "float32" else 1e-12
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=op)


@pytest.mark.parametrize(
    "call,message",
    [
        (
            lambda: dispatch("conv2d", minitorch.zeros(1, 2, 5, 5), minitorch.zeros(3, 4, 3, 3)),
            "has 2 channels but weight",
        ),
        (
            lambda: dispatch("conv2d", minitorch.zeros(2, 5, 5), minitorch.zeros(3, 2, 3, 3)),
            "must be 4-D",
        ),
        (
            lambda: dispatch("conv2d", minitorch.zeros(1, 1, 2, 2), minitorch.zeros(1, 1, 3, 3)),
            "window (3) is larger",
        ),
        (
            lambda: dispatch(
                "conv2d", minitorch.zeros(1, 1, 4, 4), minitorch.zeros(1, 1, 3, 3), stride=0
            ),
            "stride must be a positive int",
        ),
        (
            lambda: dispatch("max_pool2d", minitorch.zeros(1, 1, 2, 2), kernel_size=3),
            "window (3) is larger",
        ),
        (
            lambda: dispatch("avg_pool2d", minitorch.zeros(1, 1, 4, 4), kernel_size=(2, 0)),
            "kernel_size must be",
        ),
        (lambda: dispatch("softmax", minitorch.zeros(2, 3), axis=2), "out of range"),
        (lambda: dispatch("logsumexp", minitorch.zeros(2, 3), axis=(0, 1)), "axis must be one int"),
        (
            lambda: dispatch(
                "conv2d",
                minitorch.zeros(1, 1, 4, 4, dtype="int64"),
                minitorch.zeros(1, 1, 3, 3, dtype="int64"),
            ),
            "needs float inputs",
        ),
    ],
)
def test_bad_input_names_the_op(call, message):
    with pytest.raises(OpError) as e:
        call()
    assert message in str(e.value)


def test_numba_backend_falls_back_for_other_dtypes():
    with minitorch.use_backend("numba"):
        a = minitorch.tensor([1, 2, 3])
        assert (a + a).tolist() == [2, 4, 6]
        assert (a > 1).tolist() == [False, True, True]
        assert a.sum().item() == 6
        assert minitorch.tensor([1.0, 3.0]).mean().item() == 2.0


def test_generated_kernels_are_keyed_by_source(tmp_path, monkeypatch):
    from minitorch.fast import compile as jit
    from minitorch.fast import scalars

    monkeypatch.setenv("MINITORCH_CACHE_DIR", str(tmp_path))
    k1 = jit.elementwise("3.1", "probe", scalars.neg)
    assert jit.elementwise("3.1", "probe", scalars.neg) is k1
    files = list((tmp_path / "fast").glob("mt_3_1_probe_*.py"))
    assert len(files) == 1
    out = np.empty(3, np.float32)
    idx = np.array([3], np.int64), np.array([1], np.int64)
    k1(out, *idx, np.arange(3, dtype=np.float32), *idx)
    assert out.tolist() == [0.0, -1.0, -2.0]
