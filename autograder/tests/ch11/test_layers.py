"""Graded tests, chapter 11: the embedding's scatter-add (11.1), layer norm's backward (11.2),
attention from registry ops (11.3)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import minitorch
from autograder.harness import assert_close, check, graded, text
from minitorch import OpError, dispatch
from minitorch.transformer import attention
from minitorch.transformer.ops import layer_norm_vjp, scatter_add_rows

from .util import attention_ref, layer_norm_grads, t


def _raises(fn, *words) -> tuple[bool, str, str]:
    """Whether ``fn`` raises an OpError of op ``words[0]`` naming every word, with the hint the
    contract promises (``OpError(op, problem, hint)``); its message; its op."""
    try:
        fn()
    except OpError as e:
        msg = str(e)
        if not e.hint:
            return False, f"{msg} (no hint: the contract raises OpError(op, problem, hint))", e.op
        return e.op == words[0] and all(w in msg for w in words), msg, e.op
    except Exception as e:  # noqa: BLE001 - the wrong kind of error
        return False, f"{type(e).__name__}: {e}", ""
    return False, "no error", ""


# ---------------------------------------------------------------- 11.1 scatter_add_rows


@graded("11.1", points=2)
@settings(max_examples=25)
@given(data=st.data())
def test_scatter_add_matches_add_at(data):
    n, c, v = (
        data.draw(st.integers(0, 12)),
        data.draw(st.integers(1, 4)),
        data.draw(st.integers(1, 5)),
    )
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    ids = rng.integers(0, v, n)
    grad = rng.standard_normal((n, c))
    want = np.zeros((v, c))
    np.add.at(want, ids, grad)  # every repeated id adds its row
    got = scatter_add_rows(grad, ids, v)
    assert_close(got, want, "11.1", rtol=1e-12, atol=1e-12, ids=ids)


@graded("11.1", points=1)
def test_scatter_add_duplicates_dtype_and_unused_rows():
    """contract: Return a new ``(num_rows, C)`` array of ``grad``'s dtype"""
    grad = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32)
    got = scatter_add_rows(grad, np.array([2, 0, 2]), 4)
    want = np.array([[3.0, 4.0], [0.0, 0.0], [6.0, 8.0], [0.0, 0.0]], np.float32)
    assert_close(got, want, "11.1", rtol=0, atol=0)
    check(got.dtype == np.float32, "11.1", "keep grad's dtype", value=text(str(got.dtype)))
    check(not np.shares_memory(got, grad), "11.1", "return a new array")
    # every id its own row: the sum is grad's values, still in a new array
    same = scatter_add_rows(grad, np.array([0, 1, 2]), 3)
    assert_close(same, grad, "11.1", rtol=0, atol=0)
    check(not np.shares_memory(same, grad), "11.1", "ids [0, 1, 2]: return a new array, not grad")
    # inf and NaN stay in the rows they are added to; a row never looked up is zeros
    bad = np.array([[np.inf, 1.0], [np.nan, 2.0], [3.0, -np.inf]])
    got = scatter_add_rows(bad, np.array([2, 0, 2]), 4)
    want = np.array([[np.nan, 2.0], [0.0, 0.0], [np.inf, -np.inf], [0.0, 0.0]])
    check(bool(np.array_equal(got, want, equal_nan=True)), "11.1",
          "grad with inf and NaN, ids [2, 0, 2]: rows 1 and 3 are never looked up and stay 0",
          value=got, expected=want)  # fmt: skip


@graded("11.1", points=1)
def test_scatter_add_errors():
    """contract: Raise ``OpError("embedding_grad", problem, hint)`` when an id lies outside"""
    g = np.ones((2, 3))
    for grad, ids, words in (
        (g, np.array([0, 5]), ("embedding_grad", "5")),
        (g, np.array([0, 4]), ("embedding_grad", "4")),  # the boundary: [0, num_rows) excludes 4
        (g, np.array([-1, 0]), ("embedding_grad", "-1")),
        (g, np.array([0, 1, 1]), ("embedding_grad", "(2, 3)", "(3,)")),
        (np.ones(2), np.array([0, 1]), ("embedding_grad", "(2,)")),  # grad is not (N, C)
        (g, np.array([[0], [1]]), ("embedding_grad", "(2, 3)", "(2, 1)")),  # ids is not (N,)
    ):
        ok, msg, op = _raises(lambda grad=grad, ids=ids: scatter_add_rows(grad, ids, 4), *words)
        check(
            ok,
            "11.1",
            f"grad {grad.shape}, ids {ids.tolist()}, num_rows 4 must raise OpError naming {words}",
            value=text(op),
            got=msg,
        )


