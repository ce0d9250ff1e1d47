"""Chapter 2 internals the graded tests do not cover: pad_slice, backends, errors, tracing hooks."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch as mt
from minitorch.autograd import gradcheck, pad_slice, tape_bytes
from minitorch.core.registry import OPS, OpKind


def test_every_differentiable_builtin_op_has_a_rule():
    from minitorch.core import ops

    names = (
        set(ops.UNARY)
        | set(ops.BINARY)
        | set(ops.REDUCE)
        | {
            "cast",
            "where",
            "argmax",
            "permute",
            "reshape",
            "expand",
            "getitem",
            "contiguous",
            "matmul",
            "pad_slice",
        }
    )
    missing = [n for n in sorted(names) if OPS[n].vjp is None]
    assert not missing, missing


@pytest.mark.parametrize("backend", ["numpy", "python"])
def test_pad_slice_kernels_and_its_adjoint(backend):
    g = np.arange(6, dtype=np.float64).reshape(2, 3) + 1
    key = (slice(1, 5, 2), slice(None, None, -1))
    with mt.use_backend(backend):
        out = pad_slice(mt.tensor(g), key, (5, 3)).numpy()
    want = np.zeros((5, 3))
    want[1:5:2, ::-1] = g
    np.testing.assert_array_equal(out, want)
    assert gradcheck(
        lambda v: pad_slice(v, key, (5, 3)) * mt.tensor(np.arange(15.0).reshape(5, 3)), g
    )


def test_pad_slice_rejects_a_wrong_window():
    with pytest.raises(mt.OpError, match="pad_slice"):
        pad_slice(mt.ones(3), (slice(0, 2),), (5,))


def test_backward_agrees_on_python_and_numpy_backends():
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    grads = []
    for backend in ("numpy", "python"):
        with mt.use_backend(backend):
            wt = mt.tensor(w, requires_grad=True)
            loss = (mt.tensor(x) @ wt).sigmoid()[:, 1:].sum()
            loss.backward()
            grads.append(wt.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-10)


@pytest.mark.parametrize(
    "fn",
    [
        lambda a, b: a.maximum(b) + a.minimum(b) * 2,
        lambda a, b: mt.where(a > b, a * b, a - b),
        lambda a, b: (abs(a) + 0.5) ** b,
        lambda a, b: a.min(axis=0) * b.sum(),
        lambda a, b: a.contiguous().astype("float64") * b,
    ],
)
def test_rules_that_are_not_exercises(fn):
    rng = np.random.default_rng(2)
    assert gradcheck(fn, rng.standard_normal((2, 3)), rng.standard_normal((2, 3)))


def test_comparisons_carry_no_gradient():
    x = mt.tensor([1.0, -2.0], requires_grad=True)
    y = (x * (x > 0).astype("float32")).sum() + x.argmax(axis=0).astype("float32")
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 0.0])


def test_backward_errors_say_what_to_do():
    with pytest.raises(RuntimeError, match="requires_grad=True"):
        mt.ones(2).sum().backward()
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"shape \(2,\).*grad="):
        (x * 2).backward()
    with pytest.raises(mt.OpError, match=r"gradient has shape \(3,\)"):
        (x * 2).backward(mt.ones(3))


def test_grad_helper_and_second_order():
    x = mt.tensor([2.0], requires_grad=True)
    y = x * x * x
    (g,) = mt.grad(y, [x])
    assert g.item() == pytest.approx(12.0)
    assert x.grad is None


def test_tape_bytes_counts_saved_storage_once():
    x = mt.ones(256, requires_grad=True)  # 1 KiB of float32
    y = x * x  # saves x (twice, one storage)
    assert tape_bytes(y) == 1024
    with mt.no_grad():
        assert tape_bytes(x * x) == 0


def test_backward_rules_are_recorded_through_dispatch():
    # The tracer of chapter 5 sees the backward pass because rules only call dispatch.
    seen = []
    original = mt.core.registry.dispatch

    def counting(name, *inputs, **attrs):
        seen.append(name)
        return original(name, *inputs, **attrs)

    import minitorch.core.tensor as tensor_mod

    old = tensor_mod.dispatch
    tensor_mod.dispatch = counting
    try:
        x = mt.tensor([1.0, 2.0], requires_grad=True)
        (x.exp() * x).sum().backward()
    finally:
        tensor_mod.dispatch = old
    assert "mul" in seen and "exp" in seen
    assert OPS["pad_slice"].kind is OpKind.OPAQUE


def test_dataloader_is_seeded_and_covers_every_row():
    x = np.arange(10, dtype=np.float32).reshape(10, 1)
    y = np.arange(10)
    a = [b[1].numpy().tolist() for b in mt.nn.DataLoader(x, y, batch_size=4, seed=3)]
    b = [b[1].numpy().tolist() for b in mt.nn.DataLoader(x, y, batch_size=4, seed=3)]
    assert a == b and sorted(sum(a, [])) == list(range(10)) and len(a) == 3
    loader = mt.nn.DataLoader(x, y, batch_size=4, seed=3, drop_last=True)
    assert len(list(loader)) == 2 and list(loader) != []


def test_parameter_assign_keeps_shape():
    p = mt.nn.Parameter([1.0, 2.0])
    p.assign_(mt.tensor([3.0, 4.0]))
    assert p.tolist() == [3.0, 4.0] and p.requires_grad and p.is_leaf()
    with pytest.raises(mt.OpError, match="cannot take values of shape"):
        p.assign_(mt.ones(3))


def test_backward_on_the_cuda_backend():
    # Under the CUDA simulator (tests/conftest.py): pad_slice's host kernel, views and matmul.
    x = mt.tensor(np.arange(6.0).reshape(2, 3), device="cuda", requires_grad=True)
    w = mt.tensor(np.ones((3, 2)), device="cuda", requires_grad=True)
    ((x[:, 1:] * 2.0).sum() + (x @ w).relu().mean()).backward()
    np.testing.assert_allclose(x.grad.numpy(), [[0.5, 2.5, 2.5], [0.5, 2.5, 2.5]])
    np.testing.assert_allclose(w.grad.numpy(), [[0.75, 0.75], [1.25, 1.25], [1.75, 1.75]])


def test_grad_hooks_fire_once_each_when_the_gradient_is_final():
    """A hook sees its parameter's whole gradient for this backward, while the walk is still going
    (the first layer's weight is used last, so its hook comes after the second layer's)."""
    rng = np.random.default_rng(0)
    w1 = mt.nn.Parameter(rng.normal(size=(3, 4)))
    w2 = mt.nn.Parameter(rng.normal(size=(4, 2)))
    b = mt.nn.Parameter(np.zeros(2, np.float32))  # float32 leaf in a float64 graph
    x = mt.tensor(rng.normal(size=(5, 3)))
    seen = []
    for name, p in (("w1", w1), ("w2", w2), ("b", b)):
        p.register_grad_hook(lambda g, name=name: seen.append((name, g.numpy().copy(), w1.grad)))
    h = (x @ w1).relu()
    loss = ((h @ w2 + b.astype(mt.float64)) * (h @ w2)).sum()  # w2 used twice
    loss.backward()
    names = [s[0] for s in seen]
    assert sorted(names) == ["b", "w1", "w2"] and names[-1] == "w1"
    for name, g, w1_grad_then in seen:
        p = {"w1": w1, "w2": w2, "b": b}[name]
        assert g.dtype == p.numpy().dtype and np.array_equal(g, p.grad.numpy())
        assert w1_grad_then is None  # fired during the walk, before .grad was written
    seen.clear()
    loss2 = (x @ w1).sum()  # a hook only for leaves that got a gradient; each backward again
    loss2.backward()
    assert [s[0] for s in seen] == ["w1"]


def test_grad_hooks_on_a_root_leaf_and_removal():
    w = mt.nn.Parameter(np.ones(1))
    got = []
    remove = w.register_grad_hook(got.append)
    w.backward()  # the root is the leaf: no rule runs, the hook still fires
    assert [g.item() for g in got] == [1.0]
    remove()
    (w * 2).sum().backward()
    assert len(got) == 1 and w.grad.item() == 3.0
    with pytest.raises(mt.OpError, match="register_grad_hook: fn is a int"):
        w.register_grad_hook(3)


def test_grad_hooks_leave_the_ops_as_they_were_after_an_error():
    w = mt.nn.Parameter(np.ones(2))
    y = w * 3
    op = y._node.op
    w.register_grad_hook(lambda g: (_ for _ in ()).throw(ValueError("hook failed")))
    with pytest.raises(ValueError, match="hook failed"):
        y.sum().backward()
    assert y._node.op is op
