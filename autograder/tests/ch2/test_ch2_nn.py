"""Graded: losses (2.9-2.10), parameter discovery (2.11), optimizers (2.12-2.13), training."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minitorch
from autograder.harness import assert_close, check, graded, text
from minitorch.core.errors import OpError
from minitorch.core.registry import Spec
from minitorch.core.tensor import Tensor
from minitorch.nn import SGD, Adam, Linear, Module, Parameter, ReLU, Sequential, find_parameters
from minitorch.nn.functional import cross_entropy, log_softmax
from minitorch.nn.optim import adam_step, sgd_step

from .util import check_against_finite_differences, t64, values


def _np_log_softmax(x, axis):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


# ---------------------------------------------------------------- 2.9


@graded("2.9", points=2)
@given(
    rows=st.integers(1, 3),
    cols=st.integers(1, 4),
    axis=st.sampled_from([0, 1, -1]),
    scale=st.sampled_from([1.0, 100.0, 1000.0]),
    data=st.data(),
)
def test_log_softmax_matches_numpy_and_is_stable(rows, cols, axis, scale, data):
    """
    contract: Subtract the maximum ``m`` along ``axis`` first (keep the dims): ``z = x - m`` has a largest entry of 0, and ``z - log(sum(exp(z)))`` is the same value.
    """
    x = data.draw(values((rows, cols))) * scale
    got = log_softmax(minitorch.tensor(x, dtype="float32"), axis=axis).numpy()
    check(np.isfinite(got).all(), "2.9", "non-finite output (exp overflow?)", x=x, axis=axis)
    assert_close(
        got,
        _np_log_softmax(x.astype(np.float32), axis),
        "2.9",
        rtol=1e-4,
        atol=1e-4,
        x=x,
        axis=axis,
    )


@graded("2.9", points=1)
@settings(max_examples=10)
@given(data=st.data())
def test_log_softmax_gradient(data):
    """
    contract: ``m`` is a constant for the gradient (the result does not change when ``m`` does): take it from ``x.detach()``.
    """
    x = data.draw(values((2, 3)))
    w = data.draw(values((2, 3)))
    check_against_finite_differences("2.9", lambda t: log_softmax(t, axis=1) * t64(w), x, x=x)
    big = minitorch.tensor([[1000.0, 0.0]], requires_grad=True)
    log_softmax(big)[0, 1].backward()
    assert_close(big.grad.numpy(), [[-1.0, 1.0]], "2.9", x="[[1000, 0]]", output="[0, 1]")


# ---------------------------------------------------------------- 2.10


@graded("2.10", points=2)
@given(n=st.integers(1, 4), c=st.integers(2, 5), data=st.data())
def test_cross_entropy_value_and_gradient(n, c, data):
    x = data.draw(values((n, c))) * 5
    y = np.array(data.draw(st.lists(st.integers(0, c - 1), min_size=n, max_size=n)))
    logits = t64(x, requires_grad=True)
    loss = cross_entropy(logits, minitorch.tensor(y))
    check(
        loss.shape == (),
        "2.10",
        f"the loss must be 0-d, got shape {loss.shape}",
        value=loss.shape,
    )
    lsm = _np_log_softmax(x, 1)
    assert_close(loss.item(), -lsm[np.arange(n), y].mean(), "2.10", logits=x, targets=y)
    loss.backward()
    want = (np.exp(lsm) - np.eye(c)[y]) / n
    assert_close(logits.grad.numpy(), want, "2.10", logits=x, targets=y)


@graded("2.10", points=1)
def test_cross_entropy_bad_shapes():
    """
    contract: Raise ``OpError("cross_entropy", ...)`` when ``logits`` is not 2-D or ``targets`` is not of shape ``(N,)``, naming both shapes; also when ``targets`` is not an integer tensor or (eager tensors only) holds a class outside ``[0, C)``: a wrong target must not quietly give a loss.
    """
    assert_close(
        cross_entropy(minitorch.zeros(2, 2), minitorch.tensor([0, 1])).item(),
        np.log(2),
        "2.10",
        logits="zeros(2, 2)",
    )
    with pytest.raises(OpError, match=r"^cross_entropy: ") as e:
        cross_entropy(minitorch.zeros(3, 4), minitorch.tensor([0, 1]))
    check("(3, 4)" in str(e.value) and "(2,)" in str(e.value), "2.10",
          f"name both shapes, (3, 4) and (2,): got {e.value}")  # fmt: skip
    with pytest.raises(OpError, match=r"^cross_entropy: ") as e:
        cross_entropy(minitorch.zeros(4), minitorch.tensor([0]))
    check("(4,)" in str(e.value), "2.10", f"name the logits' shape (4,): got {e.value}")
    for targets in ([0, 3], [-1, 0], [0.0, 1.0]):  # outside [0, 3); not an integer tensor
        with pytest.raises(OpError, match=r"^cross_entropy: "):
            cross_entropy(minitorch.zeros(2, 3), minitorch.tensor(targets))


class _Traced(Tensor):
    """A tensor with a shape, a dtype and a device but no values, as chapter 5's traced ones:
    its type takes over dispatch, and each op on it only infers its result's spec."""

    def __init__(self, spec: Spec):  # no super().__init__: no data
        self._spec, self.device = spec, spec.device
        self.requires_grad, self.grad, self._node, self.name = False, None, None, None

    shape = property(lambda self: self._spec.shape)
    dtype = property(lambda self: self._spec.dtype)
    size = property(lambda self: self._spec.size)

    def numel(self) -> int:
        return self._spec.size

    @property
    def _data(self):
        raise _ReadValues("read the values of a traced tensor")

    def detach(self) -> Tensor:
        return _Traced(self._spec)

    @classmethod
    def __minitorch_dispatch__(cls, op, inputs: tuple, attrs: dict):
        specs = [x._spec if isinstance(x, _Traced) else Spec(x.shape, x.dtype, x.device)
                 for x in inputs]  # fmt: skip
        return cls(op.infer(*specs, **op.bind(attrs, specs)))


