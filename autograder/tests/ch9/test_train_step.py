"""Graded tests, chapter 9 (train): functionalised steps (9.3, 9.4) and compiled == eager training."""

from __future__ import annotations

import warnings

import numpy as np
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

import minitorch
from autograder.harness import check, graded, text
from minitorch import nn
from minitorch.compile import step_outputs, write_back
from minitorch.nn import functional as F

from .train_util import batches, make_step, train


class _N:
    """A stand-in node (step_outputs only needs identity)."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"%{self.name}"


# ---------------------------------------------------------------- 9.3


@graded("9.3", points=2)
def test_last_write_wins_and_outputs_are_shared():
    """contract: ``node`` the new value (``None``: set to None
    contract: Return the pair ``(outputs, writes)``
    contract: ``outputs`` starts with ``leaves`` (in order)
    contract: only its **last** update counts
    contract: ``leaves`` and ``updates`` are read, not changed
    """
    loss, g1, g2, w2, v = (_N(n) for n in ("loss", "g1", "g2", "w2", "v"))
    w, b, state = minitorch.zeros(2), minitorch.zeros(2), {}
    updates = [
        (("grad", w, None), g1),
        (("grad", b, None), loss),  # a node that is already an output: reused
        (("grad", w, None), g2),  # backward twice: the last gradient counts
        (("data", w, None), w2),
        (("item", state, "velocity"), v),
        (("data", b, None), w2),  # the same node for two targets: one output
        (("grad", b, None), None),  # zero_grad after the step
    ]
    leaves, given = [loss], list(updates)
    outs, writes = step_outputs(leaves, updates)
    check(
        len(leaves) == 1
        and leaves[0] is loss
        and outs is not leaves
        and len(updates) == len(given)
        and all(a is b for a, b in zip(updates, given)),
        "9.3",
        "leaves and updates are read, not changed: outputs is a new list",
        value=text([leaves, len(updates), outs is leaves]),
    )
    check(
        outs == [loss, g2, w2, v],
        "9.3",
        "outputs: leaves, then each needed node once",
        value=text(outs),  # the stand-in nodes by name: %loss, %g2, ...
        got=outs,
    )
    got = [(t[0], t[1] is w, t[2], i) for t, i in writes]
    want = [
        ("grad", True, None, 1),
        ("grad", False, None, None),
        ("data", True, None, 2),
        ("item", False, "velocity", 3),
        ("data", False, None, 2),
    ]
    check(
        got == want,
        "9.3",
        "one write per target, its last update, first-seen order",
        value=text(got),
        got=got,
    )


@graded("9.3", points=1)
def test_targets_compare_by_identity_and_key():
    """contract: Two targets are the same when ``kind`` and ``key`` are equal"""
    a, b = minitorch.zeros(2), minitorch.zeros(2)  # equal values, different tensors
    s = {}
    n1, n2, n3, n4 = (_N(k) for k in "1234")
    updates = [
        (("grad", a, None), n1),
        (("grad", b, None), n2),
        (("item", s, "m"), n3),
        (("item", s, "v"), n4),
    ]
    outs, writes = step_outputs([], updates)
    check(
        len(writes) == 4 and outs == [n1, n2, n3, n4],
        "9.3",
        "four distinct targets",
        value=len(writes),
        got=outs,
    )
    outs, writes = step_outputs([n1, n1], [(("grad", a, None), n1)])
    check(outs == [n1, n1] and writes[0][1] == 0, "9.3", "reuse the first matching output")


# ---------------------------------------------------------------- 9.4


@graded("9.4", points=2)
def test_write_back_applies_each_kind():
    """contract: the same Parameter object stays in the model
    contract: Any other kind raises ``OpError("compile", ...)`` naming it
    """
    p = nn.Parameter(minitorch.tensor([1.0, 2.0]))
    q = nn.Parameter(minitorch.tensor([5.0]))
    q.grad = minitorch.tensor([9.0])
    state = {"velocity": None, "step": minitorch.ones(1)}
    new_p, g, v = minitorch.tensor([3.0, 4.0]), minitorch.tensor([0.5, 0.5]), minitorch.ones(2)
    obj, old = p, p.detach()  # shares p's old buffer: obj._data = value._data rebinds, not copies
    write_back(
        [
            (("data", p, None), 0),
            (("grad", p, None), 1),
            (("item", state, "velocity"), 2),
            (("grad", q, None), None),
            (("item", state, "step"), None),
        ],
        [new_p, g, v],
    )
    check(np.array_equal(old.numpy(), [1.0, 2.0]), "9.4",
          "obj._data = value._data: a tensor sharing the parameter's old buffer keeps its values",
          value=old.numpy())  # fmt: skip
    check("step" in state and state["step"] is None, "9.4",
          "an item written None is set to None (obj[key] = value), not deleted",
          value=text(repr(state.get("step", "deleted"))))  # fmt: skip
    check(
        obj is p and np.array_equal(p.numpy(), [3.0, 4.0]),
        "9.4",
        "the parameter's new data",
        value=p.numpy(),
    )
    check(isinstance(p, nn.Parameter) and p.requires_grad, "9.4", "the same Parameter object")
    check(p.grad is g, "9.4", "the gradient is the output tensor", got=p.grad)
    check(state["velocity"] is v, "9.4", "optimizer state item", got=state)
    check(q.grad is None, "9.4", "a None write clears .grad (zero_grad)", got=q.grad)
    check(
        np.array_equal(q.numpy(), [5.0]), "9.4", "an untouched parameter changed", value=q.numpy()
    )
    try:
        write_back([(("bogus", p, None), 0)], [new_p])
    except minitorch.OpError as e:
        check("bogus" in str(e) and e.op == "compile" and bool(e.hint), "9.4",
              'name the unknown kind in OpError("compile", ...), hinting the known kinds',
              error=str(e))  # fmt: skip
    else:
        check(False, "9.4", "an unknown kind must raise OpError")


# ---------------------------------------------------------------- compiled == eager


def _same_training(exercise, sizes, data, opt_kind="sgd", mode="default", **hyper):
    el, ep, eg, _ = train(sizes, data, False, opt_kind, **hyper)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # Adam: eager after the cache limit
        cl, cp, cg, f = train(sizes, data, True, opt_kind, mode=mode, **hyper)
    check(
        np.allclose(cl, el, rtol=1e-5, atol=1e-6),
        exercise,
        "the compiled step's losses differ from eager's",
        value=cl,
        tol=(1e-5, 1e-6),
        eager=el,
        compiled=cl,
    )
    for name, got, want in (("parameter", cp, ep), ("gradient", cg, eg)):
        for k, (a, b) in enumerate(zip(got, want)):
            check(
                np.allclose(a, b, rtol=1e-4, atol=1e-6),
                exercise,
                f"{name} {k} after {len(data)} steps differs from eager",
                value=a,
                tol=(1e-4, 1e-6),
                diff=float(np.abs(a - b).max()),
            )
    return f


@graded("9.4", points=3)
@settings(max_examples=6, phases=[Phase.generate])  # no shrinking: a failure is slow
@given(
    st.lists(st.integers(1, 9), min_size=2, max_size=4),
    st.integers(1, 6),
    st.sampled_from([0.0, 0.9]),
    st.sampled_from([0.0, 0.01]),
    st.integers(0, 2**16),
)
def test_compiled_sgd_training_equals_eager(sizes, batch, momentum, wd, seed):
    data = batches(seed, 4, batch, sizes[0], sizes[-1])
    f = _same_training("9.4", sizes, data, lr=0.1, momentum=momentum, weight_decay=wd)
    check(f.eager_reason is None, "9.4", "the step must run compiled", why=f.eager_reason)
    check(f.trace_count <= 2, "9.4", "parameters are inputs: no retrace per step", n=f.trace_count)


@graded("9.3", points=2)
def test_compiled_training_equals_eager_over_20_steps():
    data = batches(1, 20, 8, 6, 3)
    f = _same_training("9.3", (6, 12, 3), data, lr=0.2, momentum=0.9)
    check(
        len(f.entries) == 1,  # the momentum buffers exist (zeros) before the first step
        "9.3",
        "one graph for every step, the first included",
        value=len(f.entries),
    )


@graded("9.3", points=1)
def test_adam_compiles_and_stays_correct():
    data = batches(2, 5, 4, 5, 3)
    f = _same_training("9.3", (5, 7, 3), data, "adam", lr=0.01)
    check(
        f.eager_reason is None,
        "9.3",
        "Adam's step must run compiled",
        value=text(f.eager_reason),
        why=f.eager_reason,
    )


@graded("9.4", points=2)
def test_parameters_are_inputs_not_constants():
    model = nn.mlp([4, 3], seed=0)
    opt = nn.SGD(model, lr=0.1)
    f = minitorch.compile(make_step(model, opt))
    (x, y), (x2, y2) = batches(3, 2, 5, 4, 3)
    f(x, y)
    f(x, y)
    w = model.parameters()[0]
    w.assign_(minitorch.zeros(w.shape))  # changed outside the step
    with minitorch.no_grad():
        want = F.cross_entropy(model(x2), y2).item()
    loss = f(x2, y2).item()
    check(abs(loss - want) < 1e-5, "9.4", "the step must read the parameter's current value")
    check(
        f.trace_count == 1,  # the gradients missing on the first call are never read
        "9.4",
        "updating a parameter must not retrace",
        value=f.trace_count,
        n=f.trace_count,
    )


@graded("9.4", points=2)
def test_detach_no_grad_and_a_weight_used_twice():
    def run(compiled):
        minitorch.manual_seed(0)
        w = nn.Parameter(minitorch.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)))
        opt = nn.SGD([w], lr=0.05, momentum=0.5)
        seen = []

        def step(x):
            opt.zero_grad()
            h = (x @ w).tanh()
            with minitorch.no_grad():
                scale = (h * h).mean() + 1.0  # no gradient through this
            tied = h @ w.T  # w used a second time
            loss = (tied * tied).mean() * scale + (h.detach() * h).sum()
            loss.backward()
            opt.step()
            return loss

        f = minitorch.compile(step) if compiled else step
        rng = np.random.default_rng(4)
        for _ in range(4):
            seen.append(f(minitorch.tensor(rng.standard_normal((2, 4)).astype(np.float32))).item())
        if compiled:
            check(f.eager_reason is None, "9.4", "the step must run compiled", why=f.eager_reason)
        return seen, w.numpy(), w.grad.numpy()

    (el, ew, eg), (cl, cw, cg) = run(False), run(True)
    check(
        np.allclose(el, cl, rtol=1e-5),
        "9.4",
        "losses differ",
        value=cl,
        tol=(1e-5, 1e-8),
        eager=el,
        compiled=cl,
    )
    check(
        np.allclose(ew, cw, rtol=1e-4, atol=1e-6),
        "9.4",
        "the weight differs from eager",
        value=cw,
        tol=(1e-4, 1e-6),
    )
    check(
        np.allclose(eg, cg, rtol=1e-4, atol=1e-6),
        "9.4",
        "the gradient differs from eager",
        value=cg,
        tol=(1e-4, 1e-6),
    )


@graded("9.4", points=2)
def test_digits_loss_curves_agree_over_20_steps_mlp_and_cnn():
    from minitorch.fast.cnn import DigitsCNN
    from minitorch.fast.cnn import cross_entropy as cnn_loss
    from minitorch.nn.data import DataLoader, load_digits

    x_train, y_train, _, _ = load_digits(seed=0)
    models = {
        "mlp": (lambda: nn.mlp([64, 32, 10], seed=0), F.cross_entropy),
        "cnn": (lambda: DigitsCNN((4, 8), 16, seed=0), cnn_loss),
    }
    for name, (make, loss_fn) in models.items():
        curves = []
        for compiled in (False, True):
            model = make()
            opt = nn.SGD(model, lr=0.05, momentum=0.9)
            step = make_step(model, opt, loss_fn)
            f = minitorch.compile(step) if compiled else step
            loader = DataLoader(x_train[:640], y_train[:640], batch_size=32, seed=0)
            curves.append([f(x, y).item() for x, y in loader])
        check(
            len(curves[1]) == 20 and np.allclose(curves[0], curves[1], rtol=1e-5, atol=1e-6),
            "9.4",
            f"{name}: the compiled loss curve differs from eager's over 20 digits steps",
            value=curves[1],
            tol=(1e-5, 1e-6),
            eager=curves[0],
            compiled=curves[1],
        )
