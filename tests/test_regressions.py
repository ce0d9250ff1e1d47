"""One regression test per wrong answer of issue 9, on every backend where it applies.

Each failed on the code before the fix (the comment says what it gave).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from backends_util import BACKENDS, on

import minitorch as mt
from minitorch.nn import functional as F

NAN, INF = math.nan, math.inf


def same(got, want):
    np.testing.assert_array_equal(np.asarray(got, dtype=np.float64), np.asarray(want, np.float64))


@pytest.mark.parametrize("backend", BACKENDS)
def test_negative_step_views(backend):
    # numba gave [3, 3, 2, 1] and a sum of 9: its kernels read before the view's first element
    with on(backend) as T:
        x = T([0.0, 1.0, 2.0, 3.0])
        same((x[::-1] + 0).numpy(), [3, 2, 1, 0])
        assert x[::-1].sum().item() == 6
        y = T(np.arange(12.0).reshape(3, 4))
        want = np.arange(12.0).reshape(3, 4)[::-1, ::-2]
        np.testing.assert_allclose(y[::-1, ::-2].exp().numpy(), np.exp(want), rtol=1e-12)
        same(y[::-1, ::-2].max(axis=0).numpy(), want.max(axis=0))
        same((y[::-1, ::-2] * y[:, 1::2]).numpy(), want * np.arange(12.0).reshape(3, 4)[:, 1::2])


@pytest.mark.parametrize("backend", BACKENDS)
def test_reduce_over_no_axes_keeps_the_view(backend):
    # python and numba ignored the offset and strides: x[1, 2].sum() gave 0
    with on(backend) as T:
        x = T(np.arange(12.0).reshape(3, 4))
        assert x[1, 2].sum().item() == 6
        assert x[1, 2].max().item() == 6
        assert x[1, 2].mean().item() == 6
        same(x[:, 1:].sum(axis=()).numpy(), np.arange(12.0).reshape(3, 4)[:, 1:])
        same(x.T.min(axis=()).numpy(), np.arange(12.0).reshape(3, 4).T)


@pytest.mark.parametrize("backend", BACKENDS)
def test_axis_minus_one_on_a_0d_tensor(backend):
    # raised "axis -1 is out of range" everywhere; numpy and PyTorch accept 0 and -1
    with on(backend) as T:
        assert T(3.0).sum(axis=-1).item() == 3
        assert T(3.0).max(axis=0, keepdims=True).item() == 3
        assert T(3.0).sum(axis=(0,)).shape == ()


@pytest.mark.parametrize("backend", BACKENDS)
def test_nan_propagates_through_max_min_maximum_argmax(backend):
    # python, numba and cuda dropped the NaN (max gave 1.0 or 0.0, argmax 0)
    with on(backend) as T:
        for values in ([1.0, NAN, 0.0], [NAN, 1.0, 0.0], [0.0, 1.0, NAN]):
            x = T(values)
            assert math.isnan(x.max().item()) and math.isnan(x.min().item())
            assert x.argmax(axis=0).item() == np.argmax(values)
            two = T([2.0, 2.0, 2.0])
            same(x.maximum(two).numpy(), np.maximum(values, 2.0))
            same(two.maximum(x).numpy(), np.maximum(2.0, values))
            same(two.minimum(x).numpy(), np.minimum(2.0, values))
        m = T([[1.0, NAN], [3.0, 2.0]])
        same(m.max(axis=1).numpy(), [NAN, 3.0])
        same(m.min(axis=0).numpy(), [1.0, NAN])


@pytest.mark.parametrize("backend", BACKENDS)
def test_relu_of_minus_inf(backend):
    # 0.0 * x in the formula gave NaN on python, numba and cuda
    with on(backend) as T:
        same(T([-INF, INF, -1.0, NAN]).relu().numpy(), [0.0, INF, 0.0, NAN])


@pytest.mark.parametrize("backend", BACKENDS)
def test_exp_overflows_to_inf(backend):
    # python raised OverflowError from math.exp
    with on(backend) as T:
        same(T(np.array([1000.0, -1000.0, 0.0])).exp().numpy(), [INF, 0.0, 1.0])
        same((T(np.array([10.0])) ** 400.0).numpy(), [INF])


@pytest.mark.parametrize("backend", BACKENDS)
def test_grad_of_pow_zero_at_zero(backend):
    # b * a ** (b - 1) is 0 * inf = NaN at a = 0
    with on(backend) as T:
        a = T([0.0, 2.0, -1.0], requires_grad=True)
        (a**0).sum().backward()
        same(a.grad.numpy(), [0.0, 0.0, 0.0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_cross_entropy(backend):
    # cuda failed: the class indices were made on the CPU
    with on(backend) as T:
        logits = T(np.array([[1.0, 2.0, 0.5], [0.5, 0.1, 0.0]]))
        got = F.cross_entropy(logits, T([1, 0])).item()
        z = np.array([[1.0, 2.0, 0.5], [0.5, 0.1, 0.0]])
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        assert got == pytest.approx(-(logp[0, 1] + logp[1, 0]) / 2, rel=1e-9)


@pytest.mark.parametrize("backend", BACKENDS)
def test_float_ops_of_bool_and_int(backend):
    # numpy failed on sigmoid(bool) and computed exp(bool) in float16
    with on(backend) as T:
        b = T([True, False])
        np.testing.assert_allclose(b.sigmoid().numpy(), [1 / (1 + math.exp(-1)), 0.5], rtol=1e-6)
        np.testing.assert_allclose(b.exp().numpy(), [math.e, 1.0], rtol=1e-6)
        np.testing.assert_allclose(T([1, 4]).sqrt().numpy(), [1.0, 2.0])
        assert b.exp().dtype == mt.float32


@pytest.mark.parametrize("backend", BACKENDS)
def test_pow_follows_ieee(backend):
    # python gave NaN for 0.0 ** -1 (ZeroDivisionError) and a complex for (-8.0) ** 0.5
    with on(backend) as T:
        a, b = T(np.array([0.0, -0.0, -8.0, 10.0])), T(np.array([-1.0, -1.0, 0.5, 400.0]))
        same((a**b).numpy(), np.power([0.0, -0.0, -8.0, 10.0], [-1.0, -1.0, 0.5, 400.0]))