class _ReadValues(Exception):
    pass


@graded("2.10", points=1)
def test_cross_entropy_of_traced_tensors():
    """Eager tensors only: a traced target has no values to check; the one-hot classes are
    made on the logits' device (here cuda, which only infers specs: no kernel runs).

    contract: A tensor whose type defines ``__minitorch_dispatch__`` (chapter 5's traced tensors) is not eager: it has a shape, a dtype and a device but no values to read.
    """
    f64, i64 = minitorch.float64, minitorch.int64
    cases = [
        ("eager logits, traced targets", t64(np.zeros((2, 3))), _Traced(Spec((2,), i64))),
        ("traced cuda logits and targets", _Traced(Spec((2, 3), f64, "cuda")),
         _Traced(Spec((2,), i64, "cuda"))),
    ]  # fmt: skip
    for what, logits, targets in cases:
        try:
            loss = cross_entropy(logits, targets)
            got = (loss.shape, loss.dtype.name, loss.device)
        except _ReadValues as e:
            got = f"{e}: check the class range of eager tensors only"
        except OpError as e:
            got = f"OpError: {e}"
        check(got == ((), "float64", logits.device), "2.10",
              f"{what}: expected a 0-d float64 loss on {logits.device}, got {got}",
              value=text(got))  # fmt: skip


# ---------------------------------------------------------------- 2.11


class _Block(Module):
    def __init__(self):
        self.scale = Parameter([1.0])
        self.layers = [Linear(2, 2, seed=1), ReLU(), (Linear(2, 1, seed=2),)]
        self.table = {"emb": Parameter(np.zeros((3, 2)))}
        self.steps = 3
        self.buffer = minitorch.zeros(2)  # a plain tensor, not a parameter
        self._hidden = Parameter([0.0])


