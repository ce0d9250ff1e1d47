"""Graded: the backward rules (exercises 2.1-2.6), against numpy and finite differences."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import minitorch
from autograder.harness import assert_close, check, graded
from minitorch.autograd.rules import (
    binary_vjp,
    matmul_vjp,
    reduce_vjp,
    unary_vjp,
    unbroadcast,
    view_vjp,
)

from .util import away_from_zero, check_against_finite_differences, shapes, t64, values


@st.composite
def broadcast_pair(draw):
    """A shape and a bigger shape it broadcasts to (extra leading dims, 1s that grow)."""
    big = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=1, max_side=3))
    k = draw(st.integers(0, len(big)))
    small = tuple(1 if draw(st.booleans()) else n for n in big[len(big) - k :])
    return small, big


# ---------------------------------------------------------------- 2.1


@graded("2.1", points=2)
@given(pair=broadcast_pair(), data=st.data())
def test_unbroadcast_sums_copies(pair, data):
    small, big = pair
    g = data.draw(values(big))
    got = unbroadcast(t64(g), small)
    lead = len(big) - len(small)
    want = g.sum(axis=tuple(range(lead))) if lead else g
    want = want.sum(axis=tuple(d for d, n in enumerate(small) if n == 1), keepdims=True)
    assert_close(got.numpy(), want.reshape(small), "2.1", shape=small, grad=g)


@graded("2.1", points=1)
def test_unbroadcast_same_shape_and_example():
    """
    contract: Return ``grad`` itself when the shapes already match.
    """
    g = minitorch.ones(2, 3, 4)
    assert_close(unbroadcast(g, (3, 1)).numpy(), np.full((3, 1), 8.0), "2.1", shape=(3, 1))
    x = minitorch.ones(2, 3)
    check(
        unbroadcast(x, (2, 3)).shape == (2, 3),
        "2.1",
        "same shape must come back unchanged",
        value=unbroadcast(x, (2, 3)).shape,
    )
    check(unbroadcast(x, [2, 3]) is x, "2.1", "when the shapes already match, return grad itself "
          "(the same tensor, no copy)")  # fmt: skip
    assert_close(unbroadcast(x, ()).numpy(), np.array(6.0), "2.1", shape=())


# ---------------------------------------------------------------- 2.2

UNARY = {
    "neg": (lambda x: -x, lambda a: -np.ones_like(a), False),
    "abs": (lambda x: abs(x), np.sign, False),
    "exp": (lambda x: x.exp(), np.exp, False),
    "log": (lambda x: x.log(), lambda a: 1 / a, True),
    "sqrt": (lambda x: x.sqrt(), lambda a: 0.5 / np.sqrt(a), True),
    "recip": (lambda x: x.recip(), lambda a: -1 / a**2, False),
    "tanh": (lambda x: x.tanh(), lambda a: 1 - np.tanh(a) ** 2, False),
    "sigmoid": (lambda x: x.sigmoid(), lambda a: np.exp(-a) / (1 + np.exp(-a)) ** 2, False),
    "relu": (lambda x: x.relu(), lambda a: (a > 0).astype(float), False),
}


@graded("2.2", points=3)
@settings(max_examples=8)
@given(shape=shapes, data=st.data())
def test_unary_rules_match_finite_differences(shape, data):
    a = data.draw(away_from_zero(shape))
    for op, (fn, _, positive) in UNARY.items():
        x = np.abs(a) if positive else a
        check_against_finite_differences("2.2", fn, x, op=op, a=x)


@graded("2.2", points=2)
@given(shape=shapes, data=st.data())
def test_unary_rules_match_derivatives(shape, data):
    a = data.draw(away_from_zero(shape))
    g = data.draw(values(shape))
    for op, (fn, deriv, positive) in UNARY.items():
        x = np.abs(a) if positive else a
        xt = t64(x)
        got = unary_vjp(op, t64(g), fn(xt), xt)
        assert_close(got.numpy(), g * deriv(x), "2.2", op=op, a=x, grad=g)


@graded("2.2", points=1)
def test_unary_rules_at_kinks_and_dtype():
    """
    contract: Raise ``KeyError`` for another op.
    """
    a = minitorch.tensor([-1.0, 0.0, 2.0])
    g = minitorch.tensor([5.0, 5.0, 5.0])
    assert_close(unary_vjp("relu", g, a.relu(), a).numpy(), [0, 0, 5.0], "2.2", op="relu")
    assert_close(unary_vjp("abs", g, abs(a), a).numpy(), [-5.0, 0, 5.0], "2.2", op="abs")
    got = unary_vjp("exp", g, a.exp(), a)
    check(got.dtype == minitorch.float32, "2.2", f"float32 in, {got.dtype} out", op="exp")
    _raises_key_error("2.2", unary_vjp, "add", g, a, a)


# ---------------------------------------------------------------- 2.3


@graded("2.3", points=3)
@given(pair=broadcast_pair(), swap=st.booleans(), data=st.data())
def test_binary_rules_broadcast_finite_differences(pair, swap, data):
    small, big = pair
    sa, sb = (big, small) if swap else (small, big)
    a = data.draw(values(sa))
    b = data.draw(away_from_zero(sb, 0.5, 2.0))
    for op, fn in {
        "add": lambda x, y: x + y,
        "sub": lambda x, y: x - y,
        "mul": lambda x, y: x * y,
        "div": lambda x, y: x / y,
    }.items():
        check_against_finite_differences("2.3", fn, a, b, op=op, a=a, b=b)


@graded("2.3", points=1)
def test_binary_rules_example():
    """
    contract: Raise ``KeyError`` for another op.
    """
    a, b = minitorch.tensor([[1.0], [2.0]]), minitorch.tensor([3.0, 4.0, 5.0])
    ga, gb = binary_vjp("mul", minitorch.ones(2, 3), a * b, a, b)
    assert_close(ga.numpy(), [[12.0], [12.0]], "2.3", op="mul")
    assert_close(gb.numpy(), [3.0, 3.0, 3.0], "2.3", op="mul")
    ga, gb = binary_vjp("div", minitorch.ones(2, 3), a / b, a, b)
    assert_close(
        gb.numpy(), -(np.array([[1.0], [2.0]]) / np.array([3.0, 4, 5]) ** 2).sum(0), "2.3", op="div"
    )
    _raises_key_error("2.3", binary_vjp, "exp", minitorch.ones(2, 3), a * b, a, b)


def _raises_key_error(exercise, rule, op, *args):
    """A rule asked for an op it does not cover raises KeyError (nothing else, no result)."""
    try:
        got = rule(op, *args)
    except KeyError:
        return
    except Exception as e:  # noqa: BLE001 - which exception it is is what is checked
        check(False, exercise, f"{rule.__name__}({op!r}, ...) must raise KeyError for an op it "
              f"has no rule for, got {type(e).__name__}: {e}", op=op)  # fmt: skip
    else:
        check(False, exercise, f"{rule.__name__}({op!r}, ...) must raise KeyError for an op it "
              f"has no rule for, got a result: {got!r}", op=op)  # fmt: skip


# ---------------------------------------------------------------- 2.4


@graded("2.4", points=3)
@given(shape=shapes, keepdims=st.booleans(), data=st.data())
def test_reduce_rules_finite_differences(shape, keepdims, data):
    """
    contract: ``mean``: the same, divided by the number of elements averaged;
    """
    a = data.draw(values(shape))
    axes = data.draw(st.sets(st.integers(0, max(len(shape) - 1, 0)), max_size=len(shape)))
    axis = tuple(sorted(axes)) if axes and shape else None
    for op in ("sum", "mean", "max"):
        x = a + np.arange(a.size).reshape(a.shape) * 1e-2 if op == "max" else a  # no ties

        def fn(t, op=op):
            return getattr(t, op)(axis=axis, keepdims=keepdims) * 1.5

        check_against_finite_differences("2.4", fn, x, op=op, a=x, axis=axis, keepdims=keepdims)


@graded("2.4", points=2)
def test_reduce_max_shares_ties():
    """
    contract: ``max``: only the elements equal to the maximum get it; when several tie, share it evenly (divide by how many tie), so the rule stays exact.
    """
    a = minitorch.tensor([[1.0, 5.0, 5.0], [2.0, 0.0, 1.0]])
    got = reduce_vjp("max", minitorch.ones(2), a.max(axis=1), a, (1,), False)
    assert_close(got.numpy(), [[0, 0.5, 0.5], [1, 0, 0]], "2.4", op="max", a=a.numpy())
    got = reduce_vjp("mean", minitorch.tensor([[6.0]]), a.mean(keepdims=True), a, (0, 1), True)
    assert_close(got.numpy(), np.ones((2, 3)), "2.4", op="mean")
    got = reduce_vjp("sum", minitorch.tensor([1.0, 2.0, 3.0]), a.sum(axis=0), a, (0,), False)
    assert_close(got.numpy(), [[1, 2, 3], [1, 2, 3]], "2.4", op="sum")


# ---------------------------------------------------------------- 2.5


@graded("2.5", points=3)
@given(
    batch_a=st.lists(st.integers(1, 2), max_size=2),
    batch_b=st.lists(st.integers(1, 2), max_size=2),
    n=st.integers(1, 3),
    k=st.integers(1, 3),
    m=st.integers(1, 3),
    data=st.data(),
)
def test_matmul_rule_batched_broadcast(batch_a, batch_b, n, k, m, data):
    # Make the batch dims broadcastable: where both have a dim, one of them is 1 or they agree.
    """
    contract: With batch dimensions the rule holds per batch; a batch dimension that was broadcast (missing, or of size 1) must then be summed away
    """
    ra, rb = batch_a[::-1], batch_b[::-1]
    rb = [b if i >= len(ra) or ra[i] == 1 or b == 1 else ra[i] for i, b in enumerate(rb)]
    sa, sb = tuple(ra[::-1]) + (n, k), tuple(rb[::-1]) + (k, m)
    a, b = data.draw(values(sa)), data.draw(values(sb))
    w = data.draw(values(np.broadcast_shapes(sa[:-2], sb[:-2]) + (n, m)))
    check_against_finite_differences(
        "2.5", lambda x, y: (x @ y) * t64(w), a, b, a_shape=sa, b_shape=sb, weights=w
    )


@graded("2.5", points=1)
def test_matmul_rule_example():
    a, b = minitorch.ones(2, 3), minitorch.ones(3, 4)
    ga, gb = matmul_vjp(minitorch.ones(2, 4), a @ b, a, b)
    check(
        ga.shape == (2, 3) and gb.shape == (3, 4),
        "2.5",
        f"shapes {ga.shape}, {gb.shape}",
        value=tuple(ga.shape) + tuple(gb.shape),
    )
    assert_close(ga.numpy(), np.full((2, 3), 4.0), "2.5")
    assert_close(gb.numpy(), np.full((3, 4), 2.0), "2.5")


# ---------------------------------------------------------------- 2.6


@graded("2.6", points=3)
@settings(max_examples=15)
@given(shape=shapes.filter(lambda s: len(s) >= 1), data=st.data())
def test_view_rules_finite_differences(shape, data):
    a = data.draw(values(shape))
    order = tuple(data.draw(st.permutations(range(len(shape)))))
    weights = data.draw(values(tuple(shape[d] for d in order)))
    check_against_finite_differences(
        "2.6", lambda x: x.permute(*order) * t64(weights), a, op="permute", order=order, a=a
    )
    w = data.draw(values((a.size,)))
    check_against_finite_differences("2.6", lambda x: x.reshape(-1) * t64(w), a, op="reshape", a=a)
    big = (2,) + tuple(2 if n == 1 else n for n in shape)
    wb = data.draw(values(big))
    check_against_finite_differences(
        "2.6", lambda x: x.expand(*big) * t64(wb), a, op="expand", shape=big, a=a
    )
    key = tuple(
        data.draw(
            st.one_of(
                st.integers(-n, n - 1),
                st.builds(
                    slice,
                    st.none() | st.integers(-n, n),
                    st.none() | st.integers(-n, n),
                    st.sampled_from([None, 1, 2, -1]),
                ),
            )
        )
        for n in shape
    )
    check_against_finite_differences("2.6", lambda x: x[key] * 3.0, a, op="getitem", key=key, a=a)


@graded("2.6", points=1)
def test_view_rules_examples():
    a = minitorch.zeros(2, 3, 4)
    got = view_vjp("permute", minitorch.ones(4, 2, 3), a, {"order": (2, 0, 1)})
    check(
        got.shape == (2, 3, 4),
        "2.6",
        f"permute gave shape {got.shape}",
        value=got.shape,
        order=(2, 0, 1),
    )
    g = minitorch.tensor([1.0, 2.0])
    got = view_vjp("getitem", g, minitorch.zeros(5), {"key": (slice(1, 5, 2),)})
    assert_close(got.numpy(), [0, 1.0, 0, 2.0, 0], "2.6", op="getitem", key="[1:5:2]")
