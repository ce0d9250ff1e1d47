"""The core (registry, Tensor, numpy and python backends) against numpy, with the reference solutions."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import minitorch as mt

settings.register_profile("project", derandomize=True, deadline=None, max_examples=20)
settings.load_profile("project")

BACKENDS = ["numpy", "python"]
UNARY = ["neg", "abs", "exp", "tanh", "sigmoid", "relu"]
BINARY = ["add", "sub", "mul", "maximum", "minimum", "lt", "eq", "ge"]
NP = {"neg": np.negative, "abs": np.abs, "exp": np.exp, "tanh": np.tanh, "relu": lambda x: np.maximum(x, 0),
      "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "add": np.add, "sub": np.subtract, "mul": np.multiply,
      "maximum": np.maximum, "minimum": np.minimum, "lt": np.less, "eq": np.equal, "ge": np.greater_equal}  # fmt: skip

small = hnp.arrays(np.float64, hnp.array_shapes(max_dims=3, max_side=4),
                   elements=st.floats(-3, 3, allow_nan=False))  # fmt: skip


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", UNARY)
@given(a=small)
def test_unary_ops(backend, name, a):
    with mt.use_backend(backend):
        got = mt.dispatch(name, mt.tensor(a)).numpy()
    np.testing.assert_allclose(got, NP[name](a), rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", BINARY)
@given(st.data())
def test_binary_ops_broadcast(backend, name, data):
    bs = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3))
    a, b = (
        data.draw(hnp.arrays(np.float64, s, elements=st.integers(-3, 3).map(float)))
        for s in bs.input_shapes
    )
    with mt.use_backend(backend):
        got = mt.dispatch(name, mt.tensor(a), mt.tensor(b)).numpy()
    np.testing.assert_array_equal(got, NP[name](a, b))


@pytest.mark.parametrize("backend", BACKENDS)
@given(a=small, keepdims=st.booleans(), data=st.data())
def test_reductions(backend, a, keepdims, data):
    axis = data.draw(st.none() | st.integers(-a.ndim, a.ndim - 1)) if a.ndim else None
    with mt.use_backend(backend):
        t = mt.tensor(a)
        for name in ["sum", "mean", "max", "min"]:
            got = getattr(t, name)(axis=axis, keepdims=keepdims).numpy()
            np.testing.assert_allclose(
                got, getattr(a, name)(axis=axis, keepdims=keepdims), rtol=1e-9
            )
        if a.ndim:
            ax = axis if axis is not None else -1
            np.testing.assert_array_equal(t.argmax(ax).numpy(), a.argmax(ax))


@pytest.mark.parametrize("backend", BACKENDS)
def test_batched_matmul_broadcasts_batch(backend):
    rng = np.random.default_rng(0)
    a, b = rng.random((2, 1, 3, 4)), rng.random((5, 4, 2))
    with mt.use_backend(backend):
        got = (mt.tensor(a) @ mt.tensor(b)).numpy()
    np.testing.assert_allclose(got, a @ b)


@pytest.mark.parametrize("backend", BACKENDS)
def test_where_and_views(backend):
    a = np.arange(12.0).reshape(3, 4)
    with mt.use_backend(backend):
        t = mt.tensor(a)
        np.testing.assert_array_equal(mt.where(t > 5, t, -t).numpy(), np.where(a > 5, a, -a))
        np.testing.assert_array_equal(t.T.reshape(2, 6).numpy(), a.T.reshape(2, 6))
        np.testing.assert_array_equal(t[1:, ::-2].contiguous().numpy(), a[1:, ::-2])
        np.testing.assert_array_equal(t[0].expand(2, 4).numpy(), np.broadcast_to(a[0], (2, 4)))


def test_dtypes_and_promotion():
    f32 = mt.ones(2)
    assert f32.dtype == mt.float32
    assert (f32 * 2.0).dtype == mt.float32, "python scalars are weak"
    assert (f32 + mt.ones(2, dtype="float64")).dtype == mt.float64
    assert mt.arange(3).dtype == mt.int64
    assert (mt.arange(3) / 2).dtype == mt.float32
    assert (f32 > 0).dtype == mt.bool_
    assert mt.tensor(np.zeros(2)).dtype == mt.float64, "numpy float64 arrays stay float64"


def test_repr_is_numpy_like():
    assert repr(mt.tensor([[1.0, 2.0], [3.0, 4.0]])) == "tensor([[1., 2.],\n        [3., 4.]])"
    assert repr(mt.arange(3)) == "tensor([0, 1, 2], dtype=int64)"


def test_seeded_random_is_reproducible():
    mt.manual_seed(3)
    a = mt.randn(4).numpy()
    mt.manual_seed(3)
    np.testing.assert_array_equal(a, mt.randn(4).numpy())


@pytest.mark.parametrize(
    "bad, words",
    [
        (lambda: mt.ones(2, 3) + mt.ones(4), ["add", "(2, 3)", "(4,)"]),
        (lambda: mt.ones(2, 3).sum(axis=5), ["sum", "axis 5", "2 dimension"]),
        (lambda: mt.ones(2, 3).permute(1, 1), ["permute", "(1, 1)"]),
        (lambda: mt.ones(2, 3).reshape(4, 2), ["reshape", "(2, 3)", "(4, 2)"]),
        (lambda: mt.ones(2, dtype="float16"), ["float16", "float32"]),
        (lambda: mt.ones(2, 3) @ mt.ones(2, 3), ["matmul", "(2, 3)"]),
        (lambda: mt.ones(2, 3)[5], ["getitem", "5", "size 2"]),
        (lambda: mt.ones(2).expand(3, 3), ["expand", "(2,)", "(3, 3)"]),
        (lambda: mt.dispatch("sum", mt.ones(2), axes=0), ["sum", "axes", "axis"]),
        (lambda: bool(mt.ones(3)), ["bool", "(3,)"]),
    ],
)
def test_errors_name_the_op_and_the_shapes(bad, words):
    with pytest.raises(mt.OpError) as info:
        bad()
    for w in words:
        assert w in str(info.value), f"{w!r} missing from: {info.value}"


def test_missing_kernel_says_which_backend():
    op = mt.register_op("test_only_identity", mt.OpKind.OPAQUE, 1, lambda a: a)
    try:
        with pytest.raises(mt.OpError, match="no kernel"):
            mt.dispatch("test_only_identity", mt.ones(2))
    finally:
        del mt.OPS[op.name]