@graded("2.11", points=2)
def test_find_parameters_walks_modules_lists_and_dicts():
    """
    contract: a ``Module``: visit each attribute in ``vars(module)`` (insertion order) whose name does not start with ``_``, under ``name.attribute``;
    """
    net = Sequential(Linear(2, 3), ReLU(), Linear(3, 1))
    names = [n for n, _ in find_parameters(net)]
    want = ["layers.0.weight", "layers.0.bias", "layers.2.weight", "layers.2.bias"]
    check(names == want, "2.11", f"got {names}, expected {want}", value=text(names))
    block = _Block()
    names = [n for n, _ in find_parameters(block, "m")]
    want = [
        "m.scale",
        "m.layers.0.weight",
        "m.layers.0.bias",
        "m.layers.2.0.weight",
        "m.layers.2.0.bias",
        "m.table.emb",
    ]
    check(names == want, "2.11", f"got {names}, expected {want}", value=text(names))
    check(
        all(isinstance(p, Parameter) for _, p in find_parameters(block)),
        "2.11",
        "only Parameters may be returned",
    )
    top = [Linear(2, 1, seed=3), {"w": Parameter([1.0])}, (Parameter([2.0]),)]
    names = [n for n, _ in find_parameters(top)]
    want = ["0.weight", "0.bias", "1.w", "2.0"]
    check(names == want, "2.11", f"a list at the top level (prefix \"\"): got {names}, expected "
          f"{want}: names have no leading dot", value=text(names))  # fmt: skip
    top = {"w": Parameter([1.0]), "extra": [Parameter([2.0])]}
    names = [n for n, _ in find_parameters(top)]
    want = ["w", "extra.0"]
    check(names == want, "2.11", f"a dict at the top level (prefix \"\"): got {names}, expected "
          f"{want}: names have no leading dot", value=text(names))  # fmt: skip


@graded("2.11", points=1)
def test_module_parameters_zero_grad_and_train_eval():
    """
    contract: Keep duplicates (a shared parameter appears under each name): removing them is :meth:`Module.named_parameters`'s job.
    """
    shared = Linear(2, 2)
    net = Sequential(shared, ReLU(), shared)
    check(
        len(find_parameters(net)) == 4,
        "2.11",
        "a shared layer is found under each name",
        value=len(find_parameters(net)),
    )
    check(
        len(net.parameters()) == 2,
        "2.11",
        "parameters() lists each object once",
        value=len(net.parameters()),
    )
    net(minitorch.ones(1, 2)).sum().backward()
    check(all(p.grad is not None for p in net.parameters()), "2.11", "backward fills .grad")
    net.zero_grad()
    check(all(p.grad is None for p in net.parameters()), "2.11", "zero_grad clears .grad")
    net.eval()
    check(not any(m.training for m in net.modules()), "2.11", "eval() reaches sub-modules")


# ---------------------------------------------------------------- 2.12


def _new_and_inputs_kept(exercise, results, args, before):
    """A step returns new tensors and leaves every tensor it was given as it was."""
    given = [x for x in args if x is not None]
    kept = all(np.array_equal(x.numpy(), b, equal_nan=True) for x, b in zip(given, before))
    check(kept, exercise, "the step changed a tensor it was given: return new tensors and do "
          "not modify the inputs")  # fmt: skip
    fresh = not any(results[0] is x for x in given)  # the new parameter, at least
    check(fresh, exercise, "the step returned one of its inputs as the new parameter: return "
          "new tensors")  # fmt: skip


@graded("2.12", points=2)
@given(momentum=st.sampled_from([0.0, 0.5, 0.9]), wd=st.sampled_from([0.0, 0.1]), data=st.data())
def test_sgd_steps_match_numpy(momentum, wd, data):
    """
    contract: One SGD step with momentum: return ``(new_param, new_velocity)``.
    contract: Return new tensors; do not modify the inputs.
    """
    p0 = data.draw(values((2, 3)))
    grads = [data.draw(values((2, 3))) for _ in range(3)]
    p, v = t64(p0), None
    want, vel = p0.copy(), None
    for g in grads:
        args = (p, t64(g), v)
        before = [x.numpy().copy() for x in args if x is not None]
        p, v = sgd_step(*args, 0.1, momentum, wd)
        _new_and_inputs_kept("2.12", (p, v), args, before)
        g = g + wd * want
        vel = g if vel is None or not momentum else momentum * vel + g
        want = want - 0.1 * vel
    assert_close(p.numpy(), want, "2.12", momentum=momentum, weight_decay=wd, p0=p0)