@graded("11.1", points=1)
def test_embedding_backward_through_autograd():
    rng = np.random.default_rng(3)
    w = minitorch.tensor(rng.standard_normal((6, 3)), requires_grad=True)
    ids = minitorch.tensor(np.array([[1, 4, 1], [0, 1, 5]]))
    g = rng.standard_normal((2, 3, 3))
    (dispatch("embedding", w, ids) * t(g)).sum().backward()
    want = np.zeros((6, 3))
    np.add.at(want, ids.numpy().reshape(-1), g.reshape(-1, 3))
    assert_close(w.grad.numpy(), want, "11.1", rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- 11.2 layer_norm_vjp


@graded("11.2", points=3)
@settings(max_examples=20)
@given(data=st.data())
def test_layer_norm_vjp_against_the_jacobian(data):
    shape = data.draw(st.sampled_from([(5,), (3, 4), (2, 3, 6), (4, 1), (2, 2, 2)]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    eps = data.draw(st.sampled_from([1e-5, 0.5]))
    x = rng.standard_normal(shape) * data.draw(st.sampled_from([1.0, 30.0]))
    w, g = rng.standard_normal(shape[-1:]), rng.standard_normal(shape)
    gx, gw, gb = layer_norm_vjp(t(g), t(x), t(w), eps)
    want = layer_norm_grads(g, x, w, eps)
    for name, got, exp in (("x", gx, want[0]), ("weight", gw, want[1]), ("bias", gb, want[2])):
        assert_close(got.numpy(), exp, "11.2", rtol=1e-7, atol=1e-9, grad_for=name, shape=shape)


@graded("11.2", points=1)
def test_layer_norm_vjp_far_from_zero_and_on_cuda():
    """contract: Write the result with Tensor ops only
    contract: never numpy, so that the backward pass can be traced and runs on every backend"""
    # rows of large magnitude and a small spread: a variance as mean(x*x) - mean(x)**2 loses it
    rng = np.random.default_rng(11)
    x = 1e6 + rng.standard_normal((3, 5))
    w, g = rng.standard_normal(5), rng.standard_normal((3, 5))
    want = layer_norm_grads(g, x, w, 1e-5)
    got = layer_norm_vjp(t(g), t(x), t(w), 1e-5)
    for name, a, b in zip(("x", "weight", "bias"), got, want):
        assert_close(a.numpy(), b, "11.2", rtol=1e-6, atol=1e-8, grad_for=name, x="1e6 + N(0, 1)")
    # Tensor ops only: cuda inputs give cuda gradients (the simulator without a GPU)
    x, g = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    want = layer_norm_grads(g, x, w[:3], 1e-5)
    got = layer_norm_vjp(*(t(a).to("cuda") for a in (g, x, w[:3])), 1e-5)
    for name, a, b in zip(("x", "weight", "bias"), got, want):
        check(str(a.device) == "cuda", "11.2", f"cuda inputs should give a cuda gradient for {name}",
              value=text(str(a.device)))  # fmt: skip
        assert_close(a.numpy(), b, "11.2", rtol=1e-7, atol=1e-9, grad_for=name, device="cuda")


@graded("11.2", points=1)
def test_layer_norm_vjp_constant_grad_is_lost():
    x = minitorch.tensor([[1.0, 2.0, 3.0], [0.0, 10.0, -4.0]])
    gx, gw, gb = layer_norm_vjp(minitorch.ones(2, 3), x, minitorch.ones(3), 1e-5)
    assert_close(gx.numpy(), np.zeros((2, 3)), "11.2", rtol=0, atol=1e-5)
    assert_close(gb.numpy(), [2.0, 2.0, 2.0], "11.2", rtol=1e-6, atol=1e-6)
    check(gx.shape == (2, 3) and gw.shape == (3,), "11.2", "shapes", value=[*gx.shape, *gw.shape])


@graded("11.2", points=1)
def test_layer_norm_backward_through_autograd():
    rng = np.random.default_rng(5)
    x, w, b = rng.standard_normal((2, 3, 4)), rng.standard_normal(4), rng.standard_normal(4)
    g = rng.standard_normal((2, 3, 4))

    def loss(x, w, b):
        return (dispatch("layer_norm", x, w, b, eps=1e-5) * t(g)).sum()

    xs = [minitorch.tensor(a, requires_grad=True) for a in (x, w, b)]
    loss(*xs).backward()
    want = layer_norm_grads(g, x, w, 1e-5)
    for got, exp in zip(xs, want):
        assert_close(got.grad.numpy(), exp, "11.2", rtol=1e-7, atol=1e-9)


# ---------------------------------------------------------------- 11.3 attention


@graded("11.3", points=3)
@settings(max_examples=25)
@given(data=st.data())
def test_attention_matches_numpy(data):
    lead = data.draw(st.sampled_from([(), (2,), (2, 3), (1, 2)]))
    tk = data.draw(st.integers(1, 5))
    tq = data.draw(st.integers(1, tk))
    d, dv = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 3))
    causal = data.draw(st.booleans())
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    scale = data.draw(st.sampled_from([1.0, 40.0]))  # large scores: softmax must stay finite
    q, k, v = (
        rng.standard_normal(lead + s) * f
        for s, f in (((tq, d), scale), ((tk, d), 1.0), ((tk, dv), 1.0))
    )
    mask = None
    if data.draw(st.booleans()):
        mask = rng.random(lead[:1] + (1, tk)) < 0.7
        mask[..., -1] = True  # every query keeps at least its last key visible
    got = attention(t(q), t(k), t(v), causal=causal, key_mask=None if mask is None else t(mask))
    assert_close(got.numpy(), attention_ref(q, k, v, causal, mask), "11.3", rtol=1e-9, atol=1e-9,
                 causal=causal, shapes=(q.shape, k.shape, v.shape))  # fmt: skip


@graded("11.3", points=1)
def test_attention_example_and_offset_causal():
    """contract: a key where it is False is hidden
    contract: ``causal=True``: query ``i`` may only see keys
    """
    q = k = v = minitorch.tensor([[[1.0, 0.0], [0.0, 1.0]]])
    want = attention_ref(q.numpy(), k.numpy(), v.numpy(), True, None)
    assert_close(attention(q, k, v).numpy(), want, "11.3", rtol=1e-6, atol=1e-6)
    # one query (the last position) against three keys sees all three
    rng = np.random.default_rng(7)
    q1, k3, v3 = (
        rng.standard_normal((1, 2)),
        rng.standard_normal((3, 2)),
        rng.standard_normal((3, 2)),
    )
    got = attention(t(q1), t(k3), t(v3), causal=True).numpy()
    assert_close(got, attention_ref(q1, k3, v3, False, None), "11.3", rtol=1e-9, atol=1e-9)
    # every score is below -1e9: a hidden key must still lose to each visible one (-inf)
    q = np.array([[-1e5, 0.0]])
    k = np.array([[1e5, 0.0], [1.1e5, 0.0], [0.9e5, 0.0]])
    v = np.array([[1.0, 0.0], [0.0, 1.0], [5.0, 5.0]])
    mask = np.array([True, True, False])
    got = attention(t(q), t(k), t(v), causal=False, key_mask=t(mask)).numpy()
    assert_close(got, attention_ref(q, k, v, False, mask), "11.3", rtol=1e-9, atol=1e-9,
                 scores=text("about -7e9, -7.8e9, -6.4e9 (the last hidden)"))  # fmt: skip


@graded("11.3", points=1)
def test_attention_errors():
    """contract: Raise ``OpError("attention", problem, hint)`` naming the shapes"""
    a, b = minitorch.ones(2, 3), minitorch.ones(2, 4)
    cases = [
        (lambda: attention(a, b, b), ("attention", "(2, 3)", "(2, 4)")),
        (lambda: attention(a, a, minitorch.ones(3, 3)), ("attention", "(2, 3)", "(3, 3)")),
        (lambda: attention(minitorch.ones(3), a, a), ("attention", "(3,)")),
        (lambda: attention(a, minitorch.ones(3), a), ("attention", "(3,)")),  # a 1-D key
        (lambda: attention(a, a, minitorch.ones(2)), ("attention", "(2,)")),  # a 1-D value
        (lambda: attention(a, a, a, key_mask=minitorch.ones(2, 2)), ("attention", "float32")),
    ]
    for k, (fn, words) in enumerate(cases):
        ok, msg, op = _raises(fn, *words)
        check(ok, "11.3", f"case {k} must raise OpError naming {words}", value=text(op), got=msg)


@graded("11.3", points=1)
def test_attention_is_a_composite_of_registry_ops():
    rng = np.random.default_rng(9)
    q, k, v = (t(rng.standard_normal((2, 3, 4))) for _ in range(3))
    graph = minitorch.jit(lambda q, k, v: attention(q, k, v)).trace(q, k, v)
    ops = sorted({n.op for n in graph.nodes} - {"input", "const"})
    check({"matmul", "causal_mask", "softmax"} <= set(ops), "11.3",
          "attention must be built from registry ops the tracer records", value=text(sorted({"matmul", "causal_mask", "softmax"} & set(ops))))  # fmt: skip
    xs = [minitorch.tensor(a.numpy(), requires_grad=True) for a in (q, k, v)]
    attention(*xs).sum().backward()
    eps, base = 1e-6, attention_ref(q.numpy(), k.numpy(), v.numpy(), True, None).sum()
    qp = q.numpy().copy()
    qp[0, 1, 2] += eps
    fd = (attention_ref(qp, k.numpy(), v.numpy(), True, None).sum() - base) / eps
    assert_close(xs[0].grad.numpy()[0, 1, 2], fd, "11.3", rtol=1e-4, atol=1e-5)