@graded("2.12", points=1)
def test_sgd_optimizer_trains_and_checks_state_shapes():
    w = Parameter([[2.0, -1.0]])
    opt = SGD([w], lr=0.1, momentum=0.9)
    for _ in range(60):
        opt.zero_grad()
        (w * w).sum().backward()
        opt.step()
    check(
        float(abs(w).max().item()) < 0.1,
        "2.12",
        f"SGD should minimise w*w, got w = {w.numpy()}",
        value=w.numpy(),
        tol=(1e-4, 1e-5),  # all your code (MODE=integrated) may sum gradients in another order
    )

    class Net(Module):
        def __init__(self):
            self.fc = Linear(2, 2)

    net = Net()
    opt = SGD(net, lr=0.1, momentum=0.9)
    net.fc(minitorch.ones(1, 2)).sum().backward()
    opt.step()
    net.fc = Linear(2, 3)  # replaced with a different shape between steps
    net.fc(minitorch.ones(1, 2)).sum().backward()
    with pytest.raises(RuntimeError, match=r"fc.weight.*\(2, 3\).*\(2, 2\)") as e:
        opt.step()
    named = re.search(r"(fc.weight).*(\(2, 3\)).*(\(2, 2\))", str(e.value))
    check(
        named is not None,
        "2.12",
        "the error names the parameter and both shapes",
        value=text(named.groups() if named else None),
    )


# ---------------------------------------------------------------- 2.13


def _np_adam(p, grads, lr, b1, b2, eps, wd):
    m = v = np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        g = g + wd * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        p = p - lr * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps)
    return p


@graded("2.13", points=2)
@given(wd=st.sampled_from([0.0, 0.01]), eps=st.sampled_from([1e-8, 0.5]), data=st.data())
def test_adam_steps_match_numpy(wd, eps, data):
    """
    contract: One Adam step (Kingma & Ba, 2015): return ``(new_param, new_m, new_v)``.
    """
    p0 = data.draw(values((3,)))
    grads = [data.draw(values((3,))) for _ in range(4)]
    p, m, v = t64(p0), t64(np.zeros(3)), t64(np.zeros(3))
    for t, g in enumerate(grads, start=1):
        args = (p, t64(g), m, v)
        before = [x.numpy().copy() for x in args]
        p, m, v = adam_step(*args, t, 0.01, 0.9, 0.999, eps, wd)
        _new_and_inputs_kept("2.13", (p, m, v), args, before)
    want = _np_adam(p0, grads, 0.01, 0.9, 0.999, eps, wd)
    assert_close(p.numpy(), want, "2.13", weight_decay=wd, eps=eps, p0=p0)


@graded("2.13", points=3)
def test_mlp_learns_the_digits():
    from minitorch.nn.train import train_digits

    _, history = train_digits(epochs=10, show_progress=False)
    acc = history["test_acc"][-1]
    check(
        acc >= 0.95,
        "2.13",
        f"test accuracy {acc:.3f} after 10 epochs of Adam, expected >= 0.95",
        history=[round(a, 3) for a in history["test_acc"]],
    )
    check(
        history["train_loss"][-1] < history["train_loss"][0] / 3,
        "2.13",
        "the training loss should fall",
        losses=history["train_loss"],
    )
    # The optimizer state follows the parameters' shapes.
    opt = Adam([Parameter([1.0, 2.0])], lr=0.1)
    check(
        opt.defaults["betas"] == (0.9, 0.999), "2.13", "default betas", value=opt.defaults["betas"]
    )
